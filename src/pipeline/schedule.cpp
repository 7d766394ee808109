#include "pipeline/schedule.h"

#include <cmath>

#include "util/error.h"

// Every float operation below is one reference operation rounded once; the compiler must not fuse a multiply and an
// add behind our back (fused multiply-adds are spelled out with std::fma where the reference has them).
#include "util/strict_fp.h"

namespace h3 {

namespace {

// a·b + c, rounded once (fused) or twice.
float mul_add(float a, float b, float c, bool fused) {
  if (fused) return std::fma(a, b, c);
  const float p = a * b;
  return p + c;
}

}  // namespace

std::vector<float> torch_linspace_f32(float start, float end, int64_t n, TorchLinspaceKernel kernel) {
  H3_CHECK(n >= 1, "linspace needs at least one point, got ", n);
  std::vector<float> out(static_cast<size_t>(n));
  if (n == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(n - 1);
  const int64_t halfway = n / 2;
  for (int64_t k = 0; k < n; ++k)
    out[k] = k < halfway ? mul_add(step, static_cast<float>(k), start, kernel.fused)
                         : mul_add(-step, static_cast<float>(n - 1 - k), end, kernel.fused);
  return out;
}

FlowSchedule FlowSchedule::shifted(double shift, int64_t grid_points, TorchLinspaceKernel kernel) {
  H3_CHECK(std::isfinite(shift) && shift > 0, "the schedule shift must be a positive number, got ", shift);
  H3_CHECK(grid_points >= 2, "a schedule needs at least 2 grid points (1 model pass), got ", grid_points);
  const std::vector<float> base = torch_linspace_f32(1.0f, 0.0f, grid_points, kernel);
  // The reference multiplies float32 tensors by the Python scalars `shift` and `shift − 1` (computed in double).
  const float s = static_cast<float>(shift);
  const float s_minus_1 = static_cast<float>(shift - 1.0);
  std::vector<float> sigmas;
  sigmas.reserve(base.size());
  for (float b : base) {
    const float numerator = s * b;
    const float scaled = s_minus_1 * b;
    const float denominator = 1.0f + scaled;
    const float sigma = numerator / denominator;
    if (sigmas.empty() || sigmas.back() != sigma) sigmas.push_back(sigma);  // unique_consecutive
  }
  H3_CHECK(sigmas.size() >= 2, "the shifted schedule collapsed to a single point");
  FlowSchedule out;
  out.sigmas_ = std::move(sigmas);
  out.timesteps_.reserve(out.sigmas_.size() - 1);
  for (size_t i = 0; i + 1 < out.sigmas_.size(); ++i) out.timesteps_.push_back(1.0f - out.sigmas_[i]);
  return out;
}

FlowSchedule FlowSchedule::from_sigmas(std::vector<float> sigmas) {
  H3_CHECK(sigmas.size() >= 2, "an explicit sigma schedule needs at least 2 values, got ", sigmas.size());
  for (size_t i = 1; i < sigmas.size(); ++i)
    H3_CHECK(sigmas[i] < sigmas[i - 1], "an explicit sigma schedule must be strictly decreasing; value ", i, " (",
             sigmas[i], ") is not below value ", i - 1, " (", sigmas[i - 1], ")");
  H3_CHECK(sigmas.back() == 0.0f, "an explicit sigma schedule must end at exactly 0, got ", sigmas.back());
  FlowSchedule out;
  out.sigmas_ = std::move(sigmas);
  for (size_t i = 0; i + 1 < out.sigmas_.size(); ++i) out.timesteps_.push_back(1.0f - out.sigmas_[i]);
  return out;
}

void FlowSchedule::step(int64_t i, const float* v, float* x, int64_t n, float* x0) const {
  H3_CHECK(i >= 0 && i < passes(), "Euler pass ", i, " is outside the schedule's ", passes(), " passes");
  euler_step(timesteps_[i], sigmas_[i], sigmas_[i + 1], v, x, n, x0);
}

void euler_step(float t, float sigma, float sigma_next, const float* v, float* x, int64_t n, float* x0) {
  H3_CHECK(sigma > 0.0f, "the Euler step needs a positive sigma, got ", sigma);
  const float sigma_t = 1.0f - t;
  const float r = sigma_next / sigma;
  const float one_minus_r = 1.0f - r;
  for (int64_t k = 0; k < n; ++k) {
    const float move = sigma_t * v[k];
    const float clean = x[k] + move;
    const float kept = r * x[k];
    const float blended = one_minus_r * clean;
    x[k] = kept + blended;
    if (x0) x0[k] = clean;
  }
}

}  // namespace h3
