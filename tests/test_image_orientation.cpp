// Upright image input (src/media/image_input.h *_upright, src/media/image_orientation.h): every fixture of
// tests/fixtures/image_exif (tools/reference/fx_image_exif.py, Pillow 12.3) reads to exactly the bytes and size of
// diffusers.utils.load_image — exif_transpose(Image.open(path)).convert("RGB") —, the upright probe finds the
// orientation exif_transpose applied, the files load_image refuses are refused, and the plain readers still give
// Image.open(path).convert("RGB").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>

#include "image_fixtures.h"
#include "media/image_input.h"
#include "media/image_orientation.h"
#include "temp_dir.h"
#include "util/error.h"

extern "C" {
#include <zlib.h>
}

namespace h3 {
namespace {

std::string exif_fixture_path(const std::string& relative) {
  return test_source_dir() + "/tests/fixtures/image_exif/" + relative;
}

std::vector<uint8_t> exif_fixture_bytes(const std::string& relative) {
  std::ifstream in(exif_fixture_path(relative), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << relative << " (made by tools/reference/fx_image_exif.py)";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::json exif_fixture_index() {
  const std::vector<uint8_t> bytes = exif_fixture_bytes("index.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

Rgb8Image exif_fixture_rgb(const std::string& relative, int width, int height) {
  Rgb8Image image{width, height, exif_fixture_bytes(relative)};
  EXPECT_EQ(image.rgb.size(), static_cast<size_t>(width) * height * 3) << relative;
  return image;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The fixture case for `file` (under sources/).
nlohmann::json exif_case(const std::string& file) {
  const nlohmann::json index = exif_fixture_index();
  for (const auto& c : index["cases"])
    if (c["file"] == "sources/" + file) return c;
  ADD_FAILURE() << "no fixture case " << file;
  return {};
}

TEST(ImageOrientation, EveryFixtureMatchesLoadImage) {
  const nlohmann::json index = exif_fixture_index();
  ASSERT_GE(index["cases"].size(), 60u);
  int rotated = 0, refused = 0;
  for (const auto& c : index["cases"]) {
    const std::string file = c["file"];
    const std::string path = exif_fixture_path(file);
    SCOPED_TRACE(file + " — " + c["what"].get<std::string>());
    const std::vector<uint8_t> bytes = exif_fixture_bytes(file);
    if (c.contains("error")) {  // load_image raises: so do both upright readers, naming the file
      ++refused;
      const std::string read = error_of([&] { read_image_file_upright(path); });
      EXPECT_NE(read.find(path), std::string::npos) << read;
      EXPECT_NE(error_of([&] { probe_image_upright(bytes.data(), bytes.size(), file); }), "(no error)");
      continue;
    }
    const int orientation = c["orientation"], width = c["width"], height = c["height"];
    rotated += orientation != 1;
    const Rgb8Image want = exif_fixture_rgb(c["rgb"], width, height);
    try {
      const ImageInfo info = probe_image_file_upright(path);
      EXPECT_EQ(info.orientation, orientation);
      EXPECT_EQ(info.upright_width(), width);
      EXPECT_EQ(info.upright_height(), height);
      EXPECT_EQ(first_difference(read_image_file_upright(path), want), "");
      EXPECT_EQ(first_difference(decode_image_upright(bytes.data(), bytes.size(), file), want), "");
      // The plain readers are unchanged: no orientation looked for, Pillow's plain convert("RGB") (TIFF aside:
      // Pillow's own TIFF load() transposes, h3's plain reader does not; see image_input.h).
      const ImageInfo plain = probe_image_file(path);
      EXPECT_EQ(plain.orientation, 0);
      EXPECT_EQ(plain.upright_width(), plain.width);
      if (!c["convert_rgb"].is_null()) {
        const Rgb8Image stored = exif_fixture_rgb(c["convert_rgb"], plain.width, plain.height);
        EXPECT_EQ(first_difference(read_image_file(path), stored), "");
        EXPECT_EQ(first_difference(apply_orientation(stored, orientation), want), "");
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(rotated, 40);  // the set exercises rotation, not just pass-through
  EXPECT_GE(refused, 5);
}

// Each refusal is one sentence naming the rule Pillow broke on.
TEST(ImageOrientation, RefusalsNameTheRule) {
  const std::pair<const char*, const char*> expected[] = {
      {"jpeg_garbage_dpi.jpg", "JPEG EXIF data is unreadable"},
      {"jpeg_short_dpi.jpg", "JPEG EXIF data is unreadable"},
      {"png_garbage.png", "PNG EXIF data is unreadable"},
      {"webp_garbage.webp", "WebP EXIF data is unreadable"},
      {"png_raw_profile_bad_hex.png", "\"Raw profile type exif\" text is not hex"},
      {"png_exif_cut_after_idat.png", "truncated (it ends inside its eXIf chunk)"},
  };
  for (const auto& [file, rule] : expected) {
    SCOPED_TRACE(file);
    EXPECT_TRUE(exif_case(file).contains("error")) << "Pillow accepts it";
    const std::string path = exif_fixture_path(std::string("sources/") + file);
    const std::string probe = error_of([&] { probe_image_file_upright(path); });
    EXPECT_NE(probe.find(rule), std::string::npos) << probe;
    EXPECT_EQ(std::count(probe.begin(), probe.end(), '.'), std::count(rule, rule + std::strlen(rule), '.') + 1 +
              std::count(path.begin(), path.end(), '.'))
        << "one sentence: " << probe;
    // The plain reader does not read EXIF at all (it refuses the cut PNG for its own reasons only if it must).
    if (std::string(file).find("cut") == std::string::npos) {
      EXPECT_NO_THROW(read_image_file(path));
    }
  }
}

// A blob: "Exif\0\0" + an 8-byte TIFF header + one IFD with the given 12-byte entries + a zero next-IFD offset.
std::vector<uint8_t> blob(const std::string& header, const std::vector<std::vector<uint8_t>>& entries,
                          const std::vector<uint8_t>& tail = {}) {
  std::vector<uint8_t> b = {'E', 'x', 'i', 'f', 0, 0};
  b.insert(b.end(), header.begin(), header.end());
  const bool le = header[0] == 'I';
  const auto n = static_cast<uint8_t>(entries.size());
  b.insert(b.end(), {le ? n : uint8_t(0), le ? uint8_t(0) : n});
  for (const auto& e : entries) b.insert(b.end(), e.begin(), e.end());
  b.insert(b.end(), {0, 0, 0, 0});
  b.insert(b.end(), tail.begin(), tail.end());
  return b;
}
const std::string kLe("II*\0\x08\0\0\0", 8), kBe("MM\0*\0\0\0\x08", 8);

ExifOrientation read(const std::vector<uint8_t>& b) { return read_exif_orientation(b.data(), b.size()); }

TEST(ImageOrientation, ExifHeadersAsPillowAcceptsThem) {
  const std::vector<uint8_t> six = {0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0};
  EXPECT_EQ(read(blob(kLe, {six})).orientation, 6);
  // The swapped magic numbers Pillow still takes ("invalid TIFF header, assume ..."), and MM\0+ read as classic.
  EXPECT_EQ(read(blob(std::string("II\0*\x08\0\0\0", 8), {six})).orientation, 6);
  const std::vector<uint8_t> six_be = {0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0};
  EXPECT_EQ(read(blob(std::string("MM*\0\0\0\0\x08", 8), {six_be})).orientation, 6);
  EXPECT_EQ(read(blob(std::string("MM\0+\0\0\0\x08", 8), {six_be})).orientation, 6);
  // Little-endian BigTIFF, a foreign header and a short one raise in Pillow.
  EXPECT_FALSE(read(blob(std::string("II+\0\x08\0\0\0", 8), {six})).readable);
  EXPECT_FALSE(read(blob("IIXX\x08\0\0\0", {six})).readable);
  const std::vector<uint8_t> short_blob = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', '*', 0, 8};
  EXPECT_FALSE(read(short_blob).readable);
  // Any number of "Exif\0\0" headers; nothing after them is no tags, readably.
  std::vector<uint8_t> twice = blob(kLe, {six});
  twice.insert(twice.begin(), {'E', 'x', 'i', 'f', 0, 0});
  EXPECT_EQ(read(twice).orientation, 6);
  const ExifOrientation empty = read({'E', 'x', 'i', 'f', 0, 0, 'E', 'x', 'i', 'f', 0, 0});
  EXPECT_TRUE(empty.readable);
  EXPECT_FALSE(empty.present);
}

TEST(ImageOrientation, ExifValuesAsPillowComparesThem) {
  auto entry = [](uint8_t type, uint32_t count, std::vector<uint8_t> field) {
    std::vector<uint8_t> e(12);
    const uint8_t head[8] = {0x12, 0x01, type, 0, uint8_t(count), uint8_t(count >> 8), uint8_t(count >> 16),
                             uint8_t(count >> 24)};
    std::copy(head, head + 8, e.begin());
    std::copy(field.begin(), field.begin() + 4, e.begin() + 8);
    return e;
  };
  const std::vector<uint8_t> tail_at = {26, 0, 0, 0};  // the bytes after a one-entry IFD
  auto rational = [&](uint8_t type, int32_t num, int32_t den) {
    std::vector<uint8_t> t(8);
    std::memcpy(t.data(), &num, 4);
    std::memcpy(t.data() + 4, &den, 4);
    return read(blob(kLe, {entry(type, 1, tail_at)}, t));
  };
  EXPECT_EQ(rational(10, -12, -2).orientation, 6);  // SRATIONAL: the Fraction 6
  EXPECT_EQ(rational(5, 8, 1).orientation, 8);
  EXPECT_EQ(rational(5, 6, 0).orientation, 1);  // denominator 0: NaN
  EXPECT_TRUE(rational(5, 6, 0).present);
  std::vector<uint8_t> d(8);
  const double eight = 8.0;
  std::memcpy(d.data(), &eight, 8);
  EXPECT_EQ(read(blob(kLe, {entry(12, 1, tail_at)}, d)).orientation, 8);  // DOUBLE
  EXPECT_EQ(read(blob(kLe, {entry(6, 1, {7, 0, 0, 0})})).orientation, 7);  // SBYTE
  EXPECT_EQ(read(blob(kLe, {entry(8, 1, {0xFA, 0xFF, 0, 0})})).orientation, 1);  // SSHORT -6
  EXPECT_EQ(read(blob(kLe, {entry(2, 2, {'6', 0, 0, 0})})).orientation, 1);  // ASCII "6" is a str
  EXPECT_EQ(read(blob(kLe, {entry(7, 1, {6, 0, 0, 0})})).orientation, 1);  // UNDEFINED is bytes
  // Count 0 is skipped (not present, so XMP would count); so is a type Pillow does not know.
  EXPECT_FALSE(read(blob(kLe, {entry(3, 0, {6, 0, 0, 0})})).present);
  EXPECT_FALSE(read(blob(kLe, {entry(15, 1, {6, 0, 0, 0})})).present);
  // An out-of-line value must lie inside the blob: one byte short ends the walk.
  const std::vector<uint8_t> at_end = blob(kLe, {entry(16, 1, tail_at)}, {6, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(read(at_end).orientation, 6);  // LONG8, exactly at the end
  EXPECT_FALSE(read({at_end.begin(), at_end.end() - 1}).present);
  // A count whose byte size overflows 32 bits is no wrap-around.
  EXPECT_FALSE(read(blob(kLe, {entry(12, 0x20000001u, tail_at)}, d)).present);
}

TEST(ImageOrientation, XmpAsPillowsRegexFindsIt) {
  auto xmp = [](const std::string& s) { return xmp_orientation(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  EXPECT_EQ(xmp("<d tiff:Orientation=\"6\"/>"), 6);
  EXPECT_EQ(xmp("<tiff:Orientation>3</tiff:Orientation>"), 3);
  EXPECT_EQ(xmp("tiff:Orientation='6' tiff:Orientation=\"9\" tiff:Orientation=\"2\""), 9);  // the first match
  EXPECT_EQ(xmp("tiff:Orientation=\" 6\""), -1);
  EXPECT_EQ(xmp("tiff:Orientation=\""), -1);  // cut at the end
  EXPECT_EQ(xmp("exif:Orientation=\"6\""), -1);
}

// The transposes compose as rotations and mirrors do (the fixtures check each against Pillow byte for byte).
TEST(ImageOrientation, TransposesCompose) {
  Rgb8Image image{3, 2, {}};
  for (int i = 0; i < 18; ++i) image.rgb.push_back(static_cast<uint8_t>(i * 13));
  auto same = [](const Rgb8Image& a, const Rgb8Image& b) { return a.width == b.width && a.rgb == b.rgb; };
  EXPECT_TRUE(same(apply_orientation(apply_orientation(image, 6), 8), image));  // 90 CW then 90 CCW
  EXPECT_TRUE(same(apply_orientation(apply_orientation(image, 6), 6), apply_orientation(image, 3)));
  EXPECT_TRUE(same(apply_orientation(apply_orientation(image, 2), 4), apply_orientation(image, 3)));
  EXPECT_TRUE(same(apply_orientation(apply_orientation(image, 5), 5), image));
  EXPECT_TRUE(same(apply_orientation(apply_orientation(image, 7), 3), apply_orientation(image, 5)));
  EXPECT_TRUE(same(apply_orientation(image, 9), image));
  EXPECT_EQ(apply_orientation(image, 8).width, 2);
}

// PNG text rules the Pillow-written fixtures do not show, on chunks added after the image data of a PNG whose iTXt
// XMP says 5 (Pillow reads them there; it checks no checksum after the image data, but these carry right ones).
class PngText : public ::testing::Test {
 protected:
  static std::vector<uint8_t> deflate(const std::string& text) {
    uLongf n = compressBound(text.size());
    std::vector<uint8_t> out(n);
    EXPECT_EQ(compress(out.data(), &n, reinterpret_cast<const Bytef*>(text.data()), text.size()), Z_OK);
    out.resize(n);
    return out;
  }
  // The base file with one more chunk before IEND, written to the scratch folder.
  std::string with_chunk(const std::string& type, const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> png = exif_fixture_bytes("sources/png_xmp_itxt_5.png");
    const uint32_t n = static_cast<uint32_t>(payload.size());
    std::vector<uint8_t> chunk = {uint8_t(n >> 24), uint8_t(n >> 16), uint8_t(n >> 8), uint8_t(n)};
    chunk.insert(chunk.end(), type.begin(), type.end());
    chunk.insert(chunk.end(), payload.begin(), payload.end());
    const auto crc = static_cast<uint32_t>(crc32(0, chunk.data() + 4, static_cast<uInt>(chunk.size() - 4)));
    chunk.insert(chunk.end(), {uint8_t(crc >> 24), uint8_t(crc >> 16), uint8_t(crc >> 8), uint8_t(crc)});
    png.insert(png.end() - 12, chunk.begin(), chunk.end());  // IEND is the last 12 bytes
    const std::string path = dir_ / (type + std::to_string(++files_) + ".png");
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), png.size());
    return path;
  }
  static std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
  static std::vector<uint8_t> join(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  // ImageMagick's raw profile of a little-endian blob with orientation `k`.
  static std::string raw_profile(int k) {
    const std::vector<uint8_t> b = blob(kLe, {{0x12, 0x01, 3, 0, 1, 0, 0, 0, uint8_t(k), 0, 0, 0}});
    std::string hex;
    for (uint8_t c : b) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
    return "\nexif\n      " + std::to_string(b.size()) + "\n" + hex + "\n";
  }
  TempDir dir_{"image-orientation"};
  int files_ = 0;
};

TEST_F(PngText, TheBaseFileIsFive) {
  EXPECT_EQ(probe_image_file_upright(with_chunk("tEXt", bytes(std::string("Comment\0hello", 13)))).orientation, 5);
}

TEST_F(PngText, AtEXtKeyedExifIsTheRawBlob) {
  const std::vector<uint8_t> b = blob(kLe, {{0x12, 0x01, 3, 0, 1, 0, 0, 0, 8, 0, 0, 0}});
  EXPECT_EQ(probe_image_file_upright(with_chunk("tEXt", join(bytes(std::string("exif\0", 5)), b))).orientation, 8);
}

TEST_F(PngText, ACompressedExifTextIsAStrPillowCannotLoad) {
  const std::string path = with_chunk("zTXt", join(bytes(std::string("exif\0\0", 6)), deflate("II*")));
  const std::string error = error_of([&] { probe_image_file_upright(path); });
  EXPECT_NE(error.find("\"exif\" text chunk is compressed or international text"), std::string::npos) << error;
}

TEST_F(PngText, ARawProfileInAnITXtCountsOnlyAsUtf8) {
  const std::vector<uint8_t> head = bytes(std::string("Raw profile type exif\0\0\0\0\0", 26));
  EXPECT_EQ(probe_image_file_upright(with_chunk("iTXt", join(head, bytes(raw_profile(6))))).orientation, 6);
  // Not UTF-8: Pillow drops the chunk, and the XMP's 5 stands.
  EXPECT_EQ(probe_image_file_upright(with_chunk("iTXt", join(head, bytes(raw_profile(6) + "\xff")))).orientation, 5);
  // Compressed (flag 1, method 0).
  const std::vector<uint8_t> zhead = bytes(std::string("Raw profile type exif\0\1\0\0\0", 26));
  EXPECT_EQ(probe_image_file_upright(with_chunk("iTXt", join(zhead, deflate(raw_profile(7))))).orientation, 7);
}

TEST_F(PngText, AZTxtOfAnUnknownMethodIsRefused) {
  const std::string path = with_chunk("zTXt", join(bytes(std::string("Comment\0\x01", 9)), deflate("hi")));
  const std::string error = error_of([&] { probe_image_file_upright(path); });
  EXPECT_NE(error.find("compression method 1"), std::string::npos) << error;
}

TEST_F(PngText, AnInflationBombIsRefused) {
  const std::string path = with_chunk("zTXt", join(bytes(std::string("Comment\0\0", 9)),
                                                   deflate(std::string((1 << 20) + 1, 'a'))));
  const std::string error = error_of([&] { probe_image_file_upright(path); });
  EXPECT_NE(error.find("more than 1 MiB"), std::string::npos) << error;
}

}  // namespace
}  // namespace h3
