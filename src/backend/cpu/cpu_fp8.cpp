// Hand-written rather than a library's: the emulation is the bit-exact oracle of the CUDA conversions (PTX
// cvt.rn.satfinite.e4m3x2.f32), and no Debian package offers E4M3.
#include "backend/cpu/cpu_fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/dtype.h"
#include "util/error.h"

namespace h3::cpu {

uint8_t encode_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a > kE4M3Max) return sign | 0x7E;  // saturation (±inf included)
  // Below 2^-6 the grid is the subnormals' m·2^-9; code m (m = 8 is 2^-6, the first normal: code 0x08 as well).
  if (a < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): exponent e − 1, mantissa 2m − 1
  int exponent = e - 1;
  int mantissa = static_cast<int>(std::nearbyint((2.f * m - 1.f) * 8.f));  // ties to even (the default mode)
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  const int code = ((exponent + 7) << 3) | mantissa;
  return sign | static_cast<uint8_t>(std::min(code, 0x7E));  // 448 < a rounding up to 480 saturates as well
}

float decode_e4m3(uint8_t code) {
  const float sign = (code & 0x80) ? -1.f : 1.f;
  const int exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.f + static_cast<float>(mantissa) / 8.f, exponent - 7);
}

float fp8_group_scale(float amax) {
  const float s = amax / kE4M3Max;
  return s > 0.f ? s : 1.f;
}

int64_t fp8_weight_block_ld(int64_t in_features) { return (fp8_blocks(in_features) + 3) / 4 * 4; }

namespace {

float finite_magnitude(float v) { return std::isfinite(v) ? std::fabs(v) : 0.f; }

void check_matrix(const Tensor& t, const char* what) {
  H3_CHECK(t.device() == Device::CPU && dtype_is_float(t.dtype()) && t.ndim() == 2, "fp8 emulation: ", what, " ",
           t.str(), " must be a 2-D host float tensor");
}

}  // namespace

Fp8Weight quantize_weight_fp8(const Tensor& w_in, Fp8Scaling scaling) {
  check_matrix(w_in, "weight");
  const Tensor w = w_in.to_f32();
  const int64_t N = w.dim(0), K = w.dim(1);
  const float* v = w.ptr<float>();
  Fp8Weight q;
  q.scaling = scaling;
  q.data = Tensor::empty({N, K}, DType::U8);
  uint8_t* codes = q.data.ptr<uint8_t>();
  if (scaling == Fp8Scaling::Channel) {
    q.scale = Tensor::empty({N}, DType::F32);
    for (int64_t n = 0; n < N; ++n) {
      float amax = 0.f;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, finite_magnitude(v[n * K + k]));
      const float s = fp8_group_scale(amax);
      q.scale.ptr<float>()[n] = s;
      for (int64_t k = 0; k < K; ++k) codes[n * K + k] = encode_e4m3(v[n * K + k] / s);
    }
    return q;
  }
  const int64_t ld = fp8_weight_block_ld(K), nb = fp8_blocks(N), kb = fp8_blocks(K);
  q.scale = Tensor::empty({nb, ld}, DType::F32);
  std::fill_n(q.scale.ptr<float>(), nb * ld, 1.f);  // the padding columns
  for (int64_t bn = 0; bn < nb; ++bn)
    for (int64_t bk = 0; bk < kb; ++bk) {
      const int64_t n0 = bn * kFp8Block, n1 = std::min(N, n0 + kFp8Block);
      const int64_t k0 = bk * kFp8Block, k1 = std::min(K, k0 + kFp8Block);
      float amax = 0.f;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, finite_magnitude(v[n * K + k]));
      const float s = fp8_group_scale(amax);
      q.scale.ptr<float>()[bn * ld + bk] = s;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) codes[n * K + k] = encode_e4m3(v[n * K + k] / s);
    }
  return q;
}

