// Host-side launchers of the CUDA kernels of the audio VAE encoder's backend ops (definitions in backend/backend.h;
// kernels_audio_encoder.cu), float32 throughout. Plain pointers, so this header compiles with the host compiler too.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace h3::cuda {

// y = x + (1 / (alpha[c] + 1e-9)) · sin(alpha[c] · x)² on rows of T samples, channel of row r = r mod C; y may be x.
void launch_snake(const float* x, const float* alpha, float* y, int64_t rows, int64_t C, int64_t T, cudaStream_t s);
// The epilogue of a bias-free convolution (conv1d_snake): on rows of T samples, channel of row r = r mod C,
//   v = y + bias[c] (bias may be null: nothing added), then v = v + residual (residual may be null),
//   y = v when store_y, act = v + (1 / (alpha[c] + 1e-9)) · sin(alpha[c] · v)²  (launch_snake's expression).
// act may be y; any other buffer of y's size is written whole.
void launch_bias_residual_snake(float* y, const float* bias, const float* residual, const float* alpha, float* act,
                                bool store_y, int64_t rows, int64_t C, int64_t T, cudaStream_t s);
// The same on channels-last rows ([B·T, C]: channel of element i = i mod C), with alpha null: no Snake (act not
// written; the bias and shortcut only).
void launch_bias_residual_snake_nlc(float* y, const float* bias, const float* residual, const float* alpha,
                                    float* act, bool store_y, int64_t rows, int64_t C, cudaStream_t s);
// y [B, N, M] = x [B, M, N] with its last two axes swapped.
void launch_transpose_last_two(const float* x, float* y, int64_t B, int64_t M, int64_t N, cudaStream_t s);
// x[i] *= y[i].
void launch_multiply(float* x, const float* y, int64_t n, cudaStream_t s);
// The pooled causal attention of `batch` sequences of T rows: qkv [batch·T, 3·heads·head_dim] → y [batch·T, pooled].
// `heads_out` (tiled form): the per-head outputs [batch·T, heads, head_dim] of the tiled kernel, which runs when it
// is given and head_dim ≤ kTiledAttentionMaxHeadDim (16 queries × 32 keys per tile through shared memory, one block
// per query tile and head); null: the row-per-block kernel (the twin, H3_DISABLE_TILED_POOLED_ATTENTION=1).
constexpr int64_t kTiledAttentionMaxHeadDim = 256;
void launch_pooled_causal_attention(const float* qkv, float* y, int64_t batch, int64_t T, int64_t heads,
                                    int64_t head_dim, int64_t pooled, float scale, float* heads_out, cudaStream_t s);

}  // namespace h3::cuda
