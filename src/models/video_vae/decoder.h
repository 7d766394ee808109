// The MiniMax-H3 video VAE decoder (spec/video_vae.md §8–§10): a non-causal ViT run per spatial tile of each
// temporal window, with the reference's chunk plan, tile split, stitching and cross-fades, and the pipeline's latent
// de-normalization and pixel conversion around it. Computes only through the Backend op set; on a GPU every step
// from the window's latents to the finished pixels stays on the device (tiles gathered by row tables, stitched and
// cross-faded by the backend's video ops), the tiles of several consecutive windows share the ViT's batches when a
// window alone would not fill one (VideoVaeBatchPlan), and each chunk's pixels come back by an asynchronous download
// that overlaps the next group's work.
//
// Precision. On a backend whose activations are 16-bit the decoder's GEMMs (weights, biases, inputs and outputs)
// and attention run in float16 — what the reference's fp16 autocast does (§10) — with norms, layer scales, register
// tokens, rotary tables and the residual stream in float32; H3_VIDEO_VAE_BF16=1 selects bfloat16 instead (the backend's default
// activation dtype; 3 fewer mantissa bits, a wider range). Stitching and cross-fades run in float32 (the reference:
// float16). On the CPU backend everything is float32.
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
  // Tiles run through the ViT together, as independent sequences, up to this many tokens per batch (at least one
  // tile per batch); when whole windows fit, the tiles of several consecutive windows share a batch (see
  // VideoVaeBatchPlan). Changes memory and speed only, never the result.
  int64_t max_batch_tokens = 16384;
};

// How a decode splits its ViT work. Windows (spec §9.1) are decoded in groups of consecutive windows: each group's
// tiles run in batches of up to tiles_per_batch tiles (a batch may hold tiles of several windows), then its windows
// are stitched and emitted in order. A group holds as many whole windows as one batch of max_batch_tokens does (at
// least one, at most every window), so a small canvas fills its batches as a large one does; a window of more tiles
// than a batch holds is a group of its own, decoded in several batches.
struct VideoVaeBatchPlan {
  int64_t windows = 0;            // temporal decode windows
  int64_t tiles_per_window = 0;   // spatial tiles of a window
  int64_t tile_sequence = 0;      // tokens of one tile's sequence: patches, registers and the zero token
  int64_t windows_per_group = 0;
  int64_t tiles_per_batch = 0;    // at most the tiles of a group
  int64_t groups() const { return (windows + windows_per_group - 1) / windows_per_group; }
  int64_t rows_per_batch() const { return tiles_per_batch * tile_sequence; }
};
VideoVaeBatchPlan plan_video_vae_batches(const VideoVaeConfig& config, int64_t latent_frames, int64_t latent_h,
                                         int64_t latent_w, const TileOptions& options);

// The batch size a backend runs at: every tile of a released-size window in one batch on a GPU (28 tiles of 1,797
// tokens at 1344×768); on the CPU batches small enough that a cancel waits at most a fraction of a second.
int64_t default_video_vae_batch_tokens(const Backend& backend);

