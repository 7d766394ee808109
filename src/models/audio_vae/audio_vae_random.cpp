#include "models/audio_vae/audio_vae_random.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "io/manifest.h"
#include "io/snapshot.h"
#include "models/audio_vae/audio_vae_blocks.h"
#include "util/mapped_file.h"

namespace h3 {

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

std::vector<NamedTensor> random_audio_vae_weights(const AudioVaeConfig& config, uint64_t seed, bool with_encoder) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uniform(0.5f, 1.f);
  const std::vector<float> filter = aa_activation_filter();
  std::vector<NamedTensor> out;
  for (const TensorSpec& s : audio_vae_manifest(config, with_encoder)) {
    Tensor t = Tensor::empty(s.shape, DType::F32);
    float* p = t.ptr<float>();
    const int64_t n = t.numel();
    // Fan-in of a plain weight [out, in, ...]: everything past axis 0.
    const int64_t fan_in = s.shape.size() > 1 ? n / s.shape[0] : 1;
    if (ends_with(s.name, ".filter")) {
      for (int64_t i = 0; i < n; ++i) p[i] = filter[i % filter.size()];
    } else if (ends_with(s.name, "zero_k_bias")) {
      std::fill_n(p, n, 0.f);
    } else if (ends_with(s.name, ".weight_g")) {
      for (int64_t i = 0; i < n; ++i) p[i] = uniform(rng);  // folded rows of norm ~0.5–1
    } else if (ends_with(s.name, ".alpha") || ends_with(s.name, ".beta")) {
      // Snake alpha is stored raw (around 1); SnakeBeta alpha/beta in log space (around 0).
      const bool raw = s.shape.size() == 3;
      for (int64_t i = 0; i < n; ++i) p[i] = (raw ? 1.f : 0.f) + 0.3f * normal(rng);
    } else if (s.shape.size() == 1) {  // biases, norm weights/biases, q/v biases
      const bool norm_weight = ends_with(s.name, "norm1.weight") || ends_with(s.name, "norm2.weight") ||
                               ends_with(s.name, "norm3.weight") || ends_with(s.name, "norm.weight");
      for (int64_t i = 0; i < n; ++i) p[i] = (norm_weight ? 1.f : 0.f) + 0.1f * normal(rng);
    } else {
      const float scale = 1.f / std::sqrt(static_cast<float>(fan_in));
      for (int64_t i = 0; i < n; ++i) p[i] = scale * normal(rng);
    }
    out.push_back({s.name, t});
  }
  return out;
}

std::string audio_vae_config_json(const AudioVaeConfig& c) {
  nlohmann::json j = {{"_class_name", "AutoencoderKLMiniMaxH3Audio"},
                      {"encoder_dim", c.encoder_dim},
                      {"encoder_rates", c.encoder_rates},
                      {"latent_dim", c.latent_dim},
                      {"latent_channels", c.latent_channels},
                      {"num_attention_heads", c.num_attention_heads},
                      {"decoder_dim", c.decoder_dim},
                      {"decoder_rates", c.decoder_rates},
                      {"decoder_kernel_sizes", c.decoder_kernel_sizes},
                      {"resblock_kernel_sizes", c.resblock_kernel_sizes},
                      {"resblock_dilation_sizes", c.resblock_dilation_sizes},
                      {"sampling_rate", c.sampling_rate},
                      {"latents_mean", c.latents_mean},
                      {"latents_std", c.latents_std}};
  return j.dump(2) + "\n";
}

void write_random_audio_vae(const std::string& dir, const AudioVaeConfig& config, uint64_t seed, bool with_encoder) {
  std::filesystem::create_directories(dir);
  write_file_atomic(join_path(dir, "config.json"), audio_vae_config_json(config));
  write_safetensors(join_path(dir, "model.safetensors"), random_audio_vae_weights(config, seed, with_encoder));
}

}  // namespace h3
