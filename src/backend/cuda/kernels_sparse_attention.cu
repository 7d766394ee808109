// Block-sparse attention kernels for FastH3's VSA-H3 (spec/fasth3.md §3–§6; kernels_sparse_attention.h): tile means,
// tile scores, top-k key-tile routing, a block-sparse flash attention (the FlashAttention-2 schedule of
// kernels_attention.cu's flash kernel on mma.sync, walking a per-query-tile list of key tiles and gathering the
// tiles' rows through the tile order, so that nothing is scattered into a padded buffer), and the gated pooled
// branch. The means and scores repeat the CPU reference's float32 operations in its order (so that routing is the
// CPU's bit for bit given the same q and k); routing is an exact selection on order-preserving integer keys.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_mma.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_sparse_attention.h"

namespace h3::cuda {

namespace {

// ---- tile means and scores ----

constexpr int kMeanThreads = 128;

__global__ void __launch_bounds__(kMeanThreads)
    tile_means_kernel(In x, int64_t row_stride, int64_t channel0, int head_dim, TileTable t, float* means) {
  const int n = blockIdx.x, h = blockIdx.y;
  const int b0 = t.begin[n], b1 = t.begin[n + 1];
  const float size = static_cast<float>(b1 - b0);
  for (int c = threadIdx.x; c < head_dim; c += kMeanThreads) {
    const int64_t col = channel0 + int64_t(h) * head_dim + c;
    float sum = 0.f;
    for (int p = b0; p < b1; ++p) sum = __fadd_rn(sum, load1(x.p, x.t, int64_t(t.order[p]) * row_stride + col));
    means[(int64_t(h) * t.tiles + n) * head_dim + c] = __fdiv_rn(sum, size);
  }
}

constexpr int kScoreTile = 16;

__global__ void __launch_bounds__(kScoreTile* kScoreTile)
    tile_scores_kernel(const float* q_means, const float* k_means, int tiles, int head_dim, float root,
                       float* scores) {
  extern __shared__ float score_smem[];
  const int pitch = head_dim + 1;  // conflict-free column reads
  float* qs = score_smem;
  float* ks = score_smem + kScoreTile * pitch;
  const int h = blockIdx.z, m0 = blockIdx.y * kScoreTile, j0 = blockIdx.x * kScoreTile;
  const float* qh = q_means + int64_t(h) * tiles * head_dim;
  const float* kh = k_means + int64_t(h) * tiles * head_dim;
  for (int i = threadIdx.y * kScoreTile + threadIdx.x; i < kScoreTile * head_dim; i += kScoreTile * kScoreTile) {
    const int r = i / head_dim, c = i - r * head_dim;
    qs[r * pitch + c] = m0 + r < tiles ? qh[int64_t(m0 + r) * head_dim + c] : 0.f;
    ks[r * pitch + c] = j0 + r < tiles ? kh[int64_t(j0 + r) * head_dim + c] : 0.f;
  }
  __syncthreads();
  const int m = m0 + threadIdx.y, j = j0 + threadIdx.x;
  if (m >= tiles || j >= tiles) return;
  const float* qr = qs + threadIdx.y * pitch;
  const float* kr = ks + threadIdx.x * pitch;
  float dot = 0.f;
  for (int c = 0; c < head_dim; ++c) dot = __fadd_rn(dot, __fmul_rn(qr[c], kr[c]));
  scores[(int64_t(h) * tiles + m) * tiles + j] = __fdiv_rn(dot, root);
}

// ---- routing ----

constexpr int kRouteThreads = 256;

// An unsigned key whose order is the ranking's (spec/fasth3.md §4, ours): larger score larger key, a NaN as −inf,
// −0 as +0 (the CPU compares them equal: a tie).
__device__ __forceinline__ uint32_t rank_key(float s) {
  if (isnan(s)) s = -INFINITY;
  const uint32_t u = __float_as_uint(s == 0.f ? 0.f : s);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// One block per (query tile, head). The k-th largest key T by bisection on its bits (counts of keys >= a candidate),
// then, in tile order, every key above T and the first (k − #above) equal to T: the CPU's partial sort's set
// (larger first, ties to the lower tile), written ascending.
__global__ void __launch_bounds__(kRouteThreads)
    route_key_tiles_kernel(const float* scores, int tiles, int prefix, int keep, bool compete, int32_t* index,
                           int32_t* count) {
  using Reduce = cub::BlockReduce<int, kRouteThreads>;
  using Scan = cub::BlockScan<int, kRouteThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } tmp;
  __shared__ int broadcast;
  extern __shared__ uint32_t keys[];
  const int m = blockIdx.x, h = blockIdx.y;
  const int64_t row = int64_t(h) * tiles + m;
  int32_t* out = index + row * tiles;
  const bool exempt = !compete || prefix == 0;
  const int lo = exempt ? prefix : 0;                        // the first candidate key tile
  const int k = exempt ? keep : min(keep + prefix, tiles);  // how many of the candidates are kept
  const int candidates = tiles - lo;
  if (m < prefix || k >= candidates) {  // a dense row: prefix queries, or every tile kept
    for (int j = threadIdx.x; j < tiles; j += kRouteThreads) out[j] = j;
    if (threadIdx.x == 0) count[row] = tiles;
    return;
  }
  const float* s = scores + row * tiles + lo;
  for (int i = threadIdx.x; i < candidates; i += kRouteThreads) keys[i] = rank_key(s[i]);
  __syncthreads();
  const auto count_at_least = [&](uint32_t t) {
    int c = 0;
    for (int i = threadIdx.x; i < candidates; i += kRouteThreads) c += keys[i] >= t ? 1 : 0;
    const int total = Reduce(tmp.reduce).Sum(c);
    if (threadIdx.x == 0) broadcast = total;
    __syncthreads();
    const int r = broadcast;
    __syncthreads();
    return r;
  };
  uint32_t threshold = 0;  // invariant: at least k keys >= threshold
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t c = threshold | (1u << bit);
    if (count_at_least(c) >= k) threshold = c;
  }
  const int above = threshold == 0xffffffffu ? 0 : count_at_least(threshold + 1);
  const int ties_kept = k - above;
  const int offset = exempt ? prefix : 0;  // exempt: every prefix tile first
  for (int j = threadIdx.x; j < offset; j += kRouteThreads) out[j] = j;
  int ties_seen = 0, written = 0;
  for (int start = 0; start < candidates; start += kRouteThreads) {
    const int i = start + threadIdx.x;
    const uint32_t key = i < candidates ? keys[i] : 0u;
    const int tie = i < candidates && key == threshold ? 1 : 0;
    int tie_rank = 0, ties = 0;
    Scan(tmp.scan).ExclusiveSum(tie, tie_rank, ties);
    __syncthreads();
    const int kept = i < candidates && (key > threshold || (tie && ties_seen + tie_rank < ties_kept)) ? 1 : 0;
    int at = 0, kept_here = 0;
    Scan(tmp.scan).ExclusiveSum(kept, at, kept_here);
    __syncthreads();
    if (kept) out[offset + written + at] = lo + i;
    ties_seen += ties;
    written += kept_here;
  }
  if (threadIdx.x == 0) count[row] = offset + k;
}

// ---- block-sparse flash attention ----

constexpr int kSparseWarps = 4;
constexpr int kSparseRows = 16 * kSparseWarps;  // query rows per block, and keys per key block
constexpr int kSparseThreads = 32 * kSparseWarps;

template <int DP>
struct SparseShape {
  static constexpr int kPitch = DP + 8;  // shared-memory row pitch in elements (conflict-free, 16 B aligned)
  static constexpr size_t kSmemBytes = size_t(5 * kSparseRows) * kPitch * 2;  // Q + 2 stages of K and V
};

// Tile-order positions [first, first + valid) of one head (head_dim channels at `src`, packed row r at
// src + r·stride) into a shared block of kSparseRows rows and DP columns; rows past `valid` and channels past Dh
// become zeros.
template <int DP>
__device__ __forceinline__ void load_rows(uint16_t* dst, const uint16_t* src, int64_t stride, const int32_t* order,
                                          int first, int valid, int Dh, bool vec) {
  constexpr int kChunks = DP / 8;
  constexpr int kPitch = SparseShape<DP>::kPitch;
  for (int i = threadIdx.x; i < kSparseRows * kChunks; i += kSparseThreads) {
    const int r = i / kChunks, d = (i - r * kChunks) * 8;
    uint16_t* s = dst + r * kPitch + d;
    const bool in = r < valid;
    const int64_t base = in ? int64_t(order[first + r]) * stride : 0;
    if (vec) {
      const bool ok = in && d < Dh;  // Dh % 8 == 0 on this path
      cp_async16(s, ok ? src + base + d : src, ok ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) s[e] = (in && d + e < Dh) ? src[base + d + e] : uint16_t(0);
    }
  }
}

template <int DP>
__global__ void __launch_bounds__(kSparseThreads) block_sparse_attention_kernel(BlockSparseParams p, bool vec) {
  using T = __nv_bfloat16;
  constexpr int BK = kSparseRows, PITCH = SparseShape<DP>::kPitch;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* Ks0 = Qs + kSparseRows * PITCH;
  uint16_t* Vs0 = Ks0 + 2 * BK * PITCH;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int h = blockIdx.y, Dh = p.head_dim;
  const int blocks_per_tile = p.t.tile_elems / kSparseRows;
  const int m = blockIdx.x / blocks_per_tile;
  const int q_first = p.t.begin[m] + (blockIdx.x - m * blocks_per_tile) * kSparseRows;
  const int q_valid = min(kSparseRows, p.t.begin[m + 1] - q_first);
  if (q_valid <= 0) return;  // past the end of a partial tile
  const uint16_t* qg = static_cast<const uint16_t*>(p.q) + h * Dh;
  const uint16_t* kg = static_cast<const uint16_t*>(p.k) + h * Dh;
  const uint16_t* vg = static_cast<const uint16_t*>(p.v) + h * Dh;
  const int64_t list_row = int64_t(h) * p.t.tiles + m;
  const int32_t* list = p.index ? p.index + list_row * p.t.tiles : nullptr;
  const int steps = (p.index ? p.count[list_row] : p.t.tiles) * blocks_per_tile;
  // Step s: key block s % blocks_per_tile of listed key tile s / blocks_per_tile (its first position, valid rows).
  const auto key_block = [&](int s, int& first, int& valid) {
    const int i = s / blocks_per_tile, j = list ? list[i] : i;
    first = p.t.begin[j] + (s - i * blocks_per_tile) * BK;
    valid = min(BK, p.t.begin[j + 1] - first);
  };
  const auto next_step = [&](int s, int& first, int& valid) {  // the first step >= s with keys in it
    for (; s < steps; ++s) {
      key_block(s, first, valid);
      if (valid > 0) break;
    }
    return s;
  };

  int k_first = 0, k_valid = 0;
  int step = next_step(0, k_first, k_valid);
  load_rows<DP>(Qs, qg, p.row, p.t.order, q_first, q_valid, Dh, vec);
  if (step < steps) {
    load_rows<DP>(Ks0, kg, p.row, p.t.order, k_first, k_valid, Dh, vec);
    load_rows<DP>(Vs0, vg, p.row, p.t.order, k_first, k_valid, Dh, vec);
  }
  cp_async_commit();

  float o[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const uint16_t* qw = Qs + (warp * 16 + g) * PITCH + 2 * c;

  for (int stage = 0; step < steps; stage ^= 1) {
    const int valid = k_valid;
    int n_first = 0, n_valid = 0;
    const int next = next_step(step + 1, n_first, n_valid);
    if (next < steps) {
      load_rows<DP>(Ks0 + (stage ^ 1) * BK * PITCH, kg, p.row, p.t.order, n_first, n_valid, Dh, vec);
      load_rows<DP>(Vs0 + (stage ^ 1) * BK * PITCH, vg, p.row, p.t.order, n_first, n_valid, Dh, vec);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint16_t* Kc = Ks0 + stage * BK * PITCH;
    const uint16_t* Vc = Vs0 + stage * BK * PITCH;

    // S = Q·Kᵀ for this warp's 16 rows and the block's BK keys.
    float sc[BK / 8][4];
#pragma unroll
    for (int n = 0; n < BK / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      uint32_t a[4];
      a[0] = lds32(qw + kk * 16);
      a[1] = lds32(qw + 8 * PITCH + kk * 16);
      a[2] = lds32(qw + kk * 16 + 8);
      a[3] = lds32(qw + 8 * PITCH + kk * 16 + 8);
#pragma unroll
      for (int n = 0; n < BK / 8; ++n) {
        const uint16_t* kr = Kc + (n * 8 + g) * PITCH + kk * 16 + 2 * c;
        mma16816<T>(sc[n], a, lds32(kr), lds32(kr + 8));
      }
    }

    // Mask the block's missing rows, scale into the log2 domain, online softmax update.
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < BK / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool out = n * 8 + 2 * c + e >= valid;
        const float s0 = out ? -INFINITY : sc[n][e] * scale_log2;
        const float s1 = out ? -INFINITY : sc[n][2 + e] * scale_log2;
        sc[n][e] = s0;
        sc[n][2 + e] = s1;
        mx0 = fmaxf(mx0, s0);
        mx1 = fmaxf(mx1, s1);
      }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float base0 = mn0 == -INFINITY ? 0.f : mn0, base1 = mn1 == -INFINITY ? 0.f : mn1;
    const float alpha0 = exp2f(m0 - base0), alpha1 = exp2f(m1 - base1);
    m0 = mn0;
    m1 = mn1;
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int n = 0; n < BK / 8; ++n) {
      sc[n][0] = exp2f(sc[n][0] - base0);
      sc[n][1] = exp2f(sc[n][1] - base0);
      sc[n][2] = exp2f(sc[n][2] - base1);
      sc[n][3] = exp2f(sc[n][3] - base1);
      sum0 += sc[n][0] + sc[n][1];
      sum1 += sc[n][2] + sc[n][3];
    }
    l0 = l0 * alpha0 + sum0;
    l1 = l1 * alpha1 + sum1;
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      o[n][0] *= alpha0;
      o[n][1] *= alpha0;
      o[n][2] *= alpha1;
      o[n][3] *= alpha1;
    }

    // O += P·V, P rounded to bf16 (flash semantics).
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t a[4];
      a[0] = pack2<T>(sc[2 * kk][0], sc[2 * kk][1]);
      a[1] = pack2<T>(sc[2 * kk][2], sc[2 * kk][3]);
      a[2] = pack2<T>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      a[3] = pack2<T>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
      const int key = kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
#pragma unroll
      for (int dp = 0; dp < DP / 16; ++dp) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, Vc + key * PITCH + dp * 16 + (lane >> 4) * 8);
        mma16816<T>(o[2 * dp], a, bv[0], bv[1]);
        mma16816<T>(o[2 * dp + 1], a, bv[2], bv[3]);
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites the buffer read here
    step = next;
    k_valid = n_valid;
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
  const int r0 = warp * 16 + g, r1 = r0 + 8;
  T* og = static_cast<T*>(p.o) + h * Dh;
  const int64_t o0 = r0 < q_valid ? int64_t(p.t.order[q_first + r0]) * p.o_row : -1;
  const int64_t o1 = r1 < q_valid ? int64_t(p.t.order[q_first + r1]) * p.o_row : -1;
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) {
    const int d = n * 8 + 2 * c;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (d + e >= Dh) continue;
      if (o0 >= 0) og[o0 + d + e] = T(o[n][e] * inv0);
      if (o1 >= 0) og[o1 + d + e] = T(o[n][2 + e] * inv1);
    }
  }
}

