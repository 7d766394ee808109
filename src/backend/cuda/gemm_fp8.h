// Scaled FP8 products through cuBLASLt: y[M,N] (bf16 or f32) = x[M,K]·w[N,K]ᵀ with x and w E4M3 codes and float32
// scales applied by cuBLASLt itself (its matrix scaling modes, cuBLASLt ≥ 12.9 on sm_90):
//   Fp8Scaling::Channel: w per output channel and x per row, OUTER_VEC_32F on both operands;
//   Fp8Scaling::Block:   w per 128×128 block (BLK128x128_32F) and x per row and 128 columns (VEC128_32F), a
//                        combination cuBLASLt supports on sm_90 with row counts that are multiples of 4 and
//                        16-byte-aligned scale arrays (the cuBLAS documentation, "128-element 1D and 128x128 2D
//                        block scaling for FP8 data types").
// f32 accumulation, promoted out of the tensor cores as cuBLASLt does by default, or with fast_accumulation (cuBLASLt's
// CUBLASLT_MATMUL_DESC_FAST_ACCUM, PyTorch's use_fast_accum; per-channel scaling only, cuBLASLt has no block-scaled
// kernel with it) in the tensor cores' own accumulator alone (about 14 bits kept per partial sum: faster, less
// exact). One plan per shape, the heuristic's first algorithm.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "backend/backend.h"

namespace h3::cuda {

class Fp8Gemm {
 public:
  // workspace: device memory shared with the backend's other products (one stream: never used concurrently).
  Fp8Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes, bool fast_accumulation);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // x: codes [M, K] (Block: [round_up(M, 4), K]); x_scale: backend.h's Fp8Activation layout. w_scale: Fp8Weight's
  // layout. out: CUDA_R_16BF or CUDA_R_32F. Block scaling runs cuBLASLt on row counts that are multiples of 4 (its
  // rule): the main M' = M − M mod 4 rows straight into y, and, when M mod 4 ≠ 0, the 4 tail rows into `tail` (4·N
  // outputs of type `out`, device memory) whose first M − M' rows are then copied to y. Throws h3::Error naming the
  // shape when cuBLASLt has no kernel for it.
  void run(const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale, Fp8Scaling scaling,
           void* y, int64_t M, int64_t N, int64_t K, cudaDataType_t out, void* tail);
  // Empty when cuBLASLt has a 128-block-scaled kernel for products with a weight [N, K] and bf16 outputs, probed at
  // kBlockProbeRows rows and at 4 (the tail); else the sentence saying which was refused and cuBLASLt's status.
  std::string block_refusal(int64_t N, int64_t K);
  static constexpr int64_t kBlockProbeRows = 4096;

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int>;
  // The plan of one product, made on first use; nullptr (and *status) when cuBLASLt has no kernel for it.
  Plan* find_plan(int64_t M, int64_t N, int64_t K, Fp8Scaling scaling, cudaDataType_t out, cublasStatus_t* status);
  Plan& plan_for(int64_t M, int64_t N, int64_t K, Fp8Scaling scaling, cudaDataType_t out);
  void run_one(Plan& p, const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale, void* y);
  static void destroy(Plan& p);

  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  bool fast_accumulation_;
  cublasLtHandle_t lt_ = nullptr;
  std::map<Key, Plan> plans_;
};

}  // namespace h3::cuda
