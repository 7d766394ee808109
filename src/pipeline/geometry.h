// Latent geometry of one generation (spec/sampling.md §3, spec/packing.md §4): the frame-count rule of the video
// VAE, the audio length rule, the latent shapes, and the (lossless) conversions between latent tensors and the
// transformer's rows.
#pragma once
#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace h3 {

// Model facts the geometry is built from.
constexpr int64_t kFps = 24;                   // MiniMax-H3 generates at a fixed 24 frames per second
constexpr int64_t kVaeFramesPerChunk = 17;     // pixel frames the video VAE encodes per temporal chunk
constexpr int64_t kVaeLatentsPerChunk = 5;     // latent frames such a chunk keeps
constexpr int64_t kVaeSpatialRatio = 16;       // latent pixel = 16×16 image pixels
constexpr int64_t kVideoLatentChannels = 24;   // video VAE latent channels
constexpr int64_t kAudioLatentChannels = 32;   // audio VAE latent channels
constexpr int64_t kAudioLatentsPerSecond = 40; // 32 kHz / hop 800
constexpr int64_t kAudioStereoChannels = 2;    // stereo, packed channel-major (left rows, then right rows)

// Smallest 17·n + 5 frame count ≥ frames (frames ≥ 1).
int64_t align_frame_count(int64_t frames);
bool is_aligned_frame_count(int64_t frames);
// 5·n + 2 latent frames for 17·n + 5 pixel frames (frames must be aligned).
int64_t latent_frame_count(int64_t frames);
// round(frames / 24 · 40) = round(5·frames / 3) audio latents per stereo channel (never a .5 tie).
int64_t audio_latent_count(int64_t frames);

struct LatentGeometry {
  int64_t width = 0, height = 0, frames = 0;  // pixels; frames aligned to 17·n + 5
  int64_t latent_channels = kVideoLatentChannels;
  int64_t audio_channels = kAudioLatentChannels;  // features of one audio row
  std::array<int64_t, 3> patch = {1, 2, 2};     // the transformer's (t, h, w) patch
  int64_t spatial_ratio = kVaeSpatialRatio;       // the video VAE's (image pixels per latent pixel)
  int64_t latent_frames = 0, latent_height = 0, latent_width = 0;
  int64_t audio_latents = 0;  // per stereo channel

  // Throws when the canvas does not tile into whole patches or the frame count is not 17·n + 5.
  static LatentGeometry make(int64_t width, int64_t height, int64_t frames, std::array<int64_t, 3> patch = {1, 2, 2},
                             int64_t latent_channels = kVideoLatentChannels,
                             int64_t audio_channels = kAudioLatentChannels,
                             int64_t spatial_ratio = kVaeSpatialRatio);

  int64_t patch_rows() const { return latent_height / patch[1]; }
  int64_t patch_cols() const { return latent_width / patch[2]; }
  int64_t rows_per_frame() const { return patch_rows() * patch_cols(); }  // P
  int64_t video_rows() const { return latent_frames / patch[0] * rows_per_frame(); }
  int64_t audio_rows() const { return kAudioStereoChannels * audio_latents; }
  int64_t patch_dim() const { return latent_channels * patch[0] * patch[1] * patch[2]; }
  Shape video_latent_shape() const { return {1, latent_channels, latent_frames, latent_height, latent_width}; }
  Shape audio_latent_shape() const { return {kAudioStereoChannels, audio_channels, audio_latents}; }
};

// Video latents (1, C, F, H, W) → rows [F/pt · H/ph · W/pw, C·pt·ph·pw], rows frame-major then patch row then patch
// column; features channel-major: feature c·(pt·ph·pw) + dt·(ph·pw) + dy·pw + dx (the checkpoint's order).
Tensor patchify_video(const Tensor& latents, const std::array<int64_t, 3>& patch);
// The exact inverse, back to (1, C, F, H, W) for the geometry's shape.
Tensor unpatchify_video(const Tensor& rows, const LatentGeometry& g);
// Audio latents (2, C, A) → rows (2·A, C), row ch·A + a = channel ch, latent a; and back.
Tensor audio_latents_to_rows(const Tensor& latents);
Tensor audio_rows_to_latents(const Tensor& rows, int64_t audio_latents);

}  // namespace h3
