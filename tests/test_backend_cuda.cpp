// The CUDA backend's ops against the CPU backend (the f32 oracle) on fresh random inputs at awkward sizes. Skips
// (GTEST_SKIP, with the reason) where the build has no CUDA or the machine has no GPU.
//
// Method: inputs are drawn in f32 and rounded to the dtype the GPU stores them in; the CPU op runs on exactly those
// rounded values, so the comparison measures only the GPU's own arithmetic and its final rounding. Outputs are
// poisoned with NaN before each op so that an element the GPU never writes fails the test.
//
// Tolerances (relative L2 = ||gpu − cpu|| / ||cpu||):
// - bf16 outputs of ops that compute in f32 and round once: the rounding alone is up to 2^-9 per element
//   (≈ 1.1e-3 RMS relative); we allow 2^-8 ≈ 3.9e-3.
// - f32 outputs (f32 GEMMs without TF32, bf16 products accumulated in f32, f32 norms): only summation order and
//   fast-math intrinsics differ; 1e-5 (TF32 would show ≈ 1e-3 and fail).
// - attention: q and k are rounded to bf16 after their norm and rotation, P is rounded to bf16 before P·V (flash
//   semantics), and the output is rounded: 1e-2, with the cosine similarity above 0.9999.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backend/backend.h"
#include "backend/cuda_arch.h"
#include "random_tensor.h"
#include "util/scoped_env.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

using namespace h3;

#ifndef H3_HAVE_CUDA
TEST(BackendCuda, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

namespace {

constexpr double kBf16Tol = 1.0 / 256;  // 2^-8
constexpr double kF32Tol = 1e-5;
constexpr double kAttentionTol = 1e-2;

// The f32 values a tensor has after storage in `dt`.
Tensor rounded(const Tensor& t, DType dt) { return dt == DType::F32 ? t.clone() : t.to(dt).to(DType::F32); }

Tensor idx32(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  std::copy(v.begin(), v.end(), t.ptr<int32_t>());
  return t;
}

int64_t count_non_finite(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += !std::isfinite(t.at(i));
  return n;
}


// One CUDA backend shared by the tests (made on first use), and the CPU oracle.
class BackendCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device on this machine";
    if (!shared_gpu()) shared_gpu() = make_cuda_backend();
    gpu = shared_gpu().get();
    cpu = make_cpu_backend();
  }
  static std::unique_ptr<Backend>& shared_gpu() {
    static std::unique_ptr<Backend> be;
    return be;
  }

  // Upload of a host f32 tensor stored as `dt`; the returned CPU copy holds exactly the stored values.
  Tensor up(const Tensor& host, DType dt, Tensor* exact = nullptr) {
    if (exact) *exact = rounded(host, dt);
    return gpu->upload(host, dt);
  }
  Tensor poisoned(const Shape& s, DType dt) {
    Tensor t = gpu->empty(s, dt);
    gpu->fill(t, NAN);
    return t;
  }
  // Downloads a GPU result, checks that every element was written (finite) and compares with the oracle.
  void expect_close(const Tensor& gpu_t, const Tensor& ref, double tol, const std::string& what) {
    Tensor h = gpu->download(gpu_t).to(DType::F32);
    ASSERT_EQ(count_non_finite(h), 0) << what << ": elements left unwritten (NaN poison) or non-finite";
    const double r = rel_l2(h, ref);
    EXPECT_LE(r, tol) << what;
  }

  Backend* gpu = nullptr;
  std::unique_ptr<Backend> cpu;
  std::mt19937 rng{20251129};
};

class BackendCudaMemory : public BackendCudaTest {};
class BackendCudaGemm : public BackendCudaTest {};
class BackendCudaRows : public BackendCudaTest {};
class BackendCudaAttention : public BackendCudaTest {
 protected:
  void check_hopper_at_dit_length(Backend& be);
};

}  // namespace

TEST_F(BackendCudaMemory, UploadDownloadConvertRoundTripsExactly) {
  for (int64_t n : {int64_t(1), int64_t(37), int64_t(1007), int64_t(20'000'003)}) {  // the last spans two staging chunks
    Tensor h = randn({n}, rng, 3.f);
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      Tensor d = gpu->upload(h, dt);
      Tensor back = gpu->download(d);
      ASSERT_EQ(back.dtype(), dt);
      Tensor want = h.to(dt);
      ASSERT_EQ(std::memcmp(back.data(), want.data(), want.nbytes()), 0) << "upload as " << dtype_name(dt) << " n=" << n;
      // Upload of already-16-bit data (raw copy) and device conversion back to f32.
      Tensor d2 = gpu->upload(want, dt);
      Tensor f = gpu->empty({n}, DType::F32);
      gpu->convert(d2, f);
      ASSERT_EQ(max_abs_diff(gpu->download(f), want.to(DType::F32)), 0.0) << dtype_name(dt) << " n=" << n;
    }
  }
  Tensor ih = idx32({5, -3, 7, 1 << 30});
  Tensor ib = gpu->download(gpu->upload(ih, DType::I32));
  EXPECT_EQ(std::memcmp(ib.data(), ih.data(), ih.nbytes()), 0);
}

