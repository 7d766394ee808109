// The audio VAE's 1-D signal ops on the GPU, float32 throughout (the reference decodes in float32; no TF32):
//
// - conv1d / conv_transpose1d: register-blocked direct convolutions. A block computes 64 output channels × 64
//   output steps of one batch item (16×16 threads, 4×4 outputs each, strided so that shared-memory reads are
//   conflict-free); it walks the input channels in stages, each stage staging the weights [channels, taps, 64] and
//   the input window [channels, span] in shared memory. The transposed convolution runs in polyphase form: a block
//   owns one output phase r = (t + padding) mod stride, whose outputs are a stride-1 correlation of the input with
//   the taps r, r + stride, … — no wasted multiplications. Exact twins: one output per thread straight from the
//   definitions (H3_DISABLE_CUDA_CONV_TILED=1, and the fallback for kernels too large for shared memory).
// - snake_beta_aa: upsample, SnakeBeta and downsample fused; a block stages its tile's input in shared memory,
//   computes the doubled-rate signal there once and filters it down, so each activation is one read and one write.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_vae.h"

namespace h3::cuda {

namespace {

constexpr int kConvThreads = 256;  // 16 × 16
constexpr int kConvTile = 64;      // output channels and output steps per block
constexpr int kConvPerThread = 4;  // outputs per thread along each axis (kConvTile / 16)
constexpr int kConvPad = kConvTile + 1;  // shared weight row stride (conflict-free staging stores)
constexpr int64_t kConvSmemBudget = 40 * 1024;
constexpr int kConvMaxStageChannels = 32;
constexpr int kDirectThreads = 256;
constexpr int kSnakeTile = 256;  // outputs per block (one per thread)

unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, int64_t(132) * 64));
}

__device__ __forceinline__ int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// ---- conv1d ----

struct Conv1dTile {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  int64_t Cin, T, Cout, To;
  int k, stride, pad, dil;
  int cc;    // input channels per stage
  int span;  // input samples of a stage row: (kConvTile − 1)·stride + (k − 1)·dil + 1
};

