// The CPU reference backend: float32 storage and arithmetic, written to be plainly right; threads where cheap.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/backend.h"
#include "backend/cpu/cpu_audio_encoder.h"
#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_fp8_attention.h"
#include "backend/cpu/cpu_row_pairs.h"
#include "backend/cpu/cpu_signal.h"
#include "backend/cpu/cpu_video.h"
#include "backend/cpu/cpu_video_encoder.h"
#include "backend/memory_budget.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace h3 {

namespace {

float* f32(const Tensor& t, const char* what) {
  H3_CHECK(t.device() == Device::CPU, "cpu backend: ", what, " is not a CPU tensor");
  H3_CHECK(t.dtype() == DType::F32, "cpu backend: ", what, " must be F32, got ", t.str());
  return static_cast<float*>(t.data());
}

const int32_t* i32(const Tensor& t, const char* what) {
  H3_CHECK(t.device() == Device::CPU && t.dtype() == DType::I32, "cpu backend: ", what, " must be an I32 CPU tensor, got ",
           t.str());
  return static_cast<const int32_t*>(t.data());
}

int64_t last_dim(const Tensor& t) { return t.ndim() ? t.dim(-1) : 1; }
int64_t rows_of(const Tensor& t) { return t.numel() / std::max<int64_t>(last_dim(t), 1); }

// 4x4 block of dot products of rows of a (stride K) with rows of b (stride K). Compiled for AVX2+FMA where the
// machine has it; the plain version otherwise. Each product is a sum over k in 8 interleaved partial sums.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void dot_block(const float* a, int64_t ma,
                                                                         const float* b, int64_t nb, int64_t K,
                                                                         float* out, int64_t ldo) {
  constexpr int L = 8;
  float acc[4][4][L] = {};
  int64_t k = 0;
  for (; k + L <= K; k += L) {
    for (int i = 0; i < 4; ++i) {
      if (i >= ma) break;
      const float* ai = a + i * K + k;
      for (int j = 0; j < 4; ++j) {
        if (j >= nb) break;
        const float* bj = b + j * K + k;
        for (int l = 0; l < L; ++l) acc[i][j][l] += ai[l] * bj[l];
      }
    }
  }
  for (int i = 0; i < ma; ++i)
    for (int j = 0; j < nb; ++j) {
      float s = 0;
      for (int l = 0; l < L; ++l) s += acc[i][j][l];
      for (int64_t kk = k; kk < K; ++kk) s += a[i * K + kk] * b[j * K + kk];
      out[i * ldo + j] = s;
    }
}

