// Still-image input (src/media/image_input.h): every fixture file decodes to exactly the bytes of Pillow's
// Image.open(path).convert("RGB") (tests/fixtures/image, made by tools/reference/fx_image.py), from a file and from
// memory, and every rule a bad file breaks has its own sentence.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "image_fixtures.h"
#include "media/image_input.h"
#include "media/image_orientation.h"
#include "util/error.h"

namespace h3 {
namespace {

namespace fs = std::filesystem;

ImageFormat format_of_pil(const std::string& pil) {
  if (pil == "PNG") return ImageFormat::Png;
  if (pil == "JPEG") return ImageFormat::Jpeg;
  if (pil == "WEBP") return ImageFormat::WebP;
  if (pil == "BMP") return ImageFormat::Bmp;
  if (pil == "TIFF") return ImageFormat::Tiff;
  EXPECT_EQ(pil, "PPM");
  return ImageFormat::Pnm;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A scratch folder for the bad files, removed at the end of each test.
class ImageInputErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("h3_image_input_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }
  // Both readers refuse `path` with a sentence that names it and contains `rule`.
  void expect_refused(const std::string& path, const std::string& rule, bool probe_too = true) {
    const std::string read = error_of([&] { read_image_file(path); });
    EXPECT_NE(read.find(path), std::string::npos) << read;
    EXPECT_NE(read.find(rule), std::string::npos) << read;
    if (probe_too) {
      const std::string probe = error_of([&] { probe_image_file(path); });
      EXPECT_NE(probe.find(rule), std::string::npos) << probe;
    }
  }
  fs::path dir_;
};

TEST(ImageInput, EveryFixtureMatchesPillow) {
  const nlohmann::json index = image_fixture_index();
  ASSERT_GE(index["decode"].size(), 40u);
  for (const auto& c : index["decode"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file + " — " + c["what"].get<std::string>());
    const Rgb8Image want = fixture_rgb(c["rgb"], c["width"], c["height"]);
    const ImageInfo info = probe_image_file(image_fixture_path(file));
    EXPECT_EQ(info.format, format_of_pil(c["pil_format"]));
    EXPECT_EQ(info.width, want.width);
    EXPECT_EQ(info.height, want.height);
    try {
      EXPECT_EQ(first_difference(read_image_file(image_fixture_path(file)), want), "");
      const std::vector<uint8_t> bytes = read_fixture_bytes(file);
      EXPECT_EQ(first_difference(decode_image(bytes.data(), bytes.size(), file), want), "");
      EXPECT_EQ(probe_image(bytes.data(), bytes.size(), file).width, want.width);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Files cut where Pillow still reads them whole (checked against Pillow on the cut files): a PNG ending inside its
// IEND chunk, a BMP without its last row's padding byte, a 4:2:2 JPEG without its EOI marker (libjpeg has delivered
// every row before it misses the marker). The same pixels as the whole file.
TEST(ImageInput, ReadsWhatPillowReadsOfACutFile) {
  for (auto [name, cut] : {std::pair{"rgb.png", 2}, std::pair{"rgb.bmp", 1}, std::pair{"j422.jpg", 2}}) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes = read_fixture_bytes(std::string("sources/") + name);
    bytes.resize(bytes.size() - cut);
    const Rgb8Image want = fixture_rgb(std::string("decoded/") + name + ".rgb", 29, 21);
    try {
      EXPECT_EQ(first_difference(decode_image(bytes.data(), bytes.size(), name), want), "");
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// convert("RGB") applies no EXIF orientation: the 40x24 JPEG tagged "rotate 90" stays 40x24, as stored. The
// upright reader (load_image's exif_transpose) turns it 90 degrees clockwise: 24x40.
TEST(ImageInput, ExifOrientationIsNotApplied) {
  const std::string path = image_fixture_path("sources/exif_orientation.jpg");
  const Rgb8Image image = read_image_file(path);
  EXPECT_EQ(image.width, 40);
  EXPECT_EQ(image.height, 24);
  EXPECT_EQ(probe_image_file(path).orientation, 0);
  const ImageInfo upright = probe_image_file_upright(path);
  EXPECT_EQ(upright.orientation, 6);
  EXPECT_EQ(upright.upright_width(), 24);
  EXPECT_EQ(upright.upright_height(), 40);
  EXPECT_EQ(first_difference(read_image_file_upright(path), apply_orientation(image, 6)), "");
}

TEST_F(ImageInputErrors, MissingFile) {
  expect_refused((dir_ / "absent.png").string(), "does not exist");
}

TEST_F(ImageInputErrors, NotARegularFile) {
  fs::create_directories(dir_ / "folder.png");
  expect_refused((dir_ / "folder.png").string(), "not a regular file");
}

TEST_F(ImageInputErrors, EmptyFile) {
  expect_refused(write("empty.png", {}), "the file is empty");
}

TEST_F(ImageInputErrors, TextFile) {
  const std::string text = "This is not a picture.\n";
  expect_refused(write("notes.txt", {text.begin(), text.end()}),
                 "is not a PNG, JPEG, WebP, BMP, TIFF or binary PPM/PGM file");
}

TEST_F(ImageInputErrors, GifIsRefusedByName) {
  const std::string gif = "GIF89a\x01\x00\x01\x00\x00\x00\x00;";
  expect_refused(write("anim.gif", {gif.begin(), gif.end()}), "GIF is not supported");
}

// Each format cut in half: the header survives (so the probe passes, as documented), the decode says truncated.
TEST_F(ImageInputErrors, TruncatedFiles) {
  for (const char* name : {"rgb.png", "interlaced_rgb.png", "j420.jpg", "progressive.jpg", "lossy_rgb.webp",
                           "lossless_rgba.webp", "rgb.bmp", "rgb.ppm"}) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes = read_fixture_bytes(std::string("sources/") + name);
    bytes.resize(bytes.size() / 2);
    expect_refused(write(name, bytes), "truncated", /*probe_too=*/false);
  }
  // Without its 2-byte end-of-image marker, this 4:4:4 JPEG ends before libjpeg delivers the last rows (it reads
  // ahead for the marker): truncated, for Pillow too (tools/reference: Image.open().convert() raises).
  std::vector<uint8_t> jpeg = read_fixture_bytes("sources/j444.jpg");
  jpeg.resize(jpeg.size() - 2);
  expect_refused(write("no_eoi.jpg", jpeg), "truncated", false);
  // Cut inside the header: the probe already refuses.
  std::vector<uint8_t> png = read_fixture_bytes("sources/rgb.png");
  png.resize(20);
  expect_refused(write("header.png", png), "truncated");
}

void append_be32(std::vector<uint8_t>& out, uint32_t v) {
  out.insert(out.end(), {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)});
}

// The PNG (zlib) CRC-32 of bytes [begin, end).
uint32_t png_crc(const uint8_t* begin, const uint8_t* end) {
  uint32_t c = 0xFFFFFFFFu;
  for (const uint8_t* p = begin; p != end; ++p) {
    c ^= *p;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

// A PNG whose IHDR (depth 8, RGB) claims width x height, followed by an IDAT chunk announcing 100 bytes of which 2
// follow.
std::vector<uint8_t> png_header_claiming(uint32_t width, uint32_t height) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  append_be32(png, width);
  append_be32(png, height);
  png.insert(png.end(), {8, 2, 0, 0, 0});
  append_be32(png, png_crc(png.data() + 12, png.data() + png.size()));
  png.insert(png.end(), {0, 0, 0, 100, 'I', 'D', 'A', 'T', 0x78, 0x9c});
  return png;
}

// 20000 x 10000 = 200 M pixels: over the limit. The sentence names the limit, and it comes from the header before
// any decode (the file is also truncated, and the decoder would need a 600 MB frame).
TEST_F(ImageInputErrors, DecompressionBombLimit) {
  const std::string path = write("huge.png", png_header_claiming(20000, 10000));
  expect_refused(path, "20000x10000 = 200000000 pixels are over the limit of 178956970 pixels");
  const std::vector<uint8_t> at_limit = png_header_claiming(178956970, 1);
  EXPECT_EQ(probe_image(at_limit.data(), at_limit.size(), "x").width, 178956970);  // exactly at the limit: allowed
  // A caller's own lower limit.
  const std::vector<uint8_t> small = read_fixture_bytes("sources/rgb.png");
  const std::string lower = error_of([&] { decode_image(small.data(), small.size(), "small.png", 100); });
  EXPECT_NE(lower.find("609 pixels are over the limit of 100 pixels"), std::string::npos) << lower;
}

// Under the pixel limit but too long and thin for FFmpeg's decoders: refused from the header, before decoding.
TEST_F(ImageInputErrors, ShapeFfmpegDoesNotTake) {
  expect_refused(write("thin.png", png_header_claiming(2'000'000, 80)), "a shape FFmpeg's PNG decoder does not take",
                 /*probe_too=*/false);
}

TEST_F(ImageInputErrors, CorruptPngData) {
  std::vector<uint8_t> png = png_header_claiming(4, 4);
  png.resize(png.size() - 2);  // a 100-byte IDAT of garbage, then IEND
  png.insert(png.end(), 100 + 4, 0x55);
  const uint8_t iend[] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
  png.insert(png.end(), std::begin(iend), std::end(iend));
  expect_refused(write("garbage.png", png), "the PNG data is corrupt", false);
}

// Pillow checks the CRC of every chunk before the image data and refuses a file where one is wrong.
TEST_F(ImageInputErrors, BadChunkChecksum) {
  std::vector<uint8_t> png = read_fixture_bytes("sources/p_trns.png");
  png[28] ^= 1;  // IHDR's filter-method byte
  expect_refused(write("crc.png", png), "the checksum of its IHDR chunk is wrong", false);
}

TEST_F(ImageInputErrors, UnsupportedTiffCompression) {
  // rgb.tif with its Compression tag (259) set to 7, JPEG.
  std::vector<uint8_t> tif = read_fixture_bytes("sources/rgb.tif");
  ASSERT_EQ(tif[0], 'I');
  const uint32_t ifd = tif[4] | tif[5] << 8 | tif[6] << 16 | uint32_t(tif[7]) << 24;
  const int entries = tif[ifd] | tif[ifd + 1] << 8;
  bool patched = false;
  for (int i = 0; i < entries; ++i) {
    uint8_t* e = &tif[ifd + 2 + 12 * i];
    if ((e[0] | e[1] << 8) == 259) e[8] = 7, e[9] = 0, patched = true;
  }
  ASSERT_TRUE(patched);
  expect_refused(write("jpeg.tif", tif), "TIFF compression 7 is not supported");
}

TEST_F(ImageInputErrors, SixteenBitPnmIsRefused) {
  const std::string pgm = "P5\n2 2\n65535\n01234567";
  expect_refused(write("deep.pgm", {pgm.begin(), pgm.end()}), "maxval is 65535");
}

}  // namespace
}  // namespace h3
