// FP8 E4M3 quantization (backend/cpu/cpu_fp8.h is the definition and the emulation these match bit for bit): each
// group's scale s = amax / 448 (an IEEE division; 1 where that is not > 0), amax over the group's finite
// magnitudes, and every value stored as the saturating round-to-nearest-even E4M3 code of x / s (NaN → 0x7F).
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_fp8.h"

namespace h3::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kBlockEdge = 128;

__device__ __forceinline__ float finite_magnitude(float v) { return isfinite(v) ? fabsf(v) : 0.f; }

__device__ __forceinline__ uint8_t encode_e4m3(float v) {
  if (isnan(v)) return 0x7F;
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float group_scale(float amax) {
  const float s = __fdiv_rn(amax, 448.f);
  return s > 0.f ? s : 1.f;
}

// The block's maximum of v (every thread gets it).
__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  const float r = scratch[0];
  __syncthreads();
  return r;
}

// One thread block per (row, column group): columns [g·group, min(K, (g+1)·group)) of row r share one scale, stored
// at scale[g·rows + r].
__global__ void quantize_row_groups_kernel(In x, int64_t rows, int64_t K, int64_t group, uint8_t* codes,
                                           float* scale) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, g = blockIdx.y;
  const int64_t k0 = g * group, k1 = min(K, k0 + group);
  float amax = 0.f;
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) amax = fmaxf(amax, finite_magnitude(load1(x.p, x.t, r * K + k)));
  const float s = group_scale(block_max(amax, scratch));
  if (threadIdx.x == 0) scale[g * rows + r] = s;
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x)
    codes[r * K + k] = encode_e4m3(__fdiv_rn(load1(x.p, x.t, r * K + k), s));
}

// One thread block per 128×128 block (bn, bk) of w [N, K]; its scale at scale[bn·ld + bk], the padding columns of
// the last block of a row set to 1.
__global__ void quantize_weight_blocks_kernel(In w, int64_t N, int64_t K, int64_t ld, uint8_t* codes, float* scale) {
  __shared__ float scratch[32];
  const int64_t bn = blockIdx.x, bk = blockIdx.y;
  const int64_t n0 = bn * kBlockEdge, k0 = bk * kBlockEdge;
  const int64_t nn = min(kBlockEdge, N - n0), kk = min(kBlockEdge, K - k0);
  float amax = 0.f;
  for (int64_t i = threadIdx.x; i < nn * kk; i += blockDim.x)
    amax = fmaxf(amax, finite_magnitude(load1(w.p, w.t, (n0 + i / kk) * K + k0 + i % kk)));
  const float s = group_scale(block_max(amax, scratch));
  if (threadIdx.x == 0) {
    scale[bn * ld + bk] = s;
    if (bk + 1 == gridDim.y)
      for (int64_t j = bk + 1; j < ld; ++j) scale[bn * ld + j] = 1.f;
  }
  for (int64_t i = threadIdx.x; i < nn * kk; i += blockDim.x) {
    const int64_t at = (n0 + i / kk) * K + k0 + i % kk;
    codes[at] = encode_e4m3(__fdiv_rn(load1(w.p, w.t, at), s));
  }
}

}  // namespace

void launch_fp8_quantize_rows(In x, int64_t rows, int64_t K, int64_t group, uint8_t* codes, float* scale,
                              cudaStream_t s) {
  if (rows == 0 || K == 0) return;
  const int64_t groups = (K + group - 1) / group;
  quantize_row_groups_kernel<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(groups)), kThreads, 0, s>>>(
      x, rows, K, group, codes, scale);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 quantize");
}

void launch_fp8_quantize_weight_blocks(In w, int64_t N, int64_t K, int64_t ld, uint8_t* codes, float* scale,
                                       cudaStream_t s) {
  if (N == 0 || K == 0) return;
  const int64_t nb = (N + kBlockEdge - 1) / kBlockEdge, kb = (K + kBlockEdge - 1) / kBlockEdge;
  quantize_weight_blocks_kernel<<<dim3(static_cast<unsigned>(nb), static_cast<unsigned>(kb)), kThreads, 0, s>>>(
      w, N, K, ld, codes, scale);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 quantize weight blocks");
}

}  // namespace h3::cuda
