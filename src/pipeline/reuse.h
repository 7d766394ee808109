// Whole-denoiser reuse (`--reuse N`, issue 16; h3.c's whole-denoiser reuse, h3_dit.c): the model is evaluated at the
// first and the last pass and at every N-th pass between; a skipped pass steps with a velocity extrapolated from
// the two latest evaluations, linearly in σ, on each modality's own schedule (video and audio σ differ).
// A control, off by default: reuse 1 evaluates every pass and is the exact path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace h3 {

// Which of `passes` passes evaluate the model (h3.c's h3_dit_reuse_schedule): pass 0, the last pass and every pass
// p with p % interval == 0; all of them for interval 1. interval ≥ 1.
std::vector<bool> reuse_schedule(int64_t passes, int64_t interval);

// H3_REUSE_STEPS (h3.c's parse_reuse_steps): an explicit comma-separated list of the passes to evaluate, strictly
// increasing, 0-based, including 0 and passes − 1, that replaces reuse_schedule when reuse > 1. Throws one sentence
// naming the rule otherwise.
std::vector<bool> parse_reuse_passes(const std::string& text, int64_t passes);

// The passes a request with `passes` passes and reuse `interval` evaluates: reuse_schedule, replaced by
// H3_REUSE_STEPS when interval > 1 and the variable is set (as in h3.c, where it applies only with reuse).
std::vector<bool> evaluated_passes(int64_t passes, int64_t interval);
int64_t count_evaluated(const std::vector<bool>& evaluated);

// The extrapolation factor of a skipped pass at σ from the evaluations at σ_last (the latest) and σ_previous (the
// one before): r = (σ − σ_last) / (σ_last − σ_previous) in float32 (0 when the denominator is 0), clamped to
// [−2, 2] (h3.c's extrapolation_ratio: a guard against malformed H3_REUSE_STEPS lists).
float reuse_extrapolation_ratio(float sigma, float sigma_last, float sigma_previous);

// v = v_last + r·(v_last − v_previous) over n values, float32, one rounding per operation (h3.c's
// extrapolate_velocity with a previous evaluation; without one the skipped pass reuses v_last as is).
void extrapolate_velocity(const float* last, const float* previous, float ratio, float* out, int64_t n);

}  // namespace h3
