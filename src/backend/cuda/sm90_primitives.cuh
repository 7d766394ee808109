// Hopper (sm_90a) building blocks of the attention kernels (kernels_attention_sm90.cu, kernels_attention_fp8_sm90.cu,
// kernels_sparse_attention_sm90.cu): mbarriers, TMA loads through 4-D tensor maps, named barriers, register
// reallocation, wgmma's fences, waits and shared-memory descriptors, and the host's tensor-map encoder and device
// check.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda::sm90 {

constexpr uint64_t kHangNs = 4'000'000'000ull;  // a pipeline wait this long is a bug

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_test(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits until the phase of the given parity has completed. A wait of kHangNs means a broken pipeline: the CTA marks
// itself stalled (every later wait returns at once, so the kernel ends) and reports DeviceError::AttentionStalled,
// which the host turns into an error instead of a hang (no trap: ptxas would then drop the consumers' register budget).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity, volatile int* stalled, int* err) {
  if (mbar_test(bar, parity) || *stalled) return;
  const uint64_t t0 = global_timer_ns();
  while (!mbar_test(bar, parity)) {
    if (*stalled) return;
    if (global_timer_ns() - t0 > kHangNs) {
      *stalled = 1;
      if (err) atomicExch(err, static_cast<int>(DeviceError::AttentionStalled));
      return;
    }
  }
}

// One box of a 4-D tensor map into shared memory at coordinates (c0, c1, c2, c3); completion counted in bytes on bar.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2,
                                         int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// wgmma's layout types (bits 62-63 of a shared-memory matrix descriptor).
constexpr uint64_t kSwizzle128 = 1, kSwizzle64 = 2;

// A wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (each >> 4), layout type.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes,
                                              uint64_t swizzle) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(leading_bytes >> 4) << 16) |
         (uint64_t(stride_bytes >> 4) << 32) | (swizzle << 62);
}

// The descriptor of the matrix `bytes` further on (a multiple of 16): its start address field is addr >> 4 in bits
// 0-13, and shared addresses stay below 2^18, so the add never carries out of the field. One add where smem_desc
// costs four uniform-datapath instructions per wgmma (the FP8 kernel issued ~75 of them per key tile).
__device__ __forceinline__ uint64_t smem_desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// The same wait under a distinct text per TAG, so that the compiler keeps one in each arm of a branch instead of
// hoisting a shared one above it.
template <int N, int TAG>
__device__ __forceinline__ void wgmma_wait_tagged() {
  asm volatile("wgmma.wait_group.sync.aligned %0; // %1" ::"n"(N), "n"(TAG) : "memory");
}

// Waits for all of the warpgroup's wgmma groups, then runs taken() or not_taken() (`taken` warp-uniform), with the
// wait in a basic block of its own after the branch. Why: ptxas schedules a wgmma wait at the earliest point of its
// basic block, so a wait written after the softmax of S_j (which should run while P_{j−1}·V_{j−1} is on the tensor
// cores) was issued before it, and the warp sat out the whole P·V first (the H200's SASS and Nsight Compute's
// per-instruction stall samples, BENCHMARKS.md session 11); ptxas does not move it across a branch.
template <class Taken, class NotTaken>
__device__ __forceinline__ void wgmma_wait_all_then(bool taken, Taken&& taken_fn, NotTaken&& not_taken_fn) {
  if (taken) {
    wgmma_wait_tagged<0, 1>();
    taken_fn();
  } else {
    wgmma_wait_tagged<0, 2>();
    not_taken_fn();
  }
}

// Keeps the compiler from moving reads or writes of wgmma accumulators (or operands) across a wgmma wait.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// The rows r0 (registers 4k, 4k+1) and r1 (4k+2, 4k+3) of a wgmma accumulator scaled by alpha0 and alpha1.
template <int N>
__device__ __forceinline__ void rescale(float (&o)[N], float alpha0, float alpha1) {
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    o[4 * k] *= alpha0;
    o[4 * k + 1] *= alpha0;
    o[4 * k + 2] *= alpha1;
    o[4 * k + 3] *= alpha1;
  }
}

// Whether a row of the warp has a new maximum (some α ≠ 1). Where none has, every α is 1 and rescaling an accumulator
// by it is the identity, skipped exactly: after the first tiles most maxima hold.
__device__ __forceinline__ bool warp_has_new_maximum(float alpha0, float alpha1) {
  return __any_sync(0xffffffffu, alpha0 != 1.f || alpha1 != 1.f);
}

// ---- host ----

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// The driver's tensor-map encoder through the runtime (no link against libcuda); null where the driver has none.
inline EncodeTiled tensor_map_encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return EncodeTiled(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// The device this process runs on is compute capability 9.0 (the sm_90a code runs there only).
inline bool device_is_sm90() {
  static const bool yes = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major == 9 && minor == 0;
  }();
  return yes;
}

}  // namespace h3::cuda::sm90
