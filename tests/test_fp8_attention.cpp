// FP8 attention's definition (backend/cpu/cpu_fp8_attention.h), suite Fp8AttentionEmulation: the quantized operands
// against the definition's rules, the emulation against float64 attention of its own dequantized operands within
// the bound the rounding of P allows (derived in MatchesFloat64OfItsOperandsWithinTheRoundingOfP), exact cases
// (equal scores, an outlier key, zero values, segments), the distance to exact attention, the CPU backend's op and
// a small DiT with its attention in FP8.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_fp8_attention.h"
#include "cpu_forwarding_backend.h"
#include "dit_test_models.h"
#include "models/dit/dit_random.h"
#include "pipeline/precision.h"
#include "random_tensor.h"
#include "util/scoped_env.h"

namespace h3 {
namespace {

using cpu::Fp8AttentionOperands;
using cpu::kFp8AttentionBlock;

AttentionSpec spec_of(int hq, int hkv, int dh) {
  AttentionSpec s;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.head_dim = dh;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  return s;
}

int64_t width(const AttentionSpec& s) { return (s.heads_q + 2 * s.heads_kv) * s.head_dim; }

// q|k|v rows of normal values: q and k of standard deviation qk_std (logits of spread about qk_std²·sqrt(dh)), v 1.
Tensor random_qkv(int64_t rows, const AttentionSpec& s, uint32_t seed, float qk_std) {
  std::mt19937 g(seed);
  Tensor t = randn({rows, width(s)}, g, 1.f);
  const int64_t qk = (s.heads_q + s.heads_kv) * s.head_dim;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < qk; ++c) t.ptr<float>()[r * width(s) + c] *= qk_std;
  return t;
}

float& at(Tensor& qkv, const AttentionSpec& s, int64_t row, int64_t col) {
  return qkv.ptr<float>()[row * width(s) + col];
}
int64_t q_col(const AttentionSpec& s, int64_t h, int64_t c) { return h * s.head_dim + c; }
int64_t k_col(const AttentionSpec& s, int64_t h, int64_t c) { return (s.heads_q + h) * s.head_dim + c; }
int64_t v_col(const AttentionSpec& s, int64_t h, int64_t c) { return (s.heads_q + s.heads_kv + h) * s.head_dim + c; }

// The value a quantized operand stands for (float64).
struct Dequantized {
  const Fp8AttentionOperands& o;
  const AttentionSpec& s;
  double q(int64_t b, int64_t h, int64_t r, int64_t c) const {
    return cpu::decode_e4m3(o.q.ptr<uint8_t>()[((b * s.heads_q + h) * o.padded + r) * s.head_dim + c]) *
           double(o.qs.ptr<float>()[(b * s.heads_q + h) * o.q_blocks() + r / kFp8AttentionBlock]);
  }
  double k(int64_t b, int64_t h, int64_t r, int64_t c) const {
    return cpu::decode_e4m3(o.k.ptr<uint8_t>()[((b * s.heads_kv + h) * o.padded + r) * s.head_dim + c]) *
           double(o.ks.ptr<float>()[(b * s.heads_kv + h) * o.k_blocks() + r / o.key_tile]);
  }
  double v(int64_t b, int64_t h, int64_t r, int64_t c) const {
    return cpu::decode_e4m3(
               o.vt.ptr<uint8_t>()[((b * s.heads_kv + h) * s.head_dim + c) * o.padded + cpu::fp8_attention_v_slot(r)]) *
           double(o.vs.ptr<float>()[(b * s.heads_kv + h) * s.head_dim + c]);
  }
};

// Exact (float64) non-causal attention of one segment of `len` rows given element accessors q(h, r, c), k, v.
template <typename Q, typename K, typename V>
std::vector<double> exact_attention(const AttentionSpec& s, int64_t len, Q q, K k, V v) {
  const int64_t Hq = s.heads_q, Dh = s.head_dim, group = s.heads_q / s.heads_kv;
  std::vector<double> out(static_cast<size_t>(len * Hq * Dh)), p(static_cast<size_t>(len));
  for (int64_t h = 0; h < Hq; ++h)
    for (int64_t i = 0; i < len; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        double d = 0;
        for (int64_t c = 0; c < Dh; ++c) d += q(h, i, c) * k(h / group, j, c);
        p[j] = d * s.scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t c = 0; c < Dh; ++c) {
        double o = 0;
        for (int64_t j = 0; j < len; ++j) o += p[j] * v(h / group, j, c);
        out[(i * Hq + h) * Dh + c] = o / sum;
      }
    }
  return out;
}

