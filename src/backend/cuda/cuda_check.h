// Error checks for the CUDA backend: every CUDA runtime, cuBLAS(Lt) and cuDNN call goes through one of these
// macros, which throw h3::Error naming the op, the failing call and the library's own error string.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "util/error.h"

namespace h3::cuda {

[[noreturn]] inline void fail_cuda(cudaError_t e, const char* op, const char* call) {
  fail("CUDA error in ", op, ": ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ") from ", call);
}
[[noreturn]] inline void fail_cublas(cublasStatus_t s, const char* op, const char* call) {
  fail("cuBLAS error in ", op, ": ", cublasGetStatusString(s), " from ", call);
}
// cuDNN's name for a status and its last error message, if any: "CUDNN_STATUS_... (detail)".
inline std::string cudnn_status_text(cudnnStatus_t s) {
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  return cat(cudnnGetErrorString(s), detail[0] ? cat(" (", detail, ")") : std::string());
}

[[noreturn]] inline void fail_cudnn(cudnnStatus_t s, const char* op, const char* call) {
  fail("cuDNN error in ", op, ": ", cudnn_status_text(s), " from ", call);
}

}  // namespace h3::cuda

#define H3_CUDA_CHECK(call, op)                                          \
  do {                                                                   \
    cudaError_t h3_e_ = (call);                                          \
    if (h3_e_ != cudaSuccess) ::h3::cuda::fail_cuda(h3_e_, op, #call);   \
  } while (0)

#define H3_CUBLAS_CHECK(call, op)                                                   \
  do {                                                                              \
    cublasStatus_t h3_s_ = (call);                                                  \
    if (h3_s_ != CUBLAS_STATUS_SUCCESS) ::h3::cuda::fail_cublas(h3_s_, op, #call);  \
  } while (0)

#define H3_CUDNN_CHECK(call, op)                                                   \
  do {                                                                             \
    cudnnStatus_t h3_s_ = (call);                                                  \
    if (h3_s_ != CUDNN_STATUS_SUCCESS) ::h3::cuda::fail_cudnn(h3_s_, op, #call);   \
  } while (0)

// After every kernel launch: the launch error (bad configuration, missing kernel image) is read at once; debug
// builds also wait for the kernel so that a fault is reported against the op that caused it.
#ifdef NDEBUG
#define H3_CUDA_LAUNCH_CHECK(stream, op) H3_CUDA_CHECK(cudaGetLastError(), op)
#else
#define H3_CUDA_LAUNCH_CHECK(stream, op)             \
  do {                                               \
    H3_CUDA_CHECK(cudaGetLastError(), op);           \
    H3_CUDA_CHECK(cudaStreamSynchronize(stream), op); \
  } while (0)
#endif
