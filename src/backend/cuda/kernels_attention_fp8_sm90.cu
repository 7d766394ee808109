// FP8 attention for Hopper (sm_90a; issue 18, --precision fp8): FlashAttention-3's FP8 path (Shah et al., 2024),
// written here from its description on the schedule of our bf16 kernel (kernels_attention_sm90.cu). The arithmetic
// is backend/cpu/cpu_fp8_attention.h's, which the CPU emulates and the tests hold this kernel to.
//
// Design
// - Quantization, a pass of its own (three small kernels below) from where the q/k norm + RoPE kernel left q, k, v
//   (packed q|k|v rows or head-major copies, bf16 or f16) into padded head-major E4M3 buffers: q and k
//   [segment, head, Lp, Dh] with one scale per (segment, head, 128-row block); v transposed, [segment, head, Dh, Lp]
//   with one scale per (segment, head, channel). 128 rows is the kernel's query block and key tile, so each CTA has
//   one q scale and each key tile one k scale, both folded into the softmax's scale: the S tile is raw_r·c_j with
//   c_j = scale·log2(e)·s_q·s_k,j, one multiply in the exponent's FMA that the bf16 kernel has anyway. v's
//   per-channel scale multiplies the output channel in the epilogue: exact, and finer than FA3's per-head descale
//   (the DiT's v has no norm). Padding rows are zero codes; keys past the segment are masked to −∞.
//   Why transposed v: wgmma with E4M3 operands takes both from shared memory K-major (no transpose bit), and for
//   O = P·V the reduction runs over keys, so V's tile must have keys contiguous. FA3 transposes V in shared memory
//   (LDSM/STSM); we own the producer of V, so the quantization writes it transposed once (a 1/Dh share of its traffic
//   on top of reading V) and every CTA loads vᵀ tiles by TMA like K.
// - P's register layout: the S accumulator holds, per thread (quad lane t of its row pair), keys 8k + 2t, 8k + 2t + 1
//   of chunk k; the E4M3 A operand of wgmma m64nNk32 wants per register four consecutive reduction positions 4t..4t+3
//   (and 16 + 4t..19 + 4t) of one row. FA3 fixes the mismatch with byte permutes and quad shuffles of P. Here each
//   A register is packed from the thread's own accumulator values — keys 2t, 2t+1, 8+2t, 9+2t of a 16-key group —
//   with no data movement, and the reduction order is matched instead on the other operand: the quantization stores
//   key r of each 16-key group at position fp8_attention_v_slot(r) of vᵀ's row (a permutation of the keys of a
//   reduction: the product is unchanged).
// - P's scale: p = 2^(raw·c_j − (M_j − 8)) lies in [0, 2^8] (FA3's Max_offset 8) before its E4M3 rounding, so the
//   largest weights keep E4M3's relative precision and weights down to 2^-17 of the row maximum survive as codes. The
//   offset cancels in O / l.
// - O and the row sums l (GROUP ≥ 1, the default 4: cuda_kernels.h's Fp8AttentionSchedule::tensor_sum_tiles): the
//   P·V of GROUP key tiles in a row is summed in one wgmma accumulator t (one wgmma k32 per 32 keys of a tile), whose N
//   is Dh + 8: an 8-row atom of E4M3 ones after every vᵀ slot makes its last 8 columns Σ P, the row sums of the
//   weights P·V used (rounded to E4M3), at no cost but 1/16 more P·V. A new row maximum rescales t by α (skipped,
//   exactly, when no row of the warp has one: most tiles after the first few); after the group's last tile t goes
//   into the f32 O and l as o = fma(o, A, t), A the product of the α's since O's last update. Why groups: the FP8
//   tensor cores keep about 14 bits of the sum they accumulate into (DeepSeek-V3's report), so a row's whole sum in
//   the accumulator loses its small terms — measured here: a 37,746-key row (1344×768×124) drifted to rel L2 0.29
//   against the emulation; a few tiles per f32 add keep it at the short rows' distance (Fp8AttentionCuda tests).
//   GROUP 0 (H3_FP8_ATTENTION_TILE_ACCUMULATOR=1) is the first design: every tile into a fresh t added to O, and l
//   from the unrounded f32 p summed on the CUDA cores (64 more adds per thread and tile).
// - Schedule: the bf16 kernel's (see there) less its turn-taking: one CTA per 128 query rows of one (segment, head),
//   a producer warpgroup whose one thread issues TMA loads of Q once and of K and vᵀ tiles (of 192 or 128 keys) into a
//   two-stage ring (full / empty mbarriers; three stages with H3_FP8_ATTENTION_STAGES=3), two consumer warpgroups of
//   64 rows that issue their GEMMs as soon as they can (the bf16 kernel's named-barrier turns cost the FP8 one
//   0.3-1.3%: BENCHMARKS.md, session 12), and within a warpgroup S_j = Q·K_jᵀ overlapping P_{j−1}·V_{j−1}. Q
//   and K rows are Dh bytes: the 128-byte swizzle for head_dim 128, the 64-byte one for 64; a vᵀ row is one region's
//   keys (128, or 64 in a 192-key tile). O goes out by direct 4-byte stores from the accumulator layout (Q's shared
//   rows are half the size of O's bf16 rows; the epilogue is once per CTA).
// - O as E4M3 codes (cuda_kernels.h's Fp8AttentionCodes, the out product's activation with per-channel scaling):
//   a per-token scale would need the row's largest value over every head, which no CTA sees; but O is a convex
//   combination of v's rows, so fp8 scale(max |v| over the segment) bounds every row of it, and the quantization
//   pass knows that maximum (v_amax_kernel). So the epilogue rounds each value to bf16 as the 16-bit output would
//   hold it and stores its code times the scale's reciprocal (2 bytes per thread and chunk), the head-0 CTAs the
//   rows' scales: the separate quantization pass of the output (0.69 ms per block at 1344×768×124) goes, for 0.08 ms
//   more in the kernel (BENCHMARKS.md, session 14). E4M3's range keeps 3 mantissa bits down to 2^-14.8 of the bound,
//   so a row far below it loses nothing but subnormals; the forward's velocity cosines are the per-token rule's
//   within 3e-5.
// - Key tiles (Fp8AttentionSchedule::key_tile): 192 keys by default, or 128 (H3_FP8_ATTENTION_KEY_TILE=128, the
//   first design, which alone takes the polynomial, the 3-stage ring and the tile accumulator). A 192-key tile's vᵀ
//   is three regions of 64 keys (64-byte rows, the 64-byte swizzle, a TMA box each) and, at head_dim 128, O lives in
//   shared memory (S 96 + P 24 + t 68 registers leave no room for its 64). With 4 tiles per tensor-core sum it is
//   1-3% faster alone than the 128-key kernel's best and 1.9% in the 1344×768×124 forward (BENCHMARKS.md, session
//   13); three consumer warpgroups (192 query rows at 160 registers, O in shared memory) were measured there too,
//   and were slower at every key tile.
// - Exponentials: per S element one exp2 against 512 FP8 tensor FLOPs at head_dim 128, the SFU's rate against the FP8
//   tensor cores' (16 against 8192 per clock per SM): at the tensor cores' full rate the SFU would be as busy. POLY
//   of every tile's 16 chunks of 8 keys take theirs on the FMA pipes instead, by cpu_fp8_attention.h's
//   fp8_attention_exp2_poly (a cubic after range reduction, ~8 instructions against one SFU one), the rest by
//   ex2.approx. Measured on an H200 (BENCHMARKS.md, session 10) every share of 2 to 8 chunks is slower than none:
//   the kernel runs its tensor cores at 45% and its issue slots at 43–54%, bound by the latency of each warp's
//   softmax between its GEMMs, not by the SFU; so POLY is 0 by default and 4 (H3_FP8_ATTENTION_POLY_CHUNKS=4) stays
//   for GPUs with another SFU-to-tensor ratio.
// - Incoherent processing (FA3's random Hadamard rotation of q and k) is not done: q and k come out of a per-head
//   RMSNorm, which bounds their outlier channels; it is the next knob if the velocity's distance needs it.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/sm90_primitives.cuh"
#include "util/error.h"

