#include "media/frame_scale.h"

#include "media/ffmpeg_util.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace h3 {

namespace {
constexpr int kSwsFlags = SWS_LANCZOS | SWS_ACCURATE_RND | SWS_BITEXACT;
}  // namespace

Tensor scale_frames_lanczos(const Tensor& frames, int64_t width, int64_t height) {
  H3_CHECK(frames.defined() && frames.device() == Device::CPU && frames.dtype() == DType::F32 && frames.ndim() == 4 &&
               frames.dim(0) == 3,
           "frames to scale must be a host F32 [3, n, h, w] tensor, got ",
           frames.defined() ? frames.str() : "nothing");
  const int64_t n = frames.dim(1), h = frames.dim(2), w = frames.dim(3);
  H3_CHECK(width >= 1 && height >= 1 && w >= 1 && h >= 1, "cannot scale ", w, "x", h, " frames to ", width, "x",
           height);
  Tensor out = Tensor::empty({3, n, height, width}, DType::F32);
  const float* src = frames.ptr<float>();
  float* dst = out.ptr<float>();
  // One swscale context per worker (a context is not shared between threads), one plane per call.
  parallel_for(0, 3 * n, 1, [&](int64_t p0, int64_t p1) {
    const ffmpeg::SwsPtr sws(sws_getContext(static_cast<int>(w), static_cast<int>(h), AV_PIX_FMT_GRAYF32,
                                            static_cast<int>(width), static_cast<int>(height), AV_PIX_FMT_GRAYF32,
                                            kSwsFlags, nullptr, nullptr, nullptr));
    H3_CHECK(sws != nullptr, "libswscale cannot scale ", w, "x", h, " float planes to ", width, "x", height);
    for (int64_t p = p0; p < p1; ++p) {
      const uint8_t* in[4] = {reinterpret_cast<const uint8_t*>(src + p * h * w), nullptr, nullptr, nullptr};
      uint8_t* to[4] = {reinterpret_cast<uint8_t*>(dst + p * height * width), nullptr, nullptr, nullptr};
      const int in_stride[4] = {static_cast<int>(w * sizeof(float)), 0, 0, 0};
      const int to_stride[4] = {static_cast<int>(width * sizeof(float)), 0, 0, 0};
      const int rows = sws_scale(sws.get(), in, in_stride, 0, static_cast<int>(h), to, to_stride);
      H3_CHECK(rows == height, "libswscale wrote ", rows, " of ", height, " rows");
    }
  });
  return out;
}

}  // namespace h3
