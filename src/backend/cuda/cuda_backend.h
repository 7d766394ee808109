// What the CUDA backend offers beyond the Backend interface, for benchmarks, tools and model construction from
// device-generated weights. Only compiled with CUDA (H3_HAVE_CUDA); every function requires a backend made by
// make_cuda_backend() and throws h3::Error otherwise.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/backend.h"

namespace h3 {

// Fills a float tensor on the CUDA backend with Normal(0, stddev) values drawn on the device from a counter-based
// hash of (seed, element index): no host memory, no transfer, the same values for the same seed.
void cuda_fill_random_normal(Backend& be, Tensor& t, uint64_t seed, float stddev);

// The backend's one stream (for timing with CUDA events around backend calls).
cudaStream_t cuda_stream(Backend& be);

struct CudaMemoryStats {
  size_t in_use_bytes = 0, peak_in_use_bytes = 0, reserved_bytes = 0;
  uint64_t device_allocations = 0;
};
CudaMemoryStats cuda_memory_stats(Backend& be);
void cuda_reset_peak_memory(Backend& be);

// Which attention implementation served the most recent self_attention call: "h3-hopper" (our sm_90a kernel),
// "cudnn-unified", "cudnn-composite" or "flash" (our portable kernel).
std::string cuda_last_attention_path(Backend& be);

// Which implementation served the most recent conv1d / conv_transpose1d / conv3d: "cudnn-tf32" (cuDNN, tensor-core
// algorithm), "cudnn-fma" (cuDNN, an FMA algorithm) or "h3-f32" (our f32 kernels).
std::string cuda_last_conv_path(Backend& be);

// One line: device, cuDNN and cuBLASLt versions, and the switches in effect (H3_DISABLE_*).
std::string cuda_backend_summary(Backend& be);

}  // namespace h3