Tensor run_emulation(const Tensor& qkv, const AttentionSpec& s, const cpu::Fp8AttentionArithmetic& a = {}) {
  Tensor out = Tensor::empty({qkv.dim(0), s.heads_q * s.head_dim}, DType::F32);
  cpu::attention_in_fp8(qkv, s, out, a);
  return out;
}

Tensor as_tensor(const std::vector<double>& v, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (size_t i = 0; i < v.size(); ++i) t.ptr<float>()[i] = static_cast<float>(v[i]);
  return t;
}

TEST(Fp8AttentionEmulation, VSlotsPermuteEachGroupOf16) {
  for (int64_t g = 0; g < 3; ++g) {
    std::set<int64_t> slots;
    for (int64_t r = 16 * g; r < 16 * g + 16; ++r) slots.insert(cpu::fp8_attention_v_slot(r));
    EXPECT_EQ(slots.size(), 16u);
    EXPECT_EQ(*slots.begin(), 16 * g);
    EXPECT_EQ(*slots.rbegin(), 16 * g + 15);
  }
  // Slot 4t + j holds key 2t + (j & 1) + 8·(j >> 1): the keys of accumulator columns 2t, 2t+1, 8+2t, 9+2t.
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(cpu::fp8_attention_v_slot(2 * t + (j & 1) + 8 * (j >> 1)), 4 * t + j);
}

// fp8_attention_exp2_poly against exp2: within its stated 8.6e-5 relative over the range the softmax feeds it
// ([−126, 8], the row maximum's x being 8; every float of [−1, −1/2) and [1/2, 1), and a sweep of steps 2^-12),
// exactly 2^j at integers, exactly +0 at −127 and below (−∞: a masked key) and below 2^-126 between −127 and −126. The
// kernel's route to ⌊x⌋ (kernels_attention_fp8_sm90.cu, exp2_fma): for an integer j in [−127, 9] the pattern of
// 1.5·2^23 + j shifted left by 23 is j << 23, what the emulation adds to the exponent field.
TEST(Fp8AttentionEmulation, PolynomialExp2) {
  double worst = 0;
  const auto check = [&](float x) {
    const double want = std::exp2(double(x)), got = cpu::fp8_attention_exp2_poly(x);
    const double rel = std::fabs(got / want - 1);
    worst = std::max(worst, rel);
    ASSERT_LE(rel, 8.6e-5) << "x = " << x << ": " << got << " vs " << want;
  };
  for (float x = -1.f; x < -0.5f; x = std::nextafter(x, 2.f)) check(x);
  for (float x = 0.5f; x < 1.f; x = std::nextafter(x, 2.f)) check(x);
  for (int i = 0; i <= 134 * 4096; ++i) check(-126.f + float(i) / 4096.f);
  std::printf("[ fp8 attention ] polynomial exp2: worst relative error %.3g\n", worst);
  for (int j = -126; j <= 8; ++j) EXPECT_EQ(cpu::fp8_attention_exp2_poly(float(j)), std::ldexp(1.f, j)) << j;
  for (float x : {-127.f, -128.f, -1e4f, -std::numeric_limits<float>::infinity()})
    EXPECT_EQ(cpu::fp8_attention_exp2_poly(x), 0.f) << x;
  for (float x = -126.99f; x < -126.f; x += 0.01f) {
    const float y = cpu::fp8_attention_exp2_poly(x);
    EXPECT_TRUE(y >= 0.f && y < std::ldexp(1.f, -126)) << x << ": " << y;
  }
  for (int j = -127; j <= 9; ++j) {
    const float t = 12582912.f + float(j);
    uint32_t bits;
    std::memcpy(&bits, &t, 4);
    EXPECT_EQ(bits << 23, static_cast<uint32_t>(j) << 23) << j;
    EXPECT_EQ(t - 12582912.f, float(j)) << j;
  }
  // The selection: n of the 16 chunks, the same in every tile.
  for (int n : {0, 2, 4, 6, 8, 16}) {
    int chunks = 0;
    for (int64_t k = 0; k < 16; ++k) {
      chunks += cpu::fp8_attention_poly_key(8 * k, n);
      for (int64_t r = 8 * k; r < 8 * k + 8; ++r)
        for (int64_t tile : {0, 1, 7})
          EXPECT_EQ(cpu::fp8_attention_poly_key(tile * 128 + r, n), cpu::fp8_attention_poly_key(8 * k, n));
    }
    EXPECT_EQ(chunks, n);
  }
}

