// The denoising loop with fake models: call protocol, row timesteps, conditioning rows, callbacks, cancellation,
// and the sign convention end to end.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "pipeline/rng.h"
#include "pipeline/sampler.h"
#include "util/cancel.h"

namespace h3 {
namespace {

NoiseInputs seeded(uint64_t seed) {
  NoiseInputs n;
  n.seed = seed;
  return n;
}

// Predicts the exact data-ward velocity towards fixed targets: v = (target − x) / σ_t, so x + σ_t·v = target.
// Records what the loop gives it.
class OracleModel : public VelocityModel {
 public:
  OracleModel(Tensor video_target, Tensor audio_target)
      : video_target_(std::move(video_target)), audio_target_(std::move(audio_target)) {}

  void begin_request(const PackedLayout& layout, const Tensor& text, const std::vector<float>& timesteps) override {
    ++begins;
    layout_ = &layout;
    text_rows = text.dim(0);
    timesteps_ = timesteps;
  }
  Velocity step(const Tensor& video_rows, const Tensor& audio_rows,
                const std::vector<int64_t>& timestep_index_per_row) override {
    EXPECT_EQ(static_cast<int64_t>(timestep_index_per_row.size()), layout_->length());
    std::vector<float> row_t(timestep_index_per_row.size());
    for (size_t r = 0; r < row_t.size(); ++r) row_t[r] = timesteps_.at(timestep_index_per_row[r]);
    seen_row_timesteps.push_back(row_t);
    return {towards(video_target_, video_rows, layout_->video_indices, row_t),
            towards(audio_target_, audio_rows, layout_->audio_indices, row_t)};
  }
  void end_request() override { ++ends; }

  int begins = 0, ends = 0;
  int64_t text_rows = 0;
  std::vector<std::vector<float>> seen_row_timesteps;

 private:
  static Tensor towards(const Tensor& target, const Tensor& x, const std::vector<int64_t>& rows,
                        const std::vector<float>& row_t) {
    Tensor v = Tensor::empty(x.shape(), DType::F32);
    const int64_t width = x.dim(1);
    for (int64_t r = 0; r < x.dim(0); ++r) {
      const float sigma_t = 1.0f - row_t[rows[r]];
      for (int64_t c = 0; c < width; ++c) {
        const int64_t k = r * width + c;
        v.ptr<float>()[k] = (target.ptr<float>()[k] - x.ptr<float>()[k]) / sigma_t;
      }
    }
    return v;
  }

  Tensor video_target_, audio_target_;
  const PackedLayout* layout_ = nullptr;
  std::vector<float> timesteps_;
};

struct Fixture {
  LatentGeometry g = LatentGeometry::make(64, 96, 22);
  PackedLayout layout = build_layout({std::vector<int64_t>(4, kTagText), g, {}, {}});
  Tensor text = Tensor::zeros({4, 16}, DType::F32);
  std::pair<FlowSchedule, FlowSchedule> schedules = make_schedules(6);
  Tensor video_target = NoiseStream(1).draw({g.video_rows(), g.patch_dim()});
  Tensor audio_target = NoiseStream(2).draw({g.audio_rows(), g.audio_channels});
};

TEST(SamplerLoop, ReachesTheModelsCleanEstimateAndFollowsTheProtocol) {
  Fixture f;
  OracleModel model(f.video_target, f.audio_target);
  DenoiseState state = initial_state(f.g, {}, seeded(42));
  run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state);
  EXPECT_EQ(model.begins, 1);
  EXPECT_EQ(model.ends, 1);
  EXPECT_EQ(model.text_rows, 4);
  ASSERT_EQ(model.seen_row_timesteps.size(), 6u);
  // The last pass lands on x0 = x + σ_t·v = target (up to the float32 rounding of v and of the product).
  EXPECT_LT(rel_l2(state.video_rows, f.video_target), 1e-6);
  EXPECT_LT(rel_l2(state.audio_rows, f.audio_target), 1e-6);
  // Row timesteps: text and video rows at the video schedule's t, audio rows at the audio schedule's.
  for (int64_t i = 0; i < 6; ++i) {
    const std::vector<float>& t = model.seen_row_timesteps[i];
    for (int64_t r : f.layout.text_indices) ASSERT_EQ(t[r], f.schedules.first.timesteps()[i]);
    for (int64_t r : f.layout.video_indices) ASSERT_EQ(t[r], f.schedules.first.timesteps()[i]);
    for (int64_t r : f.layout.audio_indices) ASSERT_EQ(t[r], f.schedules.second.timesteps()[i]);
  }
}

TEST(SamplerLoop, EveryPassIsTheSchedulersEulerStep) {
  // Replays the loop by hand with FlowSchedule::step on copies and expects bit-identical rows.
  Fixture f;
  OracleModel model(f.video_target, f.audio_target);
  DenoiseState state = initial_state(f.g, {}, seeded(5));
  Tensor video = state.video_rows.clone(), audio = state.audio_rows.clone();
  run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state);
  OracleModel replay(f.video_target, f.audio_target);
  const TimestepPlan plan = TimestepPlan::make(f.layout, f.schedules.first, f.schedules.second);
  replay.begin_request(f.layout, f.text, plan.timesteps());
  for (int64_t i = 0; i < plan.passes(); ++i) {
    const Velocity v = replay.step(video, audio, plan.row_indices(f.layout, i));
    f.schedules.first.step(i, v.video.ptr<float>(), video.ptr<float>(), video.numel());
    f.schedules.second.step(i, v.audio.ptr<float>(), audio.ptr<float>(), audio.numel());
  }
  EXPECT_EQ(max_abs_diff(state.video_rows, video), 0.0);
  EXPECT_EQ(max_abs_diff(state.audio_rows, audio), 0.0);
}

