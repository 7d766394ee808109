// Host-side launchers of the CUDA backend's own kernels (defined in *.cu). Plain pointers and element types only,
// so this header compiles with the host compiler too. Every launcher checks its launch (H3_CUDA_LAUNCH_CHECK).
//
// Arithmetic contract: every kernel loads its operands (f32, bf16 or f16), computes in f32 and rounds once when it
// stores (round-to-nearest-even). Where PyTorch's eager reference rounds intermediate results to bf16 several
// times (dit.md §7: the AdaLN modulate, the gated residual, SwiGLU, q/k norm + RoPE), these kernels round only the
// final value, as FastVideo's fused kernels do; the difference is within bf16 rounding of the final value.
// RMSNorm follows the fused path of recent PyTorch (dit.md §7): x·rsqrt(mean(x²) + eps)·w in f32 with eps as the
// f32 value given, rounded once — not the composite path's bf16 eps and second rounding after the weight.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace h3::cuda {

enum class Elem : int { F32 = 0, BF16 = 1, F16 = 2 };

struct In {
  const void* p = nullptr;
  Elem t = Elem::F32;
};
struct Out {
  void* p = nullptr;
  Elem t = Elem::F32;
};

// Device error codes written to the backend's error word (mapped host memory) by kernels that find a bad index.
enum class DeviceError : int { None = 0, TableRowOutOfRange = 1, RowIndexOutOfRange = 2, AttentionStalled = 3 };

// ---- memory ----
void launch_convert(In src, Out dst, int64_t n, cudaStream_t s);
void launch_fill(Out dst, int64_t n, float value, cudaStream_t s);
// Normal(mean, stddev) values from a counter-based hash of (seed, index): the same values on every launch.
void launch_fill_random_normal(Out dst, int64_t n, uint64_t seed, float stddev, cudaStream_t s, float mean = 0.f);

// A per-row lookup into a table of parameter vectors [rows, params, D]: data row r reads table[idx[r], p, :]
// (idx: I32 device pointer, one entry per data row).
struct RowTable {
  In table;
  int64_t rows = 0;
  int params = 0;
  const int32_t* idx = nullptr;
};

// ---- rows ----
void launch_rms_norm(In x, In w, float eps, Out y, int64_t rows, int64_t D, cudaStream_t s);
void launch_layer_norm(In x, In w, In b, float eps, Out y, int64_t rows, int64_t D, cudaStream_t s);
// table: [table_rows, P, D]; idx: I32 [rows].
void launch_rms_norm_modulate(In x, In w, float eps, In table, int64_t table_rows, int P, int shift_param,
                              int scale_param, const int32_t* idx, Out y, int64_t rows, int64_t D, int* err,
                              cudaStream_t s);
void launch_gated_residual(Out x, In y, In table, int64_t table_rows, int P, int gate_param, const int32_t* idx,
                           int64_t rows, int64_t D, int* err, cudaStream_t s);
// launch_gated_residual then launch_rms_norm_modulate of the updated x, in one kernel where the row fits in
// registers (D % 8 == 0, 16-byte aligned operands, D <= 8192), else those two launches. Bit-identical either way:
// the fused kernel rounds x + g·y to x's dtype, stores it and normalizes the stored values.
void launch_gated_residual_modulate(Out x, In y, const RowTable& gate, int gate_param, In w, float eps,
                                    const RowTable& modulation, int shift_param, int scale_param, Out h, int64_t rows,
                                    int64_t D, int* err, cudaStream_t s);
// x += y · scale[c] (scale may be null), n elements, D channels.
void launch_residual_add(Out x, In y, In scale, int64_t n, int64_t D, cudaStream_t s);
// launch_residual_add then launch_rms_norm of the updated x, in one kernel where the row fits in registers (D % 8 == 0,
// 16-byte aligned operands, D <= 8192), else those two launches. Bit-identical either way: the fused kernel adds as
// the residual kernel does, stores x and normalizes the stored values as the norm kernel does.
void launch_residual_rms_norm(Out x, In y, In scale, In w, float eps, Out h, int64_t rows, int64_t D, cudaStream_t s);
// y[r, c] += bias[c]
void launch_add_bias(Out y, In bias, int64_t rows, int64_t N, cudaStream_t s);
void launch_swiglu(In u, bool value_first, Out a, int64_t rows, int64_t F, cudaStream_t s);
void launch_silu(In x, Out y, int64_t n, cudaStream_t s);
void launch_gelu(In x, bool tanh_approx, Out y, int64_t n, cudaStream_t s);
// scatter: dst[idx[i]] = src[i]; gather: dst[i] = src[idx[i]]; n index entries, D channels, bound = rows of the
// indexed tensor.
void launch_move_rows(In src, const int32_t* idx, Out dst, int64_t n, int64_t D, bool scatter, int64_t bound, int* err,
                      cudaStream_t s);
