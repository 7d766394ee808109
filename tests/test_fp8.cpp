// The FP8 E4M3 emulation (backend/cpu/cpu_fp8.h) against float64 references written independently of it: the
// encoder against a brute-force nearest-code search over the 253 finite codes (ties to the even code), the
// quantizers against their definition, the product against a float64 GEMM.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/fp8_quotient.h"
#include "tensor/dtype.h"
#include "dit_test_models.h"
#include "models/dit/dit_random.h"
#include "pipeline/precision.h"
#include "util/scoped_env.h"
#include "random_tensor.h"

namespace h3 {
namespace {

bool bit_equal_outputs(const DitOutput& a, const DitOutput& b) {
  return dit_test::bit_equal(a.sample, b.sample) && dit_test::bit_equal(a.audio_sample, b.audio_sample);
}

// The value of a code from the format's definition (float64): 0x7F / 0xFF are NaN.
double code_value(int code) {
  const int s = code >> 7, e = (code >> 3) & 0xF, m = code & 7;
  const double mag = e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return s ? -mag : mag;
}

// Nearest finite code to x by exhaustive search, ties to the code with an even mantissa; |x| > 448 saturates.
uint8_t nearest_code(double x) {
  if (std::isnan(x)) return 0x7F;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  if (a > 448.0) return static_cast<uint8_t>(sign | 0x7E);
  int best = 0;
  for (int c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(code_value(c) - a), db = std::fabs(code_value(best) - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>(sign | best);
}

// fp8_quotient (the CUDA quantizers' x / s from one reciprocal) against the division cpu_fp8.h defines, for x in
// its group (|x| ≤ 2·amax = 896·s here): the same E4M3 code always, and the same float32 bits where neither the
// remainder nor the quotient underflows (|x| ≥ 2^-100, x / s normal; elsewhere x / s < 2^-10, whose code is ±0
// either way). Counts the pairs that differ.
int64_t quotient_mismatches(float x, float s, int64_t& checked) {
  ++checked;
  const float want = x / s, got = fp8_quotient(x, fp8_divisor(s));
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1;
  if (cpu::encode_e4m3(want) != cpu::encode_e4m3(got)) return 1;
  return std::fabs(x) >= 0x1p-100f && std::fabs(want) >= FLT_MIN &&
                 std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(got)
             ? 1
             : 0;
}

// Every bf16 x (the DiT's activations are bf16-rounded before they are quantized) in the groups of bf16 amaxes:
// every 37th positive finite bf16 amax here (~880 scales); H3_FP8_QUOTIENT_EXHAUSTIVE=1 takes all 32,639 (minutes),
// which passed when this test was written.
TEST(Fp8Quotient, MatchesTheDivisionForBf16Values) {
  const bool all = std::getenv("H3_FP8_QUOTIENT_EXHAUSTIVE") != nullptr;
  int64_t checked = 0, bad = 0;
  auto sweep = [&](float amax, float s) {
    for (uint32_t xb = 0; xb < 0x10000; ++xb) {
      const float x = bf16_to_f32(static_cast<uint16_t>(xb));
      if (std::fabs(x) <= 2.f * amax || !std::isfinite(x)) bad += quotient_mismatches(x, s, checked);
    }
  };
  for (uint32_t a = 1; a < 0x7F80; a += all ? 1 : 37) {
    const float amax = bf16_to_f32(static_cast<uint16_t>(a));
    sweep(amax, amax / 448.f);
  }
  // The extremes of the range fp8_divisor takes the reciprocal for, and just outside it (the plain division).
  for (const float s : {0x1p-100f, 0x1.000002p-100f, 0x1.fffffep-101f, 0x1p100f, 0x1.fffffep99f, 0x1.000002p100f,
                        1.f, 1.f / 448.f})
    sweep(448.f * s, s);
  EXPECT_EQ(bad, 0) << "of " << checked << " pairs";
}

// Random float32 x (every mantissa bit in play) in random groups, and x at the group's edge (|x| = amax, quotients
// at 448) where saturation and the last code meet; zeros, infinities and NaN.
TEST(Fp8Quotient, MatchesTheDivisionForFloat32Values) {
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_real_distribution<float> exponent(-60.f, 60.f);
  int64_t checked = 0, bad = 0;
  for (int i = 0; i < 4'000'000; ++i) {
    const float amax = std::ldexp(1.f + (any_bits(rng) >> 9) * 0x1p-23f, static_cast<int>(exponent(rng)));
    const float s = amax / 448.f;
    const uint32_t xb = any_bits(rng);  // sign, mantissa, and a magnitude 2^-31..2 of amax
    const float x =
        std::ldexp(std::bit_cast<float>((xb & 0x807FFFFFu) | 0x3F800000u), -static_cast<int>(xb >> 27)) * amax;
    bad += quotient_mismatches(x, s, checked);
    bad += quotient_mismatches(std::copysign(amax, x), s, checked);
  }
  for (const float x : {0.f, -0.f, INFINITY, -INFINITY, NAN, FLT_MIN, -FLT_MIN, 0x1p-149f, -0x1p-149f})
    for (const float s : {1.f, 0x1p-20f, 3.f / 448.f, 1e20f / 448.f}) bad += quotient_mismatches(x, s, checked);
  EXPECT_EQ(bad, 0) << "of " << checked << " pairs";
}

TEST(Fp8Emulation, DecodeMatchesTheFormat) {
  for (int c = 0; c < 256; ++c) {
    const float v = cpu::decode_e4m3(static_cast<uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << c;
    } else {
      EXPECT_EQ(static_cast<double>(v), code_value(c)) << c;
    }
  }
  EXPECT_EQ(cpu::decode_e4m3(0x7E), 448.f);
  EXPECT_EQ(cpu::decode_e4m3(0x38), 1.f);
  EXPECT_EQ(cpu::decode_e4m3(0x01), std::ldexp(1.f, -9));
  EXPECT_TRUE(std::signbit(cpu::decode_e4m3(0x80)));
}

TEST(Fp8Emulation, EncodeRoundTripsEveryCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(cpu::encode_e4m3(cpu::decode_e4m3(static_cast<uint8_t>(c))), c) << c;
  }
}

TEST(Fp8Emulation, EncodeIsNearestTiesToEven) {
  std::vector<float> xs;
  // Every midpoint between neighbouring codes (the ties), and the floats just either side of it.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = static_cast<float>((code_value(c) + code_value(c + 1)) / 2);  // exact in float
    for (float v : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      xs.push_back(v);
      xs.push_back(-v);
    }
  }
  std::mt19937 g(7);
  std::uniform_real_distribution<float> expo(-14.f, 10.f), unit(-1.f, 1.f);
  for (int i = 0; i < 20000; ++i) xs.push_back(unit(g) * std::exp2(expo(g)));
  for (float x : xs) ASSERT_EQ(cpu::encode_e4m3(x), nearest_code(x)) << x;
}

TEST(Fp8Emulation, EncodeEdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::encode_e4m3(std::nanf("")), 0x7F);
  EXPECT_EQ(cpu::encode_e4m3(-std::nanf("")), 0x7F);
  EXPECT_EQ(cpu::encode_e4m3(inf), 0x7E);
  EXPECT_EQ(cpu::encode_e4m3(-inf), 0xFE);
  for (float big : {448.5f, 463.9f, 464.f, 480.f, 1e30f, std::numeric_limits<float>::max()}) {
    EXPECT_EQ(cpu::encode_e4m3(big), 0x7E) << big;
    EXPECT_EQ(cpu::encode_e4m3(-big), 0xFE) << big;
  }
  EXPECT_EQ(cpu::encode_e4m3(448.f), 0x7E);
  EXPECT_EQ(cpu::encode_e4m3(0.f), 0x00);
  EXPECT_EQ(cpu::encode_e4m3(-0.f), 0x80);
  // Subnormals: 2^-10 is the tie between 0 and 2^-9 (to 0, even); 3·2^-10 between codes 1 and 2 (to 2);
  // 15·2^-10 between the last subnormal (7) and the first normal (8): to 8.
  EXPECT_EQ(cpu::encode_e4m3(std::ldexp(1.f, -10)), 0x00);
  EXPECT_EQ(cpu::encode_e4m3(std::ldexp(3.f, -10)), 0x02);
  EXPECT_EQ(cpu::encode_e4m3(std::ldexp(15.f, -10)), 0x08);
  EXPECT_EQ(cpu::encode_e4m3(1e-30f), 0x00);
  EXPECT_EQ(cpu::encode_e4m3(-1e-30f), 0x80);
  EXPECT_EQ(cpu::encode_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  // A normal tie: 1 + 1/16 lies between 1 (0x38, even) and 1.125 (0x39).
  EXPECT_EQ(cpu::encode_e4m3(1.0625f), 0x38);
  EXPECT_EQ(cpu::encode_e4m3(1.1875f), 0x3A);  // between 1.125 (odd) and 1.25 (even)
}

TEST(Fp8Emulation, GroupScaleIsAmaxOver448) {
  EXPECT_EQ(cpu::fp8_group_scale(448.f), 1.f);
  EXPECT_EQ(cpu::fp8_group_scale(1.f), 1.f / 448.f);
  EXPECT_EQ(cpu::fp8_group_scale(0.f), 1.f);   // an all-zero group
  EXPECT_EQ(cpu::fp8_group_scale(1e-45f), 1.f);  // its scale would underflow to 0
}

TEST(Fp8Emulation, ChannelWeightScalesAndCodes) {
  std::mt19937 g(1);
  Tensor w = randn({5, 40}, g, 0.3f);
  float* v = w.ptr<float>();
  v[1 * 40 + 3] = std::numeric_limits<float>::infinity();  // ignored by amax, saturates
  v[2 * 40 + 0] = std::nanf("");
  for (int k = 0; k < 40; ++k) v[4 * 40 + k] = 0.f;  // an all-zero row
  const Fp8Weight q = cpu::quantize_weight_fp8(w, Fp8Scaling::Channel);
  ASSERT_EQ(q.scale.shape(), (Shape{5}));
  for (int64_t n = 0; n < 5; ++n) {
    double amax = 0;
    for (int64_t k = 0; k < 40; ++k)
      if (std::isfinite(v[n * 40 + k])) amax = std::max(amax, std::fabs(static_cast<double>(v[n * 40 + k])));
    const float s = amax > 0 ? static_cast<float>(amax) / 448.f : 1.f;
    EXPECT_EQ(q.scale.ptr<float>()[n], s) << n;
    for (int64_t k = 0; k < 40; ++k)
      EXPECT_EQ(q.data.ptr<uint8_t>()[n * 40 + k], nearest_code(static_cast<double>(v[n * 40 + k] / s))) << n << "," << k;
  }
  EXPECT_EQ(q.data.ptr<uint8_t>()[1 * 40 + 3], 0x7E);
  EXPECT_EQ(q.data.ptr<uint8_t>()[2 * 40 + 0], 0x7F);
  EXPECT_EQ(q.data.ptr<uint8_t>()[4 * 40 + 7], 0x00);
  // The row's largest magnitude maps to ±448 exactly.
  int at448 = 0;
  for (int64_t k = 0; k < 40; ++k) at448 += (q.data.ptr<uint8_t>()[k] & 0x7F) == 0x7E;
  EXPECT_GE(at448, 1);
}

TEST(Fp8Emulation, BlockWeightScalesLayout) {
  std::mt19937 g(2);
  const int64_t N = 200, K = 300;  // partial blocks on both axes: 2 × 3 blocks, ld 4
  Tensor w = randn({N, K}, g, 0.05f);
  w.ptr<float>()[150 * K + 260] = 3.f;  // block (1, 2) gets the large value
  const Fp8Weight q = cpu::quantize_weight_fp8(w, Fp8Scaling::Block);
  ASSERT_EQ(q.scale.shape(), (Shape{2, 4}));
  EXPECT_EQ(q.scale.ptr<float>()[1 * 4 + 2], 3.f / 448.f);
  EXPECT_EQ(q.scale.ptr<float>()[0 * 4 + 3], 1.f);  // padding
  for (int64_t bn = 0; bn < 2; ++bn)
    for (int64_t bk = 0; bk < 3; ++bk) {
      double amax = 0;
      for (int64_t n = bn * 128; n < std::min<int64_t>(N, bn * 128 + 128); ++n)
        for (int64_t k = bk * 128; k < std::min<int64_t>(K, bk * 128 + 128); ++k)
          amax = std::max(amax, std::fabs(static_cast<double>(w.ptr<float>()[n * K + k])));
      EXPECT_EQ(q.scale.ptr<float>()[bn * 4 + bk], static_cast<float>(amax) / 448.f) << bn << "," << bk;
    }
  // Dequantized values within half a code step (relative 2^-4) of the originals, or the subnormal step.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const double x = w.ptr<float>()[n * K + k], d = cpu::fp8_weight_value(q, n, k);
      const double s = q.scale.ptr<float>()[(n / 128) * 4 + k / 128];
      ASSERT_LE(std::fabs(d - x), std::max(std::fabs(x) / 16, s * std::ldexp(1.0, -10)) * (1 + 1e-6)) << n << "," << k;
    }
}

TEST(Fp8Emulation, ActivationScalesPerRowAndPerBlock) {
  std::mt19937 g(3);
  const int64_t K = 260;
  // M = 8: no tail; M = 6: a main part of 4 rows and a tail of rows 4..7 (6, 7 padding); M = 3: the tail alone.
  for (const int64_t M : {8, 6, 3}) {
    Tensor x = randn({M, K}, g);
    x.ptr<float>()[1 * K + 200] = 50.f;
    const Fp8Activation c = cpu::quantize_activation_fp8(x, Fp8Scaling::Channel);
    ASSERT_EQ(c.codes.shape(), (Shape{M, K}));
    ASSERT_EQ(c.scale.shape(), (Shape{M}));
    EXPECT_EQ(c.scale.ptr<float>()[1], 50.f / 448.f);
    const Fp8Activation q = cpu::quantize_activation_fp8(x, Fp8Scaling::Block);
    const int64_t padded = (M + 3) / 4 * 4, main = M / 4 * 4;
    ASSERT_EQ(q.rows, M);
    ASSERT_EQ(q.codes.shape(), (Shape{padded, K}));
    ASSERT_EQ(q.scale.numel(), 3 * padded);  // ceil(K/128) groups
    EXPECT_EQ(q.scale.ptr<float>()[fp8_block_scale_index(1, 1, M, K)], 50.f / 448.f);
    for (int64_t m = 0; m < padded; ++m)
      for (int64_t b = 0; b < 3; ++b) {
        // The layout spelled out: [3, main] row-contiguous, then [3, 4] for rows main..main+3.
        const int64_t at = m < main ? b * main + m : 3 * main + b * 4 + (m - main);
        ASSERT_EQ(fp8_block_scale_index(m, b, M, K), at);
        float amax = 0;
        for (int64_t k = b * 128; m < M && k < std::min<int64_t>(K, b * 128 + 128); ++k)
          amax = std::max(amax, std::fabs(x.ptr<float>()[m * K + k]));
        EXPECT_EQ(q.scale.ptr<float>()[at], m < M ? amax / 448.f : 1.f) << M << ": " << m << "," << b;
        for (int64_t k = b * 128; k < std::min<int64_t>(K, b * 128 + 128); ++k)
          ASSERT_EQ(q.codes.ptr<uint8_t>()[m * K + k],
                    m < M ? nearest_code(x.ptr<float>()[m * K + k] / (amax / 448.f)) : 0)
              << M << ": " << m << "," << k;
      }
  }
}

// The emulated product equals a float64 GEMM of the dequantized operands, and stays close to the exact product
// of the unquantized ones (E4M3 keeps 3 mantissa bits: ~2–3% relative error per product on random data).
TEST(Fp8Emulation, LinearThroughTheCpuBackend) {
  std::mt19937 g(4);
  const int64_t M = 17, K = 256, N = 48;
  const Tensor x = randn({M, K}, g), w = randn({N, K}, g, 0.1f), bias = randn({N}, g);
  std::unique_ptr<Backend> be = make_cpu_backend();
  for (Fp8Scaling s : {Fp8Scaling::Channel, Fp8Scaling::Block}) {
    const Fp8Weight q = be->quantize_weight_fp8(w, s);
    Tensor y = Tensor::empty({M, N}, DType::F32);
    be->linear_fp8(x, q, &bias, y);
    const Fp8Activation xq = cpu::quantize_activation_fp8(x, s);
    Tensor exact = Tensor::empty({M, N}, DType::F32);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double dq = bias.ptr<float>()[n], ex = bias.ptr<float>()[n];
        for (int64_t k = 0; k < K; ++k) {
          dq += cpu::fp8_activation_value(xq, m, k) * cpu::fp8_weight_value(q, n, k);
          ex += static_cast<double>(x.ptr<float>()[m * K + k]) * w.ptr<float>()[n * K + k];
        }
        EXPECT_NEAR(y.ptr<float>()[m * N + n], dq, 1e-6 * std::fabs(dq) + 1e-6);
        exact.ptr<float>()[m * N + n] = static_cast<float>(ex);
      }
    EXPECT_GT(cosine(y, exact), 0.999);
    EXPECT_LT(rel_l2(y, exact), 0.05);
  }
  // The CPU backend emulates FP8 but refuses it for generation.
  EXPECT_NE(be->fp8_unsupported_reason().find("compute capability 8.9"), std::string::npos);
}

