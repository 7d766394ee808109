// The CUDA backend's memory-bound kernels: conversion and fill, the row normalizations (RMSNorm, LayerNorm,
// RMSNorm + AdaLN modulate with the per-row table lookup), the gated and plain residual adds, the gated residual
// fused with the modulate that follows it, SwiGLU, SiLU, GELU, bias add, row scatter/gather and the row-pair pooling
// and restore of token reduction. Each makes one
// pass over its rows: 16-byte loads of 8 elements where the row width and the pointers allow it, f32 arithmetic, one
// rounding at the store.
#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/fp8_layout.h"

namespace h3::cuda {

namespace {

constexpr int kThreads = 256;


// Enough blocks of kThreads to cover `work` items, capped (grid-stride loops do the rest).
unsigned flat_blocks(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, 132 * 32));
}

// Threads for a block that owns one row of `groups` 8-element groups.
unsigned row_threads(int64_t groups) {
  const int64_t t = (groups + 31) / 32 * 32;
  return static_cast<unsigned>(std::clamp<int64_t>(t, 32, 512));
}

// One block per row.
unsigned row_blocks(int64_t rows) {
  H3_CHECK(rows < (int64_t(1) << 31), "CUDA backend: ", rows, " rows exceed the 2^31 a row kernel can cover");
  return static_cast<unsigned>(rows);
}

__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }
__device__ __forceinline__ int64_t global_thread() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }

// Elements of the 8-group starting at `pos` that lie before `end`.
__device__ __forceinline__ int group_len(int64_t end, int64_t pos) { return end - pos < 8 ? int(end - pos) : 8; }

__device__ __forceinline__ void report(int* err, DeviceError e) {
  if (err) atomicExch(err, static_cast<int>(e));
}

// ---- memory ----

__global__ void convert_kernel(In src, Out dst, int64_t n, bool vec) {
  for (int64_t i = global_thread() * 8; i < n; i += grid_stride() * 8) {
    const int m = group_len(n, i);
    const bool v = vec && m == 8;
    float x[8];
    load_group(src.p, src.t, i, m, v, x);
    store_group(dst.p, dst.t, i, m, v, x);
  }
}

__global__ void fill_kernel(Out dst, int64_t n, float value, bool vec) {
  float x[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = value;
  for (int64_t i = global_thread() * 8; i < n; i += grid_stride() * 8) {
    const int m = group_len(n, i);
    store_group(dst.p, dst.t, i, m, vec && m == 8, x);
  }
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void random_normal_kernel(Out dst, int64_t n, uint64_t seed, float mean, float stddev) {
  const uint64_t key = splitmix64(seed);
  for (int64_t i = global_thread(); i < n; i += grid_stride()) {
    const uint64_t h = splitmix64(key ^ static_cast<uint64_t>(i));
    const float u1 = (static_cast<float>(h >> 40) + 1.f) * (1.f / 16777216.f);  // (0, 1]
    const float u2 = static_cast<float>(h & 0xffffffu) * (1.f / 16777216.f);    // [0, 1)
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    store1(dst.p, dst.t, i, z * stddev + mean);
  }
}

// ---- rows ----
// The arithmetic the row kernels share, written once so that the fused kernel and the kernels it replaces round
// identically (same operations, same order, same contractions).

// x + g·y: the gated residual of one element (one fused multiply-add); also the scaled residual add (g: the
// per-channel scale, or 1), so residual_add_kernel and residual_rms_norm_kernel round alike by construction.
__device__ __forceinline__ float gated_add(float x, float g, float y) { return __fmaf_rn(g, y, x); }

// ss + Σ v[j]², j ascending.
__device__ __forceinline__ float add_squares(float ss, const float (&v)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) ss = __fmaf_rn(v[j], v[j], ss);
  return ss;
}

// 1 / sqrt(mean + eps) from the row's sum of squares.
__device__ __forceinline__ float inv_rms(float sum_squares, int64_t D, float eps) {
  return rsqrtf(sum_squares / static_cast<float>(D) + eps);
}

// AdaLN modulate of one normalized element: (v · inv · w) · (1 + scale) + shift.
__device__ __forceinline__ float modulated(float v, float inv, float w, float scale, float shift) {
  return __fmaf_rn(v * inv * w, 1.f + scale, shift);
}

// Whether table row t exists (t is uniform over the block; thread 0 reports when it does not).
__device__ __forceinline__ bool table_row_ok(int32_t t, int64_t table_rows, int* err) {
  if (t >= 0 && t < table_rows) return true;
  if (threadIdx.x == 0) report(err, DeviceError::TableRowOutOfRange);
  return false;
}

// 1 / sqrt(mean(x²) + eps) over the D elements of the row at `base`, reduced across the block (every thread gets it).
__device__ float row_inv_rms(In x, int64_t base, int64_t D, float eps, bool vec, float* scratch) {
  float ss = 0.f;
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    float v[8];
    load_group(x.p, x.t, base + c, group_len(D, c), vec, v);
    ss = add_squares(ss, v);
  }
  return inv_rms(block_sum(ss, scratch), D, eps);
}

