// Host-side launchers of the block-sparse attention kernels (kernels_sparse_attention.cu): FastH3's VSA-H3
// (spec/fasth3.md §3–§6; backend.h's tile_means … add_pooled_attention, whose defaults are these kernels' exact
// twin). Plain pointers only, so that this header compiles with the host compiler.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace h3::cuda {

// The tiles on the device (backend.h SparseTiles): tile n is the packed rows order[begin[n] .. begin[n + 1]).
struct TileTable {
  const int32_t* order = nullptr;
  const int32_t* begin = nullptr;
  int tiles = 0, prefix_tiles = 0, tile_elems = 0;
};

// means [heads, tiles, head_dim] (f32) of the heads at channel0 of x's rows (row_stride elements apart): a float32
// sum in tile order, then one division by the tile's size — the CPU reference's operations in its order.
void launch_tile_means(In x, int64_t row_stride, int64_t channel0, int heads, int head_dim, const TileTable& t,
                       float* means, cudaStream_t s);
// scores [heads, tiles, tiles] = (Σ_c q̄·k̄ in channel order, each product and sum rounded: no fused multiply-add) /
// root, root = √head_dim as the CPU reference rounds it.
void launch_tile_scores(const float* q_means, const float* k_means, int heads, int tiles, int head_dim, float root,
                        float* scores, cudaStream_t s);
// The key-tile lists of every (head, query tile) (backend.h route_key_tiles): index [heads, tiles, tiles], count
// [heads, tiles]. Needs tiles <= kMaxRoutedTiles.
constexpr int kMaxRoutedTiles = 12288;
void launch_route_key_tiles(const float* scores, int heads, int tiles, int prefix_tiles, int keep, bool compete,
                            int32_t* index, int32_t* count, cudaStream_t s);

// Block-sparse flash attention over packed rows: q/k/v head h at q + r·row + h·head_dim (k, v likewise), out head h
// at o + r·o_row + h·head_dim; every query block of 64 rows of a query tile walks the 64-row blocks of its tile's
// listed key tiles (online softmax in the exp2 domain, P rounded to bf16 for P·V, f32 accumulation, bf16 output).
struct BlockSparseParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  Elem dtype = Elem::BF16;  // of q, k, v and o
  int64_t row = 0, o_row = 0;
  int heads = 0, head_dim = 0;
  float scale = 1.f;
  TileTable t;
  const int32_t* index = nullptr;  // [heads, tiles, tiles]
  const int32_t* count = nullptr;  // [heads, tiles]
};
constexpr int kBlockSparseMaxHeadDim = 128;
// Launches and returns null, or launches nothing and returns why it does not apply (bf16 only, head_dim <= 128,
// tile_elems a multiple of 64).
const char* launch_block_sparse_attention(const BlockSparseParams& p, cudaStream_t s);

// The routed attention on Hopper (kernels_sparse_attention_sm90.cu; the portable kernel above is its exact twin):
// bf16, head_dim 128, tile_elems a multiple of 64, key-tile lists given, on a compute capability 9.0 device. q, k, v
// are first gathered into tile order in `workspace` (block_sparse_hopper_workspace_bytes(p) bytes, 16-byte
// aligned), which must live until the launch's work is done. Launches and returns null, or launches nothing and
// returns why it does not apply; err: the backend's device error word (a stalled pipeline reports there).
size_t block_sparse_hopper_workspace_bytes(const BlockSparseParams& p);
const char* launch_block_sparse_attention_hopper(const BlockSparseParams& p, void* workspace, int* err,
                                                 cudaStream_t s);

// out[r, h] += (Σ_n softmax_n(scores[h, tile(r), :]) · v_means[h, n]) ⊙ gate[r, h], in f32, rounded once to out's
// dtype; gate and out rows gate_row / out_row elements apart.
void launch_add_pooled_attention(const float* scores, const float* v_means, In gate, int64_t gate_row, Out out,
                                 int64_t out_row, int heads, int head_dim, const TileTable& t, cudaStream_t s);

}  // namespace h3::cuda
