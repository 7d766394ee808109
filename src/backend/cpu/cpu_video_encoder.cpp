#include "backend/cpu/cpu_video_encoder.h"

#include <cmath>
#include <vector>

#include "util/error.h"
#include "util/thread_pool.h"

namespace h3::cpu {

namespace {

const float* host_f32(const Tensor& t, const char* op) {
  H3_CHECK(t.device() == Device::CPU, "cpu backend: ", op, " got a tensor that is not on the CPU");
  return t.ptr<float>();
}

// The source index of padded position p (p in [−before, n + after)) along an axis of n samples; −1 stands for a zero.
int64_t padded_source(int64_t p, int64_t n, PadMode mode) {
  if (p >= 0 && p < n) return p;
  switch (mode) {
    case PadMode::Zeros: return -1;
    case PadMode::Reflect: return p < 0 ? -p : 2 * (n - 1) - p;
    case PadMode::Replicate: return p < 0 ? 0 : n - 1;
  }
  return -1;
}

// xp of conv3d's definition: [C, pad_front + T, H + pad_top + pad_bottom, W + pad_left + pad_right].
std::vector<float> padded_input(const Tensor& x, const Conv3dGeometry& g) {
  const int64_t C = x.dim(0), T = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t Tp = T + g.pad_front, Hp = H + g.pad_top + g.pad_bottom, Wp = W + g.pad_left + g.pad_right;
  std::vector<int64_t> rows(Hp), cols(Wp);
  for (int64_t i = 0; i < Hp; ++i) rows[i] = padded_source(i - g.pad_top, H, g.spatial_mode);
  for (int64_t j = 0; j < Wp; ++j) cols[j] = padded_source(j - g.pad_left, W, g.spatial_mode);
  const float* src = host_f32(x, "conv3d");
  std::vector<float> xp(static_cast<size_t>(C * Tp * Hp * Wp), 0.f);
  parallel_for(0, C * T, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t ct = p0; ct < p1; ++ct) {
      const int64_t c = ct / T, t = ct % T;
      const float* plane = src + ct * H * W;
      float* dst = xp.data() + (c * Tp + g.pad_front + t) * Hp * Wp;
      for (int64_t i = 0; i < Hp; ++i)
        for (int64_t j = 0; j < Wp; ++j)
          dst[i * Wp + j] = rows[i] < 0 || cols[j] < 0 ? 0.f : plane[rows[i] * W + cols[j]];
    }
  });
  return xp;
}

}  // namespace

void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, Tensor& y) {
  check_conv3d(x, w, bias, g, y);
  const int64_t Cin = x.dim(0), Cout = w.dim(0), kt = w.dim(2), kh = w.dim(3), kw = w.dim(4);
  const int64_t Tp = x.dim(1) + g.pad_front, Hp = x.dim(2) + g.pad_top + g.pad_bottom;
  const int64_t Wp = x.dim(3) + g.pad_left + g.pad_right;
  const int64_t To = y.dim(1), Ho = y.dim(2), Wo = y.dim(3);
  const std::vector<float> xp = padded_input(x, g);
  const float* W = host_f32(w, "conv3d");
  const float* B = bias ? host_f32(*bias, "conv3d") : nullptr;
  float* Y = const_cast<float*>(host_f32(y, "conv3d"));
  parallel_for(0, Cout * To, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t ot = p0; ot < p1; ++ot) {
      const int64_t o = ot / To, t = ot % To;
      float* out = Y + ot * Ho * Wo;
      for (int64_t k = 0; k < Ho * Wo; ++k) out[k] = B ? B[o] : 0.f;
      for (int64_t c = 0; c < Cin; ++c)
        for (int64_t a = 0; a < kt; ++a)
          for (int64_t b = 0; b < kh; ++b)
            for (int64_t d = 0; d < kw; ++d) {
              const float wv = W[(((o * Cin + c) * kt + a) * kh + b) * kw + d];
              const float* frame = xp.data() + (c * Tp + t * g.stride_t + a) * Hp * Wp;
              for (int64_t i = 0; i < Ho; ++i) {
                const float* row = frame + (i * g.stride_h + b) * Wp + d;
                float* dst = out + i * Wo;
                for (int64_t j = 0; j < Wo; ++j) dst[j] += wv * row[j * g.stride_w];
              }
            }
    }
  });
}

void frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, float eps, bool silu,
                      Tensor& y) {
  check_frame_group_norm(x, weight, bias, groups, y);
  const int64_t C = x.dim(0), T = x.dim(1), plane = x.dim(2) * x.dim(3), cg = C / groups;
  const float* X = host_f32(x, "frame_group_norm");
  const float* Wt = host_f32(weight, "frame_group_norm");
  const float* Bs = host_f32(bias, "frame_group_norm");
  float* Y = const_cast<float*>(host_f32(y, "frame_group_norm"));
  parallel_for(0, groups * T, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t gt = p0; gt < p1; ++gt) {
      const int64_t grp = gt / T, t = gt % T;
      auto plane_of = [&](int64_t c) { return (c * T + t) * plane; };  // channel c's samples of frame t
      double sum = 0;
      for (int64_t c = grp * cg; c < (grp + 1) * cg; ++c)
        for (int64_t k = 0; k < plane; ++k) sum += X[plane_of(c) + k];
      const double n = static_cast<double>(cg * plane), mean = sum / n;
      double sq = 0;
      for (int64_t c = grp * cg; c < (grp + 1) * cg; ++c)
        for (int64_t k = 0; k < plane; ++k) {
          const double d = X[plane_of(c) + k] - mean;
          sq += d * d;
        }
      const double rstd = 1.0 / std::sqrt(sq / n + eps);
      for (int64_t c = grp * cg; c < (grp + 1) * cg; ++c)
        for (int64_t k = 0; k < plane; ++k) {
          float v = static_cast<float>((X[plane_of(c) + k] - mean) * rstd * Wt[c] + Bs[c]);
          if (silu) v = v / (1.f + std::exp(-v));
          Y[plane_of(c) + k] = v;
        }
    }
  });
}

}  // namespace h3::cpu
