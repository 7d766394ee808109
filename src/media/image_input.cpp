#include "media/image_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "media/ffmpeg_util.h"
#include "media/image_orientation.h"
#include "util/error.h"
#include "util/mapped_file.h"

// libjpeg's and libwebp's C headers (jpeglib.h needs <cstdio> first).
extern "C" {
#include <jerror.h>
#include <jpeglib.h>
#include <libavutil/crc.h>
#include <libavutil/pixdesc.h>
#include <webp/demux.h>
}

namespace h3 {

namespace {

constexpr const char* kSupportedFormats = "PNG, JPEG, WebP, BMP, TIFF or binary PPM/PGM";

template <typename... Args>
[[noreturn]] void fail_image(const std::string& name, Args&&... args) {
  fail("Cannot read the image ", name, ": ", std::forward<Args>(args)..., ".");
}

// ---- random access to the bytes of a file or a buffer, for the header parsers ---------------------------------

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Copies n bytes at offset into out; false when they run past the end.
  virtual bool read(uint64_t offset, size_t n, uint8_t* out) const = 0;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, size_t n, uint8_t* out) const override {
    if (offset > size_ || n > size_ - offset) return false;
    std::memcpy(out, data_ + offset, n);
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

class FileSource final : public ByteSource {
 public:
  FileSource(int fd, uint64_t size) : fd_(fd), size_(size) {}
  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, size_t n, uint8_t* out) const override {
    if (offset > size_ || n > size_ - offset) return false;
    size_t done = 0;
    while (done < n) {
      const ssize_t got = pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      done += static_cast<size_t>(got);
    }
    return true;
  }

 private:
  int fd_;
  uint64_t size_;
};

uint32_t be16(const uint8_t* p) { return uint32_t(p[0]) << 8 | p[1]; }
uint32_t be32(const uint8_t* p) { return be16(p) << 16 | be16(p + 2); }
uint32_t le16(const uint8_t* p) { return uint32_t(p[1]) << 8 | p[0]; }
uint32_t le32(const uint8_t* p) { return le16(p + 2) << 16 | le16(p); }

// ---- headers --------------------------------------------------------------------------------------------------

// What the decoders need besides the public facts.
struct Header {
  ImageInfo info;
  int png_color_type = -1;  // IHDR colour type (0 grey, 2 RGB, 3 palette, 4 grey + alpha, 6 RGBA)
  int jpeg_components = 0;  // 1, 3 or 4
  bool pnm_color = false;   // P6 (else P5)
  uint64_t pnm_data_offset = 0;
  uint64_t bmp_rows_end = 0;  // uncompressed BMP: where its last row's padding ends (FFmpeg wants it all)
};

// Reads n bytes at offset or fails naming the truncation.
void need(const ByteSource& src, uint64_t offset, size_t n, uint8_t* out, const std::string& name, const char* fmt,
          const char* part) {
  if (!src.read(offset, n, out)) fail_image(name, "the ", fmt, " file is truncated (it ends inside its ", part, ")");
}

void parse_png(const ByteSource& src, const std::string& name, Header& h) {
  uint8_t b[33];
  need(src, 0, sizeof b, b, name, "PNG", "header");
  if (be32(b + 8) != 13 || std::memcmp(b + 12, "IHDR", 4) != 0)
    fail_image(name, "the PNG file is corrupt (its first chunk is not a 13-byte IHDR)");
  const uint32_t w = be32(b + 16), h32 = be32(b + 20);
  const int depth = b[24], type = b[25];
  const bool valid = (type == 0 && (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)) ||
                     (type == 3 && (depth == 1 || depth == 2 || depth == 4 || depth == 8)) ||
                     ((type == 2 || type == 4 || type == 6) && (depth == 8 || depth == 16));
  if (!valid) fail_image(name, "the PNG file is corrupt (colour type ", type, " at ", depth, " bits does not exist)");
  if (w > INT_MAX || h32 > INT_MAX) fail_image(name, "the PNG header's size ", w, "x", h32, " is out of range");
  h.info = {ImageFormat::Png, static_cast<int>(w), static_cast<int>(h32)};
  h.png_color_type = type;
}

// The JPEG markers up to the first start-of-frame, which holds the size and the component count. Bytes between
// segments that are not a marker are skipped, as Pillow's JpegImagePlugin skips them.
void parse_jpeg(const ByteSource& src, const std::string& name, Header& h) {
  uint64_t offset = 2;
  for (;;) {
    uint8_t m[2];
    need(src, offset, 2, m, name, "JPEG", "markers");
    if (m[0] != 0xFF || m[1] == 0xFF) {  // junk, or a fill byte before the marker code
      ++offset;
      continue;
    }
    offset += 2;
    if (m[1] == 0x01 || (m[1] >= 0xD0 && m[1] <= 0xD8)) continue;  // markers without a length
    if (m[1] == 0xD9 || m[1] == 0xDA) fail_image(name, "the JPEG file is corrupt (no frame header before its data)");
    uint8_t len[2];
    need(src, offset, 2, len, name, "JPEG", "markers");
    const uint32_t length = be16(len);
    if (length < 2) fail_image(name, "the JPEG file is corrupt (a marker segment of length ", length, ")");
    const bool sof = m[1] >= 0xC0 && m[1] <= 0xCF && m[1] != 0xC4 && m[1] != 0xC8 && m[1] != 0xCC;
    if (sof) {
      uint8_t f[6];
      need(src, offset + 2, 6, f, name, "JPEG", "frame header");
      const int height = static_cast<int>(be16(f + 1)), width = static_cast<int>(be16(f + 3)), components = f[5];
      if (width == 0 || height == 0)
        fail_image(name, "the JPEG frame header gives a size of ", width, "x", height, " (a DNL-defined height is "
                   "not supported)");
      if (components != 1 && components != 3 && components != 4)
        fail_image(name, "the JPEG has ", components, " colour components; only 1 (grey), 3 (YCbCr/RGB) and 4 "
                   "(CMYK) are supported");
      h.info = {ImageFormat::Jpeg, width, height};
      h.jpeg_components = components;
      return;
    }
    offset += length;
  }
}

void parse_webp(const ByteSource& src, const std::string& name, Header& h) {
  uint8_t b[30];
  need(src, 0, 20, b, name, "WebP", "header");
  if (uint64_t(le32(b + 4)) + 8 > src.size())
    fail_image(name, "the WebP file is truncated (its RIFF header announces ", uint64_t(le32(b + 4)) + 8,
               " bytes, the file has ", src.size(), ")");
  int width = 0, height = 0;
  if (std::memcmp(b + 12, "VP8X", 4) == 0) {
    need(src, 20, 10, b + 20, name, "WebP", "header");
    width = static_cast<int>((b[24] | b[25] << 8 | b[26] << 16) + 1);
    height = static_cast<int>((b[27] | b[28] << 8 | b[29] << 16) + 1);
  } else if (std::memcmp(b + 12, "VP8L", 4) == 0) {
    need(src, 20, 5, b + 20, name, "WebP", "header");
    if (b[20] != 0x2F) fail_image(name, "the WebP file is corrupt (bad VP8L signature)");
    const uint32_t bits = le32(b + 21);
    width = static_cast<int>((bits & 0x3FFF) + 1);
    height = static_cast<int>((bits >> 14 & 0x3FFF) + 1);
  } else if (std::memcmp(b + 12, "VP8 ", 4) == 0) {
    need(src, 20, 10, b + 20, name, "WebP", "header");
    if (b[23] != 0x9D || b[24] != 0x01 || b[25] != 0x2A)
      fail_image(name, "the WebP file is corrupt (bad VP8 start code)");
    width = static_cast<int>(le16(b + 26) & 0x3FFF);
    height = static_cast<int>(le16(b + 28) & 0x3FFF);
  } else {
    fail_image(name, "the WebP file is corrupt (its first chunk is not VP8, VP8L or VP8X)");
  }
  h.info = {ImageFormat::WebP, width, height};
}

void parse_bmp(const ByteSource& src, const std::string& name, Header& h) {
  uint8_t b[30];
  need(src, 0, 18, b, name, "BMP", "header");
  const uint32_t header_size = le32(b + 14);
  int64_t width = 0, height = 0;
  int bits = 0;
  uint32_t compression = 0;
  if (header_size == 12) {  // OS/2 BITMAPCOREHEADER: 16-bit sizes
    need(src, 18, 8, b + 18, name, "BMP", "header");
    width = le16(b + 18);
    height = le16(b + 20);
    bits = static_cast<int>(le16(b + 24));
  } else if (header_size >= 40) {
    need(src, 18, 12, b + 18, name, "BMP", "header");
    width = static_cast<int32_t>(le32(b + 18));
    height = static_cast<int32_t>(le32(b + 22));
    bits = static_cast<int>(le16(b + 28));
    uint8_t c[4];
    need(src, 30, 4, c, name, "BMP", "header");
    compression = le32(c);
  } else {
    fail_image(name, "the BMP file is corrupt (an info header of ", header_size, " bytes)");
  }
  height = height < 0 ? -height : height;  // negative: rows stored top-down
  if (width <= 0 || height <= 0 || width > INT_MAX || height > INT_MAX)
    fail_image(name, "the BMP header gives a size of ", width, "x", height);
  // Uncompressed (BI_RGB, BI_BITFIELDS): the rows must all be in the file, all but the padding of the last one, as
  // Pillow reads them.
  if ((compression == 0 || compression == 3) && bits > 0 && bits <= 32) {
    const uint64_t stride = (uint64_t(width) * bits + 31) / 32 * 4;
    const uint64_t pixels_end = uint64_t(le32(b + 10)) + stride * uint64_t(height - 1) + (uint64_t(width) * bits + 7) / 8;
    if (pixels_end > src.size())
      fail_image(name, "the BMP file is truncated (its pixels need ", pixels_end, " bytes, the file has ", src.size(),
                 ")");
    h.bmp_rows_end = uint64_t(le32(b + 10)) + stride * uint64_t(height);
  }
  h.info = {ImageFormat::Bmp, static_cast<int>(width), static_cast<int>(height)};
}

// Classic TIFF: the first image directory's size, compression, photometric interpretation and extra samples.
void parse_tiff(const ByteSource& src, const std::string& name, Header& h) {
  uint8_t b[12];
  need(src, 0, 8, b, name, "TIFF", "header");
  const bool le = b[0] == 'I';
  auto u16 = [&](const uint8_t* p) { return le ? le16(p) : be16(p); };
  auto u32 = [&](const uint8_t* p) { return le ? le32(p) : be32(p); };
  const uint64_t ifd = u32(b + 4);
  need(src, ifd, 2, b, name, "TIFF", "image directory");
  const uint32_t entries = u16(b);
  int64_t width = -1, height = -1;
  uint32_t compression = 1, photometric = UINT32_MAX, extra = 0;
  for (uint32_t i = 0; i < entries; ++i) {
    need(src, ifd + 2 + 12 * uint64_t(i), 12, b, name, "TIFF", "image directory");
    const uint32_t tag = u16(b), type = u16(b + 2), count = u32(b + 4);
    // The first value, SHORT or LONG: in the entry itself when the values fit in its 4 bytes, else at an offset.
    const size_t value_bytes = type == 3 ? 2 : 4;
    const uint8_t* v = b + 8;
    uint8_t far[4];
    if (uint64_t(count) * value_bytes > 4) {
      need(src, u32(b + 8), value_bytes, far, name, "TIFF", "image directory");
      v = far;
    }
    const uint32_t value = type == 3 ? u16(v) : u32(v);
    if (tag == 256) width = value;
    if (tag == 257) height = value;
    if (tag == 259) compression = value;
    if (tag == 262) photometric = value;
    if (tag == 338) extra = value;
  }
  if (width <= 0 || height <= 0 || width > INT_MAX || height > INT_MAX)
    fail_image(name, "the TIFF's first image directory gives a size of ", width, "x", height);
  const bool compression_ok = compression == 1 || (compression >= 2 && compression <= 5) || compression == 8 ||
                              compression == 32946 || compression == 32773;
  if (!compression_ok)
    fail_image(name, "its TIFF compression ", compression, " is not supported (only none, LZW, Deflate, PackBits "
               "and CCITT decode as Pillow does; JPEG-compressed TIFFs do not)");
  if (photometric > 3)
    fail_image(name, "its TIFF photometric interpretation ", photometric, " is not supported (only grey, palette "
               "and RGB decode as Pillow does; CMYK and YCbCr do not)");
  if (extra == 1)
    fail_image(name, "its TIFF has associated (premultiplied) alpha, which is not supported");
  h.info = {ImageFormat::Tiff, static_cast<int>(width), static_cast<int>(height)};
}

// Binary PGM (P5) / PPM (P6): magic, width, height, maxval as ASCII numbers separated by whitespace and
// #-comments, then one whitespace byte and the samples.
void parse_pnm(const ByteSource& src, const std::string& name, Header& h) {
  constexpr size_t kMaxHeader = 4096;
  std::array<uint8_t, kMaxHeader> text{};
  const size_t have = static_cast<size_t>(std::min<uint64_t>(src.size(), kMaxHeader));
  src.read(0, have, text.data());
  size_t pos = 2;
  auto number = [&]() -> int64_t {
    for (;;) {
      while (pos < have && std::isspace(text[pos])) ++pos;
      if (pos < have && text[pos] == '#') {
        while (pos < have && text[pos] != '\n') ++pos;
        continue;
      }
      break;
    }
    if (pos >= have) fail_image(name, "the PNM file is truncated (it ends inside its header)");
    if (!std::isdigit(text[pos])) fail_image(name, "the PNM header is corrupt (a number was expected)");
    int64_t v = 0;
    while (pos < have && std::isdigit(text[pos]) && v < INT_MAX) v = v * 10 + (text[pos++] - '0');
    return v;
  };
  const int64_t width = number(), height = number(), maxval = number();
  if (pos >= have || !std::isspace(text[pos])) fail_image(name, "the PNM header is corrupt (no space after maxval)");
  if (maxval != 255) fail_image(name, "its PNM maxval is ", maxval, "; only 255 (8-bit samples) is supported");
  if (width <= 0 || height <= 0 || width >= INT_MAX || height >= INT_MAX)
    fail_image(name, "the PNM header gives a size of ", width, "x", height);
  h.pnm_color = text[1] == '6';
  h.pnm_data_offset = pos + 1;
  h.info = {ImageFormat::Pnm, static_cast<int>(width), static_cast<int>(height)};
  const uint64_t end = h.pnm_data_offset + uint64_t(width) * uint64_t(height) * (h.pnm_color ? 3 : 1);
  if (end > src.size())
    fail_image(name, "the PNM file is truncated (its pixels need ", end, " bytes, the file has ", src.size(), ")");
}

bool starts_with(const uint8_t* b, size_t n, const char* magic, size_t magic_len) {
  return n >= magic_len && std::memcmp(b, magic, magic_len) == 0;
}

Header parse_header(const ByteSource& src, const std::string& name, int64_t max_pixels) {
  if (src.size() == 0) fail_image(name, "the file is empty");
  uint8_t b[12] = {};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(src.size(), sizeof b));
  src.read(0, n, b);
  Header h;
  if (starts_with(b, n, "\x89PNG\r\n\x1a\n", 8)) {
    parse_png(src, name, h);
  } else if (starts_with(b, n, "\xFF\xD8\xFF", 3)) {
    parse_jpeg(src, name, h);
  } else if (starts_with(b, n, "RIFF", 4) && n >= 12 && std::memcmp(b + 8, "WEBP", 4) == 0) {
    parse_webp(src, name, h);
  } else if (starts_with(b, n, "BM", 2)) {
    parse_bmp(src, name, h);
  } else if (starts_with(b, n, "II*\0", 4) || starts_with(b, n, "MM\0*", 4)) {
    parse_tiff(src, name, h);
  } else if (n >= 3 && b[0] == 'P' && (b[1] == '5' || b[1] == '6') && std::isspace(b[2])) {
    parse_pnm(src, name, h);
  } else if (starts_with(b, n, "GIF8", 4)) {
    fail_image(name, "GIF is not supported (use ", kSupportedFormats, ")");
  } else {
    fail_image(name, "it is not a ", kSupportedFormats, " file (its first bytes match none of their signatures)");
  }
  const int64_t pixels = int64_t(h.info.width) * h.info.height;
  if (pixels > max_pixels)
    fail_image(name, "its ", h.info.width, "x", h.info.height, " = ", pixels, " pixels are over the limit of ",
               max_pixels, " pixels", max_pixels == kMaxImagePixels ? " (Pillow's decompression-bomb limit)" : "");
  return h;
}

