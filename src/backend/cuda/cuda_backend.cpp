// Placeholder until the CUDA backend's kernels land: the build has CUDA, but no op is implemented yet, so the
// backend reports itself unavailable and `--device cuda` says so.
#include "backend/backend.h"
#include "util/error.h"

namespace h3 {

std::unique_ptr<Backend> make_cuda_backend() { fail("the CUDA backend is not implemented in this build yet"); }
bool cuda_backend_available() { return false; }

}  // namespace h3
