// Device helpers shared by the kernels: loads and stores of f32/bf16/f16 as f32 (8 at a time through 16-byte
// accesses, or one at a time), block reductions, and the launch geometry helpers.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda {

__device__ __forceinline__ float load1(const void* p, Elem t, int64_t i) {
  switch (t) {
    case Elem::F32: return static_cast<const float*>(p)[i];
    case Elem::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return __half2float(static_cast<const __half*>(p)[i]);
  }
}

__device__ __forceinline__ void store1(void* p, Elem t, int64_t i, float v) {
  switch (t) {
    case Elem::F32: static_cast<float*>(p)[i] = v; break;
    case Elem::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
  }
}

// The value store1 leaves in memory (v rounded to t's precision), as f32.
__device__ __forceinline__ float rounded_to(Elem t, float v) {
  switch (t) {
    case Elem::F32: return v;
    case Elem::BF16: return __bfloat162float(__float2bfloat16_rn(v));
    default: return __half2float(__float2half_rn(v));
  }
}

// The eight 16-bit values (bf16, or f16 for any other t) of one 16-byte word as floats.
__device__ __forceinline__ void unpack8(const uint4& u, Elem t, float (&v)[8]) {
  if (t == Elem::BF16) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      v[2 * j] = f.x;
      v[2 * j + 1] = f.y;
    }
  } else {
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(h[j]);
      v[2 * j] = f.x;
      v[2 * j + 1] = f.y;
    }
  }
}

// 8 consecutive elements starting at i (i a multiple of 8, base 16-byte aligned).
__device__ __forceinline__ void load8(const void* p, Elem t, int64_t i, float (&v)[8]) {
  if (t == Elem::F32) {
    const float4* q = reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    const float4 a = q[0], b = q[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  } else {
    unpack8(*reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + i), t, v);
  }
}

// load8 of an optional per-channel vector (a norm weight): all ones when p is null.
__device__ __forceinline__ void load8_or_ones(const void* p, Elem t, int64_t i, float (&v)[8]) {
  if (p) {
    load8(p, t, i, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = 1.f;
  }
}

__device__ __forceinline__ void store8(void* p, Elem t, int64_t i, const float (&v)[8]) {
  if (t == Elem::F32) {
    float4* q = reinterpret_cast<float4*>(static_cast<float*>(p) + i);
    q[0] = make_float4(v[0], v[1], v[2], v[3]);
    q[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else if (t == Elem::BF16) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p) + i) = u;
  } else {
    uint4 u;
    __half2* h = reinterpret_cast<__half2*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(static_cast<__half*>(p) + i) = u;
  }
}

// Loads 8 elements, or the `n` (< 8) that exist followed by zeros, through the vector path when `vec`.
__device__ __forceinline__ void load_group(const void* p, Elem t, int64_t i, int n, bool vec, float (&v)[8]) {
  if (vec) {
    load8(p, t, i, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = j < n ? load1(p, t, i + j) : 0.f;
  }
}
__device__ __forceinline__ void store_group(void* p, Elem t, int64_t i, int n, bool vec, const float (&v)[8]) {
  if (vec) {
    store8(p, t, i, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) store1(p, t, i + j, v[j]);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. `scratch` holds
// 32 floats; the function synchronizes so that it can be called again with the same scratch.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : 0.f;
  t = warp_sum(t);
  __syncthreads();
  return t;
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.f + __expf(-x)); }

// Two floats rounded to T (bf16 or f16) and packed into one 32-bit register, `lo` in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The shared-memory address of a generic pointer into shared memory (for PTX operands).
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Host: whether a pointer is 16-byte aligned (the vector and TMA paths need it); all_aligned: every non-null one.
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline bool all_aligned(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (p && !aligned16(p)) return false;
  return true;
}

}  // namespace h3::cuda
