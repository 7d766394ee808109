// Hand-written: the emulation is the oracle of the CUDA kernel's own arithmetic (no library computes it).
#include "backend/cpu/cpu_fp8_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_fp8.h"
#include "tensor/dtype.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace h3::cpu {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

float finite_magnitude(float v) { return std::isfinite(v) ? std::fabs(v) : 0.f; }

void check_spec(const Tensor& qkv, const AttentionSpec& s) {
  H3_CHECK(s.heads_q > 0 && s.heads_kv > 0 && s.heads_q % s.heads_kv == 0 && s.head_dim > 0,
           "fp8 attention: bad head configuration ", s.heads_q, "/", s.heads_kv, "x", s.head_dim);
  H3_CHECK(!s.causal, "fp8 attention is non-causal only");
  H3_CHECK(qkv.device() == Device::CPU && qkv.dtype() == DType::F32 && qkv.ndim() == 2 &&
               qkv.dim(1) == (s.heads_q + 2 * s.heads_kv) * s.head_dim,
           "fp8 attention: qkv ", qkv.str(), " must be host F32 [rows, ", (s.heads_q + 2 * s.heads_kv) * s.head_dim,
           "]");
}

// One head's rows [0, len) of `src` (row stride `row`) → codes [Lp, Dh] and one scale per block of `rows` rows.
void quantize_rows(const float* src, int64_t row, int64_t len, int64_t Dh, uint8_t* codes, float* scales,
                   int64_t blocks, int64_t rows) {
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * rows, r1 = std::min(len, r0 + rows);
    float amax = 0.f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < Dh; ++c) amax = std::max(amax, finite_magnitude(src[r * row + c]));
    const float s = fp8_group_scale(amax);
    scales[b] = s;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < Dh; ++c) codes[r * Dh + c] = encode_e4m3(src[r * row + c] / s);
  }
}

}  // namespace

Fp8AttentionOperands quantize_attention_fp8(const Tensor& qkv, const AttentionSpec& s, int64_t first, int64_t len,
                                            int64_t batch, int64_t key_tile) {
  check_spec(qkv, s);
  H3_CHECK(first >= 0 && len >= 0 && batch >= 0 && first + batch * len <= qkv.dim(0), "fp8 attention: rows [", first,
           ", ", first + batch * len, ") outside qkv ", qkv.str());
  H3_CHECK(key_tile > 0 && key_tile % 16 == 0, "fp8 attention: key tile ", key_tile, " (a positive multiple of 16)");
  const int64_t Hq = s.heads_q, Hkv = s.heads_kv, Dh = s.head_dim, W = qkv.dim(1);
  Fp8AttentionOperands o;
  o.batch = batch;
  o.len = len;
  o.padded = fp8_attention_padded_rows(len, key_tile);
  o.key_tile = key_tile;
  const int64_t Lp = o.padded, q_blocks = o.q_blocks(), k_blocks = o.k_blocks();
  o.q = Tensor::zeros({batch, Hq, Lp, Dh}, DType::U8);
  o.k = Tensor::zeros({batch, Hkv, Lp, Dh}, DType::U8);
  o.vt = Tensor::zeros({batch, Hkv, Dh, Lp}, DType::U8);
  o.qs = Tensor::empty({batch, Hq, q_blocks}, DType::F32);
  o.ks = Tensor::empty({batch, Hkv, k_blocks}, DType::F32);
  o.vs = Tensor::empty({batch, Hkv, Dh}, DType::F32);
  const float* X = qkv.ptr<float>();
  for (int64_t b = 0; b < batch; ++b) {
    const float* seg = X + (first + b * len) * W;
    for (int64_t h = 0; h < Hq; ++h)
      quantize_rows(seg + h * Dh, W, len, Dh, o.q.ptr<uint8_t>() + (b * Hq + h) * Lp * Dh,
                    o.qs.ptr<float>() + (b * Hq + h) * q_blocks, q_blocks, kFp8AttentionBlock);
    for (int64_t h = 0; h < Hkv; ++h) {
      quantize_rows(seg + (Hq + h) * Dh, W, len, Dh, o.k.ptr<uint8_t>() + (b * Hkv + h) * Lp * Dh,
                    o.ks.ptr<float>() + (b * Hkv + h) * k_blocks, k_blocks, key_tile);
      const float* v = seg + (Hq + Hkv + h) * Dh;
      uint8_t* vt = o.vt.ptr<uint8_t>() + (b * Hkv + h) * Dh * Lp;
      float* vs = o.vs.ptr<float>() + (b * Hkv + h) * Dh;
      for (int64_t c = 0; c < Dh; ++c) {
        float amax = 0.f;
        for (int64_t r = 0; r < len; ++r) amax = std::max(amax, finite_magnitude(v[r * W + c]));
        vs[c] = fp8_group_scale(amax);
        for (int64_t r = 0; r < len; ++r) vt[c * Lp + fp8_attention_v_slot(r)] = encode_e4m3(v[r * W + c] / vs[c]);
      }
    }
  }
  return o;
}

