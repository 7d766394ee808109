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

__global__ void conv3d_weight_slice_kernel(const float* w, float* out, int64_t Cout, int64_t Cin, int64_t kt,
                                           int64_t kh, int64_t kw, int64_t t, bool nhwc) {
  const int64_t taps = kh * kw, n = Cout * Cin * taps;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    // e indexes the output: [o, c, tap] (channels-first) or [o, tap, c] (channels-last).
    const int64_t o = e / (Cin * taps);
    const int64_t c = nhwc ? e % Cin : (e / taps) % Cin, tap = nhwc ? (e / Cin) % taps : e % taps;
    out[e] = w[((o * Cin + c) * kt + t) * taps + tap];
  }
}

constexpr int kTile = 32, kTileRows = 8;

// One block: 32 columns × 32 channels of one padded row; reads along the row, writes along the channels.
__global__ void pad2d_nhwc_kernel(const Pad3dParams p) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t i = blockIdx.z, j0 = int64_t(blockIdx.x) * kTile, c0 = int64_t(blockIdx.y) * kTile;
  const int64_t y = padded_source(i - p.top, p.H, p.mode);
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int64_t c = c0 + r, j = j0 + threadIdx.x;
    float v = 0.f;
    if (c < p.C && j < p.Wp) {
      const int64_t x = padded_source(j - p.left, p.W, p.mode);
      if (y >= 0 && x >= 0) v = p.x[(c * p.T * p.H + y) * p.W + x];  // frame 0 of channel c
    }
    tile[r][threadIdx.x] = v;
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int64_t j = j0 + r, c = c0 + threadIdx.x;
    if (j < p.Wp && c < p.C) p.xp[(i * p.Wp + j) * p.C + c] = tile[threadIdx.x][r];
  }
}

__global__ void nhwc_to_nchw_kernel(const float* x, const float* bias, float* y, int64_t P, int64_t C) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t p0 = int64_t(blockIdx.x) * kTile, c0 = int64_t(blockIdx.y) * kTile;
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int64_t q = p0 + r, c = c0 + threadIdx.x;
    tile[r][threadIdx.x] = q < P && c < C ? x[q * C + c] : 0.f;
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int64_t c = c0 + r, q = p0 + threadIdx.x;
    if (c < C && q < P) y[c * P + q] = bias ? __fadd_rn(tile[threadIdx.x][r], bias[c]) : tile[threadIdx.x][r];
  }
}

// The split group norm: each (group, frame) over `chunks` blocks (blockIdx.y), in three launches. Phase 0: the
// chunk's sum → sums; phase 1: the mean from the sums (every block adds them in chunk order: deterministic), the
// chunk's centred sum of squares → sqs; phase 2: mean and variance from both, the chunk normalized as the one-block
// kernel does.
__global__ void __launch_bounds__(kNormThreads) split_group_norm_kernel(const float* x, const float* weight,
                                                                        const float* bias, float* y, int64_t C,
                                                                        int64_t T, int64_t plane, int64_t groups,
                                                                        float eps, bool silu, int chunks, int phase,
                                                                        double* sums, double* sqs) {
  __shared__ double scratch[kNormThreads / 32];
  const int64_t gt = blockIdx.x, g = gt / T, t = gt % T, cg = C / groups, n = cg * plane;
  const int64_t per = (n + chunks - 1) / chunks, k0 = blockIdx.y * per, k1 = k0 + per < n ? k0 + per : n;
  auto at = [&](int64_t k) { return ((g * cg + k / plane) * T + t) * plane + k % plane; };
  double mean = 0, rstd = 0;
  if (phase >= 1) {
    double s = 0;
    for (int i = 0; i < chunks; ++i) s += sums[gt * chunks + i];
    mean = s / static_cast<double>(n);
  }
  if (phase == 2) {
    double q = 0;
    for (int i = 0; i < chunks; ++i) q += sqs[gt * chunks + i];
    rstd = 1.0 / sqrt(q / static_cast<double>(n) + static_cast<double>(eps));
  }
  if (phase == 0) {
    double sum = 0;
    for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) sum += x[at(k)];
    sum = block_sum_f64(sum, scratch);
    if (threadIdx.x == 0) sums[gt * chunks + blockIdx.y] = sum;
  } else if (phase == 1) {
    double sq = 0;
    for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
      const double d = x[at(k)] - mean;
      sq += d * d;
    }
    sq = block_sum_f64(sq, scratch);
    if (threadIdx.x == 0) sqs[gt * chunks + blockIdx.y] = sq;
  } else {
    for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
      const int64_t c = g * cg + k / plane, e = at(k);
      float v = static_cast<float>(
          __dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn(x[e], mean), rstd), weight[c]), static_cast<double>(bias[c])));
      if (silu) v = __fdiv_rn(v, __fadd_rn(1.f, expf(-v)));
      y[e] = v;
    }
  }
}

}  // namespace

