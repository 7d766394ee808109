// The shape of one image (or video) as the Qwen3-VL vision tower sees it (spec/conditioner.md §5.1): `image_grid_thw`,
// in patches — t temporal blocks of h × w patches. Every spatial merge_size × merge_size block of patches becomes one
// language-model token.
#pragma once
#include <cstdint>

namespace h3 {

struct ImageGrid {
  int64_t t = 1, h = 0, w = 0;

  int64_t patches() const { return t * h * w; }
  // Language-model tokens (rows of the tower's output): t · (h / merge) · (w / merge).
  int64_t tokens(int64_t merge_size) const { return t * (h / merge_size) * (w / merge_size); }
  bool operator==(const ImageGrid&) const = default;
};

}  // namespace h3
