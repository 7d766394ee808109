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
};

// How --device cuda is refused without a usable GPU: kNoUsableCudaDevice, why in parentheses, then kCpuInstead.
inline constexpr const char* kNoUsableCudaDevice = "no usable CUDA device";
inline constexpr const char* kCpuInstead = "--device cpu or auto computes on the CPU";

ComputeDevice detect_compute_device();
std::string describe(const ComputeDevice& d);

#ifdef H3_HAVE_CUDA
// Implemented in backend/cuda: fills `d` and returns true when a usable CUDA device exists.
bool cuda_detect_device(ComputeDevice& d);
#endif

}  // namespace h3
