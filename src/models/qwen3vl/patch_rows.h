// The patch rows the Qwen3-VL vision tower reads (spec/conditioner.md §5.1 steps 3–5), shared by the image and the
// video processor: the reference's fused rescale + normalize in float32 and the merge-block order of the patches.
#pragma once
#include <cstdint>
#include <vector>

namespace h3 {

// Per-channel constants of the normalization x = (u8 − mean_c) / std_c.
struct PixelNormalization {
  float mean[3], std[3];
};

// The constants as the reference's fused rescale + normalize computes them (TorchvisionBackend
// `_fuse_mean_std_and_rescale_factor`): the config's value as a float32 tensor times 1/rescale_factor (a Python
// float, which the float32 multiply rounds to float32 first). `mean` and `std` have 3 entries.
PixelNormalization fused_normalization(const std::vector<double>& mean, const std::vector<double>& std,
                                       double rescale_factor);

// Writes the patch rows of one clip to `out`: `frames` holds one pointer per frame (a whole number of temporal
// blocks of `temporal_patch` frames), each frame width × height interleaved RGB8 with both sides multiples of
// patch · merge. Rows in (t_block, h_block, w_block, h_in_block, w_in_block) order — the reference's patchify
// permutation — each row's 3 · temporal_patch · patch² values ordered (channel, frame in block, y, x), each value
// normalized with `n`. Writes (frames / temporal_patch) · (height / patch) · (width / patch) rows.
void write_patch_rows(const std::vector<const uint8_t*>& frames, int64_t width, int64_t height, int64_t patch,
                      int64_t merge, int64_t temporal_patch, const PixelNormalization& n, float* out);

}  // namespace h3
