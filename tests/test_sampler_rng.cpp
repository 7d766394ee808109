// The seeded noise: Philox known answers, the deterministic float64 kernels, the counter → value contract.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "pipeline/rng.h"
#include "pipeline/sampler.h"

namespace h3 {
namespace {

NoiseInputs seeded(uint64_t seed) {
  NoiseInputs n;
  n.seed = seed;
  return n;
}

TEST(SamplerRng, PhiloxKnownAnswers) {
  // Random123 tests/kat_vectors, "philox4x32 10" lines (counter, key → output).
  using W4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (W4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (W4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (W4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(SamplerRng, DeterministicLogMatchesTheLibrary) {
  // Our ln is a fixed sequence of IEEE operations; it must agree with the C library to a few ulps (relative
  // 1e-15, against a long double reference), i.e. far below float32 resolution.
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 104729) {
    const long double ref = std::log((static_cast<long double>(u) + 1) / 4294967296.0L);
    const double got = det_log_u32_plus_1(static_cast<uint32_t>(u));
    ASSERT_LE(std::fabs(static_cast<long double>(got) - ref), 1e-15L * std::fabs(ref)) << u;
  }
  EXPECT_EQ(det_log_u32_plus_1(0xffffffffu), 0.0);
  EXPECT_NEAR(det_log_u32_plus_1(0), -32 * std::log(2.0), 1e-14);
}

TEST(SamplerRng, DeterministicCosSinMatchTheLibrary) {
  const long double two_pi = 6.283185307179586476925286766559L;
  for (uint64_t w = 0; w < (uint64_t{1} << 32); w += 104729) {
    const long double a = two_pi * static_cast<long double>(w) / 4294967296.0L;
    const std::array<double, 2> cs = det_cos_sin_turn(static_cast<uint32_t>(w));
    ASSERT_LE(std::fabs(cs[0] - std::cos(a)), 1e-15L) << w;
    ASSERT_LE(std::fabs(cs[1] - std::sin(a)), 1e-15L) << w;
  }
  // Quadrant boundaries are exact.
  EXPECT_EQ(det_cos_sin_turn(0), (std::array<double, 2>{1.0, 0.0}));
  EXPECT_EQ(det_cos_sin_turn(0x40000000u), (std::array<double, 2>{-0.0, 1.0}));
  EXPECT_EQ(det_cos_sin_turn(0x80000000u), (std::array<double, 2>{-1.0, -0.0}));
}

TEST(SamplerRng, PinnedValuesOfSeed42) {
  // The reproducibility contract: these exact float32 values must never change (a CUDA implementation is tested
  // against the same numbers).
  const float expect[8] = {-0x1.f0bcb8p-1f, 0x1.8d59dp-3f, -0x1.3c51a4p+0f, 0x1.ec8676p+0f,
                           -0x1.2bc06p-4f,  0x1.1cf41ep-3f, -0x1.1b4e66p+0f, 0x1.4e85fap-2f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(NoiseStream::value_at(42, i), expect[i]) << i;
  // Value n = lane n mod 4 of block n / 4: values 0..3 are Box–Muller on block 0's (x0, x1) and (x2, x3).
  const std::array<uint32_t, 4> x = philox4x32_10({0, 0, 0, 0}, {42, 0});
  EXPECT_EQ(NoiseStream::value_at(42, 2), static_cast<float>(box_muller(x[2], x[3])[0]));
  EXPECT_EQ(NoiseStream::value_at(42, 3), static_cast<float>(box_muller(x[2], x[3])[1]));
}

TEST(SamplerRng, SameSeedSameNoiseDifferentSeedDifferentNoise) {
  NoiseStream a(42), b(42), c(43), d(uint64_t{42} | (uint64_t{1} << 32));
  const Tensor ta = a.draw({3, 1000}), tb = b.draw({3, 1000}), tc = c.draw({3, 1000}), td = d.draw({3, 1000});
  EXPECT_EQ(max_abs_diff(ta, tb), 0.0);
  int equal_c = 0, equal_d = 0;
  for (int64_t i = 0; i < ta.numel(); ++i) {
    equal_c += ta.ptr<float>()[i] == tc.ptr<float>()[i];
    equal_d += ta.ptr<float>()[i] == td.ptr<float>()[i];
  }
  EXPECT_EQ(equal_c, 0);
  EXPECT_EQ(equal_d, 0);  // the seed's high word is part of the key
}

TEST(SamplerRng, DrawsAreSlicesOfOneStream) {
  // Drawing in pieces of any length (crossing block boundaries) gives the same values as value_at.
  NoiseStream s(7);
  std::vector<float> all;
  for (int64_t n : {3, 1, 6, 0, 13, 9}) {
    std::vector<float> part(static_cast<size_t>(n));
    s.fill(part.data(), n);
    all.insert(all.end(), part.begin(), part.end());
  }
  ASSERT_EQ(s.offset(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], NoiseStream::value_at(7, i)) << i;
  NoiseStream skipped(7, 5);
  float v;
  skipped.fill(&v, 1);
  EXPECT_EQ(v, all[5]);
}

TEST(SamplerRng, StandardNormalStatistics) {
  // 2^20 draws: mean within 5 standard errors of 0, variance within 1%, tails like a normal distribution.
  NoiseStream s(123);
  const Tensor t = s.draw({1 << 20});
  double sum = 0, sq = 0;
  int64_t beyond_2 = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.ptr<float>()[i];
    sum += x;
    sq += x * x;
    beyond_2 += std::fabs(x) > 2.0;
  }
  const double n = static_cast<double>(t.numel()), mean = sum / n, var = sq / n - mean * mean;
  EXPECT_LT(std::fabs(mean), 5.0 / std::sqrt(n));
  EXPECT_NEAR(var, 1.0, 0.01);
  EXPECT_NEAR(beyond_2 / n, 0.0455, 0.002);  // P(|z| > 2) = 4.55%
}

TEST(SamplerRng, VideoNoiseIsDrawnBeforeAudioNoise) {
  const LatentGeometry g = LatentGeometry::make(64, 64, 22);
  const DenoiseState s = initial_state(g, {}, seeded(42));
  const int64_t nv = shape_numel(g.video_latent_shape());
  // Video noise: z[0..Nv) in (1, C, F, Hl, Wl) order, then patchified.
  NoiseStream video(42);
  const Tensor video_noise = video.draw(g.video_latent_shape());
  EXPECT_EQ(max_abs_diff(s.video_rows, patchify_video(video_noise, g.patch)), 0.0);
  // Audio noise: z[Nv..] directly in row layout.
  for (int64_t k = 0; k < s.audio_rows.numel(); k += 37)
    ASSERT_EQ(s.audio_rows.ptr<float>()[k], NoiseStream::value_at(42, static_cast<uint64_t>(nv + k)));
  // An injected video noise consumes nothing: the audio draw starts at z[0].
  NoiseInputs given;
  given.video = video_noise;
  const DenoiseState injected = initial_state(g, {}, given);
  EXPECT_EQ(injected.audio_rows.ptr<float>()[0], NoiseStream::value_at(42, 0));
  given.video = Tensor::zeros({1, 24, 7, 4, 5}, DType::F32);
  EXPECT_THROW(initial_state(g, {}, given), Error);
}

// fl2va (spec/sampling.md §5): one draw per visual condition first, in packed order, each noised to t = 0.999 and
// patchified in front of the generated rows; then the video noise, then the audio noise.
TEST(SamplerRng, ConditionNoiseIsDrawnFirstOnePerCondition) {
  const LatentGeometry g = LatentGeometry::make(64, 64, 22);
  const Shape one_frame = {1, g.latent_channels, 1, g.latent_height, g.latent_width};
  const std::vector<Tensor> conditions = {NoiseStream(7).draw(one_frame), NoiseStream(8).draw(one_frame)};
  NoiseInputs noise;
  noise.seed = 5;
  const DenoiseState s = initial_state(g, conditions, noise);
  const int64_t per_condition = shape_numel(one_frame), rows_per_frame = g.rows_per_frame();
  ASSERT_EQ(s.video_rows.dim(0), 2 * rows_per_frame + g.video_rows());

  NoiseStream stream(5);
  std::vector<Tensor> drawn;
  for (const Tensor& z : conditions) drawn.push_back(stream.draw(z.shape()));
  const Tensor video = stream.draw(g.video_latent_shape());
  for (size_t i = 0; i < conditions.size(); ++i) {
    // The mix in float32, one rounding per operation: 0.999f·z + (1 − 0.999f)·ε.
    const Tensor mixed = noised_condition(conditions[i], drawn[i]);
    const float t = 0.999f, rest = 1.0f - t;
    for (int64_t k = 0; k < per_condition; k += 13) {
      const float a = t * conditions[i].ptr<float>()[k], b = rest * drawn[i].ptr<float>()[k];
      ASSERT_EQ(mixed.ptr<float>()[k], a + b);
    }
    const Tensor rows = patchify_video(mixed, g.patch);
    EXPECT_EQ(max_abs_diff(s.video_rows.slice(static_cast<int64_t>(i) * rows_per_frame,
                                              static_cast<int64_t>(i + 1) * rows_per_frame),
                           rows),
              0.0);
  }
  EXPECT_EQ(max_abs_diff(s.video_rows.slice(2 * rows_per_frame, s.video_rows.dim(0)), patchify_video(video, g.patch)),
            0.0);
  const uint64_t audio_start = static_cast<uint64_t>(2 * per_condition + shape_numel(g.video_latent_shape()));
  EXPECT_EQ(s.audio_rows.ptr<float>()[0], NoiseStream::value_at(5, audio_start));

  // A supplied condition noise consumes nothing: the second condition draws from z[0].
  noise.conditions = {drawn[0], Tensor()};
  const DenoiseState given = initial_state(g, conditions, noise);
  EXPECT_EQ(max_abs_diff(given.video_rows.slice(0, rows_per_frame), s.video_rows.slice(0, rows_per_frame)), 0.0);
  NoiseStream from_start(5);
  const Tensor second = patchify_video(noised_condition(conditions[1], from_start.draw(one_frame)), g.patch);
  EXPECT_EQ(max_abs_diff(given.video_rows.slice(rows_per_frame, 2 * rows_per_frame), second), 0.0);
  noise.conditions = {drawn[0]};  // one noise for two conditions
  EXPECT_THROW(initial_state(g, conditions, noise), Error);
  noise.conditions = {Tensor::zeros({1, 24, 1, 2, 2}, DType::F32), Tensor()};  // wrong shape
  EXPECT_THROW(initial_state(g, conditions, noise), Error);
}

}  // namespace
}  // namespace h3