float silu_f(float x) { return x / (1.f + std::exp(-x)); }

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::F32; }

  Tensor empty(const Shape& shape, DType dt) override {
    if (!budget_) return Tensor::empty(shape, dt);
    return counted(shape_numel(shape) * dtype_size(dt), [&] { return Tensor::empty(shape, dt); });
  }
  Tensor upload(const Tensor& host, DType dt) override {
    H3_CHECK(host.device() == Device::CPU, "upload: source is not a CPU tensor");
    if (!budget_) return host.to(dt);
    return counted(host.numel() * dtype_size(dt), [&] { return host.to(dt); });
  }

  // ---- the device-memory budget: the tensors made by empty() and upload() count as device memory ----
  void set_memory_limit(std::optional<uint64_t> bytes) {
    budget_ = bytes ? std::make_shared<MemoryBudget>(*bytes) : nullptr;
  }
  std::optional<uint64_t> memory_limit() const {
    return budget_ ? std::optional<uint64_t>(budget_->limit()) : std::nullopt;
  }
  MemoryStats memory_stats() const override {
    if (!budget_) return {};
    const uint64_t in_use = budget_->in_use();
    return MemoryStats{in_use, budget_->peak(), 0, budget_->limit() - std::min(in_use, budget_->limit()),
                       budget_->limit()};
  }
  void reset_peak_memory() override {
    if (budget_) budget_->reset_peak();
  }
  Tensor download(const Tensor& t) override { return t.clone(); }
  void convert(const Tensor& src, Tensor& dst) override {
    H3_CHECK(src.numel() == dst.numel(), "convert: ", src.str(), " -> ", dst.str());
    if (src.dtype() == dst.dtype()) {
      std::memcpy(dst.data(), src.data(), src.nbytes());
      return;
    }
    Tensor c = src.to(dst.dtype());
    std::memcpy(dst.data(), c.data(), c.nbytes());
  }
  void fill(Tensor& t, float value) override {
    if (t.dtype() == DType::F32) {
      std::fill_n(static_cast<float*>(t.data()), t.numel(), value);
    } else {
      Tensor f = Tensor::empty(t.shape(), DType::F32);
      std::fill_n(f.ptr<float>(), f.numel(), value);
      convert(f, t);
    }
  }
  void fill_random_normal(Tensor& t, uint64_t seed, float mean, float stddev) override {
    if (t.dtype() != DType::F32) return Backend::fill_random_normal(t, seed, mean, stddev);
    random_normal_host(t, seed, mean, stddev);
  }
  void synchronize() override {}

 private:
  // `bytes` charged to the budget (or refused) before `make` allocates them; refunded when the tensor's storage goes.
  template <typename Make>
  Tensor counted(uint64_t bytes, Make&& make) {
    budget_->charge(bytes);
    Tensor t;
    try {
      t = make();
    } catch (...) {
      budget_->refund(bytes);
      throw;
    }
    std::shared_ptr<void> storage = t.owner();
    std::shared_ptr<void> owner(t.data(), [storage, budget = budget_, bytes](void*) mutable {
      storage.reset();
      budget->refund(bytes);
    });
    return Tensor::view(t.data(), t.shape(), t.dtype(), std::move(owner));
  }
  std::shared_ptr<MemoryBudget> budget_;  // null: no budget (nothing is counted)

 public:

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) override {
    const float* X = f32(x, "linear input");
    const float* W = f32(w, "linear weight");
    float* Y = f32(y, "linear output");
    const int64_t K = last_dim(x), M = rows_of(x), N = w.dim(0);
    H3_CHECK(w.ndim() == 2 && w.dim(1) == K, "linear: weight ", w.str(), " does not match input ", x.str());
    H3_CHECK(rows_of(y) == M && last_dim(y) == N, "linear: output ", y.str(), " should be [", M, ", ", N, "]");
    const float* B = bias ? f32(*bias, "linear bias") : nullptr;
    if (B) H3_CHECK(bias->numel() == N, "linear: bias ", bias->str(), " does not match ", N, " outputs");
    // Tasks over (4-row block, 64-column block) pairs, column block outermost: consecutive tasks reuse the same
    // 64 weight rows (which stay in cache) while the activations stream, so the weights are read about once.
    const int64_t mb = (M + 3) / 4, nb = (N + 63) / 64;
    parallel_for(0, mb * nb, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        int64_t m0 = (t % mb) * 4, n0 = (t / mb) * 64;
        int64_t ma = std::min<int64_t>(4, M - m0), n1 = std::min<int64_t>(N, n0 + 64);
        for (int64_t n = n0; n < n1; n += 4) {
          int64_t nn = std::min<int64_t>(4, n1 - n);
          dot_block(X + m0 * K, ma, W + n * K, nn, K, Y + m0 * N + n, N);
        }
        if (B)
          for (int64_t i = 0; i < ma; ++i)
            for (int64_t n = n0; n < n1; ++n) Y[(m0 + i) * N + n] += B[n];
      }
    });
  }

  void rms_norm(const Tensor& x, const Tensor* w, float eps, Tensor& y) override {
    const float* X = f32(x, "rms_norm input");
    float* Y = f32(y, "rms_norm output");
    const float* Wt = w ? f32(*w, "rms_norm weight") : nullptr;
    const int64_t D = last_dim(x), R = rows_of(x);
    H3_CHECK(y.numel() == x.numel(), "rms_norm: output ", y.str(), " vs input ", x.str());
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) rms_row(X + r * D, Wt, D, eps, Y + r * D);
    });
  }

  void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& y) override {
    const float* X = f32(x, "layer_norm input");
    float* Y = f32(y, "layer_norm output");
    const float* Wt = w ? f32(*w, "layer_norm weight") : nullptr;
    const float* Bs = b ? f32(*b, "layer_norm bias") : nullptr;
    const int64_t D = last_dim(x), R = rows_of(x);
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = X + r * D;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < D; ++i) mean += xr[i];
        mean /= D;
        for (int64_t i = 0; i < D; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        var /= D;
        float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
        for (int64_t i = 0; i < D; ++i) {
          float v = (xr[i] - static_cast<float>(mean)) * inv;
          if (Wt) v *= Wt[i];
          if (Bs) v += Bs[i];
          Y[r * D + i] = v;
        }
      }
    });
  }

  void rms_norm_modulate(const Tensor& x, const Tensor& w, float eps, const Tensor& table, int shift_param,
                         int scale_param, const Tensor& idx, Tensor& y) override {
    const float* X = f32(x, "modulate input");
    float* Y = f32(y, "modulate output");
    const float* Wt = f32(w, "modulate norm weight");
    const float* T = f32(table, "modulation table");
    const int32_t* I = i32(idx, "modulation row index");
    const int64_t D = last_dim(x), R = rows_of(x);
    H3_CHECK(table.ndim() == 3 && table.dim(2) == D, "modulate: table ", table.str(), " must be [R, P, ", D, "]");
    const int64_t P = table.dim(1), TR = table.dim(0);
    H3_CHECK(idx.numel() == R, "modulate: ", idx.numel(), " row indices for ", R, " rows");
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        H3_CHECK(I[r] >= 0 && I[r] < TR, "modulate: table row ", I[r], " out of range [0, ", TR, ")");
        const float* shift = T + (I[r] * P + shift_param) * D;
        const float* scale = T + (I[r] * P + scale_param) * D;
        float* yr = Y + r * D;
        rms_row(X + r * D, Wt, D, eps, yr);
        for (int64_t i = 0; i < D; ++i) yr[i] = yr[i] * (1.f + scale[i]) + shift[i];
      }
    });
  }

  void gated_residual(Tensor& x, const Tensor& y, const Tensor& table, int gate_param, const Tensor& idx) override {
    float* X = f32(x, "residual");
    const float* Yv = f32(y, "branch output");
    const float* T = f32(table, "modulation table");
    const int32_t* I = i32(idx, "modulation row index");
    const int64_t D = last_dim(x), R = rows_of(x), P = table.dim(1), TR = table.dim(0);
    H3_CHECK(y.numel() == x.numel() && table.dim(2) == D, "gated_residual: shapes ", x.str(), " ", y.str(), " ",
             table.str());
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        H3_CHECK(I[r] >= 0 && I[r] < TR, "gated_residual: table row ", I[r], " out of range");
        const float* gate = T + (I[r] * P + gate_param) * D;
        for (int64_t i = 0; i < D; ++i) X[r * D + i] += gate[i] * Yv[r * D + i];
      }
    });
  }

  void residual_add(Tensor& x, const Tensor& y, const Tensor* scale) override {
    float* X = f32(x, "residual");
    const float* Yv = f32(y, "branch output");
    const float* S = scale ? f32(*scale, "residual scale") : nullptr;
    const int64_t D = last_dim(x), n = x.numel();
    H3_CHECK(y.numel() == n, "residual_add: ", x.str(), " vs ", y.str());
    for (int64_t i = 0; i < n; ++i) X[i] += S ? Yv[i] * S[i % D] : Yv[i];
  }

  void swiglu(const Tensor& u, bool value_first, Tensor& a) override {
    const float* U = f32(u, "swiglu input");
    float* A = f32(a, "swiglu output");
    const int64_t F = last_dim(a), R = rows_of(a);
    H3_CHECK(last_dim(u) == 2 * F && rows_of(u) == R, "swiglu: input ", u.str(), " must be [", R, ", ", 2 * F, "]");
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* value = U + r * 2 * F + (value_first ? 0 : F);
        const float* gate = U + r * 2 * F + (value_first ? F : 0);
        for (int64_t i = 0; i < F; ++i) A[r * F + i] = value[i] * silu_f(gate[i]);
      }
    });
  }

  void silu(const Tensor& x, Tensor& y) override {
    const float* X = f32(x, "silu input");
    float* Yv = f32(y, "silu output");
    for (int64_t i = 0; i < x.numel(); ++i) Yv[i] = silu_f(X[i]);
  }

  void gelu(const Tensor& x, bool tanh_approx, Tensor& y) override {
    const float* X = f32(x, "gelu input");
    float* Yv = f32(y, "gelu output");
    for (int64_t i = 0; i < x.numel(); ++i) {
      float v = X[i];
      Yv[i] = tanh_approx ? 0.5f * v * (1.f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                          : 0.5f * v * (1.f + std::erf(v * 0.7071067811865476f));
    }
  }

  void self_attention(Tensor& qkv, const AttentionSpec& s, Tensor& out) override {
    float* QKV = f32(qkv, "qkv");
    float* O = f32(out, "attention output");
    const int64_t R = rows_of(qkv), Dh = s.head_dim, Hq = s.heads_q, Hkv = s.heads_kv;
    const int64_t W = (Hq + 2 * Hkv) * Dh;
    H3_CHECK(Hq > 0 && Hkv > 0 && Hq % Hkv == 0 && Dh > 0, "attention: bad head configuration ", Hq, "/", Hkv, "x", Dh);
    H3_CHECK(last_dim(qkv) == W, "attention: qkv ", qkv.str(), " must have ", W, " channels per row");
    H3_CHECK(rows_of(out) == R && last_dim(out) == Hq * Dh, "attention: output ", out.str(), " must be [", R, ", ",
             Hq * Dh, "]");
    prepare_qk(QKV, R, W, s);
    std::vector<int64_t> seg = s.segments.empty() ? std::vector<int64_t>{0, R} : s.segments;
    H3_CHECK(seg.front() == 0 && seg.back() == R, "attention: segments must span [0, ", R, ")");
    const int64_t group = Hq / Hkv;
    for (size_t si = 0; si + 1 < seg.size(); ++si) {
      const int64_t b = seg[si], e = seg[si + 1];
      H3_CHECK(b <= e, "attention: segments must be non-decreasing");
      parallel_for(0, Hq * (e - b), 8, [&](int64_t t0, int64_t t1) {
        std::vector<float> p(e - b);
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t h = t / (e - b), i = b + t % (e - b), hk = h / group;
          const float* q = QKV + i * W + h * Dh;
          const int64_t last = s.causal ? i + 1 : e;
          float mx = -INFINITY;
          for (int64_t j = b; j < last; ++j) {
            const float* k = QKV + j * W + (Hq + hk) * Dh;
            float d = 0;
            for (int64_t c = 0; c < Dh; ++c) d += q[c] * k[c];
            p[j - b] = d * s.scale;
            mx = std::max(mx, p[j - b]);
          }
          double sum = 0;
          for (int64_t j = b; j < last; ++j) sum += (p[j - b] = std::exp(p[j - b] - mx));
          float* o = O + i * Hq * Dh + h * Dh;
          std::fill_n(o, Dh, 0.f);
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t j = b; j < last; ++j) {
            const float* v = QKV + j * W + (Hq + Hkv + hk) * Dh;
            const float pj = p[j - b] * inv;
            for (int64_t c = 0; c < Dh; ++c) o[c] += pj * v[c];
          }
        }
      });
    }
  }

  void qk_norm_rope(Tensor& qkv, const AttentionSpec& s) override {
    const int64_t W = (s.heads_q + 2 * s.heads_kv) * s.head_dim;
    H3_CHECK(s.heads_q > 0 && s.heads_kv > 0 && s.head_dim > 0 && last_dim(qkv) == W, "qk_norm_rope: qkv ", qkv.str(),
             " must have ", W, " channels per row");
    prepare_qk(f32(qkv, "qkv"), rows_of(qkv), W, s);
  }

  void conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding, int64_t dilation,
              Tensor& y) override {
    cpu::conv1d(x, w, bias, stride, padding, dilation, y);
  }
  void conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                        Tensor& y) override {
    cpu::conv_transpose1d(x, w, bias, stride, padding, y);
  }
  void snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                     const Tensor& down_filter, Tensor& y) override {
    cpu::snake_beta_aa(x, log_alpha, log_beta, up_filter, down_filter, y);
  }
  void divide(Tensor& x, float divisor) override { cpu::divide(x, divisor); }
  void snake(const Tensor& x, const Tensor& alpha, Tensor& y) override { cpu::snake(x, alpha, y); }
  void transpose_last_two(const Tensor& x, Tensor& y) override { cpu::transpose_last_two(x, y); }
  void multiply(Tensor& x, const Tensor& y) override { cpu::multiply(x, y); }
  void pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, float scale, Tensor& y) override {
    cpu::pooled_causal_attention(qkv, batch, heads, scale, y);
  }
  void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, Tensor& y) override {
    cpu::conv3d(x, w, bias, g, y);
  }
  void frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, float eps,
                        bool silu, Tensor& y) override {
    cpu::frame_group_norm(x, weight, bias, groups, eps, silu, y);
  }
  void stitch_video_tiles(const Tensor& features, const VideoTileGrid& grid, int64_t frame_begin, int64_t frame_end,
                          Tensor& canvas) override {
    cpu::stitch_video_tiles(features, grid, frame_begin, frame_end, canvas);
  }
  void video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                              const std::vector<float>& mean, const std::vector<float>& std,
                              Tensor& pixels) override {
    cpu::video_frames_to_pixels(frames, fade_from, fade_extent, mean, std, pixels);
  }

  void scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override {
    move_rows(src, idx, dst, /*scatter=*/true);
  }
  void gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override {
    move_rows(src, idx, dst, /*scatter=*/false);
  }
  // FP8 is emulated here (backend/cpu/cpu_fp8.h) for the tests of its arithmetic; the engine still refuses
  // --precision fp8 on the CPU (fp8_unsupported_reason is the Backend's).
  Fp8Weight quantize_weight_fp8(const Tensor& w, Fp8Scaling scaling) override {
    return cpu::quantize_weight_fp8(w, scaling);
  }
  void quantize_activation_fp8(const Tensor& x, Fp8Scaling scaling, Fp8Activation& q) override {
    q = cpu::quantize_activation_fp8(x, scaling);
  }
  void linear_fp8_quantized(const Fp8Activation& x, const Fp8Weight& w, const Tensor* bias, Tensor& y) override {
    cpu::linear_fp8(x, w, bias, y);
  }
  // Likewise FP8 attention (backend/cpu/cpu_fp8_attention.h), every head_dim.
  void self_attention_in_fp8(Tensor& qkv, const AttentionSpec& s, Tensor& out) override {
    qk_norm_rope(qkv, s);
    cpu::attention_in_fp8(qkv, s, out);
  }
  void pool_row_pairs(const Tensor& full, const Tensor& pairs, Tensor& reduced) override {
    cpu::pool_row_pairs(full, pairs, reduced);
  }
  void unpool_row_pairs(const Tensor& reduced, const Tensor& pairs, Tensor& full) override {
    cpu::unpool_row_pairs(reduced, pairs, full);
  }

 private:
  static void rms_row(const float* x, const float* w, int64_t D, float eps, float* y) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / D + eps));
    for (int64_t i = 0; i < D; ++i) y[i] = w ? x[i] * inv * w[i] : x[i] * inv;
  }

  // Per-head RMSNorm and rotary embedding of the q and k heads, in place.
  static void prepare_qk(float* qkv, int64_t R, int64_t W, const AttentionSpec& s) {
    const int64_t Dh = s.head_dim, heads = s.heads_q + s.heads_kv, rot = s.rotary_dim, half = rot / 2;
    const float* wq = s.q_norm_weight ? f32(*s.q_norm_weight, "q norm weight") : nullptr;
    const float* wk = s.k_norm_weight ? f32(*s.k_norm_weight, "k norm weight") : nullptr;
    const float* C = nullptr;
    const float* S = nullptr;
    if (rot) {
      H3_CHECK(rot % 2 == 0 && rot <= Dh, "attention: rotary_dim ", rot, " must be even and <= head_dim ", Dh);
      H3_CHECK(s.cos && s.sin, "attention: rotary tables missing");
      C = f32(*s.cos, "rope cos");
      S = f32(*s.sin, "rope sin");
      H3_CHECK(s.cos->numel() == R * rot && s.sin->numel() == R * rot, "attention: rotary tables ", s.cos->str(),
               " must be [", R, ", ", rot, "]");
    }
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      std::vector<float> tmp(Dh);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t h = 0; h < heads; ++h) {
          float* x = qkv + r * W + h * Dh;
          if (s.qk_norm) rms_row(x, h < s.heads_q ? wq : wk, Dh, s.qk_norm_eps, x);
          if (!rot) continue;
          const float* c = C + r * rot;
          const float* sn = S + r * rot;
          for (int64_t j = 0; j < half; ++j) {
            tmp[j] = x[j] * c[j] - x[j + half] * sn[j];
            tmp[j + half] = x[j + half] * c[j + half] + x[j] * sn[j + half];
          }
          std::copy_n(tmp.data(), rot, x);
        }
    });
  }

  void move_rows(const Tensor& src, const Tensor& idx, Tensor& dst, bool scatter) {
    const int32_t* I = i32(idx, "row index");
    const int64_t D = last_dim(src), n = idx.numel();
    H3_CHECK(last_dim(dst) == D, "row move: ", src.str(), " and ", dst.str(), " differ in width");
    H3_CHECK((scatter ? rows_of(src) : rows_of(dst)) == n, "row move: ", n, " indices for ", src.str(), " -> ",
             dst.str());
    const int64_t bound = scatter ? rows_of(dst) : rows_of(src);
    Tensor s32 = src.dtype() == DType::F32 ? src : src.to(DType::F32);
    const float* S = s32.ptr<float>();
    const bool direct = dst.dtype() == DType::F32;
    Tensor d32 = direct ? dst : dst.to(DType::F32);
    float* Dd = d32.ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      H3_CHECK(I[i] >= 0 && I[i] < bound, "row move: index ", I[i], " out of range [0, ", bound, ")");
      const float* from = S + (scatter ? i : I[i]) * D;
      float* to = Dd + (scatter ? I[i] : i) * D;
      std::copy_n(from, D, to);
    }
    if (!direct) convert(d32, dst);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

// The budget of the CPU backend here, of the CUDA backend in cuda_backend.cpp (cuda_set_device_memory_limit).
#ifdef H3_HAVE_CUDA
void cuda_set_device_memory_limit(Backend& be, std::optional<uint64_t> bytes);
std::optional<uint64_t> cuda_device_memory_limit(const Backend& be);
#endif

void set_device_memory_limit(Backend& be, std::optional<uint64_t> bytes) {
  if (auto* cpu = dynamic_cast<CpuBackend*>(&be)) return cpu->set_memory_limit(bytes);
#ifdef H3_HAVE_CUDA
  if (be.device() == Device::CUDA) return cuda_set_device_memory_limit(be, bytes);
#endif
  H3_CHECK(!bytes, "the ", be.name(), " backend cannot keep a device memory budget");
}

std::optional<uint64_t> device_memory_limit(const Backend& be) {
  if (const auto* cpu = dynamic_cast<const CpuBackend*>(&be)) return cpu->memory_limit();
#ifdef H3_HAVE_CUDA
  if (be.device() == Device::CUDA) return cuda_device_memory_limit(be);
#endif
  return std::nullopt;
}

}  // namespace h3