// Scales and codes against the rules of the header, on 2 segments of 200 rows (a full block and a partial one), GQA,
// a saturating value, an infinity and an all-zero k block; 128-key tiles (192: KeyTilesOf192ScaleKPer192Rows).
TEST(Fp8AttentionEmulation, OperandsFollowTheirDefinition) {
  const AttentionSpec s = spec_of(4, 2, 32);
  const int64_t len = 200, batch = 2;
  Tensor qkv = random_qkv(batch * len, s, 1, 0.7f);
  at(qkv, s, 3, q_col(s, 1, 5)) = 1e3f;                                       // the amax of its block
  at(qkv, s, 150, k_col(s, 0, 2)) = std::numeric_limits<float>::infinity();   // saturates, not in the amax
  for (int64_t r = len + 128; r < 2 * len; ++r)
    for (int64_t c = 0; c < s.head_dim; ++c) at(qkv, s, r, k_col(s, 1, c)) = 0.f;  // segment 1, k head 1, block 1
  const Fp8AttentionOperands o = cpu::quantize_attention_fp8(qkv, s, 0, len, batch, 128);
  ASSERT_EQ(o.padded, 256);
  ASSERT_EQ(o.q.shape(), (Shape{batch, 4, 256, 32}));
  ASSERT_EQ(o.vt.shape(), (Shape{batch, 2, 32, 256}));
  ASSERT_EQ(o.ks.shape(), (Shape{batch, 2, 2}));
  ASSERT_EQ(o.vs.shape(), (Shape{batch, 2, 32}));
  const Dequantized dq{o, s};
  // The block amax's code is ±448 (0x7E); every value is within the half-gap of E4M3 at its magnitude (2^-4
  // relative above 2^-6·s, 2^-10·s absolute below), and padding rows are zero codes.
  const auto check = [&](double value, double x, float scale, const char* what, int64_t r) {
    if (!std::isfinite(x)) {
      EXPECT_EQ(std::fabs(value), 448.0 * scale) << what << " row " << r;
      return;
    }
    EXPECT_LE(std::fabs(value - x), std::max(std::fabs(x) * 0x1p-4, 0x1p-10 * scale) * (1 + 1e-6)) << what << " " << r;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t blk = 0; blk < 2; ++blk)
      for (int64_t h = 0; h < 4; ++h) {
        float amax = 0.f;
        for (int64_t r = blk * 128; r < std::min<int64_t>(len, blk * 128 + 128); ++r)
          for (int64_t c = 0; c < 32; ++c) {
            const float x = at(qkv, s, b * len + r, q_col(s, h, c));
            if (std::isfinite(x)) amax = std::max(amax, std::fabs(x));
          }
        const float scale = o.qs.ptr<float>()[(b * 4 + h) * 2 + blk];
        EXPECT_EQ(scale, amax / 448.f);
        for (int64_t r = blk * 128; r < std::min<int64_t>(len, blk * 128 + 128); ++r)
          for (int64_t c = 0; c < 32; ++c)
            check(dq.q(b, h, r, c), at(qkv, s, b * len + r, q_col(s, h, c)), scale, "q", r);
      }
  EXPECT_EQ(o.q.ptr<uint8_t>()[((0 * 4 + 1) * 256 + 3) * 32 + 5], 0x7E);
  EXPECT_EQ(o.k.ptr<uint8_t>()[((0 * 2 + 0) * 256 + 150) * 32 + 2], 0x7E);  // +inf saturates
  EXPECT_EQ(o.ks.ptr<float>()[(1 * 2 + 1) * 2 + 1], 1.f);                    // an all-zero block: scale 1
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t r = 0; r < len; ++r)
        for (int64_t c = 0; c < 32; ++c) {
          const float x = at(qkv, s, b * len + r, k_col(s, h, c));
          const float scale = o.ks.ptr<float>()[(b * 2 + h) * 2 + r / 128];
          check(dq.k(b, h, r, c), x, scale, "k", r);
        }
      for (int64_t c = 0; c < 32; ++c) {
        float amax = 0.f;
        for (int64_t r = 0; r < len; ++r) amax = std::max(amax, std::fabs(at(qkv, s, b * len + r, v_col(s, h, c))));
        const float scale = o.vs.ptr<float>()[(b * 2 + h) * 32 + c];
        EXPECT_EQ(scale, amax / 448.f);
        for (int64_t r = 0; r < len; ++r)
          check(dq.v(b, h, r, c), at(qkv, s, b * len + r, v_col(s, h, c)), scale, "v", r);
      }
    }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t r = len; r < 256; ++r)
        for (int64_t c = 0; c < 32; ++c) {
          EXPECT_EQ(o.k.ptr<uint8_t>()[((b * 2 + h) * 256 + r) * 32 + c], 0);
          EXPECT_EQ(o.vt.ptr<uint8_t>()[((b * 2 + h) * 32 + c) * 256 + cpu::fp8_attention_v_slot(r)], 0);
        }
}

