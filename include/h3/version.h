// What this libh3 is: its version, the commit it was built from, and the GPU stack it runs on.
#pragma once
#include <string>

namespace h3 {

struct BuildInfo {
  std::string version;             // "0.1.0"
  std::string commit;              // the checkout's commit ("-dirty" when it had changes), "unknown" outside git
  bool cuda = false;               // whether the CUDA backend is compiled in
  std::string cuda_architectures;  // nvcc's names of the code compiled in, comma-separated ("sm_90a,compute_90a"); empty without CUDA
  // The versions loaded now, each with the one compiled against when they differ; empty without CUDA.
  std::string cuda_runtime, cuda_driver, cublaslt, cudnn;
};

BuildInfo build_info();

// `h3 --version`: "h3 VERSION (commit COMMIT)", then the backend line(s).
std::string build_info_text();

}  // namespace h3
