// Decoded video (float RGB in [0, 1], channel-major (3, F, H, W) as the video VAE writes it) to 8-bit RGB
// frames, converted exactly like the reference pipeline (spec/video_vae.md §10): clamp to [0, 1], then
// uint8 = round(255·x) in float32 with ties to even (NumPy's round).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace h3 {

// The video frame rate of the model (frames per second).
inline constexpr int kVideoFps = 24;

// One RGB24 picture: row-major, interleaved R, G, B, no row padding.
struct Rgb8Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
};

// A clip of RGB24 pictures of one size, frame after frame.
struct Rgb8Video {
  int width = 0, height = 0, frames = 0;
  std::vector<uint8_t> rgb;  // frames * height * width * 3

  size_t frame_bytes() const { return static_cast<size_t>(width) * height * 3; }
  const uint8_t* frame(int f) const;  // pointer to frame f's first byte; f in [0, frames)
};

// One float sample in [0, 1] to 8 bits: clamp, ×255 in float32, round half to even. NaN maps to 0.
uint8_t unit_float_to_u8(float x);

// (3, F, H, W) float32, channel-major, to interleaved RGB24 frames.
Rgb8Video rgb8_from_planar(const float* chw, int frames, int height, int width);
// The same from a CPU F32 tensor of shape [3, F, H, W] or [1, 3, F, H, W].
Rgb8Video rgb8_from_tensor(const Tensor& video);

// A copy of frame f as a still picture.
Rgb8Image frame_image(const Rgb8Video& video, int f);

}  // namespace h3
