#include "pipeline/rng.h"

#include <cmath>

#include "util/thread_pool.h"

// Bit-exact float64 arithmetic: one rounding per written operation, no contraction into fused multiply-adds.
#include "util/strict_fp.h"

namespace h3 {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;   // round multipliers
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u; // key schedule increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kWeyl0;
      k[1] += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

namespace {

// ln 2 split so that e·kLn2Hi is exact for |e| < 2^11 (fdlibm's constants).
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3FE62E42FEE00000
constexpr double kLn2Lo = 1.90821492927058770002e-10;  // 0x3DEA39EF35793C76
constexpr double kSqrt2 = 1.41421356237309514547;      // 0x3FF6A09E667F3BCD
constexpr double kHalfPi = 1.57079632679489655800;     // 0x3FF921FB54442D18
constexpr double kTwoPow30Inv = 1.0 / 1073741824.0;    // 2^-30

// Series lengths: every omitted term is below 2^-60 of the result on the reduced ranges.
constexpr int kAtanhTerms = 12;  // |s| ≤ 0.1716: s^25/25 < 1e-20
constexpr int kTrigTerms = 12;   // θ ≤ π/2: θ^24/24! < 1e-17

// 1/(2k+1), rounded to double once.
constexpr std::array<double, kAtanhTerms> odd_reciprocals() {
  std::array<double, kAtanhTerms> r{};
  for (int k = 0; k < kAtanhTerms; ++k) r[k] = 1.0 / static_cast<double>(2 * k + 1);
  return r;
}
// 1/((2k−1)·2k) (cos) and 1/(2k·(2k+1)) (sin) for k = 1..kTrigTerms, rounded to double once.
constexpr std::array<double, kTrigTerms + 1> cos_reciprocals() {
  std::array<double, kTrigTerms + 1> r{};
  for (int k = 1; k <= kTrigTerms; ++k) r[k] = 1.0 / static_cast<double>((2 * k - 1) * (2 * k));
  return r;
}
constexpr std::array<double, kTrigTerms + 1> sin_reciprocals() {
  std::array<double, kTrigTerms + 1> r{};
  for (int k = 1; k <= kTrigTerms; ++k) r[k] = 1.0 / static_cast<double>((2 * k) * (2 * k + 1));
  return r;
}
constexpr auto kOddReciprocals = odd_reciprocals();
constexpr auto kCosReciprocals = cos_reciprocals();
constexpr auto kSinReciprocals = sin_reciprocals();

}  // namespace

double det_log_u32_plus_1(uint32_t u) {
  // v = u + 1 = m·2^e with m ∈ [√½, √2]; ln(v / 2^32) = (e − 32)·ln 2 + ln m.
  const uint64_t v = static_cast<uint64_t>(u) + 1;
  int e = 63 - __builtin_clzll(v);  // floor(log2 v)
  double m = std::ldexp(static_cast<double>(v), -e);  // exact: v has at most 33 significant bits
  if (m > kSqrt2) {
    m = m * 0.5;  // exact
    e = e + 1;
  }
  // ln m = 2·atanh(s) = 2·s·(1 + z/3 + z²/5 + ...), s = (m − 1)/(m + 1), z = s²; Horner from the smallest term.
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  double p = kOddReciprocals[kAtanhTerms - 1];
  for (int k = kAtanhTerms - 2; k >= 0; --k) p = p * z + kOddReciprocals[k];
  const double ln_m = (2.0 * s) * p;
  const double exponent = static_cast<double>(e - 32);
  return exponent * kLn2Hi + (ln_m + exponent * kLn2Lo);
}

std::array<double, 2> det_cos_sin_turn(uint32_t w) {
  // Quadrant from the top two bits, then θ = x·π/2 with x ∈ [0, 1) from the remaining 30 bits (exact).
  const uint32_t quadrant = w >> 30;
  const double x = static_cast<double>(w & 0x3FFFFFFFu) * kTwoPow30Inv;
  const double theta = x * kHalfPi;
  const double t2 = theta * theta;
  // cos θ = 1 − θ²/(1·2)·(1 − θ²/(3·4)·(1 − ...)), sin θ = θ·(1 − θ²/(2·3)·(1 − θ²/(4·5)·(1 − ...))).
  double c = 1.0, s = 1.0;
  for (int k = kTrigTerms; k >= 1; --k) {
    c = 1.0 - (c * t2) * kCosReciprocals[k];
    s = 1.0 - (s * t2) * kSinReciprocals[k];
  }
  s = theta * s;
  switch (quadrant) {
    case 0: return {c, s};
    case 1: return {-s, c};
    case 2: return {-c, -s};
    default: return {s, -c};
  }
}

std::array<double, 2> box_muller(uint32_t u, uint32_t w) {
  const double radius = std::sqrt(-2.0 * det_log_u32_plus_1(u));
  const std::array<double, 2> cs = det_cos_sin_turn(w);
  return {radius * cs[0], radius * cs[1]};
}

namespace {

// The four values of Philox block b.
std::array<float, 4> normal_block(uint64_t seed, uint64_t block) {
  const std::array<uint32_t, 4> x =
      philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const std::array<double, 2> a = box_muller(x[0], x[1]);
  const std::array<double, 2> b = box_muller(x[2], x[3]);
  return {static_cast<float>(a[0]), static_cast<float>(a[1]), static_cast<float>(b[0]), static_cast<float>(b[1])};
}

}  // namespace

float NoiseStream::value_at(uint64_t seed, uint64_t index) { return normal_block(seed, index / 4)[index % 4]; }

void NoiseStream::fill(float* out, int64_t n) {
  H3_CHECK(n >= 0, "cannot draw a negative number of values");
  const uint64_t first = offset_;
  const uint64_t seed = seed_;
  // Whole blocks in parallel; a partial block at either end is cut to the requested range.
  const uint64_t first_block = first / 4, end_block = (first + static_cast<uint64_t>(n) + 3) / 4;
  parallel_for(0, static_cast<int64_t>(end_block - first_block), 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const uint64_t block = first_block + static_cast<uint64_t>(b);
      const std::array<float, 4> z = normal_block(seed, block);
      for (uint64_t lane = 0; lane < 4; ++lane) {
        const uint64_t index = block * 4 + lane;
        if (index >= first && index < first + static_cast<uint64_t>(n)) out[index - first] = z[lane];
      }
    }
  });
  offset_ += static_cast<uint64_t>(n);
}

Tensor NoiseStream::draw(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::F32);
  fill(t.ptr<float>(), t.numel());
  return t;
}

}  // namespace h3
