// Pillow's resampling for RGB24 pictures, byte for byte: `Image.resize((width, height), filter)` and
// `Image.crop(box)`, as the reference pipeline applies them to keyframes and reference images (spec/sampling.md §4).
//
// Hand-written rather than taken from a library because the conditioning latents depend on every byte: this is a
// port of Pillow's libImaging/Resample.c (ImagingResample, ImagingResampleInner, precompute_coeffs,
// normalize_coeffs_8bpc and the 8-bit horizontal and vertical passes): the coefficients in double, normalized to
// 22-bit fixed point, a horizontal pass over only the source rows the vertical pass reads, then the vertical pass,
// each rounding and clipping to 0..255. That arithmetic is unchanged from Pillow 9.4 to the 12.3 development tree
// (the diff of Resample.c is cosmetic), and Pillow 9.4 and 12.3 give the same bytes on the fixtures.
#pragma once

#include "media/video_frames.h"

namespace h3 {

// Pillow's separable filters (Image.Resampling.BOX .. LANCZOS); NEAREST is a different algorithm in Pillow and is
// not offered.
enum class ResampleFilter { Box, Bilinear, Hamming, Bicubic, Lanczos };
const char* resample_filter_name(ResampleFilter filter);  // "box", "bilinear", "hamming", "bicubic", "lanczos"

// image.resize((width, height), filter). Same size: a copy, as in Pillow. Throws when a size is below 1 pixel or
// when the filter's coefficient table would pass Pillow's own 2 GiB limit (extreme downscales only).
Rgb8Image resize_rgb8(const Rgb8Image& image, int width, int height, ResampleFilter filter = ResampleFilter::Lanczos);

// image.crop((left, top, left + width, top + height)) for a box of at least 1x1 pixels inside the image.
Rgb8Image crop_rgb8(const Rgb8Image& image, int left, int top, int width, int height);

}  // namespace h3
