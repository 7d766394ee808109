// A DiT of random weights made on the backend (models/random_weights.h): every tensor load_dit_weights makes for a
// config, in the same dtypes and fused forms, for benchmarks at the released size and tests at tiny sizes.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "io/config.h"
#include "models/dit/dit.h"
#include "models/dit/dit_weights.h"

namespace h3 {

struct RandomDitOptions {
  uint64_t seed = 1000;
  // false: the AdaLN projection weights (39% of the parameters) are one host tensor shared by every block (made on
  // the backend and downloaded once) and streamed while begin_request builds the tables, as a loaded model does by
  // default; true: every block has its own, resident on the backend.
  bool keep_adaln_weights = false;
  // true: every 1-D weight (norm weights and biases) is zero, as ../shared/bench/peer_dit.py initializes the
  // reference for timing (it makes q and k exactly zero, and every row of a modality identical after norm1/norm2);
  // for same-initialization timing comparisons only.
  bool zero_vectors = false;
  // --precision: the blocks' products in FP8 (quantized from the random bf16 weights; resident_bytes then counts the
  // bf16 weights as made, Dit::resident_weight_bytes the FP8 ones).
  DitPrecision precision{};
  // true: every main block has a random to_gate_compress [inner, hidden] (FastH3's student: the sparse attention's
  // gated pooled branch runs; the dense attention ignores it).
  bool gates = false;
};

// `resident_bytes` (optional) receives the bytes the weights occupy on the backend.
DitWeights random_dit_weights(Backend& be, const DitConfig& c, const RandomDitOptions& o = {},
                              uint64_t* resident_bytes = nullptr);
// `streaming`: the main blocks stream from pinned host copies (Dit::from_weights; the Disk source needs a file).
std::unique_ptr<Dit> random_dit(Backend& be, const DitConfig& c, const RandomDitOptions& o = {},
                                uint64_t* resident_bytes = nullptr,
                                std::optional<BlockStreaming> streaming = std::nullopt);

}  // namespace h3
