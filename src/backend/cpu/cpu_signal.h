// The CPU backend's 1-D signal ops (definitions in backend/backend.h): float32, threaded over batch × channel
// blocks × time tiles. The convolutions run as one register-blocked correlation kernel over shifted input rows (no
// im2col copy), with an AVX2+FMA micro-kernel where the machine has it (H3_DISABLE_CONV_AVX2=1: the portable one);
// H3_DISABLE_FAST_CONV=1 selects the direct loops that transcribe the definitions instead.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace h3::cpu {

void conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding, int64_t dilation,
            Tensor& y);
void conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                      Tensor& y);
void snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                   const Tensor& down_filter, Tensor& y);
void divide(Tensor& x, float divisor);

}  // namespace h3::cpu
