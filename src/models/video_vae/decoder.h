// The MiniMax-H3 video VAE decoder (spec/video_vae.md §8–§10): a non-causal ViT run per spatial tile of each
// temporal window, with the reference's chunk plan, tile split, stitching and cross-fades, and the pipeline's latent
// de-normalization and pixel conversion around it. Computes only through the Backend op set.
//
// Precision: the residual stream, norms, residual scales, register tokens, biases and rotary tables are float32 on
// every backend (as in the reference, whose fp16 autocast promotes the residual stream to fp32); GEMM weights and
// the other activations use the backend's activation dtype (f32 on the CPU, which matches the float32 reference
// fixtures; bf16 on CUDA, where the released decode used fp16). Tile stitching and cross-fades run on the host in
// float32 with the reference's operation order (stitch.h).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "models/video_vae/geometry.h"
#include "models/video_vae/weights.h"
#include "tensor/tensor.h"

namespace h3 {

// The decoder's output space is ImageNet-normalized RGB on a [0, 1] base (§4).
constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};

struct TileOptions {
  // The reference's minimum tile size and minimum overlap in pixels, on both axes. An axis no longer than `tile`
  // is one tile; a `tile` at least as large as the canvas decodes each window untiled (spec §9.4).
  int64_t tile = kVideoVaeDefaultTile;
  int64_t tile_overlap = kVideoVaeDefaultTileOverlap;
  // Tiles of one window run through the ViT together, as independent sequences, up to this many tokens per batch
  // (at least one tile per batch). Changes memory and speed only, never the result.
  int64_t max_batch_tokens = 16384;
};

// Throws a user error naming the broken rule when `latents` [C, F, h, w] or `options` cannot be decoded by a video
// VAE of this configuration (cheap: call it before loading weights).
void validate_video_vae_decode(const VideoVaeConfig& config, const Tensor& latents, const TileOptions& options);

class VideoVaeDecoder {
 public:
  // Receives finished pixels: `frames` is [3, n, H, W] float32 in [0, 1] (host), frames [first_frame,
  // first_frame + n) of the video. Called in order; chunk c delivers frames [17c, 17c + 17), the last call the tail.
  using FrameSink = std::function<void(const Tensor& frames, int64_t first_frame)>;

  // Loads the decoder half of a diffusers `vae/` or an original `video_vae/` component.
  static std::unique_ptr<VideoVaeDecoder> load(Backend& backend, const Component& vae);
  // Builds the decoder from tensors named as in the diffusers checkpoint (shapes are checked against the config).
  static std::unique_ptr<VideoVaeDecoder> create(Backend& backend, const VideoVaeConfig& config,
                                                 const VideoVaeTensorSource& tensors);

  // latents: [latent_channels, F, h, w] normalized latents (the pipeline's space), host, any float dtype.
  // Returns the video [3, frames_for_latents(F), 16h, 16w] float32 in [0, 1] (host).
  Tensor decode(const Tensor& latents, const TileOptions& options = {});
  // The same decode, delivered chunk by chunk (bit-identical to decode()).
  void decode_streaming(const Tensor& latents, const TileOptions& options, const FrameSink& sink);

  // One ViT pass over a single tile of raw (de-normalized) latents [C, t, h, w] → ImageNet-normalized pixels
  // [3, r·t, s·h, s·w], without tiling or pixel conversion (benchmarks and tests).
  Tensor decode_tile(const Tensor& raw_latents);

  const VideoVaeConfig& config() const { return config_; }
  const VideoVaeGeometry& geometry() const { return geometry_; }
  int64_t frames_for_latents(int64_t latent_frames) const;
  void validate(const Tensor& latents, const TileOptions& options) const {
    validate_video_vae_decode(config_, latents, options);
  }

 private:
  struct Block {
    Tensor norm1, norm2;            // [D] f32
    Tensor qkv_w, qkv_b;            // [3D, D] act, [3D] f32: to_q | to_k | to_v fused
    Tensor out_w, out_b;            // [D, D], [D]
    Tensor scale1, scale2;          // [D] f32
    Tensor ff_in_w, ff_in_b;        // [2F, D], [2F]: rows [value | gate]
    Tensor ff_out_w, ff_out_b;      // [D, F], [D]
  };

  VideoVaeDecoder(Backend& backend, const VideoVaeConfig& config);
  // Runs the ViT on tiles of raw latents of one shape [C, t, h, w], as one batch of independent sequences.
  std::vector<Tensor> forward_tiles(const std::vector<Tensor>& tiles);
  // Decodes one temporal window [C, window, h, w] of raw latents into the stitched canvas [3, r·window, H, W].
  Tensor decode_window(const Tensor& window, const TileSplit& ys, const TileSplit& xs, const TileOptions& options);
  // cos / sin tables [N, rotary_dim] of one tile of t×h×w patch tokens followed by the suffix tokens.
  std::pair<Tensor, Tensor> rope_tables(int64_t t, int64_t h, int64_t w) const;

  Backend& backend_;
  VideoVaeConfig config_;
  VideoVaeGeometry geometry_;
  int64_t dim_ = 0, heads_ = 0, head_dim_ = 0, ffn_dim_ = 0, rotary_dim_ = 0, registers_ = 0, patch_features_ = 0;
  Tensor post_quant_w_, post_quant_b_, proj_in_w_, proj_in_b_, register_tokens_;
  std::vector<Block> blocks_;
  Tensor norm_out_w_, norm_out_b_, proj_out_w_, proj_out_b_;
};

}  // namespace h3
