// EXIF orientation as Pillow's ImageOps.exif_transpose (12.3) finds and applies it, for the upright readers of
// media/image_input.h. The parts are public for the tests and the fuzz target; callers want image_input.h.
//
// Where Pillow finds the orientation (Image.getexif, with each plugin's info):
//   JPEG  the APP1 segments that start "Exif\0\0", before the first SOS: the first one whole, each later one's
//         payload after its 6-byte header appended (JpegImagePlugin.APP).
//   PNG   info["exif"], the last of: an eXIf chunk ("Exif\0\0" + its data), a tEXt chunk keyed "exif" (its raw
//         bytes), a zTXt / iTXt keyed "exif" (a str, which Exif.load cannot take: Pillow raises TypeError). Only
//         when there is none, the last text chunk keyed "Raw profile type exif" (ImageMagick's): its lines from
//         the fourth on, joined and read as hex (bytes.fromhex: ValueError on anything but hex pairs and
//         whitespace between them). Chunks after the image data count too (exif_transpose loads the image first).
//   WebP  the first EXIF chunk libwebp's demuxer reports (WebPDemuxGetChunk, the call Pillow makes).
//   TIFF  the file's own first image directory (Exif.load_from_fp at the first IFD), not an EXIF blob.
//   BMP, PNM: none.
// The blob is read as Image.Exif.load reads it: leading "Exif\0\0" headers stripped (any number); an empty rest
// holds no tags; otherwise its first 4 bytes must be one of TiffImagePlugin.PREFIXES (II*\0, MM\0*, and the
// swapped MM*\0 / II\0* and the BigTIFF II+\0 / MM\0+) and it must have 8 bytes, else Pillow raises (an II+\0 blob
// always raises: Pillow reads its 8-byte IFD offset past the 8 bytes it keeps). The first IFD is then walked as
// ImageFileDirectory_v2.load walks it: an entry whose type Pillow does not know is skipped, so is one of count 0;
// the walk stops (keeping what it had) at an entry, or an entry's out-of-line value, that runs past the end of the
// data; a later entry for a tag replaces an earlier one.
// The Orientation tag's first value counts when it equals an integer in 2..8: SHORT, LONG, SBYTE, SSHORT, SLONG,
// IFD, LONG8, FLOAT, DOUBLE, and RATIONAL / SRATIONAL whose quotient is exact (IFDRational hashes and compares as
// its Fraction); BYTE, ASCII and UNDEFINED values are bytes or str and never match. Any other value is no
// rotation (Pillow ignores values outside 2..8).
// Only when the tag is absent, XMP: the first `tiff:Orientation="N"` or `tiff:Orientation>N` (N one digit) in
// PNG's text chunk keyed "XML:com.adobe.xmp" (when non-empty), else in info["xmp"]: the iTXt of that key's raw
// data (PNG), the APP1 "http://ns.adobe.com/xap/1.0/\0" packet (JPEG, the last one), the "XMP " chunk (WebP), or
// tag 700 (TIFF; BYTE or UNDEFINED data; any other type is not bytes, and Pillow's search raises TypeError).
//
// JPEG's one exception: when no JFIF APP0 gives a density in dots per inch or cm (Pillow's info["dpi"]), Pillow's
// open() already read the EXIF for a resolution and swallowed a bad header's error; exif_transpose then gets the
// cached, empty result: no rotation and no XMP. With a JFIF density the same bad header raises.
//
// Pillow's TIFF plugin also applies the tag in its own load() (TiffImageFile.load_end -> exif_transpose in place,
// since 6.2; 9.4 then transposed a second time in exif_transpose, fixed in 10.1), so for TIFF even plain
// Image.open().convert("RGB") is upright; h3's plain read_image_file is left unrotated, as documented in
// image_input.h. The upright walk of a PNG follows PngImageFile.load_end, which refuses a file cut inside any chunk
// after the image data ("Truncated File Read"); the plain reader reads such a file to its last whole chunk.
// Not reproduced: failures of Pillow's other readers on the way (the JPEG APP14 / MPF handlers, PNG chunk handlers
// other than text and eXIf, the TIFF sub-IFDs load_end reads), which concern the decode, not the orientation.
//
// Hand-written rather than libexif (Debian libexif-dev), because exactness demands Pillow's own rules, which
// libexif does not share: it accepts only the II*\0 / MM\0* headers, reads a TIFF file's directory not at all,
// checks each tag's type against the EXIF specification (dropping or fixing entries Pillow keeps) and loads the
// whole tree, where only IFD0's tag 0x0112 matters here. Every read below is bounds-checked against the blob.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "media/image_input.h"

namespace h3 {

// What Pillow's Image.Exif.load makes of an EXIF blob, for the Orientation tag.
struct ExifOrientation {
  bool readable = true;  // false: Pillow raises (a TIFF header it does not accept, or fewer than 8 bytes)
  bool present = false;  // the first IFD holds tag 0x0112, whatever its value (so XMP is not looked at)
  int orientation = 1;   // the tag's value when it is 2..8, else 1
};
ExifOrientation read_exif_orientation(const uint8_t* blob, size_t size);

// The digit N of the first `tiff:Orientation="N"` or `tiff:Orientation>N` in an XMP packet (Pillow's regex
// `tiff:Orientation(="|>)([0-9])`), or -1 when there is none.
int xmp_orientation(const uint8_t* xmp, size_t size);

// The orientation exif_transpose applies to the file in data[0, size) of the given format (as probed): 1..8, 1
// when there is none or it is out of range. Throws h3::Error, one sentence naming `name` and the rule, where
// Pillow raises on the way (unreadable EXIF, an unreadable "Raw profile type exif", a text chunk Pillow refuses).
int image_orientation(const uint8_t* data, size_t size, ImageFormat format, const std::string& name);

// The picture as Pillow's Image.transpose gives it for exif_transpose's method of `orientation` (1: a copy;
// 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90).
// Any other value returns the picture unchanged.
Rgb8Image apply_orientation(Rgb8Image image, int orientation);

}  // namespace h3
