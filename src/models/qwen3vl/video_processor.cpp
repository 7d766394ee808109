#include "models/qwen3vl/video_processor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "media/torch_resize.h"
#include "models/qwen3vl/patch_rows.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {

namespace {

// Python's format(value, spec) for the 'g' specs the reference's messages use (C's %g follows the same rules).
std::string format_g(const char* spec, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, value);
  return buf;
}

// Python's round() of a float to an integer: half to even, as nearbyint in the default rounding mode.
int64_t python_round(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

VideoConditionFrames sample_video_condition_frames(int64_t num_frames, double fps, double sample_fps,
                                                   int64_t temporal_patch) {
  H3_CHECK(std::isfinite(fps) && fps > 0 && std::isfinite(sample_fps) && sample_fps > 0,
           "a reference video's frame rate and the rate the conditioner reads it at must be positive, got ", fps,
           " and ", sample_fps);
  H3_CHECK(temporal_patch > 0, "the temporal patch size must be positive, got ", temporal_patch);
  H3_CHECK(num_frames >= 0, "a reference video cannot have a negative frame count, got ", num_frames);
  const double stride = fps / sample_fps;
  H3_CHECK(static_cast<double>(num_frames) / stride <= 1e7, "reading ", num_frames, " frames at ", fps,
           " fps at a rate of ", sample_fps, " fps takes more than 10 million steps; the rate must be lower");
  VideoConditionFrames out;
  // The reference's loop (encoders.py `_sample_video_condition_frames`): the cursor accumulates in double precision.
  for (double cursor = 0.0; python_round(cursor) < num_frames; cursor += stride) {
    const int64_t index = python_round(cursor);
    if (out.indices.empty() || index > out.indices.back()) out.indices.push_back(index);
  }
  if (static_cast<int64_t>(out.indices.size()) < temporal_patch) {
    const int64_t minimum = python_round(static_cast<double>(temporal_patch - 1) * stride) + 1;
    fail("A reference video is read at ", format_g("%g", sample_fps),
         " fps and its sampled frames are merged in groups of ", temporal_patch, ", so it must run at least ", minimum, " frames at ", format_g("%g", fps), " fps (",
         format_g("%.2g", static_cast<double>(minimum) / fps), " seconds), got ", num_frames, ".");
  }
  std::vector<double> timestamps;
  for (size_t k = 0; k < out.indices.size(); ++k) timestamps.push_back(static_cast<double>(k) / sample_fps);
  while (timestamps.size() % static_cast<size_t>(temporal_patch) != 0) timestamps.push_back(timestamps.back());
  for (size_t k = 0; k < timestamps.size(); k += static_cast<size_t>(temporal_patch))
    out.block_timestamps.push_back((timestamps[k] + timestamps[k + static_cast<size_t>(temporal_patch) - 1]) / 2);
  return out;
}

Rgb8Video select_frames(const Rgb8Video& video, const std::vector<int64_t>& indices) {
  Rgb8Video out;
  out.width = video.width;
  out.height = video.height;
  out.frames = static_cast<int>(indices.size());
  out.rgb.reserve(indices.size() * video.frame_bytes());
  for (int64_t i : indices) {
    H3_CHECK(i >= 0 && i < video.frames, "frame index ", i, " is outside the video's ", video.frames, " frames");
    const uint8_t* f = video.frame(static_cast<int>(i));
    out.rgb.insert(out.rgb.end(), f, f + video.frame_bytes());
  }
  return out;
}

VideoProcessorConfig load_video_processor_config(const Component& processor) {
  H3_CHECK(processor.present, "the snapshot has no processor/ component (needed for the video processor's settings: "
           "processor_config.json or video_preprocessor_config.json)");
  // transformers 5.17 takes the processor_config.json object over a flat file (tools/reference/fx_qwen_video.py,
  // layouts "nested_and_flat_video").
  const std::string nested = join_path(processor.dir, "processor_config.json");
  if (file_exists(nested)) {
    const nlohmann::json j = parse_json_file(nested);
    if (j.is_object() && j.contains("video_processor")) return parse_video_processor_config(j, nested);
  }
  const std::string flat = join_path(processor.dir, "video_preprocessor_config.json");
  H3_CHECK(file_exists(flat), processor.dir, " has no video processor settings (a \"video_processor\" object in "
           "processor_config.json, or video_preprocessor_config.json); without them transformers builds a "
           "Qwen2VLVideoProcessor from the image settings, which h3 does not implement");
  return parse_video_processor_config(parse_json_file(flat), flat);
}

std::pair<int64_t, int64_t> video_smart_resize(int64_t num_frames, int64_t height, int64_t width,
                                               int64_t temporal_factor, int64_t factor, int64_t min_pixels,
                                               int64_t max_pixels) {
  H3_CHECK(temporal_factor > 0 && factor > 0, "video smart_resize: the factors must be positive, got ",
           temporal_factor, " and ", factor);
  H3_CHECK(num_frames >= temporal_factor, "a video for the conditioner needs at least ", temporal_factor,
           " frames (the temporal patch size), got ", num_frames);
  H3_CHECK(height > 0 && width > 0, "a video frame must be at least 1x1 pixels, got ", width, "x", height);
  const double f = static_cast<double>(factor);
  if (height < factor || width < factor) {  // int(side · max(factor / height, factor / width))
    const double scale = std::max(f / static_cast<double>(height), f / static_cast<double>(width));
    height = static_cast<int64_t>(static_cast<double>(height) * scale);
    width = static_cast<int64_t>(static_cast<double>(width) * scale);
  }
  const double aspect = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  H3_CHECK(aspect <= 200, "a video frame's aspect ratio must be at most 200, got ", width, "x", height);
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  const double volume = static_cast<double>(num_frames * height * width);  // exact: far below 2^53
  int64_t h_bar = python_round(h / f) * factor, w_bar = python_round(w / f) * factor;
  const int64_t t_bar = python_round(static_cast<double>(num_frames) / static_cast<double>(temporal_factor)) *
                        temporal_factor;
  if (t_bar * h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(volume / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (t_bar * h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / volume);
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

int64_t video_max_pixels(const VideoProcessorConfig& c, int64_t num_frames) {
  H3_CHECK(num_frames > 0, "a video needs at least one frame, got ", num_frames);
  if (!c.cap_pixels_per_frame) return c.max_pixels;
  const int64_t frame_cap = c.max_video_tokens * c.factor() * c.factor();
  const int64_t floor_pixels = static_cast<int64_t>(static_cast<double>(c.min_pixels) * 1.05);
  return std::max(std::min(frame_cap, c.max_pixels / num_frames), floor_pixels) * num_frames;
}

QwenVisionInputs prepare_videos(const VideoProcessorConfig& config, const std::vector<Rgb8Video>& videos) {
  config.validate("video processor config");
  H3_CHECK(!videos.empty(), "the video processor needs at least one video");
  const int64_t p = config.patch_size, tp = config.temporal_patch_size, row = 3 * tp * p * p;
  std::vector<Rgb8Video> resized;
  resized.reserve(videos.size());
  QwenVisionInputs in;
  int64_t rows = 0;
  for (size_t k = 0; k < videos.size(); ++k) {
    const Rgb8Video& v = videos[k];
    H3_CHECK(v.width > 0 && v.height > 0 && v.frames > 0 && v.rgb.size() == v.frame_bytes() * v.frames,
             "video ", k + 1, " must have at least one frame of at least 1x1 RGB pixels with frames·width·height·3 "
             "bytes, got ", v.frames, " frames of ", v.width, "x", v.height, " with ", v.rgb.size(), " bytes");
    const auto [h, w] = video_smart_resize(v.frames, v.height, v.width, tp, config.factor(), config.min_pixels,
                                           video_max_pixels(config, v.frames));
    if (h == v.height && w == v.width) {
      resized.push_back(v);
    } else {
      Rgb8Video r;
      r.width = static_cast<int>(w);
      r.height = static_cast<int>(h);
      r.frames = v.frames;
      r.rgb.reserve(r.frame_bytes() * r.frames);
      for (int f = 0; f < v.frames; ++f) {
        const Rgb8Image out = resize_bicubic_antialiased(frame_image(v, f), r.width, r.height);
        r.rgb.insert(r.rgb.end(), out.rgb.begin(), out.rgb.end());
      }
      resized.push_back(std::move(r));
    }
    in.grids.push_back({(v.frames + tp - 1) / tp, h / p, w / p});
    rows += in.grids.back().patches();
  }
  in.pixel_values = Tensor::empty({rows, row}, DType::F32);
  const PixelNormalization n = fused_normalization(config.image_mean, config.image_std, config.rescale_factor);
  float* out = in.pixel_values.ptr<float>();
  for (size_t k = 0; k < resized.size(); ++k) {
    const Rgb8Video& v = resized[k];
    std::vector<const uint8_t*> frames;
    for (int f = 0; f < v.frames; ++f) frames.push_back(v.frame(f));
    while (static_cast<int64_t>(frames.size()) % tp != 0) frames.push_back(frames.back());  // the last frame again
    write_patch_rows(frames, v.width, v.height, p, config.merge_size, tp, n, out);
    out += in.grids[k].patches() * row;
  }
  return in;
}

}  // namespace h3