__global__ void rms_norm_kernel(In x, In w, float eps, Out y, int64_t D, bool vec) {
  __shared__ float scratch[32];
  const int64_t base = int64_t(blockIdx.x) * D;
  const float inv = row_inv_rms(x, base, D, eps, vec, scratch);
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    const int m = group_len(D, c);
    float v[8], wv[8];
    load_group(x.p, x.t, base + c, m, vec, v);
    if (w.p) load_group(w.p, w.t, c, m, vec, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = w.p ? v[j] * inv * wv[j] : v[j] * inv;
    store_group(y.p, y.t, base + c, m, vec, v);
  }
}

__global__ void layer_norm_kernel(In x, In w, In b, float eps, Out y, int64_t D, bool vec) {
  __shared__ float scratch[32];
  const int64_t base = int64_t(blockIdx.x) * D;
  float s = 0.f;
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    float v[8];
    load_group(x.p, x.t, base + c, group_len(D, c), vec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) s += v[j];
  }
  const float mean = block_sum(s, scratch) / static_cast<float>(D);
  float sq = 0.f;
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    const int m = group_len(D, c);
    float v[8];
    load_group(x.p, x.t, base + c, m, vec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) sq += j < m ? (v[j] - mean) * (v[j] - mean) : 0.f;
  }
  const float inv = rsqrtf(block_sum(sq, scratch) / static_cast<float>(D) + eps);
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    const int m = group_len(D, c);
    float v[8], wv[8], bv[8];
    load_group(x.p, x.t, base + c, m, vec, v);
    if (w.p) load_group(w.p, w.t, c, m, vec, wv);
    if (b.p) load_group(b.p, b.t, c, m, vec, bv);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float r = (v[j] - mean) * inv;
      if (w.p) r *= wv[j];
      if (b.p) r += bv[j];
      v[j] = r;
    }
    store_group(y.p, y.t, base + c, m, vec, v);
  }
}

__global__ void rms_norm_modulate_kernel(In x, In w, float eps, In table, int64_t table_rows, int P, int shift_param,
                                         int scale_param, const int32_t* idx, Out y, int64_t D, bool vec, int* err) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, base = r * D;
  const int32_t t = idx[r];
  if (!table_row_ok(t, table_rows, err)) return;  // uniform over the block: before any barrier
  const int64_t shift_base = (int64_t(t) * P + shift_param) * D, scale_base = (int64_t(t) * P + scale_param) * D;
  const float inv = row_inv_rms(x, base, D, eps, vec, scratch);
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    const int m = group_len(D, c);
    float v[8], wv[8], sh[8], sc[8];
    load_group(x.p, x.t, base + c, m, vec, v);
    load_group(w.p, w.t, c, m, vec, wv);
    load_group(table.p, table.t, shift_base + c, m, vec, sh);
    load_group(table.p, table.t, scale_base + c, m, vec, sc);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = modulated(v[j], inv, wv[j], sc[j], sh[j]);
    store_group(y.p, y.t, base + c, m, vec, v);
  }
}

constexpr int kCachedRowThreads = 128;  // threads per row of the register-cached row kernels

// Stores a register-cached row (G groups of 8 per thread, T threads per row: group g of thread t at column
// (t + g·T)·8) to row r of y.
template <int G, int T>
__device__ __forceinline__ void store_row(const float (&v)[G][8], Out y, int64_t r, int64_t D, float* /*scratch*/) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t c = (int64_t(threadIdx.x) + g * T) * 8;
    if (c < D) store8(y.p, y.t, r * D + c, v[g]);
  }
}

// The same row quantized to row r of q (kernels_fp8.h's Fp8Out): each value first rounded to q.rounding — what
// the unfused producer stores and the separate quantization pass reads back — then kernels_fp8.cu's group amax,
// scale and codes: one group per row (the block's maximum), or per 128 columns (16 consecutive threads of one
// group index: a half-warp's maximum). Every thread of the block must call it.
template <int G, int T>
__device__ __forceinline__ void store_row(float (&v)[G][8], const Fp8Out& q, int64_t r, int64_t D, float* scratch) {
  static_assert(T % 16 == 0, "a 128-column group must be one half-warp's 16 groups of 8");
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) v[g][j] = rounded_to(q.rounding, v[g][j]);
  float row_scale = 1.f;
  if (!q.block) {
    float amax = 0.f;
#pragma unroll
    for (int g = 0; g < G; ++g)
      if ((int64_t(threadIdx.x) + g * T) * 8 < D)
#pragma unroll
        for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fp8_finite_magnitude(v[g][j]));
    row_scale = fp8_group_scale(fp8_block_max(amax, scratch));
    if (threadIdx.x == 0) q.scale[r] = row_scale;
  }
  const Fp8Divisor row_divisor = fp8_divisor(row_scale);  // one reciprocal per row (per group when block)
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t c = (int64_t(threadIdx.x) + g * T) * 8;
    Fp8Divisor d = row_divisor;
    if (q.block) {
      float amax = 0.f;
      if (c < D)
#pragma unroll
        for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fp8_finite_magnitude(v[g][j]));
      const float s = fp8_group_scale(fp8_half_warp_max(amax));
      if (c < D && (threadIdx.x & 15) == 0) q.scale[fp8_block_scale_index(r, c / kFp8Block, q.rows, D)] = s;
      d = fp8_divisor(s);
    }
    if (c < D) *reinterpret_cast<uint2*>(q.codes + r * D + c) = fp8_encode8(v[g], d);
  }
}