TEST_F(BackendCudaMemory, FillAndCachedAllocation) {
  Tensor t = gpu->empty({1007, 75}, DType::BF16);
  gpu->fill(t, 1.5f);
  Tensor h = gpu->download(t).to(DType::F32);
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(h.ptr<float>()[i], 1.5f);
  Tensor z = gpu->zeros({3, 5}, DType::I32);
  Tensor zh = gpu->download(z);
  for (int i = 0; i < 15; ++i) ASSERT_EQ(zh.ptr<int32_t>()[i], 0);
  // Repeated allocations of the same sizes come from the cache.
  for (int i = 0; i < 3; ++i) {
    Tensor a = gpu->empty({4096, 5376}, DType::BF16), b = gpu->empty({37}, DType::F32);
  }
  const auto before = cuda_memory_stats(*gpu).device_allocations;
  for (int i = 0; i < 10; ++i) {
    Tensor a = gpu->empty({4096, 5376}, DType::BF16), b = gpu->empty({37}, DType::F32);
  }
  EXPECT_EQ(cuda_memory_stats(*gpu).device_allocations, before);
  // Random fill: finite, mean ≈ 0, std ≈ the requested one, and never zeros.
  Tensor r = gpu->empty({1 << 20}, DType::BF16);
  cuda_fill_random_normal(*gpu, r, 7, 0.02f);
  Tensor rh = gpu->download(r).to(DType::F32);
  double s = 0, ss = 0;
  int64_t zeros = 0;
  for (int64_t i = 0; i < rh.numel(); ++i) {
    const double v = rh.ptr<float>()[i];
    s += v;
    ss += v * v;
    zeros += v == 0;
  }
  const double mean = s / rh.numel(), sd = std::sqrt(ss / rh.numel() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(sd, 0.02, 2e-4);
  EXPECT_LT(zeros, 10);
}

TEST_F(BackendCudaGemm, LinearMatchesCpuAtAwkwardSizes) {
  struct Case {
    int64_t M, K, N;
  };
  for (Case c : {Case{1, 64, 64}, Case{37, 130, 67}, Case{1007, 256, 320}, Case{1000 + 7, 5376, 96}, Case{5, 7, 3}}) {
    for (auto [ab, yt] : {std::pair{DType::BF16, DType::BF16}, std::pair{DType::BF16, DType::F32},
                          std::pair{DType::F32, DType::F32}, std::pair{DType::F16, DType::F16}}) {
      for (bool with_bias : {false, true}) {
        Tensor xr, wr, br;
        Tensor x = up(randn({c.M, c.K}, rng), ab, &xr);
        Tensor w = up(randn({c.N, c.K}, rng, 0.05f), ab, &wr);
        Tensor b = up(randn({c.N}, rng), yt, &br);
        Tensor y = poisoned({c.M, c.N}, yt);
        gpu->linear(x, w, with_bias ? &b : nullptr, y);
        Tensor ref = cpu->empty({c.M, c.N}, DType::F32);
        cpu->linear(xr, wr, with_bias ? &br : nullptr, ref);
        expect_close(y, ref, yt == DType::F32 ? kF32Tol : kBf16Tol,
                     cat("linear ", c.M, "x", c.K, "x", c.N, " ", dtype_name(ab), "->", dtype_name(yt),
                         with_bias ? " +bias" : ""));
      }
    }
  }
}

TEST_F(BackendCudaGemm, MisalignedOperandsAndTheCublasTwinAgree) {
  const int64_t M = 301, K = 131, N = 77;  // odd K: row r of a bf16 matrix starts 2·K·r bytes in
  Tensor xr;
  Tensor xfull = up(randn({M + 1, K}, rng), DType::BF16, &xr);
  Tensor x = xfull.slice(1, M + 1);  // starts 262 bytes into its block: not 16-byte aligned
  Tensor wr, br;
  Tensor w = up(randn({N, K}, rng, 0.1f), DType::BF16, &wr);
  Tensor b = up(randn({N}, rng), DType::BF16, &br);
  Tensor y = poisoned({M, N}, DType::BF16);
  gpu->linear(x, w, &b, y);
  Tensor ref = cpu->empty({M, N}, DType::F32);
  cpu->linear(xr.slice(1, M + 1), wr, &br, ref);
  expect_close(y, ref, kBf16Tol, "misaligned linear");

  ScopedEnv off("H3_DISABLE_CUBLASLT", "1");
  auto twin = make_cuda_backend();
  Tensor y2 = twin->empty({M, N}, DType::F32);
  twin->linear(twin->upload(xr.slice(1, M + 1), DType::BF16), twin->upload(wr, DType::BF16),
               nullptr, y2);
  Tensor ref2 = cpu->empty({M, N}, DType::F32);
  cpu->linear(xr.slice(1, M + 1), wr, nullptr, ref2);
  Tensor h2 = twin->download(y2);
  EXPECT_LE(rel_l2(h2, ref2), kF32Tol) << "cublasGemmEx twin";
}

TEST_F(BackendCudaRows, NormsMatchCpu) {
  for (int64_t R : {int64_t(1), int64_t(37), int64_t(1007)}) {
    for (int64_t D : {int64_t(5376), int64_t(128), int64_t(75)}) {  // 75: the scalar (non-vector) path
      for (auto [xt, yt] : {std::pair{DType::BF16, DType::BF16}, std::pair{DType::BF16, DType::F32},
                            std::pair{DType::F32, DType::F32}}) {
        const std::string at = cat(R, "x", D, " ", dtype_name(xt), "->", dtype_name(yt));
        const double tol = yt == DType::F32 ? kF32Tol : kBf16Tol;
        Tensor xr, wr, br;
        Tensor x = up(randn({R, D}, rng, 2.f, 0.3f), xt, &xr);
        Tensor w = up(randn({D}, rng, 0.5f, 1.f), DType::BF16, &wr);
        Tensor b = up(randn({D}, rng), DType::F32, &br);
        for (bool with_w : {false, true}) {
          Tensor y = poisoned({R, D}, yt), ref = cpu->empty({R, D}, DType::F32);
          gpu->rms_norm(x, with_w ? &w : nullptr, 1e-5f, y);
          cpu->rms_norm(xr, with_w ? &wr : nullptr, 1e-5f, ref);
          expect_close(y, ref, tol, "rms_norm " + at);
          gpu->layer_norm(x, with_w ? &w : nullptr, with_w ? &b : nullptr, 1e-6f, y);
          cpu->layer_norm(xr, with_w ? &wr : nullptr, with_w ? &br : nullptr, 1e-6f, ref);
          expect_close(y, ref, tol, "layer_norm " + at);
        }
      }
    }
  }
}

TEST_F(BackendCudaRows, ModulateAndGatedResidualUseEveryTableRow) {
  const int TR = 6, P = 6;  // e.g. 2 timesteps x 3 modalities
  for (int64_t R : {int64_t(1), int64_t(37), int64_t(1007)}) {
    for (int64_t D : {int64_t(5376), int64_t(75)}) {
      std::uniform_int_distribution<int32_t> pick(0, TR - 1);
      std::vector<int32_t> rows(R);
      for (auto& v : rows) v = pick(rng);
      Tensor idx_h = idx32(rows), idx = gpu->upload(idx_h, DType::I32);
      Tensor xr, wr, tr;
      Tensor x = up(randn({R, D}, rng, 1.5f), DType::BF16, &xr);
      Tensor w = up(randn({D}, rng, 0.3f, 1.f), DType::BF16, &wr);
      Tensor table = up(randn({TR, P, D}, rng, 0.5f), DType::BF16, &tr);
      Tensor y = poisoned({R, D}, DType::BF16), ref = cpu->empty({R, D}, DType::F32);
      gpu->rms_norm_modulate(x, w, 1e-5f, table, 3, 4, idx, y);
      cpu->rms_norm_modulate(xr, wr, 1e-5f, tr, 3, 4, idx_h, ref);
      expect_close(y, ref, kBf16Tol, cat("rms_norm_modulate ", R, "x", D));
      // gate · branch + residual, with the branch taken as the GPU's (stored) output.
      Tensor yr = gpu->download(y).to(DType::F32);
      gpu->gated_residual(x, y, table, 5, idx);
      cpu->gated_residual(xr, yr, tr, 5, idx_h);
      expect_close(x, xr, kBf16Tol, cat("gated_residual ", R, "x", D));
    }
  }
  Tensor x = gpu->upload(randn({4, 8}, rng), DType::BF16), w = gpu->upload(randn({8}, rng), DType::BF16);
  Tensor t = gpu->upload(randn({2, 6, 8}, rng), DType::BF16), y = gpu->empty({4, 8}, DType::BF16);
  Tensor bad = gpu->upload(idx32({0, 1, 2, 1}), DType::I32);  // table row 2 of 2
  gpu->rms_norm_modulate(x, w, 1e-5f, t, 0, 1, bad, y);
  EXPECT_THROW(gpu->synchronize(), Error);
  gpu->gated_residual(x, y, t, 2, bad);
  EXPECT_THROW(gpu->synchronize(), Error);
}

// gated_residual_modulate: the fused kernel and its fallbacks (D % 8 != 0, a misaligned operand, D too wide for the
// register-cached row) against the CPU op, and bit for bit against the H3_DISABLE_FUSED_MODULATE twin (the two
// unfused kernels). As in the DiT, the gate table [6, 6, D] (a block's) and the modulation table [3, 2, D]
// (norm_out's) are different tensors read through different row indices.
// Tolerances: bf16 stores x' = x + g·y rounded, normalizes the rounded values and rounds h; the CPU keeps x' in f32.
// Two bf16 roundings in the chain (≈ 1.6e-3 RMS relative) stay under kBf16Tol; f32 storage: kF32Tol.
TEST_F(BackendCudaRows, GatedResidualModulateMatchesCpuAndTheUnfusedTwin) {
  std::unique_ptr<Backend> twin;
  {
    ScopedEnv off("H3_DISABLE_FUSED_MODULATE", "1");
    twin = make_cuda_backend();
  }
  ASSERT_NE(cuda_backend_summary(*twin).find("H3_DISABLE_FUSED_MODULATE"), std::string::npos)
      << cuda_backend_summary(*twin);
  const int64_t GR = 6, GP = 6, MR = 3, MP = 2;
  const int gate_param = 5, shift_param = 0, scale_param = 1;
  const float eps = 1e-6f;
  // `host` stored as dt on `be`; misaligned: one element past a 16-byte boundary (the fused kernel then refuses).
  auto place = [](Backend& be, const Tensor& host, DType dt, bool misaligned) {
    if (!misaligned) return be.upload(host, dt);
    Tensor flat = be.empty({host.numel() + 1}, dt);
    Tensor view = flat.slice(1, host.numel() + 1).reshape(host.shape());
    be.convert(be.upload(host, dt), view);
    return view;
  };
  auto random_rows = [&](int64_t n, int64_t table_rows) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(table_rows - 1));
    std::vector<int32_t> v(n);
    for (auto& t : v) t = pick(rng);
    return idx32(v);
  };
  struct Case {
    int64_t R, D;
    bool misaligned;
  };
  // D: 8 (one group per row), the DiT's 5376, 4104 (the last group of threads partly idle), and the widths the
  // fused kernel leaves to the two unfused kernels: 75 (D % 8 != 0) and 8200 (too wide for the registers).
  std::vector<Case> cases;
  for (int64_t R : {int64_t(1), int64_t(7), int64_t(300)})
    for (int64_t D : {int64_t(8), int64_t(5376), int64_t(4104), int64_t(75), int64_t(8200)})
      cases.push_back({R, D, false});
  cases.push_back({7, 5376, true});
  for (const Case& c : cases) {
    for (DType dt : {DType::BF16, DType::F32}) {
      const std::string at = cat(c.R, "x", c.D, " ", dtype_name(dt), c.misaligned ? " misaligned" : "");
      const Tensor xh = randn({c.R, c.D}, rng, 1.5f), yh = randn({c.R, c.D}, rng);
      const Tensor wh = randn({c.D}, rng, 0.3f, 1.f);
      const Tensor gate_h = randn({GR, GP, c.D}, rng, 0.5f), mod_h = randn({MR, MP, c.D}, rng, 0.5f);
      const Tensor gate_idx = random_rows(c.R, GR), mod_idx = random_rows(c.R, MR);

      // The CPU op on the stored values.
      Tensor x_ref = rounded(xh, dt), h_ref = cpu->empty({c.R, c.D}, DType::F32);
      cpu->gated_residual_modulate(x_ref, rounded(yh, dt), rounded(gate_h, dt), gate_param, gate_idx, rounded(wh, dt),
                                   eps, rounded(mod_h, dt), shift_param, scale_param, mod_idx, h_ref);

      // The same inputs through `be`; returns {x, h} as downloaded.
      auto run_on = [&](Backend& be) {
        Tensor x = place(be, xh, dt, c.misaligned);
        Tensor h = be.empty({c.R, c.D}, dt);
        be.fill(h, NAN);
        be.gated_residual_modulate(x, be.upload(yh, dt), be.upload(gate_h, dt), gate_param,
                                   be.upload(gate_idx, DType::I32), be.upload(wh, dt), eps, be.upload(mod_h, dt),
                                   shift_param, scale_param, be.upload(mod_idx, DType::I32), h);
        return std::pair{be.download(x), be.download(h)};
      };
      const auto [x_fused, h_fused] = run_on(*gpu);
      const double tol = dt == DType::F32 ? kF32Tol : kBf16Tol;
      const Tensor hf = h_fused.to(DType::F32);
      ASSERT_EQ(count_non_finite(hf), 0) << at << ": elements left unwritten (NaN poison) or non-finite";
      EXPECT_LE(rel_l2(x_fused.to(DType::F32), x_ref), tol) << "residual " << at;
      EXPECT_LE(rel_l2(hf, h_ref), tol) << "modulated " << at;

      const auto [x_twin, h_twin] = run_on(*twin);
      EXPECT_EQ(std::memcmp(x_fused.data(), x_twin.data(), x_fused.nbytes()), 0) << "residual vs twin " << at;
      EXPECT_EQ(std::memcmp(h_fused.data(), h_twin.data(), h_fused.nbytes()), 0) << "modulated vs twin " << at;
    }
  }
}

