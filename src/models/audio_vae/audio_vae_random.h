// Random-weight audio VAE checkpoints in the diffusers layout (config.json + model.safetensors), for benchmarks, tests
// and tiny models: every tensor of audio_vae_manifest with the real names and shapes, the real anti-aliasing filters,
// weight-norm magnitudes near 1 (so activations keep their scale through the stack) and small random SnakeBeta
// parameters. Deterministic for a seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/config.h"
#include "io/safetensors.h"

namespace h3 {

std::vector<NamedTensor> random_audio_vae_weights(const AudioVaeConfig& config, uint64_t seed, bool with_encoder);
// The diffusers config.json text of `config` (every field audio_vae/config.json carries).
std::string audio_vae_config_json(const AudioVaeConfig& config);
// Writes DIR/config.json and DIR/model.safetensors (DIR is created when missing).
void write_random_audio_vae(const std::string& dir, const AudioVaeConfig& config, uint64_t seed, bool with_encoder);

}  // namespace h3