// The second pass of the register-cached row kernels below: the row's cached groups v normalized by inv, weighted
// by w (null: 1) and, when `modulate`, AdaLN-modulated with the table rows at shift_base / scale_base; stored to
// row r of y (store_row: an Out, or an Fp8Out that quantizes the row as it stores it).
template <int G, typename Y>
__device__ __forceinline__ void store_normalized_row(float (&v)[G][8], float inv, In w, bool modulate, In table,
                                                     int64_t shift_base, int64_t scale_base, const Y& y, int64_t r,
                                                     int64_t D, float* scratch) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t c = (int64_t(threadIdx.x) + g * kCachedRowThreads) * 8;
    if (c >= D) continue;
    float wv[8];
    load8_or_ones(w.p, w.t, c, wv);
    if (modulate) {
      float sh[8], sc[8];
      load8(table.p, table.t, shift_base + c, sh);
      load8(table.p, table.t, scale_base + c, sc);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[g][j] = modulated(v[g][j], inv, wv[j], sc[j], sh[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[g][j] = v[g][j] * inv * wv[j];  // · 1 exactly when there is no weight
    }
  }
  store_row<G, kCachedRowThreads>(v, y, r, D, scratch);
}

// RMSNorm (+ AdaLN modulate when table.p) of rows that fit in registers: 128 threads per row, each caching up to G
// groups of 8, so x is read once and more rows are in flight per SM than with the one-row-per-big-block kernels.
// Vector path only (D % 8 == 0, aligned). idx null: plain RMSNorm with optional weight.
template <int G, typename Y>
__global__ void __launch_bounds__(kCachedRowThreads) rms_norm_cached_kernel(In x, In w, float eps, In table,
                                                                           int64_t table_rows, int P, int shift_param,
                                                                           int scale_param, const int32_t* idx, Y y,
                                                                           int64_t D, int* err) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, base = r * D;
  int64_t shift_base = 0, scale_base = 0;
  if (idx) {
    const int32_t t = idx[r];
    if (!table_row_ok(t, table_rows, err)) return;  // uniform over the block: before any barrier
    shift_base = (int64_t(t) * P + shift_param) * D;
    scale_base = (int64_t(t) * P + scale_param) * D;
  }
  float v[G][8];
  float ss = 0.f;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t c = (int64_t(threadIdx.x) + g * kCachedRowThreads) * 8;
    if (c < D) {
      load8(x.p, x.t, base + c, v[g]);
      ss = add_squares(ss, v[g]);
    }
  }
  const float inv = inv_rms(block_sum(ss, scratch), D, eps);
  store_normalized_row<G>(v, inv, w, idx != nullptr, table, shift_base, scale_base, y, r, D, scratch);
}

// Calls launch(std::integral_constant<int, G>{}) with the register-cached kernels' G for a row of D elements
// (D % 8 == 0) over T threads and returns true, or returns false when the row does not fit (D > 8 · 8 · T).
template <int T = kCachedRowThreads, typename Launch>
bool with_cached_groups(int64_t D, Launch launch) {
  const int64_t groups_per_thread = (D / 8 + T - 1) / T;
  switch (groups_per_thread) {
    case 1: launch(std::integral_constant<int, 1>{}); return true;
    case 2: launch(std::integral_constant<int, 2>{}); return true;
    case 3:
    case 4: launch(std::integral_constant<int, 4>{}); return true;
    case 5:
    case 6: launch(std::integral_constant<int, 6>{}); return true;
    case 7: launch(std::integral_constant<int, 7>{}); return true;  // the released SwiGLU's 14,336 / 256 threads
    case 8: launch(std::integral_constant<int, 8>{}); return true;
    default: return false;
  }
}

// Launches the register-cached kernel when the row fits (returns false otherwise). y: an Out or an Fp8Out.
template <typename Y>
bool launch_rms_cached(In x, In w, float eps, In table, int64_t table_rows, int P, int shift_param, int scale_param,
                       const int32_t* idx, Y y, int64_t rows, int64_t D, int* err, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(rows);
  return with_cached_groups(D, [&](auto G) {
    rms_norm_cached_kernel<decltype(G)::value, Y><<<grid, kCachedRowThreads, 0, s>>>(
        x, w, eps, table, table_rows, P, shift_param, scale_param, idx, y, D, err);
  });
}

