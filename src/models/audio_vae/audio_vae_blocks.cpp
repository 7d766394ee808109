#include "models/audio_vae/audio_vae_blocks.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "backend/backend.h"
#include "util/error.h"

namespace h3 {

Tensor fold_weight_norm(const Tensor& g, const Tensor& v) {
  H3_CHECK(v.ndim() >= 2 && v.dim(0) > 0, "weight norm: v must have at least two axes, got ", v.str());
  const int64_t n = v.dim(0), per = v.numel() / n;
  H3_CHECK(g.numel() == n, "weight norm: g ", g.str(), " must hold one value per index of v's axis 0 (", n, ")");
  Tensor vf = v.to(DType::F32), gf = g.to(DType::F32);
  Tensor w = Tensor::empty(v.shape(), DType::F32);
  const float* V = vf.ptr<float>();
  float* W = w.ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < per; ++j) ss += double(V[i * per + j]) * V[i * per + j];
    const float norm = static_cast<float>(std::sqrt(ss));
    const float factor = gf.ptr<float>()[i] / norm;
    for (int64_t j = 0; j < per; ++j) W[i * per + j] = V[i * per + j] * factor;
  }
  return w;
}

namespace {

// Modified Bessel function of the first kind, order 0 (power series; converges fast for the β used here).
double bessel_i0(double x) {
  double sum = 1, term = 1;
  for (int k = 1; k < 200; ++k) {
    term *= (x / (2 * k)) * (x / (2 * k));
    sum += term;
    if (term < 1e-17 * sum) break;
  }
  return sum;
}

double sinc(double x) { return x == 0 ? 1.0 : std::sin(std::numbers::pi * x) / (std::numbers::pi * x); }

}  // namespace

std::vector<float> kaiser_sinc_filter(double cutoff, double half_width, int64_t taps) {
  H3_CHECK(taps >= 2, "kaiser_sinc_filter: needs at least 2 taps, got ", taps);
  const int64_t half = taps / 2;
  const double attenuation = 2.285 * (half - 1) * std::numbers::pi * (4 * half_width) + 7.95;
  double beta = 0;
  if (attenuation > 50.0)
    beta = 0.1102 * (attenuation - 8.7);
  else if (attenuation >= 21.0)
    beta = 0.5842 * std::pow(attenuation - 21, 0.4) + 0.07886 * (attenuation - 21.0);
  std::vector<double> h(taps);
  double sum = 0;
  for (int64_t n = 0; n < taps; ++n) {
    const double r = 2.0 * n / (taps - 1) - 1.0;  // symmetric Kaiser window
    const double window = bessel_i0(beta * std::sqrt(std::max(0.0, 1 - r * r))) / bessel_i0(beta);
    const double time = taps % 2 == 0 ? n - half + 0.5 : double(n - half);
    h[n] = 2 * cutoff * window * sinc(2 * cutoff * time);
    sum += h[n];
  }
  std::vector<float> out(taps);
  for (int64_t n = 0; n < taps; ++n) out[n] = static_cast<float>(h[n] / sum);
  return out;
}

std::vector<float> aa_activation_filter() {
  constexpr double ratio = kSnakeAaRatio;
  return kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, kAaFilterTaps);
}

AudioVaeTensorReader::AudioVaeTensorReader(Backend& be, const std::vector<TensorSpec>& manifest,
                                           const std::string& weights, std::string what)
    : be_(be), ck_(Checkpoint::open(weights)), what_(std::move(what)) {
  std::vector<std::string> missing;
  for (const TensorSpec& s : manifest) {
    expected_[s.name] = s.shape;
    if (!ck_.has(s.name)) {
      missing.push_back(s.name);
      continue;
    }
    const TensorInfo& info = ck_.info(s.name);
    H3_CHECK(info.shape == s.shape, ck_.location(), ": tensor '", s.name, "' has shape ", shape_str(info.shape),
             ", the config needs ", shape_str(s.shape));
    H3_CHECK(dtype_is_float(info.dtype), ck_.location(), ": tensor '", s.name, "' must be a float tensor, got ",
             dtype_name(info.dtype));
  }
  H3_CHECK(missing.empty(), ck_.location(), ": ", missing.size(), " ", what_, " tensor(s) missing, first '",
           missing.empty() ? "" : missing.front(), "'");
}

Tensor AudioVaeTensorReader::host(const std::string& name) {
  H3_CHECK(expected_.count(name), what_, " loader: '", name, "' is not a tensor of this config");
  return ck_.get(name).to(DType::F32);
}

}  // namespace h3