__global__ void __launch_bounds__(kConvThreads) conv1d_tiled_kernel(Conv1dTile p) {
  extern __shared__ float smem[];
  float* ws = smem;                              // [cc·k][kConvPad]
  float* xs = smem + p.cc * p.k * kConvPad;      // [cc][span]
  const int64_t b = blockIdx.z, o0 = int64_t(blockIdx.y) * kConvTile, t0 = int64_t(blockIdx.x) * kConvTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const float* xb = p.x + b * p.Cin * p.T;
  const int64_t in0 = t0 * p.stride - p.pad;
  float acc[kConvPerThread][kConvPerThread] = {};
  for (int64_t c0 = 0; c0 < p.Cin; c0 += p.cc) {
    const int cn = static_cast<int>(p.Cin - c0 < p.cc ? p.Cin - c0 : int64_t(p.cc)), ck = cn * p.k;
    // Weights: thread e reads w[o0 + o][c0 + c][j] with (c, j) fastest (contiguous in memory).
    for (int e = threadIdx.x; e < kConvTile * ck; e += kConvThreads) {
      const int o = e / ck, cj = e % ck;
      ws[cj * kConvPad + o] = o0 + o < p.Cout ? p.w[((o0 + o) * p.Cin + c0) * p.k + cj] : 0.f;
    }
    for (int e = threadIdx.x; e < cn * p.span; e += kConvThreads) {
      const int c = e / p.span, m = e % p.span;
      const int64_t i = in0 + m;
      xs[e] = i >= 0 && i < p.T ? xb[(c0 + c) * p.T + i] : 0.f;
    }
    __syncthreads();
    for (int c = 0; c < cn; ++c) {
      const float* xr = xs + c * p.span + tx * p.stride;
      for (int j = 0; j < p.k; ++j) {
        const float* wr = ws + (c * p.k + j) * kConvPad + ty;
        float wv[kConvPerThread], xv[kConvPerThread];
#pragma unroll
        for (int a = 0; a < kConvPerThread; ++a) wv[a] = wr[16 * a];
#pragma unroll
        for (int r = 0; r < kConvPerThread; ++r) xv[r] = xr[16 * r * p.stride + j * p.dil];
#pragma unroll
        for (int a = 0; a < kConvPerThread; ++a)
#pragma unroll
          for (int r = 0; r < kConvPerThread; ++r) acc[a][r] = fmaf(wv[a], xv[r], acc[a][r]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int a = 0; a < kConvPerThread; ++a) {
    const int64_t o = o0 + ty + 16 * a;
    if (o >= p.Cout) continue;
    const float bo = p.bias ? p.bias[o] : 0.f;
#pragma unroll
    for (int r = 0; r < kConvPerThread; ++r) {
      const int64_t t = t0 + tx + 16 * r;
      if (t < p.To) p.y[(b * p.Cout + o) * p.To + t] = acc[a][r] + bo;
    }
  }
}

__global__ void conv1d_direct_kernel(const float* x, const float* w, const float* bias, float* y, int64_t B,
                                     int64_t Cin, int64_t T, int64_t Cout, int64_t To, int64_t k, int64_t stride,
                                     int64_t pad, int64_t dil) {
  const int64_t n = B * Cout * To;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e % To, o = (e / To) % Cout, b = e / (To * Cout);
    float acc = bias ? bias[o] : 0.f;
    for (int64_t c = 0; c < Cin; ++c)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = t * stride - pad + j * dil;
        if (i >= 0 && i < T) acc += w[(o * Cin + c) * k + j] * x[(b * Cin + c) * T + i];
      }
    y[e] = acc;
  }
}

// ---- conv_transpose1d (polyphase) ----

struct ConvT1dTile {
  const float* x;
  const float* w;  // [Cin, Cout, k]
  const float* bias;
  float* y;
  int64_t Cin, T, Cout, To;
  int k, stride, pad;
  int taps;  // most taps of any phase: ceil(k / stride)
  int cc;
  int span;  // kConvTile + taps − 1
};

// Phase r's outputs t = q·stride + r − pad for q in [first_q(r), last_q(r)].
__device__ __forceinline__ int64_t first_q(int64_t r, int64_t stride, int64_t pad) {
  return pad > r ? (pad - r + stride - 1) / stride : 0;
}

__global__ void __launch_bounds__(kConvThreads) conv_transpose1d_tiled_kernel(ConvT1dTile p) {
  extern __shared__ float smem[];
  float* ws = smem;                                // [cc·taps][kConvPad]
  float* xs = smem + p.cc * p.taps * kConvPad;     // [cc][span]
  const int64_t b = blockIdx.z / p.stride, r = blockIdx.z % p.stride;
  const int64_t o0 = int64_t(blockIdx.y) * kConvTile;
  const int64_t q_first = first_q(r, p.stride, p.pad);
  const int64_t q_last = floor_div(p.To - 1 + p.pad - r, p.stride);
  const int64_t q0 = q_first + int64_t(blockIdx.x) * kConvTile;
  if (q0 > q_last) return;  // the whole block: this phase has fewer outputs
  const int taps = r < p.k ? static_cast<int>((p.k - r + p.stride - 1) / p.stride) : 0;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const float* xb = p.x + b * p.Cin * p.T;
  // x[q − m] for m < taps: the stage window starts at q0 − (taps − 1).
  const int64_t in0 = q0 - (p.taps - 1);
  float acc[kConvPerThread][kConvPerThread] = {};
  for (int64_t c0 = 0; c0 < p.Cin && taps > 0; c0 += p.cc) {
    const int cn = static_cast<int>(p.Cin - c0 < p.cc ? p.Cin - c0 : int64_t(p.cc)), cm = cn * taps;
    for (int e = threadIdx.x; e < kConvTile * cm; e += kConvThreads) {
      const int o = e / cm, c = (e % cm) / taps, m = e % taps;
      ws[(c * taps + m) * kConvPad + o] =
          o0 + o < p.Cout ? p.w[((c0 + c) * p.Cout + o0 + o) * p.k + r + int64_t(m) * p.stride] : 0.f;
    }
    for (int e = threadIdx.x; e < cn * p.span; e += kConvThreads) {
      const int c = e / p.span, m = e % p.span;
      const int64_t i = in0 + m;
      xs[e] = i >= 0 && i < p.T ? xb[(c0 + c) * p.T + i] : 0.f;
    }
    __syncthreads();
    for (int c = 0; c < cn; ++c) {
      const float* xr = xs + c * p.span + tx + p.taps - 1;
      for (int m = 0; m < taps; ++m) {
        const float* wr = ws + (c * taps + m) * kConvPad + ty;
        float wv[kConvPerThread], xv[kConvPerThread];
#pragma unroll
        for (int a = 0; a < kConvPerThread; ++a) wv[a] = wr[16 * a];
#pragma unroll
        for (int u = 0; u < kConvPerThread; ++u) xv[u] = xr[16 * u - m];
#pragma unroll
        for (int a = 0; a < kConvPerThread; ++a)
#pragma unroll
          for (int u = 0; u < kConvPerThread; ++u) acc[a][u] = fmaf(wv[a], xv[u], acc[a][u]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int a = 0; a < kConvPerThread; ++a) {
    const int64_t o = o0 + ty + 16 * a;
    if (o >= p.Cout) continue;
    const float bo = p.bias ? p.bias[o] : 0.f;
#pragma unroll
    for (int u = 0; u < kConvPerThread; ++u) {
      const int64_t q = q0 + tx + 16 * u;
      if (q <= q_last) p.y[(b * p.Cout + o) * p.To + q * p.stride + r - p.pad] = acc[a][u] + bo;
    }
  }
}

__global__ void conv_transpose1d_direct_kernel(const float* x, const float* w, const float* bias, float* y, int64_t B,
                                               int64_t Cin, int64_t T, int64_t Cout, int64_t To, int64_t k,
                                               int64_t stride, int64_t pad) {
  const int64_t n = B * Cout * To;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e % To, o = (e / To) % Cout, b = e / (To * Cout);
    float acc = bias ? bias[o] : 0.f;
    for (int64_t c = 0; c < Cin; ++c)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t num = t + pad - j;  // = i·stride
        if (num < 0 || num % stride != 0 || num / stride >= T) continue;
        acc += x[(b * Cin + c) * T + num / stride] * w[(c * Cout + o) * k + j];
      }
    y[e] = acc;
  }
}

// ---- anti-aliased SnakeBeta ----

struct SnakeParams {
  const float* x;
  const float* log_alpha;
  const float* log_beta;
  const float* h;  // up filter
  const float* g;  // down filter
  float* y;
  int64_t C, T, tiles;
  int Ku, Kd, P, crop, dl;
};

__global__ void __launch_bounds__(kSnakeTile) snake_beta_aa_kernel(SnakeParams p) {
  extern __shared__ float smem[];
  constexpr int R = static_cast<int>(kSnakeRatio);
  const int64_t row = blockIdx.x / p.tiles, t0 = (blockIdx.x % p.tiles) * int64_t(kSnakeTile);
  const int64_t T = p.T, Tpad = T + 2 * p.P, n_max = R * T - 1;
  // Doubled-rate samples this tile's outputs read (replicate padding = clamping the index), and the padded input
  // samples those are made from.
  const int64_t n_lo = min(max(R * t0 - p.dl, int64_t(0)), n_max);
  const int64_t n_hi = min(max(R * min(t0 + kSnakeTile, T) - R + p.Kd - 1 - p.dl, int64_t(0)), n_max);
  const int nz = static_cast<int>(n_hi - n_lo + 1);
  const int64_t i_lo = floor_div(p.crop + n_lo - p.Ku + 1, R), i_hi = (p.crop + n_hi) / R;
  const int nx = static_cast<int>(i_hi - i_lo + 1);
  float* hs = smem;
  float* gs = hs + p.Ku;
  float* xs = gs + p.Kd;
  float* zs = xs + nx;
  const float* xr = p.x + row * T;
  for (int e = threadIdx.x; e < p.Ku; e += blockDim.x) hs[e] = p.h[e];
  for (int e = threadIdx.x; e < p.Kd; e += blockDim.x) gs[e] = p.g[e];
  for (int e = threadIdx.x; e < nx; e += blockDim.x) {
    const int64_t i = i_lo + e;  // index into the replicate-padded input x_pad[i] = x[clamp(i − P, 0, T − 1)]
    xs[e] = i >= 0 && i < Tpad ? xr[min(max(i - p.P, int64_t(0)), T - 1)] : 0.f;
  }
  __syncthreads();
  const int64_t c = row % p.C;
  const float alpha = expf(p.log_alpha[c]), inv_beta = 1.f / (expf(p.log_beta[c]) + 1e-9f);
  for (int e = threadIdx.x; e < nz; e += blockDim.x) {
    // u[n] = R · Σ_m x_pad[q − m] · h[ph + R·m], full output index o = crop + n = R·q + ph.
    const int64_t o = p.crop + n_lo + e, q = o / R;
    const int ph = static_cast<int>(o % R);
    float u = 0.f;
    for (int m = 0; ph + R * m < p.Ku; ++m) u += xs[q - m - i_lo] * hs[ph + R * m];
    u *= static_cast<float>(R);
    const float sn = sinf(alpha * u);
    zs[e] = u + inv_beta * (sn * sn);
  }
  __syncthreads();
  const int64_t t = t0 + threadIdx.x;
  if (t >= T) return;
  float acc = 0.f;
  for (int k = 0; k < p.Kd; ++k) {
    const int64_t n = min(max(R * t + k - p.dl, int64_t(0)), n_max);
    acc += zs[n - n_lo] * gs[k];
  }
  p.y[row * T + t] = acc;
}

__global__ void divide_kernel(float* x, int64_t n, float d) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = x[i] / d;
}

}  // namespace

