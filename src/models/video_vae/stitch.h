// Blending of decoded pieces of the MiniMax-H3 video VAE (spec/video_vae.md §9.3): spatial tiles into one canvas,
// and the cross-fade between consecutive temporal chunks. Host float32 tensors [C, F, H, W]. The decoder stitches
// through the backend ops (stitch_video_tiles, video_frames_to_pixels); these host compositions are the reference
// the tests hold those ops to.
//
// The arithmetic follows the reference's `_blend` operation by operation: w_b = p / E, w_a = 1 − w_b,
// out = a·w_a + b·w_b, each step rounded to the working precision (float32 here; the reference decode under CUDA
// autocast runs the same steps in float16).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/video_vae/geometry.h"
#include "tensor/tensor.h"

namespace h3 {

// Position p of an overlap of extent E: `a` is the earlier piece's sample, `b` the later one's (the backend ops
// stitch_video_tiles and video_frames_to_pixels blend with the same function).
inline float blend_sample(float a, float b, int64_t p, int64_t extent) { return video_blend(a, b, p, extent); }

// Stitches the raw decoded tiles of one window (row-major grid, tiles[i·nx + j], each [C, F, ys.length, xs.length])
// into the canvas [C, F, H, W] with H = last y start + ys.length (likewise W). For tile (i, j): first blend its top
// rows with the raw tile above, then its left columns with the raw tile to the left (not that tile's blended
// version), then keep all but the last overlap rows/columns unless it is the last row/column.
Tensor stitch_tiles(const std::vector<Tensor>& tiles, const TileSplit& ys, const TileSplit& xs);

// Temporal cross-fade: the first E' = min(extent, frames of each) frames of `next` become
// blend(prev[F_prev − E' + p], next[p], p, E'). `prev` and `next` are [C, F, H, W] with equal C, H, W.
void cross_fade_frames(const Tensor& prev, Tensor& next, int64_t extent);

}  // namespace h3
