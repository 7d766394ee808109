// The versions of the CUDA libraries the backend runs on (for h3 --version and --info), each as loaded now and,
// when it differs, as compiled against.
#pragma once
#include <string>

namespace h3 {

struct CudaLibraryVersions {
  std::string runtime, driver, cublaslt, cudnn;  // "12.4", "9.1.0 (built with 9.0.0)", ...
};

// Reads the library versions only: no device is needed (a machine without a driver reports the driver as none).
CudaLibraryVersions cuda_library_versions();

}  // namespace h3