// 192-key tiles: rows padded to a multiple of 384 (both the 128-row query blocks and the key tiles tile them), q's
// scales per 128 rows as before, k's per 192 (amax / 448 of exactly those rows), the same codes either way.
TEST(Fp8AttentionEmulation, KeyTilesOf192ScaleKPer192Rows) {
  const AttentionSpec s = spec_of(2, 1, 64);
  const int64_t len = 450;
  Tensor qkv = random_qkv(len, s, 5, 0.9f);
  at(qkv, s, 200, k_col(s, 0, 3)) = 30.f;  // the amax of k block 1 (rows 192..383), not of block 0
  const Fp8AttentionOperands a = cpu::quantize_attention_fp8(qkv, s, 0, len, 1, 128);
  const Fp8AttentionOperands b = cpu::quantize_attention_fp8(qkv, s, 0, len, 1, 192);
  EXPECT_EQ(cpu::fp8_attention_padded_rows(len, 192), 768);
  EXPECT_EQ(cpu::fp8_attention_padded_rows(100, 192), 384);
  EXPECT_EQ(cpu::fp8_attention_padded_rows(100, 128), 128);
  ASSERT_EQ(b.padded, 768);
  EXPECT_EQ(a.padded, 512);
  ASSERT_EQ(b.ks.shape(), (Shape{1, 1, 4}));
  ASSERT_EQ(b.qs.shape(), (Shape{1, 2, 6}));
  for (int64_t blk = 0; blk < 4; ++blk) {
    float amax = 0.f;
    for (int64_t r = blk * 192; r < std::min<int64_t>(len, blk * 192 + 192); ++r)
      for (int64_t c = 0; c < 64; ++c) amax = std::max(amax, std::fabs(at(qkv, s, r, k_col(s, 0, c))));
    EXPECT_EQ(b.ks.ptr<float>()[blk], amax > 0.f ? amax / 448.f : 1.f) << blk;
  }
  EXPECT_EQ(b.ks.ptr<float>()[1], 30.f / 448.f);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t blk = 0; blk < 4; ++blk)  // the blocks with rows; b's last two are padding (scale 1)
      EXPECT_EQ(b.qs.ptr<float>()[h * 6 + blk], a.qs.ptr<float>()[h * 4 + blk]) << h << " " << blk;
  for (int64_t r = 0; r < len; ++r)
    for (int64_t c = 0; c < 64; ++c)
      EXPECT_EQ(b.vt.ptr<uint8_t>()[c * 768 + cpu::fp8_attention_v_slot(r)],
                a.vt.ptr<uint8_t>()[c * 512 + cpu::fp8_attention_v_slot(r)]);
}