// residual_rms_norm (x += y·scale, then h = RMSNorm(x)·w): the fused one-pass kernel against the CPU op and,
// bit for bit, against its two-kernel twin — the video VAE's f32 residual with f16 branch and output, bf16 rows, with
// and without scale and weight, and the widths the fused kernel leaves to the two kernels (75: D % 8 != 0; 8200:
// too wide for the registers).
TEST_F(BackendCudaRows, ResidualRmsNormMatchesCpuAndTheUnfusedTwin) {
  std::unique_ptr<Backend> twin;
  {
    ScopedEnv off("H3_DISABLE_FUSED_RESIDUAL_NORM", "1");
    twin = make_cuda_backend();
  }
  ASSERT_NE(cuda_backend_summary(*twin).find("H3_DISABLE_FUSED_RESIDUAL_NORM"), std::string::npos);
  const float eps = 1e-5f;
  struct Types {
    DType x, y, h;
  };
  for (int64_t R : {int64_t(1), int64_t(7), int64_t(300)})
    for (int64_t D : {int64_t(2048), int64_t(8), int64_t(75), int64_t(8200)})
      for (Types t : {Types{DType::F32, DType::F16, DType::F16}, Types{DType::BF16, DType::BF16, DType::BF16}})
        for (int variant = 0; variant < 3; ++variant) {  // scale and weight; scale only; weight only
          const bool with_scale = variant != 2, with_w = variant != 1;
          const std::string at = cat(R, "x", D, " ", dtype_name(t.x), "/", dtype_name(t.y), "/", dtype_name(t.h),
                                     with_scale ? " scale" : "", with_w ? " weight" : "");
          const Tensor xh = randn({R, D}, rng, 1.5f), yh = randn({R, D}, rng), sh = randn({D}, rng, 0.5f);
          const Tensor wh = randn({D}, rng, 0.3f, 1.f);
          Tensor x_ref = rounded(xh, t.x), h_ref = cpu->empty({R, D}, DType::F32);
          const Tensor s_ref = sh, w_ref = rounded(wh, t.h);
          cpu->residual_rms_norm(x_ref, rounded(yh, t.y), with_scale ? &s_ref : nullptr, with_w ? &w_ref : nullptr,
                                 eps, h_ref);
          auto run_on = [&](Backend& be) {
            Tensor x = be.upload(xh, t.x), h = be.empty({R, D}, t.h);
            be.fill(h, NAN);
            const Tensor sc = be.upload(sh, DType::F32), w = be.upload(wh, t.h);
            be.residual_rms_norm(x, be.upload(yh, t.y), with_scale ? &sc : nullptr, with_w ? &w : nullptr, eps, h);
            return std::pair{be.download(x), be.download(h)};
          };
          const auto [x_fused, h_fused] = run_on(*gpu);
          const Tensor hf = h_fused.to(DType::F32);
          ASSERT_EQ(count_non_finite(hf), 0) << at << ": elements left unwritten (NaN poison) or non-finite";
          EXPECT_LE(rel_l2(x_fused.to(DType::F32), x_ref), t.x == DType::F32 ? kF32Tol : kBf16Tol) << "residual " << at;
          EXPECT_LE(rel_l2(hf, h_ref), kBf16Tol) << "normalized " << at;
          const auto [x_twin, h_twin] = run_on(*twin);
          EXPECT_EQ(std::memcmp(x_fused.data(), x_twin.data(), x_fused.nbytes()), 0) << "residual vs twin " << at;
          EXPECT_EQ(std::memcmp(h_fused.data(), h_twin.data(), h_fused.nbytes()), 0) << "normalized vs twin " << at;
        }
}

