// Decoded video (float RGB in [0, 1], channel-major (3, F, H, W) as the video VAE writes it) to 8-bit RGB
// frames, converted exactly like the reference pipeline (spec/video_vae.md §10): clamp to [0, 1], then
// uint8 = round(255·x) in float32 with ties to even (NumPy's round).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "h3/media.h"
#include "tensor/tensor.h"

namespace h3 {

// The video frame rate of the model (frames per second).
inline constexpr int kVideoFps = 24;

// Rgb8Image and Rgb8Video are public (include/h3/media.h).

// One float sample in [0, 1] to 8 bits: clamp, ×255 in float32, round half to even. NaN maps to 0.
uint8_t unit_float_to_u8(float x);

// (3, F, H, W) float32, channel-major, to interleaved RGB24 frames.
Rgb8Video rgb8_from_planar(const float* chw, int frames, int height, int width);
// The same from a CPU F32 tensor of shape [3, F, H, W] or [1, 3, F, H, W].
Rgb8Video rgb8_from_tensor(const Tensor& video);

// A copy of frame f as a still picture.
Rgb8Image frame_image(const Rgb8Video& video, int f);

}  // namespace h3
