#include "backend/cpu/cpu_signal.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/backend.h"
#include "util/env.h"
#include "util/thread_pool.h"

namespace h3::cpu {

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Correlation kernel shared by both convolutions:
//   out[o·ldo + u·ostride] = bias[o] + Σ_kk w[o·K + kk] · src[off[kk] + u]     (o < M, u < N)
// Each kk names one shifted input row (an input channel at one tap); the caller lays the input out so that every
// such row is contiguous in u. The kernel reads src up to off[kk] + round_up(N, kNR) − 1: callers keep kNR floats
// of slack after their source buffer (the over-read values only reach discarded columns).

constexpr int kMR = 4;                 // output channels per micro-tile
constexpr int64_t kNR = 24;            // time steps per micro-tile (3 AVX vectors)
constexpr int64_t kMB = 8 * kMR;       // output channels per task tile
constexpr int64_t kNB = 8 * kNR;       // time steps per task tile
constexpr int64_t kKC = 256;           // reduction block (keeps a task's source rows in L2)

struct Correlation {
  const float* w;
  int64_t M, K;
  const float* src;
  const int64_t* off;
  int64_t N;
  const float* bias;  // [M] or null
  float* out;
  int64_t ldo, ostride;
};

const float kZeroRow[kKC] = {};

// Micro-tile: c[i·ldc + u] += Σ_{kk < kn} w[i][kk] · src[off[kk] + u]  for i < kMR, u < kNR.
using MicroTile = void (*)(const float* const w[kMR], const float* src, const int64_t* off, int64_t kn, float* c,
                           int64_t ldc);

void micro_tile_generic(const float* const w[kMR], const float* src, const int64_t* off, int64_t kn, float* c,
                        int64_t ldc) {
  float acc[kMR][kNR] = {};
  for (int64_t kk = 0; kk < kn; ++kk) {
    const float* r = src + off[kk];
    for (int i = 0; i < kMR; ++i) {
      const float wi = w[i][kk];
      for (int64_t u = 0; u < kNR; ++u) acc[i][u] += wi * r[u];
    }
  }
  for (int i = 0; i < kMR; ++i)
    for (int64_t u = 0; u < kNR; ++u) c[i * ldc + u] += acc[i][u];
}

#if defined(__x86_64__)
// The same with AVX2 + FMA: 12 accumulators in ymm registers, one broadcast per weight.
__attribute__((target("avx2,fma"))) void micro_tile_avx2(const float* const w[kMR], const float* src,
                                                         const int64_t* off, int64_t kn, float* c, int64_t ldc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
  __m256 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
  const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
  for (int64_t kk = 0; kk < kn; ++kk) {
    const float* r = src + off[kk];
    const __m256 x0 = _mm256_loadu_ps(r), x1 = _mm256_loadu_ps(r + 8), x2 = _mm256_loadu_ps(r + 16);
    __m256 b = _mm256_broadcast_ss(w0 + kk);
    c00 = _mm256_fmadd_ps(b, x0, c00), c01 = _mm256_fmadd_ps(b, x1, c01), c02 = _mm256_fmadd_ps(b, x2, c02);
    b = _mm256_broadcast_ss(w1 + kk);
    c10 = _mm256_fmadd_ps(b, x0, c10), c11 = _mm256_fmadd_ps(b, x1, c11), c12 = _mm256_fmadd_ps(b, x2, c12);
    b = _mm256_broadcast_ss(w2 + kk);
    c20 = _mm256_fmadd_ps(b, x0, c20), c21 = _mm256_fmadd_ps(b, x1, c21), c22 = _mm256_fmadd_ps(b, x2, c22);
    b = _mm256_broadcast_ss(w3 + kk);
    c30 = _mm256_fmadd_ps(b, x0, c30), c31 = _mm256_fmadd_ps(b, x1, c31), c32 = _mm256_fmadd_ps(b, x2, c32);
  }
  const __m256 acc[kMR][3] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22}, {c30, c31, c32}};
  for (int i = 0; i < kMR; ++i)
    for (int v = 0; v < 3; ++v) {
      float* p = c + i * ldc + 8 * v;
      _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), acc[i][v]));
    }
}
#endif

// The AVX2 kernel where the machine has AVX2 + FMA, unless H3_DISABLE_CONV_AVX2 is set (read on every call, like
// H3_DISABLE_FAST_CONV, so that a test or a bisecting user can switch within one process).
MicroTile pick_micro_tile() {
#if defined(__x86_64__)
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (has_avx2 && !env_flag("H3_DISABLE_CONV_AVX2")) return micro_tile_avx2;
#endif
  return micro_tile_generic;
}

