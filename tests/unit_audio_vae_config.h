// Test helper: the diffusers unit-test configuration of the audio VAE (spec/audio_vae.md §9): hop 4, heads of 16
// pooled onto 8 channels, distinct latent statistics — the base of the audio VAE tests' tiny models.
#pragma once
#include "io/config.h"

namespace h3 {

inline AudioVaeConfig unit_audio_vae_config() {
  AudioVaeConfig c;
  c.encoder_dim = 4;
  c.encoder_rates = {2, 2};
  c.latent_dim = 32;
  c.latent_channels = 8;
  c.num_attention_heads = 2;
  c.decoder_dim = 16;
  c.decoder_rates = {2, 2};
  c.decoder_kernel_sizes = {4, 4};
  c.resblock_kernel_sizes = {3, 7};
  c.resblock_dilation_sizes = {{1, 3}, {1, 3}};
  c.latents_mean = {0.1, -0.2, 0.3, 0.0, 0.05, -0.4, 0.2, 0.15};
  c.latents_std = {1.0, 0.7, 1.3, 0.9, 1.1, 0.6, 1.4, 0.8};
  return c;
}

}  // namespace h3