// Every block product's dimensions a multiple of 16 (qkv [96, 32], out [32, 32], fc1 [96, 32], fc2 [32, 48]).
DitConfig fp8_config() {
  DitConfig c = dit_test::config_a();
  c.hidden_size = 32;
  c.ffn_dim = 48;
  c.num_layers = 3;
  return c;
}

// The DiT's FP8 plumbing on the CPU's emulation: the block products go through linear_fp8, their weights shrink,
// blocks made resident again are quantized again, and the velocity stays close to the exact forward's.
TEST(Fp8Emulation, DitForwardBlocksInFp8) {
  auto be = make_cpu_backend();
  const DitConfig c = fp8_config();
  const DitForwardArgs args = dit_test::make_case(c, 5, 6, 12, {0.3f, 0.8f}, 11, true);
  auto exact = random_dit(*be, c);
  const DitOutput ref = exact->forward(args);
  for (Fp8Scaling s : {Fp8Scaling::Channel, Fp8Scaling::Block}) {
    RandomDitOptions o;
    o.precision = {true, s};
    auto fp8 = random_dit(*be, c, o);
    const DitOutput out = fp8->forward(args);
    const double cv = cosine(out.sample, ref.sample), ca = cosine(out.audio_sample, ref.audio_sample);
    std::printf("fp8 %s (CPU emulation): video cosine %.6f rel L2 %.4f, audio cosine %.6f rel L2 %.4f\n",
                s == Fp8Scaling::Channel ? "channel" : "block", cv, rel_l2(out.sample, ref.sample), ca,
                rel_l2(out.audio_sample, ref.audio_sample));
    EXPECT_GT(cv, 0.995);
    EXPECT_GT(ca, 0.995);
    EXPECT_FALSE(bit_equal_outputs(out, ref));  // the products really ran in FP8
    // Each F32 block weight (4 bytes an element) is now 1 byte an element plus its scales.
    EXPECT_LT(fp8->resident_weight_bytes(), exact->resident_weight_bytes());
    // A block freed by --layers and made resident again is quantized again: the same output.
    fp8->select_blocks(args.timestep, 3);
    EXPECT_TRUE(bit_equal_outputs(fp8->forward(args), out));
  }
}