namespace h3::cuda {

namespace {

using namespace sm90;

constexpr int kBlock = kFp8AttentionBlock;  // query rows per CTA and per q scale, the 128-key tile, v's row blocks
constexpr int kWgRows = 64;                 // query rows per consumer warpgroup
constexpr int kConsumers = kBlock / kWgRows;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
static_assert((kProducerRegs + kConsumers * kConsumerRegs) * 128 <= 65536, "register budget");
constexpr uint32_t kReleaseArrivals = kConsumers * 4;  // lane 0 of every consumer warp
constexpr float kPOffsetLog2 = 8.f;  // cpu_fp8_attention.h's kFp8AttentionPOffsetLog2

// The operands' shared-memory layout for head_dim DH and key tiles of KT keys (192 or 128: cuda_kernels.h's
// Fp8AttentionSchedule::key_tile): Q and K rows are DH bytes (one swizzle span: 128 or 64 bytes, 8-row atoms of
// 8·DH bytes). A vᵀ tile is KT / R regions of R keys (R = 128 for 128-key tiles, else 64: one swizzle span of R
// bytes per vᵀ row, each region its own TMA box), each region followed by one 8-row atom of ones (E4M3 1.0): rows
// DH..DH+7 of the B operand of the running accumulator's P·V, whose output columns DH..DH+7 are then Σ P.
// Registers per consumer thread: S (KT/2), P (KT/8), the group accumulator t (DH/2 + 4) and O (DH/2); where that
// passes the 128-key head_dim-128 kernel's 212 (which fits the 240 with its scalars), O lives in shared memory
// instead (kOInShared: 192-key tiles at head_dim 128), one 16-byte slot per thread and 4 of its registers.
template <int DH, int KT>
struct Fp8Operands {
  static_assert(DH == 64 || DH == 128, "head_dim 64 or 128");
  static_assert(KT == 128 || KT == 192, "key tiles of 128 or 192 keys");
  static constexpr int kHeadDim = DH, kKeys = KT;
  static constexpr int kRegionKeys = KT % 128 == 0 ? 128 : 64, kRegions = KT / kRegionKeys;
  static constexpr uint32_t kQBytes = kBlock * DH, kKBytes = KT * DH, kVBytes = DH * KT;
  static constexpr uint32_t kVRegionBytes = DH * kRegionKeys, kOnesBytes = 8 * kRegionKeys;
  static constexpr uint32_t kVRegionSlotBytes = kVRegionBytes + kOnesBytes, kVSlotBytes = kRegions * kVRegionSlotBytes;
  static constexpr uint64_t kQKSwizzle = DH == 128 ? kSwizzle128 : kSwizzle64;
  static constexpr uint64_t kVSwizzle = kRegionKeys == 128 ? kSwizzle128 : kSwizzle64;
  static constexpr uint32_t kQKAtomBytes = 8 * DH;
  static constexpr uint32_t kVAtomBytes = 8 * kRegionKeys;
  static constexpr bool kOInShared = KT / 2 + KT / 8 + DH + 4 > 212;
  static constexpr uint32_t kOBytes = kOInShared ? kConsumers * 128 * (DH / 2) * 4 : 0;
};

// Shared memory for head_dim DH, KT-key tiles and a K / vᵀ ring of STAGES slots (2, or 3: cuda_kernels.h's
// Fp8AttentionSchedule::stages), from a 1 KiB-aligned base: Q, the K ring, the vᵀ ring, O where kOInShared, the
// mbarriers (Q's, then full and empty ones per slot of K and of vᵀ), the stalled flag.
template <int DH, int KT, int STAGES>
struct Fp8Tiling : Fp8Operands<DH, KT> {
  static_assert(STAGES == 2 || STAGES == 3, "two or three stages");
  using O = Fp8Operands<DH, KT>;
  static constexpr int kQFull = 0;
  static constexpr int kKFull = 1, kKEmpty = kKFull + STAGES, kVFull = kKEmpty + STAGES, kVEmpty = kVFull + STAGES;
  static constexpr int kBarriers = kVEmpty + STAGES;
  static constexpr uint32_t kQOff = 0;
  static constexpr uint32_t kKOff = kQOff + O::kQBytes;
  static constexpr uint32_t kVOff = kKOff + STAGES * O::kKBytes;
  static constexpr uint32_t kOOff = kVOff + STAGES * O::kVSlotBytes;
  static constexpr uint32_t kBarOff = kOOff + O::kOBytes;
  static constexpr uint32_t kStalledOff = kBarOff + kBarriers * 8;
  static constexpr size_t kSmemBytes = kStalledOff + 16 + 1024;  // + slack to align the base
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

struct Fp8KernelParams {
  void* o = nullptr;
  int64_t o_row = 0, o_head = 0, o_batch = 0;  // elements
  // Codes instances (T = uint8_t: cuda_kernels.h's Fp8AttentionCodes): every row's scale, [batch, seq_len], from the
  // segments' bounds on |v| (Fp8AttentionBuffers::v_bound); O rounded as the 16-bit output would hold it (bf16, or
  // f16) before its code.
  float* code_scale = nullptr;
  const uint32_t* v_bound = nullptr;
  bool codes_of_bf16 = true;
  const float* q_scale = nullptr;              // [batch, Hq, q_blocks]
  const float* k_scale = nullptr;              // [batch, Hkv, k_blocks]
  const float* v_scale = nullptr;              // [batch, Hkv, Dh]
  int seq_len = 0, q_blocks = 0, k_blocks = 0, tiles = 0, heads_q = 0, heads_kv = 0;  // tiles: with a key < seq_len
  float scale_log2 = 0.f;
  int* err = nullptr;
  // TRACE instances only (H3_FP8_ATTENTION_TRACE, attend below): clock stamps of the consumer warps of CTAs
  // (m_block < trace_ctas, head trace_head, segment 0), kTracePhases per key tile; other CTAs stamp into trace_sink.
  uint32_t* trace = nullptr;
  uint32_t* trace_sink = nullptr;
  int trace_ctas = 0, trace_head = 0;
};

// The phases a TRACE instance stamps per key tile j ≥ 1 (0 for tile 0 where it has one): the loop's top, K_j and
// vᵀ_(j−1) loaded, both GEMMs issued, S_j ready, its softmax done, P_(j−1)·V_(j−1) waited for and folded, P_j
// rounded (tools/fp8_attention_trace.py names them).
constexpr int kTracePhases = 7;
__device__ __forceinline__ uint32_t clock32() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(t)::"memory");
  return t;
}

// ---- wgmma with E4M3 operands ----

#define H3_D8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define H3_D32 H3_D8(0), H3_D8(8), H3_D8(16), H3_D8(24)
#define H3_D64 H3_D32, H3_D8(32), H3_D8(40), H3_D8(48), H3_D8(56)
#define H3_R16(b)                                                                                                   \
  "%" #b "0, %" #b "1, %" #b "2, %" #b "3, %" #b "4, %" #b "5, %" #b "6, %" #b "7, %" #b "8, %" #b "9, "
#define H3_REGS32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " H3_R16(1) H3_R16(2) "%30, %31}"
#define H3_REGS64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " H3_R16(1) H3_R16(2) H3_R16(3) H3_R16(4) H3_R16(5) "%60, %61, %62, %63}"
#define H3_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define H3_D36 H3_D32, H3_D4(32)
#define H3_D68 H3_D64, H3_D4(64)
#define H3_REGS36 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " H3_R16(1) H3_R16(2) "%30, %31, %32, %33, %34, %35}"
#define H3_REGS68                                                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " H3_R16(1) H3_R16(2) H3_R16(3) H3_R16(4) H3_R16(5)                   \
  "%60, %61, %62, %63, %64, %65, %66, %67}"

#define H3_D96 H3_D64, H3_D8(64), H3_D8(72), H3_D8(80), H3_D8(88)
#define H3_REGS96                                                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " H3_R16(1) H3_R16(2) H3_R16(3) H3_R16(4) H3_R16(5) H3_R16(6)         \
  H3_R16(7) H3_R16(8) "%90, %91, %92, %93, %94, %95}"

// S[64 x KT keys] (+)= Q[64 x 32]·K[KT x 32]ᵀ, both from shared memory, K-major; scale_d 0 overwrites S.
template <int KT>
__device__ __forceinline__ void wgmma_qk(float (&d)[KT / 2], uint64_t a, uint64_t b, int scale_d) {
  if constexpr (KT == 128) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " H3_REGS64 ", %64, %65, p, 1, 1;\n"
        "}\n"
        : H3_D64
        : "l"(a), "l"(b), "r"(scale_d));
  } else {
    static_assert(KT == 192, "key tiles of 128 or 192 keys");
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 " H3_REGS96 ", %96, %97, p, 1, 1;\n"
        "}\n"
        : H3_D96
        : "l"(a), "l"(b), "r"(scale_d));
  }
}

