#include "models/qwen3vl/text_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/qwen3vl/checked_checkpoint.h"
#include "models/qwen3vl/vision_model.h"
#include "models/random_weights.h"
#include "util/cancel.h"
#include "util/error.h"

namespace h3 {

namespace {

const std::string kLanguageModel = "model.language_model";

// Host matrices [n_i, K] uploaded as one device matrix [Σ n_i, K], their rows stacked in order (one GEMM instead of
// several). Each part goes straight from the mapped checkpoint to the device; only device memory is copied.
Tensor upload_stacked(Backend& be, const std::vector<Tensor>& parts, DType dt) {
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.dim(0);
  Tensor fused = be.empty({rows, parts.front().dim(1)}, dt);
  int64_t at = 0;
  for (const Tensor& p : parts) {
    Tensor dev = be.upload(p, dt);
    Tensor dst = fused.slice(at, at + p.dim(0));
    be.convert(dev, dst);
    at += p.dim(0);
  }
  return fused;
}

std::string layer_prefix(int64_t i) { return cat(kLanguageModel, ".layers.", i); }

}  // namespace

namespace {

// The checkpoint names of the parts of a layer's four fused matrices, in QwenTextModel::Layer's order (qkv, o,
// gate_up, down): upload_stacked stacks them, block streaming copies them as row pieces.
const std::vector<std::vector<std::string>>& matrix_parts() {
  static const std::vector<std::vector<std::string>> parts = {
      {".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight"},
      {".self_attn.o_proj.weight"},
      {".mlp.gate_proj.weight", ".mlp.up_proj.weight"},
      {".mlp.down_proj.weight"}};
  return parts;
}

}  // namespace

QwenTextModel::QwenTextModel(Backend& backend, const TextEncoderConfig& config) : backend_(backend), config_(config) {}
QwenTextModel::~QwenTextModel() = default;

std::unique_ptr<QwenTextModel> QwenTextModel::load(Backend& backend, const Component& text_encoder,
                                                   std::optional<BlockStreaming> streaming) {
  TextEncoderConfig config = load_text_encoder_config(text_encoder);
  H3_CHECK(!text_encoder.weights.empty(), text_encoder.name, ": the component has no weights");
  return load(backend, config, text_encoder.weights, kConditionerLayers, streaming);
}

std::unique_ptr<QwenTextModel> QwenTextModel::load(Backend& backend, const TextEncoderConfig& config,
                                                   const std::string& weights, int64_t num_layers,
                                                   std::optional<BlockStreaming> streaming) {
  config.validate("text encoder config");
  H3_CHECK(num_layers >= 1 && num_layers <= kConditionerLayers, "the conditioner runs 1 to ", kConditionerLayers,
           " decoder layers, asked for ", num_layers);
  if (streaming) validate_block_streaming(*streaming, "the text encoder");
  auto ck = std::make_shared<const CheckedQwenCheckpoint>(weights, config, /*with_vision=*/false);
  std::unique_ptr<QwenTextModel> m(new QwenTextModel(backend, config));
  const DType dt = backend.activation_dtype();
  auto up = [&backend, ck, dt](const std::string& name) { return backend.upload(ck->get(name), dt); };
  // Layer i's four matrices as the resident load makes them.
  auto matrices = [&backend, ck, dt](int64_t i) {
    std::vector<Tensor> out;
    for (const std::vector<std::string>& names : matrix_parts()) {
      std::vector<Tensor> parts;
      for (const std::string& n : names) parts.push_back(ck->get(layer_prefix(i) + n));
      out.push_back(upload_stacked(backend, parts, dt));
    }
    return out;
  };

  m->embed_tokens_ = ck->get(kLanguageModel + ".embed_tokens.weight");
  m->layers_.reserve(num_layers);
  for (int64_t i = 0; i < num_layers; ++i) {
    const std::string p = layer_prefix(i);
    Layer l;
    l.input_norm = up(p + ".input_layernorm.weight");
    l.q_norm = up(p + ".self_attn.q_norm.weight");
    l.k_norm = up(p + ".self_attn.k_norm.weight");
    l.post_norm = up(p + ".post_attention_layernorm.weight");
    if (!streaming) {
      std::vector<Tensor> mats = matrices(i);
      l.qkv = mats[0];
      l.o = mats[1];
      l.gate_up = mats[2];
      l.down = mats[3];
    }
    m->layers_.push_back(std::move(l));
  }
  if (streaming) {
    // The Disk source reads the pieces' bytes through its own view of the same files (the checked checkpoint has
    // verified every tensor's shape: `matrices` reads them all for the PinnedHost copies; Disk checks them here).
    auto raw = std::make_shared<const Checkpoint>(Checkpoint::open(weights));
    auto describe = [ck, raw](int64_t i) {
      std::vector<StreamedTensor> tensors;
      for (const std::vector<std::string>& names : matrix_parts()) {
        StreamedTensor t;
        int64_t rows = 0, width = 0;
        for (const std::string& n : names) {
          const std::string name = layer_prefix(i) + n;
          const Tensor checked = ck->get(name);  // the manifest's shape check
          t.pieces.push_back({name, 0, checked.dim(0), rows});
          rows += checked.dim(0);
          width = checked.dim(1);
        }
        t.shape = {rows, width};
        tensors.push_back(std::move(t));
      }
      return tensors;
    };
    std::vector<int64_t> all;
    for (int64_t i = 0; i < num_layers; ++i) all.push_back(i);
    m->streamer_ = std::make_unique<BlockStreamer>(backend, *streaming, num_layers, describe, matrices, raw, all);
  }
  m->inv_freq_ = torch_rope_inv_freq(config.text.rope_theta, config.text.head_dim);
  return m;
}

const QwenTextModel::Layer& QwenTextModel::with_matrices(const Layer& layer, const std::vector<Tensor>& m,
                                                         Layer& out) {
  out = layer;
  out.qkv = m[0];
  out.o = m[1];
  out.gate_up = m[2];
  out.down = m[3];
  return out;
}

uint64_t QwenTextModel::device_weight_bytes() const {
  uint64_t n = streamer_ ? streamer_->device_bytes() : 0;
  for (const Layer& l : layers_)
    for (const Tensor* t : {&l.input_norm, &l.qkv, &l.q_norm, &l.k_norm, &l.o, &l.post_norm, &l.gate_up, &l.down})
      n += t->defined() ? t->nbytes() : 0;
  return n;
}

std::optional<BlockStreamingStats> QwenTextModel::streaming_stats() const {
  if (!streamer_) return std::nullopt;
  return streamer_->stats();
}

uint64_t QwenTextModel::streaming_host_bytes() const { return streamer_ ? streamer_->host_bytes() : 0; }

std::unique_ptr<QwenTextModel> QwenTextModel::random(Backend& backend, const TextEncoderConfig& config, uint64_t seed,
                                                     int64_t num_layers, std::optional<BlockStreaming> streaming) {
  config.validate("random text encoder config");
  H3_CHECK(num_layers >= 1 && num_layers <= kConditionerLayers, "the conditioner runs 1 to ", kConditionerLayers,
           " decoder layers, asked for ", num_layers);
  if (streaming) validate_block_streaming(*streaming, "the random text encoder");
  const QwenTextConfig& t = config.text;
  const int64_t D = t.hidden_size, Dh = t.head_dim, Hq = t.num_attention_heads, Hkv = t.num_key_value_heads;
  const int64_t I = t.intermediate_size;
  const DType dt = backend.activation_dtype();
  const std::vector<Shape> shapes{{(Hq + 2 * Hkv) * Dh, D}, {D, Hq * Dh}, {2 * I, D}, {D, I}};
  // Layer i's four matrices (the same values whenever they are made: every tensor's stream is its name's).
  auto matrices = [&backend, seed, dt, shapes](int64_t i) {
    RandomWeights rw(backend, seed);
    const std::string p = layer_prefix(i);
    const char* names[] = {".qkv", ".o_proj", ".gate_up", ".down_proj"};
    std::vector<Tensor> out;
    for (size_t k = 0; k < shapes.size(); ++k) out.push_back(rw.matrix(p + names[k], shapes[k], dt));
    return out;
  };
  RandomWeights rw(backend, seed);
  std::unique_ptr<QwenTextModel> m(new QwenTextModel(backend, config));
  m->embed_tokens_ = backend.download(rw.normal("embed_tokens", {t.vocab_size, D}, dt, 0.f, 1.f));
  for (int64_t i = 0; i < num_layers; ++i) {
    const std::string p = layer_prefix(i);
    Layer l;
    l.input_norm = rw.norm(p + ".input_layernorm", {D}, dt);
    l.q_norm = rw.norm(p + ".q_norm", {Dh}, dt);
    l.k_norm = rw.norm(p + ".k_norm", {Dh}, dt);
    l.post_norm = rw.norm(p + ".post_attention_layernorm", {D}, dt);
    if (!streaming) {
      const std::vector<Tensor> mats = matrices(i);
      l.qkv = mats[0];
      l.o = mats[1];
      l.gate_up = mats[2];
      l.down = mats[3];
    }
    m->layers_.push_back(std::move(l));
  }
  if (streaming) {
    auto describe = [shapes](int64_t) {
      std::vector<StreamedTensor> tensors;
      for (const Shape& s : shapes) tensors.push_back({s, {}});
      return tensors;
    };
    std::vector<int64_t> all;
    for (int64_t i = 0; i < num_layers; ++i) all.push_back(i);
    m->streamer_ = std::make_unique<BlockStreamer>(backend, *streaming, num_layers, describe, matrices, nullptr, all);
  }
  m->inv_freq_ = torch_rope_inv_freq(t.rope_theta, t.head_dim);
  return m;
}

uint64_t QwenTextModel::resident_bytes(const TextEncoderConfig& config, DType dt, int64_t num_layers) {
  const QwenTextConfig& t = config.text;
  const uint64_t D = t.hidden_size, Dh = t.head_dim, Hq = t.num_attention_heads, Hkv = t.num_key_value_heads;
  const uint64_t I = t.intermediate_size;
  const uint64_t per_layer = 2 * D + 2 * Dh + (Hq + 2 * Hkv) * Dh * D + D * Hq * Dh + 3 * I * D;
  return per_layer * static_cast<uint64_t>(num_layers) * dtype_size(dt);
}

void QwenTextModel::set_mlp_row_chunk(int64_t rows) {
  H3_CHECK(rows > 0, "the MLP row chunk must be positive, got ", rows);
  mlp_row_chunk_ = rows;
}

// Activation buffers shared by all layers of one encode() call.
struct QwenTextModel::Scratch {
  Tensor normed;    // [n, hidden]; also the o_proj output
  Tensor qkv;       // [n, (heads + 2·kv_heads)·head_dim]
  Tensor attn;      // [n, heads·head_dim]
  Tensor gate_up;   // [chunk, 2·intermediate]
  Tensor act;       // [chunk, intermediate]
  Tensor mlp_out;   // [chunk, hidden]
  AttentionSpec spec;
};

Tensor QwenTextModel::embed(const std::vector<int32_t>& ids, const std::vector<VisionRows>& vision) {
  const int64_t n = static_cast<int64_t>(ids.size()), D = config_.text.hidden_size;
  // The prompt's embedding rows, gathered on the host and uploaded in the activation dtype.
  Tensor rows = Tensor::empty({n, D}, embed_tokens_.dtype());
  const size_t row_bytes = static_cast<size_t>(D) * dtype_size(embed_tokens_.dtype());
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(static_cast<char*>(rows.data()) + i * row_bytes,
                static_cast<const char*>(embed_tokens_.data()) + ids[i] * row_bytes, row_bytes);
  Tensor x = backend_.upload(rows, backend_.activation_dtype());
  for (const VisionRows& v : vision) backend_.scatter_rows(v.features->embeds, v.rows, x);
  return x;
}

namespace {

// The positions of the `token_id` tokens in `ids`.
std::vector<int32_t> positions_of(const std::vector<int32_t>& ids, int64_t token_id) {
  std::vector<int32_t> at;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == token_id) at.push_back(static_cast<int32_t>(i));
  return at;
}

// One modality's pads (`name`: "image" or "video") checked against its vision features: one row per pad, DeepStack
// rows to match.
void check_vision_rows(const char* name, const std::vector<int32_t>& pads, const VisionFeatures& v, int64_t hidden) {
  int64_t tokens = 0;
  for (const ImageGrid& g : v.grids) tokens += g.tokens(v.merge_size);
  H3_CHECK(v.embeds.ndim() == 2 && v.embeds.dim(0) == tokens && v.embeds.dim(1) == hidden, "the ", name,
           " features ", v.embeds.str(), " do not match their grids (", tokens, " rows of ", hidden, ")");
  for (const Tensor& ds : v.deepstack)
    H3_CHECK(ds.shape() == v.embeds.shape(), "a DeepStack feature ", ds.str(), " does not match the ", name,
             " rows ", v.embeds.str());
  H3_CHECK(static_cast<int64_t>(pads.size()) == tokens, "the presentation has ", pads.size(), " <|", name,
           "_pad|> tokens but the ", name, "s give ", tokens, " rows");
}

}  // namespace

