#include "media/ppm_writer.h"

#include <cstdio>
#include <string_view>

#include "util/error.h"
#include "util/output_file.h"

namespace h3 {

std::vector<uint8_t> encode_ppm(const uint8_t* rgb, int width, int height) {
  H3_CHECK(width > 0 && height > 0, "a PPM image needs at least 1x1 pixels (got ", width, "x", height, ")");
  const std::string header = cat("P6\n", width, " ", height, "\n255\n");
  const size_t pixels = static_cast<size_t>(width) * height * 3;
  std::vector<uint8_t> out;
  out.reserve(header.size() + pixels);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), rgb, rgb + pixels);
  return out;
}

void write_ppm(const std::string& path, const Rgb8Image& image) {
  H3_CHECK(image.rgb.size() == static_cast<size_t>(image.width) * image.height * 3, "the image holds ",
           image.rgb.size(), " bytes, not the ", static_cast<size_t>(image.width) * image.height * 3, " of ",
           image.width, "x", image.height, " RGB24");
  OutputFile out(path);  // refuses a bad destination before the encode
  const std::vector<uint8_t> bytes = encode_ppm(image.rgb.data(), image.width, image.height);
  out.write_all_and_commit(bytes.data(), bytes.size());
}

std::string frame_file_name(int index) {
  char name[32];
  std::snprintf(name, sizeof name, "frame_%05d.ppm", index);
  return name;
}

bool is_frame_file_name(const std::string& name) {
  constexpr std::string_view kPrefix = "frame_", kSuffix = ".ppm";
  if (name.size() < kPrefix.size() + 5 + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix))
    return false;
  for (size_t i = kPrefix.size(); i < name.size() - kSuffix.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  return true;
}

}  // namespace h3
