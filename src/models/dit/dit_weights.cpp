#include "models/dit/dit_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "io/manifest.h"
#include "models/dit/dit_embed.h"
#include "models/dit/dit_fasth3.h"
#include "util/error.h"
#include "util/log.h"

namespace h3 {

Tensor stack_rows(const std::vector<Tensor>& parts) {
  H3_CHECK(!parts.empty(), "stack_rows: nothing to stack");
  const DType dt = parts[0].dtype();
  const int64_t width = parts[0].dim(-1);
  int64_t rows = 0;
  for (const Tensor& p : parts) {
    H3_CHECK(p.ndim() == 2 && p.dim(1) == width, "stack_rows: ", p.str(), " is not [rows, ", width, "]");
    rows += p.dim(0);
  }
  Tensor out = Tensor::empty({rows, width}, dt);
  char* dst = static_cast<char*>(out.data());
  for (const Tensor& p : parts) {
    Tensor same = p.dtype() == dt ? p : p.to(dt);
    std::memcpy(dst, same.data(), same.nbytes());
    dst += same.nbytes();
  }
  return out;
}

Tensor permute_rows(const Tensor& t, const std::vector<int64_t>& perm) {
  H3_CHECK(t.ndim() == 2 && static_cast<int64_t>(perm.size()) == t.dim(0), "permute_rows: ", perm.size(),
           " indices for ", t.str());
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  const size_t row_bytes = static_cast<size_t>(t.dim(1)) * dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.data());
  char* dst = static_cast<char*>(out.data());
  for (size_t i = 0; i < perm.size(); ++i) {
    H3_CHECK(perm[i] >= 0 && perm[i] < t.dim(0), "permute_rows: index ", perm[i], " out of range");
    std::memcpy(dst + i * row_bytes, src + perm[i] * row_bytes, row_bytes);
  }
  return out;
}

std::vector<int64_t> deinterleave_qkv_rows(int64_t heads, int64_t head_dim) {
  const int64_t inner = heads * head_dim;
  std::vector<int64_t> perm(3 * inner);
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < head_dim; ++d) perm[s * inner + h * head_dim + d] = h * 3 * head_dim + s * head_dim + d;
  return perm;
}

Layout detect_dit_layout(const Checkpoint& ck) {
  if (ck.has("proj_in.weight")) return Layout::Diffusers;
  if (ck.has("video_patch_proj.weight")) return Layout::Original;
  fail(ck.location(), ": not a MiniMax-H3 transformer checkpoint (neither 'proj_in.weight' (diffusers layout) nor ",
       "'video_patch_proj.weight' (original layout) is present)");
}

namespace {

void check_against_manifest(const Checkpoint& ck, const DitConfig& c, Layout layout) {
  const std::vector<TensorSpec> manifest = dit_manifest(c, layout);
  std::set<std::string> expected;
  if (dit_has_gates(ck, c, layout))  // shape-checked there; FastH3's extra weights are used, not ignored
    for (int64_t i = 0; i < c.num_layers; ++i) expected.insert(dit_gate_name(i));
  for (const TensorSpec& s : manifest) {
    expected.insert(s.name);
    H3_CHECK(ck.has(s.name), ck.location(), ": tensor '", s.name, "' is missing (a ", layout_name(layout),
             "-layout MiniMax-H3 transformer with this config needs it)");
    const TensorInfo& info = ck.info(s.name);
    H3_CHECK(info.shape == s.shape, ck.location(), ": tensor '", s.name, "' has shape ", shape_str(info.shape),
             " but the config implies ", shape_str(s.shape));
    H3_CHECK(dtype_is_float(info.dtype), ck.location(), ": tensor '", s.name, "' has dtype ", dtype_name(info.dtype),
             "; weights must be a float dtype");
  }
  int64_t extra = 0;
  std::string first_extra;
  for (const std::string& n : ck.names())
    if (!expected.count(n) && extra++ == 0) first_extra = n;
  if (extra)
    log_warn(ck.location(), ": ", extra, " tensor(s) not used by the MiniMax-H3 transformer are ignored (first: '",
             first_extra, "')");
}

// The original release ships rope.inv_freq; it must equal the recomputation (else the checkpoint was made with
// another rope theta than the config states).
void check_original_inv_freq(const Checkpoint& ck, const DitConfig& c) {
  const Tensor stored = ck.get("rope.inv_freq");
  const std::vector<float> ours = dit_rope_inv_freq(c);
  for (int64_t k = 0; k < stored.numel(); ++k) {
    const double s = stored.at(k), o = ours[k];
    H3_CHECK(std::fabs(s - o) <= 1e-6 * std::fabs(o), ck.location(), ": rope.inv_freq[", k, "] = ", s,
             " differs from 1/theta^(2k/", 2 * c.rope_freq_dim, ") = ", o, " for rope_theta ", c.rope_theta);
  }
}

class Loader {
 public:
  Loader(Backend& be, const Checkpoint& ck) : be_(be), ck_(ck), act_(be.activation_dtype()) {}
  Tensor host(const std::string& name) const { return ck_.get(name); }
  Tensor f32(const std::string& name) { return be_.upload(ck_.get(name), DType::F32); }
  Tensor act(const std::string& name) { return be_.upload(ck_.get(name), act_); }
  Tensor act(const Tensor& host_tensor) { return be_.upload(host_tensor, act_); }

