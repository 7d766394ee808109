// libFuzzer target: the still-image readers (src/media/image_input.h) must refuse every malformed file with
// h3::Error and never crash or read out of bounds; what they accept has the probed size and exactly
// width x height x 3 bytes, and resizes (src/media/image_resize.h) cleanly. The upright readers (EXIF orientation,
// src/media/image_orientation.h) likewise: an orientation of 1..8, and a picture of the upright size.
#include <cstddef>
#include <cstdint>

#include "media/image_input.h"
#include "media/image_resize.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A low pixel limit keeps every decode small; the limit's own check is the same code at any value.
  constexpr int64_t kFuzzMaxPixels = 1 << 20;
  h3::ImageInfo info;
  try {
    info = h3::probe_image(data, size, "fuzz", kFuzzMaxPixels);
  } catch (const h3::Error&) {
    return 0;
  }
  try {
    const h3::Rgb8Image image = h3::decode_image(data, size, "fuzz", kFuzzMaxPixels);
    if (image.width != info.width || image.height != info.height ||
        image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3)
      __builtin_trap();
    const h3::Rgb8Image small = h3::resize_rgb8(image, 1 + image.width % 7, 1 + image.height % 5);
    if (small.rgb.size() != static_cast<size_t>(small.width) * small.height * 3) __builtin_trap();
  } catch (const h3::Error&) {
  }
  try {
    const h3::ImageInfo upright = h3::probe_image_upright(data, size, "fuzz", kFuzzMaxPixels);
    if (upright.orientation < 1 || upright.orientation > 8 || upright.width != info.width) __builtin_trap();
    const h3::Rgb8Image image = h3::decode_image_upright(data, size, "fuzz", kFuzzMaxPixels);
    if (image.width != upright.upright_width() || image.height != upright.upright_height() ||
        image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3)
      __builtin_trap();
  } catch (const h3::Error&) {
  }
  return 0;
}