// T[64 x N] (+)= P[64 x 32]·V[32 x N], P from registers (four 32-bit registers of four E4M3 codes), vᵀ from shared
// memory K-major (keys contiguous); N = head_dim, or head_dim + 8 (the ones atom's columns: the running accumulator).
#define H3_WGMMA_PV(N, REGS, DOPS, AREGS, B, SCALE)                                                              \
  asm volatile("{\n"                                                                                               \
               ".reg .pred p;\n"                                                                                   \
               "setp.ne.b32 p, %" #SCALE ", 0;\n"                                                                  \
               "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 " REGS ", " AREGS ", %" #B ", p, 1, 1;\n"  \
               "}\n"                                                                                               \
               : DOPS                                                                                              \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b), "r"(scale_d))
template <int N>
__device__ __forceinline__ void wgmma_pv(float (&d)[N / 2], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t b, int scale_d) {
  if constexpr (N == 136) {
    H3_WGMMA_PV(136, H3_REGS68, H3_D68, "{%68, %69, %70, %71}", 72, 73);
  } else if constexpr (N == 72) {
    H3_WGMMA_PV(72, H3_REGS36, H3_D36, "{%36, %37, %38, %39}", 40, 41);
  } else if constexpr (N == 128) {
    H3_WGMMA_PV(128, H3_REGS64, H3_D64, "{%64, %65, %66, %67}", 68, 69);
  } else {
    static_assert(N == 64, "head_dim 64 or 128, with or without the ones atom's 8 columns");
    H3_WGMMA_PV(64, H3_REGS32, H3_D32, "{%32, %33, %34, %35}", 36, 37);
  }
}

// S = Q·Kᵀ over head_dim: DH/32 products of 32 channels, the k-th starting 32·k bytes into every row.
template <class Tl>
__device__ __forceinline__ void gemm_qk(float (&s)[Tl::kKeys / 2], uint32_t q, uint32_t k) {
  constexpr int DH = Tl::kHeadDim, KT = Tl::kKeys;
  const uint64_t qd = smem_desc(q, 16, Tl::kQKAtomBytes, Tl::kQKSwizzle);
  const uint64_t kd = smem_desc(k, 16, Tl::kQKAtomBytes, Tl::kQKSwizzle);
#pragma unroll
  for (int kk = 0; kk < DH / 32; ++kk)
    wgmma_qk<KT>(s, smem_desc_advance(qd, 32 * kk), smem_desc_advance(kd, 32 * kk), kk > 0);
}

// T (+)= P·V over the tile's KT keys: KT/32 products of 32 keys (positions 32·kk.. of the tile's vᵀ rows, region by
// region), T overwritten first when `fresh`. N = DH, or DH + 8: the ones atom's 8 columns then hold the row sums of P.
template <class Tl, int N>
__device__ __forceinline__ void gemm_pv(float (&t)[N / 2], const uint32_t (&p)[Tl::kKeys / 8], uint32_t v, bool fresh) {
  constexpr int DH = Tl::kHeadDim, KT = Tl::kKeys;
  static_assert(N == DH || N == DH + 8, "head_dim columns, or with the row sums");
  constexpr int kStepsPerRegion = Tl::kRegionKeys / 32;
  const uint64_t vd = smem_desc(v, 16, Tl::kVAtomBytes, Tl::kVSwizzle);
#pragma unroll
  for (int kk = 0; kk < KT / 32; ++kk)
    wgmma_pv<N>(t, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3],
                smem_desc_advance(vd, (kk / kStepsPerRegion) * Tl::kVRegionSlotBytes + 32 * (kk % kStepsPerRegion)),
                kk > 0 || !fresh);
}

// ---- softmax on the accumulator layout ----
// Thread (warp w, lane) of a consumer warpgroup holds rows r0 = 16w + lane/4 and r1 = r0 + 8; register 4k + e of S is
// key 8k + 2·(lane mod 4) + (e mod 2) of row r0 (e < 2) or r1 (e ≥ 2).

// Keys at or past `len` (zero codes of the padding) get −∞.
template <int N>
__device__ __forceinline__ void mask_tail(float (&s)[N], int key0, int len, int lane) {
#pragma unroll
  for (int k = 0; k < N / 4; ++k)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (key0 + 8 * k + 2 * (lane & 3) + (e & 1) >= len) s[4 * k + e] = -INFINITY;
}

// 2^x on the FMA pipes: cpu_fp8_attention.h's fp8_attention_exp2_poly, bit for bit. ⌊x⌋ without the conversion
// unit: x + 1.5·2^23 rounded down is 1.5·2^23 + ⌊x⌋ for x in [−127, 2^22), an integer in the low bits of its
// pattern, so that pattern << 23 is ⌊x⌋ << 23 (mod 2^32) and (that sum − 1.5·2^23) is ⌊x⌋ exactly.
__device__ __forceinline__ float exp2_fma(float x) {
  constexpr float kC1 = 0x1.63e658p-1f, kC2 = 0x1.d2378ap-3f, kC3 = 0x1.3baaa6p-4f, kShift = 12582912.f;
  x = fmaxf(x, -127.f);
  const float t = __fadd_rd(x, kShift);
  const float f = __fsub_rn(x, __fsub_rn(t, kShift));
  const float q = fmaf(fmaf(fmaf(kC3, f, kC2), f, kC1), f, 1.f);
  return __uint_as_float(__float_as_uint(q) + (__float_as_uint(t) << 23));
}

// 2^x for register chunk K (keys 8K..8K+7 of the tile): on the FMA pipes for the POLY of the 16 chunks
// cpu_fp8_attention.h's fp8_attention_poly_key picks, else ex2.approx on the SFU.
template <int POLY, int K>
__device__ __forceinline__ float exp2_of_chunk(float x) {
  if constexpr ((K * POLY) % 16 < POLY)
    return exp2_fma(x);
  else
    return ex2(x);
}

// s ← 2^(s·c − b) of row r0 (b0) and r1 (b1), register chunks K..N/4 − 1; with SUMS, their sums added to r0, r1 (in
// the order the all-SFU loop added them).
template <int POLY, bool SUMS, int N, int K = 0>
__device__ __forceinline__ void exponentiate(float (&s)[N], float c, float b0, float b1, float& r0, float& r1) {
  if constexpr (K < N / 4) {
    s[4 * K] = exp2_of_chunk<POLY, K>(fmaf(s[4 * K], c, -b0));
    s[4 * K + 1] = exp2_of_chunk<POLY, K>(fmaf(s[4 * K + 1], c, -b0));
    s[4 * K + 2] = exp2_of_chunk<POLY, K>(fmaf(s[4 * K + 2], c, -b1));
    s[4 * K + 3] = exp2_of_chunk<POLY, K>(fmaf(s[4 * K + 3], c, -b1));
    if constexpr (SUMS) {
      r0 += s[4 * K] + s[4 * K + 1];
      r1 += s[4 * K + 2] + s[4 * K + 3];
    }
    exponentiate<POLY, SUMS, N, K + 1>(s, c, b0, b1, r0, r1);
  }
}

