// Which compute device a run would use: the first CUDA device when there is one (and the build has CUDA),
// otherwise the CPU.
#pragma once
#include <cstdint>
#include <string>

namespace h3 {

struct ComputeDevice {
  bool cuda = false;
  std::string name;         // GPU name or CPU model
  uint64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  int cpu_cores = 0;
  std::string note;         // why CUDA is not used, when it is not
  // CUDA: the code paths chosen for the device and the architectures compiled in (backend/cuda_arch.h).
  bool hopper_kernels = false;
  std::string kernels;
};

// How --device cuda is refused without a usable GPU: kNoUsableCudaDevice, why in parentheses, then kCpuInstead.
inline constexpr const char* kNoUsableCudaDevice = "no usable CUDA device";
inline constexpr const char* kCpuInstead = "--device cpu or auto computes on the CPU";

ComputeDevice detect_compute_device();
std::string describe(const ComputeDevice& d);

#ifdef H3_HAVE_CUDA
// Implemented in backend/cuda: fills `d` and returns true when device `ordinal` exists and is usable: one this build
// runs on (compute capability 8.0 or newer, with code for it among the architectures compiled in; otherwise `d.note`
// is the one-sentence refusal, backend/cuda_arch.h).
bool cuda_detect_device(ComputeDevice& d, int ordinal = 0);

// Throws h3::Error, one sentence, when this build's device code does not load on device 0 (the driver's verdict
// on what cuda_detect_device predicted from the architecture list). Creates the device's context.
void cuda_require_kernel_image(const ComputeDevice& d);

// Tests only: the compute capability cuda_detect_device reports instead of the device's (0, 0: the device's own),
// so that the refusal of an older GPU and the choice of paths on another one can be tested on the GPU at hand.
void cuda_fake_compute_capability(int major, int minor);
#endif

}  // namespace h3
