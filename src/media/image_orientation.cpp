#include "media/image_orientation.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "util/error.h"

extern "C" {
#include <webp/demux.h>
#include <zlib.h>
}

namespace h3 {

namespace {

template <typename... Args>
[[noreturn]] void fail_image(const std::string& name, Args&&... args) {
  fail("Cannot read the image ", name, ": ", std::forward<Args>(args)..., ".");
}

uint32_t be16(const uint8_t* p) { return uint32_t(p[0]) << 8 | p[1]; }
uint32_t be32(const uint8_t* p) { return be16(p) << 16 | be16(p + 2); }
uint32_t le16(const uint8_t* p) { return uint32_t(p[1]) << 8 | p[0]; }
uint32_t le32(const uint8_t* p) { return le16(p + 2) << 16 | le16(p); }

bool starts_with(const uint8_t* data, size_t size, const char* prefix, size_t n) {
  return size >= n && std::memcmp(data, prefix, n) == 0;
}

// ---- the first image directory, as TiffImagePlugin.ImageFileDirectory_v2.load walks it -------------------------

// One tag's data as Pillow keeps it (_tagdata): its type and its count x unit bytes, inside the walked buffer.
struct TagData {
  bool present = false;
  uint32_t type = 0;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

struct FirstIfd {
  TagData orientation;  // 0x0112
  TagData xmp;          // 700 (XMLPacket), read for TIFF files only
};

// Pillow's _load_dispatch: the unit size of each type it reads (0: a type it skips).
uint64_t unit_size(uint32_t type) {
  switch (type) {
    case 1: case 2: case 6: case 7: return 1;   // BYTE, ASCII, SBYTE, UNDEFINED
    case 3: case 8: return 2;                   // SHORT, SSHORT
    case 4: case 9: case 11: case 13: return 4;  // LONG, SLONG, FLOAT, IFD
    case 5: case 10: case 12: case 16: return 8;  // RATIONAL, SRATIONAL, DOUBLE, LONG8
    default: return 0;
  }
}

// The directory at `offset` of buf[0, size): offsets inside it count from buf. Bounded by `size` throughout.
FirstIfd walk_first_ifd(const uint8_t* buf, size_t size, bool le, uint64_t offset) {
  auto u16 = [&](const uint8_t* p) { return le ? le16(p) : be16(p); };
  auto u32 = [&](const uint8_t* p) { return le ? le32(p) : be32(p); };
  FirstIfd ifd;
  if (offset > size || size - offset < 2) return ifd;  // Pillow: a short read, caught; no tags
  const uint32_t entries = u16(buf + offset);
  for (uint32_t i = 0; i < entries; ++i) {
    const uint64_t at = offset + 2 + 12 * uint64_t(i);
    if (at > size || size - at < 12) break;  // a cut entry ends the walk; the tags before it stay
    const uint8_t* entry = buf + at;
    const uint32_t tag = u16(entry), type = u16(entry + 2), count = u32(entry + 4);
    const uint64_t unit = unit_size(type);
    if (unit == 0) continue;
    const uint64_t bytes = unit * count;
    const uint8_t* data = entry + 8;
    if (bytes > 4) {
      const uint64_t value_at = u32(entry + 8);
      if (value_at > size || size - value_at < bytes) break;  // ImageFile._safe_read's OSError: the walk ends
      data = buf + value_at;
    }
    if (bytes == 0) continue;
    if (tag == 0x0112) ifd.orientation = {true, type, data, bytes};
    if (tag == 700) ifd.xmp = {true, type, data, bytes};
  }
  return ifd;
}

// The first value of a numeric tag as a double (exactly, for every integer type Pillow reads), or nullopt for
// BYTE, ASCII and UNDEFINED, which Pillow keeps as bytes or str. A rational whose denominator is 0 is NaN, as
// IFDRational makes it; other rationals are their quotient, exact when it is an integer of at most 53 bits.
std::optional<double> first_number(const TagData& t, bool le) {
  auto u16 = [&](const uint8_t* p) { return le ? le16(p) : be16(p); };
  auto u32 = [&](const uint8_t* p) { return le ? le32(p) : be32(p); };
  auto u64 = [&](const uint8_t* p) {
    return le ? uint64_t(le32(p + 4)) << 32 | le32(p) : uint64_t(be32(p)) << 32 | be32(p + 4);
  };
  const uint8_t* p = t.data;
  switch (t.type) {
    case 3: return u16(p);
    case 4: case 13: return u32(p);
    case 16: return static_cast<double>(u64(p));
    case 6: return static_cast<int8_t>(p[0]);
    case 8: return static_cast<int16_t>(u16(p));
    case 9: return static_cast<int32_t>(u32(p));
    case 11: { float f; const uint32_t bits = u32(p); std::memcpy(&f, &bits, 4); return f; }
    case 12: { double d; const uint64_t bits = u64(p); std::memcpy(&d, &bits, 8); return d; }
    case 5: case 10: {
      const int64_t num = t.type == 5 ? int64_t(u32(p)) : int64_t(static_cast<int32_t>(u32(p)));
      const int64_t den = t.type == 5 ? int64_t(u32(p + 4)) : int64_t(static_cast<int32_t>(u32(p + 4)));
      if (den == 0) return std::nan("");
      if (num % den == 0) return static_cast<double>(num / den);
      return static_cast<double>(num) / static_cast<double>(den);  // not an integer: never a table key
    }
    default: return std::nullopt;
  }
}

// exif_transpose's table: its keys are the ints 2..8, which a float or a Fraction equal to them also finds.
int table_orientation(std::optional<double> v) {
  if (!v || !(*v >= 2 && *v <= 8) || *v != std::floor(*v)) return 1;
  return static_cast<int>(*v);
}

int orientation_of_xmp_digit(int digit) { return digit >= 2 && digit <= 8 ? digit : 1; }

// ---- zlib as Pillow's PngImagePlugin._safe_zlib_decompress calls it ----------------------------------------------

enum class Inflated { Ok, Error, TooLarge };

// zlib.decompressobj().decompress(data, MAX_TEXT_CHUNK = 1 MiB): a stream cut short gives what it has, bytes after
// its end are ignored; a corrupt stream is zlib.error; output reaching the cap with input left over is the
// "Decompressed data too large" ValueError.
Inflated inflate_text(const uint8_t* data, size_t size, std::vector<uint8_t>& out) {
  constexpr size_t kMaxTextChunk = 1 << 20;
  out.assign(kMaxTextChunk, 0);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) fail("zlib cannot start an inflate stream (out of memory)");
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(std::min<size_t>(size, UINT32_MAX));
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  int rc = Z_OK;
  while (rc == Z_OK && z.avail_out > 0 && z.avail_in > 0) rc = inflate(&z, Z_NO_FLUSH);
  const size_t produced = out.size() - z.avail_out;
  const bool input_left = z.avail_in > 0;
  inflateEnd(&z);
  out.resize(produced);
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) return Inflated::Error;
  if (rc != Z_STREAM_END && produced == kMaxTextChunk && input_left) return Inflated::TooLarge;
  return Inflated::Ok;
}

// Python's strict UTF-8 decoder: no overlong forms, no surrogates, nothing above U+10FFFF. Also counts the code
// points (len() of the decoded str).
bool valid_utf8(const uint8_t* s, size_t n, size_t* code_points) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++count) {
    const uint8_t c = s[i];
    size_t extra = 0;
    uint32_t min = 0, cp = 0;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) extra = 1, min = 0x80, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) extra = 2, min = 0x800, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) extra = 3, min = 0x10000, cp = c & 0x07;
    else return false;
    if (n - i - 1 < extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += 1 + extra;
  }
  *code_points = count;
  return true;
}

