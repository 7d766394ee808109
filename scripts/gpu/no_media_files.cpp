// The GPU bundle's stand-in for the media decoders (src/media/image_input.cpp, and the FFmpeg halves of
// video_input.cpp and audio_input.cpp; scripts/gpu/bundle.sh links it before libh3): the GPU machine's image has no
// FFmpeg, libjpeg or libwebp, so the bundled binaries take keyframes and references as media in memory only and
// refuse files with one sentence. The pure normalizations (video_normalize.cpp, audio_resample.cpp) are the real ones.
// Nor has it libswscale: a render canvas' frames (frame_scale.cpp) are refused at the upscale, so the bundled
// benchmarks time a render canvas up to its final latents (GenerateCallbacks::on_latents).
#include "media/audio_input.h"
#include "media/frame_scale.h"
#include "media/image_input.h"
#include "media/video_input.h"
#include "util/error.h"

namespace h3 {

namespace {
[[noreturn]] void no_files(const std::string& name) {
  fail(name, ": this build reads no media files (the GPU bundle has no decoders; pass pictures, frames and "
             "waveforms in memory)");
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

VideoProbe probe_video(const MediaSource& source) { no_files(source.name()); }
DecodedVideo read_video(const MediaSource& source, int64_t) { no_files(source.name()); }
Rgb8Video read_reference_video(const MediaSource& source, int64_t, int, int, double) { no_files(source.name()); }

Tensor scale_frames_lanczos(const Tensor&, int64_t width, int64_t height) {
  fail("upscaling frames to ", width, "x", height, ": this build has no libswscale (the GPU bundle); stop a render "
       "canvas' generation at its latents");
}

AudioProbe probe_audio(const MediaSource& source) { no_files(source.name()); }
Waveform read_audio(const MediaSource& source, const AudioReadOptions&) { no_files(source.name()); }
Waveform read_reference_audio(const MediaSource& source, int64_t, AudioRole, double, int, double) {
  no_files(source.name());
}

}  // namespace h3
