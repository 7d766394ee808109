// FP8 attention on the CUDA backend (issue 18; our Hopper kernel kernels_attention_fp8_sm90.cu), suite
// Fp8AttentionCuda: the quantization kernels against the CPU emulation (backend/cpu/cpu_fp8_attention.h) bit for bit,
// the attention kernel against the emulation and against float64 attention of the same operands, against the bf16
// attention, through segments, GQA, both head dims, ragged row counts and the head-major layout, the bf16 fallback
// of shapes the kernel does not take, the out product's activation written by the kernel, and a small DiT forward
// with FP8 attention. Each test prints its figures.
// Skips where the build has no CUDA backend, the machine no GPU, or the GPU no FP8 attention (not Hopper).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_fp8_attention.h"
#include "dit_test_models.h"
#include "models/dit/dit_random.h"
#include "random_tensor.h"
#include "util/scoped_env.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace h3 {
namespace {

#ifdef H3_HAVE_CUDA

class Fp8AttentionCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device";
    be = make_cuda_backend();
    if (const std::string why = be->fp8_attention_unsupported_reason(); !why.empty()) GTEST_SKIP() << why;
  }
  std::unique_ptr<Backend> be;
};

AttentionSpec spec_of(int hq, int hkv, int dh, std::vector<int64_t> segments = {}) {
  AttentionSpec s;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.head_dim = dh;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  s.segments = std::move(segments);
  return s;
}

int64_t width(const AttentionSpec& s) { return (s.heads_q + 2 * s.heads_kv) * s.head_dim; }

// q|k|v rows (host F32 holding bf16 values, so that host and device quantize the same numbers): q and k normal of
// standard deviation qk_std, v standard normal.
Tensor bf16_qkv(int64_t rows, const AttentionSpec& s, uint32_t seed, float qk_std) {
  std::mt19937 g(seed);
  Tensor t = randn({rows, width(s)}, g, 1.f);
  const int64_t qk = (s.heads_q + s.heads_kv) * s.head_dim;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < qk; ++c) t.ptr<float>()[r * width(s) + c] *= qk_std;
  return t.to(DType::BF16).to_f32();
}

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const auto* a = static_cast<const unsigned char*>(got.data());
  const auto* b = static_cast<const unsigned char*>(want.data());
  int64_t differ = 0;
  for (size_t i = 0; i < got.nbytes(); ++i) differ += a[i] != b[i];
  std::printf("[ fp8 attention cuda ] %s: %lld of %zu bytes differ from the emulation\n", what.c_str(),
              static_cast<long long>(differ), got.nbytes());
  EXPECT_EQ(differ, 0) << what;
}

// Both key tiles (H3_FP8_ATTENTION_KEY_TILE: 192, the default, or 128): k's scale blocks are the key tile's rows.
TEST_F(Fp8AttentionCuda, QuantizationMatchesTheEmulation) {
  for (const char* keys : {"192", "128"})
  for (int dh : {64, 128}) {
    const ScopedEnv env("H3_FP8_ATTENTION_KEY_TILE", keys);
    auto tb = make_cuda_backend();
    const int64_t key_tile = cuda_fp8_attention_arithmetic(*tb).key_tile;
    ASSERT_EQ(key_tile, std::atoi(keys));
    const AttentionSpec s = spec_of(4, 2, dh);
    const int64_t first = 3, len = 200, batch = 2, R = first + batch * len + 5;
    Tensor qkv = bf16_qkv(R, s, 1 + dh, 0.8f);
    float* X = qkv.ptr<float>();
    const int64_t W = width(s);
    X[(first + 10) * W + 5] = std::numeric_limits<float>::infinity();       // q: saturates, not in the amax
    X[(first + 20) * W + 4 * dh + 3] = 300.f;                               // k: a block's amax
    X[(first + 30) * W + 6 * dh + 1] = -std::numeric_limits<float>::infinity();  // v
    for (int64_t r = first + len + 128; r < first + 2 * len; ++r)
      for (int64_t c = 0; c < dh; ++c) X[r * W + 5 * dh + c] = 0.f;  // segment 1, k head 1, block 1: all zero
    const Tensor dev = tb->upload(qkv, DType::BF16);
    const cpu::Fp8AttentionOperands got = cuda_quantize_attention_fp8(*tb, dev, s, first, len, batch);
    const cpu::Fp8AttentionOperands want = cpu::quantize_attention_fp8(qkv, s, first, len, batch, key_tile);
    const std::string tag = cat(key_tile, "-key tiles, head_dim ", dh, " ");
    expect_same(got.q, want.q, tag + "q codes");
    expect_same(got.k, want.k, tag + "k codes");
    expect_same(got.vt, want.vt, tag + "v codes (transposed, slotted)");
    expect_same(got.qs, want.qs, tag + "q scales");
    expect_same(got.ks, want.ks, tag + "k scales");
    expect_same(got.vs, want.vs, tag + "v scales");
    EXPECT_EQ(got.padded, want.padded);
  }
}