// bytes.fromhex on Python's "".join(text.split("\n")[3:]): pairs of hex digits, ASCII whitespace (\t \n \v \f \r
// and space) only between pairs. False where fromhex raises ValueError.
bool raw_profile_hex(const std::vector<uint8_t>& text, std::vector<uint8_t>& out) {
  size_t start = 0;
  for (int line = 0; line < 3; ++line) {
    const auto nl = std::find(text.begin() + static_cast<std::ptrdiff_t>(start), text.end(), '\n');
    if (nl == text.end()) {
      start = text.size();
      break;
    }
    start = static_cast<size_t>(nl - text.begin()) + 1;
  }
  std::vector<uint8_t> joined;
  for (size_t i = start; i < text.size(); ++i)
    if (text[i] != '\n') joined.push_back(text[i]);
  auto space = [](uint8_t c) { return c == ' ' || (c >= 0x09 && c <= 0x0D); };
  auto digit = [](uint8_t c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.clear();
  for (size_t i = 0; i < joined.size();) {
    if (space(joined[i])) {
      ++i;
      continue;
    }
    if (i + 1 >= joined.size()) return false;
    const int hi = digit(joined[i]), lo = digit(joined[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
    i += 2;
  }
  return true;
}

// ---- per format: the EXIF blob and XMP packet Pillow's info holds ------------------------------------------------

// One entry of Pillow's info dict that a text chunk can set: bytes, or a str (kept as its encoded bytes).
struct InfoValue {
  bool set = false;
  bool is_bytes = false;
  std::vector<uint8_t> value;
  void assign(bool bytes, const uint8_t* p, size_t n) {
    set = true;
    is_bytes = bytes;
    value.assign(p, p + n);
  }
};

// What Image.getexif + exif_transpose make of the format's EXIF (when `exif` is set) and XMP, given the plugin's
// info: the shared tail of every format. `exif_error` says what Pillow raises when the blob is unreadable.
int orientation_from(const std::optional<std::vector<uint8_t>>& exif, const InfoValue& xmp_text,
                     const InfoValue& xmp, const std::string& name, const char* format) {
  if (exif) {
    const ExifOrientation e = read_exif_orientation(exif->data(), exif->size());
    if (!e.readable)
      fail_image(name, "its ", format, " EXIF data is unreadable (it does not start with a TIFF header, as Pillow "
                 "requires)");
    if (e.present) return e.orientation;
  }
  const InfoValue& packet = xmp_text.set && !xmp_text.value.empty() ? xmp_text : xmp;
  if (!packet.set || packet.value.empty()) return 1;
  if (&packet == &xmp && !xmp.is_bytes)
    fail_image(name, "its ", format, " \"xmp\" text is not bytes, which Pillow's XMP orientation search requires");
  const int digit = xmp_orientation(packet.value.data(), packet.value.size());
  return digit < 0 ? 1 : orientation_of_xmp_digit(digit);
}

int jpeg_orientation(const uint8_t* data, size_t size, const std::string& name) {
  static constexpr char kXmpHeader[] = "http://ns.adobe.com/xap/1.0/";  // + its NUL: 29 bytes
  std::optional<std::vector<uint8_t>> exif;
  InfoValue xmp;
  bool dpi = false;
  // JpegImageFile._open's marker loop, from the 0xFF at offset 2 up to the first SOS.
  size_t p = 2;
  for (;;) {
    if (p >= size) fail_image(name, "the JPEG file is truncated (it ends inside its markers)");
    if (data[p] != 0xFF) {  // junk between segments
      ++p;
      continue;
    }
    if (p + 1 >= size) fail_image(name, "the JPEG file is truncated (it ends inside its markers)");
    const uint8_t m = data[p + 1];
    if (m == 0xFF) {  // a fill byte: the second 0xFF starts the marker
      ++p;
      continue;
    }
    if (m == 0x00) {  // an escaped 0xFF
      p += 2;
      continue;
    }
    if (m < 0xC0) {
      char code[8];
      std::snprintf(code, sizeof code, "0xFF%02X", m);
      fail_image(name, "the JPEG file is corrupt (", code, " before its first scan is no marker)");
    }
    const bool lengthless = m == 0xC8 || (m >= 0xD0 && m <= 0xD9) || (m >= 0xF0 && m <= 0xFD);
    if (lengthless) {
      p += 2;
      continue;
    }
    if (size - p < 4) fail_image(name, "the JPEG file is truncated (it ends inside its markers)");
    const int64_t n = int64_t(be16(data + p + 2)) - 2;  // Pillow reads max(n, 0) bytes
    const size_t body = p + 4, body_size = n > 0 ? static_cast<size_t>(n) : 0;
    if (size - body < body_size) fail_image(name, "the JPEG file is truncated (it ends inside a marker segment)");
    const uint8_t* s = data + body;
    if (m == 0xE0 && starts_with(s, body_size, "JFIF", 4)) {
      if (body_size < 7) fail_image(name, "the JPEG file is corrupt (its JFIF segment is shorter than 7 bytes)");
      if (body_size >= 12 && (s[7] == 1 || s[7] == 2)) dpi = true;  // density in dots per inch or cm
    } else if (m == 0xE1 && starts_with(s, body_size, "Exif\0\0", 6)) {
      if (!exif) exif.emplace(s, s + body_size);
      else exif->insert(exif->end(), s + 6, s + body_size);
    } else if (m == 0xE1 && starts_with(s, body_size, kXmpHeader, sizeof kXmpHeader)) {
      xmp.assign(true, s + sizeof kXmpHeader, body_size - sizeof kXmpHeader);
    }
    if (m == 0xDA) break;
    p = body + body_size;
  }
  if (exif && !dpi && !read_exif_orientation(exif->data(), exif->size()).readable) return 1;  // swallowed, cached
  return orientation_from(exif, {}, xmp, name, "JPEG");
}

int png_orientation(const uint8_t* data, size_t size, const std::string& name) {
  constexpr size_t kMaxTextMemory = 64u << 20;  // PngImagePlugin.MAX_TEXT_MEMORY
  InfoValue exif, raw_profile, xmp_text, xmp;
  size_t text_memory = 0;
  auto add_text = [&](size_t chars) {
    text_memory += chars;
    if (text_memory > kMaxTextMemory)
      fail_image(name, "its PNG text chunks hold more than 64 MiB of text (Pillow's MAX_TEXT_MEMORY)");
  };
  // A text chunk's value under `key`, as PngStream stores it in info.
  auto store = [&](const std::string& key, bool bytes, const uint8_t* v, size_t n) {
    if (key == "exif") exif.assign(bytes, v, n);
    if (key == "Raw profile type exif") raw_profile.assign(bytes, v, n);
    if (key == "XML:com.adobe.xmp") xmp_text.assign(bytes, v, n);
    if (key == "xmp") xmp.assign(bytes, v, n);
  };
  auto is_cid = [](const uint8_t* t) {
    return std::all_of(t, t + 4, [](uint8_t c) { return std::isalnum(c) || c == '_'; });
  };
  std::vector<uint8_t> inflated;
  size_t offset = 8;
  bool image_data = false;  // past the first IDAT: PngImageFile.load_end's walk, which checks no CRC
  for (;;) {
    if (offset > size || size - offset < 8) {
      if (!image_data) fail_image(name, "the PNG file is truncated (it ends before its image data)");
      break;
    }
    const uint8_t* type = data + offset + 4;
    const uint64_t length = be32(data + offset);
    if (!is_cid(type)) {
      if (!image_data) fail_image(name, "the PNG file is corrupt (a chunk type that is not four letters)");
      break;
    }
    const std::string cid(type, type + 4);
    if (cid == "IEND") break;
    const uint8_t* s = data + offset + 8;
    const bool whole = size - offset - 8 >= length;
    if (cid == "IDAT" && !image_data) {
      image_data = true;
      if (!whole) break;  // the decoder says truncated
    } else if (!whole) {
      fail_image(name, "the PNG file is truncated (it ends inside its ", cid, " chunk)");
    } else if (!image_data && size - offset - 8 - length < 4) {
      fail_image(name, "the PNG file is truncated (it ends inside the checksum of its ", cid, " chunk)");
    } else if (!image_data && be32(s + length) != (crc32(crc32(0, type, 4), s, static_cast<uInt>(length)))) {
      fail_image(name, "the PNG file is corrupt (the checksum of its ", cid, " chunk is wrong)");
    }
    const size_t n = static_cast<size_t>(length);
    const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(s, 0, n));
    if (cid == "eXIf") {
      exif.set = exif.is_bytes = true;
      exif.value.assign({'E', 'x', 'i', 'f', 0, 0});
      exif.value.insert(exif.value.end(), s, s + n);
    } else if (cid == "tEXt") {  // key NUL latin-1 text; no NUL: all key
      const size_t k = nul ? static_cast<size_t>(nul - s) : n;
      const uint8_t* v = nul ? nul + 1 : s + n;
      const size_t vn = static_cast<size_t>(s + n - v);
      if (k > 0) {
        const std::string key(s, s + k);
        store(key, key == "exif", v, vn);
        add_text(vn);
      }
    } else if (cid == "zTXt") {  // key NUL method zlib-data
      const size_t k = nul ? static_cast<size_t>(nul - s) : n;
      const uint8_t* v = nul ? nul + 1 : s + n;
      const size_t vn = static_cast<size_t>(s + n - v);
      if (vn > 0 && v[0] != 0)
        fail_image(name, "its PNG zTXt chunk uses compression method ", int(v[0]), " (only 0, zlib, exists)");
      const Inflated rc = inflate_text(vn > 0 ? v + 1 : v, vn > 0 ? vn - 1 : 0, inflated);
      if (rc == Inflated::TooLarge)
        fail_image(name, "a PNG zTXt chunk inflates to more than 1 MiB (Pillow's MAX_TEXT_CHUNK)");
      if (rc == Inflated::Error) inflated.clear();
      if (k > 0) {
        store(std::string(s, s + k), false, inflated.data(), inflated.size());
        add_text(inflated.size());
      }
    } else if (cid == "iTXt" && nul) {  // key NUL flag method lang NUL translated-key NUL text
      const std::string key(s, nul);
      const uint8_t* r = nul + 1;
      const size_t rn = static_cast<size_t>(s + n - r);
      const uint8_t* lang = r + 2;
      const uint8_t* lang_end = rn >= 2 ? static_cast<const uint8_t*>(std::memchr(lang, 0, rn - 2)) : nullptr;
      const uint8_t* tk_end =
          lang_end ? static_cast<const uint8_t*>(std::memchr(lang_end + 1, 0, size_t(s + n - lang_end - 1)))
                   : nullptr;
      if (tk_end) {
        const uint8_t* v = tk_end + 1;
        size_t vn = static_cast<size_t>(s + n - v);
        bool keep = true;
        if (r[0] != 0) {
          if (r[1] != 0) {
            keep = false;
          } else {
            const Inflated rc = inflate_text(v, vn, inflated);
            if (rc == Inflated::TooLarge)
              fail_image(name, "a PNG iTXt chunk inflates to more than 1 MiB (Pillow's MAX_TEXT_CHUNK)");
            keep = rc == Inflated::Ok;
            v = inflated.data(), vn = inflated.size();
          }
        }
        if (keep) {
          if (key == "XML:com.adobe.xmp") xmp.assign(true, v, vn);
          size_t chars = 0, unused = 0;
          if (valid_utf8(lang, size_t(lang_end - lang), &unused) &&
              valid_utf8(lang_end + 1, size_t(tk_end - lang_end - 1), &unused) && valid_utf8(v, vn, &chars)) {
            store(key, false, v, vn);
            add_text(chars);
          }
        }
      }
    }
    offset = offset + 8 + n + 4;
  }
  std::optional<std::vector<uint8_t>> blob;
  if (exif.set) {
    if (!exif.is_bytes && !exif.value.empty())
      fail_image(name, "its PNG \"exif\" text chunk is compressed or international text, which Pillow cannot read "
                 "as EXIF");
    blob = exif.value;  // an empty str: no tags
  } else if (raw_profile.set) {
    blob.emplace();
    if (!raw_profile_hex(raw_profile.value, *blob))
      fail_image(name, "its PNG \"Raw profile type exif\" text is not hex from its fourth line on");
  }
  return orientation_from(blob, xmp_text, xmp, name, "PNG");
}

int webp_orientation(const uint8_t* data, size_t size, const std::string& name) {
  const WebPData webp{data, size};
  WebPDemuxer* demux = WebPDemux(&webp);
  if (!demux) fail_image(name, "the WebP data is corrupt (libwebp cannot parse it)");
  std::optional<std::vector<uint8_t>> exif;
  InfoValue xmp;
  WebPChunkIterator chunk{};
  if (WebPDemuxGetChunk(demux, "EXIF", 1, &chunk) && chunk.chunk.size > 0)
    exif.emplace(chunk.chunk.bytes, chunk.chunk.bytes + chunk.chunk.size);
  WebPDemuxReleaseChunkIterator(&chunk);
  if (WebPDemuxGetChunk(demux, "XMP ", 1, &chunk) && chunk.chunk.size > 0)
    xmp.assign(true, chunk.chunk.bytes, chunk.chunk.size);
  WebPDemuxReleaseChunkIterator(&chunk);
  WebPDemuxDelete(demux);
  return orientation_from(exif, {}, xmp, name, "WebP");
}

int tiff_orientation(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 8) fail_image(name, "the TIFF file is truncated (it ends inside its header)");
  const bool le = data[0] == 'I';
  const FirstIfd ifd = walk_first_ifd(data, size, le, le ? le32(data + 4) : be32(data + 4));
  if (ifd.orientation.present) return table_orientation(first_number(ifd.orientation, le));
  if (!ifd.xmp.present) return 1;
  const TagData& x = ifd.xmp;
  if (x.type == 1 || x.type == 7) {  // bytes
    const int digit = xmp_orientation(x.data, static_cast<size_t>(x.size));
    return digit < 0 ? 1 : orientation_of_xmp_digit(digit);
  }
  // Any other type is a str or numbers: Pillow's search raises TypeError unless the value is falsy (one number 0,
  // or an ASCII value that is empty without its NUL), which it skips.
  const bool falsy = x.type == 2 ? x.size == 1 && x.data[0] == 0
                                 : x.size == unit_size(x.type) && first_number(x, le) == 0.0;
  if (falsy) return 1;
  fail_image(name, "its TIFF XMP tag (700) is of type ", x.type, ", not BYTE or UNDEFINED, so Pillow cannot search "
             "it for an orientation");
}

}  // namespace

