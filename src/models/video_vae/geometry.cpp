#include "models/video_vae/geometry.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace h3 {

namespace {
int64_t pos_mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

VideoVaeGeometry video_vae_geometry(const VideoVaeConfig& c) {
  VideoVaeGeometry g;
  g.spatial_ratio = c.spatial_ratio();
  g.temporal_ratio = c.temporal_ratio();
  g.clip_length = c.clip_length;
  g.token_drop = c.token_drop;
  H3_CHECK(g.spatial_ratio >= 1 && g.temporal_ratio >= 1 && g.clip_length >= 1 && g.token_drop >= 0,
           "video VAE: spatial/temporal ratios and clip_length must be >= 1 and token_drop >= 0");
  g.tokens_chunk_size = ceil_div(g.clip_length, g.temporal_ratio);
  g.token_overlap = pos_mod(-g.token_drop, g.tokens_chunk_size);
  g.frame_pre_padding = pos_mod(-g.clip_length, g.temporal_ratio);
  g.frame_overlap = std::max<int64_t>(g.token_overlap * g.temporal_ratio - g.frame_pre_padding, 0);
  return g;
}

int64_t VideoVaeGeometry::tail_frames() const {
  return has_tail() ? std::max<int64_t>(window_frames() - chunk_frames() - frame_pre_padding, 0) : 0;
}

TemporalPlan plan_temporal_chunks(const VideoVaeGeometry& g, int64_t latent_frames) {
  H3_CHECK(latent_frames >= 1, "video VAE: the latent frame count must be >= 1, got ", latent_frames);
  TemporalPlan p;
  p.latent_frames = latent_frames;
  const int64_t num_tokens = latent_frames + g.token_drop;
  p.pad_latents = pos_mod(-num_tokens, g.tokens_chunk_size);
  p.num_chunks = (num_tokens + p.pad_latents) / g.tokens_chunk_size - (g.has_tail() ? 1 : 0);
  if (p.num_chunks < 1) {  // FastVideo's extension: T < 3 in the release
    p.pad_latents += g.tokens_chunk_size;
    p.num_chunks = 1;
  }
  // Every window keeps frames [pre_padding, chunk_frames); the last window also keeps its tail (the first frames of
  // the next clip slot), which is what token_drop left behind.
  p.total_frames = p.num_chunks * g.main_frames() + g.tail_frames();
  // A padded latent that opens a clip covers clip_length mod r frames (when non-zero), any other r frames.
  const int64_t intra_tail = g.clip_length % g.temporal_ratio;
  for (int64_t k = 0; k < p.pad_latents; ++k)
    p.total_frames -= (intra_tail && (latent_frames + k) % g.tokens_chunk_size == 0) ? intra_tail : g.temporal_ratio;
  H3_CHECK(p.total_frames >= 1, "video VAE: the decode plan for ", latent_frames,
           " latent frames yields no frame; clip_length/token_drop are inconsistent");
  return p;
}

TileSplit split_tiles(int64_t length, int64_t tile, int64_t min_overlap, int64_t step) {
  H3_CHECK(length >= 1 && tile >= 1 && step >= 1 && min_overlap >= 0 && min_overlap < tile,
           "split_tiles: bad arguments length ", length, ", tile ", tile, ", min_overlap ", min_overlap, ", step ",
           step);
  TileSplit s;
  if (tile >= length) {
    s.starts = {0};
    s.length = length;
    return s;
  }
  int64_t n = ceil_div(length, tile);
  while (n * tile - (n - 1) * min_overlap < length) ++n;
  s.overlaps.assign(n - 1, min_overlap);
  const int64_t slack = n * tile - (n - 1) * min_overlap - length;
  for (int64_t i = 0; i < slack / step; ++i) s.overlaps[i % (n - 1)] += step;
  s.starts = {0};
  for (int64_t i = 0; i + 1 < n; ++i) s.starts.push_back(s.starts.back() + tile - s.overlaps[i]);
  s.length = tile;
  return s;
}

}  // namespace h3
