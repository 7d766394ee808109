// Binary PPM (P6, maxval 255) stills and frame directories.
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

// Every frame of `video` as DIR/frame_00000.ppm, frame_00001.ppm, ... (five digits, more when F > 100000),
// creating DIR (and its parents) when missing. Each file is written through OutputFile.
void write_frames_dir(const std::string& dir, const Rgb8Video& video);

// "frame_00042.ppm"
std::string frame_file_name(int index);
// Whether write_frames_dir writes a file of this name: "frame_" + five or more digits + ".ppm".
bool is_frame_file_name(const std::string& name);

}  // namespace h3
