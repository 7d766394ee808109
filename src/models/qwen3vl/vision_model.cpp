#include "models/qwen3vl/vision_model.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "models/qwen3vl/checked_checkpoint.h"
#include "models/qwen3vl/rope.h"
#include "models/random_weights.h"
#include "util/cancel.h"
#include "util/env.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace h3 {

namespace {

const std::string kVisual = "model.visual";
// Every LayerNorm of the tower (blocks and mergers): transformers' Qwen3VLVisionBlock / Qwen3VLVisionPatchMerger fix
// eps = 1e-6 in code; no config names it.
constexpr float kLayerNormEps = 1e-6f;

std::string block_prefix(int64_t i) { return cat(kVisual, ".blocks.", i); }

float round_to(DType dt, float v) {
  switch (dt) {
    case DType::BF16: return round_bf16(v);
    case DType::F16: return round_f16(v);
    default: return v;
  }
}

}  // namespace

std::vector<float> torch_linspace(float start, float end, int64_t n) {
  H3_CHECK(n >= 1, "linspace needs at least one point, got ", n);
  if (n == 1) return {start};
  const float step = (end - start) / static_cast<float>(n - 1);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = i < n / 2 ? std::fma(step, static_cast<float>(i), start)
                     : std::fma(-step, static_cast<float>(n - 1 - i), end);
  return v;
}

Tensor round_position_table(const Tensor& table, DType dt) {
  H3_CHECK(table.ndim() == 2 && table.dim(0) > 0 && dtype_is_float(table.dtype()),
           "position embedding: the table must be a float [positions, hidden] matrix, got ", table.str());
  Tensor tab = table.to(DType::F32);
  float* T = tab.ptr<float>();
  parallel_for(0, tab.numel(), 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) T[i] = round_to(dt, T[i]);
  });
  return tab;
}

namespace {

// One temporal block of a grid's position rows (merge-block order), from a table round_position_table made.
Tensor interpolate_block(const Tensor& rounded, int64_t h, int64_t w, int64_t merge_size, DType dt) {
  H3_CHECK(h > 0 && w > 0 && h % merge_size == 0 && w % merge_size == 0, "position embedding: grid (", h, ", ", w,
           ") must be positive with h and w multiples of ", merge_size);
  const int64_t C = rounded.dim(1);
  const int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(rounded.dim(0))));  // int(n ** 0.5)
  const float* T = rounded.ptr<float>();
  const std::vector<float> ys = torch_linspace(0.f, static_cast<float>(side - 1), h);
  const std::vector<float> xs = torch_linspace(0.f, static_cast<float>(side - 1), w);
  Tensor out = Tensor::empty({h * w, C}, DType::F32);
  float* O = out.ptr<float>();
  const int64_t m = merge_size;
  parallel_for(0, h * w, 64, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t i = k / w, j = k % w;
      const int64_t y0 = static_cast<int64_t>(ys[i]), y1 = std::min(y0 + 1, side - 1);
      const float dy = ys[i] - static_cast<float>(y0);
      const int64_t x0 = static_cast<int64_t>(xs[j]), x1 = std::min(x0 + 1, side - 1);
      const float dx = xs[j] - static_cast<float>(x0);
      const float w00 = round_to(dt, (1.f - dy) * (1.f - dx)), w01 = round_to(dt, (1.f - dy) * dx);
      const float w10 = round_to(dt, dy * (1.f - dx)), w11 = round_to(dt, dy * dx);
      const float* p00 = T + (y0 * side + x0) * C;
      const float* p01 = T + (y0 * side + x1) * C;
      const float* p10 = T + (y1 * side + x0) * C;
      const float* p11 = T + (y1 * side + x1) * C;
      // Raster position (i, j) lands in merge-block order: block (i / m, j / m), then (i % m, j % m) inside it.
      const int64_t row = ((i / m) * (w / m) + j / m) * m * m + (i % m) * m + j % m;
      float* o = O + row * C;
      for (int64_t c = 0; c < C; ++c) {
        float v = round_to(dt, round_to(dt, p00[c] * w00) + round_to(dt, p01[c] * w01));
        v = round_to(dt, v + round_to(dt, p10[c] * w10));
        o[c] = round_to(dt, v + round_to(dt, p11[c] * w11));
      }
    }
  });
  return out;
}