// Float64 attention of one segment of quantized operands (the emulation's operands dequantized), softmax exact.
std::vector<double> dequantized_attention(const cpu::Fp8AttentionOperands& o, const AttentionSpec& s, int64_t b) {
  const int64_t Hq = s.heads_q, Hkv = s.heads_kv, Dh = s.head_dim, L = o.len, Lp = o.padded;
  const int64_t q_blocks = o.q_blocks(), k_blocks = o.k_blocks(), group = Hq / Hkv;
  std::vector<double> out(static_cast<size_t>(L * Hq * Dh)), p(static_cast<size_t>(L));
  const auto dec = [](const Tensor& t, int64_t i) { return double(cpu::decode_e4m3(t.ptr<uint8_t>()[i])); };
  for (int64_t h = 0; h < Hq; ++h) {
    const int64_t hk = h / group;
    for (int64_t i = 0; i < L; ++i) {
      const double sq = o.qs.ptr<float>()[(b * Hq + h) * q_blocks + i / cpu::kFp8AttentionBlock];
      double mx = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        const double sk = o.ks.ptr<float>()[(b * Hkv + hk) * k_blocks + j / o.key_tile];
        double d = 0;
        for (int64_t c = 0; c < Dh; ++c)
          d += dec(o.q, ((b * Hq + h) * Lp + i) * Dh + c) * dec(o.k, ((b * Hkv + hk) * Lp + j) * Dh + c);
        p[j] = d * sq * sk * s.scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < L; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t c = 0; c < Dh; ++c) {
        const double sv = o.vs.ptr<float>()[(b * Hkv + hk) * Dh + c];
        double acc = 0;
        for (int64_t j = 0; j < L; ++j)
          acc += p[j] * dec(o.vt, ((b * Hkv + hk) * Dh + c) * Lp + cpu::fp8_attention_v_slot(j)) * sv;
        out[(i * Hq + h) * Dh + c] = acc / sum;
      }
    }
  }
  return out;
}

struct Case {
  int hq, hkv, dh;
  std::vector<int64_t> segments;  // boundaries; the last is the row count
  float qk_std;
};

