#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tensor/tensor.h"

using namespace h3;

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(INFINITY)), INFINITY);
}

TEST(DType, F16MatchesReferenceRounding) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // halfway to 65536 rounds to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to zero: ties to even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 ulp rounds up
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  // Round trip every half value through f32.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t v = static_cast<uint16_t>(h);
    if ((v & 0x7c00) == 0x7c00 && (v & 0x3ff)) continue;  // NaN payloads
    ASSERT_EQ(f32_to_f16(f16_to_f32(v)), v) << std::hex << h;
  }
  // Random f32 values: the result is the nearest half (checked against its neighbours).
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-70000.f, 70000.f);
  for (int i = 0; i < 100000; ++i) {
    float f = u(rng) * (i % 2 ? 1e-4f : 1.f);
    uint16_t h = f32_to_f16(f);
    float r = f16_to_f32(h);
    if (std::isinf(r)) continue;
    float up = f16_to_f32(static_cast<uint16_t>(h + 1)), dn = f16_to_f32(static_cast<uint16_t>(h - 1));
    ASSERT_LE(std::fabs(r - f), std::fabs(up - f)) << f;
    if ((h & 0x7fff) != 0) {
      ASSERT_LE(std::fabs(r - f), std::fabs(dn - f)) << f;
    }
  }
}

TEST(Tensor, ReshapeAndSliceAreViews) {
  Tensor t = Tensor::from_f32({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor r = t.reshape({3, -1});
  EXPECT_EQ(r.dim(1), 2);
  EXPECT_EQ(r.data(), t.data());
  Tensor s = t.slice(1, 2);
  EXPECT_EQ(s.at(0), 3.0);
  EXPECT_THROW(t.reshape({4, 2}), Error);
  EXPECT_THROW(t.slice(1, 3), Error);
  EXPECT_THROW(t.ptr<double>(), Error);
}
