// The block-sparse attention of FastH3's VSA-H3 for Hopper (sm_90a; issue 23; spec/fasth3.md §5): the semantics of
// kernels_sparse_attention.cu's portable kernel (its exact twin, H3_DISABLE_SPARSE_HOPPER=1) on the schedule of our
// dense Hopper kernel (kernels_attention_sm90.cu: TMA loads into an mbarrier ring, wgmma, S_j = Q·K_jᵀ overlapping
// P_{j−1}·V_{j−1} within a warpgroup), with its GEMMs and online softmax (sm90_attention.cuh).
//
// - Gather: TMA boxes address rows by coordinates, not through an index, so a first kernel copies q, k and v into
//   tile order: tile n's packed rows order[begin[n] ..) become rows n·tile_elems .. of a workspace with the layout
//   of the packed q|k|v rows, and the rows past a short tile's end (tiles shorter than tile_elems at grid edges and
//   at a prefix segment's end) are zeros. Every 64-row block of a tile is then one box of 64 rows per 64 channels.
// - Attention: one CTA per two 64-row query blocks of one head and a producer warpgroup. The two consumer
//   warpgroups work independently (their blocks may belong to different query tiles, with different key-tile
//   lists): each has its own Q, its own three-stage K/V ring of 64-key blocks and its own producer thread (lane 0
//   of producer warp c), which walks the query tile's list index[h, m, 0 .. count) and loads, for each listed key
//   tile, its 64-row blocks that hold keys (ceil(size / 64) of them). With each block the producer stores in shared
//   memory how many of its rows are keys and whether it is the last: the consumer masks the rest to −∞ and stops
//   after the last. No ping-pong between the consumers: with 64-key blocks and three stages per consumer the
//   shared memory holds no more (224 KiB), and their lists differ in length.
// - Output: each consumer's O / row sum, rounded to bf16, staged in its Q rows and stored through `order` to the
//   packed rows (16-byte stores of whole rows), so that nothing is scattered afterwards.
//
// Arithmetic: the dense kernel's (f32 S and softmax in the log2 domain, P rounded to bf16 for P·V, f32 O), over
// exactly the listed keys: the portable kernel's result up to the order of f32 sums and ex2.approx.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_sparse_attention.h"
#include "backend/cuda/sm90_attention.cuh"
#include "backend/cuda/sm90_primitives.cuh"

