// The MiniMax-H3 audio VAE decoder (spec/audio_vae.md §5, §6.1): normalized latents → denormalize per channel →
// dec_in_proj → BigVGAN (conv_pre, transposed-conv upsamplers, mean of AMP blocks with anti-aliased SnakeBeta,
// activation_post, conv_post) → clamp [−1, 1]. Mono network; stereo is a batch of two. Float32 on every backend.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "tensor/tensor.h"

namespace h3 {

// The audio_vae component found in one folder: the diffusers layout (config.json + *.safetensors) or the original
// one (config.json + metadata.json + model.safetensors). Throws naming the folder when neither is there.
Component audio_vae_component_at(const std::string& dir);

// The one check of decode's input: latents [B, latent_channels, A] of a float dtype on the CPU, B ∈ {1, 2} (stereo
// channels as batch items), A ≥ 1. Throws one sentence naming the rule.
void check_audio_latents(const AudioVaeConfig& config, const Tensor& latents);

class AudioVaeDecoder {
 public:
  // Reads the config, checks every decoder tensor against audio_vae_manifest (names and shapes), folds weight norm
  // and uploads the weights as F32.
  static std::unique_ptr<AudioVaeDecoder> load(Backend& backend, const Component& audio_vae);
  ~AudioVaeDecoder();

  // latents [B, C, A] in the NORMALIZED latent space (host) → audio [B, hop·A] float32 (host) in [−1, 1] at
  // config().sampling_rate: batch item 0 is the first (left) channel. No trim to a video duration.
  Tensor decode(const Tensor& latents);

  const AudioVaeConfig& config() const;

  struct Weights;  // defined in the .cpp

 private:
  AudioVaeDecoder(Backend& backend, AudioVaeConfig config, std::unique_ptr<Weights> weights);
  Backend& be_;
  AudioVaeConfig config_;
  std::unique_ptr<Weights> w_;
};

}  // namespace h3
