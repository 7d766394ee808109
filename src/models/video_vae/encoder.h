// The MiniMax-H3 video VAE encoder (spec/video_vae.md §6–§7) and the pipeline's conditioning encode around it
// (§7.1, spec/sampling.md §4): a causal 3-D CNN run per spatial tile of each 17-frame clip (a single frame: one clip
// of one frame), the tiles' moments stitched in latent space, the clips concatenated and the last token_drop latent
// frames dropped; then the diagonal Gaussian posterior, its sample rounded to float16 and back, normalized with the
// config's latents_mean / latents_std. Computes only through the Backend op set, in float32 on every backend (the
// reference encodes in float32 without autocast, §1); the tiles' moments come back to the host, where the stitching
// (float32, the reference's blend) and the posterior run — they are a few kilobytes per frame.
//
// Randomness. The reference samples the posterior with ε from a fresh CPU torch.Generator seeded 42 (torch's
// mt19937-based randn, §7.1). h3 does not reproduce that generator: without an injected ε the encoder draws it from
// its own stream NoiseStream(kVisualConditionSeed) (pipeline/rng.h), fresh for every condition, so two conditions of
// one shape get the same ε, as in the reference — but not the reference's values. Parity tests inject the reference's
// draw.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "media/video_frames.h"
#include "models/video_vae/geometry.h"
#include "models/video_vae/weights.h"
#include "tensor/tensor.h"

namespace h3 {

// The seed of the conditioning posterior's noise (the reference's keyframe_encode_seed), independent of the request.
constexpr uint64_t kVisualConditionSeed = 42;
// DiagonalGaussianDistribution clamps the log-variance to this range before taking exp(0.5·logvar).
constexpr float kPosteriorLogvarMin = -30.f;
constexpr float kPosteriorLogvarMax = 20.f;

// The reference's encoder tiling (tile_sample_min_* and tile_sample_min_overlap_* of AutoencoderKLMiniMaxH3), in
// pixels, the same on both axes; the pipeline encodes with the defaults. An axis no longer than `tile` is one tile.
struct EncodeTileOptions {
  int64_t tile = kVideoVaeDefaultTile;
  int64_t tile_overlap = kVideoVaeDefaultTileOverlap;
};

// The posterior of an encode, host F32 [latent_channels, latent frames, H/s, W/s].
struct VideoVaePosterior {
  Tensor mean;
  Tensor logvar;  // clamped to [kPosteriorLogvarMin, kPosteriorLogvarMax]
};

// The stages of the conditioning recipe after the encode (spec §7.1 steps 3–5), host F32, the posterior's shape.
struct VisualConditionStages {
  Tensor sampled;     // mean + exp(0.5·logvar)·ε
  Tensor rounded;     // sampled rounded to float16 (nearest, ties to even) and back
  Tensor normalized;  // (rounded − latents_mean[c]) / latents_std[c], in float32
};

// Throws a user error naming the broken rule when `frames` frames of height × width pixels cannot be encoded by a
// video VAE of this configuration with these tiles (cheap: call it before loading weights). Any frame count ≥ 1
// encodes (a stack is padded to whole clips by repeating its last frame, as the reference does; the pipeline passes
// 1 or 17n + 5 frames, or a whole reference shorter than that); sizes must be multiples of the spatial ratio s and
// at least 2s (the deepest level's reflect padding needs two samples), tiles multiples of s of at least 2s.
void validate_video_vae_encode(const VideoVaeConfig& config, int64_t frames, int64_t height, int64_t width,
                               const EncodeTileOptions& options);

// ImageNet-normalized float32 pixels [3, F, H, W] of RGB24 frames (spec §4): (u8 / 255 − mean[c]) / std[c].
Tensor imagenet_normalized_pixels(const Rgb8Video& frames);

// Steps 4–5 of the recipe on a sampled latent [C, F, h, w] (host, F32): float16 round trip and normalization.
VisualConditionStages round_and_normalize_condition(const VideoVaeConfig& config, const Tensor& sampled);
// Steps 3–5: the posterior sampled with ε (any shape of the posterior's element count, e.g. the reference's
// (1, C, F, h, w)), or with NoiseStream(kVisualConditionSeed)'s first values in (1, C, F, h, w) order when `eps` is
// null, then round_and_normalize_condition.
VisualConditionStages sample_visual_condition(const VideoVaeConfig& config, const VideoVaePosterior& posterior,
                                              const Tensor* eps);

class VideoVaeEncoder {
 public:
  // Loads the encoder half (encoder.* and quant_conv.*) of a diffusers `vae/` or an original `video_vae/` component.
  static std::unique_ptr<VideoVaeEncoder> load(Backend& backend, const Component& vae);
  // Builds the encoder from tensors named as in the diffusers checkpoint (shapes are checked against the config).
  static std::unique_ptr<VideoVaeEncoder> create(Backend& backend, const VideoVaeConfig& config,
                                                 const VideoVaeTensorSource& tensors);
  // An encoder of random weights made on the backend (models/random_weights.h; no host copy), the same for the same
  // seed: convolution kernels N(0, 1/√fan_in) with fan-in Cin·kt·kh·kw, GroupNorm weights near 1, small biases. Empty
  // latents_mean / latents_std become the identity normalization.
  static std::unique_ptr<VideoVaeEncoder> random(Backend& backend, VideoVaeConfig config, uint64_t seed);

