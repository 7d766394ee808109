// The attention pieces shared by our Hopper (sm_90a) kernels, kernels_attention_sm90.cu's dense attention and
// kernels_sparse_attention_sm90.cu's block-sparse one: wgmma with both operands in shared memory (S = Q·Kᵀ) and with
// A from registers (O += P·V), the two GEMMs of one K/V tile on 128-byte-swizzled TMA boxes of 64 channels, and the
// online softmax on the wgmma accumulator layout (the arithmetic the dense kernel's header describes).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/sm90_primitives.cuh"

namespace h3::cuda::sm90 {

constexpr int kBoxCols = 64;                           // channels per TMA box: the width of the 128-byte swizzle
constexpr uint32_t kRowBytes = kBoxCols * 2;           // 128
constexpr uint32_t kSwizzleAtomBytes = 8 * kRowBytes;  // 1 KiB: 8 rows of the 128-byte swizzle

#define H3_D8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define H3_D32 H3_D8(0), H3_D8(8), H3_D8(16), H3_D8(24)
#define H3_WGMMA_D32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define H3_D64 H3_D8(0), H3_D8(8), H3_D8(16), H3_D8(24), H3_D8(32), H3_D8(40), H3_D8(48), H3_D8(56)
#define H3_D88 H3_D64, H3_D8(64), H3_D8(72), H3_D8(80)
#define H3_WGMMA_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define H3_WGMMA_D88 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "  \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "  \
  "%80, %81, %82, %83, %84, %85, %86, %87}"

// D[64xN] (+)= A[64x16]·B[16xN], A and B from shared memory, both K-major; scale_d 0 overwrites D. N = 64, 128 or 176.
#define H3_WGMMA_SS(N, TYPE, DREGS, DOPS, A, B, SCALE)                                                      \
  asm volatile(                                                                                           \
      "{\n"                                                                                               \
      ".reg .pred p;\n"                                                                                   \
      "setp.ne.b32 p, %" #SCALE ", 0;\n"                                                                  \
      "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " DREGS ", %" #A ", %" #B         \
      ", p, 1, 1, 0, 0;\n"                                                                                \
      "}\n"                                                                                               \
      : DOPS                                                                                              \
      : "l"(a), "l"(b), "r"(scale_d))
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d) {
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 64) {
    if constexpr (bf16)
      H3_WGMMA_SS(64, "bf16", H3_WGMMA_D32, H3_D32, 32, 33, 34);
    else
      H3_WGMMA_SS(64, "f16", H3_WGMMA_D32, H3_D32, 32, 33, 34);
  } else if constexpr (N == 128) {
    if constexpr (bf16)
      H3_WGMMA_SS(128, "bf16", H3_WGMMA_D64, H3_D64, 64, 65, 66);
    else
      H3_WGMMA_SS(128, "f16", H3_WGMMA_D64, H3_D64, 64, 65, 66);
  } else {
    static_assert(N == 176, "S tiles of 64, 128 or 176 keys");
    if constexpr (bf16)
      H3_WGMMA_SS(176, "bf16", H3_WGMMA_D88, H3_D88, 88, 89, 90);
    else
      H3_WGMMA_SS(176, "f16", H3_WGMMA_D88, H3_D88, 88, 89, 90);
  }
}

// D[64xN] += A[64x16]·B[16xN], A from registers (four 32-bit fragments), B from shared memory N-major; N = DH.
#define H3_WGMMA_RS(N, TYPE, DREGS, DOPS, AREGS)                                                            \
  asm volatile(                                                                                           \
      "{\n"                                                                                               \
      ".reg .pred p;\n"                                                                                   \
      "setp.ne.b32 p, 1, 0;\n"                                                                            \
      "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " DREGS ", " AREGS ", p, 1, 1, 1;\n" \
      "}\n"                                                                                               \
      : DOPS                                                                                              \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b))
#define H3_WGMMA_RS_128(TYPE) H3_WGMMA_RS(128, TYPE, H3_WGMMA_D64, H3_D64, "{%64, %65, %66, %67}, %68")
#define H3_WGMMA_RS_64(TYPE) H3_WGMMA_RS(64, TYPE, H3_WGMMA_D32, H3_D32, "{%32, %33, %34, %35}, %36")
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t b) {
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 128) {
    if constexpr (bf16)
      H3_WGMMA_RS_128("bf16");
    else
      H3_WGMMA_RS_128("f16");
  } else {
    static_assert(N == 64, "O tiles of 64 or 128 channels");
    if constexpr (bf16)
      H3_WGMMA_RS_64("bf16");
    else
      H3_WGMMA_RS_64("f16");
  }
}

// ---- the two GEMMs of one tile ----

// S[64 x BN keys] = Q[64 x DH]·K[BN keys x DH]ᵀ. Q and K tiles are DH/64 boxes of 64 channels each (128-byte rows,
// 128-byte swizzle, 8-row atoms 1 KiB apart); the k-th 16-channel slice starts 32·(k mod 4) bytes into box k/4.
template <typename T, typename Tl>
__device__ __forceinline__ void gemm_qk(float (&s)[Tl::kBoxBytes / kRowBytes / 2], uint32_t q, uint32_t k) {
  constexpr int DH = Tl::kBoxes * kBoxCols, BN = Tl::kBoxBytes / kRowBytes;
  const uint64_t qd = smem_desc(q, 16, kSwizzleAtomBytes, kSwizzle128);
  const uint64_t kd = smem_desc(k, 16, kSwizzleAtomBytes, kSwizzle128);
#pragma unroll
  for (int kk = 0; kk < DH / 16; ++kk) {
    const uint32_t in_box = (kk % 4) * 32;
    wgmma_ss<T, BN>(s, smem_desc_advance(qd, (kk / 4) * Tl::kQBoxBytes + in_box),
                    smem_desc_advance(kd, (kk / 4) * Tl::kBoxBytes + in_box), kk > 0);
  }
}