// ---- decoders -------------------------------------------------------------------------------------------------

Rgb8Image blank(const ImageInfo& info) {
  return {info.width, info.height, std::vector<uint8_t>(size_t(info.width) * info.height * 3)};
}

// Pillow's CMYK -> RGB (Convert.c cmyk2rgb) on Pillow's CMYK, i.e. after the Adobe inversion ("CMYK;I").
uint8_t cmyk_channel(int c, int nk) {
  const int t = c * nk + 128;
  return static_cast<uint8_t>(std::clamp(nk - (((t >> 8) + t) >> 8), 0, 255));
}

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

[[noreturn]] void jpeg_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) are ignored as Pillow ignores them, except running out of data before every row is out:
// Pillow's suspending source stops there and reports a truncated file, where libjpeg would pad the picture with
// grey and carry on. Running out after the last row (a missing EOI marker) is no error for Pillow either.
void jpeg_emit_message(j_common_ptr cinfo, int level) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  const bool all_rows_out = d->output_height > 0 && d->output_scanline >= d->output_height;
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF && !all_rows_out) {
    e->truncated = true;
    std::longjmp(e->jump, 1);
  }
}

// libjpeg's setjmp/longjmp error protocol: nothing in this function has a destructor, so a longjmp back into it is
// well defined. `samples` holds width x height x components bytes. False on error, with errors->message set.
bool run_libjpeg(const uint8_t* data, size_t size, const ImageInfo& expected, int components, uint8_t* samples,
                 JpegErrors* errors) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&errors->mgr);
  errors->mgr.error_exit = jpeg_error_exit;
  errors->mgr.emit_message = jpeg_emit_message;
  errors->truncated = false;
  if (setjmp(errors->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  // Pillow's JpegDecode.c sets only the output colour space (from the mode the SOF's component count gives) and
  // keeps libjpeg's defaults for everything else: JDCT_ISLOW, fancy upsampling, no scaling.
  cinfo.out_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_components != components || int(cinfo.output_width) != expected.width ||
      int(cinfo.output_height) != expected.height) {
    std::snprintf(errors->message, sizeof errors->message, "libjpeg decodes %ux%u pixels of %d components where "
                  "the frame header says %dx%d of %d", cinfo.output_width, cinfo.output_height,
                  cinfo.output_components, expected.width, expected.height, components);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  const size_t row_bytes = size_t(cinfo.output_width) * components;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = samples + size_t(cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

Rgb8Image decode_jpeg(const uint8_t* data, size_t size, const Header& h, const std::string& name) {
  const int components = h.jpeg_components;
  const size_t pixels = size_t(h.info.width) * h.info.height;
  std::vector<uint8_t> samples(pixels * components);
  JpegErrors errors{};
  if (!run_libjpeg(data, size, h.info, components, samples.data(), &errors)) {
    if (errors.truncated) fail_image(name, "the JPEG file is truncated (its data ends before its last rows)");
    fail_image(name, "the JPEG data is corrupt (libjpeg: ", errors.message, ")");
  }
  if (components == 3) return {h.info.width, h.info.height, std::move(samples)};
  Rgb8Image out = blank(h.info);
  for (size_t i = 0; i < pixels; ++i) {
    if (components == 1) {
      out.rgb[3 * i] = out.rgb[3 * i + 1] = out.rgb[3 * i + 2] = samples[i];
    } else {
      const uint8_t* s = &samples[4 * i];
      const int nk = s[3];  // 255 − Pillow's K, Pillow's K being 255 − libjpeg's
      for (int c = 0; c < 3; ++c) out.rgb[3 * i + c] = cmyk_channel(255 - s[c], nk);
    }
  }
  return out;
}

Rgb8Image decode_webp(const uint8_t* data, size_t size, const Header& h, const std::string& name) {
  const WebPData webp{data, size};
  // Pillow (_webp.c _anim_decoder_new) calls WebPAnimDecoderNew(data, NULL): RGBA, no threads, fancy upsampling.
  WebPAnimDecoder* decoder = WebPAnimDecoderNew(&webp, nullptr);
  if (!decoder) fail_image(name, "the WebP data is corrupt (libwebp cannot parse it)");
  WebPAnimInfo info{};
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  const bool ok = WebPAnimDecoderGetInfo(decoder, &info) && WebPAnimDecoderGetNext(decoder, &rgba, &timestamp);
  if (!ok || int(info.canvas_width) != h.info.width || int(info.canvas_height) != h.info.height) {
    WebPAnimDecoderDelete(decoder);
    fail_image(name, "the WebP data is corrupt (libwebp cannot decode its first frame)");
  }
  Rgb8Image out = blank(h.info);
  const size_t pixels = size_t(h.info.width) * h.info.height;
  for (size_t i = 0; i < pixels; ++i) std::memcpy(&out.rgb[3 * i], rgba + 4 * i, 3);
  WebPAnimDecoderDelete(decoder);
  return out;
}

Rgb8Image decode_pnm(const uint8_t* data, const Header& h) {
  const uint8_t* samples = data + h.pnm_data_offset;
  if (h.pnm_color) return {h.info.width, h.info.height, {samples, samples + size_t(h.info.width) * h.info.height * 3}};
  Rgb8Image out = blank(h.info);
  for (size_t i = 0; i < out.rgb.size() / 3; ++i) out.rgb[3 * i] = out.rgb[3 * i + 1] = out.rgb[3 * i + 2] = samples[i];
  return out;
}

// A PNG's chunks, walked without inflating, as Pillow's ChunkStream reads them: the chunks before the image data
// must carry their CRC (Pillow refuses the file otherwise); the image data must be complete — a file that ends
// inside an IDAT chunk, or before any, is truncated; a cut chunk after the image data ends the walk, as Pillow
// stops reading there. Returns where the last whole chunk ends, or 0 when IEND was reached.
size_t check_png_chunks(const uint8_t* data, size_t size, const std::string& name) {
  const AVCRC* crc_table = av_crc_get_table(AV_CRC_32_IEEE_LE);
  size_t offset = 8;
  bool seen_idat = false;
  while (offset + 8 <= size) {
    const uint32_t length = be32(data + offset);
    const uint8_t* type = data + offset + 4;
    const bool idat = std::memcmp(type, "IDAT", 4) == 0;
    const uint64_t end = offset + 12 + uint64_t(length);
    if (end > size) break;
    if (!seen_idat && !idat &&
        be32(data + end - 4) != (av_crc(crc_table, UINT32_MAX, type, length + 4) ^ UINT32_MAX))
      fail_image(name, "the PNG file is corrupt (the checksum of its ", std::string(type, type + 4),
                 " chunk is wrong)");
    if (std::memcmp(type, "IEND", 4) == 0) return 0;
    seen_idat = seen_idat || idat;
    offset = static_cast<size_t>(end);
  }
  const bool inside_idat = offset + 8 <= size && std::memcmp(data + offset + 4, "IDAT", 4) == 0;
  if (!seen_idat || inside_idat) fail_image(name, "the PNG file is truncated (it ends inside its image data)");
  return offset;
}

// One FFmpeg frame to RGB24 the way Pillow's unpackers and convert("RGB") treat the same file.
Rgb8Image frame_to_rgb(const AVFrame& f, const Header& h, const std::string& name) {
  Rgb8Image out = blank(h.info);
  const auto format = static_cast<AVPixelFormat>(f.format);
  // Offsets of R, G, B in a packed 3- or 4-byte pixel.
  auto packed = [&](int bytes, int r, int g, int b) {
    for (int y = 0; y < h.info.height; ++y) {
      const uint8_t* s = f.data[0] + size_t(y) * f.linesize[0];
      uint8_t* d = &out.rgb[size_t(y) * h.info.width * 3];
      for (int x = 0; x < h.info.width; ++x, s += bytes, d += 3) d[0] = s[r], d[1] = s[g], d[2] = s[b];
    }
  };
  // Per-pixel grey value (or palette / bit lookups) written to all three channels.
  auto per_pixel = [&](auto rgb_of) {
    for (int y = 0; y < h.info.height; ++y) {
      const uint8_t* row = f.data[0] + size_t(y) * f.linesize[0];
      uint8_t* d = &out.rgb[size_t(y) * h.info.width * 3];
      for (int x = 0; x < h.info.width; ++x, d += 3) rgb_of(row, x, d);
    }
  };
  auto grey = [](uint8_t* d, uint8_t v) { d[0] = d[1] = d[2] = v; };
  // 16-bit grey: Pillow's I;16 -> RGB clips to 255 (I16_RGB / i2rgb); the high byte is what colour keeps.
  auto grey16 = [&](bool big_endian, int step) {
    per_pixel([&](const uint8_t* row, int x, uint8_t* d) {
      const uint8_t* s = row + size_t(x) * step;
      grey(d, static_cast<uint8_t>(std::min<uint32_t>(big_endian ? be16(s) : le16(s), 255)));
    });
  };
  // 5/6-bit channels as Pillow's BGR;15 / BGR;16 unpackers expand them.
  auto rgb16 = [&](bool big_endian, bool six_bit_green) {
    per_pixel([&](const uint8_t* row, int x, uint8_t* d) {
      const uint32_t v = big_endian ? be16(row + 2 * x) : le16(row + 2 * x);
      if (six_bit_green) {
        d[0] = static_cast<uint8_t>((v >> 11 & 31) * 255 / 31);
        d[1] = static_cast<uint8_t>((v >> 5 & 63) * 255 / 63);
      } else {
        d[0] = static_cast<uint8_t>((v >> 10 & 31) * 255 / 31);
        d[1] = static_cast<uint8_t>((v >> 5 & 31) * 255 / 31);
      }
      d[2] = static_cast<uint8_t>((v & 31) * 255 / 31);
    });
  };
  const bool png_grey = h.png_color_type == 0;  // FFmpeg turns 16-bit grey + tRNS into YA16: still Pillow's I;16
  switch (format) {
    case AV_PIX_FMT_RGB24: packed(3, 0, 1, 2); break;
    case AV_PIX_FMT_BGR24: packed(3, 2, 1, 0); break;
    case AV_PIX_FMT_RGBA: case AV_PIX_FMT_RGB0: packed(4, 0, 1, 2); break;
    case AV_PIX_FMT_BGRA: case AV_PIX_FMT_BGR0: packed(4, 2, 1, 0); break;
    case AV_PIX_FMT_ARGB: case AV_PIX_FMT_0RGB: packed(4, 1, 2, 3); break;
    case AV_PIX_FMT_ABGR: case AV_PIX_FMT_0BGR: packed(4, 3, 2, 1); break;
    case AV_PIX_FMT_RGB48BE: packed(6, 0, 2, 4); break;    // high bytes
    case AV_PIX_FMT_RGB48LE: packed(6, 1, 3, 5); break;
    case AV_PIX_FMT_RGBA64BE: packed(8, 0, 2, 4); break;
    case AV_PIX_FMT_RGBA64LE: packed(8, 1, 3, 5); break;
    case AV_PIX_FMT_GRAY8: per_pixel([&](const uint8_t* r, int x, uint8_t* d) { grey(d, r[x]); }); break;
    case AV_PIX_FMT_YA8: per_pixel([&](const uint8_t* r, int x, uint8_t* d) { grey(d, r[2 * x]); }); break;
    case AV_PIX_FMT_GRAY16BE: grey16(true, 2); break;
    case AV_PIX_FMT_GRAY16LE: grey16(false, 2); break;
    case AV_PIX_FMT_YA16BE:
      if (png_grey) grey16(true, 4);
      else per_pixel([&](const uint8_t* r, int x, uint8_t* d) { grey(d, r[4 * x]); });
      break;
    case AV_PIX_FMT_YA16LE:
      if (png_grey) grey16(false, 4);
      else per_pixel([&](const uint8_t* r, int x, uint8_t* d) { grey(d, r[4 * x + 1]); });
      break;
    case AV_PIX_FMT_PAL8: {
      const auto* palette = reinterpret_cast<const uint32_t*>(f.data[1]);  // 256 x 0xAARRGGBB
      per_pixel([&](const uint8_t* r, int x, uint8_t* d) {
        const uint32_t e = palette[r[x]];
        d[0] = static_cast<uint8_t>(e >> 16), d[1] = static_cast<uint8_t>(e >> 8), d[2] = static_cast<uint8_t>(e);
      });
      break;
    }
    case AV_PIX_FMT_MONOBLACK: case AV_PIX_FMT_MONOWHITE: {
      const uint8_t set = format == AV_PIX_FMT_MONOBLACK ? 255 : 0;
      per_pixel([&](const uint8_t* r, int x, uint8_t* d) {
        grey(d, (r[x / 8] >> (7 - x % 8) & 1) ? set : static_cast<uint8_t>(255 - set));
      });
      break;
    }
    case AV_PIX_FMT_RGB555LE: rgb16(false, false); break;
    case AV_PIX_FMT_RGB555BE: rgb16(true, false); break;
    case AV_PIX_FMT_RGB565LE: rgb16(false, true); break;
    case AV_PIX_FMT_RGB565BE: rgb16(true, true); break;
    case AV_PIX_FMT_GBRP: case AV_PIX_FMT_GBRAP:  // planar G, B, R
      for (int y = 0; y < h.info.height; ++y) {
        uint8_t* d = &out.rgb[size_t(y) * h.info.width * 3];
        const uint8_t* g = f.data[0] + size_t(y) * f.linesize[0];
        const uint8_t* b = f.data[1] + size_t(y) * f.linesize[1];
        const uint8_t* r = f.data[2] + size_t(y) * f.linesize[2];
        for (int x = 0; x < h.info.width; ++x, d += 3) d[0] = r[x], d[1] = g[x], d[2] = b[x];
      }
      break;
    default: {
      const char* pix = av_get_pix_fmt_name(format);
      fail_image(name, "its ", image_format_name(h.info.format), " pixel layout (FFmpeg's ", pix ? pix : "unknown",
                 ") is not supported");
    }
  }
  return out;
}

Rgb8Image decode_with_ffmpeg(const uint8_t* data, size_t size, const Header& h, const std::string& name,
                             int64_t max_pixels) {
  const char* format = image_format_name(h.info.format);
  // FFmpeg's decoders refuse sizes av_image_check_size rejects: (8·width + 1024) · (height + 128) ≥ INT_MAX. Checked
  // here rather than by calling it, which would also print FFmpeg's own line on stderr.
  if ((8 * int64_t(h.info.width) + 1024) * (int64_t(h.info.height) + 128) >= INT_MAX)
    fail_image(name, "its ", h.info.width, "x", h.info.height, " pixels are a shape FFmpeg's ", format,
               " decoder does not take ((width + 128) · (height + 128) must stay under 2^28)");
  // The whole file is one packet, with two repairs of what Pillow reads and FFmpeg's decoders refuse: a PNG cut
  // after its image data ends at its last whole chunk and gets an IEND; a BMP may lack its last row's padding
  // (see parse_bmp), which becomes zeros.
  static constexpr uint8_t kIend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
  const size_t png_whole = h.info.format == ImageFormat::Png ? check_png_chunks(data, size, name) : 0;
  const size_t copied = png_whole ? png_whole : size;
  const size_t packet_size = png_whole ? png_whole + sizeof kIend : std::max<size_t>(size, h.bmp_rows_end);
  if (packet_size > size_t(INT_MAX - AV_INPUT_BUFFER_PADDING_SIZE))
    fail_image(name, "the ", format, " file is over 2 GiB, more than FFmpeg decodes in one packet");
  const AVCodecID id = h.info.format == ImageFormat::Png   ? AV_CODEC_ID_PNG
                       : h.info.format == ImageFormat::Bmp ? AV_CODEC_ID_BMP
                                                           : AV_CODEC_ID_TIFF;
  ffmpeg::quiet_logging();
  const AVCodec* codec = avcodec_find_decoder(id);
  H3_CHECK(codec != nullptr, "this FFmpeg build has no ", format, " decoder");
  ffmpeg::CodecContextPtr ctx(avcodec_alloc_context3(codec));
  H3_CHECK(ctx != nullptr, "allocating the ", format, " decoder: out of memory");
  ctx->thread_count = 1;
  ctx->max_pixels = max_pixels;  // FFmpeg's own guard, in case a decoder reads another size than the header's
  ffmpeg::check(avcodec_open2(ctx.get(), codec, nullptr), "opening the image decoder");
  // FFmpeg's decoders may read up to AV_INPUT_BUFFER_PADDING_SIZE bytes past the end of a packet.
  std::vector<uint8_t> padded(packet_size + AV_INPUT_BUFFER_PADDING_SIZE, 0);
  std::memcpy(padded.data(), data, copied);
  if (png_whole) std::memcpy(padded.data() + png_whole, kIend, sizeof kIend);
  ffmpeg::PacketPtr packet = ffmpeg::alloc_packet();
  packet->data = padded.data();
  packet->size = static_cast<int>(packet_size);
  ffmpeg::FramePtr frame = ffmpeg::alloc_frame();
  int rc = avcodec_send_packet(ctx.get(), packet.get());
  if (rc >= 0) rc = avcodec_send_packet(ctx.get(), nullptr);
  if (rc >= 0) rc = avcodec_receive_frame(ctx.get(), frame.get());
  if (rc < 0 && png_whole)
    fail_image(name, "the PNG file is truncated (it ends before its IEND chunk, and its image data is incomplete)");
  if (rc < 0) fail_image(name, "the ", format, " data is corrupt (FFmpeg: ", ffmpeg::error_string(rc), ")");
  if (frame->width != h.info.width || frame->height != h.info.height)
    fail_image(name, "the ", format, " decoder produced ", frame->width, "x", frame->height, " pixels where the "
               "header says ", h.info.width, "x", h.info.height);
  return frame_to_rgb(*frame, h, name);
}

// The file behind `path` open for reading, after the checks every reader shares; -1 never returned.
int open_image_file(const std::string& path, uint64_t& size) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) fail_image(path, "the file does not exist");
    fail_image(path, "it cannot be inspected (", std::strerror(errno), ")");
  }
  if (!S_ISREG(st.st_mode)) fail_image(path, "it is not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_image(path, "the file cannot be opened (", std::strerror(errno), ")");
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

// The file behind `path` mapped, after the checks every reader shares.
std::shared_ptr<MappedFile> map_image_file(const std::string& path) {
  uint64_t size = 0;
  ::close(open_image_file(path, size));
  if (size == 0) fail_image(path, "the file is empty");
  return MappedFile::open(path);
}

}  // namespace

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::Png: return "PNG";
    case ImageFormat::Jpeg: return "JPEG";
    case ImageFormat::WebP: return "WebP";
    case ImageFormat::Bmp: return "BMP";
    case ImageFormat::Tiff: return "TIFF";
    case ImageFormat::Pnm: return "PNM";
  }
  return "?";
}

