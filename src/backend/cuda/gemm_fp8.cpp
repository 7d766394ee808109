#include "backend/cuda/gemm_fp8.h"

#include "backend/cuda/cuda_check.h"
#include "backend/fp8_layout.h"
#include "util/error.h"

namespace h3::cuda {

Fp8Gemm::Fp8Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes, bool fast_accumulation)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes), fast_accumulation_(fast_accumulation) {
  H3_CUBLAS_CHECK(cublasLtCreate(&lt_), "linear_fp8");
}

Fp8Gemm::~Fp8Gemm() {
  for (auto& [k, p] : plans_) destroy(p);
  if (lt_) cublasLtDestroy(lt_);
}

void Fp8Gemm::destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

// The row-major product in column-major terms, as gemm.cpp's: cuBLAS A = w viewed [K, N] (transposed: FP8 on Hopper
// takes only this "TN" form), B = x viewed [K, M], D = y viewed [N, M]; cuBLAS m = N (A's scale runs over it), n = M.
Fp8Gemm::Plan* Fp8Gemm::find_plan(int64_t M, int64_t N, int64_t K, Fp8Scaling scaling, cudaDataType_t out,
                                  cublasStatus_t* status) {
  const Key key{M, N, K, static_cast<int>(scaling), static_cast<int>(out)};
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  Plan p;
  H3_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "linear_fp8");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "linear_fp8");
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "linear_fp8");
  // Fast accumulation for per-channel scaling only: cuBLASLt 13.1 has no 128-block-scaled kernel with it.
  const int8_t fast = fast_accumulation_ && scaling == Fp8Scaling::Channel ? 1 : 0;
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)),
                  "linear_fp8");
  const int32_t mode_w = scaling == Fp8Scaling::Channel ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                        : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const int32_t mode_x = scaling == Fp8Scaling::Channel ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                        : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_w, sizeof(mode_w)),
                  "linear_fp8");
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_x, sizeof(mode_x)),
                  "linear_fp8");
  // Scale pointers are part of the heuristic's question (any valid, 256-byte-aligned device address will do until
  // run sets them).
  const void* placeholder = workspace_;
  H3_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder)),
      "linear_fp8");
  H3_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder)),
      "linear_fp8");
  H3_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K), "linear_fp8");
  H3_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, M, K), "linear_fp8");
  H3_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out, N, M, N), "linear_fp8");
  cublasLtMatmulPreference_t pref = nullptr;
  H3_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), "linear_fp8");
  const uint64_t ws = workspace_bytes_;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && (found == 0 || result.state != CUBLAS_STATUS_SUCCESS))
    st = found == 0 ? CUBLAS_STATUS_NOT_SUPPORTED : result.state;
  if (st != CUBLAS_STATUS_SUCCESS) {
    destroy(p);
    *status = st;
    return nullptr;
  }
  p.algo = result.algo;
  return &plans_.emplace(key, p).first->second;
}

namespace {

std::string refusal(int64_t M, int64_t N, int64_t K, Fp8Scaling scaling, cublasStatus_t st) {
  return cat("cuBLASLt ", cublasLtGetVersion(), " has no FP8 kernel with ",
             scaling == Fp8Scaling::Channel ? "per-channel" : "128-block", " scaling for a ", M, "x", N, "x", K,
             " product (", cublasGetStatusName(st), ")");
}

size_t element_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

}  // namespace

Fp8Gemm::Plan& Fp8Gemm::plan_for(int64_t M, int64_t N, int64_t K, Fp8Scaling scaling, cudaDataType_t out) {
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  Plan* p = find_plan(M, N, K, scaling, out, &st);
  if (!p) throw Error(cat("linear_fp8: ", refusal(M, N, K, scaling, st), "; use --precision bf16"));
  return *p;
}

std::string Fp8Gemm::block_refusal(int64_t N, int64_t K) {
  for (const int64_t M : {kBlockProbeRows, int64_t(4)}) {
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (!find_plan(M, N, K, Fp8Scaling::Block, CUDA_R_16BF, &st)) return refusal(M, N, K, Fp8Scaling::Block, st);
  }
  return {};
}

void Fp8Gemm::run_one(Plan& p, const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale,
                      void* y) {
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)),
                  "linear_fp8");
  H3_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)),
                  "linear_fp8");
  const float alpha = 1.f, beta = 0.f;
  H3_CUBLAS_CHECK(cublasLtMatmul(lt_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo, workspace_,
                                 workspace_bytes_, stream_),
                  "linear_fp8");
}

void Fp8Gemm::run(const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale, Fp8Scaling scaling,
                  void* y, int64_t M, int64_t N, int64_t K, cudaDataType_t out, void* tail) {
  if (M == 0 || N == 0) return;
  H3_CHECK(M < (int64_t(1) << 31) && N < (int64_t(1) << 31) && K < (int64_t(1) << 31) && K > 0, "linear_fp8: dimensions ",
           M, "x", N, "x", K, " outside 1..2^31");
  if (scaling == Fp8Scaling::Channel) {
    run_one(plan_for(M, N, K, scaling, out), x, x_scale, w, w_scale, y);
    return;
  }
  const int64_t main = fp8_block_main_rows(M);
  if (main > 0) run_one(plan_for(main, N, K, scaling, out), x, x_scale, w, w_scale, y);
  if (main == M) return;
  H3_CHECK(tail != nullptr, "linear_fp8: a block-scaled product of ", M, " rows needs a tail buffer");
  run_one(plan_for(4, N, K, scaling, out), x + main * K, x_scale + fp8_blocks(K) * main, w, w_scale, tail);
  const size_t row_bytes = static_cast<size_t>(N) * element_bytes(out);
  H3_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(y) + main * row_bytes, tail, (M - main) * row_bytes,
                                cudaMemcpyDeviceToDevice, stream_),
                "linear_fp8 tail rows");
}

}  // namespace h3::cuda
