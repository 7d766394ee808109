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

// Writes a PNG through OutputFile (util/output_file.h: a file is replaced whole or not at all; a FIFO or a
// character device is written straight into).
void write_png(const std::string& path, const Rgb8Image& image);

}  // namespace h3
