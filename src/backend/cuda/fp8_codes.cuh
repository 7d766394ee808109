// The E4M3 arithmetic of the FP8 kernels (backend/cpu/cpu_fp8.h is the definition and the emulation these match
// bit for bit): a group's scale s = amax / 448 (an IEEE division; 1 where that is not > 0), amax over the group's
// finite magnitudes, every value stored as the saturating round-to-nearest-even E4M3 code of x / s (NaN → 0x7F),
// that quotient from one reciprocal per group (backend/fp8_quotient.h: the division's bits, by Markstein's correction).
// Shared by the quantization kernels (kernels_fp8.cu), the producers that quantize their own output
// (kernels_elementwise.cu) and FP8 attention's operand quantization (kernels_attention_fp8_sm90.cu).
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/fp8_quotient.h"

namespace h3::cuda {

__device__ __forceinline__ float fp8_finite_magnitude(float v) { return isfinite(v) ? fabsf(v) : 0.f; }

__device__ __forceinline__ uint8_t fp8_encode(float v) {
  if (isnan(v)) return 0x7F;
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float fp8_group_scale(float amax) {
  const float s = __fdiv_rn(amax, 448.f);
  return s > 0.f ? s : 1.f;
}

// The block's maximum of v (every thread gets it; every thread of the block must call it).
__device__ __forceinline__ float fp8_block_max(float v, float* scratch) {
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

// The maximum of v over the 16 lanes of the half-warp (every lane of the warp must call it).
__device__ __forceinline__ float fp8_half_warp_max(float v) {
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Eight codes of v[j] / s, packed little-endian (code j in byte j). The divisor's path is chosen once for the
// eight (a test and a branch per value made the modulate kernel's SASS 16% longer and it 8% slower: BENCHMARKS.md,
// session 14).
__device__ __forceinline__ uint2 fp8_encode8(const float (&v)[8], const Fp8Divisor& d) {
  uint32_t lo = 0, hi = 0;
  if (d.by_reciprocal) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lo |= uint32_t(fp8_encode(fp8_quotient_by_reciprocal(v[j], d))) << (8 * j);
      hi |= uint32_t(fp8_encode(fp8_quotient_by_reciprocal(v[j + 4], d))) << (8 * j);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lo |= uint32_t(fp8_encode(v[j] / d.s)) << (8 * j);
      hi |= uint32_t(fp8_encode(v[j + 4] / d.s)) << (8 * j);
    }
  }
  return make_uint2(lo, hi);
}

}  // namespace h3::cuda
