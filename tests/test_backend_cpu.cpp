// The CPU backend's ops against direct float64 evaluations of their definitions, on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/backend.h"
#include "random_tensor.h"

using namespace h3;

namespace {
Tensor idx32(std::vector<int32_t> v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  std::copy(v.begin(), v.end(), t.ptr<int32_t>());
  return t;
}
}  // namespace

TEST(BackendCpu, LinearMatchesFloat64AtAwkwardSizes) {
  auto be = make_cpu_backend();
  std::mt19937 g(3);
  for (auto [M, K, N] : {std::tuple{1, 1, 1}, {5, 7, 3}, {13, 37, 70}, {4, 64, 64}, {9, 130, 67}}) {
    Tensor x = randn({M, K}, g), w = randn({N, K}, g), b = randn({N}, g);
    Tensor y = be->empty({M, N}, DType::F32);
    be->linear(x, w, &b, y);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = b.ptr<float>()[n];
        for (int k = 0; k < K; ++k) ref += double(x.ptr<float>()[m * K + k]) * w.ptr<float>()[n * K + k];
        ASSERT_NEAR(y.ptr<float>()[m * N + n], ref, 1e-5 * (1 + std::fabs(ref)) * std::sqrt(K)) << M << " " << K << " " << N;
      }
  }
}

TEST(BackendCpu, ModulateAndGatedResidualUsePerRowTableRows) {
  auto be = make_cpu_backend();
  std::mt19937 g(4);
  const int R = 5, D = 6, TR = 4, P = 6;
  Tensor x = randn({R, D}, g), w = randn({D}, g), table = randn({TR, P, D}, g), y = be->empty({R, D}, DType::F32);
  Tensor idx = idx32({3, 0, 2, 2, 1});
  be->rms_norm_modulate(x, w, 1e-5f, table, 0, 1, idx, y);
  for (int r = 0; r < R; ++r) {
    double ss = 0;
    for (int i = 0; i < D; ++i) ss += double(x.ptr<float>()[r * D + i]) * x.ptr<float>()[r * D + i];
    double inv = 1 / std::sqrt(ss / D + 1e-5);
    int t = idx.ptr<int32_t>()[r];
    for (int i = 0; i < D; ++i) {
      double shift = table.ptr<float>()[(t * P + 0) * D + i], scale = table.ptr<float>()[(t * P + 1) * D + i];
      double ref = x.ptr<float>()[r * D + i] * inv * w.ptr<float>()[i] * (1 + scale) + shift;
      ASSERT_NEAR(y.ptr<float>()[r * D + i], ref, 1e-5);
    }
  }
  Tensor x0 = x.clone();
  be->gated_residual(x, y, table, 2, idx);
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < D; ++i) {
      int t = idx.ptr<int32_t>()[r];
      double ref = x0.ptr<float>()[r * D + i] + table.ptr<float>()[(t * P + 2) * D + i] * y.ptr<float>()[r * D + i];
      ASSERT_NEAR(x.ptr<float>()[r * D + i], ref, 1e-6);
    }
  Tensor bad = idx32({3, 0, 9, 2, 1});
  EXPECT_THROW(be->rms_norm_modulate(x, w, 1e-5f, table, 0, 1, bad, y), Error);
}

