#include "backend/cuda/cuda_versions.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>

#include "util/error.h"

namespace h3 {

namespace {

// cudaRuntimeGetVersion / cudaDriverGetVersion: 1000·major + 10·minor.
std::string cuda_version_text(int v) { return cat(v / 1000, ".", (v % 1000) / 10); }

// cuBLAS(Lt) and cuDNN 9: 10000·major + 100·minor + patch (cuDNN 8: 1000·major + 100·minor + patch).
std::string library_version_text(size_t v, size_t major_scale) {
  return cat(v / major_scale, ".", (v % major_scale) / 100, ".", v % 100);
}

std::string loaded_and_built(const std::string& loaded, const std::string& built) {
  return loaded == built ? loaded : cat(loaded, " (built with ", built, ")");
}

}  // namespace

CudaLibraryVersions cuda_library_versions() {
  CudaLibraryVersions v;
  int runtime = 0, driver = 0;
  v.runtime = cudaRuntimeGetVersion(&runtime) == cudaSuccess ? loaded_and_built(cuda_version_text(runtime),
                                                                                  cuda_version_text(CUDART_VERSION))
                                                              : "unknown";
  v.driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0 ? cuda_version_text(driver)
                                                                        : std::string("none (no NVIDIA driver)");
  v.cublaslt = loaded_and_built(library_version_text(cublasLtGetVersion(), 10000),
                                library_version_text(CUBLAS_VERSION, 10000));
  const size_t cudnn_scale = CUDNN_MAJOR >= 9 ? 10000 : 1000;
  v.cudnn = loaded_and_built(library_version_text(cudnnGetVersion(), cudnn_scale),
                             library_version_text(CUDNN_VERSION, cudnn_scale));
  return v;
}

}  // namespace h3
