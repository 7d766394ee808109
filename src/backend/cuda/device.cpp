#include "backend/device.h"

#include <cuda_runtime.h>

#include "backend/cuda/kernel_image.h"
#include "backend/cuda_arch.h"
#include "util/error.h"

namespace h3 {

namespace {

int fake_major = 0, fake_minor = 0;  // cuda_fake_compute_capability

// What this build holds (H3_CUDA_BUILD_ARCHS: cmake/cuda_architectures.cmake).
const std::vector<CudaArch>& build_archs() {
  static const std::vector<CudaArch> archs = parse_cuda_archs(H3_CUDA_BUILD_ARCHS);
  return archs;
}

}  // namespace

void cuda_fake_compute_capability(int major, int minor) {
  fake_major = major;
  fake_minor = minor;
}

bool cuda_detect_device(ComputeDevice& d, int ordinal) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    d.note = cat(kNoUsableCudaDevice, " (", err != cudaSuccess ? cudaGetErrorString(err) : "the driver sees none", ")");
    cudaGetLastError();  // clear the sticky error state
    return false;
  }
  if (ordinal < 0 || ordinal >= n) {
    d.note = cat(kNoUsableCudaDevice, " (GPU ", ordinal, " was asked for; the driver sees ", n, ")");
    return false;
  }
  cudaDeviceProp p{};
  if (const cudaError_t e = cudaGetDeviceProperties(&p, ordinal); e != cudaSuccess) {
    d.note = cat(kNoUsableCudaDevice, " (", cudaGetErrorString(e), ")");
    cudaGetLastError();
    return false;
  }
  const int major = fake_major ? fake_major : p.major, minor = fake_major ? fake_minor : p.minor;
  const CudaPaths paths = choose_cuda_paths(p.name, major, minor, build_archs(), cuda_portable_switch());
  if (!paths.refusal.empty()) {
    d.note = cat(kNoUsableCudaDevice, " (", paths.refusal, ")");
    return false;
  }
  d.cuda = true;
  d.name = p.name;
  d.memory_bytes = p.totalGlobalMem;
  d.cc_major = major;
  d.cc_minor = minor;
  d.hopper_kernels = paths.hopper_kernels;
  d.kernels = cat(paths.describe(), "; compiled for ", H3_CUDA_BUILD_ARCHS);
  return true;
}

void cuda_require_kernel_image(const ComputeDevice& d) {
  const cudaError_t e = cuda::probe_kernel_image();
  H3_CHECK(e == cudaSuccess, kNoUsableCudaDevice, " (", d.name, " has compute capability ", d.cc_major, ".", d.cc_minor,
           ", on which this build's code (", H3_CUDA_BUILD_ARCHS, ") does not load: ", cudaGetErrorString(e), "); ",
           kCpuInstead);
}

}  // namespace h3