Fp8Activation quantize_activation_fp8(const Tensor& x_in, Fp8Scaling scaling) {
  check_matrix(x_in, "activation");
  const Tensor x = x_in.to_f32();
  const int64_t M = x.dim(0), K = x.dim(1);
  const bool channel = scaling == Fp8Scaling::Channel;
  const int64_t group = channel ? std::max<int64_t>(K, 1) : kFp8Block;
  const int64_t groups = channel ? 1 : fp8_blocks(K);
  const int64_t padded = fp8_activation_rows(M, scaling);
  Fp8Activation q;
  q.rows = M;
  q.scaling = scaling;
  q.codes = Tensor::zeros({padded, K}, DType::U8);
  q.scale = Tensor::empty({fp8_activation_scale_count(M, K, scaling)}, DType::F32);
  std::fill_n(q.scale.ptr<float>(), q.scale.numel(), 1.f);  // the padding rows'
  const auto scale_at = [&](int64_t m, int64_t g) -> float& {
    return q.scale.ptr<float>()[channel ? m : fp8_block_scale_index(m, g, M, K)];
  };
  const float* v = x.ptr<float>();
  uint8_t* codes = q.codes.ptr<uint8_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k0 = g * group, k1 = std::min(K, k0 + group);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, finite_magnitude(v[m * K + k]));
      const float s = fp8_group_scale(amax);
      scale_at(m, g) = s;
      for (int64_t k = k0; k < k1; ++k) codes[m * K + k] = encode_e4m3(v[m * K + k] / s);
    }
  return q;
}

double fp8_weight_value(const Fp8Weight& w, int64_t r, int64_t c) {
  const int64_t K = w.data.dim(1);
  const double s = w.scaling == Fp8Scaling::Channel
                       ? w.scale.ptr<float>()[r]
                       : w.scale.ptr<float>()[(r / kFp8Block) * fp8_weight_block_ld(K) + c / kFp8Block];
  return static_cast<double>(decode_e4m3(w.data.ptr<uint8_t>()[r * K + c])) * s;
}

double fp8_activation_value(const Fp8Activation& x, int64_t r, int64_t c) {
  const int64_t K = x.codes.dim(1);
  const double s = x.scaling == Fp8Scaling::Channel
                       ? x.scale.ptr<float>()[r]
                       : x.scale.ptr<float>()[fp8_block_scale_index(r, c / kFp8Block, x.rows, K)];
  return static_cast<double>(decode_e4m3(x.codes.ptr<uint8_t>()[r * K + c])) * s;
}

void linear_fp8(const Fp8Activation& x, const Fp8Weight& w, const Tensor* bias, Tensor& y) {
  H3_CHECK(w.defined() && w.data.ndim() == 2 && x.defined() && x.codes.ndim() == 2 &&
               x.codes.dim(1) == w.data.dim(1) && x.scaling == w.scaling,
           "linear_fp8: input ", x.codes.str(), " does not match weight ", w.data.str(), " (or its scaling)");
  const int64_t M = x.rows, K = x.codes.dim(1), N = w.data.dim(0);
  H3_CHECK(y.ndim() == 2 && y.dim(0) == M && y.dim(1) == N && y.device() == Device::CPU && dtype_is_float(y.dtype()),
           "linear_fp8: output ", y.str(), " should be a host float [", M, ", ", N, "]");
  std::vector<double> xa(static_cast<size_t>(M * K)), wa(static_cast<size_t>(N * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) xa[m * K + k] = fp8_activation_value(x, m, k);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) wa[n * K + k] = fp8_weight_value(w, n, k);
  Tensor out = Tensor::empty({M, N}, DType::F32);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias ? bias->at(n) : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += xa[m * K + k] * wa[n * K + k];
      out.ptr<float>()[m * N + n] = static_cast<float>(acc);
    }
  const Tensor stored = y.dtype() == DType::F32 ? out : out.to(y.dtype());
  std::memcpy(y.data(), stored.data(), y.nbytes());
}

}  // namespace h3::cpu
