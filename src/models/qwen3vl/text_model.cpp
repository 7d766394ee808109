#include "models/qwen3vl/text_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "io/manifest.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace h3 {

namespace {

const std::string kLanguageModel = "model.language_model";

// The checkpoint's tensors, checked against the shapes the config implies (io/manifest.h).
class CheckedCheckpoint {
 public:
  CheckedCheckpoint(const std::string& weights, const TextEncoderConfig& config) : ck_(Checkpoint::open(weights)) {
    for (const TensorSpec& s : text_encoder_manifest(config, /*with_vision=*/false)) shapes_[s.name] = s.shape;
  }

  Tensor get(const std::string& name) const {
    H3_CHECK(ck_.has(name), ck_.location(), ": tensor '", name, "' is missing");
    Tensor t = ck_.get(name);
    const Shape& want = shapes_.at(name);
    H3_CHECK(t.shape() == want, ck_.location(), ": tensor '", name, "' has shape ", shape_str(t.shape()),
             ", the config implies ", shape_str(want));
    H3_CHECK(dtype_is_float(t.dtype()), ck_.location(), ": tensor '", name, "' has dtype ", dtype_name(t.dtype()),
             ", expected a float dtype");
    return t;
  }

 private:
  Checkpoint ck_;
  std::map<std::string, Shape> shapes_;
};

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

std::unique_ptr<QwenTextModel> QwenTextModel::load(Backend& backend, const Component& text_encoder) {
  TextEncoderConfig config = load_text_encoder_config(text_encoder);
  H3_CHECK(!text_encoder.weights.empty(), text_encoder.name, ": the component has no weights");
  return load(backend, config, text_encoder.weights);
}

std::unique_ptr<QwenTextModel> QwenTextModel::load(Backend& backend, const TextEncoderConfig& config,
                                                   const std::string& weights, int64_t num_layers) {
  config.validate("text encoder config");
  H3_CHECK(num_layers >= 1 && num_layers <= kConditionerLayers, "the conditioner runs 1 to ", kConditionerLayers,
           " decoder layers, asked for ", num_layers);
  CheckedCheckpoint ck(weights, config);
  std::unique_ptr<QwenTextModel> m(new QwenTextModel(backend, config));
  const DType dt = backend.activation_dtype();
  auto up = [&](const std::string& name) { return backend.upload(ck.get(name), dt); };

  m->embed_tokens_ = up(kLanguageModel + ".embed_tokens.weight");
  m->layers_.reserve(num_layers);
  for (int64_t i = 0; i < num_layers; ++i) {
    const std::string p = layer_prefix(i);
    Layer l;
    l.input_norm = up(p + ".input_layernorm.weight");
    l.qkv = upload_stacked(backend,
                           {ck.get(p + ".self_attn.q_proj.weight"), ck.get(p + ".self_attn.k_proj.weight"),
                            ck.get(p + ".self_attn.v_proj.weight")},
                           dt);
    l.q_norm = up(p + ".self_attn.q_norm.weight");
    l.k_norm = up(p + ".self_attn.k_norm.weight");
    l.o = up(p + ".self_attn.o_proj.weight");
    l.post_norm = up(p + ".post_attention_layernorm.weight");
    l.gate_up = upload_stacked(backend, {ck.get(p + ".mlp.gate_proj.weight"), ck.get(p + ".mlp.up_proj.weight")}, dt);
    l.down = up(p + ".mlp.down_proj.weight");
    m->layers_.push_back(std::move(l));
  }
  m->inv_freq_ = torch_rope_inv_freq(config.text.rope_theta, config.text.head_dim);
  return m;
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

Tensor QwenTextModel::encode(const std::vector<int32_t>& ids) {
  const QwenTextConfig& t = config_.text;
  const int64_t n = static_cast<int64_t>(ids.size()), D = t.hidden_size;
  H3_CHECK(n > 0, "the conditioner needs at least one token, got an empty sequence");
  for (int64_t i = 0; i < n; ++i)
    H3_CHECK(ids[i] >= 0 && ids[i] < t.vocab_size, "token id ", ids[i], " at position ", i,
             " is outside the text encoder's vocabulary [0, ", t.vocab_size, ")");
  const DType act = backend_.activation_dtype();

  Tensor ids_host = Tensor::empty({n}, DType::I32);
  std::copy(ids.begin(), ids.end(), ids_host.ptr<int32_t>());
  Tensor x = backend_.empty({n, D}, act);
  backend_.gather_rows(embed_tokens_, backend_.upload(ids_host, DType::I32), x);

  MropePositions pos;
  pos.append_text(0, n);
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

  for (const Layer& layer : layers_) decoder_layer(layer, x, s);
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