// Backend::pool_row_pairs / unpool_row_pairs over `pairs` (I32 [n, 2] of rows in [0, bound)), D channels; full
// and reduced share one dtype. A row outside [0, bound) writes DeviceError::RowIndexOutOfRange to err.
void launch_pool_row_pairs(In full, const int32_t* pairs, Out reduced, int64_t n, int64_t D, int64_t bound, int* err,
                           cudaStream_t s);
void launch_unpool_row_pairs(In reduced, const int32_t* pairs, Out full, int64_t n, int64_t D, int64_t bound, int* err,
                             cudaStream_t s);

// ---- attention ----
// Per-head RMSNorm of the q and k heads of qkv [rows, W] (W = (Hq + 2·Hkv)·Dh, 16-bit or f32; weights may be
// null) and rotate-half RoPE on their first `rot` channels with per-row cos/sin [rows, rot]. dst.p null: in place;
// else dst is [Hq + 2·Hkv, rows, Dh] (head-major) and receives the transformed q and k heads and a copy of the v
// heads, qkv being only read. row_kernel: in place, use the one-block-per-row kernel where it applies (the default;
// false selects the one-warp-per-head kernels, its exact twin in function).
void launch_qk_norm_rope(Out qkv, Out dst, int64_t rows, int heads_q, int heads_kv, int head_dim, bool qk_norm,
                         float eps, In wq, In wk, int rot, In cos, In sin, bool row_kernel, cudaStream_t s);

// Our flash attention (the portable fallback and the exact twin of cuDNN's): online softmax, f32 accumulation,
// bf16/f16 P·V. q/k/v/o point at head 0 of row 0 of batch 0; strides in elements (k and v share theirs).
struct FlashParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  Elem t = Elem::BF16;
  int64_t q_row = 0, k_row = 0, v_row = 0, o_row = 0;        // between consecutive rows
  int64_t q_head = 0, kv_head = 0, o_head = 0;               // between consecutive heads
  int64_t q_batch = 0, kv_batch = 0, o_batch = 0;            // between consecutive batch entries (segments)
  int batch = 1, seq_len = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  float scale = 1.f;
  bool causal = false;
};
constexpr int kFlashMaxHeadDim = 256;
void launch_flash_attention(const FlashParams& p, cudaStream_t s);

// Our Hopper attention kernel (kernels_attention_sm90.cu: TMA, wgmma, warp-specialized, ping-pong consumers) for
// non-causal attention with head_dim 64 or 128 on 16-bit q/k/v, every stride a multiple of 8 elements and
// every pointer 16-byte aligned, on a compute capability 9.0 device. Launches and returns null, or launches
// nothing and returns why it does not apply (the caller then uses cuDNN or the flash kernel). A pipeline wait that
// never completes (a bug) ends the kernel and writes DeviceError::AttentionStalled to `err` instead of hanging.
// The schedule changes only the summation order of the softmax (the same function): key_tile, keys per K/V tile
// (128 or 176); hd64_consumers, the consumer warpgroups of 64 query rows for head_dim 64 (2, or 3 with 128-key
// tiles whatever key_tile says: 176 would not fit the registers; head_dim 128 always runs 2).
struct HopperSchedule {
  int key_tile = 176;
  int hd64_consumers = 3;
};
const char* launch_hopper_attention(const FlashParams& p, const HopperSchedule& sched, int* err, cudaStream_t s);