Tensor QwenTextModel::encode(const std::vector<int32_t>& ids, const VisionFeatures* images,
                             const VisionFeatures* videos) {
  const QwenTextConfig& t = config_.text;
  const int64_t n = static_cast<int64_t>(ids.size()), D = t.hidden_size;
  H3_CHECK(n > 0, "the conditioner needs at least one token, got an empty sequence");
  for (int64_t i = 0; i < n; ++i)
    H3_CHECK(ids[i] >= 0 && ids[i] < t.vocab_size, "token id ", ids[i], " at position ", i,
             " is outside the text encoder's vocabulary [0, ", t.vocab_size, ")");
  const DType act = backend_.activation_dtype();

  MropePositions pos;
  std::vector<VisionRows> vision;  // the modalities present, images first
  // Without any vision features the pads are embedded as the tokens they are (a text-only run of the same ids).
  const bool multimodal = images || videos;
  const std::vector<int32_t> image_pads = positions_of(ids, config_.image_token_id);
  const std::vector<int32_t> video_pads = positions_of(ids, config_.video_token_id);
  const struct {
    const char* name;
    const VisionFeatures* features;
    const std::vector<int32_t>& pads;
  } modalities[] = {{"image", images, image_pads}, {"video", videos, video_pads}};
  for (const auto& m : modalities)
    H3_CHECK(!multimodal || m.features || m.pads.empty(), "token ", m.pads.empty() ? 0 : m.pads.front(), " is a <|",
             m.name, "_pad|> but no ", m.name, " features were given");
  for (const auto& m : modalities) {
    if (!m.features) continue;
    check_vision_rows(m.name, m.pads, *m.features, D);
    Tensor host = Tensor::empty({static_cast<int64_t>(m.pads.size())}, DType::I32);
    std::copy(m.pads.begin(), m.pads.end(), host.ptr<int32_t>());
    vision.push_back({m.features, backend_.upload(host, DType::I32)});
  }
  if (multimodal) {
    H3_CHECK(!images || !videos || images->merge_size == videos->merge_size,
             "the image and the video features have different merge sizes (", images ? images->merge_size : 0, " and ",
             videos ? videos->merge_size : 0, ")");
    static const std::vector<ImageGrid> none;
    pos = multimodal_positions(ids, static_cast<int32_t>(config_.image_token_id), images ? images->grids : none,
                               static_cast<int32_t>(config_.video_token_id), videos ? videos->grids : none,
                               images ? images->merge_size : videos->merge_size);
  } else {
    pos.append_text(0, n);
  }
  Tensor x = embed(ids, vision);
  RopeTables rope = mrope_tables(pos, inv_freq_, t.mrope_section);
  const Tensor cos = backend_.upload(rope.cos, act), sin = backend_.upload(rope.sin, act);

  const int64_t Hq = t.num_attention_heads, Hkv = t.num_key_value_heads, Dh = t.head_dim;
  const int64_t chunk = std::min(n, mlp_row_chunk_);
  Scratch s;
  s.normed = backend_.empty({n, D}, act);
  s.qkv = backend_.empty({n, (Hq + 2 * Hkv) * Dh}, act);
  s.attn = backend_.empty({n, Hq * Dh}, act);
  s.gate_up = backend_.empty({chunk, 2 * t.intermediate_size}, act);
  s.act = backend_.empty({chunk, t.intermediate_size}, act);
  s.mlp_out = backend_.empty({chunk, D}, act);
  s.spec.heads_q = static_cast<int>(Hq);
  s.spec.heads_kv = static_cast<int>(Hkv);
  s.spec.head_dim = static_cast<int>(Dh);
  s.spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  s.spec.causal = true;
  s.spec.qk_norm = true;
  s.spec.qk_norm_eps = static_cast<float>(t.rms_norm_eps);
  s.spec.rotary_dim = static_cast<int>(Dh);
  s.spec.cos = &cos;
  s.spec.sin = &sin;

  // x[pad rows] += DeepStack feature l of the pads' own modality, after decoder layer l (the reference adds one joint
  // tensor of each row's own modality's feature, the same elementwise sums).
  std::vector<Tensor> visual;
  for (const VisionRows& v : vision)
    visual.push_back(v.features->deepstack.empty() ? Tensor() : backend_.empty({v.rows.numel(), D}, act));
  std::vector<int64_t> order;
  for (size_t l = 0; l < layers_.size(); ++l) order.push_back(static_cast<int64_t>(l));
  if (streamer_) streamer_->begin_pass(order);
  Layer streamed;  // a streamed layer: its resident norms and its slot's matrices
  for (size_t l = 0; l < layers_.size(); ++l) {
    throw_if_cancelled();  // between decoder layers
    decoder_layer(streamer_ ? with_matrices(layers_[l], streamer_->acquire(l), streamed) : layers_[l], x, s);
    if (streamer_) streamer_->release(l);
    for (size_t m = 0; m < vision.size(); ++m) {
      if (l >= vision[m].features->deepstack.size()) continue;
      backend_.gather_rows(x, vision[m].rows, visual[m]);
      backend_.residual_add(visual[m], vision[m].features->deepstack[l], nullptr);
      backend_.scatter_rows(visual[m], vision[m].rows, x);
    }
  }
  return backend_.download(x).to(DType::F32);
}

