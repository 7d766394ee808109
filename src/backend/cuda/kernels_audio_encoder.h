// Host-side launchers of the CUDA kernels of the audio VAE encoder's backend ops (definitions in backend/backend.h;
// kernels_audio_encoder.cu), float32 throughout. Plain pointers, so this header compiles with the host compiler too.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace h3::cuda {

// y = x + (1 / (alpha[c] + 1e-9)) · sin(alpha[c] · x)² on rows of T samples, channel of row r = r mod C; y may be x.
void launch_snake(const float* x, const float* alpha, float* y, int64_t rows, int64_t C, int64_t T, cudaStream_t s);
// y [B, N, M] = x [B, M, N] with its last two axes swapped.
void launch_transpose_last_two(const float* x, float* y, int64_t B, int64_t M, int64_t N, cudaStream_t s);
// x[i] *= y[i].
void launch_multiply(float* x, const float* y, int64_t n, cudaStream_t s);
// The pooled causal attention of `batch` sequences of T rows: qkv [batch·T, 3·heads·head_dim] → y [batch·T, pooled].
void launch_pooled_causal_attention(const float* qkv, float* y, int64_t batch, int64_t T, int64_t heads,
                                    int64_t head_dim, int64_t pooled, float scale, cudaStream_t s);

}  // namespace h3::cuda