// FP8 attention on Hopper (kernels_attention_fp8_sm90.cu; the arithmetic and the operands' layout are
// backend/cpu/cpu_fp8_attention.h's) over p.batch segments of p.seq_len rows, Lp = cpu::fp8_attention_padded_rows
// (seq_len, T) for key tiles of T keys: the buffers of the quantized operands, device memory the caller allocates.
constexpr int kFp8AttentionBlock = 128;
struct Fp8AttentionBuffers {
  uint8_t* q = nullptr;         // [batch, Hq, Lp, Dh]
  uint8_t* k = nullptr;         // [batch, Hkv, Lp, Dh]
  uint8_t* vt = nullptr;        // [batch, Hkv, Dh, Lp]
  float* q_scale = nullptr;     // [batch, Hq, Lp / 128]
  float* k_scale = nullptr;     // [batch, Hkv, Lp / T]
  float* v_scale = nullptr;     // [batch, Hkv, Dh]
  uint32_t* v_amax = nullptr;   // [batch, Hkv, Dh]: scratch
  uint32_t* v_bound = nullptr;  // [batch]: the largest finite |v| of each segment (as its float's bits)
};
// Null where launch_hopper_attention_fp8 takes p (16-bit q/k/v sharing their row and segment strides, non-causal,
// head_dim 64 or 128, strides multiples of 8 elements, 16-byte aligned pointers, a compute capability 9.0 device,
// a build with the sm_90a code), else why it does not (a phrase).
const char* hopper_attention_fp8_refusal(const FlashParams& p);
// The quantization of p's q, k and v into b alone (the first step of launch_hopper_attention_fp8; for the tests).
struct Fp8AttentionSchedule;
void launch_attention_fp8_quantize(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched,
                                   cudaStream_t s);
// The kernel's choices: exp2_poly_chunks, how many of the 16 chunks of 8 keys of every key tile take their exp2 on
// the FMA pipes by cpu_fp8_attention.h's polynomial instead of the SFU (0 or 4; H3_FP8_ATTENTION_POLY_CHUNKS=4, slower
// on an H200: BENCHMARKS.md); stages, the depth of the K / vᵀ ring (2 or 3; the same arithmetic); tensor_sum_tiles,
// how many key tiles' P·V (and row sums of the rounded P, an extra column of ones in vᵀ) the tensor cores add up
// before they go into the f32 O (1, 2 or 4; H3_FP8_ATTENTION_TENSOR_SUM_TILES), or 0: every tile's P·V into a fresh
// accumulator with row sums of the unrounded P on the CUDA cores (H3_FP8_ATTENTION_TILE_ACCUMULATOR=1); key_tile,
// the keys of a tile and rows of a k scale (H3_FP8_ATTENTION_KEY_TILE: 192, or 128). The 128-key kernel takes every
// choice; the 192-key one no polynomial, 2 stages and tensor-core sums (fp8_attention_schedule_refusal). The
// defaults are the fastest measured (BENCHMARKS.md, session 13). The arithmetic is cpu::attention_fp8_of's with the
// same cpu::Fp8AttentionArithmetic.
struct Fp8AttentionSchedule {
  int exp2_poly_chunks = 0;
  int stages = 2;
  int tensor_sum_tiles = 4;
  int key_tile = 192;
};
// Null where the kernel has an instance for sched, else why not (a sentence naming the valid choices).
const char* fp8_attention_schedule_refusal(const Fp8AttentionSchedule& sched);
// Quantization, then the attention into p.o. p must pass hopper_attention_fp8_refusal. A pipeline wait that never
// completes writes DeviceError::AttentionStalled to `err`, as launch_hopper_attention does.
// With `codes` (issue 18: the out product's FP8 activation written by the attention itself), p.o holds E4M3 codes
// instead (p.o_* strides in bytes) and codes->scale[b·seq_len + r] the scale of segment b's row r: every row of a
// segment has the segment's bound on |O|, fp8 scale(max |v|) = b.v_bound's float / 448 (O is a convex combination of
// v's rows, so no code saturates), and its codes are those of O as the 16-bit output would hold it (p.t) times the
// scale's reciprocal (a multiply, not the activations' IEEE division: the same code but where x / s lies within a
// float32 ulp of an E4M3 midpoint) — launch_fp8_quantize_rows_by_bound of the 16-bit output, bit for bit. Null where
// the schedule has no such instance: fp8_attention_codes_refusal.
struct Fp8AttentionCodes {
  float* scale = nullptr;
};
const char* fp8_attention_codes_refusal(const Fp8AttentionSchedule& sched);
void launch_hopper_attention_fp8(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched,
                                 int* err, cudaStream_t s, const Fp8AttentionCodes* codes = nullptr);

}  // namespace h3::cuda
