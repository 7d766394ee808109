// Dense products for the CUDA backend: y[M,N] = x[M,K]·w[N,K]ᵀ (+ bias[N]) through cuBLASLt with f32 compute
// (bf16×bf16→bf16 or →f32, f32×f32→f32 without TF32), one algorithm per shape chosen by cuBLASLt's heuristic and
// cached, the bias added in the epilogue where cuBLASLt offers it. The first product of each shape times the
// heuristic's top candidates (8, or H3_GEMM_AUTOTUNE_CANDIDATES up to 32) on the real operands and keeps the fastest
// (H3_GEMM_AUTOTUNE=0: take the heuristic's first choice). H3_DISABLE_CUBLASLT=1 selects the exact twin: plain cublasGemmEx (same types, f32 compute, no
// TF32) followed by our bias kernel.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace h3::cuda {

class Gemm {
 public:
  // workspace: device memory of workspace_bytes shared by both paths (one stream, so never used concurrently).
  Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  bool lt_enabled() const { return use_lt_; }

  // ab: dtype of x and w; c: dtype of y; bias (may be null) has dtype c. Returns false when the bias was not
  // applied (the caller adds it), true when it was (or there is none).
  bool run(const void* x, const void* w, const void* bias, void* y, int64_t M, int64_t N, int64_t K, cudaDataType_t ab,
           cudaDataType_t c);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's, best first; one left once tuned
    bool bias_in_epilogue = false;
    bool usable = false;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, int, int, int, int>;

  Plan& plan_for(const Key& key, int64_t M, int64_t N, int64_t K, cudaDataType_t ab, cudaDataType_t c, bool bias,
                 int align_a, int align_b, int align_c, int align_bias);
  bool try_make_plan(Plan& p, int64_t M, int64_t N, int64_t K, cudaDataType_t ab, cudaDataType_t c, bool bias,
                     int align_a, int align_b, int align_c, int align_bias);
  static void destroy(Plan& p);
  cublasStatus_t matmul(const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* x, const void* w, void* y);
  void tune(Plan& p, const void* x, const void* w, void* y);

  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  bool use_lt_ = true;
  bool autotune_ = true;
  static constexpr int kMaxCandidates = 32;
  int candidates_ = 8;  // heuristic results timed per shape
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  std::map<Key, Plan> plans_;
};

}  // namespace h3::cuda