// Each grid's block repeated for its temporal blocks, grid after grid.
Tensor stack_blocks(const std::vector<ImageGrid>& grids, const std::function<const Tensor&(const ImageGrid&)>& block,
                    int64_t C) {
  int64_t rows = 0;
  for (const ImageGrid& g : grids) rows += g.patches();
  Tensor out = Tensor::empty({rows, C}, DType::F32);
  float* O = out.ptr<float>();
  for (const ImageGrid& g : grids) {
    H3_CHECK(g.t > 0, "position embedding: grid (", g.t, ", ", g.h, ", ", g.w, ") has no temporal block");
    const Tensor& b = block(g);
    for (int64_t t = 0; t < g.t; ++t) O = std::copy_n(b.ptr<float>(), b.numel(), O);
  }
  return out;
}

}  // namespace

Tensor interpolate_position_embedding(const Tensor& table, const std::vector<ImageGrid>& grids, int64_t merge_size,
                                      DType dt) {
  const Tensor rounded = round_position_table(table, dt);
  Tensor block;
  return stack_blocks(
      grids,
      [&](const ImageGrid& g) -> const Tensor& {
        block = interpolate_block(rounded, g.h, g.w, merge_size, dt);
        return block;
      },
      table.dim(1));
}

Tensor QwenVisionModel::position_rows(const std::vector<ImageGrid>& grids) {
  const DType act = backend_.activation_dtype();
  const int64_t m = config_.vision.spatial_merge_size;
  // H3_DISABLE_VISION_POSITION_CACHE=1: the exact twin, everything recomputed from the checkpoint's table per call.
  if (env_flag("H3_DISABLE_VISION_POSITION_CACHE")) return interpolate_position_embedding(pos_table_, grids, m, act);
  if (!pos_rounded_.defined()) pos_rounded_ = round_position_table(pos_table_, act);
  return stack_blocks(
      grids,
      [&](const ImageGrid& g) -> const Tensor& {
        for (auto it = pos_blocks_.begin(); it != pos_blocks_.end(); ++it)
          if (it->first == std::pair{g.h, g.w}) {
            pos_blocks_.splice(pos_blocks_.begin(), pos_blocks_, it);
            return pos_blocks_.front().second;
          }
        pos_blocks_.emplace_front(std::pair{g.h, g.w}, interpolate_block(pos_rounded_, g.h, g.w, m, act));
        if (pos_blocks_.size() > kPositionBlocksCached) pos_blocks_.pop_back();
        return pos_blocks_.front().second;
      },
      pos_table_.dim(1));
}

std::unique_ptr<QwenVisionModel> QwenVisionModel::load(Backend& backend, const Component& text_encoder) {
  TextEncoderConfig config = load_text_encoder_config(text_encoder);
  H3_CHECK(!text_encoder.weights.empty(), text_encoder.name, ": the component has no weights");
  return load(backend, config, text_encoder.weights);
}

