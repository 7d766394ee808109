// Host-side launchers of the CUDA kernels of the two VAEs' backend ops (definitions in backend/backend.h): the
// audio VAE's 1-D signal ops in float32 (kernels_audio_vae.cu), the video VAE encoder's padding, f32 convolution and
// per-frame group norm (kernels_video_encoder.cu), and the video VAE's stitching and pixel conversion
// (kernels_video_vae.cu). Plain pointers, so this header compiles with the host compiler too.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda {

// ---- audio VAE (float32) ----
// Shapes as check_conv1d / check_conv_transpose1d / check_snake_beta_aa accept them. `tiled` false runs the direct
// one-output-per-thread kernels (the exact twins); the tiled kernels also fall back to them for kernel extents their
// shared memory cannot hold.
void launch_conv1d(const float* x, const float* w, const float* bias, float* y, int64_t B, int64_t Cin, int64_t T,
                   int64_t Cout, int64_t To, int64_t k, int64_t stride, int64_t padding, int64_t dilation, bool tiled,
                   cudaStream_t s);
void launch_conv_transpose1d(const float* x, const float* w, const float* bias, float* y, int64_t B, int64_t Cin,
                             int64_t T, int64_t Cout, int64_t To, int64_t k, int64_t stride, int64_t padding,
                             bool tiled, cudaStream_t s);
// Upsample ×2 (transposed FIR, replicate padding) → SnakeBeta → downsample ×2 (FIR, replicate padding) in one pass
// per tile of each row; rows = B·C, channel of row r = r mod C.
void launch_snake_beta_aa(const float* x, const float* log_alpha, const float* log_beta, const float* up_filter,
                          int64_t up_taps, const float* down_filter, int64_t down_taps, float* y, int64_t rows,
                          int64_t C, int64_t T, cudaStream_t s);
constexpr int64_t kSnakeMaxTaps = 1024;
constexpr int64_t kSnakeRatio = 2;  // backend.h's kSnakeAaRatio (checked where both are visible)
void launch_divide(float* x, int64_t n, float divisor, cudaStream_t s);

// ---- video VAE encoder (float32; kernels_video_encoder.cu) ----
// backend.h's PadMode, by value (this header stays free of backend.h).
enum class Pad3dMode : int { Zeros = 0, Reflect = 1, Replicate = 2 };
// xp [C, front + T, top + H + bottom, left + W + right] = x [C, T, H, W] padded as conv3d's definition reads:
// spatially by `mode`, then `front` zero frames.
struct Pad3dParams {
  const float* x = nullptr;
  float* xp = nullptr;
  int64_t C = 0, T = 0, H = 0, W = 0;
  int64_t front = 0, top = 0, left = 0;
  int64_t Tp = 0, Hp = 0, Wp = 0;
  Pad3dMode mode = Pad3dMode::Zeros;
};
void launch_pad3d(const Pad3dParams& p, cudaStream_t s);
// The unpadded strided correlation y [Cout, To, Ho, Wo] = bias + w [Cout, Cin, kt, kh, kw] ⋆ xp [Cin, Tp, Hp, Wp],
// one output per thread, float32 (the twin of cuDNN's TF32 convolution, and its fallback).
struct Conv3dParams {
  const float* xp = nullptr;
  const float* w = nullptr;
  const float* bias = nullptr;  // may be null
  float* y = nullptr;
  int64_t Cin = 0, Tp = 0, Hp = 0, Wp = 0, Cout = 0, To = 0, Ho = 0, Wo = 0;
  int64_t kt = 0, kh = 0, kw = 0, st = 1, sh = 1, sw = 1;
};
void launch_conv3d(const Conv3dParams& p, cudaStream_t s);
// The keyframe path of conv3d (a single frame through a causal convolution: only the kernel's last frame meets
// data, the others the causal zero frames):
// - w_slice = frame `t` of w [Cout, Cin, kt, kh, kw] as [Cout, Cin, kh, kw], or as [Cout, kh, kw, Cin] when nhwc;
void launch_conv3d_weight_slice(const float* w, float* w_slice, int64_t Cout, int64_t Cin, int64_t kt, int64_t kh,
                                int64_t kw, int64_t t, bool nhwc, cudaStream_t s);
// - xp [Hp, Wp, C] (channels-last) = frame 0 of x [C, T, H, W] padded spatially by `mode` (Pad3dParams' fields;
//   front and Tp unused);
void launch_pad2d_nhwc(const Pad3dParams& p, cudaStream_t s);
// - y [C, P] = x [P, C] transposed, + bias[c] (bias may be null).
void launch_nhwc_to_nchw(const float* x, const float* bias, float* y, int64_t P, int64_t C, cudaStream_t s);
// Per-frame group norm (+ SiLU) of x [C, T, plane] into y (may be x): one block per (group, frame), float64 up to
// the float32 output like the CPU backend's.
void launch_frame_group_norm(const float* x, const float* weight, const float* bias, float* y, int64_t C, int64_t T,
                             int64_t plane, int64_t groups, float eps, bool silu, cudaStream_t s);

// The same over `chunks` blocks per (group, frame) (three launches: sums, centred squares, the normalization; the
// partial sums added in chunk order, deterministic): for few groups × frames (a keyframe's 32 blocks would leave
// most SMs idle). partials: 2 · groups · T · chunks doubles of scratch.
constexpr int64_t kSplitGroupNormMaxChunks = 64;
int split_group_norm_chunks(int64_t C, int64_t T, int64_t plane, int64_t groups);
void launch_split_group_norm(const float* x, const float* weight, const float* bias, float* y, int64_t C, int64_t T,
                             int64_t plane, int64_t groups, float eps, bool silu, int chunks, double* partials,
                             cudaStream_t s);

// ---- video VAE ----
constexpr int kStitchMaxTiles = 128;  // per axis
struct StitchParams {
  In features;
  float* canvas = nullptr;
  int64_t channels = 0, r = 0, s = 0, lh = 0, lw = 0, tokens = 0, P = 0;
  int64_t tile_h = 0, tile_w = 0, H = 0, W = 0, frame_begin = 0, frames = 0;
  int ny = 0, nx = 0;
  // Pixel coordinates (int32 keeps the parameter block under 4 KB).
  int32_t y_starts[kStitchMaxTiles] = {}, x_starts[kStitchMaxTiles] = {};
  int32_t y_fade[kStitchMaxTiles] = {}, x_fade[kStitchMaxTiles] = {};  // blend extent E of tile i (0 for the first)
};
void launch_stitch_video_tiles(const StitchParams& p, cudaStream_t s);

constexpr int kPixelMaxChannels = 8;
struct PixelParams {
  const float* frames = nullptr;
  const float* fade_from = nullptr;  // may be null
  float* pixels = nullptr;
  int64_t channels = 0, frames_in = 0, frames_fade = 0, frames_out = 0, plane = 0, extent = 0;
  float mean[kPixelMaxChannels] = {}, std[kPixelMaxChannels] = {};
};
void launch_video_frames_to_pixels(const PixelParams& p, cudaStream_t s);

}  // namespace h3::cuda
