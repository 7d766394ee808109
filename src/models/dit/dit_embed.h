// The DiT's two position/time encodings, computed on the host in float32 exactly as the reference does
// (spec/dit.md §5.1, §5.4, §6).
#pragma once
#include <vector>

#include "io/config.h"
#include "tensor/tensor.h"

namespace h3 {

// inv_freq[k] = 1 / theta^((2k) / (2·rope_freq_dim)), k < rope_freq_dim, in f32 (shared by the t, h, w axes).
std::vector<float> dit_rope_inv_freq(const DitConfig& c);

// Rotary tables of the packed sequence: position_ids [L, 3] (any float dtype) is cast to f32, then
// angle[r, a·F + k] = pos[r, a] · inv_freq[k] (f32, a = t, h, w; F = rope_freq_dim), duplicated to 6F columns.
// cos, sin: F32 [L, 6F] host tensors.
void dit_rope_tables(const DitConfig& c, const Tensor& position_ids, Tensor& cos, Tensor& sin);

// Sinusoidal timestep embedding (flip_sin_to_cos, downscale_freq_shift 0, max_period 10000, t NOT scaled by 1000):
// freq[k] = exp(−ln(10000)·k / half), arg = t·freq[k], row = [cos(arg), sin(arg)]. F32 [T, freq_dim] host.
Tensor dit_timestep_sinusoid(const DitConfig& c, const std::vector<float>& timesteps);

}  // namespace h3