void launch_conv1d(const float* x, const float* w, const float* bias, float* y, int64_t B, int64_t Cin, int64_t T,
                   int64_t Cout, int64_t To, int64_t k, int64_t stride, int64_t padding, int64_t dilation, bool tiled,
                   cudaStream_t s) {
  if (B * Cout * To == 0) return;
  const int64_t span = (kConvTile - 1) * stride + (k - 1) * dilation + 1;
  const int64_t per_channel = (k * kConvPad + span) * int64_t(sizeof(float));
  const int64_t cc = std::min<int64_t>({kConvSmemBudget / per_channel, kConvMaxStageChannels, Cin});
  const bool fits = cc >= 1 && span < (int64_t(1) << 20) && B < 65536 && (Cout + kConvTile - 1) / kConvTile < 65536;
  if (tiled && fits) {
    Conv1dTile p{x, w, bias, y, Cin, T, Cout, To, static_cast<int>(k), static_cast<int>(stride),
                 static_cast<int>(padding), static_cast<int>(dilation), static_cast<int>(cc), static_cast<int>(span)};
    const dim3 grid(static_cast<unsigned>((To + kConvTile - 1) / kConvTile),
                    static_cast<unsigned>((Cout + kConvTile - 1) / kConvTile), static_cast<unsigned>(B));
    conv1d_tiled_kernel<<<grid, kConvThreads, static_cast<size_t>(cc * per_channel), s>>>(p);
  } else {
    conv1d_direct_kernel<<<blocks_for(B * Cout * To, kDirectThreads), kDirectThreads, 0, s>>>(
        x, w, bias, y, B, Cin, T, Cout, To, k, stride, padding, dilation);
  }
  H3_CUDA_LAUNCH_CHECK(s, "conv1d");
}

