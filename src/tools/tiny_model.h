// `h3 tool make-tiny-model DIR [--seed N] [--transformer-blocks N]`: a complete tiny random-weight snapshot in the diffusers root layout
// (configs with tiny sizes, the real key names and released dtypes, sharded safetensors where the release shards,
// tokenizer files), for the demo, the tests and a user checking a build.
#pragma once
#include <cstdint>
#include <string>

namespace h3 {

// The tiny model's reference_image_short_edge (modular_model_index.json): ref2va's pictures are sized to it.
inline constexpr int64_t kTinyReferenceImageShortEdge = 64;
// Its canvas rule (canvas_short_edge, canvas_max_pixels): 16:9 resolves to 112x64.
inline constexpr int64_t kTinyCanvasShortEdge = 64;
inline constexpr int64_t kTinyCanvasMaxPixels = 64 * 112;

// Blocks of the tiny transformers by default (a test of --layers makes more: `transformer_blocks`).
inline constexpr int64_t kTinyTransformerBlocks = 2;

void make_tiny_model(const std::string& dir, uint64_t seed, int64_t transformer_blocks = kTinyTransformerBlocks);

}  // namespace h3