// O[64 x DH] += P[64 x BN keys]·V[BN keys x DH]. V is N-major for this product (channels contiguous): within a
// box, 8-key atoms are 1 KiB apart (stride byte offset); the second 64 channels (DH 128) are the next box (leading
// byte offset); the k-th 16-key slice starts 16 rows = 2 KiB further.
template <typename T, typename Tl>
__device__ __forceinline__ void gemm_pv(float (&o)[Tl::kBoxes * kBoxCols / 2],
                                        const uint32_t (&p)[Tl::kBoxBytes / kRowBytes / 4], uint32_t v) {
  constexpr int DH = Tl::kBoxes * kBoxCols, BN = Tl::kBoxBytes / kRowBytes;
  const uint64_t vd = smem_desc(v, Tl::kBoxBytes, kSwizzleAtomBytes, kSwizzle128);
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
    wgmma_rs<T, DH>(o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3],
                    smem_desc_advance(vd, kk * 16 * kRowBytes));
}

// ---- softmax on the wgmma accumulator layout ----
// Thread (warp w, lane) of a consumer warpgroup holds rows r0 = 16w + lane/4 and r1 = r0 + 8; register 4k + e is
// column 8k + 2·(lane mod 4) + (e mod 2) of row r0 (e < 2) or r1 (e ≥ 2).

// Keys at or past `len` (a tile's tail: rows TMA zero-filled, or padding) get −∞.
template <int N>
__device__ __forceinline__ void mask_tail(float (&s)[N], int key0, int len, int lane) {
#pragma unroll
  for (int k = 0; k < N / 4; ++k)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (key0 + 8 * k + 2 * (lane & 3) + (e & 1) >= len) s[4 * k + e] = -INFINITY;
}

// Online softmax of one tile of scores in place: new row maxima, s ← 2^(s·scale_log2 − max·scale_log2), the
// thread's partial row sums, and the factors alpha by which the running O and sums shrink.
template <int N>
__device__ __forceinline__ void online_softmax(float (&s)[N], float& m0, float& m1, float& l0, float& l1,
                                               float scale_log2, float& alpha0, float& alpha1) {
  float x0 = m0, x1 = m1;
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    x0 = fmaxf(x0, fmaxf(s[4 * k], s[4 * k + 1]));
    x1 = fmaxf(x1, fmaxf(s[4 * k + 2], s[4 * k + 3]));
  }
  x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
  x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
  x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
  x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
  // Every row has a finite maximum: the callers' first tile holds a real key (key 0 of the dense kernel's tile 0, the
  // first listed key block of the block-sparse one).
  const float b0 = x0 * scale_log2, b1 = x1 * scale_log2;
  alpha0 = ex2(m0 * scale_log2 - b0);  // m = −∞ before the first tile: alpha = 0
  alpha1 = ex2(m1 * scale_log2 - b1);
  m0 = x0;
  m1 = x1;
  float r0 = 0.f, r1 = 0.f;
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    s[4 * k] = ex2(fmaf(s[4 * k], scale_log2, -b0));
    s[4 * k + 1] = ex2(fmaf(s[4 * k + 1], scale_log2, -b0));
    s[4 * k + 2] = ex2(fmaf(s[4 * k + 2], scale_log2, -b1));
    s[4 * k + 3] = ex2(fmaf(s[4 * k + 3], scale_log2, -b1));
    r0 += s[4 * k] + s[4 * k + 1];
    r1 += s[4 * k + 2] + s[4 * k + 3];
  }
  l0 = l0 * alpha0 + r0;
  l1 = l1 * alpha1 + r1;
}

// P as the A operand of the next P·V: for 16-key slice kk, fragments (r0, keys 2c..), (r1, keys 2c..),
// (r0, keys 8 + 2c..), (r1, keys 8 + 2c..) — registers 8kk..8kk+7 of the accumulator, in order.
template <typename T, int N>
__device__ __forceinline__ void round_p(const float (&s)[N], uint32_t (&p)[N / 2]) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) p[i] = pack2<T>(s[2 * i], s[2 * i + 1]);
}

// After the softmax of S_j: waits for P_(j-1)·V_(j-1) after a branch (wgmma_wait_all_then: else ptxas issues the
// wait before the softmax, which then no longer runs under that product), fences O, runs release() (the V slot's
// release) and rescales O by α where a row of the warp has a new maximum (warp_has_new_maximum).
template <int N, class Release>
__device__ __forceinline__ void finish_pv(float (&o)[N], float alpha0, float alpha1, Release&& release) {
  auto done = [&] {
    fence_operands(o);
    release();
  };
  wgmma_wait_all_then(
      warp_has_new_maximum(alpha0, alpha1),
      [&] {
        done();
        rescale(o, alpha0, alpha1);
      },
      done);
}

}  // namespace h3::cuda::sm90
