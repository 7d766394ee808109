#include "tools/tiny_model.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/manifest.h"
#include "models/audio_vae/audio_vae_blocks.h"
#include "io/safetensors.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Deterministic normal draws (splitmix64 + Box-Muller), independent of the C++ library.
class TinyRng {
 public:
  explicit TinyRng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_;
};

bool ends_with(const std::string& s, const std::string& t) { return s.size() >= t.size() && s.ends_with(t); }
bool contains(const std::string& s, const std::string& t) { return s.find(t) != std::string::npos; }

// Random values for one tensor, scaled by what the tensor is (norms near 1, small biases, fan-in scaled
// matrices), so that the tiny model's activations stay in a sane range.
Tensor random_tensor(const TensorSpec& t, TinyRng& rng) {
  Tensor f = Tensor::empty(t.shape, DType::F32);
  float* p = f.ptr<float>();
  const int64_t n = f.numel();
  const std::string& nm = t.name;
  auto fill = [&](auto gen) {
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(gen(i));
  };
  int64_t fan_in = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) fan_in *= t.shape[i];
  if (ends_with(nm, ".filter")) {
    auto h = aa_activation_filter();
    fill([&](int64_t i) { return h[i % h.size()]; });
  } else if (ends_with(nm, "zero_k_bias")) {
    fill([](int64_t) { return 0.0; });
  } else if (ends_with(nm, "rope.inv_freq")) {
    fill([&](int64_t k) { return 1.0 / std::pow(10000.0, 2.0 * k / (2.0 * n)); });
  } else if (ends_with(nm, ".alpha") && t.shape.size() == 3) {  // Snake (raw scale, must stay away from 0)
    fill([&](int64_t) { return 1.0 + 0.1 * rng.normal(); });
  } else if (ends_with(nm, ".act.alpha") || ends_with(nm, ".act.beta")) {  // SnakeBeta, log space
    fill([&](int64_t) { return 0.1 * rng.normal(); });
  } else if (ends_with(nm, "weight_g")) {
    fill([&](int64_t) { return 1.0 + 0.1 * rng.normal(); });
  } else if (t.shape.size() == 1 && (contains(nm, "norm") || contains(nm, "layernorm")) && ends_with(nm, ".weight")) {
    fill([&](int64_t) { return 1.0 + 0.1 * rng.normal(); });
  } else if (t.shape.size() == 1 && (ends_with(nm, "scale1") || ends_with(nm, "scale2"))) {
    fill([&](int64_t) { return 0.3 * rng.normal(); });
  } else if (t.shape.size() == 1) {  // biases
    fill([&](int64_t) { return 0.02 * rng.normal(); });
  } else if (contains(nm, "embed_tokens") || contains(nm, "register_tokens") || contains(nm, "pos_embed")) {
    fill([&](int64_t) { return 0.5 * rng.normal(); });
  } else {
    double scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)));
    if (contains(nm, "adaln_proj") || contains(nm, "norm_out.linear")) scale *= 0.5;
    fill([&](int64_t) { return scale * rng.normal(); });
  }
  return t.dtype == DType::F32 ? f : f.to(t.dtype);
}

void write_json(const std::string& path, const json& j) { write_file_atomic(path, j.dump(2) + "\n"); }

// Writes a component's weights, split into `shards` files with an index when shards > 1 (as the release does).
void write_weights(const std::string& dir, const std::string& base, const std::vector<TensorSpec>& specs,
                   TinyRng& rng, int shards) {
  fs::create_directories(dir);
  std::vector<std::vector<NamedTensor>> parts(shards);
  for (size_t i = 0; i < specs.size(); ++i)
    parts[i * shards / specs.size()].push_back({specs[i].name, random_tensor(specs[i], rng)});
  if (shards == 1) {
    write_safetensors(join_path(dir, base + ".safetensors"), parts[0], {{"format", "pt"}});
    return;
  }
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  uint64_t total = 0;
  for (int s = 0; s < shards; ++s) {
    char name[128];
    std::snprintf(name, sizeof name, "%s-%05d-of-%05d.safetensors", base.c_str(), s + 1, shards);
    write_safetensors(join_path(dir, name), parts[s], {{"format", "pt"}});
    for (const auto& nt : parts[s]) {
      index["weight_map"][nt.name] = name;
      total += nt.tensor.nbytes();
    }
  }
  index["metadata"]["total_size"] = total;
  write_json(join_path(dir, base + ".safetensors.index.json"), index);
}