TEST(SamplerLoop, ConditioningRowsAreNeverUpdated) {
  Fixture f;
  const int64_t cond = f.g.rows_per_frame();
  for (int64_t k = 0; k < cond; ++k) f.layout.roles[f.layout.video_indices[k]] = RowRole::ConditionVideo;
  f.layout.num_condition_video_rows = cond;
  f.layout.roles[f.layout.audio_indices[0]] = RowRole::ReferenceAudio;
  f.layout.roles[f.layout.audio_indices[1]] = RowRole::ReferenceAudio;
  f.layout.num_condition_audio_rows = 2;
  OracleModel model(f.video_target, f.audio_target);
  DenoiseState state = initial_state(f.g, {}, seeded(42));
  const Tensor before_video = state.video_rows.clone(), before_audio = state.audio_rows.clone();
  run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state);
  EXPECT_EQ(max_abs_diff(state.video_rows.slice(0, cond), before_video.slice(0, cond)), 0.0);
  EXPECT_EQ(max_abs_diff(state.audio_rows.slice(0, 2), before_audio.slice(0, 2)), 0.0);
  EXPECT_LT(rel_l2(state.video_rows.slice(cond, f.g.video_rows()), f.video_target.slice(cond, f.g.video_rows())),
            1e-6);
  EXPECT_LT(rel_l2(state.audio_rows.slice(2, f.g.audio_rows()), f.audio_target.slice(2, f.g.audio_rows())), 1e-6);
  // Their timesteps: 0.999 for visual conditioning, 1 for reference audio.
  for (const std::vector<float>& t : model.seen_row_timesteps) {
    EXPECT_EQ(t[f.layout.video_indices[0]], 0.999f);
    EXPECT_EQ(t[f.layout.audio_indices[1]], 1.0f);
  }
}

TEST(SamplerLoop, CallbackSeesEveryPassWithTheCleanEstimate) {
  Fixture f;
  OracleModel model(f.video_target, f.audio_target);
  DenoiseState state = initial_state(f.g, {}, seeded(42));
  std::vector<int64_t> passes;
  SamplerOptions opt;
  opt.on_pass = [&](const PassProgress& p) {
    passes.push_back(p.pass);
    EXPECT_EQ(p.passes, 6);
    // The oracle's clean estimate is the target at every pass.
    EXPECT_LT(rel_l2(p.video_x0, f.video_target), 1e-6);
    EXPECT_LT(rel_l2(p.audio_x0, f.audio_target), 1e-6);
    EXPECT_EQ(p.video_latents().shape(), f.g.video_latent_shape());
  };
  run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state, opt);
  EXPECT_EQ(passes, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(SamplerLoop, CancellationStopsBeforeTheNextPassAndEndsTheRequest) {
  Fixture f;
  OracleModel model(f.video_target, f.audio_target);
  DenoiseState state = initial_state(f.g, {}, seeded(42));
  std::atomic<bool> cancel{false};
  const CancelScope scope(&cancel);  // the caller's flag, as Engine::generate makes it current
  SamplerOptions opt;
  opt.on_pass = [&](const PassProgress& p) {
    if (p.pass == 2) cancel = true;
  };
  EXPECT_THROW(run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state, opt),
               Cancelled);
  EXPECT_EQ(model.seen_row_timesteps.size(), 3u);
  EXPECT_EQ(model.ends, 1);
}

