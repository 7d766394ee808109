#include "backend/device.h"

#include <fstream>
#include <thread>

#include "util/error.h"

namespace h3 {

namespace {
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  }
  return "CPU";
}
}  // namespace

ComputeDevice detect_compute_device() {
  ComputeDevice d;
  d.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
#ifdef H3_HAVE_CUDA
  if (cuda_detect_device(d)) return d;
#else
  d.note = "this build has no CUDA backend";
#endif
  d.cuda = false;
  d.name = cpu_model_name();
  return d;
}

std::string describe(const ComputeDevice& d) {
  if (d.cuda)
    return cat("CUDA: ", d.name, ", ", d.memory_bytes / (1024 * 1024), " MiB, compute capability ", d.cc_major, ".",
               d.cc_minor, d.kernels.empty() ? "" : "; kernels: " + d.kernels);
  return cat("CPU: ", d.name, ", ", d.cpu_cores, " cores", d.note.empty() ? "" : " (" + d.note + ")");
}

}  // namespace h3
