// h3::build_info: the version and commit from the header cmake/write_build_info.cmake writes at build time, the CUDA
// libraries' versions from the backend.
#include "h3/version.h"

#include <algorithm>

#include "h3_build_info.h"
#include "util/error.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_versions.h"
#endif

namespace h3 {

BuildInfo build_info() {
  BuildInfo b;
  b.version = H3_BUILD_VERSION;
  b.commit = H3_BUILD_COMMIT;
#ifdef H3_HAVE_CUDA
  b.cuda = true;
  b.cuda_architectures = H3_BUILD_CUDA_ARCHITECTURES;
  const CudaLibraryVersions v = cuda_library_versions();
  b.cuda_runtime = v.runtime;
  b.cuda_driver = v.driver;
  b.cublaslt = v.cublaslt;
  b.cudnn = v.cudnn;
#endif
  return b;
}

std::string build_info_text() {
  const BuildInfo b = build_info();
  std::string text = cat("h3 ", b.version, " (commit ", b.commit, ")\n");
  if (!b.cuda) return text + "backends: cpu (this build has no CUDA backend: no GPU architectures compiled in)\n";
  // nvcc's names of what the build holds ("sm_80,sm_90a,compute_120": H3_CUDA_BUILD_ARCHS of
  // cmake/cuda_architectures.cmake), listed with spaces.
  std::string archs;
  for (const char c : b.cuda_architectures) archs += c == ',' ? std::string(", ") : std::string(1, c);
  return text + cat("backends: cpu, cuda (GPU architectures compiled in: ", archs, ")\n", "CUDA runtime ",
                    b.cuda_runtime, ", driver ", b.cuda_driver, "; cuBLASLt ", b.cublaslt, "; cuDNN ", b.cudnn, "\n");
}

}  // namespace h3
