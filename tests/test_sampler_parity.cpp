// Parity with the reference t2va denoising blocks (diffusers `MiniMaxH3CoreDenoiseStep`, float32, tiny transformer):
// tests/fixtures/denoise/<case>/ (tools/reference/fx_denoise.py). Layout, schedules and row timesteps must be equal;
// the final latents within relative L2 1e-5.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/dit/dit.h"
#include "pipeline/dit_velocity.h"
#include "pipeline/layout.h"
#include "pipeline/sampler.h"
#include "tools/denoise_tool.h"

namespace h3 {
namespace {

const char* const kCases[] = {"w64_h32_steps3", "w64_h32_steps5", "w32_h96_steps3", "w32_h96_steps5"};

std::string case_dir(const std::string& name) { return std::string(H3_SOURCE_DIR) + "/tests/fixtures/denoise/" + name; }

// Float32 weights and float32 arithmetic on both sides; the difference is summation order inside the transformer
// (matmuls, attention, norms), a few float32 ulps per pass, far below 1e-5 over 2–4 passes.
constexpr double kLatentTolerance = 1e-5;

struct Fixture {
  std::shared_ptr<SafetensorsFile> input, expected;
  Component transformer;
  DitConfig cfg;
  LatentGeometry g;
  int64_t grid_points = 0;

