// The CPU backend's video VAE output ops (definitions in backend/backend.h): direct per-pixel transcriptions of
// the stitching and pixel conversion, float32, threaded over (channel, frame) planes.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace h3::cpu {

void stitch_video_tiles(const Tensor& features, const VideoTileGrid& grid, int64_t frame_begin, int64_t frame_end,
                        Tensor& canvas);
void video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                            const std::vector<float>& mean, const std::vector<float>& std, Tensor& pixels);

}  // namespace h3::cpu