// Attention with GQA, partial rotary, q/k norm, causal and segments, against a float64 evaluation.
TEST(BackendCpu, SelfAttentionMatchesFloat64Definition) {
  auto be = make_cpu_backend();
  std::mt19937 g(5);
  const int R = 11, Hq = 4, Hkv = 2, Dh = 8, rot = 6, W = (Hq + 2 * Hkv) * Dh;
  for (bool causal : {false, true})
    for (bool segmented : {false, true}) {
      Tensor qkv = randn({R, W}, g), wq = randn({Dh}, g), wk = randn({Dh}, g);
      Tensor cos = randn({R, rot}, g), sin = randn({R, rot}, g);
      Tensor orig = qkv.clone();
      AttentionSpec s;
      s.heads_q = Hq;
      s.heads_kv = Hkv;
      s.head_dim = Dh;
      s.scale = 0.3f;
      s.causal = causal;
      s.qk_norm = true;
      s.qk_norm_eps = 1e-5f;
      s.q_norm_weight = &wq;
      s.k_norm_weight = &wk;
      s.rotary_dim = rot;
      s.cos = &cos;
      s.sin = &sin;
      if (segmented) s.segments = {0, 4, 4, 11};
      Tensor out = be->empty({R, Hq * Dh}, DType::F32);
      be->self_attention(qkv, s, out);
      // Reference.
      auto prep = [&](int r, int head, const float* w) {
        std::vector<double> x(Dh), y(Dh);
        double ss = 0;
        for (int c = 0; c < Dh; ++c) ss += double(orig.ptr<float>()[r * W + head * Dh + c]) * orig.ptr<float>()[r * W + head * Dh + c];
        for (int c = 0; c < Dh; ++c) x[c] = orig.ptr<float>()[r * W + head * Dh + c] / std::sqrt(ss / Dh + 1e-5) * w[c];
        y = x;
        for (int j = 0; j < rot / 2; ++j) {
          double c0 = cos.ptr<float>()[r * rot + j], s0 = sin.ptr<float>()[r * rot + j];
          double c1 = cos.ptr<float>()[r * rot + j + rot / 2], s1 = sin.ptr<float>()[r * rot + j + rot / 2];
          y[j] = x[j] * c0 - x[j + rot / 2] * s0;
          y[j + rot / 2] = x[j + rot / 2] * c1 + x[j] * s1;
        }
        return y;
      };
      for (int i = 0; i < R; ++i)
        for (int h = 0; h < Hq; ++h) {
          int hk = h / (Hq / Hkv);
          int b = 0, e = R;
          if (segmented) {
            b = i < 4 ? 0 : 4;
            e = i < 4 ? 4 : 11;
          }
          int last = causal ? i + 1 : e;
          auto q = prep(i, h, wq.ptr<float>());
          std::vector<double> sc;
          double mx = -1e300;
          for (int j = b; j < last; ++j) {
            auto k = prep(j, Hq + hk, wk.ptr<float>());
            double d = 0;
            for (int c = 0; c < Dh; ++c) d += q[c] * k[c];
            sc.push_back(d * 0.3);
            mx = std::max(mx, sc.back());
          }
          double sum = 0;
          for (double& v : sc) sum += (v = std::exp(v - mx));
          for (int c = 0; c < Dh; ++c) {
            double o = 0;
            for (int j = b; j < last; ++j) o += sc[j - b] / sum * orig.ptr<float>()[j * W + (Hq + Hkv + hk) * Dh + c];
            ASSERT_NEAR(out.ptr<float>()[i * Hq * Dh + h * Dh + c], o, 2e-5) << causal << segmented;
          }
        }
    }
}

TEST(BackendCpu, SwigluScatterGather) {
  auto be = make_cpu_backend();
  std::mt19937 g(6);
  Tensor u = randn({3, 8}, g), a = be->empty({3, 4}, DType::F32);
  be->swiglu(u, true, a);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 4; ++i) {
      double v = u.ptr<float>()[r * 8 + i], gt = u.ptr<float>()[r * 8 + 4 + i];
      ASSERT_NEAR(a.ptr<float>()[r * 4 + i], v * gt / (1 + std::exp(-gt)), 1e-6);
    }
  Tensor src = randn({3, 2}, g), dst = be->zeros({5, 2}, DType::F32), idx = idx32({4, 0, 2});
  be->scatter_rows(src, idx, dst);
  EXPECT_EQ(dst.ptr<float>()[8], src.ptr<float>()[0]);
  EXPECT_EQ(dst.ptr<float>()[2], 0.f);
  Tensor back = be->empty({3, 2}, DType::F32);
  be->gather_rows(dst, idx, back);
  EXPECT_EQ(max_abs_diff(back, src), 0.0);
  Tensor oob = idx32({5, 0, 2});
  EXPECT_THROW(be->scatter_rows(src, oob, dst), Error);
}

