// The CPU backend's audio VAE encoder ops (definitions in backend/backend.h): Snake, the last-two-axes transpose, the
// elementwise product and the pre_block's pooled causal attention. Float32, written as the definitions read
// (softmax with its maximum subtracted and its sum in float64), threaded over rows.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace h3::cpu {

void snake(const Tensor& x, const Tensor& alpha, Tensor& y);
void transpose_last_two(const Tensor& x, Tensor& y);
void multiply(Tensor& x, const Tensor& y);
void pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, float scale, Tensor& y);

}  // namespace h3::cpu
