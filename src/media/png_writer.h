// PNG stills through libavcodec's PNG encoder (RGB24, 8 bits per channel, no new dependency).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "media/video_frames.h"

namespace h3 {

// The bytes of a PNG file holding the RGB24 picture.
std::vector<uint8_t> encode_png(const uint8_t* rgb, int width, int height);
std::vector<uint8_t> encode_png(const Rgb8Image& image);

// Writes a PNG (temporary name, then rename; nothing is left at `path` on failure).
void write_png(const std::string& path, const Rgb8Image& image);

}  // namespace h3
