// Seeded standard-normal noise from a counter-based generator, defined value by value so that any backend (a CUDA
// kernel, a later port) can draw exactly the same numbers in any order or in parallel.
//
// The exact counter → value mapping (the reproducibility contract):
//
//   A request's noise is one stream of float32 standard normals z[0], z[1], ... keyed by the 64-bit seed.
//   Value n comes from Philox4x32-10 block b = n / 4, lane n mod 4:
//     key     = (seed mod 2^32, seed / 2^32)
//     counter = (b mod 2^32, b / 2^32, 0, 0)
//     (x0, x1, x2, x3) = Philox4x32-10(counter, key)    (Random123's algorithm and known-answer vectors)
//   Lanes 0,1 come from the pair (x0, x1), lanes 2,3 from (x2, x3), by Box–Muller on a pair (u, w) of uint32:
//     radius  ρ = sqrt(−2·ln((u + 1) / 2^32))            (u + 1 ∈ [1, 2^32], so the argument is in (0, 1])
//     angle   θ = 2π·w / 2^32
//     first lane = (float)(ρ·cos θ), second lane = (float)(ρ·sin θ)
//   ln, cos and sin are evaluated in float64 by fixed sequences of IEEE-754 +, −, ×, ÷ and sqrt (rng.cpp; no library
//   calls, no fused multiply-adds), so every platform that evaluates them without contraction produces bit-identical
//   floats (on CUDA: the `__dadd_rn`/`__dmul_rn`/`__ddiv_rn`/`__dsqrt_rn` intrinsics, or -fmad=false):
//     ln((u+1)/2^32): v = u + 1 = m·2^e with m ∈ [1, 2) by the bit length of v (exact), m > √2 → m/2, e+1;
//       s = (m − 1)/(m + 1), z = s²; P = c11; P = P·z + c_k for k = 10..0 with c_k = 1/(2k+1) rounded to double;
//       result = (e − 32)·LN2_HI + (2s·P + (e − 32)·LN2_LO) with fdlibm's split of ln 2.
//     (cos, sin)(2π·w/2^32): quadrant q = w >> 30, x = (w mod 2^30)·2^-30 (exact), θ = x·(π/2 rounded to double),
//       t = θ²; C = S = 1; for k = 12..1: C = 1 − (C·t)·a_k, S = 1 − (S·t)·b_k with a_k = 1/((2k−1)·2k) and
//       b_k = 1/(2k·(2k+1)) rounded to double; S = θ·S; then (C, S), (−S, C), (−C, −S), (S, −C) for q = 0..3.
//     ρ·cos θ and ρ·sin θ are rounded once to float32 (round to nearest even).
//
//   Draw order of a t2va request (spec/sampling.md §5): the video noise (1, C, F, Hl, Wl) in row-major order takes
//   z[0 .. Nv), then the audio noise, drawn directly in row layout (2A rows × C channels, row-major), takes
//   z[Nv .. Nv + 2A·C). An injected stream consumes nothing, so the next draw starts at the offset the injected one
//   would have started at (as the reference's generator behaves).
#pragma once
#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace h3 {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// The Box–Muller pair of one (u, w) pair of uint32, in float64 before the final rounding.
std::array<double, 2> box_muller(uint32_t u, uint32_t w);

// The deterministic float64 kernels Box–Muller is built from (exposed for tests against the C library).
double det_log_u32_plus_1(uint32_t u);               // ln((u + 1) / 2^32)
std::array<double, 2> det_cos_sin_turn(uint32_t w);  // (cos, sin) of 2π·w / 2^32

class NoiseStream {
 public:
  explicit NoiseStream(uint64_t seed, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  // z[index] of this seed's stream.
  static float value_at(uint64_t seed, uint64_t index);
  // Fills out[0..n) with the next n values and advances.
  void fill(float* out, int64_t n);
  // The next values as a new float32 tensor of `shape`.
  Tensor draw(const Shape& shape);
  void skip(uint64_t n) { offset_ += n; }
  uint64_t offset() const { return offset_; }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  uint64_t offset_;
};

}  // namespace h3
