// Whether this build's device code loads on the current device.
#pragma once
#include <cuda_runtime.h>

namespace h3::cuda {

// cudaSuccess when a kernel compiled like every portable kernel (H3_CUDA_ARCHITECTURES) has an image the current
// device runs (SASS for it, or PTX the driver compiles); else the runtime's error (cudaErrorNoKernelImageForDevice).
// Creates the device's context.
cudaError_t probe_kernel_image();

}  // namespace h3::cuda
