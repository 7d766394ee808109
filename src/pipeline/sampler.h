// The denoising loop (spec/sampling.md §7): one model evaluation per pass over the whole packed sequence, then the
// video schedule steps the generated video rows and the audio schedule the generated audio rows. Conditioning rows
// (the leading rows of each index set) are inputs only: they are never updated and their predictions are discarded.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "pipeline/geometry.h"
#include "pipeline/layout.h"
#include "pipeline/schedule.h"
#include "tensor/tensor.h"

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

// Reported after every pass.
struct PassProgress {
  int64_t pass = 0;    // 0-based index of the pass just completed
  int64_t passes = 0;  // total passes of the request
  const LatentGeometry* geometry = nullptr;
  // The clean estimate x0 = x + σ_t·v of the generated rows at this pass (host F32, rows as in the layout), e.g. for
  // previews; video_latents() unpatchifies it to (1, C, F, Hl, Wl).
  Tensor video_x0, audio_x0;
  Tensor video_latents() const { return unpatchify_video(video_x0, *geometry); }
};
using PassCallback = std::function<void(const PassProgress&)>;

struct SamplerOptions {
  PassCallback on_pass;                        // optional
  const std::atomic<bool>* cancel = nullptr;   // optional; checked before every pass
};

// Thrown when the cancel flag was raised; the model's request has been ended.
class Cancelled : public Error {
 public:
  Cancelled() : Error("generation cancelled") {}
};

// The rows being denoised, conditioning rows first (host F32, updated in place).
struct DenoiseState {
  Tensor video_rows;  // [Nv, patch_dim] in video_indices order
  Tensor audio_rows;  // [Na, Ca] in audio_indices order
};

// Runs every pass of the schedules over `state`. `geometry` only serves the progress callback.
void run_denoising_loop(VelocityModel& model, const PackedLayout& layout, const Tensor& text,
                        const FlowSchedule& video, const FlowSchedule& audio, const LatentGeometry& geometry,
                        DenoiseState& state, const SamplerOptions& options = {});

// A whole t2va denoise: layout, noise (drawn or injected), loop, unpacking.
struct T2vaDenoiseInputs {
  LatentGeometry geometry;
  Tensor text;                     // [Nt, text_dim] host
  std::vector<int64_t> text_tags;  // Nt presentation tags; empty = all text (tag 1)
  FlowSchedule video_schedule, audio_schedule;
  uint64_t seed = 42;
  Tensor video_noise;  // optional injected (1, C, F, Hl, Wl); undefined → drawn from the seed's stream
  Tensor audio_noise;  // optional injected (2, Ca, A); undefined → drawn after the video noise
};
struct DenoiseResult {
  Tensor latents;        // (1, C, F, Hl, Wl) F32, normalized latent space
  Tensor audio_latents;  // (2, Ca, A) F32, normalized latent space
};
DenoiseResult denoise_t2va(VelocityModel& model, const T2vaDenoiseInputs& in, const SamplerOptions& options = {});

// The two schedules of a request of `passes` model passes (passes + 1 grid points).
std::pair<FlowSchedule, FlowSchedule> make_schedules(int64_t passes, double video_shift = kDefaultVideoShift,
                                                     double audio_shift = kDefaultAudioShift);

// The initial noise of a t2va request from the seed's stream: video (1, C, F, Hl, Wl) first, then the audio rows
// (2A, Ca). An injected stream consumes nothing from the stream, so the next draw starts at the offset the injected
// one would have started at — as with the reference's generator.
DenoiseState initial_t2va_state(const LatentGeometry& g, uint64_t seed, const Tensor& video_noise = {},
                                const Tensor& audio_noise = {});

}  // namespace h3
