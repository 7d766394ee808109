#include "media/image_resize.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "util/error.h"

namespace h3 {

namespace {

// ---- Pillow's filters (Resample.c), in double ----------------------------------------------------------------

double box_filter(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_filter(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= std::numbers::pi;
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));  // float constants, as Pillow writes them
}

double bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc_filter(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}

double lanczos_filter(double x) {
  return -3.0 <= x && x < 3.0 ? sinc_filter(x) * sinc_filter(x / 3) : 0.0;  // sinc truncated to 3 lobes
}

struct Filter {
  double (*weight)(double);
  double support;
};

Filter filter_of(ResampleFilter f) {
  switch (f) {
    case ResampleFilter::Box: return {box_filter, 0.5};
    case ResampleFilter::Bilinear: return {bilinear_filter, 1.0};
    case ResampleFilter::Hamming: return {hamming_filter, 1.0};
    case ResampleFilter::Bicubic: return {bicubic_filter, 2.0};
    case ResampleFilter::Lanczos: return {lanczos_filter, 3.0};
  }
  fail("unknown resampling filter ", static_cast<int>(f));
}

// 8 bits of result, 2 of headroom (filters have negative lobes, so sums leave 0..1): 22 fractional bits.
constexpr int kPrecisionBits = 32 - 8 - 2;

// One axis of a resize: for output sample i, the taps start at source index bounds[2i] and there are
// bounds[2i + 1] of them, with fixed-point weights weights[i·ksize .. i·ksize + count).
struct AxisCoefficients {
  int ksize = 0;
  std::vector<int> bounds;
  std::vector<int32_t> weights;
};

// precompute_coeffs + normalize_coeffs_8bpc. The box edges are float in Pillow (its `box` argument), so the span is
// computed in float before it becomes a double.
AxisCoefficients precompute_coefficients(int in_size, int out_size, const Filter& filter, const char* axis) {
  const float in0 = 0.0f, in1 = static_cast<float>(in_size);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = filter.support * filterscale;
  const int64_t ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  H3_CHECK(out_size * ksize * static_cast<int64_t>(sizeof(double)) <= INT_MAX, "Resizing ", in_size, " to ",
           out_size, " pixels ", axis, " needs a ", out_size * ksize * 8,
           "-byte coefficient table, over Pillow's limit of 2 GiB; resize in two steps.");

  AxisCoefficients c;
  c.ksize = static_cast<int>(ksize);
  c.bounds.resize(2 * static_cast<size_t>(out_size));
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  const double inv_filterscale = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int count = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < count; ++x) {
      k[x] = filter.weight((x + xmin - center + 0.5) * inv_filterscale);
      ww += k[x];
    }
    int32_t* out = &c.weights[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < count; ++x) {
      const double w = ww != 0.0 ? k[x] / ww : k[x];
      out[x] = static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    c.bounds[2 * xx] = xmin;
    c.bounds[2 * xx + 1] = count;
  }
  return c;
}

// Pillow's clip8: the rounded fixed-point sum (it starts at one half) shifted down and clamped to 0..255.
uint8_t clip8(int32_t sum) { return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255)); }

// Rows [row0, row0 + rows) of `in`, resampled horizontally to `out_width` columns.
Rgb8Image horizontal_pass(const Rgb8Image& in, int row0, int rows, int out_width, const AxisCoefficients& c) {
  Rgb8Image out{out_width, rows, std::vector<uint8_t>(static_cast<size_t>(out_width) * rows * 3)};
  for (int yy = 0; yy < rows; ++yy) {
    const uint8_t* line = &in.rgb[static_cast<size_t>(row0 + yy) * in.width * 3];
    uint8_t* dst = &out.rgb[static_cast<size_t>(yy) * out_width * 3];
    for (int xx = 0; xx < out_width; ++xx) {
      const int xmin = c.bounds[2 * xx], count = c.bounds[2 * xx + 1];
      const int32_t* k = &c.weights[static_cast<size_t>(xx) * c.ksize];
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < count; ++x) {
        const uint8_t* px = line + static_cast<size_t>(x + xmin) * 3;
        s0 += px[0] * k[x];
        s1 += px[1] * k[x];
        s2 += px[2] * k[x];
      }
      dst[3 * xx] = clip8(s0);
      dst[3 * xx + 1] = clip8(s1);
      dst[3 * xx + 2] = clip8(s2);
    }
  }
  return out;
}

