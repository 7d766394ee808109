#include "backend/cpu/cpu_audio_encoder.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include "backend/backend.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace h3::cpu {

namespace {

void require_cpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    H3_CHECK(t->device() == Device::CPU, "cpu backend: ", op, " got a tensor that is not on the CPU: ", t->str());
}

const float* f32p(const Tensor& t) { return static_cast<const float*>(t.data()); }

}  // namespace

void snake(const Tensor& x, const Tensor& alpha, Tensor& y) {
  check_snake(x, alpha, y);
  require_cpu("snake", {&x, &alpha, &y});
  const int64_t C = x.dim(1), T = x.dim(2), rows = x.dim(0) * C;
  const float *X = f32p(x), *A = f32p(alpha);
  float* Y = static_cast<float*>(y.data());
  parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(T, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float a = A[r % C], inv = 1.f / (a + 1e-9f);
      for (int64_t t = 0; t < T; ++t) {
        const float v = X[r * T + t], s = std::sin(a * v);
        Y[r * T + t] = v + inv * (s * s);
      }
    }
  });
}

void transpose_last_two(const Tensor& x, Tensor& y) {
  check_transpose_last_two(x, y);
  require_cpu("transpose_last_two", {&x, &y});
  const int64_t B = x.dim(0), M = x.dim(1), N = x.dim(2);
  const float* X = f32p(x);
  float* Y = static_cast<float*>(y.data());
  parallel_for(0, B * N, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / N, n = r % N;
      for (int64_t m = 0; m < M; ++m) Y[r * M + m] = X[(b * M + m) * N + n];
    }
  });
}

void multiply(Tensor& x, const Tensor& y) {
  check_multiply(x, y);
  require_cpu("multiply", {&x, &y});
  float* X = static_cast<float*>(x.data());
  const float* Y = f32p(y);
  parallel_for(0, x.numel(), 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) X[i] *= Y[i];
  });
}

void pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, float scale, Tensor& y) {
  check_pooled_causal_attention(qkv, batch, heads, y);
  require_cpu("pooled_causal_attention", {&qkv, &y});
  const int64_t rows = qkv.dim(0), W = qkv.dim(1), T = rows / batch, D = W / 3, Dh = D / heads, P = y.dim(1);
  const float* QKV = f32p(qkv);
  float* Y = static_cast<float*>(y.data());
  parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> p(T), mean(Dh), o(Dh);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t first = (r / T) * T;  // the sequence's first row; row r sees rows [first, r]
      std::fill(mean.begin(), mean.end(), 0.f);
      for (int64_t h = 0; h < heads; ++h) {
        const float* q = QKV + r * W + h * Dh;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = first; j <= r; ++j) {
          const float* k = QKV + j * W + D + h * Dh;
          float dot = 0.f;
          for (int64_t d = 0; d < Dh; ++d) dot += q[d] * k[d];
          p[j - first] = scale * dot;
          mx = std::max(mx, p[j - first]);
        }
        double sum = 0;
        for (int64_t j = first; j <= r; ++j) sum += (p[j - first] = std::exp(p[j - first] - mx));
        const float inv = static_cast<float>(1.0 / sum);
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t j = first; j <= r; ++j) {
          const float* v = QKV + j * W + 2 * D + h * Dh;
          const float pj = p[j - first] * inv;
          for (int64_t d = 0; d < Dh; ++d) o[d] += pj * v[d];
        }
        for (int64_t d = 0; d < Dh; ++d) mean[d] += o[d];
      }
      for (int64_t d = 0; d < Dh; ++d) mean[d] /= static_cast<float>(heads);
      for (int64_t i = 0; i < P; ++i) {
        const int64_t a = adaptive_pool_begin(i, Dh, P), b = adaptive_pool_end(i, Dh, P);
        float s = 0.f;
        for (int64_t d = a; d < b; ++d) s += mean[d];
        Y[r * P + i] = s / static_cast<float>(b - a);
      }
    }
  });
}

}  // namespace h3::cpu