TEST_F(BackendCudaRows, GatedResidualModulateRejectsBadTablesAndRows) {
  for (int64_t D : {int64_t(8), int64_t(75)}) {  // the fused kernel and the fallback
    Tensor x = gpu->upload(randn({4, D}, rng), DType::BF16), y = gpu->upload(randn({4, D}, rng), DType::BF16);
    Tensor w = gpu->upload(randn({D}, rng), DType::BF16), h = gpu->empty({4, D}, DType::BF16);
    Tensor gate = gpu->upload(randn({2, 6, D}, rng), DType::BF16), mod = gpu->upload(randn({2, 2, D}, rng), DType::BF16);
    Tensor good = gpu->upload(idx32({0, 1, 1, 0}), DType::I32);
    Tensor bad = gpu->upload(idx32({0, 1, 2, 1}), DType::I32);  // table row 2 of 2
    gpu->gated_residual_modulate(x, y, gate, 5, bad, w, 1e-6f, mod, 0, 1, good, h);
    EXPECT_THROW(gpu->synchronize(), Error) << "bad gate row, D=" << D;
    gpu->gated_residual_modulate(x, y, gate, 5, good, w, 1e-6f, mod, 0, 1, bad, h);
    EXPECT_THROW(gpu->synchronize(), Error) << "bad modulation row, D=" << D;
    gpu->gated_residual_modulate(x, y, gate, 5, good, w, 1e-6f, mod, 0, 1, good, h);
    EXPECT_NO_THROW(gpu->synchronize()) << "D=" << D;
    EXPECT_THROW(gpu->gated_residual_modulate(x, y, gate, 6, good, w, 1e-6f, mod, 0, 1, good, h), Error);
    EXPECT_THROW(gpu->gated_residual_modulate(x, y, gate, 5, good, w, 1e-6f, mod, 0, 2, good, h), Error);
    Tensor narrow = gpu->upload(randn({2, 2, D + 1}, rng), DType::BF16);
    EXPECT_THROW(gpu->gated_residual_modulate(x, y, gate, 5, good, w, 1e-6f, narrow, 0, 1, good, h), Error);
  }
}

TEST_F(BackendCudaRows, ResidualSwigluActivations) {
  for (int64_t R : {int64_t(1), int64_t(37), int64_t(1007)}) {
    for (int64_t D : {int64_t(14336), int64_t(75)}) {
      const std::string at = cat(R, "x", D);
      Tensor xr, yr, sr, ur;
      Tensor x = up(randn({R, D}, rng), DType::BF16, &xr);
      Tensor y = up(randn({R, D}, rng), DType::BF16, &yr);
      Tensor sc = up(randn({D}, rng), DType::F32, &sr);
      gpu->residual_add(x, y, &sc);
      cpu->residual_add(xr, yr, &sr);
      expect_close(x, xr, kBf16Tol, "residual_add scaled " + at);
      Tensor x2r;
      Tensor x2 = up(randn({R, D}, rng), DType::F32, &x2r);
      gpu->residual_add(x2, y, nullptr);
      cpu->residual_add(x2r, yr, nullptr);
      expect_close(x2, x2r, kF32Tol, "residual_add f32 " + at);
      Tensor u = up(randn({R, 2 * D}, rng, 2.f), DType::BF16, &ur);
      for (bool value_first : {true, false}) {
        Tensor a = poisoned({R, D}, DType::BF16), ref = cpu->empty({R, D}, DType::F32);
        gpu->swiglu(u, value_first, a);
        cpu->swiglu(ur, value_first, ref);
        expect_close(a, ref, kBf16Tol, cat("swiglu ", value_first, " ", at));
      }
      Tensor a = poisoned({R, D}, DType::BF16), ref = cpu->empty({R, D}, DType::F32);
      gpu->silu(x, a);
      cpu->silu(gpu->download(x).to(DType::F32), ref);
      expect_close(a, ref, kBf16Tol, "silu " + at);
      Tensor xs = gpu->download(x).to(DType::F32);
      for (bool tanh_approx : {true, false}) {
        gpu->gelu(x, tanh_approx, a);
        cpu->gelu(xs, tanh_approx, ref);
        expect_close(a, ref, kBf16Tol, cat("gelu ", tanh_approx, " ", at));
      }
    }
  }
}

