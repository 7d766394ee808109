#include <cuda_runtime.h>

#include "backend/device.h"
#include "util/error.h"

namespace h3 {

bool cuda_detect_device(ComputeDevice& d) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    d.note = cat(kNoUsableCudaDevice, " (", err != cudaSuccess ? cudaGetErrorString(err) : "the driver sees none", ")");
    cudaGetLastError();  // clear the sticky error state
    return false;
  }
  cudaDeviceProp p{};
  if (const cudaError_t e = cudaGetDeviceProperties(&p, 0); e != cudaSuccess) {
    d.note = cat(kNoUsableCudaDevice, " (", cudaGetErrorString(e), ")");
    cudaGetLastError();
    return false;
  }
  d.cuda = true;
  d.name = p.name;
  d.memory_bytes = p.totalGlobalMem;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  return true;
}

}  // namespace h3
