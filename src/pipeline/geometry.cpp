#include "pipeline/geometry.h"

#include <cstring>

namespace h3 {

int64_t align_frame_count(int64_t frames) {
  H3_CHECK(frames >= 1, "the frame count must be positive, got ", frames);
  if (frames <= kVaeLatentsPerChunk) return kVaeLatentsPerChunk;
  const int64_t chunks = (frames - kVaeLatentsPerChunk + kVaeFramesPerChunk - 1) / kVaeFramesPerChunk;
  return chunks * kVaeFramesPerChunk + kVaeLatentsPerChunk;
}

bool is_aligned_frame_count(int64_t frames) {
  return frames >= kVaeLatentsPerChunk && (frames - kVaeLatentsPerChunk) % kVaeFramesPerChunk == 0;
}

int64_t latent_frame_count(int64_t frames) {
  H3_CHECK(is_aligned_frame_count(frames), "the frame count must be of the form 17·n + 5, got ", frames);
  // The encoder pads to whole 17-frame chunks (5 latents each) and drops the 3 trailing latents.
  return (frames - kVaeLatentsPerChunk) / kVaeFramesPerChunk * kVaeLatentsPerChunk + 2;
}

int64_t audio_latent_count(int64_t frames) {
  H3_CHECK(frames >= 1, "the frame count must be positive, got ", frames);
  // frames/24 s · 40 latents/s = 5·frames/3; its fraction is 0, 1/3 or 2/3, so round() is (5·frames + 1) / 3.
  static_assert(kAudioLatentsPerSecond * 3 == kFps * 5, "the audio/video clock ratio is 5/3");
  return (5 * frames + 1) / 3;
}

LatentGeometry LatentGeometry::make(int64_t width, int64_t height, int64_t frames, std::array<int64_t, 3> patch,
                                    int64_t latent_channels, int64_t audio_channels, int64_t spatial_ratio) {
  H3_CHECK(spatial_ratio >= 1, "the VAE's spatial ratio must be positive, got ", spatial_ratio);
  H3_CHECK(patch[0] >= 1 && patch[1] >= 1 && patch[2] >= 1, "the patch size must be positive, got (", patch[0], ", ",
           patch[1], ", ", patch[2], ")");
  const int64_t multiple_h = spatial_ratio * patch[1], multiple_w = spatial_ratio * patch[2];
  H3_CHECK(height >= multiple_h && height % multiple_h == 0, "the height must be a positive multiple of ", multiple_h,
           " (VAE ÷", spatial_ratio, " × patch ", patch[1], "), got ", height);
  H3_CHECK(width >= multiple_w && width % multiple_w == 0, "the width must be a positive multiple of ", multiple_w,
           " (VAE ÷", spatial_ratio, " × patch ", patch[2], "), got ", width);
  H3_CHECK(latent_channels >= 1 && audio_channels >= 1, "latent channel counts must be positive");
  LatentGeometry g;
  g.width = width;
  g.height = height;
  g.frames = frames;
  g.patch = patch;
  g.latent_channels = latent_channels;
  g.audio_channels = audio_channels;
  g.latent_frames = latent_frame_count(frames);
  H3_CHECK(g.latent_frames % patch[0] == 0, g.latent_frames, " latent frames do not tile into temporal patches of ",
           patch[0]);
  g.spatial_ratio = spatial_ratio;
  g.latent_height = height / spatial_ratio;
  g.latent_width = width / spatial_ratio;
  g.audio_latents = audio_latent_count(frames);
  return g;
}

namespace {

// Visits every latent element with its (row, feature) coordinates; `copy(latent_offset, row_offset)` moves one value.
template <typename Copy>
void for_each_patch_element(int64_t C, int64_t F, int64_t H, int64_t W, const std::array<int64_t, 3>& p, Copy copy) {
  const int64_t pt = p[0], ph = p[1], pw = p[2];
  const int64_t Fp = F / pt, Hp = H / ph, Wp = W / pw;
  const int64_t patch_dim = C * pt * ph * pw;
  for (int64_t f = 0; f < Fp; ++f)
    for (int64_t i = 0; i < Hp; ++i)
      for (int64_t j = 0; j < Wp; ++j) {
        const int64_t row = (f * Hp + i) * Wp + j;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t dt = 0; dt < pt; ++dt)
            for (int64_t dy = 0; dy < ph; ++dy)
              for (int64_t dx = 0; dx < pw; ++dx) {
                const int64_t feature = ((c * pt + dt) * ph + dy) * pw + dx;
                const int64_t latent = ((c * F + f * pt + dt) * H + i * ph + dy) * W + j * pw + dx;
                copy(latent, row * patch_dim + feature);
              }
      }
}

}  // namespace

