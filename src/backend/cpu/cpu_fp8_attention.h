// FP8 attention (issue 18; --precision fp8 on Hopper, Backend::self_attention_in_fp8): the definition of its
// arithmetic and the host emulation the CUDA kernel (backend/cuda/kernels_attention_fp8_sm90.cu) is checked against.
// E4M3 rounding and group scales are backend/cpu/cpu_fp8.h's.
//
// Per segment of `len` rows (rows padded to Lp = fp8_attention_padded_rows(len, T), T the key tile: 192 keys by
// default, or 128) and head:
//   q, k: one scale per block of rows, s = fp8_group_scale(amax of the block's q (k) values), q's blocks of
//         kFp8AttentionBlock rows (the kernel's query block), k's of T rows (its key tile); codes encode_e4m3(x / s);
//         padding rows code 0.
//   v:    one scale per channel over the segment's rows (it multiplies the output channel, so it folds out of P·V
//         exactly); codes encode_e4m3(x / s_c).
//   S, softmax and P, per query row, over the key tiles j of T keys in order (f32 unless said):
//     raw_r  = Σ_c dec(q_c)·dec(k_rc) (every product exact; the sum in float64 here, in the tensor cores on the GPU),
//              −∞ for keys ≥ len;
//     c_j    = (scale·log2 e · s_q) · s_k,j               the dequantization folded into the softmax scale;
//     M_j    = max(M_{j−1}, max_r(raw_r) · c_j)           (M_{−1} = −∞), the running maximum in log2 units;
//     α_j    = 2^(M_{j−1} − M_j);
//     p_r    = 2^(raw_r·c_j − (M_j − 8))                  (fmaf), in [0, 256]: P scaled by 2^8 uses E4M3's range;
//              the exponential is exp2 (ex2.approx on the GPU), except for the keys fp8_attention_poly_key picks,
//              whose 2^x is fp8_attention_exp2_poly(x) (the kernel evaluates those on the FMA pipes; see there);
//     t_c    = Σ_r dec(encode_e4m3(p_r))·dec(v_rc)        one tile's P·V from P rounded to E4M3 (float64 here);
//     o_j,c  = fmaf(o_{j−1,c}, α_j, t_c)                  accumulated in f32 tile by tile;
//     l_j    = fmaf(l_{j−1}, α_j, Σ_r dec(encode_e4m3(p_r)))  the row sum of the weights P·V used: a channel of v
//              that is all ones (the kernel sums it on the tensor cores with O, an extra column of vᵀ);
//              with Fp8AttentionArithmetic::tile_accumulator, l_j = l_{j−1}·α_j + Σ_r p_r instead (f32, the
//              unrounded P: that kernel sums it on the CUDA cores);
//   out_c = (o_c · (1 / l)) · s_v,c, rounded once to the output's dtype.
// The kernel adds each tile's P·V into O on the tensor cores (their FP8 accumulation keeps about 14 bits) unless
// tile_accumulator, where every tile's product lands in a fresh accumulator added to O on the CUDA cores in f32.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace h3::cpu {

constexpr int64_t kFp8AttentionBlock = 128;  // rows per q scale (the kernel's query block), a key tile's alternative
constexpr int64_t kFp8AttentionKeyTile = 192;  // the default key tile (keys per tile and per k scale)
constexpr float kFp8AttentionPOffsetLog2 = 8.f;  // P is computed scaled by 2^8

// Rows of the padded operands: len rounded up to a multiple of both the query block and the key tile (whose q and k
// scale blocks then tile Lp exactly).
inline int64_t fp8_attention_padded_rows(int64_t len, int64_t key_tile) {
  const int64_t unit = std::lcm(kFp8AttentionBlock, key_tile);
  return (len + unit - 1) / unit * unit;
}

// Where key r of a group of 16 keys sits in the transposed v codes (the P·V product's reduction order: the FP8
// wgmma's A-operand bytes, built from the S accumulator without shuffles, hold keys 2t, 2t+1, 8+2t, 9+2t at
// positions 4t..4t+3; spec in the kernel's header).
inline int64_t fp8_attention_v_slot(int64_t r) {
  const int64_t i = r & 15;
  return (r & ~int64_t(15)) | (4 * ((i >> 1) & 3) + (i & 1) + 2 * ((i >> 3) & 1));
}

