#include "models/dit/dit_random.h"

#include <cmath>
#include <string>

#include "models/random_weights.h"

namespace h3 {

namespace {

// `matrices` false: the norms only (a streamed block's matrices are made when the streamer asks for them).
void make_attn_ffn(RandomWeights& rw, const DitConfig& c, const std::string& p, DType act, DitAttnFfnWeights& b,
                   bool matrices = true) {
  const int64_t D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim, Dh = c.attention_head_dim;
  b.norm1 = rw.norm(p + ".norm1", {D}, act);
  b.norm2 = rw.norm(p + ".norm2", {D}, act);
  if (matrices) b.qkv = rw.matrix(p + ".qkv", {3 * I, D}, act);
  b.norm_q = rw.norm(p + ".norm_q", {Dh}, act);
  b.norm_k = rw.norm(p + ".norm_k", {Dh}, act);
  if (!matrices) return;
  b.out = rw.matrix(p + ".out", {D, I}, act);
  b.fc1 = rw.matrix(p + ".fc1", {2 * F, D}, act);
  b.fc2 = rw.matrix(p + ".fc2", {D, F}, act);
}

void zero(Backend& be, Tensor& t) {
  if (t.defined()) be.fill(t, 0.f);
}

void zero_attn_ffn(Backend& be, DitAttnFfnWeights& b) {
  for (Tensor* t : {&b.norm1, &b.norm2, &b.norm_q, &b.norm_k}) zero(be, *t);
}

// Main block `i` (the same values whenever it is made: every tensor's stream is its name's). `shared_adaln_host`:
// the one host AdaLN weight of every block when the options do not keep them resident.
void make_block(RandomWeights& rw, const DitConfig& c, const RandomDitOptions& o, const Tensor& shared_adaln_host,
                int64_t i, DitBlockWeights& b, bool matrices = true) {
  const DType act = rw.backend().activation_dtype();
  const int64_t adaln_out = kDitModalities * kAdaLnParams * c.hidden_size;
  const std::string p = "blocks." + std::to_string(i);
  make_attn_ffn(rw, c, p, act, b, matrices);
  if (o.keep_adaln_weights) {
    b.adaln_weight = rw.matrix(p + ".adaln.weight", {adaln_out, c.time_embed_dim}, act);  // never streamed
  } else {
    b.adaln_weight_host = shared_adaln_host;
  }
  b.adaln_bias = rw.bias(p + ".adaln.bias", {adaln_out}, act);
  if (o.gates && matrices) b.gate_compress = rw.matrix(p + ".gate_compress", {c.inner_dim(), c.hidden_size}, act);
  if (o.zero_vectors) {
    zero_attn_ffn(rw.backend(), b);
    zero(rw.backend(), b.adaln_bias);
  }
}

// Every 1-D weight outside the main blocks set to zero (RandomDitOptions::zero_vectors; make_block zeroes theirs).
void zero_vector_weights(Backend& be, DitWeights& w) {
  for (Tensor* t : {&w.proj_in_b, &w.audio_proj_in_b, &w.time_1_b, &w.time_2_b, &w.proj_out_b, &w.audio_proj_out_b,
                    &w.context_b, &w.refiner_final_norm, &w.norm_out_w, &w.norm_out_linear_b})
    zero(be, *t);
  for (DitAttnFfnWeights& b : w.refiner) zero_attn_ffn(be, b);
}

}  // namespace

namespace {

DitWeights make_dit_weights(Backend& be, const DitConfig& c, const RandomDitOptions& o, uint64_t* resident_bytes,
                            bool block_matrices) {
  c.validate("random DiT config");
  RandomWeights rw(be, o.seed);
  const DType act = be.activation_dtype(), f32 = DType::F32;
  const int64_t D = c.hidden_size, P = c.patch_dim(), A = c.audio_in_channels, T = c.time_embed_dim;
  DitWeights w;
  w.fc1_value_first = true;
  w.proj_in_w = rw.matrix("proj_in.weight", {D, P}, f32);
  w.proj_in_b = rw.bias("proj_in.bias", {D}, f32);
  w.audio_proj_in_w = rw.matrix("audio_proj_in.weight", {D, A}, f32);
  w.audio_proj_in_b = rw.bias("audio_proj_in.bias", {D}, f32);
  w.time_1_w = rw.matrix("time_1.weight", {c.time_embed_hidden_dim, c.freq_dim}, f32);
  w.time_1_b = rw.bias("time_1.bias", {c.time_embed_hidden_dim}, f32);
  w.time_2_w = rw.matrix("time_2.weight", {T, c.time_embed_hidden_dim}, f32);
  w.time_2_b = rw.bias("time_2.bias", {T}, f32);
  w.proj_out_w = rw.matrix("proj_out.weight", {P, D}, f32);
  w.proj_out_b = rw.bias("proj_out.bias", {P}, f32);
  w.audio_proj_out_w = rw.matrix("audio_proj_out.weight", {A, D}, f32);
  w.audio_proj_out_b = rw.bias("audio_proj_out.bias", {A}, f32);
  w.context_w = rw.matrix("context.weight", {D, c.text_dim}, act);
  w.context_b = rw.bias("context.bias", {D}, act);
  w.refiner.resize(c.num_refiner_layers);
  for (int64_t i = 0; i < c.num_refiner_layers; ++i)
    make_attn_ffn(rw, c, "refiner." + std::to_string(i), act, w.refiner[i]);
  w.refiner_final_norm = rw.norm("refiner.final_norm", {D}, act);

  const int64_t adaln_out = kDitModalities * kAdaLnParams * D;
  Tensor shared_adaln_host;
  if (!o.keep_adaln_weights) {
    // One host tensor for every block: the tables depend on it only in value. Made on the backend, freed there.
    Tensor dev = be.empty({adaln_out, T}, act);
    be.fill_random_normal(dev, random_weight_stream(o.seed, "adaln.weight"), 0.f,
                          1.f / std::sqrt(static_cast<float>(T)));
    shared_adaln_host = be.download(dev);
  }
  w.blocks.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) make_block(rw, c, o, shared_adaln_host, i, w.blocks[i], block_matrices);
  w.norm_out_w = rw.norm("norm_out.weight", {D}, act);
  w.norm_out_linear_w = rw.matrix("norm_out.linear.weight", {2 * D, T}, act);
  w.norm_out_linear_b = rw.bias("norm_out.linear.bias", {2 * D}, act);
  if (o.zero_vectors) zero_vector_weights(be, w);
  if (resident_bytes) *resident_bytes = rw.bytes();
  return w;
}

}  // namespace

DitWeights random_dit_weights(Backend& be, const DitConfig& c, const RandomDitOptions& o, uint64_t* resident_bytes) {
  return make_dit_weights(be, c, o, resident_bytes, true);
}

std::unique_ptr<Dit> random_dit(Backend& be, const DitConfig& c, const RandomDitOptions& o, uint64_t* resident_bytes,
                                std::optional<BlockStreaming> streaming) {
  // Streamed: the main blocks' matrices are made one block at a time when the streamer makes its host copies, so
  // the device never holds more than one of them beside the ring.
  DitWeights w = make_dit_weights(be, c, o, resident_bytes, !streaming);
  // A block --layers freed is made again from its tensors' streams.
  const Tensor shared_adaln_host = w.blocks.empty() ? Tensor() : w.blocks[0].adaln_weight_host;
  auto reload = [&be, c, o, shared_adaln_host](int64_t i, DitBlockWeights& b) {
    RandomWeights rw(be, o.seed);
    make_block(rw, c, o, shared_adaln_host, i, b);
  };
  return Dit::from_weights(be, c, Layout::Diffusers, std::move(w), reload, std::move(streaming), o.precision);
}

}  // namespace h3
