#include "pipeline/sampler.h"

#include <algorithm>
#include <cstring>

#include "pipeline/reuse.h"
#include "pipeline/rng.h"
#include "util/cancel.h"
#include "util/log.h"

// noised_condition must round as the reference's float32 tensor ops do: one rounding per operation.
#include "util/strict_fp.h"

namespace h3 {

Tensor PassProgress::video_latents() const { return unpatchify_video(video_x0, *geometry); }

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

// Host F32 tensors of one row width stacked along dim 0.
Tensor concat_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.dim(0);
  Tensor out = Tensor::empty({rows, parts.front().dim(1)}, DType::F32);
  float* dst = out.ptr<float>();
  for (const Tensor& p : parts) {
    H3_CHECK(p.dim(1) == out.dim(1), "rows of width ", p.dim(1), " and ", out.dim(1), " cannot be stacked");
    dst = std::copy_n(p.ptr<float>(), p.numel(), dst);
  }
  return out;
}

// The rows after the first `n` (a view).
Tensor drop_leading_rows(const Tensor& rows, int64_t n) { return rows.slice(n, rows.dim(0)); }

// One modality's generated-row velocities of the two latest model evaluations (--reuse), and what a skipped pass
// steps with: h3.c's denoise loop (h3_dit_denoise_euler_preview with its extrapolate_velocity), linear in that
// modality's grid σ.
class VelocityHistory {
 public:
  explicit VelocityHistory(int64_t n)
      : last_(static_cast<size_t>(n)), previous_(last_.size()), skipped_(last_.size()) {}

  void evaluated(const float* v, int64_t pass) {
    last_.swap(previous_);
    std::copy_n(v, last_.size(), last_.data());
    previous_pass_ = last_pass_;
    last_pass_ = pass;
  }

  // The velocity of skipped pass `pass` on the grid `sigmas`: the latest evaluation's alone when there is only one,
  // else extrapolated through the two latest to σ_pass.
  const float* skipped(int64_t pass, const std::vector<float>& sigmas) {
    H3_CHECK(last_pass_ >= 0, "pass ", pass, " was skipped before any model evaluation");
    if (previous_pass_ < 0) return last_.data();
    const float ratio = reuse_extrapolation_ratio(sigmas[pass], sigmas[last_pass_], sigmas[previous_pass_]);
    extrapolate_velocity(last_.data(), previous_.data(), ratio, skipped_.data(), static_cast<int64_t>(skipped_.size()));
    return skipped_.data();
  }

 private:
  std::vector<float> last_, previous_, skipped_;
  int64_t last_pass_ = -1, previous_pass_ = -1;
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
  const TimestepPlan plan = TimestepPlan::make(layout, video, audio, options.evaluated);
  const int64_t passes = plan.passes();
  const std::vector<bool> evaluated =
      options.evaluated.empty() ? std::vector<bool>(static_cast<size_t>(passes), true) : options.evaluated;
  H3_CHECK(evaluated.front(), "the first pass must evaluate the model");
  const bool reuse = count_evaluated(evaluated) < passes;
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
  VelocityHistory video_history(reuse ? gen_video * video_width : 0);
  VelocityHistory audio_history(reuse ? gen_audio * audio_width : 0);

