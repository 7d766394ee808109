// FP8 E4M3 quantization (backend/cpu/cpu_fp8.h is the definition and the emulation these match bit for bit): each
// group's scale s = amax / 448 (an IEEE division; 1 where that is not > 0), amax over the group's finite
// magnitudes, and every value stored as the saturating round-to-nearest-even E4M3 code of x / s (NaN → 0x7F).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/fp8_layout.h"

namespace h3::cuda {

namespace {

constexpr int kThreads = 256;

// One thread block per (row, column group): columns [g·group, min(K, (g+1)·group)) of row r share one scale
// (group 128 when block, else K), stored at kernels_fp8.h's place for it.
__global__ void quantize_row_groups_kernel(In x, int64_t rows, int64_t K, bool block, uint8_t* codes, float* scale) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, g = blockIdx.y, group = block ? kFp8Block : K;
  const int64_t k0 = g * group, k1 = min(K, k0 + group);
  float amax = 0.f;
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x)
    amax = fmaxf(amax, fp8_finite_magnitude(load1(x.p, x.t, r * K + k)));
  const float s = fp8_group_scale(fp8_block_max(amax, scratch));
  if (threadIdx.x == 0) scale[block ? fp8_block_scale_index(r, g, rows, K) : r] = s;
  const Fp8Divisor d = fp8_divisor(s);
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x)
    codes[r * K + k] = fp8_encode(fp8_quotient(load1(x.p, x.t, r * K + k), d));
}

// One thread block per row r, scaled by its segment's bound: codes of x · (1 / s), as the attention's epilogue makes
// them.
__global__ void quantize_rows_by_bound_kernel(In x, int64_t K, const uint32_t* bound, int64_t seg_len, uint8_t* codes,
                                              float* scale) {
  const int64_t r = blockIdx.x;
  const float s = fp8_group_scale(__uint_as_float(bound[r / seg_len])), inv = 1.f / s;
  if (threadIdx.x == 0) scale[r] = s;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) codes[r * K + k] = fp8_encode(load1(x.p, x.t, r * K + k) * inv);
}

// One thread block per padding row r in [rows, round_up(rows, 4)).
__global__ void pad_rows_kernel(int64_t rows, int64_t K, uint8_t* codes, float* scale) {
  const int64_t r = rows + blockIdx.x;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) codes[r * K + k] = 0;
  for (int64_t g = threadIdx.x; g < fp8_blocks(K); g += blockDim.x) scale[fp8_block_scale_index(r, g, rows, K)] = 1.f;
}

// One thread block per 128×128 block (bn, bk) of w [N, K]; its scale at scale[bn·ld + bk], the padding columns of
// the last block of a row set to 1.
__global__ void quantize_weight_blocks_kernel(In w, int64_t N, int64_t K, int64_t ld, uint8_t* codes, float* scale) {
  __shared__ float scratch[32];
  const int64_t bn = blockIdx.x, bk = blockIdx.y;
  const int64_t n0 = bn * kFp8Block, k0 = bk * kFp8Block;
  const int64_t nn = min(kFp8Block, N - n0), kk = min(kFp8Block, K - k0);
  float amax = 0.f;
  for (int64_t i = threadIdx.x; i < nn * kk; i += blockDim.x)
    amax = fmaxf(amax, fp8_finite_magnitude(load1(w.p, w.t, (n0 + i / kk) * K + k0 + i % kk)));
  const float s = fp8_group_scale(fp8_block_max(amax, scratch));
  if (threadIdx.x == 0) {
    scale[bn * ld + bk] = s;
    if (bk + 1 == gridDim.y)
      for (int64_t j = bk + 1; j < ld; ++j) scale[bn * ld + j] = 1.f;
  }
  const Fp8Divisor d = fp8_divisor(s);
  for (int64_t i = threadIdx.x; i < nn * kk; i += blockDim.x) {
    const int64_t at = (n0 + i / kk) * K + k0 + i % kk;
    codes[at] = fp8_encode(fp8_quotient(load1(w.p, w.t, at), d));
  }
}

}  // namespace

void launch_fp8_quantize_rows(In x, int64_t rows, int64_t K, bool block, uint8_t* codes, float* scale,
                              cudaStream_t s) {
  if (rows == 0 || K == 0) return;
  const int64_t groups = block ? fp8_blocks(K) : 1;
  quantize_row_groups_kernel<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(groups)), kThreads, 0, s>>>(
      x, rows, K, block, codes, scale);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 quantize");
}

void launch_fp8_quantize_rows_by_bound(In x, int64_t rows, int64_t K, const uint32_t* bound, int64_t seg_len,
                                       uint8_t* codes, float* scale, cudaStream_t s) {
  if (rows == 0 || K == 0) return;
  quantize_rows_by_bound_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, K, bound, seg_len, codes, scale);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 quantize by bound");
}

void launch_fp8_pad_rows(int64_t rows, int64_t K, uint8_t* codes, float* scale, cudaStream_t s) {
  const int64_t padding = fp8_block_padded_rows(rows) - rows;
  if (padding == 0 || K == 0) return;
  pad_rows_kernel<<<static_cast<unsigned>(padding), kThreads, 0, s>>>(rows, K, codes, scale);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 pad rows");
}

void launch_fp8_quantize_weight_blocks(In w, int64_t N, int64_t K, int64_t ld, uint8_t* codes, float* scale,
                                       cudaStream_t s) {
  if (N == 0 || K == 0) return;
  const int64_t nb = (N + kFp8Block - 1) / kFp8Block, kb = (K + kFp8Block - 1) / kFp8Block;
  quantize_weight_blocks_kernel<<<dim3(static_cast<unsigned>(nb), static_cast<unsigned>(kb)), kThreads, 0, s>>>(
      w, N, K, ld, codes, scale);
  H3_CUDA_LAUNCH_CHECK(s, "fp8 quantize weight blocks");
}

}  // namespace h3::cuda