namespace h3::cuda {

namespace {

using namespace sm90;

constexpr int kDh = 128;                   // head_dim: two boxes of 64 channels
constexpr int kBlock = 64;                 // query rows per consumer, keys per K/V block
constexpr int kConsumers = 2;
constexpr int kStages = 3;                 // K/V ring depth per consumer
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kProducerRegs = 56, kConsumerRegs = 224;  // the producer threads walk key-tile lists
static_assert((kProducerRegs + kConsumers * kConsumerRegs) * 128 <= 65536, "register budget");

// What gemm_qk / gemm_pv (sm90_attention.cuh) read of a tiling: 64-row boxes of 64 channels, two per row.
struct SparseTiling {
  static constexpr int kBoxes = kDh / kBoxCols;
  static constexpr uint32_t kBoxBytes = kBlock * kRowBytes;   // 64 keys x 64 channels: 8 KiB
  static constexpr uint32_t kQBoxBytes = kBlock * kRowBytes;  // 64 query rows x 64 channels
};
constexpr uint32_t kBlockBytes = SparseTiling::kBoxes * SparseTiling::kBoxBytes;  // 64 rows x 128 channels: 16 KiB

// Per consumer: Q, the K ring, the V ring (from a 1 KiB-aligned base, consumer c at c·kRegionBytes); then every
// consumer's mbarriers, the blocks' key counts, and the stalled flag.
constexpr uint32_t kQOff = 0, kKOff = kBlockBytes, kVOff = kKOff + kStages * kBlockBytes;
constexpr uint32_t kRegionBytes = kVOff + kStages * kBlockBytes;
constexpr int kQFull = 0, kKFull = 1, kKEmpty = kKFull + kStages, kVFull = kKEmpty + kStages,
              kVEmpty = kVFull + kStages, kBarriers = kVEmpty + kStages;  // per consumer
constexpr uint32_t kBarOff = kConsumers * kRegionBytes;
constexpr uint32_t kInfoOff = kBarOff + kConsumers * kBarriers * 8;  // int per (consumer, stage)
constexpr uint32_t kStalledOff = kInfoOff + kConsumers * kStages * 4;
constexpr size_t kSmemBytes = kStalledOff + 16 + 1024;  // + slack to align the base
static_assert(kSmemBytes <= 227 * 1024, "shared memory per CTA");
constexpr int kLastBlock = 1 << 8;  // in a block's info word, above its key count (1 .. 64)
constexpr uint32_t kReleaseArrivals = 4;  // lane 0 of each of the consumer's warps
constexpr int kEpilogueBarrier = 1;       // named barriers 1, 2 (0 is __syncthreads)

struct SparseHopperParams {
  void* o = nullptr;
  int64_t o_row = 0;
  float scale_log2 = 0.f;
  TileTable t;
  const int32_t* index = nullptr;
  const int32_t* count = nullptr;
  int* err = nullptr;
};

// The 64-row key blocks of one query tile's listed key tiles, in list order, as rows of the tile-ordered workspace.
struct KeyBlockWalk {
  const int32_t* list;
  const int32_t* begin;
  int listed, tile_elems;
  int i = 0, block = 0;  // the next list entry and block within its tile
  __device__ bool next(int& row, int& keys) {
    for (; i < listed; ++i, block = 0) {
      const int j = list[i], size = begin[j + 1] - begin[j];
      if (block * kBlock < size) {
        row = j * tile_elems + block * kBlock;
        keys = min(kBlock, size - block * kBlock);
        ++block;
        return true;
      }
    }
    return false;
  }
};

__global__ void __launch_bounds__(kThreads, 1)
    block_sparse_hopper_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                               const __grid_constant__ CUtensorMap tv, const SparseHopperParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = __nv_bfloat16;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* const base_ptr = smem_raw + (base - raw);
  volatile int* const stalled = reinterpret_cast<volatile int*>(base_ptr + kStalledOff);
  int* const infos = reinterpret_cast<int*>(base_ptr + kInfoOff);
  int* const err = p.err;
  auto wait = [stalled, err](uint32_t b, uint32_t parity) { mbar_wait(b, parity, stalled, err); };
  auto bar = [base](int c, int i) { return base + kBarOff + 8u * static_cast<uint32_t>(c * kBarriers + i); };

  const int h = blockIdx.y;
  const int blocks_per_tile = p.t.tile_elems / kBlock;
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);