// The kernel against the emulation. Both quantize the same operands bit for bit (QuantizationMatchesTheEmulation);
// they then differ only in how S is summed (the tensor cores' FP8 accumulation, which keeps about 14 bits, against a
// float64 sum), ex2.approx against exp2, and float32 summation orders. Those move each p by a relative 1e-3 or less,
// which flips the E4M3 rounding of the few p that lie that close to a rounding boundary, each by one code step (2^-3
// of p at most), and the bf16 rounding of some outputs by one bf16 step. Two bounds follow.
// 1. Per element, against float64 attention of the dequantized operands (which the emulation meets within
//    g·max|v̂| with g = 2^-4 + n·2^-18, and with row sums of the rounded P (the default) within g'·(max|v̂| + |O|),
//    g' = g / (1 − g), Fp8AttentionEmulation.MatchesFloat64OfItsOperandsWithinTheRoundingOfP): the kernel
//    meets the same bound plus 2^-8·max|v̂| for those p shifts and 2^-8·|O| for its bf16 output. The default kernel
//    adds each tile's P·V into O on the tensor cores (about 14 bits kept: 2^-14 of O per tile) where the emulation
//    adds in f32; over these tests' ≤ 5 tiles that is inside the 2^-8·|O|.
// 2. Overall, the kernel is far closer to its emulation than either is to that float64 attention (the distance the
//    rounding of P makes, a few percent): rel L2(kernel, emulation) < 0.5 · rel L2(emulation, float64). The flips
//    above make a few tenths of it at most (1% of p flipping, each by ~2^-3, against P's own ±2^-4 rounding); a
//    layout error — a P byte or a vᵀ slot out of place, a wrong scale, a ragged tile unmasked — makes it 10 or more.
void check_against_emulation(Backend& be, const Case& k, uint32_t seed) {
  const AttentionSpec s = spec_of(k.hq, k.hkv, k.dh, k.segments);
  const int64_t R = k.segments.back(), OW = int64_t(k.hq) * k.dh;
  const Tensor qkv = bf16_qkv(R, s, seed, k.qk_std);
  Tensor dev = be.upload(qkv, DType::BF16), out = be.empty({R, OW}, DType::BF16);
  be.self_attention_in_fp8(dev, s, out);
  EXPECT_EQ(cuda_last_attention_path(be), "h3-hopper-fp8");
  const Tensor got = be.download(out).to_f32();
  Tensor emu = Tensor::empty({R, OW}, DType::F32);
  const cpu::Fp8AttentionArithmetic arith = cuda_fp8_attention_arithmetic(be);  // the emulation follows it
  const int poly = arith.exp2_poly_chunks;
  cpu::attention_in_fp8(qkv, s, emu, arith);

  const Tensor want = emu.to(DType::BF16).to_f32();  // the kernel's output rounding

  std::vector<double> exact(static_cast<size_t>(R * OW));
  double worst = 0;
  for (size_t si = 0; si + 1 < k.segments.size(); ++si) {
    const int64_t first = k.segments[si], len = k.segments[si + 1] - first;
    if (len == 0) continue;
    const cpu::Fp8AttentionOperands o = cpu::quantize_attention_fp8(qkv, s, first, len, 1, arith.key_tile);
    const std::vector<double> seg = dequantized_attention(o, s, 0);
    const cpu::Fp8AttentionRoundingBound p_rounding = cpu::fp8_attention_rounding_bound(len, arith);
    std::copy(seg.begin(), seg.end(), exact.begin() + first * OW);
    for (int64_t c = 0; c < k.dh; ++c)
      for (int64_t hk = 0; hk < k.hkv; ++hk) {
        double vmax = 0;
        for (int64_t r = 0; r < o.padded; ++r)  // every slot (the padding's codes are zero)
          vmax = std::max(vmax, std::fabs(cpu::decode_e4m3(o.vt.ptr<uint8_t>()[(hk * k.dh + c) * o.padded + r]) *
                                          double(o.vs.ptr<float>()[hk * k.dh + c])));
        for (int64_t h = hk * (k.hq / k.hkv); h < (hk + 1) * (k.hq / k.hkv); ++h)
          for (int64_t i = 0; i < len; ++i) {
            const int64_t at = (first + i) * OW + h * k.dh + c;
            const double bound =
                (p_rounding.weights + 0x1p-8) * vmax + (p_rounding.output + 0x1p-8) * std::fabs(exact[at]) + 1e-30;
            const double err = std::fabs(got.ptr<float>()[at] - exact[at]);
            worst = std::max(worst, err / bound);
            ASSERT_LE(err, bound) << "segment " << si << " row " << i << " head " << h << " channel " << c;
          }
      }
  }
  Tensor ref = Tensor::empty({R, OW}, DType::F32);
  for (int64_t i = 0; i < R * OW; ++i) ref.ptr<float>()[i] = static_cast<float>(exact[i]);
  const double d_kernel = rel_l2(got, want), d_emu = rel_l2(emu, ref);
  std::printf("[ fp8 attention cuda ] %d/%d heads x %d, %zu segments of %lld rows, q/k std %.1f, %lld-key tiles, "
              "%d/16 chunks by polynomial exp2, %s: kernel vs emulation rel L2 %.5f, emulation vs float64 %.5f (ratio "
              "%.3f); worst element %.3f of its bound\n",
              k.hq, k.hkv, k.dh, k.segments.size() - 1, static_cast<long long>(R), k.qk_std,
              static_cast<long long>(arith.key_tile), poly,
              arith.tile_accumulator ? "tile accumulator" : "tensor-core sums", d_kernel, d_emu,
              d_kernel / d_emu, worst);
  if (d_emu == 0)  // one key per row: both give that key's v̂ (the rounded P's sum normalizes it exactly)
    EXPECT_EQ(d_kernel, 0.0);
  else
    EXPECT_LT(d_kernel, 0.5 * d_emu);
}

TEST_F(Fp8AttentionCuda, KernelMatchesTheEmulation) {
  const std::vector<Case> cases = {
      {2, 2, 128, {0, 1}, 1.f},                        // one row: one ragged tile
      {2, 2, 128, {0, 127}, 1.f},                      // one ragged tile
      {2, 2, 128, {0, 128}, 1.f},                      // one full 128-key tile
      {2, 1, 128, {0, 129}, 1.f},                      // GQA; a full 128-key tile and one key
      {2, 2, 128, {0, 192}, 1.f},                      // one full 192-key tile
      {2, 1, 128, {0, 193}, 1.f},                      // GQA; a full 192-key tile and one key
      {4, 2, 128, {0, 500}, 0.8f},                     // four tiles, the last ragged
      {2, 2, 64, {0, 300}, 1.f},                       // head_dim 64
      {4, 4, 64, {0, 200, 400, 400, 533}, 1.2f},       // two equal segments batched, an empty one, a ragged one
      {2, 2, 128, {0, 70, 70, 350, 351}, 0.6f},        // segments of 70, 0, 280, 1 rows
  };
  uint32_t seed = 1;
  for (const Case& k : cases) check_against_emulation(*be, k, seed++);
}