 private:
  Backend& be_;
  const Checkpoint& ck_;
  DType act_;
};

// The checkpoint names of a block's out, fc1 and fc2 matrices (after the prefix).
struct MatrixKeys {
  const char* out;
  const char* fc1;
  const char* fc2;
};
MatrixKeys matrix_keys(Layout layout) {
  if (layout == Layout::Original) return {".attn.out_proj.weight", ".mlp.fc1.weight", ".mlp.fc2.weight"};
  return {".attn.to_out.0.weight", ".ff.net.0.proj.weight", ".ff.net.2.weight"};
}

// `matrices` false: the norms only (block streaming keeps the four matrices off the device).
void load_attn_ffn(Loader& ld, const DitConfig& c, Layout layout, const std::string& p, DitAttnFfnWeights& b,
                   bool matrices = true) {
  const bool orig = layout == Layout::Original;
  b.norm1 = ld.act(p + ".norm1.weight");
  b.norm2 = ld.act(p + ".norm2.weight");
  b.norm_q = ld.act(p + (orig ? ".attn.q_norm.weight" : ".attn.norm_q.weight"));
  b.norm_k = ld.act(p + (orig ? ".attn.k_norm.weight" : ".attn.norm_k.weight"));
  if (!matrices) return;
  if (orig) {
    b.qkv = ld.act(permute_rows(ld.host(p + ".attn.qkv_proj.weight"),
                                deinterleave_qkv_rows(c.num_attention_heads, c.attention_head_dim)));
  } else {
    b.qkv = ld.act(stack_rows({ld.host(p + ".attn.to_q.weight"), ld.host(p + ".attn.to_k.weight"),
                               ld.host(p + ".attn.to_v.weight")}));
  }
  const MatrixKeys k = matrix_keys(layout);
  b.out = ld.act(p + k.out);
  b.fc1 = ld.act(p + k.fc1);
  b.fc2 = ld.act(p + k.fc2);
}

std::string block_prefix(Layout layout, int64_t i) {
  return (layout == Layout::Original ? "blocks." : "transformer_blocks.") + std::to_string(i);
}

}  // namespace

void DitBlockWeights::release() {
  static_cast<DitAttnFfnWeights&>(*this) = DitAttnFfnWeights{};
  gate_compress = Tensor();
  if (adaln_weight_host.defined()) adaln_weight = Tensor();
}

void load_dit_block(Backend& be, const Checkpoint& ck, const DitConfig& c, Layout layout, bool keep_adaln_weights,
                    int64_t i, DitBlockWeights& b) {
  Loader ld(be, ck);
  load_attn_ffn(ld, c, layout, block_prefix(layout, i), b);
  if (ck.has(dit_gate_name(i)) && !dit_gate_is_zero(ld.host(dit_gate_name(i))))
    b.gate_compress = ld.act(dit_gate_name(i));
  if (keep_adaln_weights) b.adaln_weight = ld.act(b.adaln_weight_host);
}

void load_dit_block_norms(Backend& be, const Checkpoint& ck, const DitConfig& c, Layout layout,
                          bool keep_adaln_weights, int64_t i, DitBlockWeights& b) {
  Loader ld(be, ck);
  load_attn_ffn(ld, c, layout, block_prefix(layout, i), b, /*matrices=*/false);
  if (keep_adaln_weights) b.adaln_weight = ld.act(b.adaln_weight_host);
}

std::vector<Tensor*> dit_streamed_tensors(DitAttnFfnWeights& b) { return {&b.qkv, &b.out, &b.fc1, &b.fc2}; }

std::vector<StreamedTensor> dit_streamed_block(const Checkpoint& ck, const DitConfig& c, Layout layout, int64_t i) {
  const std::string p = block_prefix(layout, i);
  const int64_t D = c.hidden_size, inner = c.inner_dim(), F = c.ffn_dim, H = c.num_attention_heads,
                Hd = c.attention_head_dim;
  StreamedTensor qkv{{3 * inner, D}, {}};
  if (layout == Layout::Original) {
    // deinterleave_qkv_rows as pieces: rows h·3·Hd + s·Hd.. of qkv_proj go to s·inner + h·Hd..
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t h = 0; h < H; ++h)
        qkv.pieces.push_back({p + ".attn.qkv_proj.weight", h * 3 * Hd + s * Hd, Hd, s * inner + h * Hd});
  } else {
    // stack_rows: the parts converted to the first's dtype.
    const DType first = ck.info(p + ".attn.to_q.weight").dtype;
    int64_t at = 0;
    for (const char* part : {".attn.to_q.weight", ".attn.to_k.weight", ".attn.to_v.weight"}) {
      qkv.pieces.push_back({p + part, 0, inner, at, first});
      at += inner;
    }
  }
  const MatrixKeys k = matrix_keys(layout);
  return {qkv, {{D, inner}, {{p + k.out}}}, {{2 * F, D}, {{p + k.fc1}}}, {{D, F}, {{p + k.fc2}}}};
}