TEST_F(BackendCudaRows, ScatterGatherConvert) {
  for (int64_t D : {int64_t(5376), int64_t(96), int64_t(75)}) {
    const int64_t n = 1007, rows = 1200;
    std::vector<int32_t> perm(rows);
    for (int32_t i = 0; i < rows; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    perm.resize(n);
    Tensor idx_h = idx32(perm), idx = gpu->upload(idx_h, DType::I32);
    Tensor src_h = randn({n, D}, rng);
    Tensor src = gpu->upload(src_h, DType::F32);
    Tensor dst = gpu->empty({rows, D}, DType::BF16);
    gpu->fill(dst, 0.25f);
    gpu->scatter_rows(src, idx, dst);  // f32 -> bf16 on the way
    Tensor ref = cpu->empty({rows, D}, DType::F32);
    cpu->fill(ref, 0.25f);
    cpu->scatter_rows(src_h, idx_h, ref);
    expect_close(dst, ref, kBf16Tol, cat("scatter_rows ", D));
    Tensor back = poisoned({n, D}, DType::F32);
    gpu->gather_rows(dst, idx, back);
    Tensor ref_back = cpu->empty({n, D}, DType::F32);
    cpu->gather_rows(gpu->download(dst).to(DType::F32), idx_h, ref_back);
    expect_close(back, ref_back, 0.0, cat("gather_rows ", D));
  }
  Tensor src = gpu->upload(randn({3, 8}, rng), DType::BF16), dst = gpu->empty({5, 8}, DType::BF16);
  gpu->scatter_rows(src, gpu->upload(idx32({4, 0, 5}), DType::I32), dst);
  EXPECT_THROW(gpu->synchronize(), Error);
}

namespace {

struct AttnCase {
  int R, Hq, Hkv, Dh, rot;
  bool causal, qk_norm;
  std::vector<int64_t> segments;
};

std::string describe(const AttnCase& c) {
  std::string s = cat(c.R, " rows, ", c.Hq, "/", c.Hkv, " heads x ", c.Dh, ", rot ", c.rot, c.causal ? ", causal" : "",
                      c.qk_norm ? ", qk-norm" : "");
  if (!c.segments.empty()) {
    s += ", segments";
    for (int64_t b : c.segments) s += cat(" ", b);
  }
  return s;
}

// Random inputs for one attention case, already rounded to bf16 (what both backends see).
struct AttnInputs {
  Tensor qkv, wq, wk, cos, sin;
  AttentionSpec spec(const AttnCase& c, const Tensor* q_w, const Tensor* k_w, const Tensor* cs, const Tensor* sn) const {
    AttentionSpec s;
    s.heads_q = c.Hq;
    s.heads_kv = c.Hkv;
    s.head_dim = c.Dh;
    s.scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
    s.causal = c.causal;
    s.qk_norm = c.qk_norm;
    s.qk_norm_eps = 1e-5f;
    s.q_norm_weight = q_w;
    s.k_norm_weight = k_w;
    s.rotary_dim = c.rot;
    s.cos = c.rot ? cs : nullptr;
    s.sin = c.rot ? sn : nullptr;
    s.segments = c.segments;
    return s;
  }
};

AttnInputs make_attention_inputs(const AttnCase& c, std::mt19937& g) {
  const int W = (c.Hq + 2 * c.Hkv) * c.Dh;
  AttnInputs in;
  in.qkv = rounded(randn({c.R, W}, g, 1.f), DType::BF16);
  in.wq = rounded(randn({c.Dh}, g, 0.2f, 1.f), DType::BF16);
  in.wk = rounded(randn({c.Dh}, g, 0.2f, 1.f), DType::BF16);
  Tensor ang = randn({c.R, std::max(c.rot, 1)}, g, 3.f);
  in.cos = Tensor::empty({c.R, std::max(c.rot, 1)}, DType::F32);
  in.sin = Tensor::empty({c.R, std::max(c.rot, 1)}, DType::F32);
  for (int64_t i = 0; i < ang.numel(); ++i) {
    in.cos.ptr<float>()[i] = std::cos(ang.ptr<float>()[i]);
    in.sin.ptr<float>()[i] = std::sin(ang.ptr<float>()[i]);
  }
  in.cos = rounded(in.cos, DType::BF16);
  in.sin = rounded(in.sin, DType::BF16);
  return in;
}

// Runs one case on `be` (uploading the inputs; 16-bit `gpu_dt` on the GPU) and returns the output on the host as f32.
Tensor run_attention(Backend& be, const AttnCase& c, const AttnInputs& in, bool poison,
                     DType gpu_dt = DType::BF16) {
  const DType dt = be.device() == Device::CPU ? DType::F32 : gpu_dt;
  Tensor qkv = be.upload(in.qkv, dt), wq = be.upload(in.wq, dt), wk = be.upload(in.wk, dt);
  Tensor cs = be.upload(in.cos, dt), sn = be.upload(in.sin, dt);
  Tensor out = be.empty({c.R, c.Hq * c.Dh}, dt);
  if (poison) be.fill(out, NAN);
  be.self_attention(qkv, in.spec(c, &wq, &wk, &cs, &sn), out);
  return be.download(out).to(DType::F32);
}

std::vector<AttnCase> attention_cases() {
  return {
      {1007, 56, 56, 128, 96, false, true, {}},                 // the DiT: 56 x 128, 96 rotated channels
      {37, 56, 56, 128, 96, false, true, {}},
      {1, 56, 56, 128, 96, false, true, {}},
      {1007, 64, 8, 64, 64, true, true, {}},                    // GQA 64/8, causal (a text decoder)
      {300, 16, 16, 72, 0, false, false, {0, 100, 100, 220, 300}},  // head_dim 72, unequal segments (one empty)
      {600, 8, 4, 128, 32, false, true, {0, 200, 400, 600}},     // equal segments: one batched call
      {333, 8, 2, 64, 0, true, false, {0, 111, 222, 333}},       // causal within equal segments
  };
}

}  // namespace

TEST_F(BackendCudaAttention, MatchesCpu) {
  for (const AttnCase& c : attention_cases()) {
    AttnInputs in = make_attention_inputs(c, rng);
    Tensor got = run_attention(*gpu, c, in, /*poison=*/true);
    Tensor want = run_attention(*cpu, c, in, false);
    ASSERT_EQ(count_non_finite(got), 0) << describe(c) << ": elements left unwritten";
    EXPECT_LE(rel_l2(got, want), kAttentionTol) << describe(c) << " via " << cuda_last_attention_path(*gpu);
    EXPECT_GE(cosine(got, want), 0.9999) << describe(c);
  }
}

TEST_F(BackendCudaAttention, FlashFallbackMatchesCpu) {
  ScopedEnv off("H3_DISABLE_CUDNN_ATTENTION", "1");
  ScopedEnv off2("H3_DISABLE_HOPPER_ATTENTION", "1");
  auto flash = make_cuda_backend();
  for (const AttnCase& c : attention_cases()) {
    AttnInputs in = make_attention_inputs(c, rng);
    Tensor got = run_attention(*flash, c, in, /*poison=*/true);
    ASSERT_EQ(cuda_last_attention_path(*flash), "flash");
    Tensor want = run_attention(*cpu, c, in, false);
    ASSERT_EQ(count_non_finite(got), 0) << describe(c) << ": elements left unwritten";
    EXPECT_LE(rel_l2(got, want), kAttentionTol) << describe(c);
    EXPECT_GE(cosine(got, want), 0.9999) << describe(c);
  }
}

// cuDNN's fused SDPA and our flash kernel compute the same function: they agree far more tightly than either
// agrees with the f32 oracle (both round q/k/P/O to bf16 the same way; only accumulation order differs).
TEST_F(BackendCudaAttention, CudnnAndFlashAgree) {
  std::unique_ptr<Backend> flash, cudnn;
  {  // flash only: neither cuDNN nor (where it would apply) our Hopper kernel
    ScopedEnv off("H3_DISABLE_CUDNN_ATTENTION", "1");
    ScopedEnv off2("H3_DISABLE_HOPPER_ATTENTION", "1");
    flash = make_cuda_backend();
  }
  {
    ScopedEnv off("H3_DISABLE_HOPPER_ATTENTION", "1");
    cudnn = make_cuda_backend();
  }
  Backend* gpu = cudnn.get();
  int compared = 0;
  for (const AttnCase& c : attention_cases()) {
    AttnInputs in = make_attention_inputs(c, rng);
    Tensor a = run_attention(*gpu, c, in, true);
    const std::string path = cuda_last_attention_path(*gpu);
    Tensor b = run_attention(*flash, c, in, true);
    ASSERT_EQ(cuda_last_attention_path(*flash), "flash") << describe(c);
    if (path.rfind("cudnn", 0) != 0) {
      std::printf("[ note ] cuDNN did not serve %s (path: %s)\n", describe(c).c_str(), path.c_str());
      continue;
    }
    ++compared;
    EXPECT_LE(rel_l2(a, b), 4e-3) << describe(c) << " via " << path;
  }
  if (compared == 0) GTEST_SKIP() << "cuDNN's SDPA served none of the cases: " << cuda_backend_summary(*gpu);
}

// Attention reading q, k, v in place in the packed rows (the default) and from head-major copies
// (H3_ATTENTION_LAYOUT=head-major) computes the same function: bit for bit with our kernels when the same q/k kernel
// (one warp per head: H3_DISABLE_QK_ROW_KERNEL, the only one that writes head-major copies) prepares both, to
// summation order with cuDNN (its plan may differ with the strides).
TEST_F(BackendCudaAttention, PackedAndHeadMajorLayoutsAgree) {
  std::unique_ptr<Backend> head_major, flash_hm, flash_packed, packed;
  {
    ScopedEnv layout("H3_ATTENTION_LAYOUT", "head-major");
    head_major = make_cuda_backend();
    ScopedEnv off("H3_DISABLE_CUDNN_ATTENTION", "1");
    ScopedEnv off2("H3_DISABLE_HOPPER_ATTENTION", "1");
    flash_hm = make_cuda_backend();
  }
  {
    ScopedEnv warp_per_head("H3_DISABLE_QK_ROW_KERNEL", "1");
    packed = make_cuda_backend();
    ScopedEnv off("H3_DISABLE_CUDNN_ATTENTION", "1");
    ScopedEnv off2("H3_DISABLE_HOPPER_ATTENTION", "1");
    flash_packed = make_cuda_backend();
  }
  for (const AttnCase& c : attention_cases()) {
    AttnInputs in = make_attention_inputs(c, rng);
    Tensor a = run_attention(*packed, c, in, true), b = run_attention(*head_major, c, in, true);
    const std::string pa = cuda_last_attention_path(*packed), pb = cuda_last_attention_path(*head_major);
    EXPECT_LE(rel_l2(a, b), 4e-3) << describe(c) << " via " << pa << " / " << pb;
    if (pa == "h3-hopper" && pb == "h3-hopper") {
      EXPECT_EQ(max_abs_diff(a, b), 0.0) << describe(c);
    }
    Tensor fa = run_attention(*flash_packed, c, in, true), fb = run_attention(*flash_hm, c, in, true);
    EXPECT_EQ(max_abs_diff(fa, fb), 0.0) << describe(c);
  }
}

// The q/k RMSNorm + RoPE by one block per row (the default where it applies) and by one warp per head
// (H3_DISABLE_QK_ROW_KERNEL, its twin) leave the same q and k in the packed rows: they differ only in the order in
// which a head's sum of squares is added up (8 channels per thread then 16 threads, vs 4 per lane then 32 lanes),
// which moves 1/rms by an f32 ulp or so and can flip a bf16 rounding: at most one bf16 ulp per element (2^-7
// relative; measured against |y| + 1/64 so that a RoPE result cancelled near zero is held to an absolute bound
// far above the f32 difference but far below any real error), and v untouched. Cases: the DiT (56 x 128, 96 rotated), the video VAE (32 x 64, 48 rotated, no
// weight), head_dim 256, GQA, rope only, norm only, 1 / 37 / 301 rows.
TEST_F(BackendCudaAttention, QkRowKernelMatchesItsTwin) {
  std::unique_ptr<Backend> twin;
  {
    ScopedEnv warp_per_head("H3_DISABLE_QK_ROW_KERNEL", "1");
    twin = make_cuda_backend();
  }
  struct QkCase {
    int R, Hq, Hkv, Dh, rot;
    bool qk_norm, weights;
  };
  const QkCase cases[] = {{301, 56, 56, 128, 96, true, true}, {37, 32, 32, 64, 48, true, false},
                          {1, 56, 56, 128, 96, true, true},   {64, 4, 2, 256, 32, true, true},
                          {37, 8, 8, 128, 96, false, true},   {37, 8, 8, 128, 0, true, true}};
  for (const QkCase& q : cases) {
    const AttnCase c{q.R, q.Hq, q.Hkv, q.Dh, q.rot, false, q.qk_norm, {}};
    AttnInputs in = make_attention_inputs(c, rng);
    auto prepared = [&](Backend& be) {
      Tensor qkv = be.upload(in.qkv, DType::BF16), wq = be.upload(in.wq, DType::BF16), wk = be.upload(in.wk, DType::BF16);
      Tensor cs = be.upload(in.cos, DType::BF16), sn = be.upload(in.sin, DType::BF16);
      Tensor out = be.empty({c.R, c.Hq * c.Dh}, DType::BF16);
      be.self_attention(qkv, in.spec(c, q.weights ? &wq : nullptr, q.weights ? &wk : nullptr, &cs, &sn), out);
      return be.download(qkv).to(DType::F32);  // q and k normalized and rotated in place, v as uploaded
    };
    const Tensor a = prepared(*gpu), b = prepared(*twin);
    const std::string what = describe(c) + (q.weights ? "" : ", no norm weight");
    const int64_t W = (c.Hq + 2 * c.Hkv) * c.Dh, qk = (c.Hq + c.Hkv) * c.Dh;
    double worst = 0;
    int64_t moved = 0;
    for (int64_t r = 0; r < c.R; ++r)
      for (int64_t i = 0; i < W; ++i) {
        const float x = a.ptr<float>()[r * W + i], y = b.ptr<float>()[r * W + i];
        if (i >= qk) {
          ASSERT_EQ(x, y) << what << ": v changed at row " << r << " channel " << i;
          continue;
        }
        ASSERT_TRUE(std::isfinite(x)) << what;
        if (x != y) ++moved;
        // One bf16 ulp of y, or of 1/64 where RoPE cancelled its two terms (~1) down to a small result.
        worst = std::max(worst, std::fabs(double(x) - y) / (std::fabs(double(y)) + 1.0 / 64));
      }
    EXPECT_LE(worst, 1.0 / 128) << what << " (" << moved << " elements differ)";
    EXPECT_LE(moved, c.R * qk / 20) << what << ": more than 5% of the elements moved, not a rounding difference";
  }
}

// H3_CUDA_PROFILE=1: every op's device time is summed under its name (a GEMM under its shape, attention's parts as
// nested lines); a report resets the totals; without the variable (and on the CPU backend) the report is empty.
TEST_F(BackendCudaAttention, OpProfileNamesEveryOpAndResets) {
  std::unique_ptr<Backend> profiled;
  {
    ScopedEnv on("H3_CUDA_PROFILE", "1");
    profiled = make_cuda_backend();
  }
  EXPECT_EQ(gpu->op_profile_report(), "");
  EXPECT_EQ(cpu->op_profile_report(), "");
  Backend& be = *profiled;
  Tensor x = be.upload(randn({300, 64}, rng), DType::BF16), w = be.upload(randn({96, 64}, rng), DType::BF16);
  Tensor y = be.empty({300, 96}, DType::BF16), n = be.empty({300, 96}, DType::BF16);
  be.linear(x, w, nullptr, y);
  be.linear(x, w, nullptr, y);
  be.rms_norm(y, nullptr, 1e-5f, n);
  const AttnCase c{300, 4, 4, 8, 0, false, true, {}};
  AttnInputs in = make_attention_inputs(c, rng);
  run_attention(be, c, in, false);
  const std::string report = be.op_profile_report();
  auto line_of = [&](const std::string& name) {
    const size_t at = report.find(name);
    return at == std::string::npos ? std::string() : report.substr(at, report.find('\n', at) - at);
  };
  const std::string gemm = line_of("linear 64->96 BF16");
  ASSERT_FALSE(gemm.empty()) << report;
  EXPECT_NE(gemm.find(" 2 "), std::string::npos) << "two calls expected: " << gemm;
  EXPECT_FALSE(line_of("rms_norm").empty()) << report;
  EXPECT_FALSE(line_of("attention: q/k norm + rope").empty()) << report;
  EXPECT_FALSE(line_of("attention: sdpa, head_dim 8").empty()) << report;
  EXPECT_NE(report.find("idle between ops"), std::string::npos) << report;
  const std::string again = be.op_profile_report();
  EXPECT_EQ(again.find("linear"), std::string::npos) << "the report did not reset: " << again;
}

// ---- our Hopper attention kernel (kernels_attention_sm90.cu) ----

namespace {

constexpr const char* kNotHopper = "our Hopper kernel needs a compute capability 9.0 device (and no H3_FORCE_PORTABLE)";

// The device is compute capability 9.0 and its paths include our Hopper kernels (not forced portable:
// backend/cuda_arch.h).
bool hopper_kernels_chosen() {
  int major = 0, minor = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess && major == 9 &&
         minor == 0 && cuda_portable_switch().empty();
}

bool hopper_applies(const AttnCase& c) { return (c.Dh == 64 || c.Dh == 128) && !c.causal; }

// Where a result is off: relative L2 error by 16-channel group and by 64-row block of head 0, and the first few
// elements (diagnostics for a layout bug: a swapped operand shows in a channel pattern, a pipeline bug in rows).
void print_mismatch_pattern(const Tensor& got, const Tensor& want, const AttnCase& c) {
  const int64_t W = int64_t(c.Hq) * c.Dh;
  auto rel = [&](auto pick) {
    double e = 0, r = 0;
    for (int64_t row = 0; row < c.R; ++row)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t d = 0; d < c.Dh; ++d)
          if (pick(row, h, d)) {
            const double a = got.at(row * W + h * c.Dh + d), b = want.at(row * W + h * c.Dh + d);
            e += (a - b) * (a - b);
            r += b * b;
          }
    return r > 0 ? std::sqrt(e / r) : 0.0;
  };
  std::printf("[ mismatch ] %s: by 16-channel group:", describe(c).c_str());
  for (int g = 0; g < c.Dh / 16; ++g) std::printf(" %.2g", rel([&](int64_t, int64_t, int64_t d) { return d / 16 == g; }));
  std::printf("\n[ mismatch ] by 64-row block:");
  for (int64_t b = 0; b * 64 < c.R && b < 24; ++b)
    std::printf(" %.2g", rel([&](int64_t row, int64_t, int64_t) { return row / 64 == b; }));
  std::printf("\n[ mismatch ] first elements (row, head, channel: got / want):");
  for (int64_t i = 0, shown = 0; i < got.numel() && shown < 6; ++i)
    if (std::abs(got.at(i) - want.at(i)) > 0.05 + 0.05 * std::abs(want.at(i))) {
      std::printf(" (%lld, %lld, %lld: %.4g / %.4g)", (long long)(i / W), (long long)(i % W / c.Dh),
                  (long long)(i % c.Dh), got.at(i), want.at(i));
      ++shown;
    }
  std::printf("\n");
}

// Beyond attention_cases(): segments that are not tile multiples run as separate calls, exact tile multiples, a
// single key tile.
std::vector<AttnCase> hopper_cases() {
  std::vector<AttnCase> v = attention_cases();
  v.push_back({500, 8, 8, 128, 96, false, true, {0, 129, 300, 500}});
  v.push_back({256, 4, 4, 128, 0, false, false, {}});
  v.push_back({128, 4, 2, 128, 64, false, true, {}});
  v.push_back({1007, 56, 56, 128, 96, false, true, {0, 1, 1007}});  // a one-row segment
  // head_dim 64 (the video VAE decoder's 32 x 64 heads, 48 rotated channels, one segment per tile)
  v.push_back({900, 8, 8, 64, 48, false, true, {0, 300, 600, 900}});
  v.push_back({1007, 4, 4, 64, 0, false, false, {}});
  v.push_back({177, 4, 2, 64, 32, false, true, {}});
  v.push_back({128, 2, 2, 64, 0, false, false, {}});
  return v;
}

}  // namespace

