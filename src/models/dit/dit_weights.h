// The DiT's weights on a backend, in the form the forward uses them: fused q|k|v, one fc1 with a known value/gate
// order, bf16 (or the backend's activation dtype) for the block stack and F32 for the float32 modules.
#pragma once
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "models/block_streamer.h"

namespace h3 {

// One pre-norm attention + SwiGLU block (a refiner block; the shared part of a main block).
struct DitAttnFfnWeights {
  Tensor norm1, norm2;    // [hidden]
  Tensor qkv;             // [3·inner, hidden], rows [q heads | k heads | v heads]
  Tensor norm_q, norm_k;  // [head_dim]
  Tensor out;             // [hidden, inner]
  Tensor fc1;             // [2·ffn, hidden], halves in DitWeights::fc1_value_first order
  Tensor fc2;             // [hidden, ffn]
  // --precision fp8 (DitPrecision, dit.h): the FP8 forms of qkv, out, fc1 and fc2, each of which then leaves its
  // bf16 tensor above undefined (a shape FP8 cannot take keeps its bf16 tensor and no FP8 form).
  struct Fp8Linears {
    Fp8Weight qkv, out, fc1, fc2;
  } fp8;
};

// A main block. Its attention and FFN weights are undefined while the block is not resident (--layers dropped it);
// its AdaLN projection's host view and bias are always there (any block's tables can be computed).
struct DitBlockWeights : DitAttnFfnWeights {
  Tensor adaln_weight_host;  // [18·hidden, time_embed_dim] host view (mmap), checkpoint dtype
  Tensor adaln_weight;       // the same on the backend when DitOptions::keep_adaln_weights, else undefined
  Tensor adaln_bias;         // [18·hidden] backend
  // FastH3's to_gate_compress [inner, hidden] (models/dit/dit_fasth3.h) while resident; undefined when the
  // checkpoint has none or it is all zeros (FastVideo's rule: the branch and its GEMM are skipped).
  Tensor gate_compress;

  bool resident() const { return qkv.defined() || fp8.qkv.defined(); }
  // Frees the attention and FFN weights, and the resident AdaLN weight where the host view can stand in for it.
  void release();
};

struct DitWeights {
  // float32 modules (F32 on every backend)
  Tensor proj_in_w, proj_in_b, audio_proj_in_w, audio_proj_in_b;
  Tensor time_1_w, time_1_b, time_2_w, time_2_b;
  Tensor proj_out_w, proj_out_b, audio_proj_out_w, audio_proj_out_b;
  // activation-dtype modules
  Tensor context_w, context_b;
  std::vector<DitAttnFfnWeights> refiner;
  Tensor refiner_final_norm;
  std::vector<DitBlockWeights> blocks;
  Tensor norm_out_w;                       // [hidden]
  Tensor norm_out_linear_w, norm_out_linear_b;  // [2·hidden, time_embed_dim], [2·hidden]
  // Diffusers stores fc1 as [value; gate], the original release as [gate; value]; kept as stored.
  bool fc1_value_first = true;
};

// The layout the tensor names of a transformer checkpoint follow; throws when they follow neither.
Layout detect_dit_layout(const Checkpoint& ck);

// Checks `ck` against dit_manifest(c, layout) (every tensor present, shape exact, a float dtype), then builds and
// uploads the weights: every block's attention and FFN weights for the checkpoint blocks `blocks` only (all when
// absent; the others are never read), everything else for every block.
DitWeights load_dit_weights(Backend& be, const Checkpoint& ck, const DitConfig& c, Layout layout,
                            bool keep_adaln_weights, const std::optional<std::vector<int64_t>>& blocks = std::nullopt);
// Makes checkpoint block `i` resident in `b` (its attention and FFN weights, and its AdaLN weight when kept).
void load_dit_block(Backend& be, const Checkpoint& ck, const DitConfig& c, Layout layout, bool keep_adaln_weights,
                    int64_t i, DitBlockWeights& b);
// load_dit_block without the four matrices block streaming keeps off the device (models/block_streamer.h): the
// norms, and the AdaLN weight when kept.
void load_dit_block_norms(Backend& be, const Checkpoint& ck, const DitConfig& c, Layout layout,
                          bool keep_adaln_weights, int64_t i, DitBlockWeights& b);
// Those four matrices of a block, in the order block streaming keeps them: qkv, out, fc1, fc2.
std::vector<Tensor*> dit_streamed_tensors(DitAttnFfnWeights& b);
// Checkpoint block i's four streamed matrices in the fused device layout, and where their rows are in `ck` (what
// load_dit_block's fusing does: the q|k|v stack or the original layout's de-interleave, as row pieces).
std::vector<StreamedTensor> dit_streamed_block(const Checkpoint& ck, const DitConfig& c, Layout layout, int64_t i);
// Bytes of the backend tensors of `w` (the AdaLN host views excluded).
uint64_t dit_weight_bytes(const DitWeights& w);

// Host helpers (exposed for tests): rows of same-width tensors stacked in order (dtype of the first; the others
// converted to it), and a row permutation out[i] = t[perm[i]].
Tensor stack_rows(const std::vector<Tensor>& parts);
Tensor permute_rows(const Tensor& t, const std::vector<int64_t>& perm);
// The row permutation that turns the original per-head interleaved qkv_proj ([h0: q k v, h1: q k v, ...]) into
// [q heads | k heads | v heads]: out row s·inner + h·head_dim + d = in row h·3·head_dim + s·head_dim + d.
std::vector<int64_t> deinterleave_qkv_rows(int64_t heads, int64_t head_dim);

}  // namespace h3
