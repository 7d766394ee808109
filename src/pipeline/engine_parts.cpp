#include "pipeline/engine_parts.h"

#include "models/dit/dit_random.h"

namespace h3 {

ComponentConfigs released_component_configs() {
  ComponentConfigs c;
  c.vae.latents_mean.assign(c.vae.latent_channels, 0.0);
  c.vae.latents_std.assign(c.vae.latent_channels, 1.0);
  c.audio.latents_mean.assign(c.audio.latent_channels, 0.0);
  c.audio.latents_std.assign(c.audio.latent_channels, 1.0);
  return c;
}

ComponentConfigs tiny_component_configs(int64_t vocab) {
  ComponentConfigs c;
  auto& t = c.text.text;
  t.hidden_size = 32;
  t.num_hidden_layers = kConditionerLayers;
  t.num_attention_heads = 4;
  t.num_key_value_heads = 2;
  t.head_dim = 8;
  t.intermediate_size = 64;
  t.mrope_section = {2, 1, 1};
  t.vocab_size = vocab;
  auto& d = c.dit;
  d.num_attention_heads = 2;
  d.attention_head_dim = 16;
  d.hidden_size = 48;
  d.num_layers = 2;
  d.num_refiner_layers = 1;
  d.ffn_dim = 96;
  d.in_channels = 8;
  d.audio_in_channels = 8;
  d.text_dim = t.hidden_size;
  d.freq_dim = 32;
  d.time_embed_hidden_dim = 48;
  d.time_embed_dim = 24;
  d.rope_freq_dim = 2;
  auto& v = c.vae;
  v.latent_channels = 8;
  v.decoder_num_layers = 2;
  v.decoder_num_attention_heads = 2;
  v.decoder_attention_head_dim = 16;
  v.decoder_num_register_tokens = 2;
  v.decoder_ffn_mult = 2;
  v.latents_mean.assign(8, 0.0);
  v.latents_std.assign(8, 1.0);
  auto& a = c.audio;
  a.latent_channels = 8;
  a.latent_dim = 64;
  a.decoder_dim = 128;
  a.resblock_kernel_sizes = {3, 7};
  a.resblock_dilation_sizes = {{1, 3}, {1, 3}};
  a.latents_mean.assign(8, 0.0);
  a.latents_std.assign(8, 1.0);
  return c;
}

EngineParts random_engine_parts(std::unique_ptr<Backend> backend, std::unique_ptr<Tokenizer> tokenizer,
                                const ComponentConfigs& configs, uint64_t seed, uint64_t* dit_bytes) {
  EngineParts p;
  Backend& be = *backend;
  p.dit = random_dit(be, configs.dit, RandomDitOptions{seed + 1, false}, dit_bytes);
  p.text = QwenTextModel::random(be, configs.text, seed + 2);
  p.vae = VideoVaeDecoder::random(be, configs.vae, seed + 3);
  p.audio = AudioVaeDecoder::random(be, configs.audio, seed + 4);
  p.backend = std::move(backend);
  p.tokenizer = std::move(tokenizer);
  return p;
}

}  // namespace h3
