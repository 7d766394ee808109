#include "pipeline/sampler.h"

#include <cstring>

#include "pipeline/rng.h"
#include "util/log.h"

namespace h3 {

namespace {

void check_rows(const Tensor& t, int64_t rows, int64_t width, const char* what) {
  H3_CHECK(t.defined() && t.device() == Device::CPU && t.dtype() == DType::F32 && t.ndim() == 2 &&
               t.dim(0) == rows && t.dim(1) == width,
           what, " must be a host F32 tensor [", rows, ", ", width, "], got ", t.defined() ? t.str() : "nothing");
}

// Ends the model's request when the loop is left by an exception (the normal path ends it itself, so that an error
// there is reported).
struct RequestScope {
  VelocityModel& model;
  bool active = true;
  void end() {
    active = false;
    model.end_request();
  }
  ~RequestScope() {
    if (!active) return;
    try {
      model.end_request();
    } catch (...) {  // already unwinding from the error that matters
    }
  }
};

}  // namespace

void run_denoising_loop(VelocityModel& model, const PackedLayout& layout, const Tensor& text,
                        const FlowSchedule& video, const FlowSchedule& audio, const LatentGeometry& geometry,
                        DenoiseState& state, const SamplerOptions& options) {
  const int64_t num_video = static_cast<int64_t>(layout.video_indices.size());
  const int64_t num_audio = static_cast<int64_t>(layout.audio_indices.size());
  H3_CHECK(state.video_rows.defined() && state.audio_rows.defined(), "the denoising state has no rows");
  const int64_t video_width = state.video_rows.dim(-1), audio_width = state.audio_rows.dim(-1);
  check_rows(state.video_rows, num_video, video_width, "the video rows");
  check_rows(state.audio_rows, num_audio, audio_width, "the audio rows");
  const int64_t cond_video = layout.num_condition_video_rows, cond_audio = layout.num_condition_audio_rows;
  H3_CHECK(cond_video <= num_video && cond_audio <= num_audio, "the layout has more conditioning rows than rows");

  H3_CHECK(video.passes() >= 1, "the denoising loop needs a schedule with at least one pass");
  const TimestepPlan plan = TimestepPlan::make(layout, video, audio);
  const int64_t passes = plan.passes();
  // Only the generated rows are stepped; the leading conditioning rows are never written.
  const int64_t gen_video = num_video - cond_video, gen_audio = num_audio - cond_audio;
  float* video_x = state.video_rows.ptr<float>() + cond_video * video_width;
  float* audio_x = state.audio_rows.ptr<float>() + cond_audio * audio_width;
  const bool want_x0 = static_cast<bool>(options.on_pass);
  PassProgress progress;
  progress.passes = passes;
  progress.geometry = &geometry;
  if (want_x0) {
    progress.video_x0 = Tensor::empty({gen_video, video_width}, DType::F32);
    progress.audio_x0 = Tensor::empty({gen_audio, audio_width}, DType::F32);
  }

  model.begin_request(layout, text, plan.timesteps());
  RequestScope scope{model};
  for (int64_t i = 0; i < passes; ++i) {
    if (options.cancel && options.cancel->load()) throw Cancelled();
    const Velocity v = model.step(state.video_rows, state.audio_rows, plan.row_indices(layout, i));
    check_rows(v.video, num_video, video_width, "the model's video prediction");
    check_rows(v.audio, num_audio, audio_width, "the model's audio prediction");
    video.step(i, v.video.ptr<float>() + cond_video * video_width, video_x, gen_video * video_width,
               want_x0 ? progress.video_x0.ptr<float>() : nullptr);
    audio.step(i, v.audio.ptr<float>() + cond_audio * audio_width, audio_x, gen_audio * audio_width,
               want_x0 ? progress.audio_x0.ptr<float>() : nullptr);
    if (want_x0) {
      progress.pass = i;
      options.on_pass(progress);
    }
  }
  scope.end();
}

std::pair<FlowSchedule, FlowSchedule> make_schedules(int64_t passes, double video_shift, double audio_shift) {
  H3_CHECK(passes >= 1, "a request needs at least one model pass, got ", passes);
  FlowSchedule video = FlowSchedule::shifted(video_shift, passes + 1);
  FlowSchedule audio = FlowSchedule::shifted(audio_shift, passes + 1);
  return {std::move(video), std::move(audio)};
}

DenoiseState initial_t2va_state(const LatentGeometry& g, uint64_t seed, const Tensor& video_noise,
                                const Tensor& audio_noise) {
  NoiseStream stream(seed);
  DenoiseState state;
  if (video_noise.defined()) {
    H3_CHECK(video_noise.shape() == g.video_latent_shape(), "the injected video noise must have shape ",
             shape_str(g.video_latent_shape()), ", got ", video_noise.str());
    state.video_rows = patchify_video(video_noise, g.patch);
  } else {
    state.video_rows = patchify_video(stream.draw(g.video_latent_shape()), g.patch);
  }
  if (audio_noise.defined()) {
    H3_CHECK(audio_noise.shape() == g.audio_latent_shape(), "the injected audio noise must have shape ",
             shape_str(g.audio_latent_shape()), ", got ", audio_noise.str());
    state.audio_rows = audio_latents_to_rows(audio_noise);
  } else {
    state.audio_rows = stream.draw({g.audio_rows(), g.audio_channels});
  }
  return state;
}

DenoiseResult denoise_t2va(VelocityModel& model, const T2vaDenoiseInputs& in, const SamplerOptions& options) {
  const LatentGeometry& g = in.geometry;
  H3_CHECK(in.text.defined() && in.text.ndim() == 2 && in.text.dim(0) >= 1,
           "the text embeddings must be a [Nt, text_dim] tensor with Nt ≥ 1, got ",
           in.text.defined() ? in.text.str() : "nothing");
  std::vector<int64_t> tags = in.text_tags;
  if (tags.empty()) tags.assign(static_cast<size_t>(in.text.dim(0)), kTagText);
  H3_CHECK(static_cast<int64_t>(tags.size()) == in.text.dim(0), "there are ", tags.size(), " text tags for ",
           in.text.dim(0), " text rows");
  const PackedLayout layout = build_t2va_layout(tags, g);
  DenoiseState state = initial_t2va_state(g, in.seed, in.video_noise, in.audio_noise);
  log_debug("denoise: L=", layout.length(), " (text ", layout.num_text(), ", audio ", layout.audio_indices.size(),
            ", video ", layout.video_indices.size(), "), ", in.video_schedule.passes(), " passes");
  run_denoising_loop(model, layout, in.text, in.video_schedule, in.audio_schedule, g, state, options);
  DenoiseResult out;
  out.latents = unpatchify_video(state.video_rows, g);
  out.audio_latents = audio_rows_to_latents(state.audio_rows, g.audio_latents);
  return out;
}

}  // namespace h3