// The residual update of the fused row kernels on a register-cached row: for each group of 8, x and y are loaded,
// update(c, x, y) turns x into the new values, which are stored, then rounded as stored (what the unfused norm
// kernel would read back). Returns the thread's sum of squares of the stored values.
template <int G, typename Update>
__device__ __forceinline__ float update_cached_row(Out x, In y, int64_t base, int64_t D, float (&v)[G][8],
                                                   Update update) {
  float ss = 0.f;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t c = (int64_t(threadIdx.x) + g * kCachedRowThreads) * 8;
    if (c < D) {
      float yv[8];
      load8(x.p, x.t, base + c, v[g]);
      load8(y.p, y.t, base + c, yv);
      update(c, v[g], yv);
      store8(x.p, x.t, base + c, v[g]);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[g][j] = rounded_to(x.t, v[g][j]);
      ss = add_squares(ss, v[g]);
    }
  }
  return ss;
}

// Gated residual, then RMSNorm + AdaLN modulate of the updated row, in one pass over x: rms_norm_cached_kernel's
// layout and arithmetic, so the result is bit-identical to gated_residual_kernel followed by that kernel. Each
// thread computes x + g·y for its groups, stores it (rounded to x's dtype), keeps the rounded values — what the
// unfused kernel would read back — and sums their squares; after the block reduction it modulates them into h.
// Vector path only (D % 8 == 0, every operand 16-byte aligned).
template <int G, typename H>
__global__ void __launch_bounds__(kCachedRowThreads)
    gated_residual_modulate_kernel(Out x, In y, RowTable gate, int gate_param, In w, float eps, RowTable modulation,
                                   int shift_param, int scale_param, H h, int64_t D, int* err) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, base = r * D;
  const int32_t gate_row = gate.idx[r], mod_row = modulation.idx[r];
  // Uniform over the block: every thread returns before any barrier.
  if (!table_row_ok(gate_row, gate.rows, err) || !table_row_ok(mod_row, modulation.rows, err)) return;
  const int64_t gate_base = (int64_t(gate_row) * gate.params + gate_param) * D;
  const int64_t shift_base = (int64_t(mod_row) * modulation.params + shift_param) * D;
  const int64_t scale_base = (int64_t(mod_row) * modulation.params + scale_param) * D;
  float v[G][8];
  const float ss = update_cached_row<G>(x, y, base, D, v, [&](int64_t c, float (&xv)[8], const float (&yv)[8]) {
    float gv[8];
    load8(gate.table.p, gate.table.t, gate_base + c, gv);
#pragma unroll
    for (int j = 0; j < 8; ++j) xv[j] = gated_add(xv[j], gv[j], yv[j]);
  });
  const float inv = inv_rms(block_sum(ss, scratch), D, eps);
  store_normalized_row<G>(v, inv, w, true, modulation.table, shift_base, scale_base, h, r, D, scratch);
}

// residual_add_kernel's x += y·s on a register-cached row, stored, then rms_norm_cached_kernel's normalization of
// the stored values (x's dtype rounding included).
template <int G>
__global__ void __launch_bounds__(kCachedRowThreads)
    residual_rms_norm_kernel(Out x, In y, In scale, In w, float eps, Out h, int64_t D) {
  __shared__ float scratch[32];
  const int64_t base = int64_t(blockIdx.x) * D;
  float v[G][8];
  const float ss = update_cached_row<G>(x, y, base, D, v, [&](int64_t c, float (&xv)[8], const float (&yv)[8]) {
    float sv[8];
    load8_or_ones(scale.p, scale.t, c, sv);
#pragma unroll
    for (int j = 0; j < 8; ++j) xv[j] = gated_add(xv[j], sv[j], yv[j]);
  });
  const float inv = inv_rms(block_sum(ss, scratch), D, eps);
  store_normalized_row<G>(v, inv, w, false, In{}, 0, 0, h, int64_t(blockIdx.x), D, scratch);
}

__global__ void gated_residual_kernel(Out x, In y, In table, int64_t table_rows, int P, int gate_param,
                                      const int32_t* idx, int64_t rows, int64_t D, bool vec, int* err) {
  const int64_t groups = (D + 7) / 8, total = rows * groups;
  for (int64_t g = global_thread(); g < total; g += grid_stride()) {
    const int64_t r = g / groups, c = (g - r * groups) * 8;
    const int32_t t = idx[r];
    if (t < 0 || t >= table_rows) {
      report(err, DeviceError::TableRowOutOfRange);
      continue;
    }
    const int m = group_len(D, c);
    float xv[8], yv[8], gv[8];
    load_group(x.p, x.t, r * D + c, m, vec, xv);
    load_group(y.p, y.t, r * D + c, m, vec, yv);
    load_group(table.p, table.t, (int64_t(t) * P + gate_param) * D + c, m, vec, gv);
#pragma unroll
    for (int j = 0; j < 8; ++j) xv[j] = gated_add(xv[j], gv[j], yv[j]);
    store_group(x.p, x.t, r * D + c, m, vec, xv);
  }
}