// Where it applies (compute capability 9.0, head_dim 64 or 128, non-causal) the default backend's attention is our
// Hopper kernel, and it matches the f32 oracle like the other implementations (bf16 and f16 q/k/v).
TEST_F(BackendCudaAttention, HopperKernelMatchesCpu) {
  if (!hopper_kernels_chosen()) GTEST_SKIP() << kNotHopper;
  for (DType dt : {DType::BF16, DType::F16})
    for (const AttnCase& c : hopper_cases()) {
      if (!hopper_applies(c)) continue;
      AttnInputs in = make_attention_inputs(c, rng);
      Tensor got = run_attention(*gpu, c, in, /*poison=*/true, dt);
      ASSERT_EQ(cuda_last_attention_path(*gpu), "h3-hopper") << describe(c);
      Tensor want = run_attention(*cpu, c, in, false);
      ASSERT_EQ(count_non_finite(got), 0) << describe(c) << " " << dtype_name(dt) << ": elements left unwritten";
      EXPECT_LE(rel_l2(got, want), kAttentionTol) << describe(c) << " " << dtype_name(dt);
      if (rel_l2(got, want) > kAttentionTol) print_mismatch_pattern(got, want, c);
      EXPECT_GE(cosine(got, want), 0.9999) << describe(c) << " " << dtype_name(dt);
    }
}