Tensor patchify_video(const Tensor& latents, const std::array<int64_t, 3>& patch) {
  H3_CHECK(latents.ndim() == 5 && latents.dim(0) == 1, "video latents must have shape (1, C, F, H, W), got ",
           latents.str());
  const Tensor x = latents.dtype() == DType::F32 ? latents : latents.to_f32();
  const int64_t C = x.dim(1), F = x.dim(2), H = x.dim(3), W = x.dim(4);
  H3_CHECK(F % patch[0] == 0 && H % patch[1] == 0 && W % patch[2] == 0, "video latents ", x.str(),
           " do not tile into patches of (", patch[0], ", ", patch[1], ", ", patch[2], ")");
  const int64_t patch_dim = C * patch[0] * patch[1] * patch[2];
  Tensor rows = Tensor::empty({x.numel() / patch_dim, patch_dim}, DType::F32);
  const float* src = x.ptr<float>();
  float* dst = rows.ptr<float>();
  for_each_patch_element(C, F, H, W, patch, [&](int64_t l, int64_t r) { dst[r] = src[l]; });
  return rows;
}

Tensor unpatchify_video(const Tensor& rows, const LatentGeometry& g) {
  H3_CHECK(rows.ndim() == 2 && rows.dim(0) == g.video_rows() && rows.dim(1) == g.patch_dim(),
           "video rows must have shape [", g.video_rows(), ", ", g.patch_dim(), "], got ", rows.str());
  const Tensor x = rows.dtype() == DType::F32 ? rows : rows.to_f32();
  Tensor latents = Tensor::empty(g.video_latent_shape(), DType::F32);
  const float* src = x.ptr<float>();
  float* dst = latents.ptr<float>();
  for_each_patch_element(g.latent_channels, g.latent_frames, g.latent_height, g.latent_width, g.patch,
                         [&](int64_t l, int64_t r) { dst[l] = src[r]; });
  return latents;
}

Tensor audio_latents_to_rows(const Tensor& latents) {
  H3_CHECK(latents.ndim() == 3 && latents.dim(0) == kAudioStereoChannels,
           "audio latents must have shape (2, C, A), got ", latents.str());
  const Tensor x = latents.dtype() == DType::F32 ? latents : latents.to_f32();
  const int64_t S = x.dim(0), C = x.dim(1), A = x.dim(2);
  Tensor rows = Tensor::empty({S * A, C}, DType::F32);
  const float* src = x.ptr<float>();
  float* dst = rows.ptr<float>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t a = 0; a < A; ++a) dst[(s * A + a) * C + c] = src[(s * C + c) * A + a];
  return rows;
}

Tensor audio_rows_to_latents(const Tensor& rows, int64_t audio_latents) {
  H3_CHECK(rows.ndim() == 2 && audio_latents >= 1 && rows.dim(0) == kAudioStereoChannels * audio_latents,
           "audio rows must have shape [", kAudioStereoChannels * audio_latents, ", C], got ", rows.str());
  const Tensor x = rows.dtype() == DType::F32 ? rows : rows.to_f32();
  const int64_t S = kAudioStereoChannels, C = x.dim(1), A = audio_latents;
  Tensor latents = Tensor::empty({S, C, A}, DType::F32);
  const float* src = x.ptr<float>();
  float* dst = latents.ptr<float>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t a = 0; a < A; ++a) dst[(s * C + c) * A + a] = src[(s * A + a) * C + c];
  return latents;
}

}  // namespace h3
