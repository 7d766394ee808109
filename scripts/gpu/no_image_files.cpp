// The GPU bundle's stand-in for src/media/image_input.cpp (scripts/gpu/bundle.sh links it before libh3): the GPU
// machine's image has no FFmpeg, libjpeg or libwebp, so the bundled binaries take keyframes as RGB8 buffers only
// and refuse image files with one sentence.
#include "media/image_input.h"
#include "util/error.h"

namespace h3 {

namespace {
[[noreturn]] void no_files(const std::string& name) {
  fail(name, ": this build reads no image files (the GPU bundle has no image decoders; pass RGB8 pictures)");
}
}  // namespace

const char* image_format_name(ImageFormat) { return "image"; }
ImageInfo probe_image_file(const std::string& path, int64_t) { no_files(path); }
ImageInfo probe_image(const uint8_t*, size_t, const std::string& name, int64_t) { no_files(name); }
Rgb8Image read_image_file(const std::string& path, int64_t) { no_files(path); }
Rgb8Image decode_image(const uint8_t*, size_t, const std::string& name, int64_t) { no_files(name); }
ImageInfo probe_image_file_upright(const std::string& path, int64_t) { no_files(path); }
ImageInfo probe_image_upright(const uint8_t*, size_t, const std::string& name, int64_t) { no_files(name); }
Rgb8Image read_image_file_upright(const std::string& path, int64_t) { no_files(path); }
Rgb8Image decode_image_upright(const uint8_t*, size_t, const std::string& name, int64_t) { no_files(name); }

}  // namespace h3