// One tile's online softmax in place (cpu_fp8_attention.h): m ← max(m, max(raw)·c) in log2 units,
// s ← 2^(raw·c − (m − 8)), with α = 2^(m_old − m) returned for O; with SUMS (the tile accumulator) l ← l·α + Σ s,
// else the row sums are O's extra columns.
template <int POLY, bool SUMS, int N>
__device__ __forceinline__ void online_softmax(float (&s)[N], float c, float& m0, float& m1, float& l0, float& l1,
                                               float& alpha0, float& alpha1) {
  float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    x0 = fmaxf(x0, fmaxf(s[4 * k], s[4 * k + 1]));
    x1 = fmaxf(x1, fmaxf(s[4 * k + 2], s[4 * k + 3]));
  }
  x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
  x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
  x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
  x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
  // Key 0 of every tile is a real key: the tile maxima are finite.
  const float n0 = fmaxf(m0, x0 * c), n1 = fmaxf(m1, x1 * c);
  alpha0 = n0 == m0 ? 1.f : ex2(m0 - n0);  // m = −∞ before the first tile: α = 0
  alpha1 = n1 == m1 ? 1.f : ex2(m1 - n1);
  m0 = n0;
  m1 = n1;
  const float b0 = n0 - kPOffsetLog2, b1 = n1 - kPOffsetLog2;
  float r0 = 0.f, r1 = 0.f;
  exponentiate<POLY, SUMS, N>(s, c, b0, b1, r0, r1);
  if constexpr (SUMS) {
    l0 = l0 * alpha0 + r0;
    l1 = l1 * alpha1 + r1;
  }
}

// Two floats as E4M3 codes (saturating, round to nearest even; NaN → 0x7F: fp8_encode's codes), x0 in the low byte.
__device__ __forceinline__ uint16_t e4m3x2(float x0, float x1) {
  uint16_t c;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(c) : "f"(x0), "f"(x1));
  return c;
}

// Four floats as E4M3 codes, x0 in the lowest byte.
__device__ __forceinline__ uint32_t e4m3x4(float x0, float x1, float x2, float x3) {
  return uint32_t(e4m3x2(x0, x1)) | (uint32_t(e4m3x2(x2, x3)) << 16);
}

// P as the A operand of the next P·V. For the 32 keys of slice kk (accumulator chunks 4kk..4kk+3): register 4kk holds
// row r0's keys 2t, 2t+1 of chunk 4kk and of chunk 4kk+1 (reduction positions 4t..4t+3, the keys
// fp8_attention_v_slot places there), 4kk+1 the same of row r1, 4kk+2 / 4kk+3 those of chunks 4kk+2, 4kk+3
// (positions 16 + 4t..).
template <int N>
__device__ __forceinline__ void round_p(const float (&s)[N], uint32_t (&p)[N / 4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    const int b = 16 * kk;
    p[4 * kk] = e4m3x4(s[b], s[b + 1], s[b + 4], s[b + 5]);
    p[4 * kk + 1] = e4m3x4(s[b + 2], s[b + 3], s[b + 6], s[b + 7]);
    p[4 * kk + 2] = e4m3x4(s[b + 8], s[b + 9], s[b + 12], s[b + 13]);
    p[4 * kk + 3] = e4m3x4(s[b + 10], s[b + 11], s[b + 14], s[b + 15]);
  }
}

// x as the 16-bit output would hold it (bf16, or f16).
__device__ __forceinline__ float rounded16(float x, bool bf16) {
  return bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : __half2float(__float2half_rn(x));
}

// Two output values as the E4M3 codes of their 16-bit roundings times the reciprocal of the row's scale, lo in the
// low byte (cuda_kernels.h's Fp8AttentionCodes).
__device__ __forceinline__ uint16_t output_codes2(float lo, float hi, float inv_scale, bool bf16) {
  return e4m3x2(rounded16(lo, bf16) * inv_scale, rounded16(hi, bf16) * inv_scale);
}

// o = o·α + t per row (the running O rescaled to the newest maximum, plus the tile's product); t may have more
// columns than o (the row sums after them), which are not read.
template <int N, int M>
__device__ __forceinline__ void accumulate(float (&o)[N], const float (&t)[M], float alpha0, float alpha1) {
  static_assert(M >= N, "t holds o's columns first");
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    o[4 * k] = fmaf(o[4 * k], alpha0, t[4 * k]);
    o[4 * k + 1] = fmaf(o[4 * k + 1], alpha0, t[4 * k + 1]);
    o[4 * k + 2] = fmaf(o[4 * k + 2], alpha1, t[4 * k + 2]);
    o[4 * k + 3] = fmaf(o[4 * k + 3], alpha1, t[4 * k + 3]);
  }
}

// ---- the attention kernel ----

template <typename T, int DH, int KT, int POLY, int STAGES, int GROUP, bool TRACE>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_attention_fp8_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                                const __grid_constant__ CUtensorMap tv, const Fp8KernelParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tl = Fp8Tiling<DH, KT, STAGES>;
  static_assert(KT == kBlock || (POLY == 0 && GROUP > 0 && STAGES == 2),
                "192-key tiles: every exp2 on the SFU, tensor-core sums, a 2-stage ring");
  constexpr int kStages = STAGES;
  constexpr int kQFull = Tl::kQFull, kKFull = Tl::kKFull, kKEmpty = Tl::kKEmpty, kVFull = Tl::kVFull,
                kVEmpty = Tl::kVEmpty;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* const base_ptr = smem_raw + (base - raw);
  const uint32_t bars = base + Tl::kBarOff;
  auto bar = [bars](int i) { return bars + 8u * static_cast<uint32_t>(i); };
  volatile int* const stalled = reinterpret_cast<volatile int*>(base_ptr + Tl::kStalledOff);
  int* const err = p.err;
  auto wait = [stalled, err](uint32_t b, uint32_t parity) { mbar_wait(b, parity, stalled, err); };

  const int m_block = blockIdx.x, h = blockIdx.y, seg = blockIdx.z, hk = h / (p.heads_q / p.heads_kv);
  const int len = p.seq_len, tiles = p.tiles;
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);  // warpgroup-uniform

  if (threadIdx.x == 0) {
    mbar_init(bar(kQFull), 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bar(kKFull + s), 1);
      mbar_init(bar(kVFull + s), 1);
      mbar_init(bar(kKEmpty + s), kReleaseArrivals);
      mbar_init(bar(kVEmpty + s), kReleaseArrivals);
    }
    *stalled = 0;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // The ones atom after every vᵀ slot (the running accumulator's row sums), written once before any wgmma reads it
  // through the async proxy.
  for (uint32_t i = threadIdx.x; i < kStages * Tl::kRegions * Tl::kOnesBytes / 4; i += kThreads) {
    const uint32_t region = i / (Tl::kOnesBytes / 4), word = i % (Tl::kOnesBytes / 4);  // over every slot's regions
    *reinterpret_cast<uint32_t*>(base_ptr + Tl::kVOff + region * Tl::kVRegionSlotBytes + Tl::kVRegionBytes +
                                 4 * word) = 0x38383838u;
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every load; slot s of tile j is refilled once both consumers released tile j − 2.
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      mbar_expect_tx(bar(kQFull), Tl::kQBytes);
      tma_load(base + Tl::kQOff, &tq, bar(kQFull), 0, m_block * kBlock, h, seg);
      for (int j = 0; j < tiles; ++j) {
        const int s = j % kStages;
        const uint32_t free_parity = ((j / kStages) & 1) ^ 1;  // a fresh barrier passes parity 1 at once
        wait(bar(kKEmpty + s), free_parity);
        mbar_expect_tx(bar(kKFull + s), Tl::kKBytes);
        tma_load(base + Tl::kKOff + s * Tl::kKBytes, &tk, bar(kKFull + s), 0, j * KT, hk, seg);
        wait(bar(kVEmpty + s), free_parity);
        mbar_expect_tx(bar(kVFull + s), Tl::kVBytes);
        for (int r = 0; r < Tl::kRegions; ++r)
          tma_load(base + Tl::kVOff + s * Tl::kVSlotBytes + r * Tl::kVRegionSlotBytes, &tv, bar(kVFull + s),
                   j * KT + r * Tl::kRegionKeys, 0, hk, seg);
      }
    }
    return;
  }

  // Consumers.
  setmaxnreg_inc<kConsumerRegs>();
  const int c = wg - 1, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const uint32_t q = base + Tl::kQOff + c * kWgRows * DH;  // this warpgroup's 64 rows of Q
  const bool lead = lane == 0;
  auto k_tile = [base](int s) { return base + Tl::kKOff + s * Tl::kKBytes; };
  auto v_tile = [base](int s) { return base + Tl::kVOff + s * Tl::kVSlotBytes; };

  const float qc = p.scale_log2 * p.q_scale[(static_cast<int64_t>(seg) * p.heads_q + h) * p.q_blocks + m_block];
  const float* const k_scale = p.k_scale + (static_cast<int64_t>(seg) * p.heads_kv + hk) * p.k_blocks;

  // GROUP 0: every tile's P·V into a fresh accumulator t, O = O·α + t in f32 and l from the CUDA cores' sums of the
  // unrounded P. GROUP ≥ 1: t sums GROUP tiles on the tensor cores (rescaled by each new α; its columns DH..DH+7 the
  // row sums of the rounded P, from the ones atom) and is then added into the f32 O and l, which owe the factor A of
  // the α's since (O_true = O·A + t). Summing every key in the wgmma accumulator loses the small terms: the FP8
  // tensor cores keep about 14 bits of the running sum (DeepSeek-V3's report; a 37,746-key row drifts by tens of
  // percent), so a group stays a few tiles long.
  constexpr int kTN = GROUP == 0 ? DH : DH + 8;
  constexpr int kGroupTiles = GROUP == 0 ? 1 : GROUP;  // key tiles per fold of t into O
  uint32_t* trace = nullptr;
  if constexpr (TRACE) {
    const bool traced = seg == 0 && h == p.trace_head && m_block < p.trace_ctas;
    trace = traced ? p.trace + (int64_t(m_block * kConsumers + c) * 4 + warp) * tiles * kTracePhases
                   : p.trace_sink + (c * 4 + warp) * kTracePhases;
  }
  auto stamp = [&](int j, int phase) {
    if constexpr (TRACE) {
      const uint32_t t = clock32();
      if (lead) trace[(trace == p.trace_sink ? 0 : j) * kTracePhases + phase] = t;
    }
  };
  // O: registers, or (kOInShared) this thread's column of float4 slots in shared memory, slot k holding what
  // o[4k..4k+3] would (rows r0, r0, r1, r1), so that a warp's access is 512 contiguous bytes.
  constexpr int kORegs = Tl::kOInShared ? 4 : DH / 2;
  float o[kORegs], t[kTN / 2], s[KT / 2];
  uint32_t pf[KT / 8];
  float4* const o_shared = reinterpret_cast<float4*>(base_ptr + Tl::kOOff) + c * 128 * (DH / 8) + tid;
