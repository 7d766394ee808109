// Launchers of the FP8 quantization kernels (kernels_fp8.cu; the arithmetic is backend/cpu/cpu_fp8.h's) and of
// the producers that quantize their own output (kernels_elementwise.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda {

// Where a producer writes an activation [rows, K] quantized (backend.h's Fp8Activation layout): codes [rows, K]
// (block: padded to a multiple of 4 rows), scales one per row or, block, per row and 128 columns at
// fp8_block_scale_index (backend/fp8_layout.h). `rounding`: the dtype the unfused producer would store its
// output in; values are rounded to it before they are quantized, so that the codes are the separate pass's.
struct Fp8Out {
  uint8_t* codes = nullptr;
  float* scale = nullptr;
  int64_t rows = 0;
  bool block = false;
  Elem rounding = Elem::BF16;
};

// x [rows, K] → E4M3 codes [rows, K] and scales: one per row at scale[r] (block false: also a weight's
// per-channel form), or Fp8Out's block layout. rows < 2^31, ceil(K/128) < 65536.
void launch_fp8_quantize_rows(In x, int64_t rows, int64_t K, bool block, uint8_t* codes, float* scale,
                              cudaStream_t s);
// x [rows, K] in segments of seg_len rows → codes [rows, K], every row of segment b scaled by fp8 scale(bound[b]'s
// float) (its scale at scale[r]): the separate pass of the FP8 attention's codes (cuda_kernels.h's
// Fp8AttentionCodes), bound[b] ≥ every |x| of the segment. rows < 2^31.
void launch_fp8_quantize_rows_by_bound(In x, int64_t rows, int64_t K, const uint32_t* bound, int64_t seg_len,
                                       uint8_t* codes, float* scale, cudaStream_t s);
// The padding rows of a block-scaled activation of `rows` rows: codes zero, scales 1 (nothing when rows % 4 == 0).
void launch_fp8_pad_rows(int64_t rows, int64_t K, uint8_t* codes, float* scale, cudaStream_t s);
// w [N, K] → codes [N, K] and one scale per 128×128 block, stored scale[bn·ld + bk] (cuBLASLt's BLK128x128
// layout; ld ≥ ceil(K/128), the padding set to 1).
void launch_fp8_quantize_weight_blocks(In w, int64_t N, int64_t K, int64_t ld, uint8_t* codes, float* scale,
                                       cudaStream_t s);

// launch_rms_norm_modulate, launch_gated_residual_modulate (x updated as there) and launch_swiglu with the output
// quantized into q as it is stored, in the register-cached kernels of those ops (the same arithmetic, so the
// codes and scales equal the unfused op followed by launch_fp8_quantize_rows of its output, bit for bit).
// Each returns false, having launched nothing, where its fused kernel does not apply (D or F not a multiple of 8,
// an unaligned operand, rows longer than 8192 elements — 16384 for SwiGLU): the caller then runs the unfused op
// and the separate quantization. The padding rows are the caller's (launch_fp8_pad_rows).
bool launch_rms_norm_modulate_fp8(In x, In w, float eps, In table, int64_t table_rows, int P, int shift_param,
                                  int scale_param, const int32_t* idx, const Fp8Out& q, int64_t rows, int64_t D,
                                  int* err, cudaStream_t s);
bool launch_gated_residual_modulate_fp8(Out x, In y, const RowTable& gate, int gate_param, In w, float eps,
                                        const RowTable& modulation, int shift_param, int scale_param, const Fp8Out& q,
                                        int64_t rows, int64_t D, int* err, cudaStream_t s);
bool launch_swiglu_fp8(In u, bool value_first, const Fp8Out& q, int64_t rows, int64_t F, cudaStream_t s);

}  // namespace h3::cuda