// A model whose output has the wrong shape: the loop reports it and still ends the request.
class BrokenModel : public VelocityModel {
 public:
  void begin_request(const PackedLayout&, const Tensor&, const std::vector<float>&) override {}
  Velocity step(const Tensor& video_rows, const Tensor& audio_rows, const std::vector<int64_t>&) override {
    return {Tensor::zeros({video_rows.dim(0) - 1, video_rows.dim(1)}, DType::F32), audio_rows};
  }
  void end_request() override { ++ends; }
  int ends = 0;
};

TEST(SamplerLoop, ModelOutputIsChecked) {
  Fixture f;
  BrokenModel model;
  DenoiseState state = initial_state(f.g, {}, seeded(42));
  EXPECT_THROW(run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state), Error);
  EXPECT_EQ(model.ends, 1);
}

TEST(SamplerLoop, DenoiseUnpacksAndIsDeterministic) {
  Fixture f;
  const NoiseInputs noise = seeded(9);
  OracleModel m1(f.video_target, f.audio_target), m2(f.video_target, f.audio_target);
  const DenoiseResult a = denoise(m1, f.layout, f.text, f.schedules.first, f.schedules.second, f.g,
                                  initial_state(f.g, {}, noise));
  const DenoiseResult b = denoise(m2, f.layout, f.text, f.schedules.first, f.schedules.second, f.g,
                                  initial_state(f.g, {}, noise));
  EXPECT_EQ(a.latents.shape(), f.g.video_latent_shape());
  EXPECT_EQ(a.audio_latents.shape(), f.g.audio_latent_shape());
  EXPECT_EQ(max_abs_diff(a.latents, b.latents), 0.0);
  EXPECT_EQ(max_abs_diff(a.audio_latents, b.audio_latents), 0.0);
  EXPECT_LT(rel_l2(a.latents, unpatchify_video(f.video_target, f.g)), 1e-6);
  EXPECT_LT(rel_l2(a.audio_latents, audio_rows_to_latents(f.audio_target, f.g.audio_latents)), 1e-6);
  // Text rows must match the layout's.
  OracleModel m3(f.video_target, f.audio_target);
  EXPECT_THROW(denoise(m3, f.layout, Tensor::zeros({2, 16}, DType::F32), f.schedules.first, f.schedules.second, f.g,
                       initial_state(f.g, {}, noise)),
               Error);
}

// fl2va: the keyframe rows lead the video rows, are never written by the loop, and are dropped from the result.
TEST(SamplerLoop, ConditionRowsAreHeldAndDropped) {
  Fixture f;
  const PackedLayout layout = build_layout({std::vector<int64_t>(4, kTagText), f.g, {KeyframeAnchor::First,
                                                                                     KeyframeAnchor::Last}, {}});
  const int64_t cond = layout.num_condition_video_rows;
  ASSERT_EQ(cond, 2 * f.g.rows_per_frame());
  const Shape one_frame = {1, f.g.latent_channels, 1, f.g.latent_height, f.g.latent_width};
  const std::vector<Tensor> conditions = {NoiseStream(3).draw(one_frame), NoiseStream(4).draw(one_frame)};
  DenoiseState state = initial_state(f.g, conditions, seeded(9));
  const Tensor held = state.video_rows.slice(0, cond).clone();
  // The oracle targets every video row, conditioning rows included: only the generated ones may follow it.
  Tensor target = Tensor::empty({cond + f.g.video_rows(), f.g.patch_dim()}, DType::F32);
  NoiseStream(11).fill(target.ptr<float>(), cond * f.g.patch_dim());
  std::copy_n(f.video_target.ptr<float>(), f.video_target.numel(), target.ptr<float>() + cond * f.g.patch_dim());
  OracleModel model(target, f.audio_target);
  run_denoising_loop(model, layout, f.text, f.schedules.first, f.schedules.second, f.g, state);
  EXPECT_EQ(max_abs_diff(state.video_rows.slice(0, cond), held), 0.0);
  EXPECT_LT(rel_l2(state.video_rows.slice(cond, state.video_rows.dim(0)), f.video_target), 1e-6);

  OracleModel again(target, f.audio_target);
  const DenoiseResult out = denoise(again, layout, f.text, f.schedules.first, f.schedules.second, f.g,
                                    initial_state(f.g, conditions, seeded(9)));
  EXPECT_EQ(out.latents.shape(), f.g.video_latent_shape());
  EXPECT_LT(rel_l2(out.latents, unpatchify_video(f.video_target, f.g)), 1e-6);
}

}  // namespace
}  // namespace h3
