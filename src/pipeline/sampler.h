// The denoising loop (spec/sampling.md §7): one model evaluation per pass over the whole packed sequence, then the
// video schedule steps the generated video rows and the audio schedule the generated audio rows. Conditioning rows
// (the leading rows of each index set) are inputs only: they are never updated and their predictions are discarded.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "h3/error.h"
#include "h3/progress.h"
#include "pipeline/geometry.h"
#include "pipeline/layout.h"
#include "pipeline/schedule.h"
#include "tensor/tensor.h"
#include "util/cancel.h"

namespace h3 {

// The model's prediction for one pass: host F32 [Nv, patch_dim] in video_indices order and [Na, Ca] in
// audio_indices order (data-ward velocities).
struct Velocity {
  Tensor video;
  Tensor audio;
};

// What the loop needs from a denoiser: the DiT (pipeline/dit_velocity.h), or a fake in tests.
class VelocityModel {
 public:
  virtual ~VelocityModel() = default;
  // Once per request: the layout, the text rows [Nt, text_dim] and every timestep the passes will address.
  virtual void begin_request(const PackedLayout& layout, const Tensor& text, const std::vector<float>& timesteps) = 0;
  // One pass: all video and audio rows (host F32) and, per row of the layout, an index into begin_request's list.
  virtual Velocity step(const Tensor& video_rows, const Tensor& audio_rows,
                        const std::vector<int64_t>& timestep_index_per_row) = 0;
  virtual void end_request() = 0;
};

// PassProgress (include/h3/progress.h) is reported after every pass.
using PassCallback = std::function<void(const PassProgress&)>;

struct SamplerOptions {
  PassCallback on_pass;                        // optional
  // --reuse (pipeline/reuse.h): one flag per pass, true where the model is evaluated; a skipped pass steps with the
  // velocity extrapolated from the two latest evaluations on its modality's σ grid. Empty: every pass (exact).
  std::vector<bool> evaluated;
};

// The loop throws Cancelled (include/h3/error.h) when the cancel flag was raised; the model's request has then been
// ended.

// The rows being denoised, conditioning rows first (host F32, updated in place).
struct DenoiseState {
  Tensor video_rows;  // [Nv, patch_dim] in video_indices order
  Tensor audio_rows;  // [Na, Ca] in audio_indices order
};

// Runs every pass of the schedules over `state`. `geometry` only serves the progress callback.
void run_denoising_loop(VelocityModel& model, const PackedLayout& layout, const Tensor& text,
                        const FlowSchedule& video, const FlowSchedule& audio, const LatentGeometry& geometry,
                        DenoiseState& state, const SamplerOptions& options = {});

struct DenoiseResult {
  Tensor latents;        // (1, C, F, Hl, Wl) F32, normalized latent space
  Tensor audio_latents;  // (2, Ca, A) F32, normalized latent space
};
// Runs every pass over `state` (conditioning rows first, as initial_state builds it), then drops the conditioning
// rows and unpacks the generated ones. `text` holds the layout's text rows [Nt, text_dim].
DenoiseResult denoise(VelocityModel& model, const PackedLayout& layout, const Tensor& text, const FlowSchedule& video,
                      const FlowSchedule& audio, const LatentGeometry& geometry, DenoiseState state,
                      const SamplerOptions& options = {});

// The two schedules of a request of `passes` model passes (passes + 1 grid points): the released linear base grid
// linspace(1, 0, passes + 1), shifted per modality, its terminal zero included. The same for every pass count: h3.c's
// low-budget schedule for 4..7 passes is this grid too (its h3_serving_schedule_build serves every count; the former
// `--fast-scheduler 4..7` was that grid with the one terminal point that a pass count has by construction), and h3.c
// gives 2 and 3 passes no other rule. Our base points are torch's float32 linspace (the reference's); h3.c computes
// 1 − k/N, which differs by 1 ulp in some points (tests/test_sampler_schedule.cpp).
std::pair<FlowSchedule, FlowSchedule> make_schedules(int64_t passes, double video_shift = kDefaultVideoShift,
                                                     double audio_shift = kDefaultAudioShift);

// The noise of one request: drawn from the seed's stream, or supplied (parity testing). Every tensor is optional.
struct NoiseInputs {
  uint64_t seed = 42;
  std::vector<Tensor> conditions;  // per visual condition, in packed order: its augmentation noise (its latent's shape)
  Tensor video;                    // (1, C, F, Hl, Wl)
  Tensor audio;                    // (2, Ca, A)
};

// A visual condition noised to the level it is held at (spec/sampling.md §5; the reference's
// scheduler.scale_noise(z, 0.999, ε)): t·z + (1 − t)·ε in float32 with t = 0.999f, one rounding per operation.
Tensor noised_condition(const Tensor& latent, const Tensor& noise);

// The rows a request starts from (spec/sampling.md §5), in the order the reference draws them from the request's
// generator: one draw per visual condition (its normalized latent (1, C, Fc, hc, wc), packed order), each noised
// once by noised_condition and patchified; then the generated video noise (1, C, F, Hl, Wl); then the audio noise,
// drawn directly in row layout (2A, Ca). A supplied tensor consumes nothing from the stream, so the next draw starts
// at the offset the supplied one would have started at — as with the reference's generator. ref2va's reference
// audio rows ([2·A_j, Ca] each, request order) lead the audio rows clean, never noised (the reference's
// MiniMaxH3Ref2VAPrepareLatentsStep).
DenoiseState initial_state(const LatentGeometry& g, const std::vector<Tensor>& condition_latents,
                           const NoiseInputs& noise, const std::vector<Tensor>& reference_audio = {});

}  // namespace h3
