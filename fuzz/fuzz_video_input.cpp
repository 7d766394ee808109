// libFuzzer target: the video reference reader (src/media/video_input.h) must refuse every malformed file with
// h3::Error and never crash or read out of bounds; the bytes come through the memory MediaSource (an AVIOContext
// over the buffer). What it accepts has the probed rotation's frame size and exactly frames x width x height x 3
// bytes, and the streaming normalization puts it on the asked canvas.
#include <cstddef>
#include <cstdint>

#include "media/video_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const h3::MediaSource source = h3::MediaSource::memory(data, size, "fuzz");
  h3::VideoProbe probe;
  try {
    probe = h3::probe_video(source);
  } catch (const h3::Error&) {
    return 0;
  }
  // Small pictures only, so that a run stays fast; the size rules are the same code at any size.
  if (static_cast<int64_t>(probe.width) * probe.height > 1 << 18) return 0;
  try {
    const h3::DecodedVideo video = h3::read_video(source, 3);
    if (video.frames.frames < 1 || video.frames.frames > 3 ||
        video.frames.rgb.size() != static_cast<size_t>(video.frames.frames) * video.frames.frame_bytes() ||
        !(video.fps > 0))
      __builtin_trap();
  } catch (const h3::Error&) {
  }
  try {
    const h3::Rgb8Video normalized = h3::read_reference_video(source, 4, 8, 6);
    if (normalized.frames < 1 || normalized.frames > 4 || normalized.width != 8 || normalized.height != 6 ||
        normalized.rgb.size() != static_cast<size_t>(normalized.frames) * 8 * 6 * 3)
      __builtin_trap();
  } catch (const h3::Error&) {
  }
  return 0;
}
