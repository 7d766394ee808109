// Attention kernels: the fused per-head q/k RMSNorm + rotate-half RoPE that runs in place on the packed q|k|v
// buffer before attention, and our flash attention (FlashAttention-2 schedule on mma.sync tensor-core
// instructions): the portable fallback where cuDNN's fused SDPA is refused, and its exact twin.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_mma.cuh"
#include "backend/cuda/kernel_util.cuh"

namespace h3::cuda {

namespace {

// ---- q/k RMSNorm + RoPE ----

constexpr int kQkWarps = 8;

struct QkParams {
  Out qkv;            // [rows, W], W = (Hq + 2·Hkv)·Dh
  Out dst;            // null: in place; else [Hq + 2·Hkv, rows, Dh] (head-major), v heads copied
  int64_t rows = 0, W = 0;
  int heads_q = 0, heads_kv = 0, Dh = 0;
  int heads = 0;      // heads per row the kernel visits: Hq + Hkv in place, Hq + 2·Hkv head-major
  bool qk_norm = false;
  float eps = 0.f;
  In wq, wk;
  int rot = 0;
  In cos, sin;
};

// Task → (row, head): row-major in place; head-major for the head-major output, so that consecutive warps write
// consecutive rows of one head.
__device__ __forceinline__ void qk_task(const QkParams& p, int64_t task, int64_t& r, int& h) {
  if (p.dst.p) {
    h = static_cast<int>(task / p.rows);
    r = task - int64_t(h) * p.rows;
  } else {
    r = task / p.heads;
    h = static_cast<int>(task - r * p.heads);
  }
}
__device__ __forceinline__ int64_t qk_out(const QkParams& p, int64_t r, int h) {
  return p.dst.p ? (int64_t(h) * p.rows + r) * p.Dh : r * p.W + int64_t(h) * p.Dh;
}

// One warp per (row, head), any head_dim: the head is staged in shared memory (f32), normalized, weighted, rotated
// and stored once.
__global__ void qk_norm_rope_kernel(QkParams p) {
  extern __shared__ float stage[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, Dh = p.Dh;
  const int64_t task = int64_t(blockIdx.x) * kQkWarps + warp;
  if (task >= p.rows * p.heads) return;  // no block-wide barrier below
  int64_t r;
  int h;
  qk_task(p, task, r, h);
  const bool transform = h < p.heads_q + p.heads_kv;  // v heads (head-major output only) are copied
  float* buf = stage + warp * Dh;
  const int64_t base = r * p.W + int64_t(h) * Dh;
  float ss = 0.f;
  for (int c = lane; c < Dh; c += 32) {
    const float v = load1(p.qkv.p, p.qkv.t, base + c);
    buf[c] = v;
    ss += v * v;
  }
  if (transform && p.qk_norm) {
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(Dh) + p.eps);
    const In w = h < p.heads_q ? p.wq : p.wk;
    for (int c = lane; c < Dh; c += 32) buf[c] = w.p ? buf[c] * inv * load1(w.p, w.t, c) : buf[c] * inv;
  }
  __syncwarp();
  const int half = p.rot / 2, rot = transform ? p.rot : 0;
  const Out out = p.dst.p ? p.dst : p.qkv;
  const int64_t o = qk_out(p, r, h);
  for (int c = lane; c < Dh; c += 32) {
    float v = buf[c];
    if (c < rot) {
      const float cs = load1(p.cos.p, p.cos.t, r * rot + c), sn = load1(p.sin.p, p.sin.t, r * rot + c);
      v = c < half ? v * cs - buf[c + half] * sn : v * cs + buf[c - half] * sn;
    }
    store1(out.p, out.t, o + c, v);
  }
}

// The same for head_dim = 32·VPL (64, 128, 256) on 16-bit qkv: each lane holds VPL consecutive channels of a head
// (one 4/8/16-byte access), the rotate-half partner comes from lane ± (rot/2)/VPL by a shuffle, and each warp
// loads kQkHeadsPerWarp heads before working on them so that more bytes are in flight.
constexpr int kQkHeadsPerWarp = 2;

template <int VPL>
struct LaneVec;
template <>
struct LaneVec<2> {
  using type = uint32_t;
};
template <>
struct LaneVec<4> {
  using type = uint2;
};
template <>
struct LaneVec<8> {
  using type = uint4;
};

template <int VPL>
__device__ __forceinline__ void load_lane(const void* base, Elem t, int64_t i, float (&v)[VPL]) {
  using V = typename LaneVec<VPL>::type;
  const V raw = *reinterpret_cast<const V*>(static_cast<const uint16_t*>(base) + i);
  const uint16_t* h = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
  for (int j = 0; j < VPL; ++j)
    v[j] = t == Elem::BF16 ? __bfloat162float(__ushort_as_bfloat16(h[j])) : __half2float(__ushort_as_half(h[j]));
}

template <int VPL>
__device__ __forceinline__ void store_lane(void* base, Elem t, int64_t i, const float (&v)[VPL]) {
  using V = typename LaneVec<VPL>::type;
  V raw;
  uint16_t* h = reinterpret_cast<uint16_t*>(&raw);
#pragma unroll
  for (int j = 0; j < VPL; ++j)
    h[j] = t == Elem::BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v[j])) : __half_as_ushort(__float2half_rn(v[j]));
  *reinterpret_cast<V*>(static_cast<uint16_t*>(base) + i) = raw;
}

