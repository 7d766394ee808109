// The rectified-flow schedules of MiniMax-H3 (spec/sampling.md §2; diffusers `MiniMaxH3Scheduler`), one instance
// per modality (video shift 12, audio shift 3), and the Euler update with the data-ward velocity. Everything is
// float32 with one rounding per operation, as the reference evaluates it.
//
// Vocabulary: a schedule has `grid_points` sigmas (the reference's `num_inference_steps`, terminal 0 included) and
// `passes() = grid_points − 1` model evaluations. The CLI's `--steps N` is N passes, i.e. N + 1 grid points.
#pragma once
#include <cstdint>
#include <vector>

namespace h3 {

constexpr double kDefaultVideoShift = 12.0;  // spec/sampling.md §2 (the snapshot's scheduler config is authoritative)
constexpr double kDefaultAudioShift = 3.0;

// How PyTorch's CPU kernel evaluates a float32 `linspace(start, end, n)` (aten RangeFactoriesKernel.cpp, scalar since
// PyTorch removed its vectorized path): step = (end − start)/(n − 1); index k < n/2 is `start + step·k`, the others
// `end − step·(n − 1 − k)`. `fused`: the multiply-add is one fused operation (one rounding), as the compiler emits it
// in the AVX2/AVX512 builds of that kernel that x86 machines dispatch to; false: two roundings (the baseline build).
// The two differ by 1 ulp in a point or a few of most grids (e.g. one base point of the 21-point grid); both match
// every entry of the spec's 5- and 50-point tables and the reference fixtures (3-, 4- and 5-point grids, where they
// coincide), so `fused = true` is an inference from how PyTorch is built, not a measured fact.
struct TorchLinspaceKernel {
  bool fused = true;
};
std::vector<float> torch_linspace_f32(float start, float end, int64_t n, TorchLinspaceKernel kernel = {});

class FlowSchedule {
 public:
  // The shifted grid: b = linspace(1, 0, grid_points) (float32), σ = s·b / (1 + (s − 1)·b), consecutive duplicates
  // removed, timesteps t = 1 − σ[:-1]. grid_points ≥ 2.
  static FlowSchedule shifted(double shift, int64_t grid_points, TorchLinspaceKernel kernel = {});
  // An explicit σ list (strictly decreasing, ending at exactly 0), used verbatim.
  static FlowSchedule from_sigmas(std::vector<float> sigmas);

  const std::vector<float>& sigmas() const { return sigmas_; }
  const std::vector<float>& timesteps() const { return timesteps_; }  // the value the model sees at each pass
  int64_t passes() const { return static_cast<int64_t>(timesteps_.size()); }

  // Euler pass i over n values in place: x ← euler_step(timesteps()[i], σ_i, σ_{i+1}, v, x).
  void step(int64_t i, const float* v, float* x, int64_t n, float* x0 = nullptr) const;

 private:
  std::vector<float> sigmas_, timesteps_;
};

// One Euler update (η = 0) in float32, each operation rounded as the reference rounds it:
//   σ_t = 1 − t (from the timestep the model saw), x0 = x + σ_t·v (data-ward velocity, note the plus),
//   r = σ_next / σ (from the grid), x ← r·x + (1 − r)·x0.
// x0 (optional) receives the clean estimate, e.g. for previews.
void euler_step(float t, float sigma, float sigma_next, const float* v, float* x, int64_t n, float* x0 = nullptr);

}  // namespace h3
