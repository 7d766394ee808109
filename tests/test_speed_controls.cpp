// The pipeline's speed controls (issue 16) by their definitions: --reuse (the evaluated passes and the extrapolated
// velocities of the skipped ones), the schedule of few passes, the native-256 spatial RoPE, the render canvas'
// rules. Each is off by default; the defaults are the exact path (tests below and the existing sampler, layout and
// end-to-end tests, which run the defaults).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>

#include "pipeline/layout.h"
#include "pipeline/request.h"
#include "pipeline/request_json.h"
#include "pipeline/reuse.h"
#include "pipeline/rng.h"
#include "pipeline/sampler.h"
#include "util/scoped_env.h"

// The expected extrapolations are written as h3.c writes them, one rounding per operation.
#include "util/strict_fp.h"

namespace h3 {
namespace {

std::vector<int64_t> passes_of(const std::vector<bool>& evaluated) {
  std::vector<int64_t> out;
  for (size_t p = 0; p < evaluated.size(); ++p)
    if (evaluated[p]) out.push_back(static_cast<int64_t>(p));
  return out;
}

// How many float32 values lie between two positive floats.
int64_t ulp_distance(float a, float b) {
  int32_t ia = 0, ib = 0;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- --reuse: which passes evaluate the model

TEST(SpeedReuse, ScheduleIsTheFirstTheLastAndEveryNth) {
  // h3.c's h3_dit_reuse_schedule and its README: at 20 passes 20, 11 or 8 evaluations.
  EXPECT_EQ(count_evaluated(reuse_schedule(20, 1)), 20);
  EXPECT_EQ(passes_of(reuse_schedule(20, 2)), (std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 19}));
  EXPECT_EQ(passes_of(reuse_schedule(20, 3)), (std::vector<int64_t>{0, 3, 6, 9, 12, 15, 18, 19}));
  EXPECT_EQ(passes_of(reuse_schedule(7, 3)), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(passes_of(reuse_schedule(2, 3)), (std::vector<int64_t>{0, 1}));
  EXPECT_THROW(reuse_schedule(0, 2), Error);
  EXPECT_THROW(reuse_schedule(4, 0), Error);
}

TEST(SpeedReuse, ExplicitPassListReplacesTheScheduleOnlyWithReuse) {
  EXPECT_EQ(passes_of(parse_reuse_passes("0,5,6,19", 20)), (std::vector<int64_t>{0, 5, 6, 19}));
  for (const char* bad : {"", "0,,19", "1,19", "0,18", "0,5,5,19", "0,-1,19", "0, 5,19", "0,20", "0,5,19,", "x"})
    EXPECT_NE(error_of([&] { parse_reuse_passes(bad, 20); }).find("H3_REUSE_STEPS must list"), std::string::npos)
        << "'" << bad << "'";
  ScopedEnv env("H3_REUSE_STEPS", "0,1,7");
  EXPECT_EQ(passes_of(evaluated_passes(8, 2)), (std::vector<int64_t>{0, 1, 7}));
  EXPECT_EQ(count_evaluated(evaluated_passes(8, 1)), 8);  // as in h3.c: the list applies only with reuse > 1
}

TEST(SpeedReuse, ExtrapolationRatioIsLinearInSigmaAndClamped) {
  EXPECT_EQ(reuse_extrapolation_ratio(0.5f, 0.625f, 0.875f), 0.5f);  // (0.5 − 0.625) / (0.625 − 0.875)
  EXPECT_EQ(reuse_extrapolation_ratio(0.0f, 0.5f, 0.5625f), 2.0f);   // 8, clamped
  EXPECT_EQ(reuse_extrapolation_ratio(1.0f, 0.5f, 0.5625f), -2.0f);  // −8, clamped
  EXPECT_EQ(reuse_extrapolation_ratio(0.3f, 0.5f, 0.5f), 0.0f);      // no spacing: no slope
  const float last[] = {1.0f, -2.0f}, previous[] = {0.5f, 2.0f};
  float out[2];
  extrapolate_velocity(last, previous, 0.5f, out, 2);
  EXPECT_EQ(out[0], 1.25f);
  EXPECT_EQ(out[1], -4.0f);
}

// Returns a velocity of its own per call (a seeded draw, whatever the rows), and records what it was asked.
class RecordingModel : public VelocityModel {
 public:
  void begin_request(const PackedLayout& layout, const Tensor&, const std::vector<float>& timesteps) override {
    layout_ = &layout;
    timesteps_ = timesteps;
  }
  Velocity step(const Tensor& video_rows, const Tensor& audio_rows,
                const std::vector<int64_t>& timestep_index_per_row) override {
    seen_video_t.push_back(timesteps_.at(timestep_index_per_row.at(layout_->video_indices.at(0))));
    Velocity v{NoiseStream(100 + calls).draw(video_rows.shape()), NoiseStream(200 + calls).draw(audio_rows.shape())};
    given.push_back(v);
    ++calls;
    return v;
  }
  void end_request() override {}

  int calls = 0;
  std::vector<float> seen_video_t;
  std::vector<Velocity> given;
  std::vector<float> timesteps_;

 private:
  const PackedLayout* layout_ = nullptr;
};

struct LoopFixture {
  LatentGeometry g = LatentGeometry::make(64, 96, 22);
  PackedLayout layout = build_layout({std::vector<int64_t>(4, kTagText), g, {}, {}});
  Tensor text = Tensor::zeros({4, 16}, DType::F32);
  std::pair<FlowSchedule, FlowSchedule> schedules = make_schedules(7);
};

// v_last + r·(v_last − v_previous) with r from the modality's own σ grid, written out here.
Tensor extrapolated(const Tensor& last, const Tensor& previous, const std::vector<float>& sigmas, int64_t pass,
                    int64_t last_pass, int64_t previous_pass) {
  const float step = sigmas[pass] - sigmas[last_pass];
  const float spacing = sigmas[last_pass] - sigmas[previous_pass];
  const float r = std::clamp(step / spacing, -2.0f, 2.0f);
  Tensor out = Tensor::empty(last.shape(), DType::F32);
  for (int64_t k = 0; k < last.numel(); ++k) {
    const float slope = last.ptr<float>()[k] - previous.ptr<float>()[k];
    const float change = r * slope;
    out.ptr<float>()[k] = last.ptr<float>()[k] + change;
  }
  return out;
}

TEST(SpeedReuse, SkippedPassesStepWithExactlyTheExtrapolatedVelocity) {
  LoopFixture f;
  const FlowSchedule &video = f.schedules.first, &audio = f.schedules.second;
  const std::vector<bool> evaluated = reuse_schedule(7, 3);  // passes 0, 3, 6; 1, 2, 4, 5 skipped
  RecordingModel model;
  DenoiseState state = initial_state(f.g, {}, NoiseInputs{});
  Tensor video_x = state.video_rows.clone(), audio_x = state.audio_rows.clone();
  std::vector<bool> reported;
  SamplerOptions opt;
  opt.evaluated = evaluated;
  opt.on_pass = [&](const PassProgress& p) { reported.push_back(p.evaluated); };
  run_denoising_loop(model, f.layout, f.text, video, audio, f.g, state, opt);

  // The model ran at the evaluated passes only, at their timesteps, and was given only their timesteps.
  ASSERT_EQ(model.calls, 3);
  EXPECT_EQ(model.seen_video_t, (std::vector<float>{video.timesteps()[0], video.timesteps()[3], video.timesteps()[6]}));
  for (int64_t p : {1, 2, 4, 5})
    EXPECT_EQ(std::count(model.timesteps_.begin(), model.timesteps_.end(), video.timesteps()[p]), 0) << p;
  EXPECT_EQ(reported, evaluated);

  // Replay: pass 1 and 2 reuse pass 0's velocity as is (one evaluation so far); 4 and 5 extrapolate through 0 and 3.
  const std::vector<Velocity>& v = model.given;
  auto velocity_at = [&](int64_t pass, bool is_video) -> Tensor {
    auto pick = [&](int call) { return is_video ? v[call].video : v[call].audio; };
    const std::vector<float>& sigmas = is_video ? video.sigmas() : audio.sigmas();
    if (pass % 3 == 0) return pick(static_cast<int>(pass / 3));
    if (pass < 3) return pick(0);
    return extrapolated(pick(1), pick(0), sigmas, pass, 3, 0);
  };
  for (int64_t p = 0; p < 7; ++p) {
    const Tensor vv = velocity_at(p, true), va = velocity_at(p, false);
    video.step(p, vv.ptr<float>(), video_x.ptr<float>(), video_x.numel());
    audio.step(p, va.ptr<float>(), audio_x.ptr<float>(), audio_x.numel());
  }
  EXPECT_EQ(max_abs_diff(state.video_rows, video_x), 0.0);
  EXPECT_EQ(max_abs_diff(state.audio_rows, audio_x), 0.0);
  // The audio grid is not the video grid: its ratio differs (so each modality used its own).
  EXPECT_NE(reuse_extrapolation_ratio(video.sigmas()[4], video.sigmas()[3], video.sigmas()[0]),
            reuse_extrapolation_ratio(audio.sigmas()[4], audio.sigmas()[3], audio.sigmas()[0]));
}

TEST(SpeedReuse, ReuseOneIsTheExactPathBitForBit) {
  LoopFixture f;
  RecordingModel exact, every;
  DenoiseState a = initial_state(f.g, {}, NoiseInputs{}), b = a;
  b.video_rows = a.video_rows.clone();
  b.audio_rows = a.audio_rows.clone();
  run_denoising_loop(exact, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, a);
  SamplerOptions opt;
  opt.evaluated = reuse_schedule(7, 1);
  run_denoising_loop(every, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, b, opt);
  EXPECT_EQ(exact.calls, 7);
  EXPECT_EQ(exact.timesteps_, every.timesteps_);
  EXPECT_EQ(max_abs_diff(a.video_rows, b.video_rows), 0.0);
  EXPECT_EQ(max_abs_diff(a.audio_rows, b.audio_rows), 0.0);
}

TEST(SpeedReuse, TheFirstPassMustEvaluate) {
  LoopFixture f;
  RecordingModel model;
  DenoiseState state = initial_state(f.g, {}, NoiseInputs{});
  SamplerOptions opt;
  opt.evaluated = std::vector<bool>(7, true);
  opt.evaluated[0] = false;
  EXPECT_THROW(run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state, opt),
               Error);
  opt.evaluated = std::vector<bool>(6, true);  // one flag short
  EXPECT_THROW(run_denoising_loop(model, f.layout, f.text, f.schedules.first, f.schedules.second, f.g, state, opt),
               Error);
}

// ---- --steps 2..7: the low-budget schedule is the released linear grid with its terminal point

TEST(SpeedLowBudget, FewPassesUseTheReleasedLinearGridWithOneTerminalPoint) {
  for (int64_t passes = 2; passes <= 8; ++passes) {
    SCOPED_TRACE("passes " + std::to_string(passes));
    const auto [video, audio] = make_schedules(passes);
    ASSERT_EQ(video.passes(), passes);
    ASSERT_EQ(video.sigmas().size(), static_cast<size_t>(passes + 1));
    EXPECT_EQ(video.sigmas().front(), 1.0f);
    EXPECT_EQ(video.sigmas().back(), 0.0f);
    EXPECT_EQ(audio.sigmas().back(), 0.0f);
    // h3.c's h3_serving_schedule_build: b = 1 − k/N, σ = s·b / (1 + (s − 1)·b), the last point 0. Our base points
    // are torch's float32 linspace (the reference's), which computes the second half from the end (0 + |step|·(N −
    // k)): the same value rounded differently, at most 2 ulp from h3.c's for these counts (and σ too), exactly equal
    // in the points both round alike.
    const std::vector<float> base = torch_linspace_f32(1.0f, 0.0f, passes + 1);
    for (int64_t k = 0; k < passes; ++k) {
      const float b = 1.0f - static_cast<float>(k) / static_cast<float>(passes);
      EXPECT_LE(ulp_distance(base[k], b), 2) << "k " << k;
      for (const auto& [schedule, shift] : {std::pair{&video, 12.0f}, std::pair{&audio, 3.0f}}) {
        const float numerator = shift * b;
        const float scaled = (shift - 1.0f) * b;
        const float h3c = numerator / (1.0f + scaled);
        EXPECT_LE(ulp_distance(schedule->sigmas()[k], h3c), 2) << "k " << k << " shift " << shift;
      }
    }
  }
  // h3.c's own test values of its four-pass grid.
  const auto [video, audio] = make_schedules(4);
  EXPECT_NEAR(video.sigmas()[1], 36.0 / 37.0, 1e-7);
  EXPECT_NEAR(audio.sigmas()[1], 9.0 / 10.0, 1e-7);
}

// ---- native 256: halved spatial RoPE

TEST(SpeedRope, HalvedScaleMultipliesTheSpatialCoordinatesOfEveryRow) {
  const LatentGeometry g = LatentGeometry::make(256, 256, 22);
  for (const std::vector<KeyframeAnchor>& keyframes :
       {std::vector<KeyframeAnchor>{}, std::vector<KeyframeAnchor>{KeyframeAnchor::First, KeyframeAnchor::Last}}) {
    LayoutSpec spec{std::vector<int64_t>(5, kTagText), g, keyframes, {}};
    const PackedLayout released = build_layout(spec);
    spec.spatial_rope_scale = 0.5;
    const PackedLayout halved = build_layout(spec);
    ASSERT_EQ(released.length(), halved.length());
    EXPECT_EQ(released.roles, halved.roles);
    const double* a = released.position_ids.ptr<double>();
    const double* b = halved.position_ids.ptr<double>();
    std::array<int64_t, kRowRoles> moved{};
    for (int64_t row = 0; row < released.length(); ++row) {
      EXPECT_EQ(b[row * 3], a[row * 3]);  // time untouched
      EXPECT_EQ(b[row * 3 + 1], a[row * 3 + 1] * 0.5);
      EXPECT_EQ(b[row * 3 + 2], a[row * 3 + 2] * 0.5);
      const bool scaled = b[row * 3 + 1] != a[row * 3 + 1] || b[row * 3 + 2] != a[row * 3 + 2];
      moved[static_cast<int>(released.roles[row])] += scaled;
    }
    // Conditioning (keyframe) rows and audio rows (at the width extremes) are scaled like the target video rows.
    EXPECT_GT(moved[static_cast<int>(RowRole::TargetVideo)], 0);
    EXPECT_GT(moved[static_cast<int>(RowRole::TargetAudio)], 0);
    EXPECT_EQ(moved[static_cast<int>(RowRole::ConditionVideo)] > 0, !keyframes.empty());
  }
  // Reference rows (ref2va) too.
  LayoutSpec refs{std::vector<int64_t>(3, kTagText), g, {}, {ReferenceBlock{ReferenceBlock::Kind::Image, 1, 8, 16, 0}}};
  const PackedLayout released = build_layout(refs);
  refs.spatial_rope_scale = 0.5;
  const PackedLayout halved = build_layout(refs);
  const int64_t first_reference_row = released.video_indices.front() * 3;
  EXPECT_EQ(halved.position_ids.ptr<double>()[first_reference_row + 2],
            released.position_ids.ptr<double>()[first_reference_row + 2] * 0.5);
  EXPECT_NE(released.position_ids.ptr<double>()[first_reference_row + 2], 0.0);
}

TEST(SpeedRope, HalvedExactlyOnA256CanvasUnlessTheReferenceRopeIsAsked) {
  auto scale = [](int64_t w, int64_t h, std::optional<int64_t> rw, std::optional<int64_t> rh, bool reference) {
    GenerationRequest r;
    r.prompt = "x";
    r.width = w;
    r.height = h;
    r.render_width = rw;
    r.render_height = rh;
    r.use_reference_rope = reference;
    return validate_request(r).spatial_rope_scale();
  };
  EXPECT_EQ(scale(256, 256, {}, {}, false), 0.5);
  EXPECT_EQ(scale(256, 256, {}, {}, true), 1.0);
  EXPECT_EQ(scale(512, 512, 256, 256, false), 0.5);  // the canvas the model runs on decides
  EXPECT_EQ(scale(512, 512, {}, {}, false), 1.0);
  EXPECT_EQ(scale(256, 224, {}, {}, false), 1.0);
  EXPECT_EQ(scale(864, 480, {}, {}, false), 1.0);  // the default canvas: the released coordinates
}

// ---- the request's rules

GenerationRequest request_at(int64_t w, int64_t h) {
  GenerationRequest r;
  r.prompt = "a fox";
  r.width = w;
  r.height = h;
  return r;
}

std::string problems_of(const GenerationRequest& r) {
  std::string out;
  for (const std::string& p : request_problems(r)) out += p + "\n";
  return out;
}

TEST(SpeedRequest, DefaultsAreTheExactPath) {
  const GenerationRequest r;
  EXPECT_EQ(r.reuse, 1);
  EXPECT_FALSE(r.render_width || r.render_height || r.use_reference_rope);
  GenerationRequest q = request_at(864, 480);
  const ResolvedRequest v = validate_request(q);
  EXPECT_EQ(v.render_width, 864);
  EXPECT_EQ(v.render_height, 480);
  EXPECT_FALSE(v.renders_smaller());
  EXPECT_EQ(v.evaluated_passes, v.steps);
  EXPECT_EQ(describe_speed_controls(v), "");
  EXPECT_EQ(few_passes_reuse_warning(v), "");
}

TEST(SpeedRequest, ReuseRangeAndItsWarning) {
  GenerationRequest r = request_at(512, 512);
  for (int64_t bad : {0, 4, -1}) {
    r.reuse = bad;
    EXPECT_NE(problems_of(r).find("--reuse must be between 1 and 3"), std::string::npos) << bad;
  }
  r.reuse = 2;
  EXPECT_EQ(problems_of(r), "");
  const ResolvedRequest v = validate_request(r);
  EXPECT_EQ(v.evaluated_passes, 11);
  EXPECT_EQ(describe_speed_controls(v), "reuse 2: 11 of 20 passes evaluate the model");
  EXPECT_EQ(few_passes_reuse_warning(v), "");
  r.steps = 7;
  EXPECT_NE(few_passes_reuse_warning(validate_request(r)).find("--reuse 2 with only 7 passes"), std::string::npos);
  // A checkpoint whose default is 7 passes (validate_request's default_steps) warns as well without --steps.
  r.steps.reset();
  EXPECT_NE(few_passes_reuse_warning(validate_request(r, kCanvasMultiple, RequestCheck::Whole,
                                                      kReleaseTransformerBlocks, 7))
                .find("--reuse 2 with only 7 passes"),
            std::string::npos);
  r.steps = 7;
  r.reuse = 1;
  EXPECT_EQ(few_passes_reuse_warning(validate_request(r)), "");
  // A bad H3_REUSE_STEPS is one of the request's problems.
  r.reuse = 3;
  r.steps = 20;
  ScopedEnv env("H3_REUSE_STEPS", "0,3");
  EXPECT_NE(problems_of(r).find("H3_REUSE_STEPS must list"), std::string::npos);
}

TEST(SpeedRequest, RenderCanvasRules) {
  GenerationRequest r = request_at(512, 512);
  r.render_width = 320;
  EXPECT_NE(problems_of(r).find("--render-width and --render-height go together"), std::string::npos);
  r.render_height = 320;
  EXPECT_EQ(problems_of(r), "");
  const ResolvedRequest v = validate_request(r);
  EXPECT_TRUE(v.renders_smaller());
  EXPECT_EQ(v.width, 512);
  EXPECT_EQ(v.render_width, 320);
  EXPECT_EQ(describe_speed_controls(v), "rendered at 320x320, upscaled to 512x512 (lanczos)");
  r.render_height = 300;
  EXPECT_NE(problems_of(r).find("The render height must be a multiple of 32"), std::string::npos);
  r.render_width = 576;
  r.render_height = 576;
  EXPECT_NE(problems_of(r).find("must not be larger than the output canvas 512x512"), std::string::npos);
  r.render_width = 320;
  r.render_height = 256;
  EXPECT_NE(problems_of(r).find("must have the output canvas' aspect ratio (512x512)"), std::string::npos);
  // 864x480 is 9:5: 576x320 keeps it, 640x352 does not.
  GenerationRequest w = request_at(864, 480);
  w.render_width = 576;
  w.render_height = 320;
  EXPECT_EQ(problems_of(w), "");
  w.render_width = 640;
  w.render_height = 352;
  EXPECT_NE(problems_of(w).find("aspect ratio"), std::string::npos);
}

TEST(SpeedRequest, JsonCarriesTheControls) {
  const GenerationRequest r = parse_request_json(
      R"({"prompt": "x", "width": 512, "height": 512, "reuse": 2, "render_width": 384, "render_height": 384,
          "use_reference_rope": true})",
      "");
  EXPECT_EQ(r.reuse, 2);
  EXPECT_EQ(r.render_width, 384);
  EXPECT_EQ(r.render_height, 384);
  EXPECT_TRUE(r.use_reference_rope);
  EXPECT_NE(error_of([] { parse_request_json(R"({"prompt": "x", "use_reference_rope": 1})", ""); })
                .find("\"use_reference_rope\" must be true or false"),
            std::string::npos);
}

}  // namespace
}  // namespace h3