// vec: D % 8 == 0 and every pointer 16-byte aligned, so a group never straddles rows.
__global__ void residual_add_kernel(Out x, In y, In scale, int64_t n, int64_t D, bool vec) {
  for (int64_t i = global_thread() * 8; i < n; i += grid_stride() * 8) {
    const int m = group_len(n, i);
    const bool v = vec && m == 8;
    float xv[8], yv[8], sv[8];
    load_group(x.p, x.t, i, m, v, xv);
    load_group(y.p, y.t, i, m, v, yv);
    if (v) {
      load8_or_ones(scale.p, scale.t, i % D, sv);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) sv[j] = !scale.p ? 1.f : j < m ? load1(scale.p, scale.t, (i + j) % D) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) xv[j] = gated_add(xv[j], sv[j], yv[j]);
    store_group(x.p, x.t, i, m, v, xv);
  }
}

__global__ void add_bias_kernel(Out y, In bias, int64_t rows, int64_t N, bool vec) {
  const int64_t groups = (N + 7) / 8, total = rows * groups;
  for (int64_t g = global_thread(); g < total; g += grid_stride()) {
    const int64_t r = g / groups, c = (g - r * groups) * 8;
    const int m = group_len(N, c);
    float yv[8], bv[8];
    load_group(y.p, y.t, r * N + c, m, vec, yv);
    load_group(bias.p, bias.t, c, m, vec, bv);
#pragma unroll
    for (int j = 0; j < 8; ++j) yv[j] += bv[j];
    store_group(y.p, y.t, r * N + c, m, vec, yv);
  }
}

// Rows along grid y, 8-element groups of a row along x (no 64-bit division per group). (Four groups in flight per
// thread was measured slower on an H200: 0.104 vs 0.061 ms at 1,902 x 14,336, BENCHMARKS.md.)
__global__ void swiglu_kernel(In u, bool value_first, Out a, int64_t rows, int64_t F, bool vec) {
  const int64_t groups = (F + 7) / 8;
  const int64_t value_off = value_first ? 0 : F, gate_off = value_first ? F : 0;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t g = global_thread(); g < groups; g += grid_stride()) {
      const int64_t c = g * 8;
      const int m = group_len(F, c);
      float vv[8], gv[8];
      load_group(u.p, u.t, r * 2 * F + value_off + c, m, vec, vv);
      load_group(u.p, u.t, r * 2 * F + gate_off + c, m, vec, gv);
#pragma unroll
      for (int j = 0; j < 8; ++j) vv[j] *= silu_f(gv[j]);
      store_group(a.p, a.t, r * F + c, m, vec, vv);
    }
}

template <int kOp>  // 0 silu, 1 gelu tanh, 2 gelu erf
__global__ void activation_kernel(In x, Out y, int64_t n, bool vec) {
  for (int64_t i = global_thread() * 8; i < n; i += grid_stride() * 8) {
    const int m = group_len(n, i);
    const bool v = vec && m == 8;
    float xv[8];
    load_group(x.p, x.t, i, m, v, xv);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float z = xv[j];
      if (kOp == 0) xv[j] = silu_f(z);
      if (kOp == 1) xv[j] = 0.5f * z * (1.f + tanhf(0.7978845608028654f * (z + 0.044715f * z * z * z)));
      if (kOp == 2) xv[j] = 0.5f * z * (1.f + erff(z * 0.7071067811865476f));
    }
    store_group(y.p, y.t, i, m, v, xv);
  }
}

// Whether row index k lies in [0, bound); an index outside is reported once per block (the host raises it).
__device__ bool row_in_range(int32_t k, int64_t bound, int* err) {
  if (k >= 0 && k < bound) return true;
  if (threadIdx.x == 0) report(err, DeviceError::RowIndexOutOfRange);
  return false;
}

__global__ void move_rows_kernel(In src, const int32_t* idx, Out dst, int64_t D, bool scatter, int64_t bound, bool vec,
                                 int* err) {
  const int64_t i = blockIdx.x;
  const int32_t k = idx[i];
  if (!row_in_range(k, bound, err)) return;
  const int64_t from = (scatter ? i : k) * D, to = (scatter ? k : i) * D;
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    const int m = group_len(D, c);
    float v[8];
    load_group(src.p, src.t, from + c, m, vec, v);
    store_group(dst.p, dst.t, to + c, m, vec, v);
  }
}

