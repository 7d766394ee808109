// The audio VAE encoder's ops on the GPU, float32 throughout (the reference encodes in float32):
//
// - snake: elementwise, accurate sinf (the CPU backend's std::sin to an ulp or two); the convolution epilogue of
//   conv1d_snake (bias, shortcut, Snake in one pass) rounds through the same expressions.
// - transpose_last_two: 32 × 32 tiles through shared memory (coalesced reads and writes).
// - pooled_causal_attention, tiled (the default; see pooled_attention_tiled_kernel): a block per 16 query rows and
//   head through shared memory, then the head average and pooling per row. The twin
//   (H3_DISABLE_TILED_POOLED_ATTENTION=1): one block per query row, heads in turn. Keys are taken in chunks of one
//   score per thread: each warp forms its share of the chunk's dot products (lanes across the head dimension), the
//   block keeps the running maximum and sum of an online softmax and rescales its accumulator [head_dim] in shared
//   memory; the head outputs are summed, divided by the head count and pooled (2.2 ms for a 15 s stereo reference
//   on an H200: every query row reads all its keys and values from L2 alone).
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

// Snake of one value (a = alpha[c], inv = 1 / (a + 1e-9)): every Snake kernel here rounds through this one
// expression, so that the fused epilogue and the plain op give the same bits.
__device__ __forceinline__ float snake_value(float v, float a, float inv) {
  const float s = sinf(a * v);
  return v + inv * (s * s);
}

// Rows over blockIdx.y (grid-stride), samples over blockIdx.x: one alpha per row, no division per sample.
__global__ void snake_kernel(const float* x, const float* alpha, float* y, int64_t rows, int64_t C, int64_t T) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float a = alpha[r % C], inv = 1.f / (a + 1e-9f);
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < T; t += int64_t(gridDim.x) * blockDim.x)
      y[r * T + t] = snake_value(x[r * T + t], a, inv);
  }
}

// One element of the convolution epilogue (launch_bias_residual_snake): the bias (when given), then the shortcut
// (when given), in that order, as cudnnAddTensor and residual_add round them.
__device__ __forceinline__ float epilogue_value(float v, bool has_bias, float b, const float* res, int64_t i) {
  if (has_bias) v = v + b;
  if (res) v = v + res[i];
  return v;
}

// Rows over blockIdx.y, samples over blockIdx.x; kVec4: four samples per thread (T % 4 == 0, 16-byte aligned
// pointers).
template <bool kVec4>
__global__ void bias_residual_snake_kernel(float* y, const float* bias, const float* res, const float* alpha,
                                           float* act, bool store_y, int64_t rows, int64_t C, int64_t T) {
  const int64_t n = kVec4 ? T / 4 : T;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t c = r % C;
    const float a = alpha[c], inv = 1.f / (a + 1e-9f);
    const bool has_bias = bias != nullptr;
    const float b = has_bias ? bias[c] : 0.f;
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
      const int64_t i = r * n + t;
      if constexpr (kVec4) {
        float4 v = reinterpret_cast<const float4*>(y)[i];
        if (has_bias) {
          v.x = v.x + b;
          v.y = v.y + b;
          v.z = v.z + b;
          v.w = v.w + b;
        }
        if (res) {
          const float4 q = reinterpret_cast<const float4*>(res)[i];
          v.x = v.x + q.x;
          v.y = v.y + q.y;
          v.z = v.z + q.z;
          v.w = v.w + q.w;
        }
        if (store_y) reinterpret_cast<float4*>(y)[i] = v;
        reinterpret_cast<float4*>(act)[i] =
            make_float4(snake_value(v.x, a, inv), snake_value(v.y, a, inv), snake_value(v.z, a, inv),
                        snake_value(v.w, a, inv));
      } else {
        const float v = epilogue_value(y[i], has_bias, b, res, i);
        if (store_y) y[i] = v;
        act[i] = snake_value(v, a, inv);
      }
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

// Channels-last rows: element i of [rows, C] has channel i mod C; kVec4: four channels per thread (C % 4 == 0,
// 16-byte aligned pointers); alpha null: no Snake.
template <bool kVec4>
__global__ void bias_residual_snake_nlc_kernel(float* y, const float* bias, const float* res, const float* alpha,
                                               float* act, bool store_y, unsigned n, unsigned C) {
  const bool has_bias = bias != nullptr;
  const unsigned width = kVec4 ? C / 4 : C;  // vector groups per row
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const unsigned c = (i % width) * (kVec4 ? 4u : 1u);
    if constexpr (kVec4) {
      float4 v = reinterpret_cast<const float4*>(y)[i];
      if (has_bias) {
        const float4 b = *reinterpret_cast<const float4*>(bias + c);
        v.x = v.x + b.x;
        v.y = v.y + b.y;
        v.z = v.z + b.z;
        v.w = v.w + b.w;
      }
      if (res) {
        const float4 q = reinterpret_cast<const float4*>(res)[i];
        v.x = v.x + q.x;
        v.y = v.y + q.y;
        v.z = v.z + q.z;
        v.w = v.w + q.w;
      }
      if (store_y) reinterpret_cast<float4*>(y)[i] = v;
      if (alpha) {
        const float4 a = *reinterpret_cast<const float4*>(alpha + c);
        reinterpret_cast<float4*>(act)[i] =
            make_float4(snake_value(v.x, a.x, 1.f / (a.x + 1e-9f)), snake_value(v.y, a.y, 1.f / (a.y + 1e-9f)),
                        snake_value(v.z, a.z, 1.f / (a.z + 1e-9f)), snake_value(v.w, a.w, 1.f / (a.w + 1e-9f)));
      }
    } else {
      const float v = epilogue_value(y[i], has_bias, has_bias ? bias[c] : 0.f, res, i);
      if (store_y) y[i] = v;
      if (alpha) {
        const float a = alpha[c];
        act[i] = snake_value(v, a, 1.f / (a + 1e-9f));
      }
    }
  }
}

