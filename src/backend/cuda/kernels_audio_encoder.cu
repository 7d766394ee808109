// The audio VAE encoder's ops on the GPU, float32 throughout (the reference encodes in float32):
//
// - snake: elementwise, accurate sinf (the CPU backend's std::sin to an ulp or two).
// - transpose_last_two: 32 × 32 tiles through shared memory (coalesced reads and writes).
// - pooled_causal_attention: one block per query row, heads in turn. Keys are taken in chunks of one score per
//   thread: each warp forms its share of the chunk's dot products (lanes across the head dimension, coalesced), the
//   block keeps the running maximum and sum of an online softmax and rescales its accumulator [head_dim] in shared
//   memory; the head outputs are summed, divided by the head count and pooled. T is at most 600 latents for a 15 s
//   reference, so this simple form is far from mattering next to the convolution trunk.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_audio_encoder.h"

namespace h3::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kAttnThreads = 128;  // keys per chunk: one score per thread
constexpr int kTile = 32;

unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, int64_t(132) * 64));
}

// Rows over blockIdx.y (grid-stride), samples over blockIdx.x: one alpha per row, no division per sample.
__global__ void snake_kernel(const float* x, const float* alpha, float* y, int64_t rows, int64_t C, int64_t T) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float a = alpha[r % C], inv = 1.f / (a + 1e-9f);
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < T; t += int64_t(gridDim.x) * blockDim.x) {
      const float v = x[r * T + t], s = sinf(a * v);
      y[r * T + t] = v + inv * (s * s);
    }
  }
}

__global__ void transpose_kernel(const float* x, float* y, int64_t M, int64_t N) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t b = blockIdx.z, n0 = int64_t(blockIdx.x) * kTile, m0 = int64_t(blockIdx.y) * kTile;
  const float* xb = x + b * M * N;
  float* yb = y + b * M * N;
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int64_t m = m0 + r, n = n0 + threadIdx.x;
    if (m < M && n < N) tile[r][threadIdx.x] = xb[m * N + n];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int64_t n = n0 + r, m = m0 + threadIdx.x;
    if (m < M && n < N) yb[n * M + m] = tile[threadIdx.x][r];
  }
}

__global__ void multiply_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= y[i];
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Maximum over the block; every thread gets it (scratch: 32 floats, reusable after the call).
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : -INFINITY;
  t = warp_max(t);
  __syncthreads();
  return t;
}

struct AttnParams {
  const float* qkv;
  float* y;
  int64_t T, W;  // rows per sequence, floats per qkv row (3·heads·Dh)
  int heads, Dh, P;
  float scale;
};

