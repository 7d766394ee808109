// libFuzzer target: the EXIF and XMP readers behind the upright image readers (src/media/image_orientation.h), on
// raw blobs, so the fuzzer reaches the IFD walk without a picture around it. They must never read outside the
// blob, and give an orientation of 1..8 (-1 or a digit for XMP); the same bytes as a TIFF file's first directory
// go through image_orientation too.
#include <cstddef>
#include <cstdint>

#include "media/image_orientation.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const h3::ExifOrientation exif = h3::read_exif_orientation(data, size);
  if (exif.orientation < 1 || exif.orientation > 8 || (!exif.readable && exif.present)) __builtin_trap();
  const int xmp = h3::xmp_orientation(data, size);
  if (xmp < -1 || xmp > 9) __builtin_trap();
  if (size >= 4 && (data[0] == 'I' || data[0] == 'M')) {
    try {
      const int tiff = h3::image_orientation(data, size, h3::ImageFormat::Tiff, "fuzz");
      if (tiff < 1 || tiff > 8) __builtin_trap();
    } catch (const h3::Error&) {
    }
  }
  return 0;
}