// One block per pair i of rows (a, b): reduced[i] = full[a] (a == b) or (full[a] + full[b])·0.5.
__global__ void pool_row_pairs_kernel(In full, const int32_t* pairs, Out reduced, int64_t D, int64_t bound, bool vec,
                                      int* err) {
  const int64_t i = blockIdx.x;
  const int32_t a = pairs[2 * i], b = pairs[2 * i + 1];
  if (!row_in_range(a, bound, err) || !row_in_range(b, bound, err)) return;
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    const int m = group_len(D, c);
    float va[8];
    load_group(full.p, full.t, a * D + c, m, vec, va);
    if (a != b) {
      float vb[8];
      load_group(full.p, full.t, b * D + c, m, vec, vb);
#pragma unroll
      for (int j = 0; j < 8; ++j) va[j] = (va[j] + vb[j]) * 0.5f;
    }
    store_group(reduced.p, reduced.t, i * D + c, m, vec, va);
  }
}

// One block per pair i: full[a] = reduced[i] (a == b), else both members get reduced[i] − p_i added, p_i the pooled
// value as pool_row_pairs_kernel stored it (recomputed from the members before they are written).
__global__ void unpool_row_pairs_kernel(In reduced, const int32_t* pairs, Out full, int64_t D, int64_t bound, bool vec,
                                        int* err) {
  const int64_t i = blockIdx.x;
  const int32_t a = pairs[2 * i], b = pairs[2 * i + 1];
  if (!row_in_range(a, bound, err) || !row_in_range(b, bound, err)) return;
  for (int64_t c = threadIdx.x * 8; c < D; c += blockDim.x * 8) {
    const int m = group_len(D, c);
    float r[8];
    load_group(reduced.p, reduced.t, i * D + c, m, vec, r);
    if (a == b) {
      store_group(full.p, full.t, a * D + c, m, vec, r);
      continue;
    }
    float va[8], vb[8];
    load_group(full.p, full.t, a * D + c, m, vec, va);
    load_group(full.p, full.t, b * D + c, m, vec, vb);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float update = r[j] - rounded_to(full.t, (va[j] + vb[j]) * 0.5f);
      va[j] += update;
      vb[j] += update;
    }
    store_group(full.p, full.t, a * D + c, m, vec, va);
    store_group(full.p, full.t, b * D + c, m, vec, vb);
  }
}

// ---- producers of FP8 activations (issue 18) ----

constexpr int kSwigluFp8Threads = 256;  // a row of the released model's 14,336 SwiGLU outputs is 7 groups a thread

// SwiGLU of one row per block, cached in registers (swiglu_kernel's arithmetic), quantized as it is stored. Up to 7
// groups a thread the registers are held to 80, three blocks per SM: the row's loads are all issued before its
// block-wide maximum, so resident blocks are what overlaps one row's memory with another's arithmetic (BENCHMARKS.md,
// session 12).
template <int G>
__global__ void __launch_bounds__(kSwigluFp8Threads, G <= 7 ? 3 : 2)
    swiglu_fp8_kernel(In u, bool value_first, Fp8Out q, int64_t F) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t value_off = value_first ? 0 : F, gate_off = value_first ? F : 0;
  float v[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t c = (int64_t(threadIdx.x) + g * kSwigluFp8Threads) * 8;
    float gv[8];
    if (c < F) {
      load8(u.p, u.t, r * 2 * F + value_off + c, v[g]);
      load8(u.p, u.t, r * 2 * F + gate_off + c, gv);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[g][j] = gv[j] = 0.f;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) v[g][j] *= silu_f(gv[j]);
  }
  store_row<G, kSwigluFp8Threads>(v, q, r, F, scratch);
}

}  // namespace

void launch_convert(In src, Out dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  convert_kernel<<<flat_blocks((n + 7) / 8), kThreads, 0, s>>>(src, dst, n, all_aligned({src.p, dst.p}));
  H3_CUDA_LAUNCH_CHECK(s, "convert");
}

void launch_fill(Out dst, int64_t n, float value, cudaStream_t s) {
  if (n == 0) return;
  fill_kernel<<<flat_blocks((n + 7) / 8), kThreads, 0, s>>>(dst, n, value, aligned16(dst.p));
  H3_CUDA_LAUNCH_CHECK(s, "fill");
}

void launch_fill_random_normal(Out dst, int64_t n, uint64_t seed, float stddev, cudaStream_t s, float mean) {
  if (n == 0) return;
  random_normal_kernel<<<flat_blocks(n), kThreads, 0, s>>>(dst, n, seed, mean, stddev);
  H3_CUDA_LAUNCH_CHECK(s, "fill_random_normal");
}

void launch_rms_norm(In x, In w, float eps, Out y, int64_t rows, int64_t D, cudaStream_t s) {
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({x.p, w.p, y.p});
  if (!(vec && launch_rms_cached(x, w, eps, In{}, 0, 0, 0, 0, nullptr, y, row_blocks(rows), D, nullptr, s)))
    rms_norm_kernel<<<row_blocks(rows), row_threads((D + 7) / 8), 0, s>>>(x, w, eps, y, D, vec);
  H3_CUDA_LAUNCH_CHECK(s, "rms_norm");
}

