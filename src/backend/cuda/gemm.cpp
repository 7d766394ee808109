#include "backend/cuda/gemm.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "util/env.h"
#include "util/log.h"

namespace h3::cuda {

namespace {

// The largest power of two (up to 256) that divides the address: cuBLASLt picks kernels by operand alignment.
int alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int al = 256;
  while (al > 1 && (a % al) != 0) al /= 2;
  return al;
}


}  // namespace

Gemm::Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  use_lt_ = !env_flag("H3_DISABLE_CUBLASLT");
  autotune_ = env_choice("H3_GEMM_AUTOTUNE", 1, {0, 1}) == 1;
  candidates_ = env_int("H3_GEMM_AUTOTUNE_CANDIDATES", candidates_, 1, kMaxCandidates);
  H3_CUBLAS_CHECK(cublasCreate(&blas_), "linear");
  H3_CUBLAS_CHECK(cublasSetStream(blas_, stream_), "linear");
  H3_CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, workspace_bytes_), "linear");
  // Default math: no TF32 for f32 products (the reference does not enable it).
  H3_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "linear");
  H3_CUBLAS_CHECK(cublasLtCreate(&lt_), "linear");
}

Gemm::~Gemm() {
  for (auto& [k, p] : plans_) destroy(p);
  if (lt_) cublasLtDestroy(lt_);
  if (blas_) cublasDestroy(blas_);
}

void Gemm::destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

// Row-major y[M,N] = x[M,K]·w[N,K]ᵀ is, in cuBLAS's column-major terms, Y'[N,M] = W'ᵀ·X' with W' = w viewed as
// [K,N] (ld K), X' = x viewed as [K,M] (ld K), Y' = y viewed as [N,M] (ld N): transa = T, transb = N, m = N, n = M.
bool Gemm::try_make_plan(Plan& p, int64_t M, int64_t N, int64_t K, cudaDataType_t ab, cudaDataType_t c, bool bias,
                         int align_a, int align_b, int align_c, int align_bias) {
  H3_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "linear");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "linear");
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "linear");
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
                    "linear");
    H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &c, sizeof(c)),
                    "linear");
  }
  H3_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab, K, N, K), "linear");
  H3_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab, K, M, K), "linear");
  H3_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, c, N, M, N), "linear");

  cublasLtMatmulPreference_t pref = nullptr;
  H3_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), "linear");
  const uint64_t ws = workspace_bytes_;
  const uint32_t al_a = align_a, al_b = align_b, al_c = align_c;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c));
  (void)align_bias;  // the bias pointer's alignment is part of the cache key; cuBLASLt has no preference for it
  cublasLtMatmulHeuristicResult_t results[kMaxCandidates] = {};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref,
                                                           autotune_ ? candidates_ : 1, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(p);
    return false;
  }
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(results[i].algo);
  if (p.candidates.empty()) {
    destroy(p);
    return false;
  }
  p.bias_in_epilogue = bias;
  p.usable = true;
  return true;
}

Gemm::Plan& Gemm::plan_for(const Key& key, int64_t M, int64_t N, int64_t K, cudaDataType_t ab, cudaDataType_t c,
                           bool bias, int align_a, int align_b, int align_c, int align_bias) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& p = plans_[key];
  // With a bias first ask for the fused epilogue; without one (or when that has no kernel) a plain product whose
  // bias the caller adds.
  if (!(bias && try_make_plan(p, M, N, K, ab, c, true, align_a, align_b, align_c, align_bias)))
    if (!try_make_plan(p, M, N, K, ab, c, false, align_a, align_b, align_c, align_bias))
      log_warn("cuBLASLt has no kernel for a ", M, "x", N, "x", K, " product; using cublasGemmEx");
  return p;
}

cublasStatus_t Gemm::matmul(const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* x, const void* w, void* y) {
  const float alpha = 1.f, beta = 0.f;
  return cublasLtMatmul(lt_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &algo, workspace_,
                        workspace_bytes_, stream_);
}

// Times every candidate on the real operands (one warm-up, then the best of two runs) and keeps the fastest.
// Candidates that fail to launch are dropped. Runs once per shape; the result y is recomputed by the caller.
void Gemm::tune(Plan& p, const void* x, const void* w, void* y) {
  cudaEvent_t start = nullptr, stop = nullptr;
  H3_CUDA_CHECK(cudaEventCreate(&start), "linear autotune");
  H3_CUDA_CHECK(cudaEventCreate(&stop), "linear autotune");
  float best = 0.f;
  size_t best_i = 0;
  bool any = false;
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    if (matmul(p, p.candidates[i], x, w, y) != CUBLAS_STATUS_SUCCESS) continue;
    float t_min = 0.f;
    for (int rep = 0; rep < 2; ++rep) {
      H3_CUDA_CHECK(cudaEventRecord(start, stream_), "linear autotune");
      H3_CUBLAS_CHECK(matmul(p, p.candidates[i], x, w, y), "linear autotune");
      H3_CUDA_CHECK(cudaEventRecord(stop, stream_), "linear autotune");
      H3_CUDA_CHECK(cudaEventSynchronize(stop), "linear autotune");
      float t = 0.f;
      H3_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop), "linear autotune");
      t_min = rep == 0 ? t : std::min(t_min, t);
    }
    if (!any || t_min < best) {
      best = t_min;
      best_i = i;
      any = true;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGetLastError();  // a failed candidate launch must not linger as the sticky last error
  const cublasLtMatmulAlgo_t chosen = p.candidates[best_i];
  p.candidates.assign(1, chosen);
}

bool Gemm::run(const void* x, const void* w, const void* bias, void* y, int64_t M, int64_t N, int64_t K,
               cudaDataType_t ab, cudaDataType_t c) {
  if (M == 0 || N == 0) return true;
  H3_CHECK(M < (int64_t(1) << 31) && N < (int64_t(1) << 31) && K < (int64_t(1) << 31),
           "linear: dimensions ", M, "x", N, "x", K, " exceed the 2^31 cuBLAS takes");
  const float alpha = 1.f, beta = 0.f;
  if (K == 0) {  // an empty sum: y = 0 (+ bias, added by the caller)
    H3_CUDA_CHECK(cudaMemsetAsync(y, 0, size_t(M) * N * (c == CUDA_R_32F ? 4 : 2), stream_), "linear");
    return bias == nullptr;
  }
  if (use_lt_) {
    const int aa = alignment_of(w), ba = alignment_of(x), ca = alignment_of(y), bba = bias ? alignment_of(bias) : 0;
    const Key key{M, N, K, int(ab), int(c), bias != nullptr, aa, ba, ca, bba};
    Plan& p = plan_for(key, M, N, K, ab, c, bias != nullptr, aa, ba, ca, bba);
    if (p.usable) {
      if (p.bias_in_epilogue)
        H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                        "linear");
      if (p.candidates.size() > 1) tune(p, x, w, y);
      H3_CUBLAS_CHECK(matmul(p, p.candidates.front(), x, w, y), "linear");
      return p.bias_in_epilogue || bias == nullptr;
    }
  }
  H3_CUBLAS_CHECK(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                               static_cast<int>(K), &alpha, w, ab, static_cast<int>(K), x, ab, static_cast<int>(K),
                               &beta, y, c, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "linear");
  return bias == nullptr;
}

}  // namespace h3::cuda