std::vector<double> random_list(TinyRng& rng, int64_t n, double center, double spread) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(center + spread * rng.normal());
  return v;
}

json component_entry(const char* library, const char* cls, const char* name) {
  return json::array({library, cls,
                      {{"type_hint", {library, cls}},
                       {"pretrained_model_name_or_path", "MiniMaxAI/MiniMax-H3"},
                       {"subfolder", name},
                       {"variant", nullptr},
                       {"revision", nullptr}}});
}

}  // namespace

void make_tiny_model(const std::string& dir, uint64_t seed, int64_t transformer_blocks) {
  TinyRng rng(seed);
  fs::create_directories(dir);

  // Tokenizer first: the text encoder's vocabulary and special ids come from it.
  const std::string tok_dir = join_path(dir, "tokenizer");
  fs::create_directories(tok_dir);
  write_file_atomic(join_path(tok_dir, "tokenizer.json"), make_tiny_tokenizer_json());
  write_file_atomic(join_path(tok_dir, "tokenizer_config.json"), make_tiny_tokenizer_config_json());
  Tokenizer tok = Tokenizer::from_file(tok_dir);
  auto id_of = [&](const char* s) -> int64_t {
    auto id = tok.token_id(s);
    H3_CHECK(id.has_value(), "tiny tokenizer lacks ", s);
    return *id;
  };

  // Sizes: small enough for a CPU demo in seconds, but the real geometry (VAE /16 in space, /4 in time with
  // 17-frame clips, hop 800 audio at 32 kHz, >= 51 conditioner layers, heads x head_dim != hidden).
  const int64_t text_hidden = 32, video_latent = 8, audio_latent = 8;

  // --- text encoder (Qwen3-VL) ---
  TextEncoderConfig te;
  te.text.hidden_size = text_hidden;
  te.text.num_hidden_layers = 52;
  te.text.num_attention_heads = 4;
  te.text.num_key_value_heads = 2;
  te.text.head_dim = 8;
  te.text.intermediate_size = 64;
  te.text.mrope_section = {2, 1, 1};
  te.text.vocab_size = static_cast<int64_t>(tok.vocab_size());
  te.vision.depth = 2;
  te.vision.hidden_size = 16;
  te.vision.num_heads = 2;
  te.vision.intermediate_size = 32;
  te.vision.out_hidden_size = text_hidden;
  te.vision.num_position_embeddings = 64;
  te.vision.deepstack_visual_indexes = {0};
  te.image_token_id = id_of("<|image_pad|>");
  te.video_token_id = id_of("<|video_pad|>");
  te.vision_start_token_id = id_of("<|vision_start|>");
  te.vision_end_token_id = id_of("<|vision_end|>");
  json te_json = {
      {"architectures", {"Qwen3VLForConditionalGeneration"}},
      {"model_type", "qwen3_vl"},
      {"image_token_id", te.image_token_id},
      {"video_token_id", te.video_token_id},
      {"vision_start_token_id", te.vision_start_token_id},
      {"vision_end_token_id", te.vision_end_token_id},
      {"tie_word_embeddings", false},
      {"dtype", "bfloat16"},
      {"text_config",
       {{"model_type", "qwen3_vl_text"}, {"hidden_size", te.text.hidden_size},
        {"num_hidden_layers", te.text.num_hidden_layers}, {"num_attention_heads", te.text.num_attention_heads},
        {"num_key_value_heads", te.text.num_key_value_heads}, {"head_dim", te.text.head_dim},
        {"intermediate_size", te.text.intermediate_size}, {"rms_norm_eps", te.text.rms_norm_eps},
        {"vocab_size", te.text.vocab_size}, {"hidden_act", "silu"}, {"attention_bias", false},
        {"max_position_embeddings", 262144}, {"tie_word_embeddings", false}, {"dtype", "bfloat16"},
        {"bos_token_id", id_of("<|endoftext|>")}, {"eos_token_id", id_of("<|im_end|>")},
        {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", te.text.rope_theta},
                             {"mrope_section", te.text.mrope_section}, {"mrope_interleaved", true}}}}},
      {"vision_config",
       {{"model_type", "qwen3_vl"}, {"depth", te.vision.depth}, {"hidden_size", te.vision.hidden_size},
        {"num_heads", te.vision.num_heads}, {"intermediate_size", te.vision.intermediate_size},
        {"in_channels", 3}, {"patch_size", 16}, {"temporal_patch_size", 2}, {"spatial_merge_size", 2},
        {"out_hidden_size", te.vision.out_hidden_size}, {"num_position_embeddings", te.vision.num_position_embeddings},
        {"deepstack_visual_indexes", te.vision.deepstack_visual_indexes}, {"hidden_act", "gelu_pytorch_tanh"}}}};
  te.validate("tiny text_encoder");
  write_json(join_path(dir, "text_encoder/config.json"), (fs::create_directories(join_path(dir, "text_encoder")), te_json));
  write_weights(join_path(dir, "text_encoder"), "model", text_encoder_manifest(te, true), rng, 2);

  // --- transformers (t2va/fl2va and ref2va partitions share the architecture) ---
  DitConfig dit;
  dit.num_attention_heads = 2;
  dit.attention_head_dim = 16;
  dit.hidden_size = 48;
  dit.num_layers = transformer_blocks;
  dit.num_refiner_layers = 1;
  dit.ffn_dim = 96;
  dit.in_channels = video_latent;
  dit.audio_in_channels = audio_latent;
  dit.text_dim = text_hidden;
  dit.freq_dim = 32;
  dit.time_embed_hidden_dim = 48;
  dit.time_embed_dim = 24;
  dit.rope_freq_dim = 2;
  dit.validate("tiny transformer");
  json dit_json = {{"_class_name", "MiniMaxH3Transformer3DModel"}, {"_diffusers_version", "0.36.0.dev0"},
                   {"num_attention_heads", dit.num_attention_heads}, {"attention_head_dim", dit.attention_head_dim},
                   {"hidden_size", dit.hidden_size}, {"num_layers", dit.num_layers},
                   {"num_refiner_layers", dit.num_refiner_layers}, {"ffn_dim", dit.ffn_dim},
                   {"in_channels", dit.in_channels}, {"audio_in_channels", dit.audio_in_channels},
                   {"patch_size", dit.patch_size}, {"text_dim", dit.text_dim}, {"freq_dim", dit.freq_dim},
                   {"time_embed_hidden_dim", dit.time_embed_hidden_dim}, {"time_embed_dim", dit.time_embed_dim},
                   {"rope_freq_dim", dit.rope_freq_dim}, {"rope_theta", dit.rope_theta}, {"norm_eps", dit.norm_eps},
                   {"qk_norm_eps", dit.qk_norm_eps}, {"final_norm_eps", dit.final_norm_eps}};
  for (const char* name : {"transformer", "transformer_ref"}) {
    fs::create_directories(join_path(dir, name));
    write_json(join_path(dir, std::string(name) + "/config.json"), dit_json);
    write_weights(join_path(dir, name), "diffusion_pytorch_model", dit_manifest(dit, Layout::Diffusers), rng, 2);
  }

  // --- video VAE ---
  VideoVaeConfig vae;
  vae.latent_channels = video_latent;
  vae.block_out_channels = {8, 8, 16, 16};
  vae.layers_per_block = 1;
  vae.spatial_downsample_factors = {2, 2, 2, 2};
  vae.temporal_downsample_factors = {1, 2, 2, 1};
  vae.norm_num_groups = 4;
  vae.decoder_num_layers = 2;
  vae.decoder_num_attention_heads = 2;
  vae.decoder_attention_head_dim = 16;
  vae.decoder_num_register_tokens = 2;
  vae.decoder_ffn_mult = 2;
  vae.latents_mean = random_list(rng, video_latent, 0.0, 0.3);
  vae.latents_std = random_list(rng, video_latent, 1.0, 0.1);
  vae.validate("tiny vae");
  json vae_json = {{"_class_name", "AutoencoderKLMiniMaxH3"}, {"_diffusers_version", "0.36.0.dev0"},
                   {"in_channels", 3}, {"out_channels", 3}, {"latent_channels", vae.latent_channels},
                   {"block_out_channels", vae.block_out_channels}, {"layers_per_block", vae.layers_per_block},
                   {"spatial_downsample_factors", vae.spatial_downsample_factors},
                   {"temporal_downsample_factors", vae.temporal_downsample_factors},
                   {"norm_num_groups", vae.norm_num_groups}, {"norm_eps", vae.norm_eps},
                   {"spatial_padding_mode", "reflect"}, {"decoder_num_layers", vae.decoder_num_layers},
                   {"decoder_num_attention_heads", vae.decoder_num_attention_heads},
                   {"decoder_attention_head_dim", vae.decoder_attention_head_dim},
                   {"decoder_num_register_tokens", vae.decoder_num_register_tokens},
                   {"decoder_ffn_mult", vae.decoder_ffn_mult}, {"decoder_rope_theta", vae.decoder_rope_theta},
                   {"decoder_rope_dim_ratio", vae.decoder_rope_dim_ratio}, {"decoder_norm_eps", vae.decoder_norm_eps},
                   {"clip_length", vae.clip_length}, {"token_drop", vae.token_drop},
                   {"latents_mean", vae.latents_mean}, {"latents_std", vae.latents_std}};
  fs::create_directories(join_path(dir, "vae"));
  write_json(join_path(dir, "vae/config.json"), vae_json);
  write_weights(join_path(dir, "vae"), "diffusion_pytorch_model", video_vae_manifest(vae, Layout::Diffusers, true),
                rng, 2);

  // --- audio VAE ---
  AudioVaeConfig au;
  au.encoder_dim = 4;
  au.latent_dim = 128;
  au.latent_channels = audio_latent;
  au.num_attention_heads = 2;
  au.decoder_dim = 128;
  au.resblock_kernel_sizes = {3, 7};
  au.resblock_dilation_sizes = {{1, 3}, {1, 3}};
  au.latents_mean = random_list(rng, audio_latent, 0.0, 0.3);
  au.latents_std = random_list(rng, audio_latent, 1.0, 0.1);
  au.validate("tiny audio_vae");
  json au_json = {{"_class_name", "AutoencoderKLMiniMaxH3Audio"}, {"_diffusers_version", "0.36.0.dev0"},
                  {"encoder_dim", au.encoder_dim}, {"encoder_rates", au.encoder_rates}, {"latent_dim", au.latent_dim},
                  {"latent_channels", au.latent_channels}, {"num_attention_heads", au.num_attention_heads},
                  {"decoder_dim", au.decoder_dim}, {"decoder_rates", au.decoder_rates},
                  {"decoder_kernel_sizes", au.decoder_kernel_sizes},
                  {"resblock_kernel_sizes", au.resblock_kernel_sizes},
                  {"resblock_dilation_sizes", au.resblock_dilation_sizes}, {"sampling_rate", au.sampling_rate},
                  {"latents_mean", au.latents_mean}, {"latents_std", au.latents_std}};
  fs::create_directories(join_path(dir, "audio_vae"));
  write_json(join_path(dir, "audio_vae/config.json"), au_json);
  write_weights(join_path(dir, "audio_vae"), "diffusion_pytorch_model", audio_vae_manifest(au, true), rng, 1);

  // --- schedulers, processor, index ---
  for (auto [name, shift] : {std::pair{"scheduler", 12.0}, {"audio_scheduler", 3.0}}) {
    fs::create_directories(join_path(dir, name));
    write_json(join_path(dir, std::string(name) + "/scheduler_config.json"),
               {{"_class_name", "MiniMaxH3Scheduler"}, {"_diffusers_version", "0.36.0.dev0"}, {"shift", shift}});
  }
  fs::create_directories(join_path(dir, "processor"));
  write_json(join_path(dir, "processor/preprocessor_config.json"),
             {{"image_processor_type", "Qwen2VLImageProcessorFast"}, {"processor_class", "Qwen3VLProcessor"},
              {"patch_size", 16}, {"temporal_patch_size", 2}, {"merge_size", 2},
              {"size", {{"shortest_edge", 65536}, {"longest_edge", 16777216}}},
              {"image_mean", {0.5, 0.5, 0.5}}, {"image_std", {0.5, 0.5, 0.5}}, {"resample", 3},
              {"rescale_factor", 1.0 / 255}, {"do_rescale", true}, {"do_normalize", true}, {"do_resize", true}});
  // The video processor (ref2va's reference clips) in the flat layout beside the image processor's file
  // (spec/layout.md §2.4 accepts it and the nested one): the release's settings (spec/conditioner.md §5), whose
  // patch 16 is also the tiny vision tower's.
  write_json(join_path(dir, "processor/video_preprocessor_config.json"),
             {{"video_processor_type", "Qwen3VLVideoProcessor"}, {"processor_class", "Qwen3VLProcessor"},
              {"patch_size", 16}, {"temporal_patch_size", 2}, {"merge_size", 2},
              {"size", {{"shortest_edge", 4096}, {"longest_edge", 25165824}}},
              {"image_mean", {0.5, 0.5, 0.5}}, {"image_std", {0.5, 0.5, 0.5}}, {"resample", 3},
              {"rescale_factor", 1.0 / 255}, {"do_rescale", true}, {"do_normalize", true}, {"do_resize", true},
              {"do_convert_rgb", true}, {"do_sample_frames", true}, {"fps", 2}, {"min_frames", 4},
              {"max_frames", 768}, {"max_video_tokens", 768}, {"return_metadata", false}});
  json index = {{"_class_name", "MiniMaxH3ModularPipeline"}, {"_diffusers_version", "0.36.0.dev0"},
                {"_blocks_class_name", "MiniMaxH3Blocks"},
                {"text_encoder", component_entry("transformers", "Qwen3VLForConditionalGeneration", "text_encoder")},
                {"tokenizer", component_entry("transformers", "Qwen2TokenizerFast", "tokenizer")},
                {"processor", component_entry("transformers", "Qwen3VLProcessor", "processor")},
                {"vae", component_entry("diffusers", "AutoencoderKLMiniMaxH3", "vae")},
                {"audio_vae", component_entry("diffusers", "AutoencoderKLMiniMaxH3Audio", "audio_vae")},
                {"transformer", component_entry("diffusers", "MiniMaxH3Transformer3DModel", "transformer")},
                {"transformer_ref", component_entry("diffusers", "MiniMaxH3Transformer3DModel", "transformer_ref")},
                {"scheduler", component_entry("diffusers", "MiniMaxH3Scheduler", "scheduler")},
                {"audio_scheduler", component_entry("diffusers", "MiniMaxH3Scheduler", "audio_scheduler")},
                // The canvas rule a keyframe's or a video reference's canvas follows, and ref2va's picture size
                // (spec/sampling.md §4): the release's short edges (768, 2048) would make every tiny CPU demo encode
                // release-sized canvases.
                {"canvas_short_edge", kTinyCanvasShortEdge},
                {"canvas_max_pixels", kTinyCanvasMaxPixels},
                {"reference_image_short_edge", kTinyReferenceImageShortEdge}};
  write_json(join_path(dir, "modular_model_index.json"), index);
  write_json(join_path(dir, "model_index.json"), index);
}

}  // namespace h3