// Every schedule the kernel has besides the default (192-key tiles, every exp2 on the SFU, a 2-stage ring, 4 key
// tiles per tensor-core sum: above) against the emulation of the same arithmetic. With 128-key tiles
// (H3_FP8_ATTENTION_KEY_TILE=128, the first default, with 2 tiles per sum): H3_FP8_ATTENTION_POLY_CHUNKS=4 (4 of 16
// chunks' exp2 by the polynomial, which the emulation evaluates by cpu_fp8_attention.h's fp8_attention_exp2_poly bit
// for bit), H3_FP8_ATTENTION_STAGES=3 (5 tiles of 128 keys go round its ring), H3_FP8_ATTENTION_TENSOR_SUM_TILES 1
// and 4, and the tile accumulator (H3_FP8_ATTENTION_TILE_ACCUMULATOR=1, the unrounded P's row sums), alone and with
// the others; with 192-key tiles, sums of 1 and 2. The bounds and the reasons are KernelMatchesTheEmulation's (the
// polynomial's own error, ≤ 8.6e-5 relative in p, is on both sides). Which chunks take the polynomial is below these
// tests' resolution (a chunk out of step moves its p by 8.6e-5 at most); what they catch is the kernel's polynomial
// itself (a wrong exponent or fraction moves p by factors up to 2), the ring's barriers and slots, and the groups'
// rescaling and hand-over to O.
TEST_F(Fp8AttentionCuda, KernelMatchesTheEmulationInEverySchedule) {
  const std::vector<Case> cases = {
      {2, 1, 128, {0, 129}, 1.f},
      {4, 2, 128, {0, 500}, 0.8f},
      {4, 4, 64, {0, 200, 400, 400, 533}, 1.2f},
      {2, 2, 128, {0, 600}, 1.f},
  };
  struct Schedule {
    const char* key_tile;  // H3_FP8_ATTENTION_KEY_TILE
    const char* poly;      // H3_FP8_ATTENTION_POLY_CHUNKS, or null (these are unset when null)
    const char* stages;    // H3_FP8_ATTENTION_STAGES
    const char* sum;       // H3_FP8_ATTENTION_TENSOR_SUM_TILES
    bool tile_accumulator;  // H3_FP8_ATTENTION_TILE_ACCUMULATOR=1
  };
  const std::vector<Schedule> schedules = {
      {"128", nullptr, nullptr, "2", false}, {"128", "4", nullptr, nullptr, false},
      {"128", nullptr, "3", nullptr, false}, {"128", nullptr, nullptr, "1", false},
      {"128", nullptr, nullptr, "4", false}, {"128", nullptr, nullptr, nullptr, true},
      {"128", "4", "3", nullptr, true},      {"128", "4", "3", "4", false},
      {"192", nullptr, nullptr, "1", false}, {"192", nullptr, nullptr, "2", false},
  };
  uint32_t seed = 100;
  for (const Schedule& sc : schedules) {
    const ScopedEnv keys("H3_FP8_ATTENTION_KEY_TILE", sc.key_tile), poly("H3_FP8_ATTENTION_POLY_CHUNKS", sc.poly),
        stages("H3_FP8_ATTENTION_STAGES", sc.stages), sum("H3_FP8_ATTENTION_TENSOR_SUM_TILES", sc.sum),
        tile("H3_FP8_ATTENTION_TILE_ACCUMULATOR", sc.tile_accumulator ? "1" : nullptr);
    auto b = make_cuda_backend();
    ASSERT_EQ(cuda_fp8_attention_arithmetic(*b).exp2_poly_chunks, sc.poly ? 4 : 0);
    ASSERT_EQ(cuda_fp8_attention_arithmetic(*b).tile_accumulator, sc.tile_accumulator);
    ASSERT_EQ(cuda_fp8_attention_arithmetic(*b).key_tile, std::atoi(sc.key_tile));
    std::printf("[ fp8 attention cuda ] H3_FP8_ATTENTION_KEY_TILE=%s, H3_FP8_ATTENTION_POLY_CHUNKS=%s, "
                "H3_FP8_ATTENTION_STAGES=%s, H3_FP8_ATTENTION_TENSOR_SUM_TILES=%s, "
                "H3_FP8_ATTENTION_TILE_ACCUMULATOR=%d:\n",
                sc.key_tile, sc.poly ? sc.poly : "-", sc.stages ? sc.stages : "-", sc.sum ? sc.sum : "-",
                sc.tile_accumulator);
    for (const Case& k : cases) check_against_emulation(*b, k, seed++);
  }
}