template <int VPL>
__global__ void qk_norm_rope_lanes_kernel(QkParams p) {
  constexpr int Dh = 32 * VPL;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t tasks = p.rows * p.heads;
  const int64_t first = (int64_t(blockIdx.x) * kQkWarps + warp) * kQkHeadsPerWarp;
  const int c0 = lane * VPL, half = p.rot / 2, shift = half / VPL;
  const Out out = p.dst.p ? p.dst : p.qkv;
  float v[kQkHeadsPerWarp][VPL];
#pragma unroll
  for (int k = 0; k < kQkHeadsPerWarp; ++k) {
    if (first + k < tasks) {
      int64_t r;
      int h;
      qk_task(p, first + k, r, h);
      load_lane<VPL>(p.qkv.p, p.qkv.t, r * p.W + int64_t(h) * Dh + c0, v[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < kQkHeadsPerWarp; ++k) {
    if (first + k >= tasks) break;  // uniform over the warp
    int64_t r;
    int h;
    qk_task(p, first + k, r, h);
    const bool transform = h < p.heads_q + p.heads_kv;  // uniform over the warp
    if (transform && p.qk_norm) {
      float ss = 0.f;
#pragma unroll
      for (int j = 0; j < VPL; ++j) ss += v[k][j] * v[k][j];
      const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(Dh) + p.eps);
      const In w = h < p.heads_q ? p.wq : p.wk;
#pragma unroll
      for (int j = 0; j < VPL; ++j) v[k][j] = w.p ? v[k][j] * inv * load1(w.p, w.t, c0 + j) : v[k][j] * inv;
    }
    if (transform && p.rot) {
      float up[VPL], down[VPL];
#pragma unroll
      for (int j = 0; j < VPL; ++j) {
        up[j] = __shfl_sync(0xffffffffu, v[k][j], (lane + shift) & 31);    // channel c + half
        down[j] = __shfl_sync(0xffffffffu, v[k][j], (lane - shift) & 31);  // channel c - half
      }
      if (c0 < p.rot) {  // rot % VPL == 0: a lane's channels are all rotated or none
#pragma unroll
        for (int j = 0; j < VPL; ++j) {
          const float cs = load1(p.cos.p, p.cos.t, r * p.rot + c0 + j);
          const float sn = load1(p.sin.p, p.sin.t, r * p.rot + c0 + j);
          v[k][j] = c0 < half ? v[k][j] * cs - up[j] * sn : v[k][j] * cs + down[j] * sn;
        }
      }
    }
    store_lane<VPL>(out.p, out.t, qk_out(p, r, h) + c0, v[k]);
  }
}

// The in-place form for 16-bit qkv, one block of kQkRowThreads per row: a head's Dh channels belong to Dh/8
// consecutive threads (16 bytes each, Dh/8 dividing 32, so a head never straddles a warp), the block covers
// kQkRowThreads·8/Dh heads per pass and every pass's load is issued before any is used. A thread keeps its channel
// slot across passes, so its cos/sin (rot/2 a multiple of 8: a slot is wholly rotated or not) are loaded once per
// row (the norm weights, the same for every row, come from L1 each pass); the rotate-half partner is the slot
// rot/16 threads away, read by a shuffle. Registers are held to 64 so that 4 rows run per SM.
constexpr int kQkRowThreads = 256;
constexpr int kQkRowPasses = 4;  // passes whose loads are in flight together

template <int TPH>
__global__ void __launch_bounds__(kQkRowThreads, 4) qk_norm_rope_rows_kernel(QkParams p) {
  constexpr int kHeadsPerPass = kQkRowThreads / TPH, Dh = 8 * TPH;
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x & 31, slot = threadIdx.x % TPH, c0 = 8 * slot;
  const int head_in_pass = threadIdx.x / TPH, heads = p.heads_q + p.heads_kv, half = p.rot / 2, shift = half / 8;
  const bool rotated = c0 < p.rot;
  float cs[8], sn[8];
  if (rotated) {
    load8(p.cos.p, p.cos.t, r * p.rot + c0, cs);
    load8(p.sin.p, p.sin.t, r * p.rot + c0, sn);
  }
  uint16_t* const row = static_cast<uint16_t*>(p.qkv.p) + r * p.W;
  for (int pass0 = 0; pass0 * kHeadsPerPass < heads; pass0 += kQkRowPasses) {
    uint4 raw[kQkRowPasses];
#pragma unroll
    for (int k = 0; k < kQkRowPasses; ++k) {
      const int h = (pass0 + k) * kHeadsPerPass + head_in_pass;
      raw[k] = h < heads ? *reinterpret_cast<const uint4*>(row + int64_t(h) * Dh + c0) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kQkRowPasses; ++k) {
      const int h = (pass0 + k) * kHeadsPerPass + head_in_pass;
      if ((pass0 + k) * kHeadsPerPass >= heads) break;  // uniform over the block
      // Every lane of the warp takes part in the reduction and the shuffles; only lanes with a real head store.
      float v[8];
      unpack8(raw[k], p.qkv.t, v);  // zeros past the last head
      if (p.qk_norm) {
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
#pragma unroll
        for (int o = TPH / 2; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        const float inv = rsqrtf(ss / static_cast<float>(Dh) + p.eps);
        const In w = h < p.heads_q ? p.wq : p.wk;
        float wv[8];
        load8_or_ones(w.p, w.t, c0, wv);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = v[j] * inv * wv[j];
      }
      if (p.rot) {
        float up[8], down[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          up[j] = __shfl_sync(0xffffffffu, v[j], (lane + shift) & 31);    // channel c + half
          down[j] = __shfl_sync(0xffffffffu, v[j], (lane - shift) & 31);  // channel c - half
        }
        if (rotated) {
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] = c0 < half ? v[j] * cs[j] - up[j] * sn[j] : v[j] * cs[j] + down[j] * sn[j];
        }
      }
      if (h < heads) store8(p.qkv.p, p.qkv.t, r * p.W + int64_t(h) * Dh + c0, v);
    }
  }
}

// ---- flash attention ----

constexpr int kFlashWarps = 4;
constexpr int kFlashRows = 16 * kFlashWarps;  // query rows per block: 16 per warp
constexpr int kFlashThreads = 32 * kFlashWarps;

template <int DP>
struct FlashShape {
  static constexpr int kBK = DP > 128 ? 32 : 64;  // keys per tile
  static constexpr int kPitch = DP + 8;           // shared-memory row pitch in elements (conflict-free, 16 B aligned)
  static constexpr size_t kSmemBytes = size_t(kFlashRows + 4 * kBK) * kPitch * 2;  // Q + 2 stages of K and V
};


// Rows [row0, row0 + nrows) of one head (head_dim channels at `src`, consecutive rows `stride` apart) into a shared
// tile of DP columns; rows at or past `limit` and channels at or past `Dh` become zeros (so that masked keys
// contribute exactly 0·0 and padded channels add nothing).
template <int DP>
__device__ __forceinline__ void load_tile(uint16_t* dst, const uint16_t* src, int64_t stride, int row0, int nrows,
                                          int limit, int Dh, bool vec) {
  constexpr int kChunks = DP / 8;
  constexpr int kPitch = FlashShape<DP>::kPitch;
  for (int i = threadIdx.x; i < nrows * kChunks; i += kFlashThreads) {
    const int r = i / kChunks, d = (i - r * kChunks) * 8;
    uint16_t* s = dst + r * kPitch + d;
    const int gr = row0 + r;
    if (vec) {
      const bool ok = gr < limit && d < Dh;  // Dh % 8 == 0 on this path: a chunk is all in or all out
      cp_async16(s, ok ? src + int64_t(gr) * stride + d : src, ok ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) s[e] = (gr < limit && d + e < Dh) ? src[int64_t(gr) * stride + d + e] : uint16_t(0);
    }
  }
}

template <typename T, int DP>
__global__ void __launch_bounds__(kFlashThreads) flash_attention_kernel(FlashParams p, bool vec) {
  using Shape = FlashShape<DP>;
  constexpr int BK = Shape::kBK, PITCH = Shape::kPitch;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* Ks0 = Qs + kFlashRows * PITCH;
  uint16_t* Vs0 = Ks0 + 2 * BK * PITCH;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int h = blockIdx.y, b = blockIdx.z, hk = h / (p.heads_q / p.heads_kv);
  const int S = p.seq_len, Dh = p.head_dim, q0 = blockIdx.x * kFlashRows;
  const uint16_t* qg = static_cast<const uint16_t*>(p.q) + b * p.q_batch + h * p.q_head;
  const uint16_t* kg = static_cast<const uint16_t*>(p.k) + b * p.kv_batch + hk * p.kv_head;
  const uint16_t* vg = static_cast<const uint16_t*>(p.v) + b * p.kv_batch + hk * p.kv_head;
  const int kv_end = p.causal ? min(S, q0 + kFlashRows) : S;
  const int tiles = (kv_end + BK - 1) / BK;

  load_tile<DP>(Qs, qg, p.q_row, q0, kFlashRows, S, Dh, vec);
  load_tile<DP>(Ks0, kg, p.k_row, 0, BK, kv_end, Dh, vec);
  load_tile<DP>(Vs0, vg, p.v_row, 0, BK, kv_end, Dh, vec);
  cp_async_commit();

  float o[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const int qr0 = q0 + warp * 16 + g, qr1 = qr0 + 8;
  const uint16_t* qw = Qs + (warp * 16 + g) * PITCH + 2 * c;

  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      const int nb = (j + 1) & 1;
      load_tile<DP>(Ks0 + nb * BK * PITCH, kg, p.k_row, (j + 1) * BK, BK, kv_end, Dh, vec);
      load_tile<DP>(Vs0 + nb * BK * PITCH, vg, p.v_row, (j + 1) * BK, BK, kv_end, Dh, vec);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint16_t* Kc = Ks0 + (j & 1) * BK * PITCH;
    const uint16_t* Vc = Vs0 + (j & 1) * BK * PITCH;

    // S = Q·Kᵀ for this warp's 16 rows and BK keys.
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

    // Mask, scale into the log2 domain, online softmax update.
    const int k0 = j * BK;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < BK / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int kc = k0 + n * 8 + 2 * c + e;
        const bool out = kc >= kv_end;
        float s0 = sc[n][e] * scale_log2, s1 = sc[n][2 + e] * scale_log2;
        if (out || (p.causal && kc > qr0)) s0 = -INFINITY;
        if (out || (p.causal && kc > qr1)) s1 = -INFINITY;
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

    // O += P·V, P rounded to the 16-bit input type (flash semantics).
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
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
  T* og = static_cast<T*>(p.o) + b * p.o_batch + h * p.o_head;
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) {
    const int d = n * 8 + 2 * c;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (d + e >= Dh) continue;
      if (qr0 < S) og[int64_t(qr0) * p.o_row + d + e] = T(o[n][e] * inv0);
      if (qr1 < S) og[int64_t(qr1) * p.o_row + d + e] = T(o[n][2 + e] * inv1);
    }
  }
}

template <typename T, int DP>
void launch_flash_dp(const FlashParams& p, bool vec, cudaStream_t s) {
  constexpr size_t smem = FlashShape<DP>::kSmemBytes;
  static bool configured = false;  // raise the dynamic shared-memory limit once per instantiation
  if (!configured) {
    H3_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<T, DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)),
                  "flash attention");
    configured = true;
  }
  const dim3 grid((p.seq_len + kFlashRows - 1) / kFlashRows, p.heads_q, p.batch);
  flash_attention_kernel<T, DP><<<grid, kFlashThreads, smem, s>>>(p, vec);
  H3_CUDA_LAUNCH_CHECK(s, "flash attention");
}