// The dtype the decoder's GEMMs and attention run in on `backend` (see Precision above).
DType video_vae_gemm_dtype(const Backend& backend);

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
  // A decoder of random weights made on the backend (models/random_weights.h; no host copy): GEMM weights
  // N(0, 1/√fan_in), norms near 1, small biases, layer scales N(0, 0.1), register tokens N(0, 1). Empty
  // latents_mean / latents_std in `config` become 0 / 1.
  static std::unique_ptr<VideoVaeDecoder> random(Backend& backend, VideoVaeConfig config, uint64_t seed);

  // latents: [latent_channels, F, h, w] normalized latents (the pipeline's space), host, any float dtype.
  // Returns the video [3, frames_for_latents(F), 16h, 16w] float32 in [0, 1] (host).
  Tensor decode(const Tensor& latents, const TileOptions& options = {});
  // The same decode, delivered chunk by chunk (bit-identical to decode()).
  void decode_streaming(const Tensor& latents, const TileOptions& options, const FrameSink& sink);

  // One ViT pass over a single tile of raw (de-normalized) latents [C, t, h, w] → ImageNet-normalized pixels
  // [3, r·t, s·h, s·w], without tiling or pixel conversion (benchmarks and tests).
  Tensor decode_tile(const Tensor& raw_latents);

  // Bytes of device memory the decode of a [C, F, h, w] latent tensor needs beyond the weights (activations of one
  // batch of tiles, a group's latent rows and features, the canvases, the pixels in flight), for memory planning.
  static uint64_t decode_workspace_bytes(const VideoVaeConfig& config, DType gemm_dtype, int64_t latent_frames,
                                         int64_t latent_h, int64_t latent_w, const TileOptions& options);
  // Bytes the weights occupy on a backend whose GEMM dtype is `gemm_dtype`.
  static uint64_t weight_bytes(const VideoVaeConfig& config, DType gemm_dtype);

  const VideoVaeConfig& config() const { return config_; }
  const VideoVaeGeometry& geometry() const { return geometry_; }
  int64_t frames_for_latents(int64_t latent_frames) const;
  // Tiles the cached device row tables cover: the largest batch seen of the most recent tile shape (0: none yet).
  int64_t cached_table_tiles() const { return tables_tiles_; }
  void validate(const Tensor& latents, const TileOptions& options) const {
    validate_video_vae_decode(config_, latents, options);
  }

 private:
  struct Block {
    Tensor norm1, norm2;            // [D] f32
    Tensor qkv_w, qkv_b;            // [3D, D], [3D] (GEMM dtype): to_q | to_k | to_v fused
    Tensor out_w, out_b;            // [D, D], [D]
    Tensor scale1, scale2;          // [D] f32
    Tensor ff_in_w, ff_in_b;        // [2F, D], [2F]: rows [value | gate]
    Tensor ff_out_w, ff_out_b;      // [D, F], [D]
  };
  // Device row tables of one batch (B tiles of t×h×w latents): views into the cached tables.
  struct BatchTables {
    Tensor patch_rows;      // I32 [B·n_patch]: where each tile's patch tokens sit in the packed sequence
    Tensor register_src;    // I32 [B·registers]: which register token
    Tensor register_rows;   // I32 [B·registers]: where it sits
    Tensor cos, sin;        // F32 [B·n, rotary_dim]
    std::vector<int64_t> segments;
  };
  // A tensor by diffusers name(s) — several names: their rows stacked in order — in `shape` and dtype `dt`.
  using WeightMaker = std::function<Tensor(const std::vector<std::string>& names, const Shape& shape, DType dt)>;

  VideoVaeDecoder(Backend& backend, const VideoVaeConfig& config);
  static std::unique_ptr<VideoVaeDecoder> build(Backend& backend, const VideoVaeConfig& config,
                                                const WeightMaker& make);
  // The tables of B tiles of t×h×w (views; the cache grows or is replaced as needed) and their construction.
  BatchTables batch_tables(int64_t B, int64_t t, int64_t h, int64_t w);
  BatchTables make_batch_tables(int64_t B, int64_t t, int64_t h, int64_t w) const;
  // The ViT on B tiles of one shape: tokens [B·t·h·w, C] (GEMM dtype, device; tile-major, tokens row-major) →
  // proj_out features [B·t·h·w, out_channels·r·s·s] written into `features` (GEMM dtype, device).
  void forward_tiles(const Tensor& tokens, int64_t B, int64_t t, int64_t h, int64_t w, Tensor& features);
  // The ViT on tiles of the grid's shape, tiles_per_batch at a time: rows [R, C] (raw latents channels-last,
  // device), tile_rows [tiles·T·th·tw] (I32: the row of `rows` under every tile token, tile-major) → features
  // [tiles·T·th·tw, P] (device), tile-major.
  Tensor decode_tiles(const Tensor& rows, const Tensor& tile_rows, const VideoTileGrid& grid, int64_t tiles_per_batch);
  // De-normalized latents [C, T + pad, h, w] (f32, host): z = latent·std + mean per channel, the last frame repeated
  // `pad` times.
  Tensor denormalized_latents(const Tensor& latents, int64_t pad) const;
  // cos / sin tables [N, rotary_dim] of one tile of t×h×w patch tokens followed by the suffix tokens.
  std::pair<Tensor, Tensor> rope_tables(int64_t t, int64_t h, int64_t w) const;

  Backend& backend_;
  VideoVaeConfig config_;
  VideoVaeGeometry geometry_;
  DType gemm_dt_;
  int64_t dim_ = 0, heads_ = 0, head_dim_ = 0, ffn_dim_ = 0, rotary_dim_ = 0, registers_ = 0, patch_features_ = 0;
  Tensor post_quant_w_, post_quant_b_, proj_in_w_, proj_in_b_, register_tokens_;
  std::vector<Block> blocks_;
  Tensor norm_out_w_, norm_out_b_, proj_out_w_, proj_out_b_;
  std::vector<float> pixel_mean_, pixel_std_;
  // The row tables of the most recent tile shape (t, h, w) for tables_tiles_ tiles. Tile b's rows never depend on
  // the batch size, so a batch of fewer tiles takes their prefix; a new tile shape or a larger batch rebuilds them.
  // (A decode has one tile shape, so one set serves all its batches.)
  std::array<int64_t, 3> tables_shape_{};
  int64_t tables_tiles_ = 0;
  BatchTables tables_;
};

}  // namespace h3