#pragma unroll
  for (int i = 0; i < kORegs; ++i) o[i] = 0.f;
  if constexpr (Tl::kOInShared) {
#pragma unroll
    for (int k = 0; k < DH / 8; ++k) o_shared[k * 128] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, alpha0, alpha1;
  float a0 = 0.f, a1 = 0.f;  // GROUP 0: α of the tile whose P·V is in flight; else A
  const bool ragged = len % KT != 0;
  auto issue_pv = [&](int j) {
    gemm_pv<Tl, kTN>(t, pf, v_tile(j % kStages), j % kGroupTiles == 0);
    wgmma_commit();
  };
  // O = O·a + t (and l from t's row-sum columns when GROUP ≥ 1).
  auto flush = [&] {
    if constexpr (Tl::kOInShared) {
#pragma unroll
      for (int k = 0; k < DH / 8; ++k) {
        float4 v = o_shared[k * 128];
        v.x = fmaf(v.x, a0, t[4 * k]);
        v.y = fmaf(v.y, a0, t[4 * k + 1]);
        v.z = fmaf(v.z, a1, t[4 * k + 2]);
        v.w = fmaf(v.w, a1, t[4 * k + 3]);
        o_shared[k * 128] = v;
      }
    } else {
      accumulate(o, t, a0, a1);
    }
    if constexpr (GROUP > 0) {
      l0 = fmaf(l0, a0, t[DH / 2]);  // column DH + 2·quad of row r0: every ones column holds the row's sum
      l1 = fmaf(l1, a1, t[DH / 2 + 2]);
    }
  };
  // Waits for P_j·V_j, releases its vᵀ slot and, α_{j+1} known, folds t into O where tile j ends a group (GROUP 0:
  // every tile), else carries α_{j+1} on t (the tensor cores add the next tile to it) and on A. The wait is in the
  // branch's arms (wgmma_wait_all_then), so that the softmax before it runs under P_j·V_j.
  auto after_pv = [&](int j, float next0, float next1) {
    auto release = [&] {
      fence_operands(t);
      fence_operands(pf);
      if (lead) mbar_arrive(bar(kVEmpty + j % kStages));
    };
    wgmma_wait_all_then(
        j % kGroupTiles == kGroupTiles - 1,
        [&] {
          release();
          flush();
          a0 = next0;
          a1 = next1;
        },
        [&] {
          release();
          if (warp_has_new_maximum(next0, next1)) rescale(t, next0, next1);
          a0 *= next0;
          a1 *= next1;
        });
  };

  wait(bar(kQFull), 0);
  wait(bar(kKFull), 0);
  float ck = k_scale[0];
  wgmma_fence();
  gemm_qk<Tl>(s, q, k_tile(0));
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(s);
  if (lead) mbar_arrive(bar(kKEmpty));
  if (tiles == 1 && ragged) mask_tail(s, 0, len, lane);
  online_softmax<POLY, GROUP == 0>(s, qc * ck, m0, m1, l0, l1, alpha0, alpha1);
  round_p(s, pf);
  a0 = alpha0;  // 0 (O and l are zero): either meaning of a
  a1 = alpha1;

  for (int j = 1; j < tiles; ++j) {
    const int st = j % kStages, pst = (j - 1) % kStages;
    const uint32_t parity = (j / kStages) & 1, prev_parity = ((j - 1) / kStages) & 1;
    stamp(j, 0);
    ck = k_scale[j];
    wait(bar(kKFull + st), parity);
    wait(bar(kVFull + pst), prev_parity);  // long loaded: waiting here keeps the two issues back to back
    stamp(j, 1);
    wgmma_fence();
    gemm_qk<Tl>(s, q, k_tile(st));
    wgmma_commit();
    issue_pv(j - 1);
    stamp(j, 2);
    wgmma_wait<1>();  // S_j is ready; P_{j−1}·V_{j−1} may still run
    fence_operands(s);
    stamp(j, 3);
    if (lead) mbar_arrive(bar(kKEmpty + st));
    if (j == tiles - 1 && ragged) mask_tail(s, j * KT, len, lane);
    online_softmax<POLY, GROUP == 0>(s, qc * ck, m0, m1, l0, l1, alpha0, alpha1);
    stamp(j, 4);
    after_pv(j - 1, alpha0, alpha1);
    stamp(j, 5);
    round_p(s, pf);
    stamp(j, 6);
  }

  {
    const int st = (tiles - 1) % kStages;
    wait(bar(kVFull + st), ((tiles - 1) / kStages) & 1);
    wgmma_fence();
    issue_pv(tiles - 1);
    wgmma_wait<0>();
    fence_operands(t);
    if (lead) mbar_arrive(bar(kVEmpty + st));
    flush();
  }

  // Epilogue: (O · 1/l) · s_v per channel, rounded once, stored from the accumulator layout (4 bytes per thread and
  // 8-column chunk; a quad writes 16 contiguous bytes of a row). Codes instances: that value rounded to 16 bits, then
  // its E4M3 code under the segment's scale (2 bytes per thread and chunk), the head-0 CTAs storing the rows' scales.
  constexpr bool kCodes = std::is_same_v<T, uint8_t>;
  if constexpr (GROUP == 0) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  }
  const float inv0 = 1.f / l0, inv1 = 1.f / l1;  // ≥ 2^8 (the row maximum's term) up to the tensor cores' rounding
  const float* const vs = p.v_scale + (static_cast<int64_t>(seg) * p.heads_kv + hk) * DH;
  T* const og = static_cast<T*>(p.o) + seg * p.o_batch + h * p.o_head;
  const int row0 = m_block * kBlock + c * kWgRows + warp * 16 + lane / 4, row1 = row0 + 8, quad = lane & 3;
  float inv_code_scale = 1.f;
  if constexpr (kCodes) {
    const float code_scale = fp8_group_scale(__uint_as_float(p.v_bound[seg]));
    inv_code_scale = 1.f / code_scale;
    if (h == 0 && quad == 0) {
      float* const scale = p.code_scale + int64_t(seg) * len;
      if (row0 < len) scale[row0] = code_scale;
      if (row1 < len) scale[row1] = code_scale;
    }
  }