TEST(Fp8Emulation, ShapesFp8CannotTakeStayExact) {
  auto be = make_cpu_backend();
  const DitConfig c = dit_test::config_a();  // hidden 24: no block product qualifies
  const DitForwardArgs args = dit_test::make_case(c, 3, 4, 6, {0.5f}, 12, false);
  RandomDitOptions o;
  o.precision.fp8 = true;
  EXPECT_TRUE(bit_equal_outputs(random_dit(*be, c, o)->forward(args), random_dit(*be, c)->forward(args)));
}

// The one validation place: an unknown word, and fp8 on a backend without FP8 (the CPU's emulation does not count),
// are refused with a sentence; H3_DISABLE_FP8 turns fp8 into the exact bf16 path.
TEST(Fp8Emulation, PrecisionIsCheckedInOnePlace) {
  auto be = make_cpu_backend();
  EXPECT_FALSE(resolve_dit_precision("bf16", *be).fp8);
  try {
    resolve_dit_precision("fp16", *be);
    FAIL() << "fp16 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--precision must be bf16 or fp8, got 'fp16'.");
  }
  try {
    resolve_dit_precision("fp8", *be);
    FAIL() << "fp8 accepted on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compute capability 8.9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the cpu backend"), std::string::npos) << e.what();
  }
  const ScopedEnv off("H3_DISABLE_FP8", "1");
  EXPECT_FALSE(resolve_dit_precision("fp8", *be).fp8);
}

}  // namespace
}  // namespace h3
