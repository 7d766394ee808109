#include "media/torch_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "util/error.h"

namespace h3 {

namespace {

// Keys' cubic convolution kernel with a = −0.5 (ATen's HelperInterpCubic::aa_filter with cubic_convolution1/2, in
// its operation order).
double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// One axis of the resampling: output sample i reads `count[i]` inputs from `first[i]` on, with int16 weights
// weights[i·taps + j] in fixed point at `precision` bits.
struct AxisWeights {
  std::vector<int64_t> first, count;
  std::vector<int16_t> weights;
  int64_t taps = 0;
  int precision = 0;
};

// HelperInterpBase::_compute_index_ranges_weights (antialias, align_corners false, no explicit scale) and
// _compute_index_ranges_int16_weights.
AxisWeights axis_weights(int64_t in_size, int64_t out_size) {
  constexpr int kInterpSize = 4;  // bicubic
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? (kInterpSize * 0.5) * scale : kInterpSize * 0.5;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  AxisWeights a;
  a.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.first.resize(out_size);
  a.count.resize(out_size);
  std::vector<double> w(static_cast<size_t>(out_size * a.taps), 0.0);
  double w_max = 0.0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    const int64_t xsize =
        std::clamp(std::min(static_cast<int64_t>(center + support + 0.5), in_size) - xmin, int64_t{0}, a.taps);
    double* wi = w.data() + i * a.taps;
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      wi[j] = keys_cubic((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      total += wi[j];
    }
    if (total != 0.0)
      for (int64_t j = 0; j < xsize; ++j) {
        wi[j] /= total;
        w_max = std::max(w_max, wi[j]);
      }
    a.first[i] = xmin;
    a.count[i] = xsize;
  }
  // The most bits for which the largest weight still fits an int16 after rounding.
  for (a.precision = 0; a.precision < 22; ++a.precision)
    if (static_cast<int>(0.5 + w_max * (1 << (a.precision + 1))) >= (1 << 15)) break;
  H3_CHECK(a.precision > 0, "resize: no fixed-point precision fits weights up to ", w_max);  // ATen asserts it too
  a.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << a.precision);
    a.weights[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return a;
}

// Output sample = clamp((2^(precision−1) + Σ_j src[j·stride] · w[j]) >> precision, 0, 255) for every output position
// along one axis: `lines` independent lines, line l starting at src + l·line_step (dst + l·out_line_step), samples
// `stride` apart in both.
void resample_axis(const uint8_t* src, uint8_t* dst, const AxisWeights& a, int64_t lines, int64_t line_step,
                   int64_t out_line_step, int64_t stride) {
  const int64_t out_size = static_cast<int64_t>(a.first.size());
  for (int64_t l = 0; l < lines; ++l) {
    const uint8_t* s = src + l * line_step;
    uint8_t* d = dst + l * out_line_step;
    for (int64_t i = 0; i < out_size; ++i) {
      const uint8_t* p = s + a.first[i] * stride;
      const int16_t* w = a.weights.data() + i * a.taps;
      int acc = 1 << (a.precision - 1);
      for (int64_t j = 0; j < a.count[i]; ++j) acc += p[j * stride] * w[j];
      d[i * stride] = static_cast<uint8_t>(std::clamp(acc >> a.precision, 0, 255));
    }
  }
}

}  // namespace

Rgb8Image resize_bicubic_antialiased(const Rgb8Image& src, int width, int height) {
  H3_CHECK(src.width > 0 && src.height > 0 &&
               src.rgb.size() == static_cast<size_t>(src.width) * static_cast<size_t>(src.height) * 3,
           "resize: the source image must be at least 1x1 pixels with width·height·3 bytes, got ", src.width, "x",
           src.height, " with ", src.rgb.size(), " bytes");
  H3_CHECK(width > 0 && height > 0, "resize: the output size must be at least 1x1 pixels, got ", width, "x", height);
  Rgb8Image cur = src;
  if (width != cur.width) {  // along each row: samples 3 bytes apart, one line per (row, channel)
    Rgb8Image out;
    out.width = width;
    out.height = cur.height;
    out.rgb.resize(static_cast<size_t>(width) * cur.height * 3);
    const AxisWeights a = axis_weights(cur.width, width);
    for (int c = 0; c < 3; ++c)
      resample_axis(cur.rgb.data() + c, out.rgb.data() + c, a, cur.height, int64_t{3} * cur.width,
                    int64_t{3} * width, 3);
    cur = std::move(out);
  }
  if (height != cur.height) {  // along each column: samples one row apart, one line per (column, channel)
    Rgb8Image out;
    out.width = cur.width;
    out.height = height;
    out.rgb.resize(static_cast<size_t>(cur.width) * height * 3);
    const AxisWeights a = axis_weights(cur.height, height);
    resample_axis(cur.rgb.data(), out.rgb.data(), a, int64_t{3} * cur.width, 1, 1, int64_t{3} * cur.width);
    cur = std::move(out);
  }
  return cur;
}

}  // namespace h3
