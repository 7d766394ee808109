#include "backend/backend.h"

#include "util/error.h"

namespace h3 {

Tensor Backend::zeros(const Shape& shape, DType dt) {
  Tensor t = empty(shape, dt);
  fill(t, 0.f);
  return t;
}

#ifndef H3_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend() { fail("this build of h3 has no CUDA backend (rebuild with nvcc available)"); }
bool cuda_backend_available() { return false; }
#endif

std::unique_ptr<Backend> make_backend(const std::string& which) {
  if (which == "cpu") return make_cpu_backend();
  if (which == "cuda") return make_cuda_backend();
  H3_CHECK(which == "auto", "--device must be cpu, cuda or auto, got '", which, "'");
  return cuda_backend_available() ? make_cuda_backend() : make_cpu_backend();
}

}  // namespace h3
