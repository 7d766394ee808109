// Media in memory: the pictures, clips and waveforms a request can carry and a result's frames as 8-bit RGB.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace h3 {

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

// Decoded video frames with the rate they carry.
struct DecodedVideo {
  Rgb8Video frames;   // upright (the container's rotation applied)
  double fps = 0;     // frames per second
};

// Planar float32 samples: channel c's samples at samples[c · frames() ...].
struct Waveform {
  int sample_rate = 0;
  int channels = 0;
  std::vector<float> samples;

  int64_t frames() const { return channels > 0 ? static_cast<int64_t>(samples.size()) / channels : 0; }
  const float* channel(int c) const { return samples.data() + static_cast<size_t>(c) * frames(); }
};

}  // namespace h3