std::unique_ptr<QwenVisionModel> QwenVisionModel::load(Backend& backend, const TextEncoderConfig& config,
                                                       const std::string& weights) {
  config.validate("text encoder config");
  config.validate_vision("text encoder config");
  const QwenVisionConfig& v = config.vision;
  CheckedQwenCheckpoint ck(weights, config, /*with_vision=*/true);
  std::unique_ptr<QwenVisionModel> m(new QwenVisionModel(backend, config));
  const DType dt = backend.activation_dtype();
  auto up = [&](const std::string& name) { return backend.upload(ck.get(name), dt); };

  const Tensor patch = ck.get(kVisual + ".patch_embed.proj.weight");  // [hidden, 3, tp, p, p]: a [hidden, 3·tp·p·p] GEMM
  m->patch_w_ = backend.upload(patch.reshape({v.hidden_size, patch.numel() / v.hidden_size}), dt);
  m->patch_b_ = up(kVisual + ".patch_embed.proj.bias");
  m->pos_table_ = ck.get(kVisual + ".pos_embed.weight");
  for (int64_t i = 0; i < v.depth; ++i) {
    const std::string p = block_prefix(i);
    m->blocks_.push_back({up(p + ".norm1.weight"), up(p + ".norm1.bias"), up(p + ".attn.qkv.weight"),
                          up(p + ".attn.qkv.bias"), up(p + ".attn.proj.weight"), up(p + ".attn.proj.bias"),
                          up(p + ".norm2.weight"), up(p + ".norm2.bias"), up(p + ".mlp.linear_fc1.weight"),
                          up(p + ".mlp.linear_fc1.bias"), up(p + ".mlp.linear_fc2.weight"),
                          up(p + ".mlp.linear_fc2.bias")});
  }
  auto merger = [&](const std::string& p) {
    return Merger{up(p + ".norm.weight"), up(p + ".norm.bias"), up(p + ".linear_fc1.weight"),
                  up(p + ".linear_fc1.bias"), up(p + ".linear_fc2.weight"), up(p + ".linear_fc2.bias")};
  };
  m->merger_ = merger(kVisual + ".merger");
  for (size_t k = 0; k < v.deepstack_visual_indexes.size(); ++k)
    m->deepstack_.push_back(merger(cat(kVisual, ".deepstack_merger_list.", k)));
  m->derive_constants();
  return m;
}

std::unique_ptr<QwenVisionModel> QwenVisionModel::random(Backend& backend, const TextEncoderConfig& config,
                                                         uint64_t seed) {
  config.validate("random text encoder config");
  config.validate_vision("random text encoder config");
  const QwenVisionConfig& v = config.vision;
  const int64_t C = v.hidden_size, I = v.intermediate_size, O = v.out_hidden_size;
  const int64_t K = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  const int64_t M = C * v.spatial_merge_size * v.spatial_merge_size;
  RandomWeights rw(backend, seed);
  std::unique_ptr<QwenVisionModel> m(new QwenVisionModel(backend, config));
  const DType dt = backend.activation_dtype();
  m->patch_w_ = rw.matrix(kVisual + ".patch_embed.proj.weight", {C, K}, dt);
  m->patch_b_ = rw.bias(kVisual + ".patch_embed.proj.bias", {C}, dt);
  m->pos_table_ = backend.download(rw.normal(kVisual + ".pos_embed.weight", {v.num_position_embeddings, C}, dt, 0.f,
                                             1.f));
  for (int64_t i = 0; i < v.depth; ++i) {
    const std::string p = block_prefix(i);
    m->blocks_.push_back({rw.norm(p + ".norm1.weight", {C}, dt), rw.bias(p + ".norm1.bias", {C}, dt),
                          rw.matrix(p + ".attn.qkv.weight", {3 * C, C}, dt), rw.bias(p + ".attn.qkv.bias", {3 * C}, dt),
                          rw.matrix(p + ".attn.proj.weight", {C, C}, dt), rw.bias(p + ".attn.proj.bias", {C}, dt),
                          rw.norm(p + ".norm2.weight", {C}, dt), rw.bias(p + ".norm2.bias", {C}, dt),
                          rw.matrix(p + ".mlp.linear_fc1.weight", {I, C}, dt),
                          rw.bias(p + ".mlp.linear_fc1.bias", {I}, dt),
                          rw.matrix(p + ".mlp.linear_fc2.weight", {C, I}, dt),
                          rw.bias(p + ".mlp.linear_fc2.bias", {C}, dt)});
  }
  // The final merger normalizes each patch row (width C), the DeepStack mergers the grouped rows (width M).
  auto merger = [&](const std::string& p, int64_t norm_width) {
    return Merger{rw.norm(p + ".norm.weight", {norm_width}, dt), rw.bias(p + ".norm.bias", {norm_width}, dt),
                  rw.matrix(p + ".linear_fc1.weight", {M, M}, dt), rw.bias(p + ".linear_fc1.bias", {M}, dt),
                  rw.matrix(p + ".linear_fc2.weight", {O, M}, dt), rw.bias(p + ".linear_fc2.bias", {O}, dt)};
  };
  m->merger_ = merger(kVisual + ".merger", C);
  for (size_t k = 0; k < v.deepstack_visual_indexes.size(); ++k)
    m->deepstack_.push_back(merger(cat(kVisual, ".deepstack_merger_list.", k), M));
  m->derive_constants();
  return m;
}

