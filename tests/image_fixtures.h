// Test helper: the `image` fixture family (tools/reference/fx_image.py): its index and its raw RGB24 files.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media/video_frames.h"
#include "test_source_dir.h"

namespace h3 {

inline std::string image_fixture_path(const std::string& relative) {
  return test_source_dir() + "/tests/fixtures/image/" + relative;
}

inline std::vector<uint8_t> read_fixture_bytes(const std::string& relative) {
  std::ifstream in(image_fixture_path(relative), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << relative << " (made by tools/reference/fx_image.py)";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline nlohmann::json image_fixture_index() {
  const std::vector<uint8_t> bytes = read_fixture_bytes("index.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

// A raw RGB24 fixture file as a picture of the stated size.
inline Rgb8Image fixture_rgb(const std::string& relative, int width, int height) {
  Rgb8Image image{width, height, read_fixture_bytes(relative)};
  EXPECT_EQ(image.rgb.size(), static_cast<size_t>(width) * height * 3) << relative;
  return image;
}

// Index and value of the first byte where two pictures differ ("" when identical), for failure messages.
inline std::string first_difference(const Rgb8Image& got, const Rgb8Image& want) {
  if (got.width != want.width || got.height != want.height)
    return "size " + std::to_string(got.width) + "x" + std::to_string(got.height) + " vs " +
           std::to_string(want.width) + "x" + std::to_string(want.height);
  size_t differing = 0, first = got.rgb.size();
  for (size_t i = 0; i < got.rgb.size() && i < want.rgb.size(); ++i)
    if (got.rgb[i] != want.rgb[i] && differing++ == 0) first = i;
  if (differing == 0) return "";
  const size_t pixel = first / 3;
  return std::to_string(differing) + " bytes differ; first at pixel (" + std::to_string(pixel % got.width) + ", " +
         std::to_string(pixel / got.width) + ") channel " + std::to_string(first % 3) + ": " +
         std::to_string(got.rgb[first]) + " vs " + std::to_string(want.rgb[first]);
}

}  // namespace h3
