// The stand-in for kernels_sparse_attention_sm90.cu in a build whose H3_CUDA_ARCHITECTURES lacks 90a
// (CMakeLists.txt): the Hopper routed kernel is absent, and the backend runs the portable one.
#include "backend/cuda/kernels_sparse_attention.h"

namespace h3::cuda {

size_t block_sparse_hopper_workspace_bytes(const BlockSparseParams&) { return 0; }
const char* launch_block_sparse_attention_hopper(const BlockSparseParams&, void*, int*, cudaStream_t) {
  return "this build has no sm_90a code (H3_CUDA_ARCHITECTURES lacks 90a)";
}

}  // namespace h3::cuda
