// `h3 tool bench-pipeline` (src/tools/bench_pipeline_tool.h) at tiny sizes on the CPU: the harness runs to completion
// and its JSON lines say what they should — with --fl2va the keyframe encode, the vision tower and the three
// generations (t2va, fl2va with both keyframes, t2va padded to fl2va's packed length); without it, none of them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/bench_pipeline_tool.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Runs the tool with OUT set to a fresh folder; returns its exit status and the JSON lines by "bench" (in order).
struct BenchRun {
  int status = -1;
  std::map<std::string, std::vector<json>> lines;
};

BenchRun run_bench(std::vector<std::string> args, const std::string& name) {
  const fs::path out = fs::temp_directory_path() / ("h3_test_bench_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(out);
  fs::create_directories(out);
  const char* previous = std::getenv("OUT");
  const std::string saved = previous ? previous : "";
  setenv("OUT", out.c_str(), 1);
  args.insert(args.begin(), "bench-pipeline");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  BenchRun r;
  r.status = h3::tool_bench_pipeline(static_cast<int>(argv.size()), argv.data());
  if (previous)
    setenv("OUT", saved.c_str(), 1);
  else
    unsetenv("OUT");
  std::ifstream f(out / "bench_pipeline.jsonl");
  for (std::string line; std::getline(f, line);) {
    const json j = json::parse(line);
    r.lines[j.at("bench").get<std::string>()].push_back(j);
  }
  fs::remove_all(out);
  return r;
}

}  // namespace

TEST(BenchPipeline, TinyFl2vaRunsOnTheCpu) {
  const BenchRun r = run_bench({"--tiny", "--device", "cpu", "--fl2va", "--skip-isolated", "--skip-generation",
                                "--shapes", "64x64x22", "--passes", "2", "--reps-keyframe", "2", "--reps-vision", "2"},
                               "fl2va");
  ASSERT_EQ(r.status, 0);
  ASSERT_EQ(r.lines.count("keyframe_encode"), 1u);
  ASSERT_EQ(r.lines.count("vision_tower"), 1u);
  ASSERT_EQ(r.lines.count("fl2va_generation"), 1u);
  EXPECT_EQ(r.lines.count("pipeline"), 0u);  // --skip-generation
  EXPECT_GT(r.lines.at("pipeline_weights")[0].at("vision_GB").get<double>(), 0.0);

  const json& k = r.lines.at("keyframe_encode")[0];
  EXPECT_TRUE(k.at("ok").get<bool>());
  // One 64x64 frame: one latent frame of 64/16 × 64/16 latents, 8 channels (the tiny VAE).
  EXPECT_EQ(k.at("latent_shape"), json::parse("[1,8,1,4,4]"));
  EXPECT_EQ(k.at("device_s").size(), 2u);
  EXPECT_GT(k.at("median_device_s").get<double>(), 0.0);

  const json& v = r.lines.at("vision_tower")[0];
  EXPECT_TRUE(v.at("ok").get<bool>());
  // The release's processor brings 64x64 up to its 65536-pixel minimum: 256x256, 16x16 patches, 64 tokens.
  EXPECT_EQ(v.at("grid_thw"), json::parse("[1,16,16]"));
  EXPECT_EQ(v.at("tokens").get<int>(), 64);
  EXPECT_EQ(v.at("device_s").size(), 2u);

  const json& g = r.lines.at("fl2va_generation")[0];
  const json &t2va = g.at("t2va"), &fl2va = g.at("fl2va"), &padded = g.at("t2va_padded");
  EXPECT_TRUE(g.at("lengths_match").get<bool>());
  EXPECT_EQ(padded.at("L"), fl2va.at("L"));
  // Two keyframe blocks of one latent frame (64/16/2 × 64/16/2 = 4 rows each) and two vision blocks of 64 pads.
  EXPECT_EQ(g.at("extra_keyframe_rows").get<int>(), 8);
  EXPECT_GE(g.at("extra_conditioner_rows").get<int>(), 2 * (64 + 2));
  EXPECT_EQ(g.at("extra_rows").get<int>(),
            g.at("extra_keyframe_rows").get<int>() + g.at("extra_conditioner_rows").get<int>());
  EXPECT_EQ(fl2va.at("L").get<int>() - t2va.at("L").get<int>(), g.at("extra_rows").get<int>());
  EXPECT_EQ(padded.at("prompt_tokens").get<int>(),
            fl2va.at("prompt_tokens").get<int>() + g.at("extra_keyframe_rows").get<int>());
  for (const json* run : {&t2va, &fl2va, &padded}) {
    EXPECT_TRUE(run->at("video_ok").get<bool>());
    EXPECT_TRUE(run->at("audio_ok").get<bool>());
    const double denoise = run->at("denoise_device_s").get<double>();  // JSON numbers carry 6 significant digits
    EXPECT_NEAR(run->at("per_pass_s").get<double>() * 2, denoise, 1e-5 * denoise);
    EXPECT_GT(run->at("per_pass_s").get<double>(), 0.0);
    // The measured run reuses the warm-up's conditioning; the warm-up ran it.
    EXPECT_LT(run->at("phases").at("prompt").at("device_s").get<double>(),
              run->at("warmup_phases").at("prompt").at("device_s").get<double>());
  }
  EXPECT_TRUE(fl2va.at("warmup_phases").contains("keyframes"));
  EXPECT_FALSE(t2va.at("warmup_phases").contains("keyframes"));
  EXPECT_NEAR(g.at("fl2va_over_t2va_padded").get<double>(),
              fl2va.at("per_pass_s").get<double>() / padded.at("per_pass_s").get<double>(), 1e-4);
}