#pragma unroll
  for (int k = 0; k < DH / 8; ++k) {
    const int col = 8 * k + 2 * quad;
    const float2 sv = *reinterpret_cast<const float2*>(vs + col);
    float4 ok;
    if constexpr (Tl::kOInShared)
      ok = o_shared[k * 128];
    else
      ok = make_float4(o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]);
    if constexpr (kCodes) {
      if (row0 < len)
        *reinterpret_cast<uint16_t*>(og + int64_t(row0) * p.o_row + col) =
            output_codes2(ok.x * inv0 * sv.x, ok.y * inv0 * sv.y, inv_code_scale, p.codes_of_bf16);
      if (row1 < len)
        *reinterpret_cast<uint16_t*>(og + int64_t(row1) * p.o_row + col) =
            output_codes2(ok.z * inv1 * sv.x, ok.w * inv1 * sv.y, inv_code_scale, p.codes_of_bf16);
    } else {
      if (row0 < len)
        *reinterpret_cast<uint32_t*>(og + int64_t(row0) * p.o_row + col) =
            pack2<T>(ok.x * inv0 * sv.x, ok.y * inv0 * sv.y);
      if (row1 < len)
        *reinterpret_cast<uint32_t*>(og + int64_t(row1) * p.o_row + col) =
            pack2<T>(ok.z * inv1 * sv.x, ok.w * inv1 * sv.y);
    }
  }
#endif
}

// ---- quantization (backend/cpu/cpu_fp8_attention.h's rules; E4M3 as kernels_fp8.cu / cpu_fp8.h round it) ----

constexpr int kQuantThreads = 256;

// The E4M3 codes, group scales and block maximum: fp8_codes.cuh, as the linears' quantization rounds them.

// Where one attention call's q, k, v live (FlashParams' strides, elements) and where their codes go.
struct QuantParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  Elem t = Elem::BF16;
  int64_t row = 0, q_head = 0, kv_head = 0, batch_stride = 0;
  int len = 0, padded = 0, blocks = 0, k_blocks = 0, heads_q = 0, heads_kv = 0;  // blocks: of 128 rows (q, v)
  Fp8AttentionBuffers b;
};

// A block of ROWS rows × DH channels in 8-element chunks, chunk i = it·256 + thread: row i / (DH/8), column group
// i mod (DH/8) (a thread's column group is the same for every it).
template <int DH, int ROWS = kBlock>
struct Chunks {
  static constexpr int kPerRow = DH / 8;
  static constexpr int kPerThread = ROWS * kPerRow / kQuantThreads;
  static_assert(kQuantThreads % kPerRow == 0 && ROWS * kPerRow % kQuantThreads == 0,
                "a thread keeps its column group");
  __device__ static int row(int it) { return (it * kQuantThreads + static_cast<int>(threadIdx.x)) / kPerRow; }
  __device__ static int group() { return static_cast<int>(threadIdx.x) % kPerRow; }
  // The block's rows [blk·ROWS, ...) of one head (rows ≥ len read as zeros).
  __device__ static void load(const QuantParams& p, const void* head, int blk, float (&v)[kPerThread][8]) {
#pragma unroll
    for (int it = 0; it < kPerThread; ++it) {
      const int r = blk * ROWS + row(it);
      if (r < p.len) {
        load8(head, p.t, int64_t(r) * p.row + group() * 8, v[it]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[it][e] = 0.f;
      }
    }
  }
};

__device__ __forceinline__ const void* offset(const void* base, Elem t, int64_t elements) {
  return static_cast<const char*>(base) + elements * (t == Elem::F32 ? 4 : 2);
}

// Grid (blocks, H, batch): one ROWS-row block of one q head (IS_Q; 128 rows) or k head (the key tile's rows) →
// codes and its scale.
template <int DH, int ROWS, bool IS_Q>
__global__ void __launch_bounds__(kQuantThreads) quantize_qk_kernel(const QuantParams p) {
  using C = Chunks<DH, ROWS>;
  __shared__ float scratch[32];
  const int blk = blockIdx.x, h = blockIdx.y, seg = blockIdx.z;
  const int heads = IS_Q ? p.heads_q : p.heads_kv, blocks = IS_Q ? p.blocks : p.k_blocks;
  const void* head = offset(IS_Q ? p.q : p.k, p.t, seg * p.batch_stride + h * (IS_Q ? p.q_head : p.kv_head));
  float v[C::kPerThread][8];
  C::load(p, head, blk, v);
  float amax = 0.f;
#pragma unroll
  for (int it = 0; it < C::kPerThread; ++it)
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fp8_finite_magnitude(v[it][e]));
  const float s = fp8_group_scale(fp8_block_max(amax, scratch));
  const int64_t head_index = static_cast<int64_t>(seg) * heads + h;
  if (threadIdx.x == 0) (IS_Q ? p.b.q_scale : p.b.k_scale)[head_index * blocks + blk] = s;
  uint8_t* const codes = (IS_Q ? p.b.q : p.b.k) + (head_index * p.padded + int64_t(blk) * ROWS) * DH;
  const Fp8Divisor d = fp8_divisor(s);
#pragma unroll
  for (int it = 0; it < C::kPerThread; ++it)
    *reinterpret_cast<uint2*>(codes + C::row(it) * DH + C::group() * 8) = fp8_encode8(v[it], d);
}

// Grid (blocks, Hkv, batch): the largest finite |v| of every channel over one 128-row block, into v_amax (zeroed
// first) by atomicMax on the bit patterns (non-negative floats order as their bits do), and the block's largest into
// its segment's v_bound (zeroed first).
template <int DH>
__global__ void __launch_bounds__(kQuantThreads) v_amax_kernel(const QuantParams p) {
  using C = Chunks<DH>;
  __shared__ unsigned int amax[DH];
  __shared__ unsigned int block_max;
  const int blk = blockIdx.x, h = blockIdx.y, seg = blockIdx.z;
  if (threadIdx.x < DH) amax[threadIdx.x] = 0u;
  if (threadIdx.x == 0) block_max = 0u;
  __syncthreads();
  float v[C::kPerThread][8];
  C::load(p, offset(p.v, p.t, seg * p.batch_stride + h * p.kv_head), blk, v);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float m = 0.f;
#pragma unroll
    for (int it = 0; it < C::kPerThread; ++it) m = fmaxf(m, fp8_finite_magnitude(v[it][e]));
    atomicMax(&amax[C::group() * 8 + e], __float_as_uint(m));
  }
  __syncthreads();
  if (threadIdx.x < DH && amax[threadIdx.x] != 0u) {
    atomicMax(&p.b.v_amax[(static_cast<int64_t>(seg) * p.heads_kv + h) * DH + threadIdx.x], amax[threadIdx.x]);
    atomicMax(&block_max, amax[threadIdx.x]);
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_max != 0u) atomicMax(&p.b.v_bound[seg], block_max);
}