// Long rows: 3,000 keys (24 tiles) of spread-out attention (q/k std 0.3), where O and l are sums of thousands of
// similar terms. The tensor cores keep about 14 bits of a running sum, so summing every tile there (the design this
// test rejects) drifts with the tile count — a rel L2 of 0.29 against the emulation over the 295 tiles of a
// 1344×768×124 forward — while a sum of a few tiles handed to the f32 O stays at its short rows' distance; so does
// the tile accumulator. Sums of 1, 2 and 4 tiles of 128 keys, and of 2 and 4 of 192 (768 keys in one tensor-core sum,
// the longest any schedule makes). The rule is KernelMatchesTheEmulation's.
TEST_F(Fp8AttentionCuda, LongRowsKeepTheirSums) {
  struct Sum {
    const char *keys, *tiles;
  };
  for (const Sum sc : {Sum{"128", "1"}, Sum{"128", "2"}, Sum{"128", "4"}, Sum{"192", "2"}, Sum{"192", "4"}}) {
    const char *sum = sc.tiles, *keys = sc.keys;
    const ScopedEnv env("H3_FP8_ATTENTION_TENSOR_SUM_TILES", sum), tile("H3_FP8_ATTENTION_KEY_TILE", keys);
    auto b = make_cuda_backend();
    std::printf("[ fp8 attention cuda ] H3_FP8_ATTENTION_TENSOR_SUM_TILES=%s, H3_FP8_ATTENTION_KEY_TILE=%s:\n", sum,
                keys);
    check_against_emulation(*b, {1, 1, 128, {0, 3000}, 0.3f}, 7);
  }
  const ScopedEnv keys("H3_FP8_ATTENTION_KEY_TILE", "128"), tile("H3_FP8_ATTENTION_TILE_ACCUMULATOR", "1");
  auto b = make_cuda_backend();
  std::printf("[ fp8 attention cuda ] H3_FP8_ATTENTION_KEY_TILE=128, H3_FP8_ATTENTION_TILE_ACCUMULATOR=1:\n");
  check_against_emulation(*b, {1, 1, 128, {0, 3000}, 0.3f}, 7);
}

// Diagnostic cases whose answer is one value, each testing one path of the kernel alone.
// Equal scores (q = 0): every p is 2^8 exactly, whatever the P register layout, so O is the mean of the dequantized v
// over the segment — the vᵀ tiles' loads, their wgmma descriptors, the per-tile accumulation and the epilogue's
// scales, without the P layout.
TEST_F(Fp8AttentionCuda, EqualScoresAverageV) {
  for (int dh : {64, 128}) {
    const AttentionSpec s = spec_of(2, 1, dh);
    const int64_t R = 300, W = width(s);
    Tensor qkv = bf16_qkv(R, s, 9 + dh, 1.f);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < 2 * dh; ++c) qkv.ptr<float>()[r * W + c] = 0.f;
    Tensor dev = be->upload(qkv, DType::BF16), out = be->empty({R, 2 * dh}, DType::BF16);
    be->self_attention_in_fp8(dev, s, out);
    const Tensor got = be->download(out).to_f32();
    const cpu::Fp8AttentionOperands o = cpu::quantize_attention_fp8(qkv, s, 0, R, 1);
    int64_t bad = 0;
    for (int64_t c = 0; c < dh; ++c) {
      double mean = 0;
      for (int64_t r = 0; r < o.padded; ++r)
        mean += cpu::decode_e4m3(o.vt.ptr<uint8_t>()[c * o.padded + r]) * double(o.vs.ptr<float>()[c]) / R;
      for (int64_t i = 0; i < R; ++i)
        for (int64_t h = 0; h < 2; ++h) {
          const double g = got.ptr<float>()[i * 2 * dh + h * dh + c];
          // bf16 output (2^-8 relative) plus f32 sums (1e-6 of the row's scale).
          if (std::fabs(g - mean) > 0x1p-8 * std::fabs(mean) + 1e-5 && bad++ < 5)
            ADD_FAILURE() << "head_dim " << dh << " row " << i << " head " << h << " channel " << c << ": " << g
                          << " vs the mean " << mean;
        }
    }
    std::printf("[ fp8 attention cuda ] head_dim %d, equal scores: %lld outputs off the mean of v\n", dh,
                static_cast<long long>(bad));
  }
}

