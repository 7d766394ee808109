// Decode geometry of the MiniMax-H3 video VAE (spec/video_vae.md §2 derived constants, §9.1, §9.2): the temporal
// chunk plan that mirrors the encoder's clip chunking, and the spatial tile split. Pure integer arithmetic, no
// tensors, so the tables of the spec can be checked exactly.
#pragma once
#include <cstdint>
#include <vector>

#include "io/config.h"

namespace h3 {

// The reference's tiling defaults (pixels, both axes): tile_sample_min_{height,width} and
// tile_sample_min_overlap_{height,width} of AutoencoderKLMiniMaxH3.
constexpr int64_t kVideoVaeDefaultTile = 256;
constexpr int64_t kVideoVaeDefaultTileOverlap = 64;

// Constants derived from the configuration (values for the release in comments).
struct VideoVaeGeometry {
  int64_t spatial_ratio = 0;      // s = 16: pixels per latent along H and W
  int64_t temporal_ratio = 0;     // r = 4: pixel frames per latent frame inside a clip
  int64_t clip_length = 0;        // 17 pixel frames per encoder clip
  int64_t token_drop = 0;         // 3 latents dropped once at the end of an encode
  int64_t tokens_chunk_size = 0;  // 5 = ceil(clip_length / r): latents per clip
  int64_t token_overlap = 0;      // 2 = (-token_drop) mod tokens_chunk_size
  int64_t frame_pre_padding = 0;  // 3 = (-clip_length) mod r
  int64_t frame_overlap = 0;      // 5 = max(token_overlap·r − frame_pre_padding, 0)

  int64_t window_latents() const { return tokens_chunk_size + token_overlap; }  // 7 latents per decode window
  int64_t chunk_frames() const { return tokens_chunk_size * temporal_ratio; }    // 20 decoded frames per clip slot
  int64_t window_frames() const { return window_latents() * temporal_ratio; }    // 28 frames out of a window
  // Frames of a window kept for this chunk: [frame_pre_padding, chunk_frames) (17), and, when token_drop > 0, the
  // tail [chunk_frames + frame_pre_padding, window_frames) (5) that starts the next clip.
  int64_t main_frames() const { return chunk_frames() - frame_pre_padding; }
  bool has_tail() const { return token_drop > 0; }
  int64_t tail_frames() const;
};
VideoVaeGeometry video_vae_geometry(const VideoVaeConfig& c);

// Temporal chunk plan for T latent frames (§9.1, with FastVideo's extension for short inputs: when the reference
// would plan no chunk, one more clip of padding is added).
struct TemporalPlan {
  int64_t latent_frames = 0;  // T
  int64_t pad_latents = 0;    // P copies of the last latent frame appended before decoding
  int64_t num_chunks = 0;     // C decode windows; window c starts at latent c·tokens_chunk_size
  int64_t total_frames = 0;   // pixel frames after trimming the frames produced by the padding
};
TemporalPlan plan_temporal_chunks(const VideoVaeGeometry& g, int64_t latent_frames);

// One axis of the spatial tiling (§9.2), in pixels: tiles of `length` pixels each (the whole axis when it fits in
// one tile), starting at `starts`, consecutive tiles overlapping by `overlaps[i]` (between tile i and i+1).
struct TileSplit {
  std::vector<int64_t> starts;
  int64_t length = 0;
  std::vector<int64_t> overlaps;
};
// `step` is the spatial compression ratio: the slack is spread over the overlaps in whole steps, keeping every tile
// latent-aligned.
TileSplit split_tiles(int64_t length, int64_t tile, int64_t min_overlap, int64_t step);

}  // namespace h3
