// Pillow-exact resampling and cropping (src/media/image_resize.h) against Pillow's own output
// (tests/fixtures/image/resize, made by tools/reference/fx_image.py): every byte must match.
#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "media/image_resize.h"
#include "util/error.h"

namespace h3 {
namespace {

ResampleFilter filter_named(const std::string& name) {
  for (ResampleFilter f : {ResampleFilter::Box, ResampleFilter::Bilinear, ResampleFilter::Hamming,
                           ResampleFilter::Bicubic, ResampleFilter::Lanczos})
    if (name == resample_filter_name(f)) return f;
  ADD_FAILURE() << "unknown filter " << name;
  return ResampleFilter::Lanczos;
}

TEST(ImageResize, MatchesPillowByteForByte) {
  const nlohmann::json index = image_fixture_index();
  ASSERT_GE(index["resize"].size(), 15u);
  for (const auto& c : index["resize"]) {
    const std::string name = c["name"];
    const Rgb8Image in = fixture_rgb(c["input"], c["in_width"], c["in_height"]);
    const Rgb8Image want = fixture_rgb(c["expected"], c["out_width"], c["out_height"]);
    const Rgb8Image got = resize_rgb8(in, c["out_width"], c["out_height"], filter_named(c["filter"]));
    EXPECT_EQ(first_difference(got, want), "") << name << " (" << c["filter"].get<std::string>() << ", "
                                               << in.width << "x" << in.height << " -> " << want.width << "x"
                                               << want.height << ")";
  }
}

// The fixtures' pictures have sharp black/white blocks, so LANCZOS rings past both ends and the clip is exercised:
// a resize that did not clip (or wrapped around) would show values the fixture does not hold.
TEST(ImageResize, FixtureExercisesTheClip) {
  const nlohmann::json index = image_fixture_index();
  int zeros = 0, full = 0;
  for (const auto& c : index["resize"]) {
    if (c["filter"] != "lanczos" || c["name"] == "identity") continue;
    const Rgb8Image want = fixture_rgb(c["expected"], c["out_width"], c["out_height"]);
    for (uint8_t v : want.rgb) zeros += v == 0, full += v == 255;
  }
  EXPECT_GT(zeros, 0);
  EXPECT_GT(full, 0);
}

TEST(ImageResize, SameSizeIsACopy) {
  Rgb8Image image{2, 1, {1, 2, 3, 4, 5, 6}};
  EXPECT_EQ(resize_rgb8(image, 2, 1).rgb, image.rgb);
}

TEST(ImageResize, RejectsEmptySizes) {
  Rgb8Image image{2, 1, {1, 2, 3, 4, 5, 6}};
  EXPECT_THROW(resize_rgb8(image, 0, 1), Error);
  EXPECT_THROW(resize_rgb8(image, 3, -1), Error);
  EXPECT_THROW(resize_rgb8(Rgb8Image{2, 2, {1, 2, 3}}, 1, 1), Error);  // holds fewer bytes than 2x2 RGB24
}

TEST(ImageCrop, CopiesTheBox) {
  // 3x2 picture, pixel (x, y) = (10x + y, 0, 1)
  Rgb8Image image{3, 2, {}};
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) image.rgb.insert(image.rgb.end(), {uint8_t(10 * x + y), 0, 1});
  const Rgb8Image crop = crop_rgb8(image, 1, 1, 2, 1);
  EXPECT_EQ(crop.width, 2);
  EXPECT_EQ(crop.height, 1);
  EXPECT_EQ(crop.rgb, (std::vector<uint8_t>{11, 0, 1, 21, 0, 1}));
}

TEST(ImageCrop, RejectsABoxOutsideTheImage) {
  Rgb8Image image{3, 2, std::vector<uint8_t>(18)};
  EXPECT_THROW(crop_rgb8(image, 2, 0, 2, 1), Error);
  EXPECT_THROW(crop_rgb8(image, -1, 0, 1, 1), Error);
  EXPECT_THROW(crop_rgb8(image, 0, 1, 1, 2), Error);
  EXPECT_THROW(crop_rgb8(image, 0, 0, 0, 1), Error);
}

}  // namespace
}  // namespace h3
