// The stand-in for kernels_attention_sm90.cu in a build whose H3_CUDA_ARCHITECTURES lacks 90a (CMakeLists.txt):
// the entry point says the Hopper kernel is absent, and the backend uses cuDNN's attention or the flash kernel.
#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda {

const char* launch_hopper_attention(const FlashParams&, const HopperSchedule&, int*, cudaStream_t) {
  return "this build has no sm_90a code (H3_CUDA_ARCHITECTURES lacks 90a)";
}

}  // namespace h3::cuda