TEST(BenchPipeline, TinyWithoutFl2vaMeasuresNoKeyframeParts) {
  const BenchRun r = run_bench({"--tiny", "--device", "cpu", "--skip-isolated", "--shapes", "64x64x22", "--passes",
                                "2"},
                               "t2va");
  ASSERT_EQ(r.status, 0);
  ASSERT_EQ(r.lines.count("pipeline"), 1u);
  EXPECT_EQ(r.lines.at("pipeline")[0].at("shape"), "64x64x22");
  EXPECT_TRUE(r.lines.at("pipeline")[0].at("video_ok").get<bool>());
  EXPECT_FALSE(r.lines.at("pipeline_weights")[0].contains("vision_GB"));
  for (const char* fl2va_only : {"keyframe_encode", "vision_tower", "fl2va_generation"})
    EXPECT_EQ(r.lines.count(fl2va_only), 0u) << fl2va_only;
}

// --speed-controls (issue 16): the exact path first, then each setting, stopped after the denoise; latents compared
// with the exact path's where the latent canvas is the same; a setting the shape does not allow is skipped.
TEST(BenchPipeline, TinySpeedControlsRunOnTheCpu) {
  const BenchRun r = run_bench({"--tiny", "--device", "cpu", "--speed-controls", "--skip-isolated",
                                "--skip-generation", "--shapes", "64x64x22", "--passes", "3", "--speed-configs",
                                R"(reuse2={"reuse":2};render32={"render_width":32,"render_height":32};)"
                                R"(wide={"render_width":64,"render_height":32})"},
                               "speed");
  ASSERT_EQ(r.status, 0);
  ASSERT_EQ(r.lines.count("pipeline"), 0u);  // --skip-generation
  const std::vector<json>& lines = r.lines.at("speed_controls");
  ASSERT_EQ(lines.size(), 4u);
  const json &exact = lines[0], &reuse = lines[1], &render = lines[2], &wide = lines[3];
  EXPECT_EQ(exact.at("config"), "exact");
  EXPECT_EQ(exact.at("ratio_to_exact").get<double>(), 1.0);
  EXPECT_EQ(exact.at("video_latent_rel_l2").get<double>(), 0.0);
  EXPECT_EQ(exact.at("evaluated_passes").get<int>(), 3);
  EXPECT_GT(exact.at("denoise_device_s").get<double>(), 0.0);
  EXPECT_EQ(reuse.at("evaluated_passes").get<int>(), 2);  // passes 0 and 2 of 3
  EXPECT_GT(reuse.at("video_latent_rel_l2").get<double>(), 0.0);
  EXPECT_GT(reuse.at("ratio_to_exact").get<double>(), 0.0);
  EXPECT_EQ(render.at("render"), "32x32");
  EXPECT_TRUE(render.at("video_latent_rel_l2").is_null());  // another latent canvas
  EXPECT_TRUE(render.at("ok").get<bool>());
  EXPECT_NE(wide.at("skipped").get<std::string>().find("aspect ratio"), std::string::npos);
}

// --fasth3 (issue 23): the transformer is a FastH3 student, so a request without --passes runs the student's 4
// passes through VSA-H3 with its gates; each sparsity's generation runs twice (first and second in the process),
// decodes included, and says so.
TEST(BenchPipeline, TinyFastH3StudentGenerationsRunOnTheCpu) {
  const BenchRun r = run_bench({"--tiny", "--device", "cpu", "--fasth3", "--sparsities", "0,0.5", "--skip-isolated",
                                "--shapes", "64x64x22"},
                               "fasth3");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.lines.count("pipeline"), 0u);  // --fasth3's generations replace the plain one
  const std::vector<json>& lines = r.lines.at("fasth3_generation");
  ASSERT_EQ(lines.size(), 4u);
  const char* runs[] = {"first", "second", "first", "second"};
  const double sparsities[] = {0.0, 0.0, 0.5, 0.5};
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& g = lines[i];
    EXPECT_EQ(g.at("run"), runs[i]);
    EXPECT_EQ(g.at("sparsity").get<double>(), sparsities[i]);
    EXPECT_EQ(g.at("passes").get<int>(), 4) << "the student's grid: 4 passes without --passes";
    EXPECT_NE(g.at("attention").get<std::string>().find("VSA-H3 with gates"), std::string::npos) << g.at("attention");
    EXPECT_TRUE(g.at("video_ok").get<bool>());
    EXPECT_TRUE(g.at("audio_ok").get<bool>());
    EXPECT_TRUE(g.at("phases").contains("video decode")) << g.at("phases").dump();
    EXPECT_GT(g.at("total_s").get<double>(), 0.0);
  }
  EXPECT_NE(lines[2].at("attention").get<std::string>().find("sparsity 0.5"), std::string::npos)
      << lines[2].at("attention");
}

TEST(BenchPipeline, SparsitiesNeedTheStudent) {
  const BenchRun r = run_bench({"--tiny", "--device", "cpu", "--sparsities", "0.5"}, "sparsities");
  EXPECT_EQ(r.status, 2);
}

// --fp8-denoise (issue 18): the bf16 and the FP8 engine of the same random weights denoise the same request (its
// figures come from the GPU: BENCHMARKS.md). The CPU backend has no FP8 products, so here the mode refuses before
// any denoise, with --precision fp8's sentence, and writes no result.
TEST(BenchPipeline, Fp8DenoiseRefusesABackendWithoutFp8BeforeAnyWork) {
  const BenchRun r = run_bench({"--tiny", "--device", "cpu", "--fp8-denoise", "--shapes", "64x64x22", "--passes", "3"},
                               "fp8_denoise");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.lines.count("fp8_denoise"), 0u);
}