void attention_fp8_of(const Fp8AttentionOperands& ops, const AttentionSpec& s, int64_t first, Tensor& out,
                      const Fp8AttentionArithmetic& a) {
  const int64_t Hq = s.heads_q, Hkv = s.heads_kv, Dh = s.head_dim, len = ops.len, Lp = ops.padded;
  const int64_t T = ops.key_tile, q_blocks = ops.q_blocks(), tiles = ops.k_blocks(), OW = Hq * Dh, group = Hq / Hkv;
  H3_CHECK(out.device() == Device::CPU && dtype_is_float(out.dtype()) && out.ndim() == 2 && out.dim(1) == OW &&
               first + ops.batch * len <= out.dim(0),
           "fp8 attention: output ", out.str(), " must be a host float [rows, ", OW, "]");
  H3_CHECK(a.key_tile == T, "fp8 attention: operands quantized for ", T, "-key tiles, arithmetic of ", a.key_tile);
  H3_CHECK(a.exp2_poly_chunks == 0 || T == kFp8AttentionBlock, "fp8 attention: the polynomial exp2 is defined on ",
           kFp8AttentionBlock, "-key tiles only");
  // The decoded codes, once: every product of two E4M3 values is exact in float64.
  const auto decoded = [](const Tensor& codes) {
    std::vector<double> d(static_cast<size_t>(codes.numel()));
    for (int64_t i = 0; i < codes.numel(); ++i) d[i] = decode_e4m3(codes.ptr<uint8_t>()[i]);
    return d;
  };
  const std::vector<double> Q = decoded(ops.q), K = decoded(ops.k), V = decoded(ops.vt);
  Tensor o32 = Tensor::empty({ops.batch * len, OW}, DType::F32);
  const float scale_log2 = s.scale * kLog2e;
  parallel_for(0, ops.batch * Hq * len, 4, [&](int64_t t0, int64_t t1) {
    std::vector<float> raw(static_cast<size_t>(T)), acc(Dh);
    std::vector<double> tile(Dh);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / (Hq * len), h = t / len % Hq, i = t % len, hk = h / group;
      const double* q = Q.data() + ((b * Hq + h) * Lp + i) * Dh;
      const float qc = scale_log2 * ops.qs.ptr<float>()[(b * Hq + h) * q_blocks + i / kFp8AttentionBlock];
      float m = -INFINITY, l = 0.f;
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t j = 0; j * T < len; ++j) {
        const float c = qc * ops.ks.ptr<float>()[(b * Hkv + hk) * tiles + j];
        const int64_t key0 = j * T;
        float tile_max = -INFINITY;
        for (int64_t r = 0; r < T; ++r) {
          if (key0 + r >= len) {
            raw[r] = -INFINITY;
            continue;
          }
          const double* k = K.data() + ((b * Hkv + hk) * Lp + key0 + r) * Dh;
          double d = 0;
          for (int64_t ch = 0; ch < Dh; ++ch) d += q[ch] * k[ch];
          raw[r] = static_cast<float>(d);
          tile_max = std::max(tile_max, raw[r]);
        }
        const float m_new = std::max(m, tile_max * c);
        const float alpha = std::exp2(m - m_new);  // m = −∞ before the first tile: 0
        m = m_new;
        const float bias = m_new - kFp8AttentionPOffsetLog2;
        float rowsum = 0.f;  // of the unrounded P (tile_accumulator)
        double used = 0.0;   // of the rounded P
        std::fill(tile.begin(), tile.end(), 0.0);
        for (int64_t r = 0; r < T && key0 + r < len; ++r) {
          const float x = std::fma(raw[r], c, -bias);
          const float p = fp8_attention_poly_key(r, a.exp2_poly_chunks) ? fp8_attention_exp2_poly(x) : std::exp2(x);
          rowsum += p;
          const double pr = decode_e4m3(encode_e4m3(p));
          if (pr == 0.0) continue;
          used += pr;
          const double* v = V.data() + (b * Hkv + hk) * Dh * Lp + fp8_attention_v_slot(key0 + r);
          for (int64_t ch = 0; ch < Dh; ++ch) tile[ch] += pr * v[ch * Lp];
        }
        l = a.tile_accumulator ? l * alpha + rowsum : std::fma(l, alpha, static_cast<float>(used));
        for (int64_t ch = 0; ch < Dh; ++ch) acc[ch] = std::fma(acc[ch], alpha, static_cast<float>(tile[ch]));
      }
      const float inv = 1.f / l;
      const float* vs = ops.vs.ptr<float>() + (b * Hkv + hk) * Dh;
      float* o = o32.ptr<float>() + (b * len + i) * OW + h * Dh;
      for (int64_t ch = 0; ch < Dh; ++ch) o[ch] = acc[ch] * inv * vs[ch];
    }
  });
  const Tensor stored = out.dtype() == DType::F32 ? o32 : o32.to(out.dtype());
  std::memcpy(static_cast<char*>(out.data()) + first * OW * dtype_size(out.dtype()), stored.data(), stored.nbytes());
}

void attention_in_fp8(const Tensor& qkv, const AttentionSpec& s, Tensor& out, const Fp8AttentionArithmetic& a) {
  check_spec(qkv, s);
  const int64_t R = qkv.dim(0);
  const std::vector<int64_t> seg = s.segments.empty() ? std::vector<int64_t>{0, R} : s.segments;
  H3_CHECK(seg.size() >= 2 && seg.front() == 0 && seg.back() == R, "fp8 attention: segments must span [0, ", R, ")");
  for (size_t i = 0; i + 1 < seg.size(); ++i) {
    H3_CHECK(seg[i] <= seg[i + 1], "fp8 attention: segments must be non-decreasing");
    if (seg[i + 1] == seg[i]) continue;
    attention_fp8_of(quantize_attention_fp8(qkv, s, seg[i], seg[i + 1] - seg[i], 1, a.key_tile), s, seg[i], out, a);
  }
}

}  // namespace h3::cpu
