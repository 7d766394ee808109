// Rotary-position tables of the Qwen3-VL language model (spec/conditioner.md §7.4–7.5, §9.1): the inverse
// frequencies exactly as PyTorch computes them on the CPU, per-token positions on the three M-RoPE axes, and the
// interleaved M-RoPE cos/sin tables built from them.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace h3 {

// inv_freq[i] = 1 / theta^(float(2i) / dim), i < dim/2, bit for bit as torch computes it on the CPU in float32:
// the exponent rounded to float32, theta (as float32) raised to it by SLEEF's powf_u10 (what torch's vectorized CPU
// pow calls; ≤ 1 ulp, not correctly rounded — a correctly rounded pow differs in the last bit for some entries, e.g.
// i = 19 of the released text config), then one float32 division.
std::vector<float> torch_rope_inv_freq(double theta, int64_t dim);

// Per-token positions on the three M-RoPE axes: temporal, height, width.
struct MropePositions {
  std::vector<int64_t> t, h, w;
  int64_t size() const { return static_cast<int64_t>(t.size()); }
  // Appends `count` text tokens: all three axes = start, start+1, ..., start+count-1.
  void append_text(int64_t start, int64_t count);
};

// The axis (0 = t, 1 = h, 2 = w) that frequency slot `slot` of interleaved M-RoPE takes its position from:
// h when slot % 3 == 1 and slot < 3·section[1], w when slot % 3 == 2 and slot < 3·section[2], t otherwise.
// (transformers' Qwen3-VL always interleaves, whatever the config's `mrope_interleaved` says.)
int mrope_axis(int64_t slot, const std::vector<int64_t>& section);

// Interleaved M-RoPE tables, host F32 [positions, 2·inv_freq.size()], in the rotate-half layout the attention op
// takes: angle_i = float(pos_axis(i)) · inv_freq[i] (one float32 rounding), emb = [angle, angle],
// cos = cos(emb), sin = sin(emb), each rounded once from the exact value. (The reference evaluates cos/sin with
// MKL or SLEEF on the CPU and CUDA's cosf/sinf on the GPU, all within 1–2 ulp of that value.)
struct RopeTables {
  Tensor cos, sin;
};
RopeTables mrope_tables(const MropePositions& pos, const std::vector<float>& inv_freq,
                        const std::vector<int64_t>& section);

}  // namespace h3