// The fused "gated residual, then RMSNorm + modulate" op (the Backend default the CPU uses) equals the two ops in
// sequence bit for bit, and the float64 definition to f32 rounding, with a gate table and a modulation table of
// different shapes read through different row indices (a block's table, then norm_out's [T, 2, D] table).
TEST(BackendCpu, GatedResidualModulateIsTheTwoOpsInSequence) {
  auto be = make_cpu_backend();
  std::mt19937 g(7);
  const int R = 7, D = 13, GR = 6, GP = 6, MR = 2, MP = 2, gate_param = 5, shift_param = 0, scale_param = 1;
  const float eps = 1e-6f;
  Tensor x = randn({R, D}, g), y = randn({R, D}, g), w = randn({D}, g, 0.3f);
  Tensor gate_table = randn({GR, GP, D}, g, 0.5f), table = randn({MR, MP, D}, g, 0.5f);
  Tensor gate_idx = idx32({5, 0, 3, 3, 1, 2, 4}), idx = idx32({1, 0, 0, 1, 1, 0, 1});

  Tensor x_fused = x.clone(), h_fused = be->empty({R, D}, DType::F32);
  be->gated_residual_modulate(x_fused, y, gate_table, gate_param, gate_idx, w, eps, table, shift_param, scale_param,
                              idx, h_fused);
  Tensor x_pair = x.clone(), h_pair = be->empty({R, D}, DType::F32);
  be->gated_residual(x_pair, y, gate_table, gate_param, gate_idx);
  be->rms_norm_modulate(x_pair, w, eps, table, shift_param, scale_param, idx, h_pair);
  EXPECT_EQ(max_abs_diff(x_fused, x_pair), 0.0);
  EXPECT_EQ(max_abs_diff(h_fused, h_pair), 0.0);

  // The definition in float64 on the f32 values of the updated residual. Tolerances: x' is one f32 multiply-add
  // (1e-6 absolute at these magnitudes); h adds the f32 norm and modulate of |values| of a few units (1e-5).
  auto at = [D](const Tensor& t, int64_t row, int64_t i) { return double(t.ptr<float>()[row * D + i]); };
  for (int r = 0; r < R; ++r) {
    const int gt = gate_idx.ptr<int32_t>()[r], mt = idx.ptr<int32_t>()[r];
    double ss = 0;
    for (int i = 0; i < D; ++i) {
      const double want = at(x, r, i) + at(gate_table, gt * GP + gate_param, i) * at(y, r, i);
      ASSERT_NEAR(at(x_fused, r, i), want, 1e-6);
      ss += at(x_fused, r, i) * at(x_fused, r, i);
    }
    const double inv = 1 / std::sqrt(ss / D + eps);
    for (int i = 0; i < D; ++i) {
      const double want = at(x_fused, r, i) * inv * w.ptr<float>()[i] * (1 + at(table, mt * MP + scale_param, i)) +
                          at(table, mt * MP + shift_param, i);
      ASSERT_NEAR(at(h_fused, r, i), want, 1e-5);
    }
  }

  Tensor bad_gate = idx32({5, 0, 3, 6, 1, 2, 4}), bad = idx32({1, 0, 0, 1, 2, 0, 1});
  EXPECT_THROW(be->gated_residual_modulate(x_fused, y, gate_table, gate_param, bad_gate, w, eps, table, shift_param,
                                           scale_param, idx, h_fused),
               Error);
  EXPECT_THROW(be->gated_residual_modulate(x_fused, y, gate_table, gate_param, gate_idx, w, eps, table, shift_param,
                                           scale_param, bad, h_fused),
               Error);
}