void launch_layer_norm(In x, In w, In b, float eps, Out y, int64_t rows, int64_t D, cudaStream_t s) {
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({x.p, w.p, b.p, y.p});
  layer_norm_kernel<<<row_blocks(rows), row_threads((D + 7) / 8), 0, s>>>(x, w, b, eps, y, D, vec);
  H3_CUDA_LAUNCH_CHECK(s, "layer_norm");
}

void launch_rms_norm_modulate(In x, In w, float eps, In table, int64_t table_rows, int P, int shift_param,
                              int scale_param, const int32_t* idx, Out y, int64_t rows, int64_t D, int* err,
                              cudaStream_t s) {
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({x.p, w.p, table.p, y.p});
  if (!(vec && launch_rms_cached(x, w, eps, table, table_rows, P, shift_param, scale_param, idx, y, row_blocks(rows),
                                 D, err, s)))
    rms_norm_modulate_kernel<<<row_blocks(rows), row_threads((D + 7) / 8), 0, s>>>(
        x, w, eps, table, table_rows, P, shift_param, scale_param, idx, y, D, vec, err);
  H3_CUDA_LAUNCH_CHECK(s, "rms_norm_modulate");
}

void launch_gated_residual(Out x, In y, In table, int64_t table_rows, int P, int gate_param, const int32_t* idx,
                           int64_t rows, int64_t D, int* err, cudaStream_t s) {
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({x.p, y.p, table.p});
  gated_residual_kernel<<<flat_blocks(rows * ((D + 7) / 8)), kThreads, 0, s>>>(x, y, table, table_rows, P,
                                                                                gate_param, idx, rows, D, vec, err);
  H3_CUDA_LAUNCH_CHECK(s, "gated_residual");
}

void launch_gated_residual_modulate(Out x, In y, const RowTable& gate, int gate_param, In w, float eps,
                                    const RowTable& modulation, int shift_param, int scale_param, Out h, int64_t rows,
                                    int64_t D, int* err, cudaStream_t s) {
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({x.p, y.p, gate.table.p, w.p, modulation.table.p, h.p});
  const unsigned grid = row_blocks(rows);
  const bool fused = vec && with_cached_groups(D, [&](auto G) {
    gated_residual_modulate_kernel<decltype(G)::value, Out><<<grid, kCachedRowThreads, 0, s>>>(
        x, y, gate, gate_param, w, eps, modulation, shift_param, scale_param, h, D, err);
  });
  if (fused) {
    H3_CUDA_LAUNCH_CHECK(s, "gated_residual_modulate");
    return;
  }
  launch_gated_residual(x, y, gate.table, gate.rows, gate.params, gate_param, gate.idx, rows, D, err, s);
  launch_rms_norm_modulate(In{x.p, x.t}, w, eps, modulation.table, modulation.rows, modulation.params, shift_param,
                           scale_param, modulation.idx, h, rows, D, err, s);
}

void launch_residual_rms_norm(Out x, In y, In scale, In w, float eps, Out h, int64_t rows, int64_t D,
                              cudaStream_t s) {
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({x.p, y.p, scale.p, w.p, h.p});
  const bool fused = vec && with_cached_groups(D, [&](auto G) {
    residual_rms_norm_kernel<decltype(G)::value><<<row_blocks(rows), kCachedRowThreads, 0, s>>>(x, y, scale, w, eps,
                                                                                               h, D);
  });
  if (fused) {
    H3_CUDA_LAUNCH_CHECK(s, "residual_rms_norm");
    return;
  }
  launch_residual_add(x, y, scale, rows * D, D, s);
  launch_rms_norm(In{x.p, x.t}, w, eps, h, rows, D, s);
}

void launch_residual_add(Out x, In y, In scale, int64_t n, int64_t D, cudaStream_t s) {
  if (n == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({x.p, y.p, scale.p});
  residual_add_kernel<<<flat_blocks((n + 7) / 8), kThreads, 0, s>>>(x, y, scale, n, D, vec);
  H3_CUDA_LAUNCH_CHECK(s, "residual_add");
}

void launch_add_bias(Out y, In bias, int64_t rows, int64_t N, cudaStream_t s) {
  if (rows == 0 || N == 0) return;
  const bool vec = N % 8 == 0 && all_aligned({y.p, bias.p});
  add_bias_kernel<<<flat_blocks(rows * ((N + 7) / 8)), kThreads, 0, s>>>(y, bias, rows, N, vec);
  H3_CUDA_LAUNCH_CHECK(s, "linear bias");
}

void launch_swiglu(In u, bool value_first, Out a, int64_t rows, int64_t F, cudaStream_t s) {
  if (rows == 0 || F == 0) return;
  const bool vec = F % 8 == 0 && all_aligned({u.p, a.p});
  const int64_t groups = (F + 7) / 8;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((groups + kThreads - 1) / kThreads, 1024)),
                  static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  swiglu_kernel<<<grid, kThreads, 0, s>>>(u, value_first, a, rows, F, vec);
  H3_CUDA_LAUNCH_CHECK(s, "swiglu");
}