// x = x + o_proj(attention(qkv(RMSNorm(x))));  x = x + down(up · silu(gate))(RMSNorm(x))
void QwenTextModel::decoder_layer(const Layer& l, Tensor& x, Scratch& s) {
  const float eps = static_cast<float>(config_.text.rms_norm_eps);
  backend_.rms_norm(x, &l.input_norm, eps, s.normed);
  backend_.linear(s.normed, l.qkv, nullptr, s.qkv);
  s.spec.q_norm_weight = &l.q_norm;
  s.spec.k_norm_weight = &l.k_norm;
  backend_.self_attention(s.qkv, s.spec, s.attn);
  backend_.linear(s.attn, l.o, nullptr, s.normed);
  backend_.residual_add(x, s.normed, nullptr);

  backend_.rms_norm(x, &l.post_norm, eps, s.normed);
  const int64_t n = x.dim(0), chunk = s.gate_up.dim(0);
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t rows = std::min(chunk, n - r0);
    Tensor gate_up = s.gate_up.slice(0, rows), act = s.act.slice(0, rows), out = s.mlp_out.slice(0, rows);
    backend_.linear(s.normed.slice(r0, r0 + rows), l.gate_up, nullptr, gate_up);
    backend_.swiglu(gate_up, /*value_first=*/false, act);  // [gate | up]: act = up · silu(gate)
    backend_.linear(act, l.down, nullptr, out);
    Tensor xs = x.slice(r0, r0 + rows);
    backend_.residual_add(xs, out, nullptr);
  }
}

}  // namespace h3