ImageInfo probe_image(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  return parse_header(MemorySource(data, size), name, max_pixels).info;
}

ImageInfo probe_image_file(const std::string& path, int64_t max_pixels) {
  uint64_t size = 0;
  const int fd = open_image_file(path, size);
  try {
    const ImageInfo info = parse_header(FileSource(fd, size), path, max_pixels).info;
    ::close(fd);
    return info;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

Rgb8Image decode_image(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  const Header h = parse_header(MemorySource(data, size), name, max_pixels);
  switch (h.info.format) {
    case ImageFormat::Jpeg: return decode_jpeg(data, size, h, name);
    case ImageFormat::WebP: return decode_webp(data, size, h, name);
    case ImageFormat::Pnm: return decode_pnm(data, h);
    default: return decode_with_ffmpeg(data, size, h, name, max_pixels);
  }
}

Rgb8Image read_image_file(const std::string& path, int64_t max_pixels) {
  const std::shared_ptr<MappedFile> file = map_image_file(path);
  return decode_image(file->data(), static_cast<size_t>(file->size()), path, max_pixels);
}

ImageInfo probe_image_upright(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  ImageInfo info = probe_image(data, size, name, max_pixels);
  info.orientation = image_orientation(data, size, info.format, name);
  return info;
}

// Mapped rather than read through the header parsers' seeks: the orientation can sit anywhere before a JPEG's
// first scan or anywhere among a PNG's chunks, and libwebp's demuxer wants the whole WebP file. Mapping reads only
// the pages that are touched.
ImageInfo probe_image_file_upright(const std::string& path, int64_t max_pixels) {
  const std::shared_ptr<MappedFile> file = map_image_file(path);
  return probe_image_upright(file->data(), static_cast<size_t>(file->size()), path, max_pixels);
}

Rgb8Image decode_image_upright(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  const ImageInfo info = probe_image_upright(data, size, name, max_pixels);  // refuses bad metadata before decoding
  return apply_orientation(decode_image(data, size, name, max_pixels), info.orientation);
}

Rgb8Image read_image_file_upright(const std::string& path, int64_t max_pixels) {
  const std::shared_ptr<MappedFile> file = map_image_file(path);
  return decode_image_upright(file->data(), static_cast<size_t>(file->size()), path, max_pixels);
}

}  // namespace h3
