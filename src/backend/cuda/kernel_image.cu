// Whether this build's device code loads on the current device (cuda_arch.h decides from the architecture list;
// this asks the driver, which knows the rules for sure).
#include "backend/cuda/kernel_image.h"

namespace h3::cuda {

namespace {
__global__ void image_probe_kernel() {}
}  // namespace

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, image_probe_kernel);
  cudaGetLastError();  // clear the error state a missing image leaves
  return e;
}

}  // namespace h3::cuda