template <int DP>
void launch_sparse_dp(const BlockSparseParams& p, bool vec, cudaStream_t s) {
  constexpr size_t smem = SparseShape<DP>::kSmemBytes;
  static bool configured = false;  // raise the dynamic shared-memory limit once per instantiation
  if (!configured) {
    H3_CUDA_CHECK(cudaFuncSetAttribute(block_sparse_attention_kernel<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)),
                  "block-sparse attention");
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>(p.t.tiles * (p.t.tile_elems / kSparseRows)), static_cast<unsigned>(p.heads));
  block_sparse_attention_kernel<DP><<<grid, kSparseThreads, smem, s>>>(p, vec);
  H3_CUDA_LAUNCH_CHECK(s, "block-sparse attention");
}

// ---- the gated pooled branch ----

constexpr int kPoolThreads = 128;

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : -INFINITY;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
  __syncthreads();
  return t;
}

// One block per (tile m, head h): the softmax of scores[h, m, :] (staged in shared memory), o_c = its weights ·
// v_means, then out[r] += o_c ⊙ gate[r] for the tile's rows (spec/fasth3.md §6).
__global__ void __launch_bounds__(kPoolThreads)
    add_pooled_kernel(const float* scores, const float* v_means, In gate, int64_t gate_row, Out out, int64_t out_row,
                      int head_dim, TileTable t) {
  extern __shared__ float weight[];
  __shared__ float scratch[32];
  const int m = blockIdx.x, h = blockIdx.y, n = t.tiles;
  const float* s = scores + (int64_t(h) * n + m) * n;
  float peak = -INFINITY;
  for (int j = threadIdx.x; j < n; j += kPoolThreads) peak = fmaxf(peak, s[j]);
  peak = block_max(peak, scratch);
  float total = 0.f;
  for (int j = threadIdx.x; j < n; j += kPoolThreads) total += weight[j] = expf(s[j] - peak);
  total = block_sum(total, scratch);
  for (int j = threadIdx.x; j < n; j += kPoolThreads) weight[j] /= total;  // the probabilities, as the CPU's
  __syncthreads();
  const float* vm = v_means + int64_t(h) * n * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += kPoolThreads) {
    float pooled = 0.f;
    for (int j = 0; j < n; ++j) pooled += weight[j] * vm[int64_t(j) * head_dim + c];
    for (int q = t.begin[m]; q < t.begin[m + 1]; ++q) {
      const int64_t r = t.order[q], col = int64_t(h) * head_dim + c;
      const int64_t oi = r * out_row + col;
      store1(out.p, out.t, oi, load1(out.p, out.t, oi) + pooled * load1(gate.p, gate.t, r * gate_row + col));
    }
  }
}

}  // namespace