ExifOrientation read_exif_orientation(const uint8_t* blob, size_t size) {
  while (starts_with(blob, size, "Exif\0\0", 6)) blob += 6, size -= 6;
  ExifOrientation out;
  if (size == 0) return out;
  static constexpr const char* kPrefixes[] = {"MM\x00\x2a", "II\x2a\x00", "MM\x2a\x00", "II\x00\x2a",
                                              "MM\x00\x2b", "II\x2b\x00"};
  const bool accepted = std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                                    [&](const char* prefix) { return starts_with(blob, size, prefix, 4); });
  // BigTIFF is marked by byte 2 == 0x2B, which only II+\0 has; Pillow then unpacks an 8-byte offset from the
  // (absent) bytes 8..16 of the 8-byte header it read, and raises.
  if (!accepted || size < 8 || blob[2] == 0x2B) {
    out.readable = false;
    return out;
  }
  const bool le = blob[0] == 'I';
  const FirstIfd ifd = walk_first_ifd(blob, size, le, le ? le32(blob + 4) : be32(blob + 4));
  out.present = ifd.orientation.present;
  if (out.present) out.orientation = table_orientation(first_number(ifd.orientation, le));
  return out;
}

int xmp_orientation(const uint8_t* xmp, size_t size) {
  static constexpr char kKey[] = "tiff:Orientation";
  constexpr size_t k = sizeof kKey - 1;
  for (size_t i = 0; i + k < size; ++i) {
    if (std::memcmp(xmp + i, kKey, k) != 0) continue;
    size_t at = i + k;
    if (xmp[at] == '=' && at + 1 < size && xmp[at + 1] == '"') at += 2;
    else if (xmp[at] == '>') at += 1;
    else continue;
    if (at < size && xmp[at] >= '0' && xmp[at] <= '9') return xmp[at] - '0';
  }
  return -1;
}