void launch_silu(In x, Out y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  activation_kernel<0><<<flat_blocks((n + 7) / 8), kThreads, 0, s>>>(x, y, n, all_aligned({x.p, y.p}));
  H3_CUDA_LAUNCH_CHECK(s, "silu");
}

void launch_gelu(In x, bool tanh_approx, Out y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  const bool vec = all_aligned({x.p, y.p});
  if (tanh_approx)
    activation_kernel<1><<<flat_blocks((n + 7) / 8), kThreads, 0, s>>>(x, y, n, vec);
  else
    activation_kernel<2><<<flat_blocks((n + 7) / 8), kThreads, 0, s>>>(x, y, n, vec);
  H3_CUDA_LAUNCH_CHECK(s, "gelu");
}

void launch_move_rows(In src, const int32_t* idx, Out dst, int64_t n, int64_t D, bool scatter, int64_t bound, int* err,
                      cudaStream_t s) {
  if (n == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({src.p, dst.p});
  move_rows_kernel<<<row_blocks(n), row_threads((D + 7) / 8), 0, s>>>(src, idx, dst, D, scatter, bound, vec, err);
  H3_CUDA_LAUNCH_CHECK(s, scatter ? "scatter_rows" : "gather_rows");
}

void launch_pool_row_pairs(In full, const int32_t* pairs, Out reduced, int64_t n, int64_t D, int64_t bound, int* err,
                           cudaStream_t s) {
  if (n == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({full.p, reduced.p});
  pool_row_pairs_kernel<<<row_blocks(n), row_threads((D + 7) / 8), 0, s>>>(full, pairs, reduced, D, bound, vec, err);
  H3_CUDA_LAUNCH_CHECK(s, "pool_row_pairs");
}

void launch_unpool_row_pairs(In reduced, const int32_t* pairs, Out full, int64_t n, int64_t D, int64_t bound, int* err,
                             cudaStream_t s) {
  if (n == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned({full.p, reduced.p});
  unpool_row_pairs_kernel<<<row_blocks(n), row_threads((D + 7) / 8), 0, s>>>(reduced, pairs, full, D, bound, vec,
                                                                             err);
  H3_CUDA_LAUNCH_CHECK(s, "unpool_row_pairs");
}

bool launch_rms_norm_modulate_fp8(In x, In w, float eps, In table, int64_t table_rows, int P, int shift_param,
                                  int scale_param, const int32_t* idx, const Fp8Out& q, int64_t rows, int64_t D,
                                  int* err, cudaStream_t s) {
  if (rows == 0 || D == 0) return true;
  // launch_rms_norm_modulate's condition for its register-cached kernel, whose arithmetic this shares.
  if (!(D % 8 == 0 && all_aligned({x.p, w.p, table.p, q.codes}) &&
        launch_rms_cached(x, w, eps, table, table_rows, P, shift_param, scale_param, idx, q, row_blocks(rows), D,
                          err, s)))
    return false;
  H3_CUDA_LAUNCH_CHECK(s, "rms_norm_modulate_fp8");
  return true;
}

bool launch_gated_residual_modulate_fp8(Out x, In y, const RowTable& gate, int gate_param, In w, float eps,
                                        const RowTable& modulation, int shift_param, int scale_param, const Fp8Out& q,
                                        int64_t rows, int64_t D, int* err, cudaStream_t s) {
  if (rows == 0 || D == 0) return true;
  // launch_gated_residual_modulate's condition for its fused kernel, whose arithmetic this shares.
  const bool vec = D % 8 == 0 && all_aligned({x.p, y.p, gate.table.p, w.p, modulation.table.p, q.codes});
  const unsigned grid = row_blocks(rows);
  if (!(vec && with_cached_groups(D, [&](auto G) {
        gated_residual_modulate_kernel<decltype(G)::value, Fp8Out><<<grid, kCachedRowThreads, 0, s>>>(
            x, y, gate, gate_param, w, eps, modulation, shift_param, scale_param, q, D, err);
      })))
    return false;
  H3_CUDA_LAUNCH_CHECK(s, "gated_residual_modulate_fp8");
  return true;
}

bool launch_swiglu_fp8(In u, bool value_first, const Fp8Out& q, int64_t rows, int64_t F, cudaStream_t s) {
  if (rows == 0 || F == 0) return true;
  const unsigned grid = row_blocks(rows);
  if (!(F % 8 == 0 && all_aligned({u.p, q.codes}) && with_cached_groups<kSwigluFp8Threads>(F, [&](auto G) {
          swiglu_fp8_kernel<decltype(G)::value><<<grid, kSwigluFp8Threads, 0, s>>>(u, value_first, q, F);
        })))
    return false;
  H3_CUDA_LAUNCH_CHECK(s, "swiglu_fp8");
  return true;
}

}  // namespace h3::cuda