void launch_conv_transpose1d(const float* x, const float* w, const float* bias, float* y, int64_t B, int64_t Cin,
                             int64_t T, int64_t Cout, int64_t To, int64_t k, int64_t stride, int64_t padding,
                             bool tiled, cudaStream_t s) {
  if (B * Cout * To == 0) return;
  const int64_t taps = (k + stride - 1) / stride, span = kConvTile + taps - 1;
  const int64_t per_channel = (taps * kConvPad + span) * int64_t(sizeof(float));
  const int64_t cc = std::min<int64_t>({kConvSmemBudget / per_channel, kConvMaxStageChannels, Cin});
  // Outputs per phase: at most ceil(To / stride) + 1.
  const int64_t q_tiles = ((To + stride - 1) / stride + 1 + kConvTile - 1) / kConvTile;
  const bool fits = cc >= 1 && B * stride < 65536 && (Cout + kConvTile - 1) / kConvTile < 65536;
  if (tiled && fits) {
    ConvT1dTile p{x, w, bias, y, Cin, T, Cout, To, static_cast<int>(k), static_cast<int>(stride),
                  static_cast<int>(padding), static_cast<int>(taps), static_cast<int>(cc), static_cast<int>(span)};
    const dim3 grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>((Cout + kConvTile - 1) / kConvTile),
                    static_cast<unsigned>(B * stride));
    conv_transpose1d_tiled_kernel<<<grid, kConvThreads, static_cast<size_t>(cc * per_channel), s>>>(p);
  } else {
    conv_transpose1d_direct_kernel<<<blocks_for(B * Cout * To, kDirectThreads), kDirectThreads, 0, s>>>(
        x, w, bias, y, B, Cin, T, Cout, To, k, stride, padding);
  }
  H3_CUDA_LAUNCH_CHECK(s, "conv_transpose1d");
}

