#include "models/dit/dit_embed.h"

#include <cmath>

#include "util/error.h"

namespace h3 {

namespace {
constexpr int kAxes = 3;                 // t, h, w
constexpr double kTimestepMaxPeriod = 10000.0;
}  // namespace

std::vector<float> dit_rope_inv_freq(const DitConfig& c) {
  // Reference: 1.0 / (theta ** (arange(0, 2F, 2, f32) / (2F))), every step in f32.
  const int64_t F = c.rope_freq_dim;
  const float theta = static_cast<float>(c.rope_theta);
  std::vector<float> inv(F);
  for (int64_t k = 0; k < F; ++k) {
    const float exponent = static_cast<float>(2 * k) / static_cast<float>(2 * F);
    inv[k] = 1.0f / std::pow(theta, exponent);
  }
  return inv;
}

void dit_rope_tables(const DitConfig& c, const Tensor& position_ids, Tensor& cos, Tensor& sin) {
  H3_CHECK(position_ids.ndim() == 2 && position_ids.dim(1) == kAxes, "position_ids must be [L, 3], got ",
           position_ids.str());
  const int64_t L = position_ids.dim(0), F = c.rope_freq_dim, rot = c.rotary_dim(), half = kAxes * F;
  const std::vector<float> inv = dit_rope_inv_freq(c);
  cos = Tensor::empty({L, rot}, DType::F32);
  sin = Tensor::empty({L, rot}, DType::F32);
  float* C = cos.ptr<float>();
  float* S = sin.ptr<float>();
  for (int64_t r = 0; r < L; ++r)
    for (int64_t a = 0; a < kAxes; ++a) {
      const float pos = static_cast<float>(position_ids.at(r * kAxes + a));
      for (int64_t k = 0; k < F; ++k) {
        const float angle = pos * inv[k];
        const int64_t j = a * F + k;
        C[r * rot + j] = C[r * rot + j + half] = std::cos(angle);
        S[r * rot + j] = S[r * rot + j + half] = std::sin(angle);
      }
    }
}

Tensor dit_timestep_sinusoid(const DitConfig& c, const std::vector<float>& timesteps) {
  const int64_t T = static_cast<int64_t>(timesteps.size()), half = c.freq_dim / 2;
  // Reference (get_timestep_embedding): exponent = −ln(max_period) · arange(half) in f32, divided by half, exp'd.
  const float neg_log_period = static_cast<float>(-std::log(kTimestepMaxPeriod));
  std::vector<float> freq(half);
  for (int64_t k = 0; k < half; ++k) freq[k] = std::exp(neg_log_period * static_cast<float>(k) / static_cast<float>(half));
  Tensor emb = Tensor::empty({T, c.freq_dim}, DType::F32);
  float* E = emb.ptr<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < half; ++k) {
      const float arg = timesteps[t] * freq[k];
      E[t * c.freq_dim + k] = std::cos(arg);  // flip_sin_to_cos: the cosine half first
      E[t * c.freq_dim + half + k] = std::sin(arg);
    }
  return emb;
}

}  // namespace h3
