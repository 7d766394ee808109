// Rotary-position tables of the Qwen3-VL language model (spec/conditioner.md §7.4–7.5, §9.1) and vision tower (§6.3):
// the inverse frequencies exactly as PyTorch computes them on the CPU, per-token positions on the three M-RoPE axes,
// and the cos/sin tables built from them.
#pragma once
#include <cstdint>
#include <vector>

#include "models/qwen3vl/vision_grid.h"
#include "tensor/tensor.h"

namespace h3 {

// inv_freq[i] = 1 / theta^(float(2i) / dim), i < dim/2, bit for bit as torch computes it on the CPU in float32:
// the exponent rounded to float32, theta (as float32) raised to it by SLEEF's powf_u10 (what torch's vectorized CPU
// pow calls; ≤ 1 ulp, not correctly rounded — a correctly rounded pow differs in the last bit for some entries, e.g.
// i = 19 of the released text config), then one float32 division.
std::vector<float> torch_rope_inv_freq(double theta, int64_t dim);

// Per-token positions on the three M-RoPE axes: temporal, height, width.
struct MropePositions {
  std::vector<int64_t> t, h, w;
  int64_t size() const { return static_cast<int64_t>(t.size()); }
  // Appends `count` text tokens: all three axes = start, start+1, ..., start+count-1.
  void append_text(int64_t start, int64_t count);
  // Appends the tokens of one merged rows × cols image block, raster order: (t, h, w) = (start, start + r, start + c).
  void append_image(int64_t start, int64_t rows, int64_t cols);
};

// The positions of a presentation whose `<|image_pad|>` runs hold the images of `grids` in order (spec/conditioner.md
// §7.4, the reference's get_rope_index over mm_token_type_ids): a cursor c starts at 0; a run of k other tokens takes
// c .. c+k−1 on every axis, then c += k; the run of image i (exactly grids[i].tokens(merge_size) pads, grid t = 1)
// takes append_image(c, h/merge, w/merge), then c += max(h, w)/merge. Throws when the runs and the grids disagree.
MropePositions multimodal_positions(const std::vector<int32_t>& ids, int32_t image_token_id,
                                    const std::vector<ImageGrid>& grids, int64_t merge_size);

// The same with videos (transformers 5.17's get_rope_index): runs of `<|video_pad|>` hold the temporal blocks of the
// videos of `video_grids` in order — video v of grid (t, h, w) fills the next t runs, each like an image of grid
// (1, h, w) (its timestamp lives in the text between the blocks) — and runs of image pads the images in order; the
// n-th run of a modality takes the n-th entry of that modality. Throws when the runs and the grids disagree.
MropePositions multimodal_positions(const std::vector<int32_t>& ids, int32_t image_token_id,
                                    const std::vector<ImageGrid>& image_grids, int32_t video_token_id,
                                    const std::vector<ImageGrid>& video_grids, int64_t merge_size);

// The axis (0 = t, 1 = h, 2 = w) that frequency slot `slot` of interleaved M-RoPE takes its position from:
// h when slot % 3 == 1 and slot < 3·section[1], w when slot % 3 == 2 and slot < 3·section[2], t otherwise.
// (transformers' Qwen3-VL always interleaves, whatever the config's `mrope_interleaved` says.)
int mrope_axis(int64_t slot, const std::vector<int64_t>& section);

// Interleaved M-RoPE tables, host F32 [positions, 2·inv_freq.size()], in the rotate-half layout the attention op
// takes: angle_i = float(pos_axis(i)) · inv_freq[i] (one float32 rounding), emb = [angle, angle],
// cos = cos(emb), sin = sin(emb), each rounded once from the exact value. (The reference evaluates cos/sin with
// MKL or SLEEF on the CPU and CUDA's cosf/sinf on the GPU, all within 1–2 ulp of that value.)
struct RopeTables {
  Tensor cos, sin;
};
RopeTables mrope_tables(const MropePositions& pos, const std::vector<float>& inv_freq,
                        const std::vector<int64_t>& section);

// The vision tower's 2-D rotary tables (spec/conditioner.md §6.3), host F32 [Σ patches, 4·inv_freq.size()] in the
// rotate-half layout: patch (r, c) of its grid (r, c in patches, the patches in merge-block order, every temporal
// block alike) has angles [float(r)·inv_freq, float(c)·inv_freq] (each one float32 rounding), duplicated, and the
// cos and sin of those rounded once. inv_freq = torch_rope_inv_freq(theta, head_dim / 2).
RopeTables vision_rope_tables(const std::vector<ImageGrid>& grids, int64_t merge_size,
                              const std::vector<float>& inv_freq);

}  // namespace h3