// One-hot attention: query i scores one key t(i) far above the rest (q and k along one axis, 30 each: a logit gap of
// 900·scale ≥ 79, so every other p rounds to zero), the hot keys in the second tile, rows past 256 ragged. O_i must
// be key t(i)'s v̂: a P register layout out of step with vᵀ's slots picks another key of its 16-key group, which the
// failure names (and so says which permutation is off).
TEST_F(Fp8AttentionCuda, OneHotAttentionPicksItsKey) {
  for (int dh : {64, 128}) {
    const AttentionSpec s = spec_of(1, 1, dh);
    const int64_t key0 = 128, R = key0 + dh + 13, W = width(s);
    Tensor qkv = bf16_qkv(R, s, 21 + dh, 1.f);
    float* X = qkv.ptr<float>();
    const auto target_axis = [dh](int64_t i) { return (5 * i + 3) % dh; };
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < dh; ++c) {
        X[r * W + c] = c == target_axis(r) ? 30.f : 0.f;                                        // q
        X[r * W + dh + c] = (r >= key0 && r < key0 + dh && c == r - key0) ? 30.f : 0.f;       // k
      }
    Tensor dev = be->upload(qkv, DType::BF16), out = be->empty({R, dh}, DType::BF16);
    be->self_attention_in_fp8(dev, s, out);
    const Tensor got = be->download(out).to_f32();
    const cpu::Fp8AttentionOperands o = cpu::quantize_attention_fp8(qkv, s, 0, R, 1);
    const auto v_hat = [&](int64_t key, int64_t c) {
      return cpu::decode_e4m3(o.vt.ptr<uint8_t>()[c * o.padded + cpu::fp8_attention_v_slot(key)]) *
             double(o.vs.ptr<float>()[c]);
    };
    int64_t bad = 0;
    for (int64_t i = 0; i < R && bad < 8; ++i) {
      const int64_t want = key0 + target_axis(i);
      double err = 0;
      for (int64_t c = 0; c < dh; ++c)
        err = std::max(err, std::fabs(got.ptr<float>()[i * dh + c] - v_hat(want, c)) -
                                0x1p-8 * std::fabs(v_hat(want, c)));  // the bf16 output's rounding
      if (err <= 1e-5) continue;
      ++bad;
      int64_t best = -1;
      double best_err = INFINITY;
      for (int64_t j = 0; j < R; ++j) {
        double e = 0;
        for (int64_t c = 0; c < dh; ++c) e += std::pow(got.ptr<float>()[i * dh + c] - v_hat(j, c), 2);
        if (e < best_err) best_err = e, best = j;
      }
      ADD_FAILURE() << "head_dim " << dh << " query row " << i << " (warp row " << i % 64 << ") should take key "
                    << want
                    << " (" << want % 16 << " of its 16-key group); its output is nearest key " << best << " ("
                    << best % 16 << " of its group; squared distance " << best_err << ")";
    }
    std::printf("[ fp8 attention cuda ] head_dim %d, one-hot attention: %lld rows took another key\n", dh,
                static_cast<long long>(bad));
  }
}

// FP8 attention against the bf16 attention of the same rows: the emulation is within rel L2 0.08 of exact attention
// (Fp8AttentionEmulation.CloseToExactAttention), so the cosine is at least 1 − 0.08²/2 ≈ 0.9968, less a little for
// the bf16 attention's own rounding: 0.996.
TEST_F(Fp8AttentionCuda, CloseToBf16Attention) {
  for (int dh : {64, 128}) {
    const AttentionSpec s = spec_of(4, 4, dh, {0, 777, 1500});
    const Tensor qkv = bf16_qkv(1500, s, 40 + dh, 0.9f);
    Tensor a = be->upload(qkv, DType::BF16), b = be->upload(qkv, DType::BF16);
    Tensor oa = be->empty({1500, 4 * dh}, DType::BF16), ob = be->empty({1500, 4 * dh}, DType::BF16);
    be->self_attention_in_fp8(a, s, oa);
    be->self_attention(b, s, ob);
    const Tensor fa = be->download(oa).to_f32(), fb = be->download(ob).to_f32();
    std::printf("[ fp8 attention cuda ] head_dim %d: fp8 vs bf16 attention cosine %.6f rel L2 %.4f\n", dh,
                cosine(fa, fb), rel_l2(fa, fb));
    EXPECT_GT(cosine(fa, fb), 0.996) << dh;
  }
}

