// Test helper: `h3 tool generate` on one fixture case (its request.json and noise.safetensors) against the
// reference's decoded video and soundtrack in its expected.safetensors — the end-to-end check of the fl2va and ref2va
// families (tests/test_e2e_fl2va.cpp, tests/test_e2e_ref2va.cpp).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "tensor/tensor.h"
#include "tools/registry.h"

namespace h3 {

inline int run_tool_args(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return run_tool(static_cast<int>(argv.size()), argv.data());
}

// Runs the tool on the CPU and expects both outputs within `bound` relative L2; `tag` names the case in the log line.
inline void expect_generate_tool_matches(const std::string& model, const std::string& case_dir, const std::string& tag,
                                         double bound) {
  const std::string out = testing::TempDir() + "/" + tag + ".safetensors";
  std::filesystem::remove(out);
  ASSERT_EQ(run_tool_args({"generate", "--model", model, "--request", case_dir + "/request.json", "--noise",
                           case_dir + "/noise.safetensors", "--out", out, "--device", "cpu"}),
            0);
  const auto ours = SafetensorsFile::open(out);
  const auto expected = SafetensorsFile::open(case_dir + "/expected.safetensors");
  const Tensor video = ours->tensor("video"), audio = ours->tensor("audio");
  const Tensor ref_video = expected->tensor("video").to_f32(), ref_audio = expected->tensor("audio").to_f32();
  ASSERT_EQ(video.shape(), ref_video.shape());
  ASSERT_EQ(audio.shape(), ref_audio.shape());
  const double dv = rel_l2(video, ref_video), da = rel_l2(audio, ref_audio);
  std::printf("[ e2e ] %s: video rel L2 %.3g, audio rel L2 %.3g\n", tag.c_str(), dv, da);
  EXPECT_LE(dv, bound);
  EXPECT_LE(da, bound);
}

}  // namespace h3
