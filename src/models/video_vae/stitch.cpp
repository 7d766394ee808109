#include "models/video_vae/stitch.h"

#include <algorithm>

#include "util/error.h"
#include "util/thread_pool.h"

namespace h3 {

Tensor stitch_tiles(const std::vector<Tensor>& tiles, const TileSplit& ys, const TileSplit& xs) {
  const int64_t ny = static_cast<int64_t>(ys.starts.size()), nx = static_cast<int64_t>(xs.starts.size());
  H3_CHECK(static_cast<int64_t>(tiles.size()) == ny * nx, "stitch_tiles: ", tiles.size(), " tiles for a ", ny, "x",
           nx, " grid");
  const int64_t th = ys.length, tw = xs.length;
  const int64_t C = tiles[0].dim(0), F = tiles[0].dim(1);
  for (const Tensor& t : tiles)
    H3_CHECK(t.dtype() == DType::F32 && t.ndim() == 4 && t.dim(0) == C && t.dim(1) == F && t.dim(2) == th &&
                 t.dim(3) == tw,
             "stitch_tiles: tile ", t.str(), " should be F32[", C, ", ", F, ", ", th, ", ", tw, "]");
  const int64_t H = ys.starts.back() + th, W = xs.starts.back() + tw;
  Tensor canvas = Tensor::empty({C, F, H, W}, DType::F32);
  float* out = canvas.ptr<float>();
  const int64_t plane = th * tw;

  // One task per (channel, frame) plane; every tile writes its kept region of that plane.
  parallel_for(0, C * F, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t cf = p0; cf < p1; ++cf)
      for (int64_t i = 0; i < ny; ++i)
        for (int64_t j = 0; j < nx; ++j) {
          const float* raw = tiles[i * nx + j].ptr<float>() + cf * plane;
          const float* above = i > 0 ? tiles[(i - 1) * nx + j].ptr<float>() + cf * plane : nullptr;
          const float* left = j > 0 ? tiles[i * nx + j - 1].ptr<float>() + cf * plane : nullptr;
          const int64_t ey = i > 0 ? std::min(ys.overlaps[i - 1], th) : 0;
          const int64_t ex = j > 0 ? std::min(xs.overlaps[j - 1], tw) : 0;
          const int64_t keep_y = th - (i + 1 < ny ? ys.overlaps[i] : 0);
          const int64_t keep_x = tw - (j + 1 < nx ? xs.overlaps[j] : 0);
          float* dst = out + cf * H * W + ys.starts[i] * W + xs.starts[j];
          for (int64_t y = 0; y < keep_y; ++y)
            for (int64_t x = 0; x < keep_x; ++x) {
              float v = raw[y * tw + x];
              if (y < ey) v = blend_sample(above[(th - ey + y) * tw + x], v, y, ey);
              if (x < ex) v = blend_sample(left[y * tw + (tw - ex + x)], v, x, ex);
              dst[y * W + x] = v;
            }
        }
  });
  return canvas;
}

void cross_fade_frames(const Tensor& prev, Tensor& next, int64_t extent) {
  H3_CHECK(prev.dtype() == DType::F32 && next.dtype() == DType::F32 && prev.ndim() == 4 && next.ndim() == 4 &&
               prev.dim(0) == next.dim(0) && prev.dim(2) == next.dim(2) && prev.dim(3) == next.dim(3),
           "cross_fade_frames: ", prev.str(), " and ", next.str(), " do not match");
  const int64_t C = next.dim(0), fp = prev.dim(1), fn = next.dim(1), plane = next.dim(2) * next.dim(3);
  const int64_t e = std::min({extent, fp, fn});
  const float* a = prev.ptr<float>();
  float* b = next.ptr<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t p = 0; p < e; ++p) {
      const float* ap = a + (c * fp + fp - e + p) * plane;
      float* bp = b + (c * fn + p) * plane;
      for (int64_t k = 0; k < plane; ++k) bp[k] = blend_sample(ap[k], bp[k], p, e);
    }
}

}  // namespace h3