// q, k, v read from head-major copies (H3_ATTENTION_LAYOUT=head-major) quantize to the same codes: the same output
// bit for bit.
TEST_F(Fp8AttentionCuda, HeadMajorLayoutGivesTheSameBits) {
  const AttentionSpec s = spec_of(4, 2, 128, {0, 300, 333});
  const Tensor qkv = bf16_qkv(333, s, 77, 1.f);
  const auto run = [&](Backend& b) {
    Tensor d = b.upload(qkv, DType::BF16), o = b.empty({333, 512}, DType::BF16);
    b.self_attention_in_fp8(d, s, o);
    return b.download(o);
  };
  const Tensor packed = run(*be);
  const ScopedEnv layout("H3_ATTENTION_LAYOUT", "head-major");
  auto hm = make_cuda_backend();
  const Tensor head_major = run(*hm);
  ASSERT_EQ(packed.nbytes(), head_major.nbytes());
  EXPECT_EQ(std::memcmp(packed.data(), head_major.data(), packed.nbytes()), 0);
}

// head_dim 32 is outside the kernel: self_attention_in_fp8 runs the bf16 attention (the same bits as self_attention).
TEST_F(Fp8AttentionCuda, OtherHeadDimsRunInBf16) {
  const AttentionSpec s = spec_of(2, 2, 32);
  const Tensor qkv = bf16_qkv(100, s, 3, 1.f);
  Tensor a = be->upload(qkv, DType::BF16), b = be->upload(qkv, DType::BF16);
  Tensor oa = be->empty({100, 64}, DType::BF16), ob = be->empty({100, 64}, DType::BF16);
  be->self_attention_in_fp8(a, s, oa);
  EXPECT_NE(cuda_last_attention_path(*be), "h3-hopper-fp8");
  be->self_attention(b, s, ob);
  const Tensor fa = be->download(oa), fb = be->download(ob);
  EXPECT_EQ(std::memcmp(fa.data(), fb.data(), fa.nbytes()), 0);
}

// The FP8 attention writing the out product's activation itself (self_attention_fp8 with per-channel scaling;
// cuda_kernels.h's Fp8AttentionCodes): every row's scale is its segment's bound, fp8_group_scale(max |v|) over the
// segment's v (all heads and channels), and every code the E4M3 code of the same kernel's bf16 output times that
// scale's reciprocal, bit for bit, through segments of three lengths (one batched pair), GQA, both head dims and
// both key tiles; the separate pass (H3_DISABLE_FP8_FUSED_QUANT's twin: the bf16 output, then
// launch_fp8_quantize_rows_by_bound) the same bits; and H3_DISABLE_FP8_ATTENTION_CODES=1 the backend default's rule
// (each row scaled by its own largest value).
TEST_F(Fp8AttentionCuda, CodesAreTheOutputOverTheSegmentsBound) {
  const std::vector<int64_t> segments = {0, 300, 600, 1000};
  const int64_t R = segments.back();
  const auto codes_of = [&](Backend& b, const Tensor& qkv, const AttentionSpec& s) {
    Tensor d = b.upload(qkv, DType::BF16);
    Fp8Activation q;
    b.self_attention_fp8(d, s, true, Fp8Scaling::Channel, q);
    return std::make_pair(b.download(q.codes), b.download(q.scale));
  };
  uint32_t seed = 500;
  for (const char* keys : {"192", "128"})
    for (int dh : {64, 128}) {
      const ScopedEnv tile("H3_FP8_ATTENTION_KEY_TILE", keys);
      auto b = make_cuda_backend();
      const AttentionSpec s = spec_of(4, 2, dh, segments);
      const int64_t W = width(s), OW = 4 * dh, v0 = 6 * dh;
      Tensor qkv = bf16_qkv(R, s, seed++, 1.f);
      for (int64_t r = segments[2]; r < R; ++r)  // the last segment's v 4× larger (exact in bf16): another bound
        for (int64_t c = v0; c < W; ++c) qkv.ptr<float>()[r * W + c] *= 4.f;
      Tensor o16 = b->empty({R, OW}, DType::BF16), d = b->upload(qkv, DType::BF16);
      b->self_attention_in_fp8(d, s, o16);
      const Tensor o = b->download(o16).to_f32();
      const auto [codes, scales] = codes_of(*b, qkv, s);
      ASSERT_EQ(codes.numel(), R * OW);
      ASSERT_EQ(scales.numel(), R);
      int64_t wrong_scales = 0, wrong_codes = 0;
      for (size_t g = 0; g + 1 < segments.size(); ++g) {
        float bound = 0.f;
        for (int64_t r = segments[g]; r < segments[g + 1]; ++r)
          for (int64_t c = v0; c < W; ++c) bound = std::max(bound, std::fabs(qkv.ptr<float>()[r * W + c]));
        const float scale = cpu::fp8_group_scale(bound), inv = 1.f / scale;
        for (int64_t r = segments[g]; r < segments[g + 1]; ++r) {
          wrong_scales += scales.ptr<float>()[r] != scale;
          for (int64_t c = 0; c < OW; ++c)
            wrong_codes += codes.ptr<uint8_t>()[r * OW + c] != cpu::encode_e4m3(o.ptr<float>()[r * OW + c] * inv);
        }
      }
      cuda_set_fp8_fused_quant(*b, false);
      const auto [separate_codes, separate_scales] = codes_of(*b, qkv, s);
      cuda_set_fp8_fused_quant(*b, true);
      std::printf("[ fp8 attention cuda ] %s-key tiles, head_dim %d: %lld of %lld scales and %lld of %lld codes "
                  "differ from the bound's rule; the separate pass %s\n",
                  keys, dh, static_cast<long long>(wrong_scales), static_cast<long long>(R),
                  static_cast<long long>(wrong_codes), static_cast<long long>(R * OW),
                  std::memcmp(codes.data(), separate_codes.data(), codes.nbytes()) == 0 &&
                          std::memcmp(scales.data(), separate_scales.data(), scales.nbytes()) == 0
                      ? "equals them"
                      : "DIFFERS");
      EXPECT_EQ(wrong_scales, 0) << keys << " " << dh;
      EXPECT_EQ(wrong_codes, 0) << keys << " " << dh;
      EXPECT_EQ(std::memcmp(codes.data(), separate_codes.data(), codes.nbytes()), 0) << keys << " " << dh;
      EXPECT_EQ(std::memcmp(scales.data(), separate_scales.data(), scales.nbytes()), 0) << keys << " " << dh;
      if (dh == 128) {
        const ScopedEnv off("H3_DISABLE_FP8_ATTENTION_CODES", "1");
        auto per_row = make_cuda_backend();
        const auto [row_codes, row_scales] = codes_of(*per_row, qkv, s);
        int64_t wrong = 0;
        for (int64_t r = 0; r < R; ++r) {
          float amax = 0.f;
          for (int64_t c = 0; c < OW; ++c) amax = std::max(amax, std::fabs(o.ptr<float>()[r * OW + c]));
          wrong += row_scales.ptr<float>()[r] != cpu::fp8_group_scale(amax);
        }
        std::printf("[ fp8 attention cuda ] H3_DISABLE_FP8_ATTENTION_CODES=1: %lld of %lld rows not scaled by their "
                    "own largest value\n",
                    static_cast<long long>(wrong), static_cast<long long>(R));
        EXPECT_EQ(wrong, 0);
      }
    }
}