// Grid (blocks, Hkv, batch): one 128-key block of one v head → its transposed codes (key r of each 16-key group at
// position fp8_attention_v_slot(r)); the block-0 CTA stores the per-channel scales.
template <int DH>
__global__ void __launch_bounds__(kQuantThreads) quantize_v_kernel(const QuantParams p) {
  using C = Chunks<DH>;
  __shared__ Fp8Divisor divisor[DH];
  __shared__ __align__(16) uint8_t tile[DH][kBlock];
  const int blk = blockIdx.x, h = blockIdx.y, seg = blockIdx.z;
  const int64_t head_index = static_cast<int64_t>(seg) * p.heads_kv + h;
  if (threadIdx.x < DH) {
    const float s = fp8_group_scale(__uint_as_float(p.b.v_amax[head_index * DH + threadIdx.x]));
    divisor[threadIdx.x] = fp8_divisor(s);
    if (blk == 0) p.b.v_scale[head_index * DH + threadIdx.x] = s;
  }
  __syncthreads();
  float v[C::kPerThread][8];
  C::load(p, offset(p.v, p.t, seg * p.batch_stride + h * p.kv_head), blk, v);
#pragma unroll
  for (int it = 0; it < C::kPerThread; ++it) {
    const int r = C::row(it), i = r & 15;
    const int slot = (r & ~15) | (4 * ((i >> 1) & 3) + (i & 1) + 2 * ((i >> 3) & 1));
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int ch = C::group() * 8 + e;
      tile[ch][slot] = fp8_encode(fp8_quotient(v[it][e], divisor[ch]));
    }
  }
  __syncthreads();
  uint8_t* const out = p.b.vt + head_index * DH * p.padded + int64_t(blk) * kBlock;
  for (int i = threadIdx.x; i < DH * (kBlock / 16); i += kQuantThreads) {
    const int ch = i / (kBlock / 16), piece = i % (kBlock / 16);
    *reinterpret_cast<uint4*>(out + int64_t(ch) * p.padded + piece * 16) =
        *reinterpret_cast<const uint4*>(&tile[ch][piece * 16]);
  }
}

// ---- host side ----

// cpu::fp8_attention_padded_rows (cpu_fp8_attention.h, which the host code includes only through the backend).
int padded_rows(int len, const Fp8AttentionSchedule& sched) {
  const int unit = std::lcm(kBlock, sched.key_tile);
  return (len + unit - 1) / unit * unit;
}

QuantParams quant_params(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched) {
  QuantParams q;
  q.q = p.q;
  q.k = p.k;
  q.v = p.v;
  q.t = p.t;
  q.row = p.q_row;
  q.q_head = p.q_head;
  q.kv_head = p.kv_head;
  q.batch_stride = p.q_batch;
  q.len = p.seq_len;
  q.padded = padded_rows(p.seq_len, sched);
  q.blocks = q.padded / kBlock;
  q.k_blocks = q.padded / sched.key_tile;
  q.heads_q = p.heads_q;
  q.heads_kv = p.heads_kv;
  q.b = b;
  return q;
}

// A 4-D tensor map of E4M3 codes: dims (d0 inner … d3), strides of d1..d3 in bytes, boxes of box0 × box1.
bool encode_u8(CUtensorMap& map, const void* base, const cuuint64_t (&dims)[4], const cuuint64_t (&strides)[3],
               uint32_t box0, uint32_t box1, CUtensorMapSwizzle swizzle) {
  const cuuint32_t box[4] = {box0, box1, 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  return tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<void*>(base), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int DH>
void quantize(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched, cudaStream_t s) {
  const QuantParams q = quant_params(p, b, sched);
  const int64_t amax_bytes = int64_t(p.batch) * p.heads_kv * DH * 4;
  H3_CUDA_CHECK(cudaMemsetAsync(b.v_amax, 0, static_cast<size_t>(amax_bytes), s), "fp8 attention: v amax");
  H3_CUDA_CHECK(cudaMemsetAsync(b.v_bound, 0, static_cast<size_t>(p.batch) * 4, s), "fp8 attention: v bound");
  const dim3 block(kQuantThreads);
  quantize_qk_kernel<DH, kBlock, true><<<dim3(q.blocks, p.heads_q, p.batch), block, 0, s>>>(q);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 attention: quantize q");
  const dim3 k_grid(q.k_blocks, p.heads_kv, p.batch);
  if (sched.key_tile == kBlock)
    quantize_qk_kernel<DH, kBlock, false><<<k_grid, block, 0, s>>>(q);
  else
    quantize_qk_kernel<DH, 192, false><<<k_grid, block, 0, s>>>(q);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 attention: quantize k");
  v_amax_kernel<DH><<<dim3(q.blocks, p.heads_kv, p.batch), block, 0, s>>>(q);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 attention: v amax");
  quantize_v_kernel<DH><<<dim3(q.blocks, p.heads_kv, p.batch), block, 0, s>>>(q);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 attention: quantize v");
}

// H3_FP8_ATTENTION_TRACE=FILE (a diagnostic, the default schedule only): the launch runs the TRACE instance, which
// stamps the consumer warps' phases (kTracePhases) with the SM's clock for the first H3_FP8_ATTENTION_TRACE_CTAS
// (default 8) query blocks of the middle head of segment 0, and appends them to FILE after a synchronize, as
// int32 [ctas, heads_q, head, tiles, phases, 0, 0, 0] then uint32 [ctas][consumer warps][tiles][phases]
// (tools/fp8_attention_trace.py reads it).
struct TraceRequest {
  const char* path = nullptr;
  int ctas = 0;
};
TraceRequest trace_request() {
  TraceRequest r;
  r.path = std::getenv("H3_FP8_ATTENTION_TRACE");
  if (r.path && !*r.path) r.path = nullptr;
  const char* n = std::getenv("H3_FP8_ATTENTION_TRACE_CTAS");
  r.ctas = n ? std::atoi(n) : 8;
  return r;
}

template <typename T, int DH, int KT, int POLY, int STAGES, int GROUP, bool TRACE>
void launch_attention(const dim3 grid, const CUtensorMap& tq, const CUtensorMap& tk, const CUtensorMap& tv,
                      const Fp8KernelParams& kp, cudaStream_t s) {
  using Tl = Fp8Tiling<DH, KT, STAGES>;
  constexpr auto kernel = hopper_attention_fp8_kernel<T, DH, KT, POLY, STAGES, GROUP, TRACE>;
  static bool configured = false;
  if (!configured) {
    H3_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(Tl::kSmemBytes)),
                  "fp8 attention");
    configured = true;
  }
  kernel<<<grid, kThreads, Tl::kSmemBytes, s>>>(tq, tk, tv, kp);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 attention");
}

template <typename T, int DH, int KT, int POLY, int STAGES, int GROUP>
void launch_traced(const dim3 grid, const CUtensorMap& tq, const CUtensorMap& tk, const CUtensorMap& tv,
                   Fp8KernelParams kp, const TraceRequest& req, cudaStream_t s) {
  const int ctas = std::max(1, std::min(req.ctas, static_cast<int>(grid.x)));
  const size_t words = size_t(ctas) * kConsumers * 4 * kp.tiles * kTracePhases, sink = kConsumers * 4 * kTracePhases;
  uint32_t* d = nullptr;
  H3_CUDA_CHECK(cudaMalloc(&d, (words + sink) * 4), "fp8 attention trace");
  H3_CUDA_CHECK(cudaMemsetAsync(d, 0, (words + sink) * 4, s), "fp8 attention trace");
  kp.trace = d;
  kp.trace_sink = d + words;
  kp.trace_ctas = ctas;
  kp.trace_head = kp.heads_q / 2;
  launch_attention<T, DH, KT, POLY, STAGES, GROUP, true>(grid, tq, tk, tv, kp, s);
  std::vector<uint32_t> h(words);
  H3_CUDA_CHECK(cudaMemcpyAsync(h.data(), d, words * 4, cudaMemcpyDeviceToHost, s), "fp8 attention trace");
  H3_CUDA_CHECK(cudaStreamSynchronize(s), "fp8 attention trace");
  H3_CUDA_CHECK(cudaFree(d), "fp8 attention trace");
  std::FILE* f = std::fopen(req.path, "ab");
  H3_CHECK(f, "fp8 attention trace: cannot open ", req.path);
  const int32_t header[8] = {ctas, kp.heads_q, kp.trace_head, kp.tiles, kTracePhases, 0, 0, 0};
  const bool ok = std::fwrite(header, sizeof header, 1, f) == 1 && std::fwrite(h.data(), 4, words, f) == words;
  std::fclose(f);
  H3_CHECK(ok, "fp8 attention trace: cannot write ", req.path);
}