// The tiled form: one block per (query tile of kTq rows, head, sequence). Q's tile stays in shared memory; keys
// and values pass through it kTk rows at a time (rows padded to Dh + 1 floats: no bank conflicts between the rows
// a warp reads). Scores: thread (i, j) of 16 × 16 forms row i's dot products with keys j and j + 16 — a row's 16
// lanes share its online-softmax statistics by shuffles; values: thread d accumulates column d of all kTq rows.
// The head's output row o_h = acc / sum goes to heads_out [rows, heads, Dh]; head_mean_pool_kernel averages the
// heads (in order) and pools, as the row kernel does.
constexpr int kTq = 16, kTk = 32, kTiledThreads = 256;
static_assert(kTiledThreads == kTq * 16 && kTk == 32, "score layout: 16 lanes per query row, two keys each");
static_assert(kTiledAttentionMaxHeadDim <= kTiledThreads, "one value column per thread");

struct TiledAttnParams {
  const float* qkv;
  float* heads_out;
  int64_t T, W;  // rows per sequence, floats per qkv row
  int heads, Dh;
  float scale;
};

size_t tiled_attention_smem(int64_t Dh) {
  return static_cast<size_t>((kTq + kTk) * (Dh + 1) + kTq * kTk + kTq) * sizeof(float);
}

