// The two rectified-flow schedules against spec/sampling.md §2, and the Euler update on hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "pipeline/schedule.h"
#include "util/error.h"

namespace h3 {
namespace {

std::string g7(float x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", static_cast<double>(x));
  return buf;
}

// The spec prints float32 values to 7 significant digits. It also warns that an independent float32 linspace may
// differ from PyTorch's by 1 ulp in a few grid points, so a value matches when it, or one of its float32
// neighbours, prints as the table entry.
::testing::AssertionResult prints_as(float x, const std::string& table) {
  if (g7(x) == table) return ::testing::AssertionSuccess();
  const float below = std::nextafter(x, -1.0f), above = std::nextafter(x, 2.0f);
  if (g7(below) == table || g7(above) == table)
    return ::testing::AssertionSuccess() << g7(x) << " is 1 ulp from " << table;
  return ::testing::AssertionFailure() << g7(x) << " (" << x << ") vs table " << table;
}

struct TableRow {
  int k;
  const char *video_sigma, *video_t, *audio_sigma, *audio_t;  // t = "" at the terminal point
};

void check_table(int grid_points, const std::vector<TableRow>& rows, TorchLinspaceKernel kernel) {
  const FlowSchedule video = FlowSchedule::shifted(12.0, grid_points, kernel);
  const FlowSchedule audio = FlowSchedule::shifted(3.0, grid_points, kernel);
  ASSERT_EQ(video.sigmas().size(), static_cast<size_t>(grid_points));
  ASSERT_EQ(audio.sigmas().size(), static_cast<size_t>(grid_points));
  ASSERT_EQ(video.passes(), grid_points - 1);
  for (const TableRow& r : rows) {
    SCOPED_TRACE("k = " + std::to_string(r.k));
    EXPECT_TRUE(prints_as(video.sigmas()[r.k], r.video_sigma));
    EXPECT_TRUE(prints_as(audio.sigmas()[r.k], r.audio_sigma));
    if (r.k < grid_points - 1) {
      EXPECT_TRUE(prints_as(video.timesteps()[r.k], r.video_t));
      EXPECT_TRUE(prints_as(audio.timesteps()[r.k], r.audio_t));
    }
  }
}

const std::vector<TableRow> kFivePoint = {
    {0, "1", "0", "1", "0"},
    {1, "0.972973", "0.02702701", "0.9", "0.1"},
    {2, "0.9230769", "0.07692307", "0.75", "0.25"},
    {3, "0.8", "0.2", "0.5", "0.5"},
    {4, "0", "", "0", ""},
};

const std::vector<TableRow> kFiftyPoint = {
    {0, "1", "0", "1", "0"},
    {1, "0.9982669", "0.001733124", "0.9931034", "0.006896555"},
    {2, "0.9964665", "0.003533542", "0.986014", "0.01398599"},
    {10, "0.9790794", "0.02092057", "0.9212598", "0.07874024"},
    {20, "0.9456522", "0.05434781", "0.8130842", "0.1869158"},
    {30, "0.8837209", "0.1162791", "0.6551723", "0.3448277"},
    {40, "0.7297297", "0.2702703", "0.402985", "0.597015"},
    {45, "0.516129", "0.483871", "0.2105263", "0.7894737"},
    {47, "0.3380282", "0.6619718", "0.1132075", "0.8867924"},
    {48, "0.2", "0.8", "0.05882353", "0.9411765"},
    {49, "0", "", "0", ""},
};

TEST(SamplerSchedule, FivePointGridMatchesSpecTable) {
  check_table(5, kFivePoint, {.fused = true});
  check_table(5, kFivePoint, {.fused = false});
}

TEST(SamplerSchedule, FiftyPointGridMatchesSpecTable) {
  check_table(50, kFiftyPoint, {.fused = true});
  check_table(50, kFiftyPoint, {.fused = false});
}

TEST(SamplerSchedule, FiveAndFiftyPointTablesMatchWithoutUlpSlack) {
  // Both kernels reproduce every printed entry exactly (no neighbour needed) — the ulp slack above is for other
  // linspace implementations, not ours.
  for (bool fused : {true, false})
    for (int n : {5, 50}) {
      const FlowSchedule video = FlowSchedule::shifted(12.0, n, {.fused = fused});
      for (const TableRow& r : n == 5 ? kFivePoint : kFiftyPoint) EXPECT_EQ(g7(video.sigmas()[r.k]), r.video_sigma);
    }
}

TEST(SamplerSchedule, LinspaceAnchorsEachHalfAtItsEnd) {
  // 1, 0.75, 0.5, 0.25, 0: exact in float32 whichever anchor is used.
  EXPECT_EQ(torch_linspace_f32(1.0f, 0.0f, 5), (std::vector<float>{1.0f, 0.75f, 0.5f, 0.25f, 0.0f}));
  // n = 50: the first half is start + step·k, the second end − step·(n − 1 − k), so the last point is exactly 0 and
  // the first exactly 1; the two halves meet at k = 25 without a gap larger than one step.
  for (bool fused : {true, false}) {
    const std::vector<float> b = torch_linspace_f32(1.0f, 0.0f, 50, {.fused = fused});
    EXPECT_EQ(b.front(), 1.0f);
    EXPECT_EQ(b.back(), 0.0f);
    const float step = -1.0f / 49.0f;
    volatile float product = step * 24.0f;  // volatile: rounded before the add
    const float k24 = fused ? std::fma(step, 24.0f, 1.0f) : 1.0f + product;
    const float k25 = fused ? std::fma(-step, 24.0f, 0.0f) : 0.0f - product;
    EXPECT_EQ(b[24], k24);
    EXPECT_EQ(b[25], k25);
  }
}

TEST(SamplerSchedule, TimestepsAreOneMinusSigmaAndPassesAreGridMinusOne) {
  const FlowSchedule s = FlowSchedule::shifted(12.0, 21);  // --steps 20
  ASSERT_EQ(s.passes(), 20);
  ASSERT_EQ(s.sigmas().size(), 21u);
  EXPECT_EQ(s.sigmas().front(), 1.0f);
  EXPECT_EQ(s.sigmas().back(), 0.0f);
  for (int i = 0; i < s.passes(); ++i) {
    EXPECT_EQ(s.timesteps()[i], 1.0f - s.sigmas()[i]);
    EXPECT_GT(s.sigmas()[i], s.sigmas()[i + 1]);
  }
  EXPECT_EQ(FlowSchedule::shifted(3.0, 1001).passes(), 1000);
}

TEST(SamplerSchedule, RejectsBadInputs) {
  EXPECT_THROW(FlowSchedule::shifted(12.0, 1), Error);
  EXPECT_THROW(FlowSchedule::shifted(0.0, 10), Error);
  EXPECT_THROW(FlowSchedule::shifted(std::nan(""), 10), Error);
  EXPECT_THROW(FlowSchedule::from_sigmas({1.0f}), Error);
  EXPECT_THROW(FlowSchedule::from_sigmas({1.0f, 0.5f, 0.5f, 0.0f}), Error);  // not strictly decreasing
  EXPECT_THROW(FlowSchedule::from_sigmas({1.0f, 0.5f, 0.1f}), Error);        // does not end at 0
  const FlowSchedule s = FlowSchedule::from_sigmas({1.0f, 0.6f, 0.0f});
  EXPECT_EQ(s.passes(), 2);
  EXPECT_EQ(s.timesteps()[1], 1.0f - 0.6f);
}

TEST(SamplerSchedule, EulerStepOnHandComputedValues) {
  // σ_t = 1 − 0 = 1, x0 = 1 + 1·2 = 3, r = 0.5/1, x' = 0.5·1 + 0.5·3 = 2.
  float x = 1.0f, x0 = 0.0f;
  const float v = 2.0f;
  euler_step(0.0f, 1.0f, 0.5f, &v, &x, 1, &x0);
  EXPECT_EQ(x0, 3.0f);
  EXPECT_EQ(x, 2.0f);

  // σ_t comes from the timestep (1 − 0.25 = 0.75), r from the grid (0.25/0.5): x0 = 2 + 0.75·4 = 5,
  // x' = 0.5·2 + 0.5·5 = 3.5.
  x = 2.0f;
  const float v2 = 4.0f;
  euler_step(0.25f, 0.5f, 0.25f, &v2, &x, 1, &x0);
  EXPECT_EQ(x0, 5.0f);
  EXPECT_EQ(x, 3.5f);

  // The velocity is data-ward: x0 = x + σ·v (a minus sign would give −1 here).
  x = 1.0f;
  const float v3 = 1.0f;
  euler_step(0.5f, 0.5f, 0.25f, &v3, &x, 1, &x0);
  EXPECT_EQ(x0, 1.5f);
  EXPECT_EQ(x, 1.25f);  // 0.5·1 + 0.5·1.5

  // Last pass: σ' = 0 → r = 0 → x' = x0 exactly.
  x = -3.0f;
  const float v4 = 7.0f;
  euler_step(0.8f, 0.2f, 0.0f, &v4, &x, 1, &x0);
  EXPECT_EQ(x, x0);
  EXPECT_EQ(x0, -3.0f + (1.0f - 0.8f) * 7.0f);
}

TEST(SamplerSchedule, EulerStepRoundsEveryOperationSeparately) {
  // The reference evaluates σ_t·v, x + (σ_t·v), r·x, (1 − r)·x0 and their sum as separate float32 operations. Compare
  // with the same sequence written with volatile temporaries (which the compiler cannot fuse) on values where a fused
  // multiply-add would round differently.
  const FlowSchedule s = FlowSchedule::shifted(12.0, 50);
  std::vector<float> x(4096), v(4096), expect(4096);
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(state)) / 2147483648.0f * 3.0f;
  };
  for (size_t k = 0; k < x.size(); ++k) {
    x[k] = next();
    v[k] = next();
  }
  const int i = 30;
  for (size_t k = 0; k < x.size(); ++k) {
    volatile float sigma_t = 1.0f - s.timesteps()[i];
    volatile float move = sigma_t * v[k];
    volatile float clean = x[k] + move;
    volatile float r = s.sigmas()[i + 1] / s.sigmas()[i];
    volatile float one_minus_r = 1.0f - r;
    volatile float kept = r * x[k];
    volatile float blended = one_minus_r * clean;
    expect[k] = kept + blended;
  }
  s.step(i, v.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(x[k], expect[k]) << "element " << k;
}

}  // namespace
}  // namespace h3