// A small DiT (heads of 128 as the released model's) with its main blocks' attention in FP8 against its bf16 forward:
// the acceptance figure, velocity cosine ≥ 0.995 per modality, on random weights.
TEST_F(Fp8AttentionCuda, DitForwardCloseToBf16) {
  DitConfig c;
  c.num_attention_heads = 2;
  c.attention_head_dim = 128;
  c.hidden_size = 256;
  c.num_layers = 4;
  c.num_refiner_layers = 1;
  c.ffn_dim = 512;
  c.in_channels = 16;
  c.audio_in_channels = 16;
  c.text_dim = 64;
  c.freq_dim = 64;
  c.time_embed_hidden_dim = 128;
  c.time_embed_dim = 128;
  c.rope_freq_dim = 16;  // 3 axes × 32 = 96 of 128 channels rotated
  c.validate("Fp8AttentionCuda");
  const DitForwardArgs args = dit_test::make_case(c, 24, 60, 300, {0.3f, 0.8f}, 5, true);
  const DitOutput ref = random_dit(*be, c)->forward(args);
  RandomDitOptions o;
  o.precision.fp8_attention = true;
  const DitOutput out = random_dit(*be, c, o)->forward(args);
  EXPECT_EQ(cuda_last_attention_path(*be), "h3-hopper-fp8");
  const double cv = cosine(out.sample, ref.sample), ca = cosine(out.audio_sample, ref.audio_sample);
  std::printf("[ fp8 attention cuda ] dit forward, FP8 attention vs bf16: video cosine %.6f rel L2 %.4f, audio "
              "cosine %.6f rel L2 %.4f\n",
              cv, rel_l2(out.sample, ref.sample), ca, rel_l2(out.audio_sample, ref.audio_sample));
  EXPECT_GE(cv, 0.995);
  EXPECT_GE(ca, 0.995);
}

#endif  // H3_HAVE_CUDA

}  // namespace
}  // namespace h3