// Our Hopper kernel and the flash kernel compute the same function (same roundings of q, k, P and O; only the
// accumulation order and exp2 approximation differ), so they agree as tightly as cuDNN and flash do.
TEST_F(BackendCudaAttention, HopperKernelAndFlashAgree) {
  if (!hopper_kernels_chosen()) GTEST_SKIP() << kNotHopper;
  std::unique_ptr<Backend> flash;
  {
    ScopedEnv off("H3_DISABLE_HOPPER_ATTENTION", "1");
    ScopedEnv off2("H3_DISABLE_CUDNN_ATTENTION", "1");
    flash = make_cuda_backend();
  }
  for (const AttnCase& c : hopper_cases()) {
    if (!hopper_applies(c)) continue;
    AttnInputs in = make_attention_inputs(c, rng);
    Tensor a = run_attention(*gpu, c, in, true), b = run_attention(*flash, c, in, true);
    ASSERT_EQ(cuda_last_attention_path(*flash), "flash");
    EXPECT_LE(rel_l2(a, b), 4e-3) << describe(c);
  }
}

// With K/V tiles of 176 keys (the default) and of 128 keys (H3_HOPPER_KEY_TILE=128) the kernel computes the same
// function: against the f32 oracle on every case above plus lengths around the 176-key tile (175, 176, 177, 352,
// 353), and one against the other as tightly as two summation orders of one bf16 function agree.
TEST_F(BackendCudaAttention, HopperKernelKeyTilesAgree) {
  if (!hopper_kernels_chosen()) GTEST_SKIP() << kNotHopper;
  std::unique_ptr<Backend> wide, narrow_be;
  {
    ScopedEnv tile("H3_HOPPER_KEY_TILE", "176");
    wide = make_cuda_backend();
  }
  {
    ScopedEnv tile("H3_HOPPER_KEY_TILE", "128");
    narrow_be = make_cuda_backend();
  }
  std::vector<AttnCase> cases = hopper_cases();
  for (int R : {175, 176, 177, 352, 353}) cases.push_back({R, 8, 8, 128, 96, false, true, {}});
  cases.push_back({530, 4, 4, 128, 96, false, true, {0, 176, 353, 530}});
  for (DType dt : {DType::BF16, DType::F16})
    for (const AttnCase& c : cases) {
      if (!hopper_applies(c)) continue;
      AttnInputs in = make_attention_inputs(c, rng);
      Tensor got = run_attention(*wide, c, in, /*poison=*/true, dt);
      ASSERT_EQ(cuda_last_attention_path(*wide), "h3-hopper") << describe(c);
      Tensor want = run_attention(*cpu, c, in, false), narrow = run_attention(*narrow_be, c, in, true, dt);
      ASSERT_EQ(count_non_finite(got), 0) << describe(c) << " " << dtype_name(dt) << ": elements left unwritten";
      EXPECT_LE(rel_l2(got, want), kAttentionTol) << describe(c) << " " << dtype_name(dt);
      EXPECT_GE(cosine(got, want), 0.9999) << describe(c) << " " << dtype_name(dt);
      EXPECT_LE(rel_l2(got, narrow), 4e-3) << describe(c) << " " << dtype_name(dt) << " vs 128-key tiles";
    }
}

