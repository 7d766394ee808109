// Scaled FP8 products through cuBLASLt: y[M,N] (bf16 or f32) = x[M,K]·w[N,K]ᵀ with x and w E4M3 codes and float32
// scales applied by cuBLASLt itself (its matrix scaling modes, cuBLASLt ≥ 12.9 on sm_90):
//   Fp8Scaling::Channel: w per output channel and x per row, OUTER_VEC_32F on both operands;
//   Fp8Scaling::Block:   w per 128×128 block (BLK128x128_32F) and x per row and 128 columns (VEC128_32F).
// f32 accumulation (no fast-accumulation mode). One plan per shape, the heuristic's first algorithm.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/backend.h"

namespace h3::cuda {

class Fp8Gemm {
 public:
  // workspace: device memory shared with the backend's other products (one stream: never used concurrently).
  Fp8Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // x_scale: Channel [M]; Block [ceil(K/128), M]. w_scale: Fp8Weight's layout. out: CUDA_R_16BF or CUDA_R_32F.
  // Throws h3::Error naming the shape when cuBLASLt has no kernel for it.
  void run(const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale, Fp8Scaling scaling,
           void* y, int64_t M, int64_t N, int64_t K, cudaDataType_t out);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int>;
  Plan& plan_for(int64_t M, int64_t N, int64_t K, Fp8Scaling scaling, cudaDataType_t out);
  static void destroy(Plan& p);

  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtHandle_t lt_ = nullptr;
  std::map<Key, Plan> plans_;
};

}  // namespace h3::cuda
