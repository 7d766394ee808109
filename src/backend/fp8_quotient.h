// x / s for the FP8 quantizations, correctly rounded as cpu_fp8.h's IEEE float32 division rounds it, from one
// reciprocal per scale group instead of one division per value (shared by the host test and the CUDA kernels).
//
// Why: a division on the GPU is a reciprocal on the special-function unit plus a Newton step and a range check per
// value; the quantizing producers (SwiGLU, modulate, attention's operands) divide every value they store by their
// group's scale. Markstein's theorem (Markstein 1990; Muller et al., Handbook of Floating-Point Arithmetic, §4.9):
// with y = RN(1/s) and q = RN(x·y) within one ulp of x/s, the remainder r = x − q·s is exact by one fused
// multiply-add and RN(q + r·y) is RN(x/s), as long as nothing overflows or underflows. Here x lies in its group
// (|x| ≤ amax = 448·s, so x·y stays near 448 or below), s within [2^-100, 2^100] (else the plain division serves:
// y stays normal), and where the remainder or the quotient can fall below float32's normal range (|x| < 2^-100,
// or x/s subnormal) x/s < 2^-10 rounds to E4M3's ±0 either way: only its sign matters, which is x's (copysign: an
// exact zero sum would be +0 for x = −0).
// ±inf and NaN pass through as x / s gives them.
// tests/test_fp8.cpp (Fp8Quotient.*) checks it against the division for every bf16 x over bf16 amaxes and for
// random float32 x.
#pragma once
#include <cfloat>
#include <cmath>

#if defined(__CUDACC__)
#define H3_FP8_HD __host__ __device__
#else
#define H3_FP8_HD
#endif

namespace h3 {

struct Fp8Divisor {
  float s = 1.f, y = 1.f;
  bool by_reciprocal = true;
};

H3_FP8_HD inline Fp8Divisor fp8_divisor(float s) {
  Fp8Divisor d;
  d.s = s;
  d.by_reciprocal = s >= 0x1p-100f && s <= 0x1p100f;
  d.y = d.by_reciprocal ? 1.f / s : 1.f;  // IEEE division on both sides (nvcc without fast math)
  return d;
}

// The reciprocal path alone (d.by_reciprocal), for callers that test it once for many values.
H3_FP8_HD inline float fp8_quotient_by_reciprocal(float x, const Fp8Divisor& d) {
#if defined(__CUDA_ARCH__)
  const float q = __fmul_rn(x, d.y);  // rounded: not contracted into the fma below
#else
  const float q = x * d.y;
#endif
  const float r = fmaf(-q, d.s, x);
  const float corrected = fmaf(r, d.y, q);
  return fabsf(x) <= FLT_MAX ? copysignf(corrected, x) : x;
}

H3_FP8_HD inline float fp8_quotient(float x, const Fp8Divisor& d) {
  return d.by_reciprocal ? fp8_quotient_by_reciprocal(x, d) : x / d.s;
}

}  // namespace h3

#undef H3_FP8_HD
