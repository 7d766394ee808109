#include "backend/cpu/cpu_video.h"

#include <algorithm>

#include "util/error.h"
#include "util/thread_pool.h"

namespace h3::cpu {

namespace {

// For every canvas coordinate along one axis: the tile whose kept region holds it and the offset inside that tile.
// The kept regions [starts[i], starts[i + 1]) (the last one to the canvas end) partition the axis.
void locate(const std::vector<int64_t>& starts, int64_t extent, std::vector<int32_t>& tile,
            std::vector<int32_t>& offset) {
  tile.resize(extent);
  offset.resize(extent);
  size_t i = 0;
  for (int64_t p = 0; p < extent; ++p) {
    while (i + 1 < starts.size() && starts[i + 1] <= p) ++i;
    tile[p] = static_cast<int32_t>(i);
    offset[p] = static_cast<int32_t>(p - starts[i]);
  }
}

}  // namespace

void stitch_video_tiles(const Tensor& features, const VideoTileGrid& g, int64_t frame_begin, int64_t frame_end,
                        Tensor& canvas) {
  check_stitch_video_tiles(features, g, frame_begin, frame_end, canvas);
  H3_CHECK(features.device() == Device::CPU && canvas.device() == Device::CPU,
           "cpu backend: stitch_video_tiles got a tensor that is not on the CPU");
  const Tensor f32 = features.dtype() == DType::F32 ? features : features.to(DType::F32);
  const float* feat = f32.ptr<float>();
  float* out = canvas.ptr<float>();
  const int64_t nx = static_cast<int64_t>(g.x_starts.size());
  const int64_t r = g.temporal_patch, s = g.spatial_patch, P = g.features(), tokens = g.tile_tokens();
  const int64_t th = g.tile_height(), tw = g.tile_width(), lh = g.tile_latent_h, lw = g.tile_latent_w;
  const int64_t H = g.height(), W = g.width(), F = frame_end - frame_begin;
  std::vector<int32_t> tile_y, off_y, tile_x, off_x;
  locate(g.y_starts, H, tile_y, off_y);
  locate(g.x_starts, W, tile_x, off_x);

  parallel_for(0, g.channels * F, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t cf = p0; cf < p1; ++cf) {
      const int64_t c = cf / F, fw = frame_begin + cf % F, tt = fw / r, it = fw % r;
      // Raw value of tile (i, j) at tile pixel (y, x) of this channel and frame.
      auto raw = [&](int64_t i, int64_t j, int64_t y, int64_t x) {
        const int64_t token = (i * nx + j) * tokens + (tt * lh + y / s) * lw + x / s;
        return feat[token * P + ((c * r + it) * s + y % s) * s + x % s];
      };
      for (int64_t Y = 0; Y < H; ++Y) {
        const int64_t i = tile_y[Y], y = off_y[Y];
        const int64_t ey = i > 0 ? std::min(g.y_overlaps[i - 1], th) : 0;
        float* row = out + (cf * H + Y) * W;
        for (int64_t X = 0; X < W; ++X) {
          const int64_t j = tile_x[X], x = off_x[X];
          const int64_t ex = j > 0 ? std::min(g.x_overlaps[j - 1], tw) : 0;
          float v = raw(i, j, y, x);
          if (y < ey) v = video_blend(raw(i - 1, j, th - ey + y, x), v, y, ey);
          if (x < ex) v = video_blend(raw(i, j - 1, y, tw - ex + x), v, x, ex);
          row[X] = v;
        }
      }
    }
  });
}

void video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                            const std::vector<float>& mean, const std::vector<float>& std, Tensor& pixels) {
  check_video_frames_to_pixels(frames, fade_from, fade_extent, mean, std, pixels);
  H3_CHECK(frames.device() == Device::CPU && pixels.device() == Device::CPU &&
               (!fade_from || fade_from->device() == Device::CPU),
           "cpu backend: video_frames_to_pixels got a tensor that is not on the CPU");
  const int64_t C = frames.dim(0), F = frames.dim(1), n = pixels.dim(1), plane = frames.dim(2) * frames.dim(3);
  const int64_t Fp = fade_from ? fade_from->dim(1) : 0;
  const int64_t E = fade_from ? std::min({fade_extent, Fp, F}) : 0;
  const float* src = frames.ptr<float>();
  const float* prev = fade_from ? fade_from->ptr<float>() : nullptr;
  float* dst = pixels.ptr<float>();
  parallel_for(0, C * n, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t cf = p0; cf < p1; ++cf) {
      const int64_t c = cf / n, f = cf % n;
      const float* a = f < E ? prev + (c * Fp + Fp - E + f) * plane : nullptr;
      const float* b = src + (c * F + f) * plane;
      float* o = dst + cf * plane;
      for (int64_t k = 0; k < plane; ++k) {
        const float v = a ? video_blend(a[k], b[k], f, E) : b[k];
        o[k] = std::clamp(v * std[c] + mean[c], 0.f, 1.f);
      }
    }
  });
}

}  // namespace h3::cpu
