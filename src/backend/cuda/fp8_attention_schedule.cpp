// Which of the FP8 attention kernel's schedules (cuda_kernels.h's Fp8AttentionSchedule) kernels_attention_fp8_sm90.cu
// has instances for: host code of its own, so that a build without the sm_90a code validates the same settings.
#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda {

const char* fp8_attention_schedule_refusal(const Fp8AttentionSchedule& s) {
  if (s.key_tile != 128 && s.key_tile != 192) return "key tiles are of 192 or 128 keys";
  if (s.exp2_poly_chunks != 0 && s.exp2_poly_chunks != 4) return "polynomial exp2 chunks are 0 or 4 of 16";
  if (s.stages != 2 && s.stages != 3) return "the ring has 2 or 3 stages";
  if (s.tensor_sum_tiles != 0 && s.tensor_sum_tiles != 1 && s.tensor_sum_tiles != 2 && s.tensor_sum_tiles != 4)
    return "tensor-core sums are of 1, 2 or 4 tiles, or 0 (the tile accumulator)";
  if (s.key_tile == 192 && (s.exp2_poly_chunks != 0 || s.stages != 2 || s.tensor_sum_tiles == 0))
    return "192-key tiles take every exp2 on the SFU, a 2-stage ring and tensor-core sums (the polynomial, 3 stages "
           "and the tile accumulator are the 128-key kernel's: H3_FP8_ATTENTION_KEY_TILE=128)";
  return nullptr;
}

const char* fp8_attention_codes_refusal(const Fp8AttentionSchedule& s) {
  if (const char* why = fp8_attention_schedule_refusal(s)) return why;
  if (s.exp2_poly_chunks != 0 || s.stages != 2)
    return "the attention writes E4M3 codes with every exp2 on the SFU and a 2-stage ring (the polynomial and 3 "
           "stages write 16-bit outputs only)";
  return nullptr;
}

}  // namespace h3::cuda