// The bound. The emulation computes, per query row, O = Σ_r p̃_r·v̂_r / Σ_r p_r over its dequantized operands, where p
// is softmax's numerator scaled so that the row maximum's is 2^8 and p̃ its E4M3 rounding; exact attention of the
// same operands is Σ_r p_r·v̂_r / Σ_r p_r. E4M3 rounds to nearest: |p̃ − p| ≤ 2^-4·p for p ≥ 2^-6 (normal codes) and
// ≤ 2^-10 below (half the subnormal step 2^-9), so with Σ p ≥ 2^8 (the maximum's term),
//   |O − O_exact| ≤ (2^-4 + n·2^-18)·max_r |v̂_r|   per channel, n keys.
// The default arithmetic divides by the sum of the rounded weights instead, O = Σ p̃_r·v̂_r / Σ p̃_r; with e = p̃ − p,
// O − O_exact = (Σ e_r·v̂_r − O_exact·Σ e_r) / Σ p̃, and Σ|e| ≤ (2^-4 + n·2^-18)·Σ p, Σ p̃ ≥ Σ p − Σ|e|, so
//   |O − O_exact| ≤ g·(max_r |v̂_r| + |O_exact|),   g = (2^-4 + n·2^-18) / (1 − 2^-4 − n·2^-18);
// float32 arithmetic (S, the exponentials, sums of n ≤ 457 terms: n·2^-24 relative to l·max|v̂|) adds less than
// 2^-12·max|v̂| on top. With exponentials by fp8_attention_exp2_poly (relative error ≤ 8.6e-5 in p, so in p̃'s
// distance to p and in Σ p) another 2·8.6e-5 < 2^-12 relative: the bound's last term doubles. The test runs without
// the polynomial, with the kernel's largest share (8 of 16 chunks) and with every key by polynomial (16), in both
// arithmetics.
// Every edge case runs through it: a row of equal scores (q = 0), an outlier key, a saturated v, zero values,
// segments of 1, 127, 129 and 200 rows (an empty one between) and head dims 64 and 128, in 128-key tiles and (no
// polynomial there) in 192-key tiles.
TEST(Fp8AttentionEmulation, MatchesFloat64OfItsOperandsWithinTheRoundingOfP) {
  for (int64_t key_tile : {128, 192})
  for (bool tile_accumulator : {false, true})
  for (int poly : {0, 8, 16})
  for (int dh : {64, 128}) {
    if (key_tile != 128 && poly != 0) continue;
    const cpu::Fp8AttentionArithmetic arith{poly, tile_accumulator, key_tile};
    const AttentionSpec base = spec_of(2, 1, dh);
    AttentionSpec s = base;
    s.segments = {0, 1, 128, 128, 257, 457};
    const int64_t R = 457;
    Tensor qkv = random_qkv(R, s, 2 + dh, 0.6f);
    for (int64_t c = 0; c < dh; ++c) at(qkv, s, 300, q_col(s, 0, c)) = 0.f;      // equal scores
    for (int64_t c = 0; c < dh; ++c) at(qkv, s, 310, k_col(s, 0, c)) *= 40.f;    // an outlier key
    at(qkv, s, 320, v_col(s, 0, 7)) = 5e3f;                                       // a saturating v
    for (int64_t r = 128; r < 257; ++r)
      for (int64_t c = 0; c < dh; ++c) at(qkv, s, r, v_col(s, 0, c)) = 0.f;      // a segment of zero values
    const Tensor out = run_emulation(qkv, s, arith);
    double worst = 0;
    for (size_t si = 0; si + 1 < s.segments.size(); ++si) {
      const int64_t first = s.segments[si], len = s.segments[si + 1] - first;
      if (len == 0) continue;
      const Fp8AttentionOperands o = cpu::quantize_attention_fp8(qkv, s, first, len, 1, key_tile);
      const Dequantized dq{o, s};
      const std::vector<double> want = exact_attention(
          s, len, [&](int64_t h, int64_t r, int64_t c) { return dq.q(0, h, r, c); },
          [&](int64_t h, int64_t r, int64_t c) { return dq.k(0, h, r, c); },
          [&](int64_t h, int64_t r, int64_t c) { return dq.v(0, h, r, c); });
      for (int64_t c = 0; c < dh; ++c) {
        double vmax = 0;
        for (int64_t r = 0; r < len; ++r) vmax = std::max(vmax, std::fabs(dq.v(0, 0, r, c)));
        const cpu::Fp8AttentionRoundingBound p_rounding =
            cpu::fp8_attention_rounding_bound(len, arith);
        const double bound = (p_rounding.weights + (poly > 0 ? 0x1p-11 : 0x1p-12)) * vmax + 1e-30;
        for (int64_t i = 0; i < len; ++i)
          for (int64_t h = 0; h < 2; ++h) {
            const double got = out.ptr<float>()[(first + i) * 2 * dh + h * dh + c];
            const double exact = want[(i * 2 + h) * dh + c];
            const double err = std::fabs(got - exact) - p_rounding.output * std::fabs(exact);
            worst = std::max(worst, err / (bound > 0 ? bound : 1));
            ASSERT_LE(err, bound) << "poly " << poly << " dh " << dh << " segment " << si << " row " << i << " head "
                                  << h << " ch " << c;
          }
      }
    }
    std::printf("[ fp8 attention ] head_dim %d, %lld-key tiles, %d of 16 chunks by polynomial exp2, %s: worst error "
                "%.3f of the bound\n",
                dh, static_cast<long long>(key_tile), poly, tile_accumulator ? "tile accumulator" : "sums of the rounded P",
                worst);
  }
}

