#include "pipeline/keyframes.h"

#include <algorithm>
#include <cmath>

#include "media/image_input.h"
#include "media/image_resize.h"
#include "util/error.h"

namespace h3 {

namespace {

// Python's round() of a float: to the nearest integer, ties to even (nearbyint in the default rounding mode).
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

std::string size_text(const Rgb8Image& image) {
  return cat(image.width, "x", image.height, " pixels");
}

// Cover-scaling and centre-cropping the follower (MiniMaxH3ResizeStep's `index > 0` branch).
Rgb8Image cover_crop(const Rgb8Image& image, const CanvasSize& canvas, KeyframeAnchor anchor) {
  const double scale = std::max(static_cast<double>(canvas.width) / image.width,
                                static_cast<double>(canvas.height) / image.height);
  const int64_t covered_w = std::max(canvas.width, round_half_even(image.width * scale));
  const int64_t covered_h = std::max(canvas.height, round_half_even(image.height * scale));
  H3_CHECK(covered_w * covered_h <= kMaxImagePixels, "The ", keyframe_anchor_name(anchor), " keyframe (",
           size_text(image), ") would be scaled to ", covered_w, "x", covered_h, " to cover the ", canvas.width, "x",
           canvas.height, " canvas, over the limit of ", kMaxImagePixels, " pixels.");
  const int64_t left = std::max<int64_t>(0, (covered_w - canvas.width) / 2);  // both differences are ≥ 0, so / is //
  const int64_t top = std::max<int64_t>(0, (covered_h - canvas.height) / 2);
  const Rgb8Image covered = resize_rgb8(image, static_cast<int>(covered_w), static_cast<int>(covered_h));
  return crop_rgb8(covered, static_cast<int>(left), static_cast<int>(top), static_cast<int>(canvas.width),
                   static_cast<int>(canvas.height));
}

}  // namespace

CanvasSize resolve_canvas_size(double aspect_width, double aspect_height, int64_t canvas_multiple, int64_t short_edge,
                               int64_t max_pixels, const std::string& subject) {
  H3_CHECK(canvas_multiple >= 1 && short_edge >= 1 && max_pixels >= 1, "The canvas rule needs a positive multiple, "
           "short edge and pixel budget, got ", canvas_multiple, ", ", short_edge, " and ", max_pixels, ".");
  H3_CHECK(aspect_width > 0 && aspect_height > 0, "The aspect ratio must be positive, got ", aspect_width, ":",
           aspect_height, ".");
  const double ratio = aspect_width / aspect_height;
  H3_CHECK(kMinAspectRatio <= ratio && ratio <= kMaxAspectRatio, "MiniMax-H3 supports aspect ratios from 1:4 to 4:1 "
           "(width / height from ", kMinAspectRatio, " to ", kMaxAspectRatio, "), but ", subject, " gives ",
           aspect_width, ":", aspect_height, " = ", ratio, ".");
  double width = ratio >= 1.0 ? static_cast<double>(short_edge) * ratio : static_cast<double>(short_edge);
  double height = ratio >= 1.0 ? static_cast<double>(short_edge) : static_cast<double>(short_edge) / ratio;
  const double area = width * height;
  if (area > static_cast<double>(max_pixels)) {
    // `(max_pixels / area) ** 0.5`: CPython's float ** calls libm pow, which std::pow is (not sqrt, which may round
    // differently).
    const double scale = std::pow(static_cast<double>(max_pixels) / area, 0.5);
    width *= scale;
    height *= scale;
  }
  const double multiple = static_cast<double>(canvas_multiple);
  return {std::max(canvas_multiple, round_half_even(height / multiple) * canvas_multiple),
          std::max(canvas_multiple, round_half_even(width / multiple) * canvas_multiple)};
}

const char* keyframe_anchor_name(KeyframeAnchor anchor) { return anchor == KeyframeAnchor::First ? "first" : "last"; }

KeyframePlacement place_keyframes(const Rgb8Image* first, const Rgb8Image* last, std::optional<int64_t> width,
                                  std::optional<int64_t> height, int64_t canvas_multiple, const CanvasConfig& config) {
  H3_CHECK(first || last, "fl2va needs a first keyframe, a last keyframe or both.");
  H3_CHECK(width.has_value() == height.has_value(),
           "The canvas width and height have to be given together, or neither of them.");
  std::vector<std::pair<KeyframeAnchor, const Rgb8Image*>> given;
  if (first) given.emplace_back(KeyframeAnchor::First, first);
  if (last) given.emplace_back(KeyframeAnchor::Last, last);

  KeyframePlacement placement;
  if (width) {
    H3_CHECK(*width >= 1 && *height >= 1 && *width * *height <= kMaxImagePixels, "The canvas must be at least 1x1 "
             "and at most ", kMaxImagePixels, " pixels, got ", *width, "x", *height, ".");
    placement.canvas = {*height, *width};
  } else {
    const auto& [anchor, image] = given.front();
    placement.canvas = resolve_canvas_size(image->width, image->height, canvas_multiple, config.canvas_short_edge,
                                           config.canvas_max_pixels,
                                           cat("the ", keyframe_anchor_name(anchor), " keyframe (", size_text(*image),
                                               ")"));
  }
  const CanvasSize& canvas = placement.canvas;
  for (size_t index = 0; index < given.size(); ++index) {
    const auto& [anchor, image] = given[index];
    PlacedKeyframe placed{anchor, {}};
    if (image->width == canvas.width && image->height == canvas.height)
      placed.image = *image;
    else if (index == 0)  // the geometry anchor is stretched
      placed.image = resize_rgb8(*image, static_cast<int>(canvas.width), static_cast<int>(canvas.height));
    else  // the follower is cover-cropped
      placed.image = cover_crop(*image, canvas, anchor);
    placement.keyframes.push_back(std::move(placed));
  }
  return placement;
}

}  // namespace h3
