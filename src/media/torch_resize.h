// PyTorch's antialiased bicubic resize of 8-bit images, bit for bit: what torchvision's resize does to a uint8 CPU
// tensor with antialias=True, and so what the Qwen3-VL image processor (torchvision backend) does to a keyframe
// (spec/conditioner.md §5.1). Hand-written because no library reproduces ATen's arithmetic: its weights are Pillow's
// (Keys cubic a = −0.5, support widened by the downscale factor, normalized in double) but rounded to int16 at a
// precision chosen per axis, not Pillow's fixed 22 bits, so Pillow's (and libswscale's) uint8 output differs.
#pragma once
#include "media/video_frames.h"

namespace h3 {

// `src` resized to width × height (each ≥ 1): the width pass first (into an 8-bit intermediate), then the height
// pass; an axis whose size does not change is not resampled (an unchanged size returns a copy). The reference's
// aten/src/ATen/native/cpu/UpSampleKernel.cpp (`_compute_indices_min_size_weights_aa`,
// `_compute_index_ranges_int16_weights`, `basic_loop_separable_1d_{horizontal,vertical}<uint8_t>`); its AVX2 path
// computes the same integers.
Rgb8Image resize_bicubic_antialiased(const Rgb8Image& src, int width, int height);

}  // namespace h3