void launch_snake_beta_aa(const float* x, const float* log_alpha, const float* log_beta, const float* up_filter,
                          int64_t up_taps, const float* down_filter, int64_t down_taps, float* y, int64_t rows,
                          int64_t C, int64_t T, cudaStream_t s) {
  if (rows * T == 0) return;
  H3_CHECK(up_taps <= kSnakeMaxTaps && down_taps <= kSnakeMaxTaps, "snake_beta_aa on CUDA: filters of ", up_taps,
           " and ", down_taps, " taps exceed ", kSnakeMaxTaps);
  constexpr int64_t R = kSnakeRatio;
  SnakeParams p{};
  p.x = x;
  p.log_alpha = log_alpha;
  p.log_beta = log_beta;
  p.h = up_filter;
  p.g = down_filter;
  p.y = y;
  p.C = C;
  p.T = T;
  p.tiles = (T + kSnakeTile - 1) / kSnakeTile;
  p.Ku = static_cast<int>(up_taps);
  p.Kd = static_cast<int>(down_taps);
  p.P = static_cast<int>(up_taps / R - 1);
  p.crop = static_cast<int>(p.P * R + (up_taps - R) / 2);
  p.dl = static_cast<int>(down_taps / 2 - (down_taps % 2 == 0 ? 1 : 0));
  H3_CHECK(rows * p.tiles < (int64_t(1) << 31), "snake_beta_aa on CUDA: ", rows, " rows of ", T, " are too many");
  // Shared memory: both filters, the input window and the doubled-rate window of one tile.
  const int64_t nz = R * kSnakeTile + down_taps, nxs = nz / R + up_taps / R + 4;
  const size_t smem = static_cast<size_t>(up_taps + down_taps + nxs + nz) * sizeof(float);
  snake_beta_aa_kernel<<<static_cast<unsigned>(rows * p.tiles), kSnakeTile, smem, s>>>(p);
  H3_CUDA_LAUNCH_CHECK(s, "snake_beta_aa");
}

void launch_divide(float* x, int64_t n, float divisor, cudaStream_t s) {
  if (n == 0) return;
  divide_kernel<<<blocks_for(n, kDirectThreads), kDirectThreads, 0, s>>>(x, n, divisor);
  H3_CUDA_LAUNCH_CHECK(s, "divide");
}

}  // namespace h3::cuda
