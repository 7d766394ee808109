#include "models/qwen3vl/patch_rows.h"

#include "util/error.h"

namespace h3 {

PixelNormalization fused_normalization(const std::vector<double>& mean, const std::vector<double>& std,
                                       double rescale_factor) {
  H3_CHECK(mean.size() == 3 && std.size() == 3, "normalization: mean and std need 3 entries, got ", mean.size(),
           " and ", std.size());
  const float inverse = static_cast<float>(1.0 / rescale_factor);
  PixelNormalization n;
  for (int k = 0; k < 3; ++k) {
    n.mean[k] = static_cast<float>(mean[k]) * inverse;
    n.std[k] = static_cast<float>(std[k]) * inverse;
  }
  return n;
}

void write_patch_rows(const std::vector<const uint8_t*>& frames, int64_t width, int64_t height, int64_t patch,
                      int64_t merge, int64_t temporal_patch, const PixelNormalization& n, float* out) {
  const int64_t p = patch, m = merge, tp = temporal_patch;
  H3_CHECK(p > 0 && m > 0 && tp > 0 && width % (p * m) == 0 && height % (p * m) == 0 &&
               static_cast<int64_t>(frames.size()) % tp == 0,
           "patch rows: ", frames.size(), " frames of ", width, "x", height, " do not tile into temporal blocks of ",
           tp, " and patches of ", p, "x", p, " merged ", m, "x", m);
  const int64_t gt = static_cast<int64_t>(frames.size()) / tp, gh = height / p, gw = width / p;
  for (int64_t bt = 0; bt < gt; ++bt)
    for (int64_t bh = 0; bh < gh / m; ++bh)
      for (int64_t bw = 0; bw < gw / m; ++bw)
        for (int64_t mh = 0; mh < m; ++mh)
          for (int64_t mw = 0; mw < m; ++mw) {
            const int64_t y0 = (bh * m + mh) * p, x0 = (bw * m + mw) * p;
            for (int64_t ch = 0; ch < 3; ++ch)
              for (int64_t t = 0; t < tp; ++t) {
                const uint8_t* frame = frames[static_cast<size_t>(bt * tp + t)];
                for (int64_t y = 0; y < p; ++y)
                  for (int64_t x = 0; x < p; ++x) {
                    const uint8_t u = frame[((y0 + y) * width + x0 + x) * 3 + ch];
                    *out++ = (static_cast<float>(u) - n.mean[ch]) / n.std[ch];
                  }
              }
          }
}

}  // namespace h3