  explicit Fixture(const std::string& name) {
    const std::string dir = case_dir(name);
    // A missing fixture is a failure, not a skip.
    if (!std::filesystem::exists(dir + "/expected.safetensors"))
      throw Error("fixture " + dir + " is missing (tools/reference/make_fixtures.py --only denoise)");
    input = SafetensorsFile::open(dir + "/case.safetensors");
    expected = SafetensorsFile::open(dir + "/expected.safetensors");
    transformer = dit_component_from_dir(dir + "/transformer");
    cfg = load_dit_config(transformer);
    grid_points = static_cast<int64_t>(input->tensor("num_inference_steps").at(0));
    g = LatentGeometry::make(static_cast<int64_t>(input->tensor("width").at(0)),
                             static_cast<int64_t>(input->tensor("height").at(0)),
                             static_cast<int64_t>(input->tensor("num_frames").at(0)), cfg.patch_size,
                             cfg.in_channels, cfg.audio_in_channels);
  }
  Tensor text() const {
    const Tensor t = input->tensor("prompt_embeds");
    return t.reshape({t.dim(1), t.dim(2)});
  }
  std::vector<int64_t> ints(const char* name) const {
    const Tensor t = expected->tensor(name);
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<int64_t>(t.at(i));
    return v;
  }
  std::vector<float> floats(const char* name) const {
    const Tensor t = expected->tensor(name);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(t.at(i));
    return v;
  }
};

class SamplerParity : public ::testing::TestWithParam<const char*> {};

TEST_P(SamplerParity, LayoutEqualsTheReference) {
  const Fixture f(GetParam());
  const PackedLayout l = build_layout({std::vector<int64_t>(static_cast<size_t>(f.text().dim(0)), kTagText), f.g, {}, {}});
  EXPECT_EQ(l.token_tags, f.ints("token_tags"));
  EXPECT_EQ(l.video_indices, f.ints("video_indices"));
  EXPECT_EQ(l.audio_indices, f.ints("audio_indices"));
  EXPECT_EQ(l.text_indices, f.ints("text_indices"));
  const Tensor ref = f.expected->tensor("position_ids");
  ASSERT_EQ(ref.dtype(), DType::F64);
  ASSERT_EQ(ref.shape(), l.position_ids.shape());
  // The brief allows 1e-12; we reproduce the reference's float64 operation order, so ask for equality.
  int64_t unequal = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) unequal += ref.ptr<double>()[i] != l.position_ids.ptr<double>()[i];
  EXPECT_EQ(unequal, 0);
  EXPECT_LE(max_abs_diff(l.position_ids, ref), 1e-12);
}

TEST_P(SamplerParity, SchedulesAndRowTimestepsEqualTheReference) {
  const Fixture f(GetParam());
  const auto [video, audio] = make_schedules(f.grid_points - 1);
  EXPECT_EQ(video.sigmas(), f.floats("video_sigmas"));
  EXPECT_EQ(video.timesteps(), f.floats("video_timesteps"));
  EXPECT_EQ(audio.sigmas(), f.floats("audio_sigmas"));
  EXPECT_EQ(audio.timesteps(), f.floats("audio_timesteps"));
  const PackedLayout l = build_layout({std::vector<int64_t>(static_cast<size_t>(f.text().dim(0)), kTagText), f.g, {}, {}});
  const TimestepPlan plan = TimestepPlan::make(l, video, audio);
  const char* const values[] = {"timestep_0", "timestep_1"};
  const char* const indices[] = {"timestep_indices_0", "timestep_indices_1"};
  for (int pass : {0, 1}) {
    const PassTimesteps ours = reference_pass_timesteps(l, plan, pass);
    EXPECT_EQ(ours.values, f.floats(values[pass])) << "pass " << pass;
    EXPECT_EQ(ours.indices, f.ints(indices[pass])) << "pass " << pass;
  }
}

TEST_P(SamplerParity, FinalLatentsMatchTheReferenceOnCpu) {
  const Fixture f(GetParam());
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<Dit> dit = Dit::load(*be, f.transformer);
  DitVelocityModel model(*dit);
  const auto [video_schedule, audio_schedule] = make_schedules(f.grid_points - 1);
  NoiseInputs noise;
  noise.video = f.input->tensor("latents");
  noise.audio = f.input->tensor("audio_latents");
  const Tensor text = f.text();
  const PackedLayout layout = build_layout({std::vector<int64_t>(static_cast<size_t>(text.dim(0)), kTagText), f.g, {}, {}});
  const DenoiseResult out =
      denoise(model, layout, text, video_schedule, audio_schedule, f.g, initial_state(f.g, {}, noise));
  const Tensor ref_video = f.expected->tensor("latents"), ref_audio = f.expected->tensor("audio_latents");
  ASSERT_EQ(out.latents.shape(), ref_video.shape());
  ASSERT_EQ(out.audio_latents.shape(), ref_audio.shape());
  const double video_err = rel_l2(out.latents, ref_video), audio_err = rel_l2(out.audio_latents, ref_audio);
  std::printf("[ parity   ] %s: video rel L2 %.3g, audio rel L2 %.3g\n", GetParam(), video_err, audio_err);
  EXPECT_LT(video_err, kLatentTolerance);
  EXPECT_LT(audio_err, kLatentTolerance);
  // The loop must have moved away from the noise (a no-op loop would fail here).
  EXPECT_GT(rel_l2(out.latents, noise.video), 1e-2);
}

TEST_P(SamplerParity, ToolWritesTheSameLatents) {
  const std::string dir = case_dir(GetParam());
  const std::string out_path = testing::TempDir() + "/denoise_" + GetParam() + ".safetensors";
  std::filesystem::remove(out_path);
  const std::string transformer = dir + "/transformer", case_path = dir + "/case.safetensors";
  const char* argv[] = {"denoise", "--transformer", transformer.c_str(), "--case", case_path.c_str(),
                        "--out",   out_path.c_str(), "--device", "cpu"};
  ASSERT_EQ(tool_denoise(9, const_cast<char**>(argv)), 0);
  const auto out = SafetensorsFile::open(out_path);
  const auto expected = SafetensorsFile::open(dir + "/expected.safetensors");
  EXPECT_LT(rel_l2(out->tensor("latents"), expected->tensor("latents")), kLatentTolerance);
  EXPECT_LT(rel_l2(out->tensor("audio_latents"), expected->tensor("audio_latents")), kLatentTolerance);
  EXPECT_EQ(out->tensor("latents").dtype(), DType::F32);
}

INSTANTIATE_TEST_SUITE_P(SamplerFixtures, SamplerParity, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// Bad cases: one clear message naming the tensor and the rule, nothing written.
TEST(SamplerParityTool, RejectsBadCasesBeforeAnyWork) {
  const std::string dir = case_dir("w64_h32_steps3");
  const std::string tmp = testing::TempDir();
  const auto input = SafetensorsFile::open(dir + "/case.safetensors");
  auto write_case = [&](const std::string& path, const std::string& replace, const Tensor& with) {
    std::vector<NamedTensor> tensors;
    for (const TensorInfo& info : input->tensors())
      if (info.name != replace) tensors.push_back({info.name, input->tensor(info)});
    if (with.defined()) tensors.push_back({replace, with});
    write_safetensors(path, tensors);
  };
  auto run = [&](const std::string& case_path, const std::string& out) {
    std::filesystem::remove(out);
    const std::string transformer = dir + "/transformer";
    const char* argv[] = {"denoise", "--transformer", transformer.c_str(), "--case", case_path.c_str(),
                          "--out",   out.c_str(),     "--device",          "cpu"};
    testing::internal::CaptureStderr();
    const int rc = tool_denoise(9, const_cast<char**>(argv));
    return std::make_pair(rc, testing::internal::GetCapturedStderr());
  };
  struct Bad {
    const char* tensor;
    Tensor value;
    const char* message;
  };
  const Bad bad[] = {
      {"num_inference_steps", Tensor(), "tensor 'num_inference_steps' is missing"},
      {"num_inference_steps", Tensor::zeros({1}, DType::I64), "num_inference_steps (grid points) must be between 2"},
      {"num_frames", Tensor::from_f32({1}, {100.0f}), "num_frames must be of the form 17·n + 5, got 100"},
      {"width", Tensor::from_f32({}, {48.0f}), "the width must be a positive multiple of 32"},
      {"height", Tensor::from_f32({2}, {32.0f, 32.0f}), "tensor 'height' must be a scalar"},
      {"latents", Tensor::zeros({1, 4, 37, 2, 2}, DType::F32), "tensor 'latents' must be [1, 4, 37, 2, 4]"},
      {"audio_latents", Tensor::zeros({2, 8, 206}, DType::F32), "tensor 'audio_latents' must be [2, 8, 207]"},
      {"prompt_embeds", Tensor::zeros({1, 5, 15}, DType::F32), "tensor 'prompt_embeds' must be (1, Nt, 16)"},
  };
  for (const Bad& b : bad) {
    const std::string case_path = tmp + "/bad_case.safetensors", out = tmp + "/bad_out.safetensors";
    write_case(case_path, b.tensor, b.value);
    const auto [rc, err] = run(case_path, out);
    EXPECT_EQ(rc, 1) << b.message;
    EXPECT_NE(err.find(b.message), std::string::npos) << "stderr: " << err;
    EXPECT_FALSE(std::filesystem::exists(out)) << b.message;
  }
  // Usage errors.
  const char* no_out[] = {"denoise", "--transformer", "x", "--case", "y"};
  testing::internal::CaptureStderr();
  EXPECT_EQ(tool_denoise(5, const_cast<char**>(no_out)), 2);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("--out FILE is required"), std::string::npos);
}

}  // namespace
}  // namespace h3