// `in` resampled vertically to `out_height` rows; the coefficients' row bounds index `in`'s rows.
Rgb8Image vertical_pass(const Rgb8Image& in, int out_height, const AxisCoefficients& c) {
  const size_t row_bytes = static_cast<size_t>(in.width) * 3;
  Rgb8Image out{in.width, out_height, std::vector<uint8_t>(row_bytes * out_height)};
  std::vector<int32_t> sums(row_bytes);
  for (int yy = 0; yy < out_height; ++yy) {
    const int ymin = c.bounds[2 * yy], count = c.bounds[2 * yy + 1];
    const int32_t* k = &c.weights[static_cast<size_t>(yy) * c.ksize];
    std::fill(sums.begin(), sums.end(), 1 << (kPrecisionBits - 1));
    // Row by row rather than Pillow's pixel by pixel: the same integer sums in the same order for every sample.
    for (int y = 0; y < count; ++y) {
      const uint8_t* line = &in.rgb[static_cast<size_t>(y + ymin) * row_bytes];
      for (size_t i = 0; i < row_bytes; ++i) sums[i] += line[i] * k[y];
    }
    uint8_t* dst = &out.rgb[static_cast<size_t>(yy) * row_bytes];
    for (size_t i = 0; i < row_bytes; ++i) dst[i] = clip8(sums[i]);
  }
  return out;
}

void check_image(const Rgb8Image& image, const char* what) {
  H3_CHECK(image.width >= 1 && image.height >= 1, "Cannot ", what, " an image of ", image.width, "x", image.height,
           " pixels; it needs at least 1x1.");
  H3_CHECK(image.rgb.size() == static_cast<size_t>(image.width) * image.height * 3, "Cannot ", what,
           " the image: it holds ", image.rgb.size(), " bytes, not the ",
           static_cast<size_t>(image.width) * image.height * 3, " of ", image.width, "x", image.height, " RGB24.");
}

}  // namespace

const char* resample_filter_name(ResampleFilter filter) {
  switch (filter) {
    case ResampleFilter::Box: return "box";
    case ResampleFilter::Bilinear: return "bilinear";
    case ResampleFilter::Hamming: return "hamming";
    case ResampleFilter::Bicubic: return "bicubic";
    case ResampleFilter::Lanczos: return "lanczos";
  }
  return "?";
}

Rgb8Image resize_rgb8(const Rgb8Image& image, int width, int height, ResampleFilter filter) {
  check_image(image, "resize");
  H3_CHECK(width >= 1 && height >= 1, "An image can only be resized to at least 1x1 pixels, not ", width, "x",
           height, ".");
  const bool horizontal = width != image.width, vertical = height != image.height;
  if (!horizontal && !vertical) return image;
  const Filter f = filter_of(filter);
  // ImagingResampleInner: the vertical coefficients come first, because the horizontal pass only resamples the
  // source rows they read (ybox_first .. ybox_last).
  AxisCoefficients vert = precompute_coefficients(image.height, height, f, "vertically");
  if (!horizontal) return vertical_pass(image, height, vert);
  const int ybox_first = vert.bounds[0];
  const int ybox_last = vert.bounds[2 * (height - 1)] + vert.bounds[2 * (height - 1) + 1];
  const AxisCoefficients horiz = precompute_coefficients(image.width, width, f, "horizontally");
  for (int i = 0; i < height; ++i) vert.bounds[2 * i] -= ybox_first;
  Rgb8Image rows = horizontal_pass(image, ybox_first, ybox_last - ybox_first, width, horiz);
  return vertical ? vertical_pass(rows, height, vert) : rows;
}

Rgb8Image crop_rgb8(const Rgb8Image& image, int left, int top, int width, int height) {
  check_image(image, "crop");
  H3_CHECK(width >= 1 && height >= 1 && left >= 0 && top >= 0 && left <= image.width - width &&
               top <= image.height - height,
           "The crop box ", width, "x", height, " at (", left, ", ", top, ") must lie inside the ", image.width, "x",
           image.height, " image and hold at least 1x1 pixels.");
  Rgb8Image out{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  const size_t row = static_cast<size_t>(width) * 3;
  for (int y = 0; y < height; ++y)
    std::memcpy(&out.rgb[y * row], &image.rgb[(static_cast<size_t>(top + y) * image.width + left) * 3], row);
  return out;
}

}  // namespace h3