template <typename T>
void launch_flash_typed(const FlashParams& p, bool vec, cudaStream_t s) {
  const int d = p.head_dim;
  if (d <= 32) return launch_flash_dp<T, 32>(p, vec, s);
  if (d <= 64) return launch_flash_dp<T, 64>(p, vec, s);
  if (d <= 80) return launch_flash_dp<T, 80>(p, vec, s);
  if (d <= 96) return launch_flash_dp<T, 96>(p, vec, s);
  if (d <= 128) return launch_flash_dp<T, 128>(p, vec, s);
  if (d <= 160) return launch_flash_dp<T, 160>(p, vec, s);
  if (d <= 192) return launch_flash_dp<T, 192>(p, vec, s);
  return launch_flash_dp<T, 256>(p, vec, s);
}


}  // namespace

void launch_qk_norm_rope(Out qkv, Out dst, int64_t rows, int heads_q, int heads_kv, int head_dim, bool qk_norm,
                         float eps, In wq, In wk, int rot, In cos, In sin, bool row_kernel, cudaStream_t s) {
  if (rows == 0 || (!dst.p && !qk_norm && rot == 0)) return;
  QkParams p;
  p.qkv = qkv;
  p.dst = dst;
  p.rows = rows;
  p.W = int64_t(heads_q + 2 * heads_kv) * head_dim;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.Dh = head_dim;
  p.heads = dst.p ? heads_q + 2 * heads_kv : heads_q + heads_kv;
  p.qk_norm = qk_norm;
  p.eps = eps;
  p.wq = wq;
  p.wk = wk;
  p.rot = rot;
  p.cos = cos;
  p.sin = sin;
  // The row kernel: in place, 16-bit qkv, head_dim 64/128/256, rot/2 a multiple of 8, 16-byte aligned operands.
  const int tph = head_dim / 8;
  if (row_kernel && !dst.p && qkv.t != Elem::F32 && head_dim % 8 == 0 && (tph == 8 || tph == 16 || tph == 32) &&
      rot % 16 == 0 && rows < (int64_t(1) << 31) &&
      all_aligned({qkv.p, cos.p, sin.p, wq.p, wk.p})) {
    const unsigned grid = static_cast<unsigned>(rows);
    if (tph == 8)
      qk_norm_rope_rows_kernel<8><<<grid, kQkRowThreads, 0, s>>>(p);
    else if (tph == 16)
      qk_norm_rope_rows_kernel<16><<<grid, kQkRowThreads, 0, s>>>(p);
    else
      qk_norm_rope_rows_kernel<32><<<grid, kQkRowThreads, 0, s>>>(p);
    H3_CUDA_LAUNCH_CHECK(s, "attention q/k norm + rope");
    return;
  }
  const int64_t tasks = rows * p.heads;
  // The lane-vector kernel: 16-bit qkv, head_dim 64/128/256, rot/2 a multiple of the channels per lane.
  const int vpl = head_dim / 32;
  const bool lanes = qkv.t != Elem::F32 && (!dst.p || dst.t == qkv.t) && head_dim % 32 == 0 &&
                     (vpl == 2 || vpl == 4 || vpl == 8) && rot % (2 * vpl) == 0 &&
                     (reinterpret_cast<uintptr_t>(qkv.p) & 15u) == 0 && (reinterpret_cast<uintptr_t>(dst.p) & 15u) == 0;
  const int64_t per_block = lanes ? kQkWarps * kQkHeadsPerWarp : kQkWarps;
  const int64_t blocks = (tasks + per_block - 1) / per_block;
  H3_CHECK(blocks < (int64_t(1) << 31), "attention: too many rows for the q/k kernel");
  const unsigned grid = static_cast<unsigned>(blocks);
  if (lanes) {
    if (vpl == 2)
      qk_norm_rope_lanes_kernel<2><<<grid, kQkWarps * 32, 0, s>>>(p);
    else if (vpl == 4)
      qk_norm_rope_lanes_kernel<4><<<grid, kQkWarps * 32, 0, s>>>(p);
    else
      qk_norm_rope_lanes_kernel<8><<<grid, kQkWarps * 32, 0, s>>>(p);
  } else {
    qk_norm_rope_kernel<<<grid, kQkWarps * 32, size_t(kQkWarps) * head_dim * sizeof(float), s>>>(p);
  }
  H3_CUDA_LAUNCH_CHECK(s, "attention q/k norm + rope");
}

void launch_flash_attention(const FlashParams& p, cudaStream_t s) {
  if (p.seq_len == 0 || p.batch == 0) return;
  H3_CHECK(p.batch < 65536 && p.heads_q < 65536, "flash attention: ", p.batch, " segments x ", p.heads_q,
           " heads exceed the launch grid");
  H3_CHECK(p.head_dim > 0 && p.head_dim <= kFlashMaxHeadDim, "flash attention: head_dim ", p.head_dim,
           " must be in [1, ", kFlashMaxHeadDim, "]");
  H3_CHECK(p.t != Elem::F32, "flash attention needs 16-bit q/k/v");
  const bool vec = p.head_dim % 8 == 0 && p.q_row % 8 == 0 && p.k_row % 8 == 0 && p.v_row % 8 == 0 &&
                   p.q_batch % 8 == 0 && p.kv_batch % 8 == 0 && p.q_head % 8 == 0 && p.kv_head % 8 == 0 &&
                   aligned16(p.q) && aligned16(p.k) && aligned16(p.v);
  if (p.t == Elem::BF16)
    launch_flash_typed<__nv_bfloat16>(p, vec, s);
  else
    launch_flash_typed<__half>(p, vec, s);
}

}  // namespace h3::cuda
