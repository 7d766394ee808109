// Launchers of the FP8 quantization kernels (kernels_fp8.cu; the arithmetic is backend/cpu/cpu_fp8.h's).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda {

// x [rows, K] → E4M3 codes [rows, K], one scale per row and `group` columns, stored scale[g·rows + r] (group = K:
// one per row; group = 128: cuBLASLt's VEC128 layout [ceil(K/128), rows]). rows < 2^31, ceil(K/group) < 65536.
void launch_fp8_quantize_rows(In x, int64_t rows, int64_t K, int64_t group, uint8_t* codes, float* scale,
                              cudaStream_t s);
// w [N, K] → codes [N, K] and one scale per 128×128 block, stored scale[bn·ld + bk] (cuBLASLt's BLK128x128
// layout; ld ≥ ceil(K/128), the padding set to 1).
void launch_fp8_quantize_weight_blocks(In w, int64_t N, int64_t K, int64_t ld, uint8_t* codes, float* scale,
                                       cudaStream_t s);

}  // namespace h3::cuda