// T: the output's element type, or uint8_t for E4M3 codes (Fp8AttentionCodes; `codes` then holds the scales).
template <typename T, int DH, int KT, int POLY, int STAGES, int GROUP>
void attend(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched,
            const Fp8AttentionCodes* codes, int* err, cudaStream_t s) {
  using Tl = Fp8Operands<DH, KT>;
  const int Lp = padded_rows(p.seq_len, sched);
  const cuuint64_t L = cuuint64_t(Lp), D = DH, Hq = cuuint64_t(p.heads_q), Hkv = cuuint64_t(p.heads_kv);
  const CUtensorMapSwizzle qk_swizzle = DH == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUtensorMapSwizzle v_swizzle =
      Tl::kRegionKeys == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  alignas(64) CUtensorMap tq, tk, tv;
  H3_CHECK(encode_u8(tq, b.q, {D, L, Hq, cuuint64_t(p.batch)}, {D, L * D, Hq * L * D}, DH, kBlock, qk_swizzle) &&
               encode_u8(tk, b.k, {D, L, Hkv, cuuint64_t(p.batch)}, {D, L * D, Hkv * L * D}, DH, KT, qk_swizzle) &&
               encode_u8(tv, b.vt, {L, D, Hkv, cuuint64_t(p.batch)}, {L, D * L, Hkv * D * L}, Tl::kRegionKeys, DH,
                         v_swizzle),
           "fp8 attention: the driver refused the tensor maps");
  Fp8KernelParams kp;
  kp.o = p.o;
  kp.o_row = p.o_row;
  kp.o_head = p.o_head;
  kp.o_batch = p.o_batch;
  kp.q_scale = b.q_scale;
  kp.k_scale = b.k_scale;
  kp.v_scale = b.v_scale;
  kp.seq_len = p.seq_len;
  kp.q_blocks = Lp / kBlock;
  kp.k_blocks = Lp / KT;
  kp.tiles = (p.seq_len + KT - 1) / KT;
  kp.heads_q = p.heads_q;
  kp.heads_kv = p.heads_kv;
  kp.scale_log2 = p.scale * 1.4426950408889634f;
  kp.err = err;
  if constexpr (std::is_same_v<T, uint8_t>) {
    kp.code_scale = codes->scale;
    kp.v_bound = b.v_bound;
    kp.codes_of_bf16 = p.t == Elem::BF16;
  }
  const dim3 grid((p.seq_len + kBlock - 1) / kBlock, p.heads_q, p.batch);
  if constexpr (KT == 192 && GROUP == 4 && !std::is_same_v<T, uint8_t>) {  // the default schedule
    static const TraceRequest req = trace_request();
    if (req.path) return launch_traced<T, DH, KT, POLY, STAGES, GROUP>(grid, tq, tk, tv, kp, req, s);
  }
  launch_attention<T, DH, KT, POLY, STAGES, GROUP, false>(grid, tq, tk, tv, kp, s);
}

bool strides16(std::initializer_list<int64_t> s) {
  for (int64_t v : s)
    if (v <= 0 || v % 8 != 0) return false;
  return true;
}

// The instance of a schedule fp8_attention_schedule_refusal passes: 128-key tiles with either exp2 share, ring and
// group (or the tile accumulator); 192-key tiles with groups of 1, 2 or 4 (every exp2 on the SFU, a 2-stage ring).
template <typename T, int DH, int KT, int POLY, int STAGES>
void attend_grouped(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched,
                    const Fp8AttentionCodes* codes, int* err, cudaStream_t s) {
  switch (sched.tensor_sum_tiles) {
    case 0:
      if constexpr (KT == kBlock) return attend<T, DH, KT, POLY, STAGES, 0>(p, b, sched, codes, err, s);
      break;
    case 1: return attend<T, DH, KT, POLY, STAGES, 1>(p, b, sched, codes, err, s);
    case 2: return attend<T, DH, KT, POLY, STAGES, 2>(p, b, sched, codes, err, s);
    case 4: return attend<T, DH, KT, POLY, STAGES, 4>(p, b, sched, codes, err, s);
  }
  fail("fp8 attention: ", fp8_attention_schedule_refusal(sched));
}

// Codes (T = uint8_t) have the instances fp8_attention_codes_refusal passes: the 2-stage all-SFU ones.
template <typename T, int DH>
void attend_with(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched,
                 const Fp8AttentionCodes* codes, int* err, cudaStream_t s) {
  if (sched.key_tile == 192) return attend_grouped<T, DH, 192, 0, 2>(p, b, sched, codes, err, s);
  if constexpr (std::is_same_v<T, uint8_t>) {
    if (const char* why = fp8_attention_codes_refusal(sched)) fail("fp8 attention: ", why);
    return attend_grouped<T, DH, kBlock, 0, 2>(p, b, sched, codes, err, s);
  } else {
    if (sched.exp2_poly_chunks == 4)
      return sched.stages == 3 ? attend_grouped<T, DH, kBlock, 4, 3>(p, b, sched, codes, err, s)
                               : attend_grouped<T, DH, kBlock, 4, 2>(p, b, sched, codes, err, s);
    return sched.stages == 3 ? attend_grouped<T, DH, kBlock, 0, 3>(p, b, sched, codes, err, s)
                             : attend_grouped<T, DH, kBlock, 0, 2>(p, b, sched, codes, err, s);
  }
}

}  // namespace

const char* hopper_attention_fp8_refusal(const FlashParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128) return "head_dim is not 64 or 128";
  if (p.causal) return "causal attention";
  if (p.t == Elem::F32) return "f32 q/k/v";
  if (!(p.scale > 0.f) || !std::isfinite(p.scale)) return "non-positive scale";
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return "query heads not a multiple of k/v heads";
  if (p.batch >= 65536 || p.heads_q + p.heads_kv >= 65536) return "too many segments or heads for the grid";
  if (p.q_row != p.k_row || p.q_row != p.v_row || p.q_batch != p.kv_batch)
    return "q, k and v with different row strides";
  if (!strides16({p.q_row, p.o_row, p.q_head, p.kv_head, p.o_head, p.q_batch, p.o_batch}) || !aligned16(p.q) ||
      !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.o))
    return "q/k/v/o not 16-byte aligned in every stride";
  if (!device_is_sm90()) return "not a compute capability 9.0 device";
  if (!tensor_map_encoder()) return "the driver has no cuTensorMapEncodeTiled";
  return nullptr;
}

void launch_attention_fp8_quantize(const FlashParams& p, const Fp8AttentionBuffers& b,
                                   const Fp8AttentionSchedule& sched, cudaStream_t s) {
  if (const char* why = fp8_attention_schedule_refusal(sched)) fail("fp8 attention: ", why);
  if (p.seq_len == 0 || p.batch == 0) return;
  if (p.head_dim == 128)
    quantize<128>(p, b, sched, s);
  else
    quantize<64>(p, b, sched, s);
}

void launch_hopper_attention_fp8(const FlashParams& p, const Fp8AttentionBuffers& b, const Fp8AttentionSchedule& sched,
                                 int* err, cudaStream_t s, const Fp8AttentionCodes* codes) {
  if (p.seq_len == 0 || p.batch == 0) return;
  launch_attention_fp8_quantize(p, b, sched, s);
  const bool bf16 = p.t == Elem::BF16, hd128 = p.head_dim == 128;
  if (codes)
    hd128 ? attend_with<uint8_t, 128>(p, b, sched, codes, err, s)
          : attend_with<uint8_t, 64>(p, b, sched, codes, err, s);
  else if (hd128)
    bf16 ? attend_with<__nv_bfloat16, 128>(p, b, sched, codes, err, s)
         : attend_with<__half, 128>(p, b, sched, codes, err, s);
  else
    bf16 ? attend_with<__nv_bfloat16, 64>(p, b, sched, codes, err, s)
         : attend_with<__half, 64>(p, b, sched, codes, err, s);
}

}  // namespace h3::cuda