// One task: output channels [m0, m0 + kMB) × time steps [n0, n0 + kNB) of one correlation.
void correlate_tile(const Correlation& j, int64_t m0, int64_t n0, MicroTile micro_tile) {
  const int64_t mb = std::min(kMB, j.M - m0), nb = std::min(kNB, j.N - n0);
  alignas(64) float tile[kMB * kNB];
  for (int64_t i = 0; i < kMB; ++i) std::fill_n(tile + i * kNB, kNB, (j.bias && i < mb) ? j.bias[m0 + i] : 0.f);
  for (int64_t k0 = 0; k0 < j.K; k0 += kKC) {
    const int64_t kn = std::min(kKC, j.K - k0);
    for (int64_t i = 0; i < mb; i += kMR) {
      const float* rows[kMR];
      for (int r = 0; r < kMR; ++r) rows[r] = i + r < mb ? j.w + (m0 + i + r) * j.K + k0 : kZeroRow;
      for (int64_t u = 0; u < nb; u += kNR) micro_tile(rows, j.src + n0 + u, j.off + k0, kn, tile + i * kNB + u, kNB);
    }
  }
  for (int64_t i = 0; i < mb; ++i) {
    float* o = j.out + (m0 + i) * j.ldo + n0 * j.ostride;
    const float* t = tile + i * kNB;
    if (j.ostride == 1)
      std::copy_n(t, nb, o);
    else
      for (int64_t u = 0; u < nb; ++u) o[u * j.ostride] = t[u];
  }
}

void run_correlations(const std::vector<Correlation>& jobs) {
  std::vector<int64_t> first{0};  // task index where each job starts
  for (const Correlation& j : jobs) {
    const int64_t tiles = j.N > 0 ? ((j.M + kMB - 1) / kMB) * ((j.N + kNB - 1) / kNB) : 0;
    first.push_back(first.back() + tiles);
  }
  const MicroTile micro_tile = pick_micro_tile();
  parallel_for(0, first.back(), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const size_t ji = std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1;
      const Correlation& j = jobs[ji];
      const int64_t local = t - first[ji], ntiles = (j.N + kNB - 1) / kNB;
      correlate_tile(j, (local / ntiles) * kMB, (local % ntiles) * kNB, micro_tile);
    }
  });
}

bool fast_conv_enabled() { return !env_flag("H3_DISABLE_FAST_CONV"); }

const float* f32p(const Tensor& t) { return static_cast<const float*>(t.data()); }

void require_cpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t) H3_CHECK(t->device() == Device::CPU, "cpu backend: ", op, " got a tensor that is not on the CPU: ", t->str());
}
const float* bias_ptr(const Tensor* b) { return b ? f32p(*b) : nullptr; }

// ---------------------------------------------------------------------------------------------------------------
// Direct transcriptions of the definitions (the exact slow twins, H3_DISABLE_FAST_CONV=1).

void conv1d_direct(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t s, int64_t p, int64_t d, Tensor& y) {
  const int64_t B = x.dim(0), Cin = x.dim(1), T = x.dim(2), Cout = w.dim(0), k = w.dim(2), To = y.dim(2);
  const float *X = f32p(x), *W = f32p(w), *Bs = bias_ptr(bias);
  float* Y = static_cast<float*>(y.data());
  parallel_for(0, B * Cout, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / Cout, o = r % Cout;
      for (int64_t t = 0; t < To; ++t) {
        float acc = Bs ? Bs[o] : 0.f;
        for (int64_t c = 0; c < Cin; ++c)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t i = t * s - p + j * d;
            if (i >= 0 && i < T) acc += W[(o * Cin + c) * k + j] * X[(b * Cin + c) * T + i];
          }
        Y[r * To + t] = acc;
      }
    }
  });
}

void conv_transpose1d_direct(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t s, int64_t p, Tensor& y) {
  const int64_t B = x.dim(0), Cin = x.dim(1), T = x.dim(2), Cout = w.dim(1), k = w.dim(2), To = y.dim(2);
  const float *X = f32p(x), *W = f32p(w), *Bs = bias_ptr(bias);
  float* Y = static_cast<float*>(y.data());
  parallel_for(0, B * Cout, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / Cout, o = r % Cout;
      for (int64_t t = 0; t < To; ++t) {
        float acc = Bs ? Bs[o] : 0.f;
        for (int64_t c = 0; c < Cin; ++c)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t num = t + p - j;  // = i·s
            if (num < 0 || num % s != 0 || num / s >= T) continue;
            acc += X[(b * Cin + c) * T + num / s] * W[(c * Cout + o) * k + j];
          }
        Y[r * To + t] = acc;
      }
    }
  });
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

void conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t s, int64_t p, int64_t d, Tensor& y) {
  check_conv1d(x, w, bias, s, p, d, y);
  require_cpu("conv1d", {&x, &w, bias, &y});
  if (!fast_conv_enabled()) return conv1d_direct(x, w, bias, s, p, d, y);
  const int64_t B = x.dim(0), Cin = x.dim(1), T = x.dim(2), Cout = w.dim(0), k = w.dim(2), To = y.dim(2);
  // Phase-split, zero-padded input: xs[b][r][c][m] = x[b][c][m·s + r − p], so that input sample t·s − p + j·d of
  // channel c is xs[b][(j·d) mod s][c][t + (j·d) div s]: every (c, j) is one contiguous row in t.
  const int64_t Tq = To + ((k - 1) * d) / s, per_batch = s * Cin * Tq;
  std::vector<float> xs(B * per_batch + kNR, 0.f);
  const float* X = f32p(x);
  parallel_for(0, B * Cin, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t bc = r0; bc < r1; ++bc) {
      const int64_t b = bc / Cin, c = bc % Cin;
      for (int64_t r = 0; r < s; ++r) {
        float* row = xs.data() + b * per_batch + (r * Cin + c) * Tq;
        for (int64_t m = 0; m < Tq; ++m) {
          const int64_t i = m * s + r - p;
          if (i >= 0 && i < T) row[m] = X[bc * T + i];
        }
      }
    }
  });
  std::vector<int64_t> off(Cin * k);
  for (int64_t c = 0; c < Cin; ++c)
    for (int64_t j = 0; j < k; ++j) off[c * k + j] = ((j * d) % s) * Cin * Tq + c * Tq + (j * d) / s;
  std::vector<Correlation> jobs;
  for (int64_t b = 0; b < B; ++b)
    jobs.push_back({f32p(w), Cout, Cin * k, xs.data() + b * per_batch, off.data(), To, bias_ptr(bias),
                    static_cast<float*>(y.data()) + b * Cout * To, To, 1});
  run_correlations(jobs);
}

void conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t s, int64_t p, Tensor& y) {
  check_conv_transpose1d(x, w, bias, s, p, y);
  require_cpu("conv_transpose1d", {&x, &w, bias, &y});
  if (!fast_conv_enabled()) return conv_transpose1d_direct(x, w, bias, s, p, y);
  const int64_t B = x.dim(0), Cin = x.dim(1), T = x.dim(2), Cout = w.dim(1), k = w.dim(2), To = y.dim(2);
  // Polyphase form: the outputs t with (t + p) mod s = r form phase r; with q = (t + p) div s,
  //   y[o, t] = bias[o] + Σ_c Σ_m x[c, q − m] · w[c, o, r + m·s]     (taps r + m·s < k),
  // a stride-1 correlation of x (left-padded by L = ⌈k/s⌉ − 1 zeros) with the phase's taps in reverse order.
  struct Phase {
    int64_t taps, q0, q_end;
  };
  std::vector<Phase> phases;
  int64_t q_max = 1;
  for (int64_t r = 0; r < s; ++r) {
    Phase ph{r < k ? (k - r + s - 1) / s : 0, p > r ? (p - r + s - 1) / s : 0, (To + p - r + s - 1) / s};
    q_max = std::max(q_max, ph.q_end);
    phases.push_back(ph);
  }
  const int64_t L = (k + s - 1) / s - 1, Tp = L + q_max, per_batch = Cin * Tp;
  std::vector<float> xp(B * per_batch + kNR, 0.f);
  const float* X = f32p(x);
  for (int64_t bc = 0; bc < B * Cin; ++bc) std::copy_n(X + bc * T, std::min(T, q_max), xp.data() + bc * Tp + L);
  // Per phase: weights regrouped as [Cout, Cin·taps] (tap m of channel c at c·taps + m) and the row offsets.
  std::vector<std::vector<float>> wr(s);
  std::vector<std::vector<int64_t>> off(s);
  const float* W = f32p(w);
  std::vector<Correlation> jobs;
  for (int64_t r = 0; r < s; ++r) {
    const Phase& ph = phases[r];
    if (ph.q_end <= ph.q0) continue;
    const int64_t K = Cin * ph.taps;
    wr[r].resize(Cout * K + 1);
    off[r].resize(K + 1);
    for (int64_t o = 0; o < Cout; ++o)
      for (int64_t c = 0; c < Cin; ++c)
        for (int64_t m = 0; m < ph.taps; ++m) wr[r][o * K + c * ph.taps + m] = W[(c * Cout + o) * k + r + m * s];
    for (int64_t c = 0; c < Cin; ++c)
      for (int64_t m = 0; m < ph.taps; ++m) off[r][c * ph.taps + m] = c * Tp + L - m + ph.q0;
    for (int64_t b = 0; b < B; ++b)
      jobs.push_back({wr[r].data(), Cout, K, xp.data() + b * per_batch, off[r].data(), ph.q_end - ph.q0,
                      bias_ptr(bias), static_cast<float*>(y.data()) + b * Cout * To + ph.q0 * s + r - p, To, s});
  }
  run_correlations(jobs);
}

void snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                   const Tensor& down_filter, Tensor& y) {
  check_snake_beta_aa(x, log_alpha, log_beta, up_filter, down_filter, y);
  require_cpu("snake_beta_aa", {&x, &log_alpha, &log_beta, &up_filter, &down_filter, &y});
  constexpr int64_t R = kSnakeAaRatio;
  const int64_t C = x.dim(1), T = x.dim(2), rows = x.dim(0) * C;
  const int64_t Ku = up_filter.numel(), Kd = down_filter.numel();
  // Upsampler (transposed FIR): replicate pad P, keep outputs from `crop` on. Downsampler: replicate pads dl / dr.
  const int64_t P = Ku / R - 1, crop = P * R + (Ku - R) / 2;
  const int64_t dl = Kd / 2 - (Kd % 2 == 0 ? 1 : 0), dr = Kd / 2;
  // The transposed FIR runs in polyphase form: full output o = R·q + ph is Σ_m x_pad[q − m] · h[ph + R·m]. The padded
  // row gets E zeros on both sides so that every tap index is in range (a zero adds nothing, as an absent term).
  const int64_t E = (Ku + R - 1) / R, padded = T + 2 * P;
  const float *X = f32p(x), *LA = f32p(log_alpha), *LB = f32p(log_beta), *H = f32p(up_filter), *G = f32p(down_filter);
  float* Y = static_cast<float*>(y.data());
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / T), [&](int64_t r0, int64_t r1) {
    std::vector<float> xe(padded + 2 * E, 0.f), phase(T + 2 * E), z(dl + R * T + dr);
    for (int64_t row = r0; row < r1; ++row) {
      const float* xr = X + row * T;
      for (int64_t i = 0; i < padded; ++i) xe[E + i] = xr[std::clamp<int64_t>(i - P, 0, T - 1)];
      // 1. upsample: phase ph fills z[dl + R·q + ph − crop] for the q whose output lands in [crop, crop + R·T).
      for (int64_t ph = 0; ph < R; ++ph) {
        const int64_t q0 = (crop - ph + R - 1) / R, q1 = (crop + R * T - ph + R - 1) / R, nq = q1 - q0;
        std::fill_n(phase.begin(), nq, 0.f);
        for (int64_t m = 0; ph + R * m < Ku; ++m) {
          const float h = H[ph + R * m];
          const float* src = xe.data() + E + q0 - m;
          for (int64_t q = 0; q < nq; ++q) phase[q] += src[q] * h;
        }
        float* dst = z.data() + dl + R * q0 + ph - crop;
        for (int64_t q = 0; q < nq; ++q) dst[R * q] = static_cast<float>(R) * phase[q];
      }
      // 2. SnakeBeta at the doubled rate.
      const int64_t c = row % C;
      const float alpha = std::exp(LA[c]), inv_beta = 1.f / (std::exp(LB[c]) + 1e-9f);
      for (int64_t n = dl; n < dl + R * T; ++n) {
        const float sn = std::sin(alpha * z[n]);
        z[n] += inv_beta * (sn * sn);
      }
      // 3. downsample: replicate pad, strided FIR.
      std::fill_n(z.begin(), dl, z[dl]);
      std::fill_n(z.begin() + dl + R * T, dr, z[dl + R * T - 1]);
      float* yr = Y + row * T;
      std::fill_n(yr, T, 0.f);
      for (int64_t k = 0; k < Kd; ++k) {
        const float g = G[k];
        const float* src = z.data() + k;
        for (int64_t t = 0; t < T; ++t) yr[t] += src[R * t] * g;
      }
    }
  });
}

void divide(Tensor& x, float divisor) {
  H3_CHECK(x.dtype() == DType::F32, "divide: input must be F32, got ", x.str());
  require_cpu("divide", {&x});
  float* X = static_cast<float*>(x.data());
  parallel_for(0, x.numel(), 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) X[i] /= divisor;
  });
}

}  // namespace h3::cpu
