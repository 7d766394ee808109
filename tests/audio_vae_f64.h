// Float64 transcriptions of the audio VAE's 1-D ops, written straight from their definitions (spec/audio_vae.md §3,
// §5 and the reference module's code), for the op tests and the decoder's float64 reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/tensor.h"

namespace h3::f64 {

// A [B, C, T] signal in float64.
struct Signal {
  int64_t B = 0, C = 0, T = 0;
  std::vector<double> v;
  Signal(int64_t b, int64_t c, int64_t t) : B(b), C(c), T(t), v(b * c * t, 0.0) {}
  double& at(int64_t b, int64_t c, int64_t t) { return v[(b * C + c) * T + t]; }
  double at(int64_t b, int64_t c, int64_t t) const { return v[(b * C + c) * T + t]; }
};

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.at(i);
  return out;
}

inline Signal signal(const Tensor& t) {
  Signal s(t.dim(0), t.dim(1), t.dim(2));
  s.v = values(t);
  return s;
}

// y[b, o, t] = bias[o] + Σ_{c, j} w[o, c, j] · x[b, c, t·s − p + j·d]   (w [Cout, Cin, k]; x = 0 outside).
inline Signal conv1d(const Signal& x, const std::vector<double>& w, int64_t Cout, int64_t k, const double* bias,
                     int64_t s, int64_t p, int64_t d) {
  const int64_t To = (x.T + 2 * p - d * (k - 1) - 1) / s + 1;
  Signal y(x.B, Cout, To);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t o = 0; o < Cout; ++o)
      for (int64_t t = 0; t < To; ++t) {
        double acc = bias ? bias[o] : 0.0;
        for (int64_t c = 0; c < x.C; ++c)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t i = t * s - p + j * d;
            if (i >= 0 && i < x.T) acc += w[(o * x.C + c) * k + j] * x.at(b, c, i);
          }
        y.at(b, o, t) = acc;
      }
  return y;
}

// Scatter form of ConvTranspose1d: input sample i of channel c adds x·w[c, o, j] at output i·s − p + j.
inline Signal conv_transpose1d(const Signal& x, const std::vector<double>& w, int64_t Cout, int64_t k,
                               const double* bias, int64_t s, int64_t p) {
  const int64_t To = (x.T - 1) * s - 2 * p + k;
  Signal y(x.B, Cout, To);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t o = 0; o < Cout; ++o) {
      for (int64_t t = 0; t < To; ++t) y.at(b, o, t) = bias ? bias[o] : 0.0;
      for (int64_t c = 0; c < x.C; ++c)
        for (int64_t i = 0; i < x.T; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t t = i * s - p + j;
            if (t >= 0 && t < To) y.at(b, o, t) += x.at(b, c, i) * w[(c * Cout + o) * k + j];
          }
    }
  return y;
}

// The reference's Activation1d(SnakeBeta) at ratio 2, step by step: replicate pad K/2 − 1, full transposed FIR,
// ×2, crop; SnakeBeta; replicate pad (K/2 − even, K/2), strided FIR. Pads derived from the filter lengths.
inline Signal snake_beta_aa(const Signal& x, const std::vector<double>& log_alpha, const std::vector<double>& log_beta,
                            const std::vector<double>& up, const std::vector<double>& down) {
  const int64_t T = x.T, Ku = up.size(), Kd = down.size(), r = 2;
  const int64_t pad = Ku / r - 1, crop_l = pad * r + (Ku - r) / 2, crop_r = pad * r + (Ku - r + 1) / 2;
  const int64_t dl = Kd / 2 - (Kd % 2 == 0), dr = Kd / 2;
  Signal y(x.B, x.C, T);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c) {
      std::vector<double> xp;
      for (int64_t i = -pad; i < T + pad; ++i) xp.push_back(x.at(b, c, std::clamp<int64_t>(i, 0, T - 1)));
      std::vector<double> u((int64_t(xp.size()) - 1) * r + Ku, 0.0);
      for (size_t i = 0; i < xp.size(); ++i)
        for (int64_t j = 0; j < Ku; ++j) u[i * r + j] += xp[i] * up[j];
      std::vector<double> mid(u.begin() + crop_l, u.end() - crop_r);
      const double alpha = std::exp(log_alpha[c]), beta = std::exp(log_beta[c]);
      for (double& v : mid) {
        v *= r;
        v += std::pow(std::sin(alpha * v), 2) / (beta + 1e-9);
      }
      const int64_t n = mid.size();
      std::vector<double> zp;
      for (int64_t i = -dl; i < n + dr; ++i) zp.push_back(mid[std::clamp<int64_t>(i, 0, n - 1)]);
      for (int64_t t = 0; t < T; ++t) {
        double acc = 0;
        for (int64_t k = 0; k < Kd; ++k) acc += zp[r * t + k] * down[k];
        y.at(b, c, t) = acc;
      }
    }
  return y;
}

// w = g · v / ‖v‖₂ with the norm over every axis but 0 (one per index of axis 0).
inline std::vector<double> weight_norm(const std::vector<double>& g, const std::vector<double>& v) {
  const size_t n = g.size(), per = v.size() / n;
  std::vector<double> w(v.size());
  for (size_t i = 0; i < n; ++i) {
    double ss = 0;
    for (size_t j = 0; j < per; ++j) ss += v[i * per + j] * v[i * per + j];
    for (size_t j = 0; j < per; ++j) w[i * per + j] = g[i] * v[i * per + j] / std::sqrt(ss);
  }
  return w;
}

}  // namespace h3::f64