// Cases whose answer is exact: q = 0 gives every key p = 2^8 exactly, so O is the mean of v̂; an outlier key takes all
// the weight (the others' p round to 0); zero values give zero; segments attend only within themselves.
TEST(Fp8AttentionEmulation, ExactCases) {
  const AttentionSpec s = spec_of(1, 1, 64);
  const int64_t R = 150;
  Tensor qkv = random_qkv(R, s, 7, 0.5f);
  for (int64_t c = 0; c < 64; ++c) at(qkv, s, 5, q_col(s, 0, c)) = 0.f;
  for (int64_t c = 0; c < 64; ++c) {
    at(qkv, s, 9, q_col(s, 0, c)) = 1.f;
    at(qkv, s, 140, k_col(s, 0, c)) = 4.f;  // score 4·64/8 = 32 above a typical one's ±3
  }
  const Tensor out = run_emulation(qkv, s);
  const Fp8AttentionOperands o = cpu::quantize_attention_fp8(qkv, s, 0, R, 1);
  const Dequantized dq{o, s};
  for (int64_t c = 0; c < 64; ++c) {
    double mean = 0, vmax = 0;
    for (int64_t r = 0; r < R; ++r) {
      mean += dq.v(0, 0, r, c) / R;
      vmax = std::max(vmax, std::fabs(dq.v(0, 0, r, c)));
    }
    EXPECT_NEAR(out.ptr<float>()[5 * 64 + c], mean, 1e-6 * vmax) << c;
    EXPECT_NEAR(out.ptr<float>()[9 * 64 + c], dq.v(0, 0, 140, c), 1e-6 * vmax) << c;
  }

  Tensor zeros = qkv.clone();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < 64; ++c) at(zeros, s, r, v_col(s, 0, c)) = 0.f;
  const Tensor z = run_emulation(zeros, s);
  for (int64_t i = 0; i < z.numel(); ++i) ASSERT_EQ(z.ptr<float>()[i], 0.f) << i;

  AttentionSpec split = s;
  split.segments = {0, 61, 61, R};
  const Tensor both = run_emulation(qkv, split);
  const Tensor a = run_emulation(qkv.slice(0, 61).clone(), s), b = run_emulation(qkv.slice(61, R).clone(), s);
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(both.ptr<float>()[i], a.ptr<float>()[i]) << i;
  for (int64_t i = 0; i < b.numel(); ++i) ASSERT_EQ(both.ptr<float>()[a.numel() + i], b.ptr<float>()[i]) << i;
}

