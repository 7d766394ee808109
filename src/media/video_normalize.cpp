// The pure half of media/video_input.h (no FFmpeg): the reference's 24 fps resampling and canvas step, and the
// rotation. Kept apart from the decoders so that a build without FFmpeg (the GPU bundle, scripts/gpu/bundle.sh)
// still normalizes frames handed over in memory.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "media/image_resize.h"
#include "media/video_input.h"
#include "util/error.h"

#include "util/strict_fp.h"  // fps_slot rounds i · scale, then + 0.5, as NumPy does

namespace h3 {

namespace {

void check_fps(double fps) {
  H3_CHECK(std::isfinite(fps) && fps > 0, "A reference video must have a positive frame rate, got ", fps, ".");
}

}  // namespace

void append_frame(Rgb8Video& video, const Rgb8Image& image, int64_t copies) {
  if (video.frames == 0) {
    video.width = image.width;
    video.height = image.height;
  }
  for (int64_t c = 0; c < copies; ++c) video.rgb.insert(video.rgb.end(), image.rgb.begin(), image.rgb.end());
  video.frames += static_cast<int>(copies);
}

int64_t fps_slot(int64_t i, double fps, double target_fps) {
  const double scale = target_fps / fps;
  return static_cast<int64_t>(std::floor(static_cast<double>(i) * scale + 0.5));
}

std::vector<int64_t> fps_repeats(int64_t frames, double fps, double target_fps) {
  check_fps(fps);
  H3_CHECK(frames >= 0, "a frame count must be >= 0, got ", frames);
  std::vector<int64_t> repeats(static_cast<size_t>(frames), 1);
  if (fps == target_fps) return repeats;
  for (int64_t i = 0; i < frames; ++i)
    repeats[static_cast<size_t>(i)] = fps_slot(i + 1, fps, target_fps) - fps_slot(i, fps, target_fps);
  return repeats;
}

int64_t source_frames_needed(int64_t num_frames, double fps, double target_fps) {
  check_fps(fps);
  H3_CHECK(num_frames >= 0, "a frame count must be >= 0, got ", num_frames);
  if (fps == target_fps) return num_frames;
  // slot(n) = floor(n · scale + 0.5) is non-decreasing: start a little below its inverse, then step up.
  const double scale = target_fps / fps;
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::floor((static_cast<double>(num_frames) - 0.5) / scale)) - 2);
  while (fps_slot(n, fps, target_fps) < num_frames) ++n;
  return n;
}

Rgb8Video resample_to_fps(const Rgb8Video& frames, double fps, double target_fps) {
  const std::vector<int64_t> repeats = fps_repeats(frames.frames, fps, target_fps);
  Rgb8Video out;
  out.width = frames.width;
  out.height = frames.height;
  for (int f = 0; f < frames.frames; ++f)
    for (int64_t r = 0; r < repeats[static_cast<size_t>(f)]; ++r) {
      out.rgb.insert(out.rgb.end(), frames.frame(f), frames.frame(f) + frames.frame_bytes());
      ++out.frames;
    }
  return out;
}

Rgb8Video normalize_reference_video(const Rgb8Video& frames, double fps, int64_t num_frames, int canvas_width,
                                    int canvas_height, double target_fps) {
  check_fps(fps);
  H3_CHECK(num_frames >= 1 && canvas_width >= 1 && canvas_height >= 1, "normalizing a reference video needs at ",
           "least one frame on a canvas of at least 1x1 pixels, got ", num_frames, " frames on ", canvas_width, "x",
           canvas_height);
  const Rgb8Video resampled = resample_to_fps(frames, fps, target_fps);
  H3_CHECK(resampled.frames > 0, "A reference video must give at least one frame at ", target_fps, " fps; ",
           frames.frames, " frames at ", fps, " fps give none.");
  const int kept = static_cast<int>(std::min<int64_t>(resampled.frames, num_frames));
  Rgb8Video out;
  for (int f = 0; f < kept; ++f) {
    Rgb8Image frame = frame_image(resampled, f);
    if (frame.width != canvas_width || frame.height != canvas_height)
      frame = resize_rgb8(frame, canvas_width, canvas_height, ResampleFilter::Lanczos);
    append_frame(out, frame, 1);
  }
  return out;
}

Rgb8Image rotate_clockwise(const Rgb8Image& image, int quarter_turns) {
  const int turns = ((quarter_turns % 4) + 4) % 4;
  if (turns == 0) return image;
  const int w = image.width, h = image.height;
  Rgb8Image out;
  out.width = turns == 2 ? w : h;
  out.height = turns == 2 ? h : w;
  out.rgb.resize(image.rgb.size());
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      // The source pixel that lands on (x, y) after `turns` clockwise quarter turns.
      const int sx = turns == 1 ? y : turns == 2 ? w - 1 - x : w - 1 - y;
      const int sy = turns == 1 ? h - 1 - x : turns == 2 ? h - 1 - y : x;
      std::memcpy(&out.rgb[(static_cast<size_t>(y) * out.width + x) * 3],
                  &image.rgb[(static_cast<size_t>(sy) * w + sx) * 3], 3);
    }
  return out;
}

}  // namespace h3