// FP8 attention's exponentials off the SFU (issue 18). Per S element the kernel does one exp2 against 512 FP8 tensor
// FLOPs at head_dim 128, which is the SFU's rate (16 per clock per SM) against the FP8 tensor cores' (8192 FLOPs per
// clock per SM): the SFU is as busy as the tensor cores. As FlashAttention-4 does on Blackwell, a share of
// the exponentials is evaluated on the FMA pipes instead: x = max(x, −127), x = j + f with j = ⌊x⌋ and f in [0, 1),
// 2^f by a cubic, and j added to its exponent field. The cubic is the minimax one for relative error with value 1 at
// f = 0 (coefficients by Remez exchange, rounded to float): |relative error| ≤ 8.6e-5 over [0, 1), 2^-13.5, far
// below E4M3's half step 2^-4 that P is rounded to next; x = −127 (and −∞, a masked key) gives +0 exactly; x in
// (−127, −126) gives a subnormal below 2^-126 (not 2^x, and as negligible: its E4M3 code is 0). Every step is exact
// or one correctly rounded fmaf, so the kernel's value (⌊x⌋ by a round-down add of 1.5·2^23) is this one's bit for
// bit (tests/test_fp8_attention.cpp, Fp8AttentionEmulation.PolynomialExp2).
inline float fp8_attention_exp2_poly(float x) {
  constexpr float kC1 = 0x1.63e658p-1f, kC2 = 0x1.d2378ap-3f, kC3 = 0x1.3baaa6p-4f;
  x = std::fmax(x, -127.f);
  const float j = std::floor(x), f = x - j;
  const float q = std::fma(std::fma(std::fma(kC3, f, kC2), f, kC1), f, 1.f);
  uint32_t bits;
  std::memcpy(&bits, &q, 4);
  bits += static_cast<uint32_t>(static_cast<int32_t>(j)) << 23;
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}

// Which keys take fp8_attention_exp2_poly when the kernel evaluates `poly_chunks` of the 16 chunks of 8 keys of every
// key tile (0..16; 0: none, the all-SFU twin) by polynomial: chunk k = (key mod 128) / 8 does iff (k·n) mod 16 < n,
// exactly n chunks spread evenly over the tile (128-key tiles only).
inline bool fp8_attention_poly_key(int64_t key, int poly_chunks) {
  const int64_t k = (key % kFp8AttentionBlock) / 8;
  return (k * poly_chunks) % 16 < poly_chunks;
}

// The kernel's choices that change its arithmetic, which the emulation follows: exp2_poly_chunks as
// fp8_attention_poly_key's (128-key tiles only); tile_accumulator, the row sums of the unrounded P (the header's
// alternative); key_tile, the keys of a tile and rows of a k scale (a positive multiple of 16; the kernel's are 192
// and 128).
struct Fp8AttentionArithmetic {
  int exp2_poly_chunks = 0;
  bool tile_accumulator = false;
  int64_t key_tile = kFp8AttentionKeyTile;
};

// What rounding P to E4M3 allows one output channel of a row of n keys against the float64 attention of the same
// operands (derived in test_fp8_attention.cpp; both FP8 attention tests hold their side to it, plus what they add):
// |O − O_exact| ≤ weights·max_r |v̂_r| + output·|O_exact|, with e = 2^-4 + n·2^-18 (E4M3's relative step and the
// exponent FMA's f32 rounding): weights = e, output = 0 under the tile accumulator (l of the unrounded P), else
// weights = output = e / (1 − e) (l of the rounded P it divides by).
struct Fp8AttentionRoundingBound {
  double weights = 0, output = 0;
};
inline Fp8AttentionRoundingBound fp8_attention_rounding_bound(int64_t n, const Fp8AttentionArithmetic& a) {
  const double e = 0x1p-4 + static_cast<double>(n) * 0x1p-18;
  if (a.tile_accumulator) return {e, 0.0};
  return {e / (1 - e), e / (1 - e)};
}

// The FP8 operands of `batch` equal segments of `len` rows each (padded = Lp), heads_q / heads_kv heads of head_dim,
// for key tiles of T keys:
//   q  U8 [batch, Hq, Lp, Dh]    qs F32 [batch, Hq, Lp/128]
//   k  U8 [batch, Hkv, Lp, Dh]   ks F32 [batch, Hkv, Lp/T]
//   vt U8 [batch, Hkv, Dh, Lp]   vs F32 [batch, Hkv, Dh]
// vt is v transposed, key r of a segment at position fp8_attention_v_slot(r) of its channel's row.
struct Fp8AttentionOperands {
  Tensor q, qs, k, ks, vt, vs;
  int64_t batch = 0, len = 0, padded = 0, key_tile = kFp8AttentionKeyTile;
  int64_t q_blocks() const { return padded / kFp8AttentionBlock; }
  int64_t k_blocks() const { return padded / key_tile; }
};

// The rows [first, first + batch·len) of qkv (host F32 [rows, (Hq + 2·Hkv)·Dh], q/k already normalized and rotated)
// as `batch` segments of `len` rows, for key tiles of key_tile keys (a positive multiple of 16).
Fp8AttentionOperands quantize_attention_fp8(const Tensor& qkv, const AttentionSpec& s, int64_t first, int64_t len,
                                            int64_t batch, int64_t key_tile = kFp8AttentionKeyTile);

// The attention of quantized operands, as the header defines it: out rows [first, first + batch·len) of out (host
// float [rows, Hq·Dh]; rounded to its dtype) under the kernel's arithmetic `a` (whose key_tile is ops').
void attention_fp8_of(const Fp8AttentionOperands& ops, const AttentionSpec& s, int64_t first, Tensor& out,
                      const Fp8AttentionArithmetic& a = {});

// Backend::self_attention_in_fp8's attention on the host: qkv (host F32, q/k already normalized and rotated) → out,
// segment by segment (spec.segments). Non-causal only. a: as attention_fp8_of's.
void attention_in_fp8(const Tensor& qkv, const AttentionSpec& s, Tensor& out, const Fp8AttentionArithmetic& a = {});

}  // namespace h3::cpu