void launch_tile_means(In x, int64_t row_stride, int64_t channel0, int heads, int head_dim, const TileTable& t,
                       float* means, cudaStream_t s) {
  if (t.tiles == 0 || heads == 0) return;
  tile_means_kernel<<<dim3(static_cast<unsigned>(t.tiles), static_cast<unsigned>(heads)), kMeanThreads, 0, s>>>(
      x, row_stride, channel0, head_dim, t, means);
  H3_CUDA_LAUNCH_CHECK(s, "tile means");
}

void launch_tile_scores(const float* q_means, const float* k_means, int heads, int tiles, int head_dim, float root,
                        float* scores, cudaStream_t s) {
  if (tiles == 0 || heads == 0) return;
  const unsigned blocks = static_cast<unsigned>((tiles + kScoreTile - 1) / kScoreTile);
  const size_t smem = size_t(2 * kScoreTile) * (head_dim + 1) * sizeof(float);
  H3_CHECK(smem <= 48 * 1024, "tile scores: head_dim ", head_dim, " is too large (at most 383)");
  tile_scores_kernel<<<dim3(blocks, blocks, static_cast<unsigned>(heads)), dim3(kScoreTile, kScoreTile), smem, s>>>(
      q_means, k_means, tiles, head_dim, root, scores);
  H3_CUDA_LAUNCH_CHECK(s, "tile scores");
}