  // pixels: ImageNet-normalized [3, F, H, W] host F32. Returns the posterior of the encode of §7.
  VideoVaePosterior encode(const Tensor& pixels, const EncodeTileOptions& options = {});
  // The conditioning encode (§7.1): RGB24 frames → normalized latents (1, latent_channels, latent_frames(F), H/s,
  // W/s), host F32. `eps` as sample_visual_condition takes it (null: the engine's own draw).
  Tensor encode_visual_condition(const Rgb8Video& frames, const Tensor* eps = nullptr,
                                 const EncodeTileOptions& options = {});
  Tensor encode_visual_condition(const Rgb8Image& image, const Tensor* eps = nullptr,
                                 const EncodeTileOptions& options = {});

  // One tile without tiling or clip chunking: ImageNet-normalized pixels [3, T, h, w] (host F32) through the
  // encoder and quant_conv → moments [2·latent_channels, T', h/s, w/s] (host F32; for tests and benchmarks).
  Tensor encode_tile(const Tensor& pixels);

  // Latent frames of an encode of `frames` frames: 1 for one frame, else tokens per clip · clips − token_drop.
  int64_t latent_frames(int64_t frames) const { return latent_frames(config_, frames); }
  static int64_t latent_frames(const VideoVaeConfig& config, int64_t frames);
  // The latent frames one clip of clip_length frames encodes to, before token_drop (the reference's
  // tokens_chunk_size: 5 for the release).
  static int64_t latent_tokens_per_clip(const VideoVaeConfig& config);
  const VideoVaeConfig& config() const { return config_; }

  // Bytes the weights occupy (float32 on every backend).
  static uint64_t weight_bytes(const VideoVaeConfig& config);
  // Bytes of device memory an encode of `frames` × height × width needs beyond the weights: the largest moment of
  // one tile's forward (the input of a ResNet block, its normalized copy or the block's output, the convolution's
  // output, and the padded copy a convolution reads), plus the tile's pixels and moments.
  static uint64_t encode_workspace_bytes(const VideoVaeConfig& config, int64_t frames, int64_t height, int64_t width,
                                         const EncodeTileOptions& options = {});

 private:
  struct Conv {
    Tensor w, b;  // [Cout, Cin, kt, kh, kw], [Cout] (F32, device)
    Conv3dGeometry g;
  };
  struct ResBlock {
    Tensor norm1_w, norm1_b, norm2_w, norm2_b;
    Conv conv1, conv2;
    bool has_shortcut = false;
    Conv shortcut;  // 1×1×1, when the block changes the channel count
  };
  struct Level {
    std::vector<ResBlock> resnets;
    bool has_downsampler = false;
    Conv downsampler;
  };

  VideoVaeEncoder(Backend& backend, const VideoVaeConfig& config);
  // Every tensor of the encoder half by diffusers name and manifest shape, as a device F32 tensor.
  using TensorMaker = std::function<Tensor(const std::string& name, const Shape& shape)>;
  static std::unique_ptr<VideoVaeEncoder> build(Backend& backend, const VideoVaeConfig& config,
                                                const TensorMaker& make);
  // One tile of one clip: pixels [3, T, th, tw] (device) → moments [2·latent_channels, T', th/s, tw/s] (device).
  Tensor forward(const Tensor& pixels);
  Tensor resnet(const ResBlock& block, const Tensor& x);
  Tensor conv(const Conv& c, const Tensor& x);
  // Moments of one clip [3, T, H, W] (host): every tile encoded, stitched in latent space (host, [2C, T', h, w]).
  Tensor encode_clip(const Tensor& clip, const EncodeTileOptions& options);

  Backend& backend_;
  VideoVaeConfig config_;
  VideoVaeGeometry geometry_;
  int64_t groups_ = 0;
  float eps_ = 0.f;
  Conv conv_in_, conv_out_, quant_conv_;
  std::vector<Level> levels_;
  Tensor norm_out_w_, norm_out_b_;
};

}  // namespace h3
