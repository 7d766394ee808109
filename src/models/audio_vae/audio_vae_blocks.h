// Building blocks of the MiniMax-H3 audio VAE that are plain math on host tensors (spec/audio_vae.md §3).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "tensor/tensor.h"

namespace h3 {

// Weight normalization folded into one weight, in float32 as PyTorch computes it: w = v · (g / ‖v‖₂), where the
// norm runs over every axis but 0, once per index of axis 0 (torch.nn.utils.weight_norm with dim = 0). For a Conv1d
// v [Cout, Cin, k] that is one norm per output channel; for a ConvTranspose1d v [Cin, Cout, k] one per INPUT
// channel. g holds one value per index of axis 0 (stored [n, 1, 1]). Host tensors of any float dtype; returns F32.
Tensor fold_weight_norm(const Tensor& g, const Tensor& v);

// Kaiser-windowed sinc low-pass filter of `taps` taps (alias-free-torch's kaiser_sinc_filter1d), normalized to sum
// 1. The checkpoint stores these as buffers and the model loads them; this computes them for checkpoints made here
// (random-weight benchmarks and tiny models). Evaluated in float64, rounded to float32 once.
std::vector<float> kaiser_sinc_filter(double cutoff, double half_width, int64_t taps);

// The filter of every anti-aliased activation of the decoder (ratio 2: cutoff 0.25, half-width 0.3, 12 taps).
constexpr int64_t kAaFilterTaps = 12;
std::vector<float> aa_activation_filter();

// The tensors of one half of the audio VAE in a checkpoint: every tensor of `manifest` checked for presence, shape
// and a float dtype when opened (one sentence naming the first missing one), then read as F32 on the host or the
// backend. `what` names the half in messages ("audio VAE decoder").
class AudioVaeTensorReader {
 public:
  AudioVaeTensorReader(Backend& be, const std::vector<TensorSpec>& manifest, const std::string& weights,
                       std::string what);
  Tensor host(const std::string& name);
  Tensor device(const Tensor& host) { return be_.upload(host, DType::F32); }
  Tensor tensor(const std::string& name) { return device(host(name)); }

 private:
  Backend& be_;
  Checkpoint ck_;
  std::string what_;
  std::map<std::string, Shape> expected_;
};

}  // namespace h3
