// Binary PPM (P6, maxval 255) stills, and the names of the frames of a --frames-dir folder.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "media/video_frames.h"

namespace h3 {

// The bytes of a P6 file: "P6\n<W> <H>\n255\n" then the RGB24 pixels.
std::vector<uint8_t> encode_ppm(const uint8_t* rgb, int width, int height);

// One picture as a P6 file, through OutputFile (util/output_file.h).
void write_ppm(const std::string& path, const Rgb8Image& image);

// The name of frame `index` in a --frames-dir folder: "frame_00042.ppm" (five digits, more from 100000).
std::string frame_file_name(int index);
// Whether a file of this name is one frame_file_name gives: "frame_" + five or more digits + ".ppm".
bool is_frame_file_name(const std::string& name);

}  // namespace h3