int image_orientation(const uint8_t* data, size_t size, ImageFormat format, const std::string& name) {
  switch (format) {
    case ImageFormat::Jpeg: return jpeg_orientation(data, size, name);
    case ImageFormat::Png: return png_orientation(data, size, name);
    case ImageFormat::WebP: return webp_orientation(data, size, name);
    case ImageFormat::Tiff: return tiff_orientation(data, size, name);
    case ImageFormat::Bmp: case ImageFormat::Pnm: return 1;
  }
  return 1;
}

Rgb8Image apply_orientation(Rgb8Image image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int w = image.width, h = image.height;
  const bool swap = orientation >= 5 && orientation <= 8;
  Rgb8Image out{swap ? h : w, swap ? w : h, std::vector<uint8_t>(image.rgb.size())};
  // The source pixel of output pixel (x, y), per PIL.Image.Transpose.
  auto source = [&](int x, int y) -> std::pair<int, int> {
    switch (orientation) {
      case 2: return {w - 1 - x, y};          // FLIP_LEFT_RIGHT
      case 3: return {w - 1 - x, h - 1 - y};  // ROTATE_180
      case 4: return {x, h - 1 - y};          // FLIP_TOP_BOTTOM
      case 5: return {y, x};                  // TRANSPOSE
      case 6: return {y, h - 1 - x};          // ROTATE_270 (90 degrees clockwise)
      case 7: return {w - 1 - y, h - 1 - x};  // TRANSVERSE
      case 8: return {w - 1 - y, x};          // ROTATE_90 (90 degrees counter-clockwise)
      default: return {x, y};  // not reached
    }
  };
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      const auto [sx, sy] = source(x, y);
      std::memcpy(&out.rgb[(size_t(y) * out.width + x) * 3], &image.rgb[(size_t(sy) * w + sx) * 3], 3);
    }
  return out;
}

}  // namespace h3
