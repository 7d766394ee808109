// Throughput of the instructions an attention softmax issues besides its GEMMs (issue 18): ex2 in f32 and packed
// f16x2 / bf16x2, the E4M3 and f16 conversions, alone and interleaved with ex2 (do they share the SFU?), against FFMA
// and IMAD. Each op runs 8 independent dependency chains per thread, one CTA of 1024 threads per SM; the figure is
// the op's instructions per clock per SM from clock64 (BENCHMARKS.md, session 11). Standalone: no libh3.
//   nvcc -O3 -arch=sm_90a -o sfu_throughput bench/sfu_throughput.cu   (scripts/gpu/bundle.sh builds it)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

constexpr int kChains = 8, kIters = 2048, kThreads = 1024;

__device__ __forceinline__ float ex2_f32(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t ex2_f16x2(uint32_t x) {
  uint32_t y;
  asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ uint32_t ex2_bf16x2(uint32_t x) {
  uint32_t y;
  asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ uint32_t e4m3x2_of_f32(float a, float b) {
  uint16_t y;
  asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(y) : "f"(a), "f"(b));
  return y;
}
__device__ __forceinline__ uint32_t f16x2_of_f32(float a, float b) {
  uint32_t y;
  asm volatile("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(y) : "f"(a), "f"(b));
  return y;
}
__device__ __forceinline__ uint32_t e4m3x2_of_f16x2(uint32_t x) {
  uint16_t y;
  asm volatile("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ float ffma(float a, float b, float c) {
  float y;
  asm volatile("fma.rn.f32 %0, %1, %2, %3;" : "=f"(y) : "f"(a), "f"(b), "f"(c));
  return y;
}

enum Op {
  kEx2F32, kEx2F16x2, kEx2Bf16x2, kCvtE4m3, kCvtF16, kCvtE4m3OfF16, kFfma, kEx2AndCvt, kEx2F16AndCvt, kImad,
  kEx2OfFfma  // the softmax's pair: ex2(fma(x, c, -b))
};

template <Op OP, int kThreads = kThreads, int kChains = kChains>
__global__ void __launch_bounds__(kThreads) chains(float* out, long long* cycles) {
  float f[kChains];
  uint32_t u[kChains];
  for (int i = 0; i < kChains; ++i) {
    f[i] = (threadIdx.x + i) * 1e-3f;
    u[i] = __float_as_uint(f[i]);
  }
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < kIters; ++it) {
#pragma unroll
    for (int i = 0; i < kChains; ++i) {
      if constexpr (OP == kEx2F32) f[i] = ex2_f32(f[i]);
      if constexpr (OP == kEx2F16x2) u[i] = ex2_f16x2(u[i]);
      if constexpr (OP == kEx2Bf16x2) u[i] = ex2_bf16x2(u[i]);
      if constexpr (OP == kCvtE4m3) u[i] ^= e4m3x2_of_f32(f[i], __uint_as_float(u[i]));
      if constexpr (OP == kCvtF16) u[i] ^= f16x2_of_f32(f[i], __uint_as_float(u[i]));
      if constexpr (OP == kCvtE4m3OfF16) u[i] ^= e4m3x2_of_f16x2(u[i]);
      if constexpr (OP == kFfma) f[i] = ffma(f[i], 1.0001f, 0.5f);
      if constexpr (OP == kEx2AndCvt) {
        f[i] = ex2_f32(f[i]);
        u[i] ^= e4m3x2_of_f32(f[i], __uint_as_float(u[i]));
      }
      if constexpr (OP == kEx2F16AndCvt) {
        u[i] = ex2_f16x2(u[i]);
        u[i] ^= e4m3x2_of_f16x2(u[i]);
      }
      if constexpr (OP == kImad) u[i] ^= 0x9e3779b9u * u[i];
      if constexpr (OP == kEx2OfFfma) f[i] = ex2_f32(ffma(f[i], 0.999f, -0.25f));
    }
  }
  const long long t1 = clock64();
  float acc = 0.f;
  for (int i = 0; i < kChains; ++i) acc += f[i] + __uint_as_float(u[i]);
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;  // keeps the chains alive
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// The op's first instruction per clock per SM: a warm-up launch, then the slowest CTA of the timed one.
template <Op OP, int kThreads = kThreads, int kChains = kChains>
bool measure(const char* name, float* out, long long* cycles, int sms) {
  for (int rep = 0; rep < 2; ++rep) chains<OP, kThreads, kChains><<<sms, kThreads>>>(out, cycles);
  if (cudaDeviceSynchronize() != cudaSuccess) return false;
  long long slowest = 0;
  for (int i = 0; i < sms; ++i) {
    long long c = 0;
    if (cudaMemcpy(&c, cycles + i, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    if (c > slowest) slowest = c;
  }
  const double per_clock = double(kThreads) * kIters * kChains / double(slowest);
  if (kThreads == ::kThreads) {
    std::printf("%-32s %8.2f per clock per SM\n", name, per_clock);
  } else {  // few warps: what one warp gets
    const int warps_per_scheduler = kThreads / 128;
    std::printf("%-32s %8.2f per clock per SM, %d warp(s) per scheduler x %d chains: %.1f cycles per warp "
                "instruction\n", name, per_clock, warps_per_scheduler, kChains,
                double(slowest) / (double(kIters) * kChains));
  }
  return true;
}

}  // namespace

int main() {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms == 0) {
    std::fprintf(stderr, "sfu_throughput: no CUDA device\n");
    return 1;
  }
  float* out = nullptr;
  long long* cycles = nullptr;
  if (cudaMalloc(&out, sizeof(float) * sms * kThreads) != cudaSuccess ||
      cudaMalloc(&cycles, sizeof(long long) * sms) != cudaSuccess) {
    std::fprintf(stderr, "sfu_throughput: cudaMalloc failed\n");
    return 1;
  }
  const bool ok = measure<kEx2F32>("ex2.approx.f32", out, cycles, sms) &&
                  measure<kEx2F16x2>("ex2.approx.f16x2 (2 values)", out, cycles, sms) &&
                  measure<kEx2Bf16x2>("ex2.approx.bf16x2 (2 values)", out, cycles, sms) &&
                  measure<kCvtE4m3>("cvt e4m3x2.f32 (+ lop)", out, cycles, sms) &&
                  measure<kCvtF16>("cvt f16x2.f32 (+ lop)", out, cycles, sms) &&
                  measure<kCvtE4m3OfF16>("cvt e4m3x2.f16x2 (+ lop)", out, cycles, sms) &&
                  measure<kFfma>("ffma", out, cycles, sms) &&
                  measure<kEx2AndCvt>("ex2.f32 + cvt e4m3x2 (pairs)", out, cycles, sms) &&
                  measure<kEx2F16AndCvt>("ex2.f16x2 + cvt e4m3x2.f16x2", out, cycles, sms) &&
                  measure<kImad>("imad", out, cycles, sms) &&
                  // What the attention's consumer warps see: one or two warps per scheduler, 64 exponentials each.
                  measure<kEx2F32, 128, 64>("ex2.approx.f32", out, cycles, sms) &&
                  measure<kEx2F32, 256, 64>("ex2.approx.f32", out, cycles, sms) &&
                  measure<kEx2OfFfma, 128, 64>("ex2(ffma)", out, cycles, sms) &&
                  measure<kEx2OfFfma, 256, 64>("ex2(ffma)", out, cycles, sms) &&
                  measure<kEx2AndCvt, 256, 32>("ex2.f32 + cvt e4m3x2 (pairs)", out, cycles, sms);
  if (!ok) std::fprintf(stderr, "sfu_throughput: %s\n", cudaGetErrorString(cudaGetLastError()));
  return ok ? 0 : 1;
}