// The distance to exact attention of the unquantized inputs. Each E4M3 rounding is a relative error of at most 2^-4,
// RMS about 2.7% (half an ulp of 2^-3..2^-4 of the value, uniformly placed: ulp/√12). An output sums over keys: the
// roundings of P and of v average out over spread-out attention and not over peaked attention, where one key's v̂
// carries its 2.7% alone and q's and k's roundings move the few logits that matter. Three such independent errors
// bound the relative L2 error by about √3·2.7% ≈ 4.7%, 0.08 with room; a broken rule (a scale not folded back, P not
// offset, a wrong slot) gives errors of order 1. kMaxRelL2VsExact is that bound, cosine ≥ 1 − 0.08²/2 = 0.9968.
constexpr double kMaxRelL2VsExact = 0.08;

TEST(Fp8AttentionEmulation, CloseToExactAttention) {
  for (int dh : {64, 128})
    for (float qk_std : {0.3f, 0.8f}) {
      const AttentionSpec s = spec_of(2, 2, dh);
      const int64_t R = 300;
      const Tensor qkv = random_qkv(R, s, 11 + dh, qk_std);
      const Tensor out = run_emulation(qkv, s);
      const float* X = qkv.ptr<float>();
      const int64_t W = width(s);
      const std::vector<double> want = exact_attention(
          s, R, [&](int64_t h, int64_t r, int64_t c) { return double(X[r * W + q_col(s, h, c)]); },
          [&](int64_t h, int64_t r, int64_t c) { return double(X[r * W + k_col(s, h, c)]); },
          [&](int64_t h, int64_t r, int64_t c) { return double(X[r * W + v_col(s, h, c)]); });
      const Tensor ref = as_tensor(want, {R, 2 * dh});
      const double e = rel_l2(out, ref), cs = cosine(out, ref);
      std::printf("[ fp8 attention ] head_dim %d, q/k std %.1f: rel L2 %.4f, cosine %.6f vs exact\n", dh, qk_std, e,
                  cs);
      EXPECT_LT(e, kMaxRelL2VsExact);
    }
}