__global__ void __launch_bounds__(kAttnThreads) pooled_causal_attention_kernel(AttnParams p) {
  extern __shared__ float smem[];
  float* q = smem;              // [Dh]
  float* acc = q + p.Dh;        // [Dh] this head's unnormalized output
  float* mean = acc + p.Dh;     // [Dh] the sum of the head outputs, then their mean
  float* prob = mean + p.Dh;    // [kAttnThreads] the chunk's scores, then their exponentials
  float* scratch = prob + kAttnThreads;  // [32]
  const int64_t row = blockIdx.x, first = row / p.T * p.T;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = kAttnThreads / 32;
  const int64_t D = int64_t(p.heads) * p.Dh;
  for (int d = tid; d < p.Dh; d += kAttnThreads) mean[d] = 0.f;
  for (int h = 0; h < p.heads; ++h) {
    for (int d = tid; d < p.Dh; d += kAttnThreads) {
      q[d] = p.qkv[row * p.W + int64_t(h) * p.Dh + d];
      acc[d] = 0.f;
    }
    __syncthreads();
    float run_max = -INFINITY, run_sum = 0.f;
    for (int64_t j0 = first; j0 <= row; j0 += kAttnThreads) {
      const int n = static_cast<int>(min(int64_t(kAttnThreads), row - j0 + 1));
      for (int kk = warp; kk < n; kk += warps) {
        const float* k = p.qkv + (j0 + kk) * p.W + D + int64_t(h) * p.Dh;
        float part = 0.f;
        for (int d = lane; d < p.Dh; d += 32) part += q[d] * k[d];
        part = warp_sum(part);
        if (lane == 0) prob[kk] = p.scale * part;
      }
      __syncthreads();
      const float score = tid < n ? prob[tid] : -INFINITY;
      const float new_max = fmaxf(run_max, block_max(score, scratch));
      const float e = tid < n ? expf(score - new_max) : 0.f;
      prob[tid] = e;
      const float factor = expf(run_max - new_max);  // 0 for the first chunk
      run_sum = run_sum * factor + block_sum(e, scratch);  // block_sum's barriers publish prob
      for (int d = tid; d < p.Dh; d += kAttnThreads) {
        const float* v = p.qkv + j0 * p.W + 2 * D + int64_t(h) * p.Dh + d;
        float a = acc[d] * factor;
        for (int i = 0; i < n; ++i) a += prob[i] * v[int64_t(i) * p.W];
        acc[d] = a;
      }
      run_max = new_max;
      __syncthreads();
    }
    const float inv = 1.f / run_sum;
    for (int d = tid; d < p.Dh; d += kAttnThreads) mean[d] += acc[d] * inv;
    __syncthreads();
  }
  for (int d = tid; d < p.Dh; d += kAttnThreads) mean[d] /= static_cast<float>(p.heads);
  __syncthreads();
  // Adaptive average pooling Dh → P: bin i averages [⌊i·Dh/P⌋, ⌈(i+1)·Dh/P⌉) (backend.h's adaptive_pool_begin/end).
  for (int i = tid; i < p.P; i += kAttnThreads) {
    const int a = i * p.Dh / p.P, b = ((i + 1) * p.Dh + p.P - 1) / p.P;
    float s = 0.f;
    for (int d = a; d < b; ++d) s += mean[d];
    p.y[row * p.P + i] = s / static_cast<float>(b - a);
  }
}

}  // namespace

void launch_snake(const float* x, const float* alpha, float* y, int64_t rows, int64_t C, int64_t T, cudaStream_t s) {
  if (rows * T == 0) return;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((T + kThreads - 1) / kThreads, 1024)),
                  static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  snake_kernel<<<grid, kThreads, 0, s>>>(x, alpha, y, rows, C, T);
  H3_CUDA_LAUNCH_CHECK(s, "snake");
}

void launch_transpose_last_two(const float* x, float* y, int64_t B, int64_t M, int64_t N, cudaStream_t s) {
  if (B * M * N == 0) return;
  H3_CHECK(B < 65536 && (M + kTile - 1) / kTile < 65536, "transpose_last_two on CUDA: [", B, ", ", M, ", ", N,
           "] is too large");
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile), static_cast<unsigned>((M + kTile - 1) / kTile),
                  static_cast<unsigned>(B));
  transpose_kernel<<<grid, dim3(kTile, 8), 0, s>>>(x, y, M, N);
  H3_CUDA_LAUNCH_CHECK(s, "transpose_last_two");
}

void launch_multiply(float* x, const float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  multiply_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(x, y, n);
  H3_CUDA_LAUNCH_CHECK(s, "multiply");
}

void launch_pooled_causal_attention(const float* qkv, float* y, int64_t batch, int64_t T, int64_t heads,
                                    int64_t head_dim, int64_t pooled, float scale, cudaStream_t s) {
  const int64_t rows = batch * T;
  if (rows == 0) return;
  const size_t smem = static_cast<size_t>(3 * head_dim + kAttnThreads + 32) * sizeof(float);
  H3_CHECK(rows < (int64_t(1) << 31) && smem <= 48 * 1024 && heads < (1 << 20) && pooled < (1 << 20),
           "pooled_causal_attention on CUDA: ", rows, " rows of ", heads, " heads x ", head_dim,
           " are beyond the kernel's limits");
  const AttnParams p{qkv, y, T, 3 * heads * head_dim, static_cast<int>(heads), static_cast<int>(head_dim),
                     static_cast<int>(pooled), scale};
  pooled_causal_attention_kernel<<<static_cast<unsigned>(rows), kAttnThreads, smem, s>>>(p);
  H3_CUDA_LAUNCH_CHECK(s, "pooled_causal_attention");
}

}  // namespace h3::cuda
