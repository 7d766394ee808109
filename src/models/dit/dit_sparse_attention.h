// VSA-H3, FastVideo's tile-routed sparse attention for MiniMax-H3's main blocks (spec/fasth3.md): the tiling of the
// packed sequence, tile means and routing scores, the top-k block mask, and the CPU reference of the attention
// itself (float32, masked dense math) with the pooled compression branch and its gate.
//
// Rows are the packed sequence: every prefix row first (text, conditioning keyframes, audio: FastVideo's
// prefix_segments, in order), then the generated video grid (t, h, w) raster-ordered. q/k/v/gate are host float32
// [rows, heads, head_dim], after q/k RMSNorm and RoPE (spec/fasth3.md §1).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace h3 {

// The tile sizes FastVideo's VSA-H3 accepts (its VSA_H3_TILE_SHAPES) and their 3-D video tile shapes.
std::array<int64_t, 3> vsa_tile_shape(int64_t tile_elems);

// spec/fasth3.md §2: segment-pure prefix chunks, then 3-D video tiles (t-tile major, then h, then w; rows in a tile
// (t, h, w) row-major; edge tiles partial). Tile n owns slots [n·tile_elems, n·tile_elems + sizes[n]) of the padded
// buffer FastVideo scatters into.
struct VsaTiling {
  int64_t tile_elems = 0;
  int64_t num_prefix_tiles = 0, num_video_tiles = 0;
  std::vector<int64_t> tile_sizes;       // FastVideo's variable_block_sizes
  std::vector<int64_t> rows_in_order;    // packed rows in tile order (FastVideo's tile_partition_indices)
  std::vector<int64_t> slot_of_row;      // packed row -> padded slot (FastVideo's untile_combined_index)
  std::vector<int64_t> tile_of_row;      // packed row -> its tile
  int64_t num_tiles() const { return static_cast<int64_t>(tile_sizes.size()); }
  int64_t rows() const { return static_cast<int64_t>(slot_of_row.size()); }
};

// Zero-length prefix segments are dropped (as FastVideo's builder does). Throws for a tile size other than 64 or
// 256, a negative segment, or an empty grid.
VsaTiling vsa_tiling(const std::vector<int64_t>& prefix_segments, const std::array<int64_t, 3>& video_grid,
                     int64_t tile_elems);

// Video key tiles each video query tile keeps: clamp(ceil((1 − s)·V), 1, V) in double arithmetic (FastVideo's
// compute_topk). Throws unless 0 <= s < 1.
int64_t vsa_kept_video_tiles(double sparsity, int64_t num_video_tiles);

// "exempt" (default): the top video key tiles plus every prefix key tile; "compete": the prefix tiles compete in
// one top-(k_vid + P) over all key tiles (spec/fasth3.md §4).
enum class VsaMode { kExempt, kCompete };

// Tile means [heads, tiles, head_dim] of x [rows, heads, head_dim]: float32 sums in slot order divided by the tile's
// true size (FastVideo's _pool_tiles).
Tensor vsa_tile_means(const Tensor& x, const VsaTiling& tiling);

// Routing scores [heads, tiles, tiles]: q̄·k̄ in float32, then divided by √head_dim (as FastVideo's matmul / √d).
Tensor vsa_tile_scores(const Tensor& q_means, const Tensor& k_means);

// The block mask [heads, query tiles, key tiles] (1 = attend) of spec/fasth3.md §4. Rule of the ranking (ours,
// stated because torch.topk gives none): larger score first, a NaN score ranks as −inf (below every number, so it
// is chosen only when nothing else is left), and equal scores go to the lower tile index. Every query tile keeps
// exactly k_vid video tiles (exempt; compete: k_vid + P tiles in all), and prefix query tiles are all-true. At
// k_vid == V the mask is all-true.
std::vector<uint8_t> vsa_block_mask(const Tensor& scores, int64_t num_prefix_tiles, int64_t num_video_tiles,
                                    double sparsity, VsaMode mode);
// vsa_block_mask with the kept video tiles given (1 <= keep <= video tiles = scores' tiles − num_prefix_tiles).
std::vector<uint8_t> vsa_route_mask(const Tensor& scores, int64_t num_prefix_tiles, int64_t keep, VsaMode mode);

// The block mask as per-query-tile key-tile lists, the form the block-sparse kernels walk (FastVideo's
// map_to_index): for head h and query tile m, count[h·tiles + m] key tiles, ascending, in
// index[(h·tiles + m)·tiles + 0 .. count).
struct VsaKeyTileLists {
  int64_t heads = 0, tiles = 0;
  std::vector<int32_t> index;  // [heads, tiles, tiles]; entries past a row's count are -1
  std::vector<int32_t> count;  // [heads, tiles]
};
VsaKeyTileLists vsa_key_tile_lists(const std::vector<uint8_t>& mask, int64_t heads, int64_t tiles);

// Softmax attention of every row over the real rows of its query tile's selected key tiles, float32 throughout
// (max-subtracted softmax, scale 1/√head_dim): the exact twin of the block-sparse kernels.
Tensor vsa_masked_attention(const Tensor& q, const Tensor& k, const Tensor& v, const VsaTiling& tiling,
                            const std::vector<uint8_t>& mask);

// The pooled branch (spec/fasth3.md §6) added to out [rows, heads, head_dim]: o_c[h, m] = Σ_n softmax_n(S[h, m, :])
// v̄[h, n] (float32, max-subtracted), out[r] += o_c[h, tile(r)] ⊙ gate[r] (gate [rows, heads, head_dim]).
void vsa_add_pooled(Tensor& out, const Tensor& scores, const Tensor& v_means, const Tensor& gate,
                    const VsaTiling& tiling);

// First compact position (index into rows_in_order) of every tile, and one past the last.
std::vector<int64_t> vsa_tile_begins(const VsaTiling& t);

// The tiling as the backend's block-sparse attention ops read it (backend.h SparseTiles), tables on be's device.
// Defined with the ops' defaults (backend/backend_sparse_attention.cpp): the fuzz library links this file's
// reference math without the backend.
SparseTiles make_sparse_tiles(Backend& be, VsaTiling tiling);

struct VsaOptions {
  double sparsity = 0.0;
  VsaMode mode = VsaMode::kExempt;
};

// The whole VSA-H3 attention of one layer (FastVideo's MiniMaxH3VSAImpl.forward between tile and untile):
// routing (scores only when sparsity > 0 or a gate is given), the masked attention, and, with a gate, the pooled
// branch o_c[h, m] = Σ_n softmax_n(S[h, m, :]) v̄[h, n] added to every row r of tile m as o_c ⊙ gate[r] (§6).
// Returns [rows, heads, head_dim] float32.
Tensor vsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* gate, const VsaTiling& tiling,
                     const VsaOptions& options);

}  // namespace h3
