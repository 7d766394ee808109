// Still images into RGB24 with exactly the pixels of Pillow's `Image.open(path).convert("RGB")`, which is what the
// reference pipeline is handed for an fl2va keyframe (spec/sampling.md §4).
//
// What "exactly" means, format by format (each is covered by tests/fixtures/image, made with Pillow):
//   PNG   decoded by FFmpeg, after a walk over the chunks that refuses what Pillow refuses (a bad CRC before the
//         image data, a file ending inside it); alpha dropped (not composited); palette (+ tRNS) looked up; grey
//         replicated;
//         1/2/4-bit grey scaled to 0/255, ×0x55, ×0x11; 16-bit colour and grey+alpha keep the high byte, but 16-bit
//         grey (with or without tRNS) is min(v, 255) — Pillow opens it as I;16 and convert() clips.
//   JPEG  decoded by libjpeg-turbo with Pillow's settings (libjpeg's defaults: islow DCT, fancy upsampling), because
//         FFmpeg's own decoder gives other pixels (measured on a 29x21 picture: 4:4:4 differs in 5 % of bytes by up
//         to 2, 4:2:0 in 82 % by up to 82 once FFmpeg's swscale converts the chroma); grey replicated; CMYK read
//         with Adobe's inverted polarity and converted as Pillow's cmyk2rgb. A file whose data ends before libjpeg
//         has delivered the last row is truncated, as Pillow says (one that lacks only what follows, e.g. the EOI
//         marker, decodes in both); libjpeg's other warnings are ignored, as Pillow ignores them.
//   WebP  decoded by libwebp's animation decoder with its default options, the call Pillow makes (lossy WebP
//         needs libwebp's own YUV->RGB conversion and fancy upsampling to match); the first frame; alpha dropped.
//   BMP   decoded by FFmpeg; 16-bit pixels expanded as Pillow's BGR;15 / BGR;16 unpackers (v·255/31, v·255/63);
//         the padding of the last row may be missing, as for Pillow.
//   TIFF  decoded by FFmpeg: grey, bilevel, palette, RGB and RGB + unassociated alpha, uncompressed, LZW, Deflate,
//         PackBits or CCITT; the first page. JPEG-compressed, CMYK, YCbCr and associated-alpha TIFFs are refused
//         (FFmpeg converts them differently from Pillow).
//   PNM   binary PGM (P5) and PPM (P6) with maxval 255, as h3 itself writes frames.
// GIF and every other format are refused with a sentence that names the supported ones.
//
// EXIF orientation: the plain readers (probe_image*, read_image_file, decode_image) do NOT apply it, as Pillow's
// open() and convert() do not for PNG, JPEG and WebP; they are what fl2va keyframes get: the fl2va blocks
// (before_encoder.py MiniMaxH3ResizeStep) take PIL images as handed over and use `.size` as is, and nothing in
// modular_pipelines/minimax_h3 opens a keyframe file. (Pillow's TIFF plugin is the exception: since Pillow 6.2 its
// load() applies the TIFF's own Orientation tag; read_image_file does not, read_image_file_upright does.)
// The upright readers (probe_image*_upright, read_image_file_upright, decode_image_upright) give what
// diffusers.utils.load_image gives — PIL.ImageOps.exif_transpose(Image.open(path)).convert("RGB") — which is how
// the ref2va image references are opened (`MiniMaxH3ImageReference.from_file`, references.py): the orientation
// found as Pillow 12.3's Image.getexif finds it (JPEG APP1 "Exif", PNG eXIf / "Raw profile type exif" text, WebP
// EXIF chunk, TIFF's own first directory, then XMP's tiff:Orientation; the rules are in image_orientation.h) and
// the picture transposed by exif_transpose's table: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM,
// 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90; any other value is no rotation, as for Pillow.
// h3.c (antirez) reads keyframes through the ffmpeg command line with a LANCZOS scale filter and takes the
// aspect from ffprobe's stream width/height, i.e. the stored (unrotated) size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "media/video_frames.h"

namespace h3 {

enum class ImageFormat { Png, Jpeg, WebP, Bmp, Tiff, Pnm };
const char* image_format_name(ImageFormat format);  // "PNG", "JPEG", "WebP", "BMP", "TIFF", "PNM"

// The decompression-bomb limit, in pixels: Pillow's own error threshold, 2 · Image.MAX_IMAGE_PIXELS =
// 2 · 89,478,485 (Pillow raises DecompressionBombError above it), so every picture the reference opens without
// error opens here too. At the limit the RGB24 result alone is 537 MB; no keyframe needs that many pixels (the
// canvas is at most 768·1344 = 1.03 M), which is why a caller may pass a lower one.
inline constexpr int64_t kMaxImagePixels = 178'956'970;

struct ImageInfo {
  ImageFormat format = ImageFormat::Png;
  int width = 0, height = 0;  // as stored
  // The EXIF orientation exif_transpose applies, 1..8, from the upright probes; 0 from the plain ones, which do not
  // look for it.
  int orientation = 0;
  // The size as displayed: width and height swapped for orientations 5..8.
  int upright_width() const { return orientation >= 5 && orientation <= 8 ? height : width; }
  int upright_height() const { return orientation >= 5 && orientation <= 8 ? width : height; }
};

// The format and size from the file's header alone (a few dozen bytes; a JPEG's markers or a TIFF's first
// directory are walked with seeks), so a bad keyframe is refused before anything expensive. Throws h3::Error, one
// sentence naming the file and the rule: missing, not a regular file, empty, not in a supported format, truncated
// header, corrupt header, or more than `max_pixels` pixels. A file that passes can still fail to decode.
ImageInfo probe_image_file(const std::string& path, int64_t max_pixels = kMaxImagePixels);
// The same for bytes in memory; `name` stands for the file in messages.
ImageInfo probe_image(const uint8_t* data, size_t size, const std::string& name,
                      int64_t max_pixels = kMaxImagePixels);

// The whole picture as Image.open(path).convert("RGB") gives it. Every check of probe_image_file, then the decode:
// truncated data and data the decoder rejects are refused with a sentence naming the file.
Rgb8Image read_image_file(const std::string& path, int64_t max_pixels = kMaxImagePixels);
Rgb8Image decode_image(const uint8_t* data, size_t size, const std::string& name,
                       int64_t max_pixels = kMaxImagePixels);

// The upright probe: probe_image_file's checks, then the orientation from the file's metadata, without decoding
// the pixels (ImageInfo::orientation 1..8, upright_width/upright_height). Also refused, with a sentence naming the
// file: metadata that makes Pillow's exif_transpose raise (an EXIF blob without a TIFF header, a "Raw profile type
// exif" that is not hex, ... : image_orientation.h), and a file that ends inside the metadata Pillow reads.
ImageInfo probe_image_file_upright(const std::string& path, int64_t max_pixels = kMaxImagePixels);
ImageInfo probe_image_upright(const uint8_t* data, size_t size, const std::string& name,
                              int64_t max_pixels = kMaxImagePixels);

// The whole picture as diffusers.utils.load_image(path) gives it: exif_transpose(Image.open(path)).convert("RGB"),
// upright_width() x upright_height() pixels. Every check of the upright probe and of read_image_file.
Rgb8Image read_image_file_upright(const std::string& path, int64_t max_pixels = kMaxImagePixels);
Rgb8Image decode_image_upright(const uint8_t* data, size_t size, const std::string& name,
                               int64_t max_pixels = kMaxImagePixels);

}  // namespace h3
