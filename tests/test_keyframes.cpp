// fl2va keyframe geometry (src/pipeline/keyframes.h) against the reference's own code run by
// tools/reference/fx_image.py: resolve_canvas_size on 221 aspect/rule combinations and MiniMaxH3ResizeStep's
// placements (pixels byte for byte); and the canvas settings of a snapshot (src/io/config.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "image_fixtures.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "pipeline/keyframes.h"
#include "util/error.h"

namespace h3 {
namespace {

namespace fs = std::filesystem;

TEST(Keyframes, CanvasRuleMatchesTheReference) {
  const nlohmann::json index = image_fixture_index();
  ASSERT_GE(index["canvas"].size(), 200u);
  int errors = 0;
  for (const auto& c : index["canvas"]) {
    const double w = c["aspect_width"], h = c["aspect_height"];
    SCOPED_TRACE(c.dump());
    auto resolve = [&] { return resolve_canvas_size(w, h, c["multiple"], c["short_edge"], c["max_pixels"]); };
    if (c.contains("error")) {
      ++errors;
      EXPECT_THROW(resolve(), Error);
      continue;
    }
    const CanvasSize got = resolve();
    EXPECT_EQ(got.height, c["height"].get<int64_t>());
    EXPECT_EQ(got.width, c["width"].get<int64_t>());
  }
  EXPECT_GE(errors, 5);  // the fixture covers the rejections too
}

// The ties the fixture was built around, stated here too: Python's round() goes to even.
TEST(Keyframes, CanvasRuleRoundsHalfToEven) {
  EXPECT_EQ(resolve_canvas_size(48, 32, 32, 48, 1'000'000'000), (CanvasSize{64, 64}));    // 48/32 = 1.5 -> 2
  EXPECT_EQ(resolve_canvas_size(80, 32, 32, 80, 1'000'000'000), (CanvasSize{64, 192}));   // 80/32 = 2.5 -> 2
  EXPECT_EQ(resolve_canvas_size(16, 9, 32, 768, 768 * 1344), (CanvasSize{768, 1344}));    // spec/sampling.md §3.1
}

TEST(Keyframes, AspectOutsideTheRangeIsOneSentence) {
  try {
    resolve_canvas_size(5, 1, 32, 768, 768 * 1344);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("from 1:4 to 4:1"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(resolve_canvas_size(4, 1, 32, 768, 768 * 1344));
  EXPECT_NO_THROW(resolve_canvas_size(1, 4, 32, 768, 768 * 1344));
  EXPECT_THROW(resolve_canvas_size(0, 1, 32, 768, 768 * 1344), Error);
}

const Rgb8Image* load_optional(const nlohmann::json& c, const char* role, Rgb8Image& storage) {
  if (c[role].is_null()) return nullptr;
  const auto& size = c[std::string(role) + "_size"];
  storage = fixture_rgb(c[role], size[0], size[1]);
  return &storage;
}

std::optional<int64_t> optional_int(const nlohmann::json& v) {
  return v.is_null() ? std::nullopt : std::optional<int64_t>(v.get<int64_t>());
}

TEST(Keyframes, PlacementMatchesTheReference) {
  const nlohmann::json index = image_fixture_index();
  ASSERT_GE(index["placement"].size(), 10u);
  for (const auto& c : index["placement"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + " — " + c["what"].get<std::string>());
    Rgb8Image first_image, last_image;
    const Rgb8Image* first = load_optional(c, "first", first_image);
    const Rgb8Image* last = load_optional(c, "last", last_image);
    CanvasConfig config;
    config.canvas_short_edge = c["short_edge"];
    config.canvas_max_pixels = c["max_pixels"];
    auto place = [&] {
      return place_keyframes(first, last, optional_int(c["width"]), optional_int(c["height"]), c["multiple"], config);
    };
    if (c.contains("error")) {
      EXPECT_THROW(place(), Error);
      continue;
    }
    const KeyframePlacement got = place();
    EXPECT_EQ(got.canvas.height, c["canvas_height"].get<int64_t>());
    EXPECT_EQ(got.canvas.width, c["canvas_width"].get<int64_t>());
    ASSERT_EQ(got.keyframes.size(), c["keyframes"].size());
    for (size_t i = 0; i < got.keyframes.size(); ++i) {
      EXPECT_EQ(keyframe_anchor_name(got.keyframes[i].anchor), c["anchors"][i].get<std::string>());
      const Rgb8Image want = fixture_rgb(c["keyframes"][i], c["canvas_width"], c["canvas_height"]);
      EXPECT_EQ(first_difference(got.keyframes[i].image, want), "") << "keyframe " << i;
    }
  }
}

TEST(Keyframes, PlacementRules) {
  const Rgb8Image square{4, 4, std::vector<uint8_t>(48, 7)};
  const CanvasConfig config;
  EXPECT_THROW(place_keyframes(nullptr, nullptr, std::nullopt, std::nullopt, 32, config), Error);
  EXPECT_THROW(place_keyframes(&square, nullptr, 64, std::nullopt, 32, config), Error);
  EXPECT_THROW(place_keyframes(&square, nullptr, 0, 0, 32, config), Error);
  // The aspect of a keyframe that sets the canvas is named in the sentence.
  const Rgb8Image wide{10, 2, std::vector<uint8_t>(60, 7)};
  try {
    place_keyframes(nullptr, &wide, std::nullopt, std::nullopt, 32, config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the last keyframe (10x2 pixels) gives 10:2 = 5"), std::string::npos)
        << e.what();
  }
  // A follower so thin that covering the canvas would need more than the pixel limit is refused before resizing.
  const Rgb8Image thread{1, 4000, std::vector<uint8_t>(12000, 7)};
  EXPECT_THROW(place_keyframes(&square, &thread, 1344, 768, 32, config), Error);
}

// ---- canvas settings of a snapshot ----------------------------------------------------------------------------

class CanvasSettings : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("h3_canvas_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string index_with(const std::string& body) {
    const std::string path = (dir_ / "modular_model_index.json").string();
    std::ofstream(path) << body;
    return path;
  }
  fs::path dir_;
};

TEST_F(CanvasSettings, DefaultsAreTheReleasedValues) {
  const CanvasConfig none = load_canvas_config("");
  EXPECT_EQ(none.canvas_short_edge, 768);
  EXPECT_EQ(none.canvas_max_pixels, 768 * 1344);
  EXPECT_EQ(none.reference_image_short_edge, 2048);
  const CanvasConfig absent = load_canvas_config(index_with(R"({"_class_name": "MiniMaxH3ModularPipeline"})"));
  EXPECT_EQ(absent.canvas_max_pixels, 768 * 1344);
}

TEST_F(CanvasSettings, ReadsTheKeys) {
  const CanvasConfig c = load_canvas_config(index_with(
      R"({"canvas_short_edge": 96, "canvas_max_pixels": 12288, "reference_image_short_edge": 256})"));
  EXPECT_EQ(c.canvas_short_edge, 96);
  EXPECT_EQ(c.canvas_max_pixels, 12288);
  EXPECT_EQ(c.reference_image_short_edge, 256);
}

TEST_F(CanvasSettings, RejectsValuesThatAreNotPositiveIntegers) {
  for (const char* value : {"0", "-768", "768.5", "\"768\"", "true", "null", "[768]"}) {
    const std::string path = index_with(std::string(R"({"canvas_short_edge": )") + value + "}");
    try {
      load_canvas_config(path);
      ADD_FAILURE() << value << " was accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(path), std::string::npos) << m;
      EXPECT_NE(m.find("'canvas_short_edge' must be a positive integer"), std::string::npos) << m;
    }
  }
}

// The e2e fixture's tiny snapshot (diffusers root layout) has an index without canvas keys: the defaults.
TEST_F(CanvasSettings, FromASnapshot) {
  const Snapshot s = Snapshot::discover(test_source_dir() + "/tests/fixtures/e2e/model");
  ASSERT_FALSE(s.index_file.empty());
  EXPECT_EQ(load_canvas_config(s.index_file).canvas_short_edge, 768);
}

}  // namespace
}  // namespace h3
