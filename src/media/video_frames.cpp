#include "media/video_frames.h"

#include <cmath>

#include "util/error.h"

namespace h3 {

const uint8_t* Rgb8Video::frame(int f) const {
  H3_CHECK(f >= 0 && f < frames, "frame index ", f, " is out of range [0, ", frames, ")");
  return rgb.data() + static_cast<size_t>(f) * frame_bytes();
}

uint8_t unit_float_to_u8(float x) {
  if (!(x > 0.0f)) return 0;  // also NaN
  if (x >= 1.0f) return 255;
  // The product is taken in float32 as in the reference (a float32 array times the Python int 255). Adding
  // and subtracting 2^23 rounds a float in [0, 2^23) to an integer in the FPU's default mode, round to
  // nearest with ties to even, as NumPy's round does (the same result as std::nearbyint, several times
  // faster, and vectorizable).
  constexpr float kRoundingShift = 8388608.0f;  // 2^23: floats at or above it have no fraction bits
  const float v = x * 255.0f;
  return static_cast<uint8_t>((v + kRoundingShift) - kRoundingShift);
}

Rgb8Video rgb8_from_planar(const float* chw, int frames, int height, int width) {
  H3_CHECK(frames > 0 && height > 0 && width > 0, "a video needs at least one frame of at least 1x1 pixels (got ",
           frames, " frames of ", width, "x", height, ")");
  H3_CHECK(chw != nullptr, "the video pixels are missing");
  Rgb8Video v;
  v.width = width;
  v.height = height;
  v.frames = frames;
  v.rgb.resize(static_cast<size_t>(frames) * v.frame_bytes());
  const size_t plane = static_cast<size_t>(height) * width;     // one channel of one frame
  const size_t channel = static_cast<size_t>(frames) * plane;   // one channel of the whole clip
  for (int f = 0; f < frames; ++f) {
    const float* r = chw + static_cast<size_t>(f) * plane;
    const float* g = r + channel;
    const float* b = g + channel;
    uint8_t* out = v.rgb.data() + static_cast<size_t>(f) * v.frame_bytes();
    for (size_t i = 0; i < plane; ++i) {
      out[3 * i + 0] = unit_float_to_u8(r[i]);
      out[3 * i + 1] = unit_float_to_u8(g[i]);
      out[3 * i + 2] = unit_float_to_u8(b[i]);
    }
  }
  return v;
}

Rgb8Video rgb8_from_tensor(const Tensor& video) {
  H3_CHECK(video.device() == Device::CPU && video.dtype() == DType::F32, "the decoded video must be a CPU F32 tensor (got ",
           video.str(), ")");
  const bool batched = video.ndim() == 5;
  H3_CHECK((video.ndim() == 4 || (batched && video.dim(0) == 1)) && video.dim(batched ? 1 : 0) == 3,
           "the decoded video must have shape [3, F, H, W] or [1, 3, F, H, W] (got ", video.str(), ")");
  return rgb8_from_planar(video.ptr<float>(), static_cast<int>(video.dim(-3)), static_cast<int>(video.dim(-2)),
                          static_cast<int>(video.dim(-1)));
}

Rgb8Image frame_image(const Rgb8Video& video, int f) {
  const uint8_t* p = video.frame(f);
  Rgb8Image img;
  img.width = video.width;
  img.height = video.height;
  img.rgb.assign(p, p + video.frame_bytes());
  return img;
}

}  // namespace h3
