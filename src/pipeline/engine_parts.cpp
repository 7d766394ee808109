#include "pipeline/engine_parts.h"

#include "models/dit/dit_random.h"
#include "util/error.h"

namespace h3 {

namespace {

// spec/layout.md §2.4: the release's processor/ image settings.
ImageProcessorConfig released_image_processor() {
  ImageProcessorConfig p;
  p.patch_size = 16;
  p.temporal_patch_size = 2;
  p.merge_size = 2;
  p.min_pixels = 65536;
  p.max_pixels = 16777216;
  p.image_mean = {0.5, 0.5, 0.5};
  p.image_std = {0.5, 0.5, 0.5};
  return p;
}

// The id `tokenizer` gives the added token `content`.
int64_t added_token_id(const Tokenizer& tokenizer, const char* content) {
  const auto id = tokenizer.token_id(content);
  H3_CHECK(id.has_value(), "the tokenizer lacks the added token ", content, ", which fl2va's presentation needs");
  return *id;
}

}  // namespace

ComponentConfigs released_component_configs() {
  ComponentConfigs c;
  c.image_processor = released_image_processor();
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
  auto& vt = c.text.vision;  // tools/tiny_model.cpp's tower
  vt.depth = 2;
  vt.hidden_size = 16;
  vt.num_heads = 2;
  vt.intermediate_size = 32;
  vt.out_hidden_size = t.hidden_size;
  vt.num_position_embeddings = 64;
  vt.deepstack_visual_indexes = {0};
  c.image_processor = released_image_processor();
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
  v.block_out_channels = {8, 8, 16, 16, 16, 16};  // the released levels' strides, narrow channels
  v.layers_per_block = 1;
  v.norm_num_groups = 4;
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

namespace {

// random_engine_parts' components (component k drawn from seed + k), as makers over `be`, and the configurations
// (the conditioner's vision token ids taken from `tokenizer` with the keyframe parts).
EngineParts random_part_makers(Backend& be, const Tokenizer& tokenizer, const ComponentConfigs& configs,
                               uint64_t seed, KeyframeParts keyframe_parts) {
  EngineParts p;
  p.configs = configs;
  TextEncoderConfig& text = p.configs->text;
  if (keyframe_parts == KeyframeParts::With) {
    text.image_token_id = added_token_id(tokenizer, "<|image_pad|>");
    text.video_token_id = added_token_id(tokenizer, "<|video_pad|>");
    text.vision_start_token_id = added_token_id(tokenizer, "<|vision_start|>");
    text.vision_end_token_id = added_token_id(tokenizer, "<|vision_end|>");
  }
  const ComponentConfigs c = *p.configs;
  p.makers.text = [&be, c, seed](const std::optional<BlockStreaming>& streaming) {
    return QwenTextModel::random(be, c.text, seed + 2, kConditionerLayers, streaming);
  };
  p.makers.dit = [&be, c, seed](const std::optional<BlockStreaming>& streaming) {
    return random_dit(be, c.dit, RandomDitOptions{seed + 1, false}, nullptr, streaming);
  };
  p.makers.vae = [&be, c, seed] { return VideoVaeDecoder::random(be, c.vae, seed + 3); };
  p.makers.audio = [&be, c, seed] { return AudioVaeDecoder::random(be, c.audio, seed + 4); };
  return p;
}

}  // namespace

EngineParts lazy_random_engine_parts(std::unique_ptr<Backend> backend, std::unique_ptr<Tokenizer> tokenizer,
                                     const ComponentConfigs& configs, uint64_t seed) {
  EngineParts p = random_part_makers(*backend, *tokenizer, configs, seed, KeyframeParts::Without);
  p.backend = std::move(backend);
  p.tokenizer = std::move(tokenizer);
  return p;
}

EngineParts random_engine_parts(std::unique_ptr<Backend> backend, std::unique_ptr<Tokenizer> tokenizer,
                                const ComponentConfigs& configs, uint64_t seed, uint64_t* dit_bytes,
                                KeyframeParts keyframe_parts, const RandomTransformer& transformer) {
  Backend& be = *backend;
  EngineParts p = random_part_makers(be, *tokenizer, configs, seed, keyframe_parts);
  const TextEncoderConfig& text = p.configs->text;
  RandomDitOptions dit_options{seed + 1, false};
  dit_options.gates = transformer.student_gates;
  dit_options.precision = transformer.precision;
  p.dit = random_dit(be, configs.dit, dit_options, dit_bytes);
  p.text = p.makers.text(std::nullopt);
  p.vae = p.makers.vae();
  p.audio = p.makers.audio();
  if (keyframe_parts == KeyframeParts::With) {
    p.vision = QwenVisionModel::random(be, text, seed + 5);
    p.vae_encoder = VideoVaeEncoder::random(be, configs.vae, seed + 6);
    p.image_processor = configs.image_processor;
  }
  p.backend = std::move(backend);
  p.tokenizer = std::move(tokenizer);
  return p;
}

}  // namespace h3
