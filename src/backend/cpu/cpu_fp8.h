// FP8 E4M3 on the host: the emulation every FP8 kernel is checked against bit for bit, and the CPU backend's
// quantize_weight_fp8 / linear_fp8 (backend.h; the CPU runs them for tests only, the engine refuses --precision
// fp8 there).
//
// E4M3 ("fn": no infinities): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; largest finite 448 (0x7E),
// smallest normal 2^-6, subnormals m·2^-9 (m = 1..7), NaN 0x7F / 0xFF. encode_e4m3 rounds to nearest, ties to
// even, and saturates: every |x| > 448 (±inf included) becomes ±448; a NaN becomes 0x7F (the PTX
// cvt.rn.satfinite.e4m3x2.f32 instruction's rule).
//
// A group of values (a weight row, a 128×128 weight block, an activation row or 128 of its elements) shares one
// float32 scale s = amax / 448, amax the largest finite |x| of the group (s = 1 where that is not > 0: an all-zero
// group); each value is stored as encode_e4m3(x / s) (an IEEE float32 division) and stands for decode · s.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace h3::cpu {

constexpr float kE4M3Max = 448.f;

uint8_t encode_e4m3(float x);
float decode_e4m3(uint8_t code);
// The group scale of a group whose largest finite magnitude is amax.
float fp8_group_scale(float amax);

// The leading dimension of a block-scaled weight's scale rows (cuBLASLt's layout: ceil(K/128) rounded up to 4).
int64_t fp8_weight_block_ld(int64_t in_features);

// w [N, K] (any float dtype, host) → E4M3 codes [N, K] and scales (Fp8Weight's layout, backend.h).
Fp8Weight quantize_weight_fp8(const Tensor& w, Fp8Scaling scaling);
// Activations x [M, K] (host float) → their FP8 form in backend.h's Fp8Activation layout (Channel: one scale per
// row; Block: one per row and 128 columns, the rows split into a main part and a 4-row tail, padding rows zero
// codes and scale 1).
Fp8Activation quantize_activation_fp8(const Tensor& x, Fp8Scaling scaling);
// The value code (r, c) of a quantized weight / activation stands for.
double fp8_weight_value(const Fp8Weight& w, int64_t r, int64_t c);
double fp8_activation_value(const Fp8Activation& x, int64_t r, int64_t c);

// y [M, N] = dequant(x) · dequant(w)ᵀ (+ bias), summed in float64, rounded once to y's dtype: what cuBLASLt's
// scaled FP8 product computes, without its f32 accumulation order. x.scaling must be w.scaling.
void linear_fp8(const Fp8Activation& x, const Fp8Weight& w, const Tensor* bias, Tensor& y);

}  // namespace h3::cpu
