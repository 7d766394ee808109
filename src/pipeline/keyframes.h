// fl2va keyframe geometry (spec/sampling.md §3.1 and §4): the reference's canvas rule (modular_pipeline.py
// resolve_canvas_size) and how its MiniMaxH3ResizeStep (before_encoder.py) puts the keyframes on the canvas.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/config.h"
#include "media/video_frames.h"
#include "pipeline/layout.h"  // KeyframeAnchor

namespace h3 {

// The aspect ratios (width / height) the released checkpoint was trained over: 1:4 .. 4:1.
inline constexpr double kMinAspectRatio = 0.25;
inline constexpr double kMaxAspectRatio = 4.0;

struct CanvasSize {
  int64_t height = 0, width = 0;
  bool operator==(const CanvasSize&) const = default;
};

// resolve_canvas_size: the short edge starts at `short_edge`, the area is capped at `max_pixels`, then both axes
// round to the nearest `canvas_multiple` (ties to even, Python's round) and are at least one multiple. Only the
// ratio of the first two arguments matters. Throws, in one sentence, when the ratio is not positive or lies outside
// 1:4 .. 4:1; `subject` names what the ratio comes from in that sentence ("the first keyframe (1000x100 pixels)").
CanvasSize resolve_canvas_size(double aspect_width, double aspect_height, int64_t canvas_multiple, int64_t short_edge,
                               int64_t max_pixels, const std::string& subject = "the requested aspect");

const char* keyframe_anchor_name(KeyframeAnchor anchor);  // "first", "last"

struct PlacedKeyframe {
  KeyframeAnchor anchor = KeyframeAnchor::First;
  Rgb8Image image;  // canvas-sized
};

struct KeyframePlacement {
  CanvasSize canvas;
  std::vector<PlacedKeyframe> keyframes;  // packed order: the first keyframe, then the last (those given)
};

// MiniMaxH3ResizeStep. `first` / `last` may each be absent (nullptr), not both. `width` and `height` are given
// together or neither; without them the canvas comes from the first entry of the keyframe list (the first keyframe,
// else the last) by resolve_canvas_size with `config`'s short edge and area cap. The first entry (the geometry
// anchor) is stretched onto the canvas with LANCZOS; the second is scaled with LANCZOS to cover it (sizes rounded,
// ties to even) and centre-cropped at ((w − W) // 2, (h − H) // 2). A keyframe already at the canvas size is used
// as is. `canvas_multiple` is the VAE's spatial ratio × the transformer's patch size (32 for the release).
KeyframePlacement place_keyframes(const Rgb8Image* first, const Rgb8Image* last, std::optional<int64_t> width,
                                  std::optional<int64_t> height, int64_t canvas_multiple, const CanvasConfig& config);

}  // namespace h3