int split_group_norm_chunks(int64_t C, int64_t T, int64_t plane, int64_t groups) {
  const int64_t n = C / groups * plane, blocks = groups * T;
  // About four blocks per SM of an H200 in all, each chunk at least 8192 samples.
  const int64_t want = (int64_t(132) * 4 + blocks - 1) / blocks, most = n / 8192;
  return static_cast<int>(std::clamp<int64_t>(std::min(want, most), 1, kSplitGroupNormMaxChunks));
}

void launch_split_group_norm(const float* x, const float* weight, const float* bias, float* y, int64_t C, int64_t T,
                             int64_t plane, int64_t groups, float eps, bool silu, int chunks, double* partials,
                             cudaStream_t s) {
  if (C * T * plane == 0) return;
  const dim3 grid(static_cast<unsigned>(groups * T), static_cast<unsigned>(chunks));
  double* sums = partials;
  double* sqs = partials + groups * T * chunks;
  for (int phase = 0; phase < 3; ++phase) {
    split_group_norm_kernel<<<grid, kNormThreads, 0, s>>>(x, weight, bias, y, C, T, plane, groups, eps, silu, chunks,
                                                         phase, sums, sqs);
    H3_CUDA_LAUNCH_CHECK(s, "frame_group_norm (split)");
  }
}

void launch_conv3d_weight_slice(const float* w, float* w_slice, int64_t Cout, int64_t Cin, int64_t kt, int64_t kh,
                                int64_t kw, int64_t t, bool nhwc, cudaStream_t s) {
  const int64_t n = Cout * Cin * kh * kw;
  if (n == 0) return;
  conv3d_weight_slice_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, w_slice, Cout, Cin, kt, kh, kw, t, nhwc);
  H3_CUDA_LAUNCH_CHECK(s, "conv3d weight slice");
}

void launch_pad2d_nhwc(const Pad3dParams& p, cudaStream_t s) {
  if (p.C * p.Hp * p.Wp == 0) return;
  const dim3 grid(static_cast<unsigned>((p.Wp + kTile - 1) / kTile), static_cast<unsigned>((p.C + kTile - 1) / kTile),
                  static_cast<unsigned>(p.Hp));
  pad2d_nhwc_kernel<<<grid, dim3(kTile, kTileRows), 0, s>>>(p);
  H3_CUDA_LAUNCH_CHECK(s, "conv3d channels-last padding");
}

void launch_nhwc_to_nchw(const float* x, const float* bias, float* y, int64_t P, int64_t C, cudaStream_t s) {
  if (P * C == 0) return;
  const dim3 grid(static_cast<unsigned>((P + kTile - 1) / kTile), static_cast<unsigned>((C + kTile - 1) / kTile));
  nhwc_to_nchw_kernel<<<grid, dim3(kTile, kTileRows), 0, s>>>(x, bias, y, P, C);
  H3_CUDA_LAUNCH_CHECK(s, "conv3d channels-last output");
}

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
