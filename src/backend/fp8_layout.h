// Index arithmetic of the FP8 activation layout (backend.h's Fp8Activation), shared by the host and the CUDA
// kernels (constexpr: nvcc's --expt-relaxed-constexpr lets device code call it).
//
// Block scaling keeps one float32 scale per row and 128 columns. cuBLASLt's VEC128 mode reads them as columns of
// row-contiguous scales whose row count must be a multiple of 4 (the cuBLAS documentation, "128-element 1D and
// 128x128 2D block scaling", scaling factors layouts), so a product of M rows is run as a main part of
// M' = M − M mod 4 rows and, when M mod 4 ≠ 0, a tail of 4 rows starting at row M' (the rows past M padding):
// the main part's ceil(K/128) × M' scales, then the tail's ceil(K/128) × 4.
#pragma once
#include <cstdint>

namespace h3 {

constexpr int64_t kFp8Block = 128;  // the block edge of Fp8Scaling::Block

// ceil(n / 128).
constexpr int64_t fp8_blocks(int64_t n) { return (n + kFp8Block - 1) / kFp8Block; }
// Rows of the main part of a block-scaled activation of `rows` rows, and its rows with the tail's padding.
constexpr int64_t fp8_block_main_rows(int64_t rows) { return rows - rows % 4; }
constexpr int64_t fp8_block_padded_rows(int64_t rows) { return (rows + 3) / 4 * 4; }
// Where the scale of (row m, column group g) of a block-scaled activation [rows, K] lives (m < padded rows).
constexpr int64_t fp8_block_scale_index(int64_t m, int64_t g, int64_t rows, int64_t K) {
  const int64_t main = fp8_block_main_rows(rows);
  return m < main ? g * main + m : fp8_blocks(K) * main + g * 4 + (m - main);
}

}  // namespace h3