  model.begin_request(layout, text, plan.timesteps());
  RequestScope scope{model};
  for (int64_t i = 0; i < passes; ++i) {
    throw_if_cancelled();  // the caller's flag (util/cancel.h), also checked inside the model's pass
    Velocity v;
    const float *video_v = nullptr, *audio_v = nullptr;
    if (evaluated[i]) {
      v = model.step(state.video_rows, state.audio_rows, plan.row_indices(layout, i));
      check_rows(v.video, num_video, video_width, "the model's video prediction");
      check_rows(v.audio, num_audio, audio_width, "the model's audio prediction");
      video_v = v.video.ptr<float>() + cond_video * video_width;
      audio_v = v.audio.ptr<float>() + cond_audio * audio_width;
      if (reuse) {
        video_history.evaluated(video_v, i);
        audio_history.evaluated(audio_v, i);
      }
    } else {
      video_v = video_history.skipped(i, video.sigmas());
      audio_v = audio_history.skipped(i, audio.sigmas());
    }
    video.step(i, video_v, video_x, gen_video * video_width, want_x0 ? progress.video_x0.ptr<float>() : nullptr);
    audio.step(i, audio_v, audio_x, gen_audio * audio_width, want_x0 ? progress.audio_x0.ptr<float>() : nullptr);
    if (want_x0) {
      progress.pass = i;
      progress.evaluated = evaluated[i];
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

Tensor noised_condition(const Tensor& latent, const Tensor& noise) {
  H3_CHECK(latent.defined() && noise.defined() && latent.shape() == noise.shape() &&
               latent.dtype() == DType::F32 && noise.dtype() == DType::F32,
           "a condition and its noise must be F32 tensors of one shape, got ", latent.defined() ? latent.str() : "nothing",
           " and ", noise.defined() ? noise.str() : "nothing");
  const float t = kConditionNoiseLevel;
  const float rest = 1.0f - t;  // (1.0 - timestep) of a float32 tensor: float32
  Tensor out = Tensor::empty(latent.shape(), DType::F32);
  const float* z = latent.ptr<float>();
  const float* e = noise.ptr<float>();
  float* o = out.ptr<float>();
  for (int64_t i = 0; i < latent.numel(); ++i) {
    const float clean = t * z[i];
    const float mixed = rest * e[i];
    o[i] = clean + mixed;
  }
  return out;
}

DenoiseState initial_state(const LatentGeometry& g, const std::vector<Tensor>& condition_latents,
                           const NoiseInputs& noise, const std::vector<Tensor>& reference_audio) {
  H3_CHECK(noise.conditions.empty() || noise.conditions.size() == condition_latents.size(), "there are ",
           noise.conditions.size(), " condition noises for ", condition_latents.size(), " visual conditions");
  NoiseStream stream(noise.seed);
  auto drawn_or_given = [&](const Tensor& given, const Shape& shape, const std::string& what) {
    if (!given.defined()) return stream.draw(shape);
    H3_CHECK(given.shape() == shape, "the injected ", what, " must have shape ", shape_str(shape), ", got ",
             given.str());
    return given.to_f32();
  };

  std::vector<Tensor> rows;
  for (size_t i = 0; i < condition_latents.size(); ++i) {
    const Tensor& z = condition_latents[i];
    H3_CHECK(z.defined() && z.ndim() == 5 && z.dim(0) == 1 && z.dim(1) == g.latent_channels,
             "visual condition ", i, " must be a (1, ", g.latent_channels, ", F, h, w) latent, got ",
             z.defined() ? z.str() : "nothing");
    const Tensor eps = drawn_or_given(noise.conditions.empty() ? Tensor() : noise.conditions[i], z.shape(),
                                      cat("noise of visual condition ", i));
    rows.push_back(patchify_video(noised_condition(z.to_f32(), eps), g.patch));
  }
  rows.push_back(patchify_video(drawn_or_given(noise.video, g.video_latent_shape(), "video noise"), g.patch));

  DenoiseState state;
  state.video_rows = concat_rows(rows);
  const Tensor target_audio =
      noise.audio.defined() ? audio_latents_to_rows(drawn_or_given(noise.audio, g.audio_latent_shape(), "audio noise"))
                            : stream.draw({g.audio_rows(), g.audio_channels});
  if (reference_audio.empty()) {
    state.audio_rows = target_audio;
    return state;
  }
  std::vector<Tensor> audio_rows;
  for (const Tensor& r : reference_audio) {
    H3_CHECK(r.defined() && r.ndim() == 2 && r.dim(1) == g.audio_channels && r.dtype() == DType::F32,
             "reference audio rows must be [rows, ", g.audio_channels, "] F32, got ", r.defined() ? r.str() : "nothing");
    audio_rows.push_back(r);
  }
  audio_rows.push_back(target_audio);
  state.audio_rows = concat_rows(audio_rows);
  return state;
}

DenoiseResult denoise(VelocityModel& model, const PackedLayout& layout, const Tensor& text, const FlowSchedule& video,
                      const FlowSchedule& audio, const LatentGeometry& g, DenoiseState state,
                      const SamplerOptions& options) {
  H3_CHECK(text.defined() && text.ndim() == 2 && text.dim(0) == layout.num_text(),
           "the text embeddings must be a [", layout.num_text(), ", text_dim] tensor (one row per text row of the "
           "layout), got ", text.defined() ? text.str() : "nothing");
  log_debug("denoise: L=", layout.length(), " (text ", layout.num_text(), ", conditioning video ",
            layout.num_condition_video_rows, ", audio ", layout.audio_indices.size(), ", video ",
            layout.video_indices.size(), "), ", video.passes(), " passes");
  run_denoising_loop(model, layout, text, video, audio, g, state, options);
  const int64_t cond_video = layout.num_condition_video_rows, cond_audio = layout.num_condition_audio_rows;
  DenoiseResult out;
  out.latents = unpatchify_video(drop_leading_rows(state.video_rows, cond_video), g);
  out.audio_latents = audio_rows_to_latents(drop_leading_rows(state.audio_rows, cond_audio), g.audio_latents);
  return out;
}

}  // namespace h3