void QwenVisionModel::derive_constants() {
  const QwenVisionConfig& v = config_.vision;
  tanh_gelu_ = v.hidden_act == "gelu_pytorch_tanh";
  inv_freq_ = torch_rope_inv_freq(v.rope_theta, v.hidden_size / v.num_heads / 2);
}

uint64_t QwenVisionModel::resident_bytes(const TextEncoderConfig& config, DType dt) {
  const QwenVisionConfig& v = config.vision;
  const uint64_t C = v.hidden_size, I = v.intermediate_size, O = v.out_hidden_size;
  const uint64_t K = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  const uint64_t M = C * v.spatial_merge_size * v.spatial_merge_size;
  const uint64_t block = 4 * C + 3 * C * C + 3 * C + C * C + C + 2 * I * C + I + C;
  const uint64_t mlp = M * M + M + O * M + O;  // a merger's two linears
  const uint64_t total = C * K + C + v.depth * block + (2 * C + mlp) +
                         v.deepstack_visual_indexes.size() * (2 * M + mlp);
  return total * dtype_size(dt);
}

// Activation buffers shared by all blocks of one encode() call.
struct QwenVisionModel::Scratch {
  Tensor normed;  // [N, hidden]; also the attention projection's and the MLP's output
  Tensor qkv;     // [N, 3·hidden]
  Tensor attn;    // [N, hidden]
  Tensor mlp;     // [N, intermediate]
  AttentionSpec spec;
};

VisionFeatures QwenVisionModel::encode(const QwenVisionInputs& in, VisionStages* stages) {
  const QwenVisionConfig& v = config_.vision;
  const int64_t C = v.hidden_size, m = v.spatial_merge_size, Dh = C / v.num_heads;
  const int64_t K = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  H3_CHECK(!in.grids.empty(), "the vision tower needs at least one image");
  int64_t N = 0;
  for (size_t k = 0; k < in.grids.size(); ++k) {
    const ImageGrid& g = in.grids[k];
    H3_CHECK(g.t > 0 && g.h > 0 && g.w > 0 && g.h % m == 0 && g.w % m == 0, "vision input ", k + 1, " has grid (",
             g.t, ", ", g.h, ", ", g.w, "); its sides must be positive multiples of the merge size ", m);
    N += g.patches();
  }
  const Tensor& px = in.pixel_values;
  H3_CHECK(px.device() == Device::CPU && dtype_is_float(px.dtype()) && px.ndim() == 2 && px.dim(0) == N &&
               px.dim(1) == K,
           "the vision tower's pixel rows must be a host float [", N, ", ", K, "] matrix for these grids, got ",
           px.str());
  const DType act = backend_.activation_dtype();

  Tensor x = backend_.empty({N, C}, act);
  backend_.linear(backend_.upload(px, act), patch_w_, &patch_b_, x);
  if (stages) stages->patch_embed = backend_.download(x).to(DType::F32);
  backend_.residual_add(x, backend_.upload(position_rows(in.grids), act), nullptr);
  if (stages) stages->block_input = backend_.download(x).to(DType::F32);

  // The rotary runs in float32 in the reference (apply_rotary_pos_emb_vision), so its tables stay F32 on every
  // backend.
  const RopeTables rope = vision_rope_tables(in.grids, m, inv_freq_);
  const Tensor cos = backend_.upload(rope.cos, DType::F32), sin = backend_.upload(rope.sin, DType::F32);
  Scratch s;
  s.normed = backend_.empty({N, C}, act);
  s.qkv = backend_.empty({N, 3 * C}, act);
  s.attn = backend_.empty({N, C}, act);
  s.mlp = backend_.empty({N, v.intermediate_size}, act);
  s.spec.heads_q = s.spec.heads_kv = static_cast<int>(v.num_heads);
  s.spec.head_dim = static_cast<int>(Dh);
  s.spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  s.spec.rotary_dim = static_cast<int>(Dh);
  s.spec.cos = &cos;
  s.spec.sin = &sin;
  s.spec.segments = {0};  // every temporal block of every image is its own window
  for (const ImageGrid& g : in.grids)
    for (int64_t t = 0; t < g.t; ++t) s.spec.segments.push_back(s.spec.segments.back() + g.h * g.w);

  VisionFeatures f;
  f.grids = in.grids;
  f.merge_size = m;
  const std::vector<int64_t>& taps = v.deepstack_visual_indexes;
  for (int64_t i = 0; i < v.depth; ++i) {
    throw_if_cancelled();  // between vision blocks
    block(blocks_[i], x, s);
    if (stages) stages->blocks.push_back(backend_.download(x).to(DType::F32));
    const auto tap = std::find(taps.begin(), taps.end(), i);
    if (tap != taps.end()) f.deepstack.push_back(merge(deepstack_[tap - taps.begin()], x, true));
  }
  f.embeds = merge(merger_, x, false);
  return f;
}