uint64_t dit_weight_bytes(const DitWeights& w) {
  uint64_t n = 0;
  auto add = [&n](const Tensor& t) { n += t.defined() ? t.nbytes() : 0; };
  auto add_attn_ffn = [&add, &n](const DitAttnFfnWeights& b) {
    for (const Tensor* t : {&b.norm1, &b.norm2, &b.qkv, &b.norm_q, &b.norm_k, &b.out, &b.fc1, &b.fc2}) add(*t);
    for (const Fp8Weight* q : {&b.fp8.qkv, &b.fp8.out, &b.fp8.fc1, &b.fp8.fc2}) n += q->nbytes();
  };
  for (const Tensor* t : {&w.proj_in_w, &w.proj_in_b, &w.audio_proj_in_w, &w.audio_proj_in_b, &w.time_1_w, &w.time_1_b,
                          &w.time_2_w, &w.time_2_b, &w.proj_out_w, &w.proj_out_b, &w.audio_proj_out_w,
                          &w.audio_proj_out_b, &w.context_w, &w.context_b, &w.refiner_final_norm, &w.norm_out_w,
                          &w.norm_out_linear_w, &w.norm_out_linear_b})
    add(*t);
  for (const DitAttnFfnWeights& b : w.refiner) add_attn_ffn(b);
  for (const DitBlockWeights& b : w.blocks) {
    add_attn_ffn(b);
    add(b.adaln_weight);
    add(b.adaln_bias);
    add(b.gate_compress);
  }
  return n;
}

DitWeights load_dit_weights(Backend& be, const Checkpoint& ck, const DitConfig& c, Layout layout,
                            bool keep_adaln_weights, const std::optional<std::vector<int64_t>>& blocks) {
  check_against_manifest(ck, c, layout);
  const bool orig = layout == Layout::Original;
  if (orig) check_original_inv_freq(ck, c);
  Loader ld(be, ck);
  DitWeights w;
  w.fc1_value_first = !orig;
  auto key = [orig](const char* diffusers, const char* original) { return std::string(orig ? original : diffusers); };

  w.proj_in_w = ld.f32(key("proj_in.weight", "video_patch_proj.weight"));
  w.proj_in_b = ld.f32(key("proj_in.bias", "video_patch_proj.bias"));
  w.audio_proj_in_w = ld.f32(key("audio_proj_in.weight", "audio_patch_proj.weight"));
  w.audio_proj_in_b = ld.f32(key("audio_proj_in.bias", "audio_patch_proj.bias"));
  w.time_1_w = ld.f32(key("time_embedder.linear_1.weight", "time_embedder.proj_in.weight"));
  w.time_1_b = ld.f32(key("time_embedder.linear_1.bias", "time_embedder.proj_in.bias"));
  w.time_2_w = ld.f32(key("time_embedder.linear_2.weight", "time_embedder.proj_out.weight"));
  w.time_2_b = ld.f32(key("time_embedder.linear_2.bias", "time_embedder.proj_out.bias"));
  w.proj_out_w = ld.f32(key("proj_out.weight", "final_layer.video_out.weight"));
  w.proj_out_b = ld.f32(key("proj_out.bias", "final_layer.video_out.bias"));
  w.audio_proj_out_w = ld.f32(key("audio_proj_out.weight", "final_layer.audio_out.weight"));
  w.audio_proj_out_b = ld.f32(key("audio_proj_out.bias", "final_layer.audio_out.bias"));

  w.context_w = ld.act(key("context_embedder.weight", "condition_proj.weight"));
  w.context_b = ld.act(key("context_embedder.bias", "condition_proj.bias"));
  w.refiner.resize(c.num_refiner_layers);
  for (int64_t i = 0; i < c.num_refiner_layers; ++i)
    load_attn_ffn(ld, c, layout, key("token_refiner.refiner_blocks.", "token_refiner.blocks.") + std::to_string(i),
                  w.refiner[i]);
  w.refiner_final_norm = ld.act("token_refiner.final_norm.weight");

  w.blocks.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = block_prefix(layout, i);
    DitBlockWeights& b = w.blocks[i];
    b.adaln_weight_host = ld.host(p + ".adaln_proj.linear.weight");
    b.adaln_bias = ld.act(p + ".adaln_proj.linear.bias");
  }
  for (int64_t i = 0; i < c.num_layers; ++i)
    if (!blocks || std::find(blocks->begin(), blocks->end(), i) != blocks->end())
      load_dit_block(be, ck, c, layout, keep_adaln_weights, i, w.blocks[i]);

  w.norm_out_w = ld.act(key("norm_out.norm.weight", "final_layer.norm.weight"));
  w.norm_out_linear_w = ld.act(key("norm_out.linear.weight", "final_layer.adaln_proj.linear.weight"));
  w.norm_out_linear_b = ld.act(key("norm_out.linear.bias", "final_layer.adaln_proj.linear.bias"));
  return w;
}

}  // namespace h3
