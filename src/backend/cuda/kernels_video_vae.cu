// The video VAE's output ops on the GPU: stitching a window's decoded tiles into its canvas (unpatchify + the
// reference's tile blending, one thread per canvas sample) and the pixel conversion with the temporal cross-fade.
// The blends and the pixel affine use round-to-nearest intrinsics (no contraction into FMA), so the results are
// bit-identical to the CPU backend's on the same inputs.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_vae.h"

namespace h3::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t(132) * 64));
}

// backend.h's video_blend, operation by operation.
__device__ __forceinline__ float blend(float a, float b, int64_t p, int64_t extent) {
  const float w_b = __fdiv_rn(static_cast<float>(p), static_cast<float>(extent));
  const float w_a = __fsub_rn(1.f, w_b);
  return __fadd_rn(__fmul_rn(a, w_a), __fmul_rn(b, w_b));
}

__global__ void stitch_kernel(const StitchParams p) {
  const int64_t plane = p.H * p.W, n = p.channels * p.frames * plane;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t X = e % p.W, Y = (e / p.W) % p.H, f = (e / plane) % p.frames, c = e / (plane * p.frames);
    const int64_t fw = p.frame_begin + f, tt = fw / p.r, it = fw % p.r;
    int i = 0, j = 0;
    while (i + 1 < p.ny && p.y_starts[i + 1] <= Y) ++i;
    while (j + 1 < p.nx && p.x_starts[j + 1] <= X) ++j;
    const int64_t y = Y - p.y_starts[i], x = X - p.x_starts[j];
    auto raw = [&](int64_t ti, int64_t tj, int64_t yy, int64_t xx) {
      const int64_t token = (ti * p.nx + tj) * p.tokens + (tt * p.lh + yy / p.s) * p.lw + xx / p.s;
      return load1(p.features.p, p.features.t, token * p.P + ((c * p.r + it) * p.s + yy % p.s) * p.s + xx % p.s);
    };
    float v = raw(i, j, y, x);
    const int64_t ey = p.y_fade[i], ex = p.x_fade[j];
    if (y < ey) v = blend(raw(i - 1, j, p.tile_h - ey + y, x), v, y, ey);
    if (x < ex) v = blend(raw(i, j - 1, y, p.tile_w - ex + x), v, x, ex);
    p.canvas[e] = v;
  }
}

__global__ void pixels_kernel(const PixelParams p) {
  const int64_t n = p.channels * p.frames_out * p.plane;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = e % p.plane, f = (e / p.plane) % p.frames_out, c = e / (p.plane * p.frames_out);
    float v = p.frames[(c * p.frames_in + f) * p.plane + k];
    if (f < p.extent) v = blend(p.fade_from[(c * p.frames_fade + p.frames_fade - p.extent + f) * p.plane + k], v, f,
                                p.extent);
    v = __fadd_rn(__fmul_rn(v, p.std[c]), p.mean[c]);
    p.pixels[e] = v < 0.f ? 0.f : (1.f < v ? 1.f : v);  // std::clamp's comparisons (NaN passes through)
  }
}

}  // namespace

void launch_stitch_video_tiles(const StitchParams& p, cudaStream_t s) {
  const int64_t n = p.channels * p.frames * p.H * p.W;
  if (n == 0) return;
  stitch_kernel<<<blocks_for(n), kThreads, 0, s>>>(p);
  H3_CUDA_LAUNCH_CHECK(s, "stitch_video_tiles");
}

void launch_video_frames_to_pixels(const PixelParams& p, cudaStream_t s) {
  const int64_t n = p.channels * p.frames_out * p.plane;
  if (n == 0) return;
  pixels_kernel<<<blocks_for(n), kThreads, 0, s>>>(p);
  H3_CUDA_LAUNCH_CHECK(s, "video_frames_to_pixels");
}

}  // namespace h3::cuda