void launch_route_key_tiles(const float* scores, int heads, int tiles, int prefix_tiles, int keep, bool compete,
                            int32_t* index, int32_t* count, cudaStream_t s) {
  if (tiles == 0 || heads == 0) return;
  H3_CHECK(tiles <= kMaxRoutedTiles, "key-tile routing: ", tiles, " tiles exceed the kernel's ", kMaxRoutedTiles);
  const size_t smem = size_t(tiles) * sizeof(uint32_t);
  route_key_tiles_kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(heads)), kRouteThreads, smem, s>>>(
      scores, tiles, prefix_tiles, keep, compete, index, count);
  H3_CUDA_LAUNCH_CHECK(s, "key-tile routing");
}

const char* launch_block_sparse_attention(const BlockSparseParams& p, cudaStream_t s) {
  if (p.dtype != Elem::BF16) return "q, k and v are not bf16";
  if (p.head_dim <= 0 || p.head_dim > kBlockSparseMaxHeadDim) return "head_dim is above 128";
  if (p.t.tile_elems <= 0 || p.t.tile_elems % kSparseRows != 0) return "the tile size is not a multiple of 64";
  if (p.t.tiles == 0 || p.heads == 0) return nullptr;
  const bool vec = p.head_dim % 8 == 0 && p.row % 8 == 0 && aligned16(p.q) && aligned16(p.k) && aligned16(p.v);
  if (p.head_dim <= 32)
    launch_sparse_dp<32>(p, vec, s);
  else if (p.head_dim <= 64)
    launch_sparse_dp<64>(p, vec, s);
  else
    launch_sparse_dp<128>(p, vec, s);
  return nullptr;
}

void launch_add_pooled_attention(const float* scores, const float* v_means, In gate, int64_t gate_row, Out out,
                                 int64_t out_row, int heads, int head_dim, const TileTable& t, cudaStream_t s) {
  if (t.tiles == 0 || heads == 0) return;
  const size_t smem = size_t(t.tiles) * sizeof(float);
  H3_CHECK(smem <= 48 * 1024, "pooled attention: ", t.tiles, " tiles exceed the kernel's 12288");
  add_pooled_kernel<<<dim3(static_cast<unsigned>(t.tiles), static_cast<unsigned>(heads)), kPoolThreads, smem, s>>>(
      scores, v_means, gate, gate_row, out, out_row, head_dim, t);
  H3_CUDA_LAUNCH_CHECK(s, "pooled attention");
}

}  // namespace h3::cuda