__global__ void __launch_bounds__(kTiledThreads) pooled_attention_tiled_kernel(TiledAttnParams p) {
  extern __shared__ float smem[];
  const int ld = p.Dh + 1;
  float* Qs = smem;               // [kTq][ld]
  float* KV = Qs + kTq * ld;      // [kTk][ld]: the keys, then the values, of a tile
  float* Ps = KV + kTk * ld;      // [kTq][kTk]: the tile's exponentials
  float* Fs = Ps + kTq * kTk;     // [kTq]: each row's rescaling of its accumulator for the tile (then 1 / sum)
  const int tid = threadIdx.x, si = tid / 16, sj = tid % 16;
  const int h = blockIdx.y;
  const int64_t q0 = int64_t(blockIdx.x) * kTq, base = int64_t(blockIdx.z) * p.T;
  const int nq = static_cast<int>(min(int64_t(kTq), p.T - q0));
  const int64_t D = int64_t(p.heads) * p.Dh, q_off = int64_t(h) * p.Dh, k_off = D + q_off, v_off = 2 * D + q_off;
  for (int idx = tid; idx < kTq * p.Dh; idx += kTiledThreads) {
    const int i = idx / p.Dh, d = idx - i * p.Dh;
    Qs[i * ld + d] = i < nq ? p.qkv[(base + q0 + i) * p.W + q_off + d] : 0.f;
  }
  float run_max = -INFINITY, run_sum = 0.f;  // row si's (the same in its 16 lanes)
  float acc[kTq];
#pragma unroll
  for (int i = 0; i < kTq; ++i) acc[i] = 0.f;
  const int64_t row = q0 + si, last_key = q0 + nq - 1;  // the tile's last query sees keys [0, last_key]
  for (int64_t k0 = 0; k0 <= last_key; k0 += kTk) {
    const int nk = static_cast<int>(min(int64_t(kTk), last_key + 1 - k0));
    __syncthreads();  // the previous tile's values are read (and Q's tile is written)
    for (int idx = tid; idx < kTk * p.Dh; idx += kTiledThreads) {
      const int j = idx / p.Dh, d = idx - j * p.Dh;
      KV[j * ld + d] = j < nk ? p.qkv[(base + k0 + j) * p.W + k_off + d] : 0.f;
    }
    __syncthreads();
    float s0 = 0.f, s1 = 0.f;
    const float *q = Qs + si * ld, *ka = KV + sj * ld, *kb = KV + (sj + 16) * ld;
    for (int d = 0; d < p.Dh; ++d) {
      const float qd = q[d];
      s0 = fmaf(qd, ka[d], s0);
      s1 = fmaf(qd, kb[d], s1);
    }
    const bool v0 = si < nq && sj < nk && k0 + sj <= row, v1 = si < nq && sj + 16 < nk && k0 + sj + 16 <= row;
    s0 = v0 ? p.scale * s0 : -INFINITY;
    s1 = v1 ? p.scale * s1 : -INFINITY;
    float tile_max = fmaxf(s0, s1);
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    const float new_max = fmaxf(run_max, tile_max);
    float e0 = 0.f, e1 = 0.f, factor = 1.f;
    if (new_max != -INFINITY) {  // uniform over the row's lanes; -inf only for the padding rows
      e0 = v0 ? expf(s0 - new_max) : 0.f;
      e1 = v1 ? expf(s1 - new_max) : 0.f;
      factor = expf(run_max - new_max);  // 0 for the row's first keys
    }
    float e_sum = e0 + e1;
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) e_sum += __shfl_xor_sync(0xffffffffu, e_sum, o);
    run_sum = run_sum * factor + e_sum;
    run_max = new_max;
    Ps[si * kTk + sj] = e0;
    Ps[si * kTk + sj + 16] = e1;
    if (sj == 0) Fs[si] = factor;
    __syncthreads();  // the keys are read; P and the factors are published
    for (int idx = tid; idx < kTk * p.Dh; idx += kTiledThreads) {
      const int j = idx / p.Dh, d = idx - j * p.Dh;
      KV[j * ld + d] = j < nk ? p.qkv[(base + k0 + j) * p.W + v_off + d] : 0.f;
    }
    __syncthreads();
    if (tid < p.Dh) {
#pragma unroll
      for (int i = 0; i < kTq; ++i) {
        float a = acc[i] * Fs[i];
        for (int j = 0; j < nk; ++j) a = fmaf(Ps[i * kTk + j], KV[j * ld + tid], a);
        acc[i] = a;
      }
    }
  }
  __syncthreads();  // every thread is done with the factors
  if (sj == 0) Fs[si] = 1.f / run_sum;
  __syncthreads();
  if (tid < p.Dh)
    for (int i = 0; i < nq; ++i) p.heads_out[((base + q0 + i) * p.heads + h) * p.Dh + tid] = acc[i] * Fs[i];
}

// y[row] = pooled mean of the heads' outputs: m[d] = (Σ_h o_h[d]) / heads (heads in order), then the adaptive
// average pooling Dh → P of the row kernel.
__global__ void head_mean_pool_kernel(const float* heads_out, float* y, int heads, int Dh, int P) {
  extern __shared__ float mean[];  // [Dh]
  const int64_t row = blockIdx.x;
  for (int d = threadIdx.x; d < Dh; d += blockDim.x) {
    float m = 0.f;
    for (int h = 0; h < heads; ++h) m += heads_out[(row * heads + h) * Dh + d];
    mean[d] = m / static_cast<float>(heads);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    const int a = i * Dh / P, b = ((i + 1) * Dh + P - 1) / P;
    float s = 0.f;
    for (int d = a; d < b; ++d) s += mean[d];
    y[row * P + i] = s / static_cast<float>(b - a);
  }
}

}  // namespace

