// The video VAE encoder's ops on the GPU, float32 throughout:
//
// - pad3d: conv3d's padded input (reflect / replicate / zero spatial padding, causal zero frames), one thread per
//   padded sample; cuDNN's convolution pads with zeros only, so the backend convolves this copy without padding.
// - conv3d: the unpadded strided correlation, one output per thread — the exact twin of cuDNN's TF32 convolution
//   (H3_DISABLE_TF32_CONV=1) and its fallback where cuDNN has no algorithm; a block's threads share one output
//   channel (the fastest-varying index is the output column), so weight reads are broadcasts.
// - frame_group_norm: one block per (group, frame): the mean, then the centred sum of squares (two passes), then the
//   normalized, affine samples — all in float64 as on the CPU (round-to-nearest intrinsics in its order), rounded
//   once to float32 — and the SiLU in float32.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_vae.h"

namespace h3::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kNormThreads = 512;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t(132) * 64));
}

// The source index of padded position p (p in [−before, n + after)) of an axis of n samples; −1: a zero.
__device__ __forceinline__ int64_t padded_source(int64_t p, int64_t n, Pad3dMode mode) {
  if (p >= 0 && p < n) return p;
  if (mode == Pad3dMode::Zeros) return -1;
  if (mode == Pad3dMode::Replicate) return p < 0 ? 0 : n - 1;
  return p < 0 ? -p : 2 * (n - 1) - p;
}

__global__ void pad3d_kernel(const Pad3dParams p) {
  const int64_t plane = p.Hp * p.Wp, n = p.C * p.Tp * plane;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % p.Wp, i = (e / p.Wp) % p.Hp, t = (e / plane) % p.Tp - p.front, c = e / (plane * p.Tp);
    const int64_t y = padded_source(i - p.top, p.H, p.mode), x = padded_source(j - p.left, p.W, p.mode);
    p.xp[e] = t < 0 || y < 0 || x < 0 ? 0.f : p.x[((c * p.T + t) * p.H + y) * p.W + x];
  }
}

__global__ void conv3d_kernel(const Conv3dParams p) {
  const int64_t n = p.Cout * p.To * p.Ho * p.Wo;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % p.Wo, i = (e / p.Wo) % p.Ho, t = (e / (p.Wo * p.Ho)) % p.To, o = e / (p.Wo * p.Ho * p.To);
    float acc = p.bias ? p.bias[o] : 0.f;
    const float* wo = p.w + o * p.Cin * p.kt * p.kh * p.kw;
    for (int64_t c = 0; c < p.Cin; ++c)
      for (int64_t a = 0; a < p.kt; ++a)
        for (int64_t b = 0; b < p.kh; ++b) {
          const float* row = p.xp + ((c * p.Tp + t * p.st + a) * p.Hp + i * p.sh + b) * p.Wp + j * p.sw;
          const float* wr = wo + ((c * p.kt + a) * p.kh + b) * p.kw;
          for (int64_t d = 0; d < p.kw; ++d) acc = fmaf(wr[d], row[d], acc);
        }
    p.y[e] = acc;
  }
}

__device__ __forceinline__ double block_sum_f64(double v, double* scratch) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? scratch[threadIdx.x] : 0.0;
  if (warp == 0)
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  v = scratch[0];
  __syncthreads();  // scratch is reused by the next sum
  return v;
}

__global__ void __launch_bounds__(kNormThreads) frame_group_norm_kernel(const float* x, const float* weight,
                                                                        const float* bias, float* y, int64_t C,
                                                                        int64_t T, int64_t plane, int64_t groups,
                                                                        float eps, bool silu) {
  __shared__ double scratch[kNormThreads / 32];
  const int64_t g = blockIdx.x / T, t = blockIdx.x % T, cg = C / groups, n = cg * plane;
  // Sample k of the group: channel g·cg + k / plane, position k mod plane of frame t.
  auto at = [&](int64_t k) { return ((g * cg + k / plane) * T + t) * plane + k % plane; };
  double sum = 0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sum += x[at(k)];
  const double mean = block_sum_f64(sum, scratch) / static_cast<double>(n);
  double sq = 0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const double d = x[at(k)] - mean;
    sq += d * d;
  }
  const double var = block_sum_f64(sq, scratch) / static_cast<double>(n);
  const double rstd = 1.0 / sqrt(var + static_cast<double>(eps));
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const int64_t c = g * cg + k / plane, e = at(k);
    float v = static_cast<float>(
        __dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn(x[e], mean), rstd), weight[c]), static_cast<double>(bias[c])));
    if (silu) v = __fdiv_rn(v, __fadd_rn(1.f, expf(-v)));
    y[e] = v;
  }
}

}  // namespace

void launch_pad3d(const Pad3dParams& p, cudaStream_t s) {
  const int64_t n = p.C * p.Tp * p.Hp * p.Wp;
  if (n == 0) return;
  pad3d_kernel<<<blocks_for(n), kThreads, 0, s>>>(p);
  H3_CUDA_LAUNCH_CHECK(s, "conv3d padding");
}

void launch_conv3d(const Conv3dParams& p, cudaStream_t s) {
  const int64_t n = p.Cout * p.To * p.Ho * p.Wo;
  if (n == 0) return;
  conv3d_kernel<<<blocks_for(n), kThreads, 0, s>>>(p);
  H3_CUDA_LAUNCH_CHECK(s, "conv3d");
}

void launch_frame_group_norm(const float* x, const float* weight, const float* bias, float* y, int64_t C, int64_t T,
                             int64_t plane, int64_t groups, float eps, bool silu, cudaStream_t s) {
  if (C * T * plane == 0) return;
  frame_group_norm_kernel<<<static_cast<unsigned>(groups * T), kNormThreads, 0, s>>>(x, weight, bias, y, C, T, plane,
                                                                                     groups, eps, silu);
  H3_CUDA_LAUNCH_CHECK(s, "frame_group_norm");
}

}  // namespace h3::cuda