// x = x + proj(attention(qkv(LN1(x))));  x = x + fc2(act(fc1(LN2(x))))
void QwenVisionModel::block(const Block& b, Tensor& x, Scratch& s) {
  backend_.layer_norm(x, &b.norm1_w, &b.norm1_b, kLayerNormEps, s.normed);
  backend_.linear(s.normed, b.qkv_w, &b.qkv_b, s.qkv);
  backend_.self_attention(s.qkv, s.spec, s.attn);
  backend_.linear(s.attn, b.proj_w, &b.proj_b, s.normed);
  backend_.residual_add(x, s.normed, nullptr);
  backend_.layer_norm(x, &b.norm2_w, &b.norm2_b, kLayerNormEps, s.normed);
  backend_.linear(s.normed, b.fc1_w, &b.fc1_b, s.mlp);
  backend_.gelu(s.mlp, tanh_gelu_, s.mlp);
  backend_.linear(s.mlp, b.fc2_w, &b.fc2_b, s.normed);
  backend_.residual_add(x, s.normed, nullptr);
}

Tensor QwenVisionModel::merge(const Merger& mg, const Tensor& x, bool norm_after_grouping) {
  const QwenVisionConfig& v = config_.vision;
  const int64_t unit = v.spatial_merge_size * v.spatial_merge_size, tokens = x.dim(0) / unit;
  const int64_t M = x.dim(1) * unit;
  const DType act = backend_.activation_dtype();
  // The unit consecutive patch rows of a merge block are one row of the grouped view (the same memory).
  Tensor normed = backend_.empty({tokens, M}, act);
  if (norm_after_grouping) {
    backend_.layer_norm(x.reshape({tokens, M}), &mg.norm_w, &mg.norm_b, kLayerNormEps, normed);
  } else {
    Tensor per_patch = normed.reshape(x.shape());
    backend_.layer_norm(x, &mg.norm_w, &mg.norm_b, kLayerNormEps, per_patch);
  }
  Tensor hidden = backend_.empty({tokens, M}, act);
  backend_.linear(normed, mg.fc1_w, &mg.fc1_b, hidden);
  backend_.gelu(hidden, /*tanh_approx=*/false, hidden);
  Tensor out = backend_.empty({tokens, v.out_hidden_size}, act);
  backend_.linear(hidden, mg.fc2_w, &mg.fc2_b, out);
  return out;
}

}  // namespace h3
