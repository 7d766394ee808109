// The FastH3 student's sampling (FastVideo examples/inference/basic/basic_fasth3.py): num_inference_steps 5 grid
// points = 4 forwards on the base schedulers and the base Euler step, i.e. our --steps 4 (passes). Parity with
// FastVideo's MiniMaxH3Scheduler: tests/fixtures/fasth3/schedule/ (tools/reference/fx_fasth3.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "pipeline/schedule.h"

namespace h3 {
namespace {

std::vector<float> floats(const Tensor& t) {
  const Tensor f = t.to_f32();
  return std::vector<float>(f.ptr<float>(), f.ptr<float>() + f.numel());
}

TEST(FastH3Student, ScheduleAndStepsEqualFastVideos) {
  const std::string dir = std::string(H3_SOURCE_DIR) + "/tests/fixtures/fasth3/schedule";
  if (!std::filesystem::exists(dir + "/case.safetensors"))
    GTEST_SKIP() << "FastH3 fixture " << dir << " is missing: run tools/reference/FASTH3_RUN.txt's command";
  std::ifstream in(dir + "/case.json");
  const nlohmann::json c = nlohmann::json::parse(in);
  const auto f = SafetensorsFile::open(dir + "/case.safetensors");
  const int64_t passes = c.at("forwards").get<int64_t>();
  ASSERT_EQ(passes + 1, c.at("grid_points").get<int64_t>());
  for (const char* modality : {"video", "audio"}) {
    const std::string m = modality;
    const FlowSchedule s = FlowSchedule::shifted(c.at("shifts").at(m).get<double>(), passes + 1);
    EXPECT_EQ(s.sigmas(), floats(f->tensor(m + "_sigmas"))) << m;
    EXPECT_EQ(s.timesteps(), floats(f->tensor(m + "_timesteps"))) << m;
    // Each Euler step from sample0 with the constant velocity: the same float32 roundings, so bit-equal.
    std::vector<float> x = floats(f->tensor("sample0"));
    const std::vector<float> v = floats(f->tensor("velocity"));
    const std::vector<float> expected = floats(f->tensor(m + "_samples"));
    for (int64_t i = 0; i < s.passes(); ++i) {
      s.step(i, v.data(), x.data(), static_cast<int64_t>(x.size()));
      EXPECT_EQ(x, std::vector<float>(expected.begin() + static_cast<int64_t>(i * x.size()),
                                      expected.begin() + static_cast<int64_t>((i + 1) * x.size())))
          << m << " pass " << i;
    }
  }
}

}  // namespace
}  // namespace h3