// head_dim 64 with three consumer warpgroups (the default: 192 query rows per CTA, 128-key tiles) and with two
// (H3_HOPPER_HD64_CONSUMERS=2, H3_HOPPER_KEY_TILE=128): every row goes through the same tiles in the same order
// with the same instructions, so the outputs are bit-identical — at query-block edges (191-193, 385 rows), at the
// video VAE's 1,797-row tiles, and with ragged segments.
TEST_F(BackendCudaAttention, HopperHeadDim64SchedulesAreBitIdentical) {
  if (!hopper_kernels_chosen()) GTEST_SKIP() << kNotHopper;
  std::unique_ptr<Backend> two;
  {
    ScopedEnv consumers("H3_HOPPER_HD64_CONSUMERS", "2");
    ScopedEnv tile("H3_HOPPER_KEY_TILE", "128");
    two = make_cuda_backend();
  }
  ASSERT_NE(cuda_backend_summary(*gpu).find("head_dim 64: 3 consumer"), std::string::npos)
      << cuda_backend_summary(*gpu);
  ASSERT_NE(cuda_backend_summary(*two).find("head_dim 64: 2 consumer"), std::string::npos);
  std::vector<AttnCase> cases;
  for (int R : {1, 64, 65, 191, 192, 193, 385}) cases.push_back({R, 4, 4, 64, 48, false, true, {}});
  cases.push_back({2 * 1797, 4, 4, 64, 48, false, true, {0, 1797, 2 * 1797}});
  cases.push_back({700, 4, 2, 64, 32, false, true, {0, 5, 197, 700}});
  for (DType dt : {DType::F16, DType::BF16})
    for (const AttnCase& c : cases) {
      AttnInputs in = make_attention_inputs(c, rng);
      Tensor three_out = run_attention(*gpu, c, in, /*poison=*/true, dt);
      ASSERT_EQ(cuda_last_attention_path(*gpu), "h3-hopper") << describe(c);
      Tensor two_out = run_attention(*two, c, in, /*poison=*/true, dt);
      ASSERT_EQ(count_non_finite(three_out), 0) << describe(c) << ": elements left unwritten";
      EXPECT_EQ(std::memcmp(three_out.data(), two_out.data(), three_out.nbytes()), 0)
          << describe(c) << " " << dtype_name(dt);
      if (c.R == 193) {
        Tensor want = run_attention(*cpu, c, in, false);
        EXPECT_LE(rel_l2(three_out, want), kAttentionTol) << describe(c) << " " << dtype_name(dt);
      }
    }
}

// A DiT-size sequence (15,435 rows, 56 heads x 128, not a multiple of the 128- or 176-row tiles) with device-random
// q/k/v: our kernel (both key tiles) against the flash kernel on the whole output, and against an f64
// softmax(q·kᵀ·scale)·v on sampled rows (first, tile edges, last) and heads.
TEST_F(BackendCudaAttention, HopperKernelAtDitLength) {
  if (!hopper_kernels_chosen()) GTEST_SKIP() << kNotHopper;
  for (const char* tile : {"128", "176"}) {
    SCOPED_TRACE(cat("key tile ", tile));
    ScopedEnv key_tile("H3_HOPPER_KEY_TILE", tile);
    auto ours = make_cuda_backend();
    check_hopper_at_dit_length(*ours);
  }
}

void BackendCudaAttention::check_hopper_at_dit_length(Backend& be) {
  Backend* gpu = &be;
  constexpr int64_t L = 15435, H = 56, Dh = 128, W = 3 * H * Dh;
  std::unique_ptr<Backend> flash;
  {
    ScopedEnv off("H3_DISABLE_HOPPER_ATTENTION", "1");
    ScopedEnv off2("H3_DISABLE_CUDNN_ATTENTION", "1");
    flash = make_cuda_backend();
  }
  Tensor qkv = gpu->empty({L, W}, DType::BF16);
  cuda_fill_random_normal(*gpu, qkv, 4242, 1.f);
  AttentionSpec spec;  // q, k, v as stored: no norm, no rotation
  spec.heads_q = spec.heads_kv = H;
  spec.head_dim = Dh;
  spec.scale = 1.f / std::sqrt(float(Dh));
  Tensor a = gpu->empty({L, H * Dh}, DType::BF16), b = flash->empty({L, H * Dh}, DType::BF16);
  gpu->fill(a, NAN);
  flash->fill(b, NAN);
  gpu->self_attention(qkv, spec, a);
  ASSERT_EQ(cuda_last_attention_path(*gpu), "h3-hopper");
  gpu->synchronize();  // the flash backend has a stream of its own: qkv and b must be ready before it reads
  flash->self_attention(qkv, spec, b);
  ASSERT_EQ(cuda_last_attention_path(*flash), "flash");
  const Tensor ha = gpu->download(a).to(DType::F32), hb = flash->download(b).to(DType::F32);
  ASSERT_EQ(count_non_finite(ha), 0) << "elements left unwritten";
  ASSERT_EQ(count_non_finite(hb), 0) << "flash: elements left unwritten";
  EXPECT_LE(rel_l2(ha, hb), 4e-3);

  const Tensor xt = gpu->download(qkv).to(DType::F32);
  const float* x = xt.ptr<float>();
  const int64_t rows[] = {0, 1, 63, 64, 127, 128, 7717, 15359, 15360, 15433, 15434};
  const int64_t heads[] = {0, 17, 55};
  double err2 = 0, ref2 = 0;
  std::vector<double> p(L);
  for (int64_t r : rows)
    for (int64_t h : heads) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += double(x[r * W + h * Dh + d]) * x[j * W + (H + h) * Dh + d];
        p[j] = dot * spec.scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < L; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t d = 0; d < Dh; ++d) {
        double o = 0;
        for (int64_t j = 0; j < L; ++j) o += p[j] * x[j * W + (2 * H + h) * Dh + d];
        o /= sum;
        const double got = ha.ptr<float>()[r * H * Dh + h * Dh + d];
        err2 += (got - o) * (got - o);
        ref2 += o * o;
      }
    }
  EXPECT_LE(std::sqrt(err2 / ref2), kAttentionTol);
}

#endif  // H3_HAVE_CUDA