// The CPU backend's op: its q/k normalization and rotation, then the emulation (bit for bit), and within the FP8
// distance of CloseToExactAttention of the exact op (cosine ≥ 1 − 0.08²/2).
TEST(Fp8AttentionEmulation, CpuBackendOpNormalizesThenEmulates) {
  auto be = make_cpu_backend();
  AttentionSpec s = spec_of(2, 1, 64);
  s.qk_norm = true;
  const int64_t R = 140;
  std::mt19937 g(5);
  const Tensor wq = randn({64}, g, 0.2f, 1.f), wk = randn({64}, g, 0.2f, 1.f);
  s.q_norm_weight = &wq;
  s.k_norm_weight = &wk;
  s.rotary_dim = 32;
  const Tensor cos = randn({R, 32}, g, 0.3f, 0.7f), sin = randn({R, 32}, g, 0.3f, 0.5f);
  s.cos = &cos;
  s.sin = &sin;
  const Tensor qkv = random_qkv(R, s, 9, 1.f);
  Tensor a = qkv.clone(), b = qkv.clone(), c = qkv.clone();
  Tensor got = Tensor::empty({R, 128}, DType::F32), exact = Tensor::empty({R, 128}, DType::F32);
  be->self_attention_in_fp8(a, s, got);
  be->qk_norm_rope(b, s);
  const Tensor want = run_emulation(b, s);
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.ptr<float>()[i], want.ptr<float>()[i]) << i;
  be->self_attention(c, s, exact);
  std::printf("[ fp8 attention ] CPU backend op vs self_attention: cosine %.6f rel L2 %.4f\n", cosine(got, exact),
              rel_l2(got, exact));
  EXPECT_LT(rel_l2(got, exact), kMaxRelL2VsExact);
  EXPECT_GT(cosine(got, exact), 1 - kMaxRelL2VsExact * kMaxRelL2VsExact / 2);
}

DitConfig fp8_attention_config() {
  DitConfig c = dit_test::config_a();
  c.num_attention_heads = 2;
  c.attention_head_dim = 16;
  c.hidden_size = 32;
  c.ffn_dim = 48;
  c.num_layers = 3;
  return c;
}

// The DiT's main blocks through self_attention_in_fp8: the velocity moves (the attention really is FP8) and stays close
// to the exact forward's.
TEST(Fp8AttentionEmulation, DitForwardAttentionInFp8) {
  auto be = make_cpu_backend();
  const DitConfig c = fp8_attention_config();
  const DitForwardArgs args = dit_test::make_case(c, 5, 6, 12, {0.3f, 0.8f}, 11, true);
  const DitOutput ref = random_dit(*be, c)->forward(args);
  RandomDitOptions o;
  o.precision.fp8_attention = true;
  const DitOutput out = random_dit(*be, c, o)->forward(args);
  const double cv = cosine(out.sample, ref.sample), ca = cosine(out.audio_sample, ref.audio_sample);
  std::printf("[ fp8 attention ] DiT (CPU emulation): video cosine %.6f rel L2 %.4f, audio cosine %.6f rel L2 %.4f\n",
              cv, rel_l2(out.sample, ref.sample), ca, rel_l2(out.audio_sample, ref.audio_sample));
  EXPECT_GT(cv, 0.995);
  EXPECT_GT(ca, 0.995);
  EXPECT_FALSE(dit_test::bit_equal(out.sample, ref.sample));
}

// resolve_dit_precision: fp8 turns FP8 attention on where the backend has it, H3_DISABLE_FP8_ATTENTION keeps it bf16,
// and a backend without it keeps bf16 attention with FP8 linears.
TEST(Fp8AttentionEmulation, PrecisionTurnsFp8AttentionOnWhereTheBackendHasIt) {
  struct Fp8Backend : CpuForwardingBackend {
    bool attention = true;
    std::string name() const override { return "fp8-test"; }
    std::string fp8_unsupported_reason() const override { return {}; }
    std::string fp8_attention_unsupported_reason() const override {
      return attention ? std::string() : std::string("no FP8 attention here");
    }
  } be;
  EXPECT_FALSE(resolve_dit_precision("bf16", be).fp8_attention);
  DitPrecision p = resolve_dit_precision("fp8", be);
  EXPECT_TRUE(p.fp8 && p.fp8_attention);
  {
    const ScopedEnv off("H3_DISABLE_FP8_ATTENTION", "1");
    p = resolve_dit_precision("fp8", be);
    EXPECT_TRUE(p.fp8 && !p.fp8_attention);
  }
  be.attention = false;
  p = resolve_dit_precision("fp8", be);
  EXPECT_TRUE(p.fp8 && !p.fp8_attention);
  auto cpu_be = make_cpu_backend();
  EXPECT_NE(cpu_be->fp8_attention_unsupported_reason().find("Hopper"), std::string::npos);
}

}  // namespace
}  // namespace h3