void launch_bias_residual_snake(float* y, const float* bias, const float* residual, const float* alpha, float* act,
                                bool store_y, int64_t rows, int64_t C, int64_t T, cudaStream_t s) {
  if (rows * T == 0) return;
  auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const bool vec = T % 4 == 0 && aligned(y) && aligned(residual) && aligned(act);
  const int64_t n = vec ? T / 4 : T;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 1024)),
                  static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  if (vec)
    bias_residual_snake_kernel<true><<<grid, kThreads, 0, s>>>(y, bias, residual, alpha, act, store_y, rows, C, T);
  else
    bias_residual_snake_kernel<false><<<grid, kThreads, 0, s>>>(y, bias, residual, alpha, act, store_y, rows, C, T);
  H3_CUDA_LAUNCH_CHECK(s, "conv1d_snake epilogue");
}

void launch_bias_residual_snake_nlc(float* y, const float* bias, const float* residual, const float* alpha,
                                    float* act, bool store_y, int64_t rows, int64_t C, cudaStream_t s) {
  if (rows * C == 0) return;
  H3_CHECK(rows * C < (int64_t(1) << 31), "conv1d_snake epilogue on CUDA: ", rows, " x ", C,
           " elements are beyond the channels-last kernel's 32-bit indexing");
  auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const bool vec = C % 4 == 0 && aligned(y) && aligned(bias) && aligned(residual) && aligned(alpha) && aligned(act);
  const int64_t n = vec ? rows * C / 4 : rows * C;
  const unsigned blocks = blocks_for(n, kThreads);
  if (vec)
    bias_residual_snake_nlc_kernel<true><<<blocks, kThreads, 0, s>>>(y, bias, residual, alpha, act, store_y,
                                                                     static_cast<unsigned>(n), static_cast<unsigned>(C));
  else
    bias_residual_snake_nlc_kernel<false><<<blocks, kThreads, 0, s>>>(y, bias, residual, alpha, act, store_y,
                                                                      static_cast<unsigned>(n), static_cast<unsigned>(C));
  H3_CUDA_LAUNCH_CHECK(s, "conv1d_snake epilogue (channels-last)");
}

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
                                    int64_t head_dim, int64_t pooled, float scale, float* heads_out, cudaStream_t s) {
  const int64_t rows = batch * T;
  if (rows == 0) return;
  if (heads_out && head_dim <= kTiledAttentionMaxHeadDim) {
    H3_CHECK(batch < 65536 && heads < 65536 && (T + kTq - 1) / kTq < (int64_t(1) << 31) && pooled < (1 << 20),
             "pooled_causal_attention on CUDA: ", batch, " sequences of ", T, " rows, ", heads,
             " heads are beyond the tiled kernel's limits");
    const size_t smem = tiled_attention_smem(head_dim);
    static size_t opted_in = 48 * 1024;  // dynamic shared memory the kernel may use (raised once as needed)
    if (smem > opted_in) {
      H3_CUDA_CHECK(cudaFuncSetAttribute(pooled_attention_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)),
                    "pooled_causal_attention");
      opted_in = smem;
    }
    const TiledAttnParams p{qkv, heads_out, T, 3 * heads * head_dim, static_cast<int>(heads),
                            static_cast<int>(head_dim), scale};
    const dim3 grid(static_cast<unsigned>((T + kTq - 1) / kTq), static_cast<unsigned>(heads),
                    static_cast<unsigned>(batch));
    pooled_attention_tiled_kernel<<<grid, kTiledThreads, smem, s>>>(p);
    H3_CUDA_LAUNCH_CHECK(s, "pooled_causal_attention");
    head_mean_pool_kernel<<<static_cast<unsigned>(rows), kThreads, static_cast<size_t>(head_dim) * sizeof(float),
                            s>>>(heads_out, y, static_cast<int>(heads), static_cast<int>(head_dim),
                                 static_cast<int>(pooled));
    H3_CUDA_LAUNCH_CHECK(s, "pooled_causal_attention");
    return;
  }
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