  if (threadIdx.x == 0) {
    for (int c = 0; c < kConsumers; ++c) {
      mbar_init(bar(c, kQFull), 1);
      for (int s = 0; s < kStages; ++s) {
        mbar_init(bar(c, kKFull + s), 1);
        mbar_init(bar(c, kVFull + s), 1);
        mbar_init(bar(c, kKEmpty + s), kReleaseArrivals);
        mbar_init(bar(c, kVEmpty + s), kReleaseArrivals);
      }
    }
    *stalled = 0;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  // Consumer c's query block: block b of query tile m, q_keys of its rows real (none: nothing to do).
  const int c = wg == 0 ? static_cast<int>(threadIdx.x / 32) : wg - 1;
  const int q_block = blockIdx.x * kConsumers + c;
  const int m = q_block / blocks_per_tile, b = q_block - m * blocks_per_tile;
  const int q_rows = m < p.t.tiles ? min(kBlock, p.t.begin[m + 1] - p.t.begin[m] - b * kBlock) : 0;
  const int64_t list_row = int64_t(h) * p.t.tiles + m;
  const int listed = q_rows > 0 ? p.count[list_row] : 0;
  const uint32_t region = base + static_cast<uint32_t>(c) * kRegionBytes;

  if (wg == 0) {
    // Producer: lane 0 of warp c serves consumer c; block t goes to stage t mod kStages once the consumer released
    // block t − kStages.
    setmaxnreg_dec<kProducerRegs>();
    if (c < kConsumers && threadIdx.x % 32 == 0 && q_rows > 0 && listed > 0) {
      const int q_row = m * p.t.tile_elems + b * kBlock;
      mbar_expect_tx(bar(c, kQFull), kBlockBytes);
      for (int x = 0; x < SparseTiling::kBoxes; ++x)
        tma_load(region + kQOff + x * SparseTiling::kQBoxBytes, &tq, bar(c, kQFull), x * kBoxCols, q_row, h, 0);
      KeyBlockWalk walk{p.index + list_row * p.t.tiles, p.t.begin, listed, p.t.tile_elems};
      int row = 0, keys = 0, next_row = 0, next_keys = 0;
      bool have = walk.next(row, keys);
      for (int t = 0; have; ++t) {
        const bool more = walk.next(next_row, next_keys);
        const int s = t % kStages;
        const uint32_t free_parity = ((t / kStages) & 1) ^ 1;  // a fresh barrier passes parity 1 at once
        wait(bar(c, kKEmpty + s), free_parity);
        infos[c * kStages + s] = keys | (more ? 0 : kLastBlock);  // published by the arrive below (release)
        mbar_expect_tx(bar(c, kKFull + s), kBlockBytes);
        for (int x = 0; x < SparseTiling::kBoxes; ++x)
          tma_load(region + kKOff + s * kBlockBytes + x * SparseTiling::kBoxBytes, &tk, bar(c, kKFull + s),
                   x * kBoxCols, row, h, 0);
        wait(bar(c, kVEmpty + s), free_parity);
        mbar_expect_tx(bar(c, kVFull + s), kBlockBytes);
        for (int x = 0; x < SparseTiling::kBoxes; ++x)
          tma_load(region + kVOff + s * kBlockBytes + x * SparseTiling::kBoxBytes, &tv, bar(c, kVFull + s),
                   x * kBoxCols, row, h, 0);
        row = next_row;
        keys = next_keys;
        have = more;
      }
    }
    return;
  }

  setmaxnreg_inc<kConsumerRegs>();
  if (q_rows <= 0) return;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const bool lead = lane == 0;
  const uint32_t q = region + kQOff;
  auto k_block = [region](int s) { return region + kKOff + s * kBlockBytes; };
  auto v_block = [region](int s) { return region + kVOff + s * kBlockBytes; };

  float o[kDh / 2], s[kBlock / 2];
  uint32_t pf[kBlock / 4];
#pragma unroll
  for (int i = 0; i < kDh / 2; ++i) o[i] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, alpha0, alpha1;

  if (listed > 0) {  // route_key_tiles lists at least one tile; an empty list gives zeros, as the portable kernel
    wait(bar(c, kQFull), 0);
    wait(bar(c, kKFull), 0);
    int info = infos[c * kStages];
    wgmma_fence();
    gemm_qk<T, SparseTiling>(s, q, k_block(0));
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(s);
    if (lead) mbar_arrive(bar(c, kKEmpty));
    if ((info & 0xff) < kBlock) mask_tail(s, 0, info & 0xff, lane);
    online_softmax(s, m0, m1, l0, l1, p.scale_log2, alpha0, alpha1);
    round_p<T>(s, pf);

    int j = 1;
    for (; !(info & kLastBlock); ++j) {
      const int st = j % kStages, pst = (j - 1) % kStages;
      const uint32_t parity = (j / kStages) & 1, prev_parity = ((j - 1) / kStages) & 1;
      wait(bar(c, kKFull + st), parity);
      info = infos[c * kStages + st];
      wait(bar(c, kVFull + pst), prev_parity);
      wgmma_fence();
      gemm_qk<T, SparseTiling>(s, q, k_block(st));
      wgmma_commit();
      gemm_pv<T, SparseTiling>(o, pf, v_block(pst));
      wgmma_commit();
      wgmma_wait<1>();  // S_j is ready; P_{j-1}·V_{j-1} may still run
      fence_operands(s);
      if (lead) mbar_arrive(bar(c, kKEmpty + st));
      if ((info & 0xff) < kBlock) mask_tail(s, 0, info & 0xff, lane);
      online_softmax(s, m0, m1, l0, l1, p.scale_log2, alpha0, alpha1);
      finish_pv(o, alpha0, alpha1, [&] {
        if (lead) mbar_arrive(bar(c, kVEmpty + pst));
      });
      round_p<T>(s, pf);
    }

    const int st = (j - 1) % kStages;
    wait(bar(c, kVFull + st), ((j - 1) / kStages) & 1);
    wgmma_fence();
    gemm_pv<T, SparseTiling>(o, pf, v_block(st));
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(o);
    if (lead) mbar_arrive(bar(c, kVEmpty + st));
  }

  // Epilogue: O / row sum, rounded, staged in this consumer's Q rows (their last reader, the final S GEMM, has
  // completed; or, with no list, never written) with the 128-byte swizzle, then 16-byte stores of whole rows to
  // the packed rows order[begin[m] + b·64 + r].
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
  unsigned char* const stage = base_ptr + (q - base);
  const int r0 = warp * 16 + lane / 4, r1 = r0 + 8, quad = lane & 3;
#pragma unroll
  for (int k = 0; k < kDh / 8; ++k) {
    const uint32_t box = (k / 8) * SparseTiling::kQBoxBytes, chunk = k % 8;
    *reinterpret_cast<uint32_t*>(stage + box + r0 * kRowBytes + ((chunk ^ (r0 & 7)) << 4) + quad * 4) =
        pack2<T>(o[4 * k] * inv0, o[4 * k + 1] * inv0);
    *reinterpret_cast<uint32_t*>(stage + box + r1 * kRowBytes + ((chunk ^ (r1 & 7)) << 4) + quad * 4) =
        pack2<T>(o[4 * k + 2] * inv1, o[4 * k + 3] * inv1);
  }
  named_sync(kEpilogueBarrier + c, 128);
  T* const og = static_cast<T*>(p.o) + int64_t(h) * kDh;
  const int32_t* const rows = p.t.order + p.t.begin[m] + b * kBlock;
  constexpr int kChunks = kDh / 8;  // 16-byte pieces of an output row
#pragma unroll
  for (int it = 0; it < kBlock * kChunks / 128; ++it) {
    const int idx = it * 128 + tid, row = idx / kChunks, ch = idx % kChunks;
    if (row >= q_rows) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(stage + (ch / 8) * SparseTiling::kQBoxBytes + row * kRowBytes +
                                                    (((ch % 8) ^ (row & 7)) << 4));
    *reinterpret_cast<uint4*>(og + int64_t(rows[row]) * p.o_row + ch * 8) = v;
  }
#endif
}

// ---- the gather into tile order ----

constexpr int kGatherThreads = 256;

// Workspace row n·tile_elems + i (one block per row) = [q | k | v] of packed row order[begin[n] + i], or zeros
// past tile n's end; `inner` channels per part, copied 8 at a time.
__global__ void __launch_bounds__(kGatherThreads)
    gather_tile_rows_kernel(const uint4* q, const uint4* k, const uint4* v, int64_t row, TileTable t, int inner,
                            uint4* ws) {
  const int64_t slot = blockIdx.x;
  const int n = static_cast<int>(slot / t.tile_elems), i = static_cast<int>(slot - int64_t(n) * t.tile_elems);
  const int p = t.begin[n] + i;
  const int64_t src = p < t.begin[n + 1] ? int64_t(t.order[p]) * (row / 8) : -1;
  const int chunks = inner / 8;
  uint4* dst = ws + slot * (3 * chunks);
#pragma unroll 4  // several 16-byte loads in flight per thread
  for (int x = threadIdx.x; x < 3 * chunks; x += kGatherThreads) {
    const int part = x / chunks, ch = x - part * chunks;
    const uint4* from = part == 0 ? q : part == 1 ? k : v;
    dst[x] = src >= 0 ? from[src + ch] : make_uint4(0, 0, 0, 0);
  }
}

// Part `part` (q, k or v) of the workspace as the 4-D tensor (channel, row, head, 1) with boxes of 64 x 64.
bool encode_part(CUtensorMap& map, void* ws, int part, int rows, int heads) {
  const int64_t row_bytes = int64_t(3) * heads * kDh * 2;
  const cuuint64_t dims[4] = {cuuint64_t(kDh), cuuint64_t(rows), cuuint64_t(heads), 1};
  const cuuint64_t strides[3] = {cuuint64_t(row_bytes), cuuint64_t(kDh * 2), cuuint64_t(row_bytes) * rows};
  const cuuint32_t box[4] = {kBoxCols, kBlock, 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  void* const at = static_cast<char*>(ws) + int64_t(part) * heads * kDh * 2;
  return tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, at, dims, strides, box, elem_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

size_t block_sparse_hopper_workspace_bytes(const BlockSparseParams& p) {
  return size_t(p.t.tiles) * p.t.tile_elems * 3 * p.heads * p.head_dim * 2;
}

const char* launch_block_sparse_attention_hopper(const BlockSparseParams& p, void* workspace, int* err,
                                                 cudaStream_t s) {
  if (p.dtype != Elem::BF16) return "q, k and v are not bf16";
  if (p.head_dim != kDh) return "head_dim is not 128";
  if (p.t.tile_elems <= 0 || p.t.tile_elems % kBlock != 0) return "the tile size is not a multiple of 64";
  if (p.index == nullptr || p.count == nullptr) return "no key-tile lists (dense attention)";
  if (p.heads >= 65536) return "too many heads for the grid";
  if (int64_t(p.t.tiles) * p.t.tile_elems >= (int64_t(1) << 31)) return "too many rows for the tensor maps";
  if (p.row % 8 != 0 || p.o_row % 8 != 0 || !aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) ||
      !aligned16(p.o) || !aligned16(workspace))
    return "q/k/v/o rows not 16-byte aligned";
  if (!device_is_sm90()) return "not a compute capability 9.0 device";
  if (!tensor_map_encoder()) return "the driver has no cuTensorMapEncodeTiled";
  if (p.t.tiles == 0 || p.heads == 0) return nullptr;
  const int rows = p.t.tiles * p.t.tile_elems, inner = p.heads * kDh;
  alignas(64) CUtensorMap tq, tk, tv;
  if (!encode_part(tq, workspace, 0, rows, p.heads) || !encode_part(tk, workspace, 1, rows, p.heads) ||
      !encode_part(tv, workspace, 2, rows, p.heads))
    return "the driver refused the tensor maps";

  gather_tile_rows_kernel<<<static_cast<unsigned>(rows), kGatherThreads, 0, s>>>(
      static_cast<const uint4*>(p.q), static_cast<const uint4*>(p.k), static_cast<const uint4*>(p.v), p.row, p.t,
      inner, static_cast<uint4*>(workspace));
  H3_CUDA_LAUNCH_CHECK(s, "block-sparse attention: gather");

  static bool configured = false;  // raise the dynamic shared-memory limit once
  if (!configured) {
    H3_CUDA_CHECK(cudaFuncSetAttribute(block_sparse_hopper_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kSmemBytes)),
                  "block-sparse hopper attention");
    configured = true;
  }
  SparseHopperParams hp;
  hp.o = p.o;
  hp.o_row = p.o_row;
  hp.scale_log2 = p.scale * 1.4426950408889634f;
  hp.t = p.t;
  hp.index = p.index;
  hp.count = p.count;
  hp.err = err;
  const int query_blocks = p.t.tiles * (p.t.tile_elems / kBlock);
  const dim3 grid(static_cast<unsigned>((query_blocks + kConsumers - 1) / kConsumers), static_cast<unsigned>(p.heads));
  block_sparse_hopper_kernel<<<grid, kThreads, kSmemBytes, s>>>(tq, tk, tv, hp);
  H3_CUDA_LAUNCH_CHECK(s, "block-sparse hopper attention");
  return nullptr;
}

}  // namespace h3::cuda
