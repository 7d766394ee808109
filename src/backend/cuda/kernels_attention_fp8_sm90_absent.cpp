// The stand-in for kernels_attention_fp8_sm90.cu in a build whose H3_CUDA_ARCHITECTURES lacks 90a (CMakeLists.txt):
// FP8 attention is refused (the backend then runs attention in bf16), and its launchers are never reached.
#include "backend/cuda/cuda_kernels.h"
#include "util/error.h"

namespace h3::cuda {

namespace {
constexpr const char* kAbsent = "this build has no sm_90a code (H3_CUDA_ARCHITECTURES lacks 90a)";
}

const char* hopper_attention_fp8_refusal(const FlashParams&) { return kAbsent; }
void launch_attention_fp8_quantize(const FlashParams&, const Fp8AttentionBuffers&, const Fp8AttentionSchedule&,
                                   cudaStream_t) {
  fail("FP8 attention: ", kAbsent);
}
void launch_hopper_attention_fp8(const FlashParams&, const Fp8AttentionBuffers&, const Fp8AttentionSchedule&, int*,
                                 cudaStream_t, const Fp8AttentionCodes*) {
  fail("FP8 attention: ", kAbsent);
}

}  // namespace h3::cuda
