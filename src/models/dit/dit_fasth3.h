// FastH3 (spec/fasth3.md §1, §7; FastVideo's fastvideo/models/dits/minimax_h3.py and
// examples/inference/basic/basic_fasth3.py): which attention a transformer checkpoint runs, and the sampling of the
// few-step student.
//
// - FastVideo's FastH3 student: every main block carries `transformer_blocks.{i}.attn.to_gate_compress.weight`
//   [inner, hidden] (diffusers names, no bias). Its attention is VSA-H3 with the gated pooled branch; a block whose
//   gate is all zeros skips the branch and its GEMM (FastVideo's _gate_active, per block).
// - The base checkpoint with the sparse attention selected: no gates, so pure sparse (FastVideo zero-initializes
//   the missing weight and then skips it); nothing is loaded or multiplied for the gate.
// - Otherwise dense attention, as today.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "h3/request.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "models/dit/dit_sparse_attention.h"

namespace h3 {

enum class DitAttentionKind { kDense, kSparsePure, kSparseGated };

std::string dit_gate_name(int64_t block);

// Whether the checkpoint is FastVideo's FastH3 layout: true when every main block has its gate with the shape
// [inner, hidden], false when none has one. Throws (one sentence naming the block and the rule) when only some
// blocks have it, a shape is wrong, or an original-layout checkpoint carries one (FastVideo reads diffusers names).
bool dit_has_gates(const Checkpoint& ck, const DitConfig& c, Layout layout);

// FastVideo's `(weight != 0).any()` negated: true when every element is ±0 (a NaN counts as non-zero). Any float
// dtype, host.
bool dit_gate_is_zero(const Tensor& weight);

// The user's choices (CLI): all optional.
struct FastH3Choices {
  std::optional<AttentionChoice> attention;  // --attention; absent: the checkpoint's
  std::optional<double> sparsity;            // --sparsity, [0, 1)
  std::optional<int64_t> tile_elems;         // 64 or 256
  std::optional<int64_t> passes;             // --steps (passes)
};

// The passes a request runs without --steps: a gated checkpoint's is the student's grid (basic_fasth3.py's
// num_inference_steps 5 = 4 passes, "other grids are off-distribution"), whatever the attention; `base_default`
// otherwise.
int64_t checkpoint_default_passes(bool checkpoint_has_gates, int64_t base_default);

struct FastH3Plan {
  DitAttentionKind kind = DitAttentionKind::kDense;
  int64_t tile_elems = 0;  // 0 for dense
  VsaOptions vsa;
  int64_t passes = 0;
};

// Resolves the plan of a request (before any expensive work; bad choices throw one sentence with the valid range):
// - gated checkpoint: VSA-H3 with gates, tile 64 (the student's trained contract), sparsity 0 (basic_fasth3.py's
//   default: exactly dense routing plus the gated pooled term), exempt;
// - --attention sparse on a checkpoint without gates: pure VSA-H3, tile 256 (FastVideoArgs' VSA_tile_size default),
//   sparsity 0, exempt;
// - otherwise (and --attention dense on any checkpoint) dense; --sparsity or a tile size there is refused (nothing
//   would route).
// The passes are --steps's (our --steps stays passes), else checkpoint_default_passes(checkpoint_has_gates,
// base_default_passes).
FastH3Plan resolve_fasth3_plan(bool checkpoint_has_gates, const FastH3Choices& choices, int64_t base_default_passes);

// The plan's attention in words: "dense", or e.g. "VSA-H3 with gates (FastH3 student), tile 64 (4x4x4), sparsity 0,
// exempt".
std::string describe_fasth3_attention(const FastH3Plan& plan);
// One line for --info and the run's summary: "attention: " + the attention + "; 4 passes".
std::string describe_fasth3_plan(const FastH3Plan& plan);

}  // namespace h3
