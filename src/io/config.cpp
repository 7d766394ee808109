#include "io/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {

using json = nlohmann::json;

namespace {
const char* json_type(const json& v) { return v.type_name(); }
const json& empty_object() {
  static const json e = json::object();
  return e;
}
}  // namespace

ConfigReader::ConfigReader(const json& j, std::string what) : j_(j.is_object() ? j : empty_object()), what_(std::move(what)) {
  H3_CHECK(j.is_object() || j.is_null(), what_, ": expected a JSON object");
}

const json* ConfigReader::find(const std::string& key) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool ConfigReader::has(const std::string& key) const { return find(key) != nullptr; }

int64_t ConfigReader::get_int(const std::string& key, int64_t def) const {
  const json* v = find(key);
  if (!v) return def;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    double d = v->get<double>();
    H3_CHECK(std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15, what_, ": key '", key,
             "' must be an integer, got ", d);
    return static_cast<int64_t>(d);
  }
  fail(what_, ": key '", key, "' must be an integer, got ", json_type(*v));
}

double ConfigReader::get_double(const std::string& key, double def) const {
  const json* v = find(key);
  if (!v) return def;
  H3_CHECK(v->is_number(), what_, ": key '", key, "' must be a number, got ", json_type(*v));
  return v->get<double>();
}

bool ConfigReader::get_bool(const std::string& key, bool def) const {
  const json* v = find(key);
  if (!v) return def;
  H3_CHECK(v->is_boolean(), what_, ": key '", key, "' must be true or false, got ", json_type(*v));
  return v->get<bool>();
}

std::string ConfigReader::get_string(const std::string& key, const std::string& def) const {
  const json* v = find(key);
  if (!v) return def;
  H3_CHECK(v->is_string(), what_, ": key '", key, "' must be a string, got ", json_type(*v));
  return v->get<std::string>();
}

std::vector<int64_t> ConfigReader::get_int_list(const std::string& key, std::vector<int64_t> def) const {
  const json* v = find(key);
  if (!v) return def;
  H3_CHECK(v->is_array(), what_, ": key '", key, "' must be a list of integers, got ", json_type(*v));
  std::vector<int64_t> out;
  for (const auto& e : *v) {
    H3_CHECK(e.is_number_integer(), what_, ": key '", key, "' must be a list of integers, found ", json_type(e));
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<double> ConfigReader::get_double_list(const std::string& key, std::vector<double> def) const {
  const json* v = find(key);
  if (!v) return def;
  H3_CHECK(v->is_array(), what_, ": key '", key, "' must be a list of numbers, got ", json_type(*v));
  std::vector<double> out;
  for (const auto& e : *v) {
    H3_CHECK(e.is_number(), what_, ": key '", key, "' must be a list of numbers, found ", json_type(e));
    out.push_back(e.get<double>());
  }
  return out;
}

std::vector<std::vector<int64_t>> ConfigReader::get_int_lists(const std::string& key,
                                                              std::vector<std::vector<int64_t>> def) const {
  const json* v = find(key);
  if (!v) return def;
  H3_CHECK(v->is_array(), what_, ": key '", key, "' must be a list of integer lists, got ", json_type(*v));
  std::vector<std::vector<int64_t>> out;
  for (const auto& row : *v) {
    H3_CHECK(row.is_array(), what_, ": key '", key, "' must be a list of integer lists");
    std::vector<int64_t> r;
    for (const auto& e : row) {
      H3_CHECK(e.is_number_integer(), what_, ": key '", key, "' must be a list of integer lists");
      r.push_back(e.get<int64_t>());
    }
    out.push_back(std::move(r));
  }
  return out;
}

ConfigReader ConfigReader::child(const std::string& key) const {
  const json* v = find(key);
  if (!v) return ConfigReader(empty_object(), what_ + ":" + key);
  H3_CHECK(v->is_object(), what_, ": key '", key, "' must be an object, got ", json_type(*v));
  return ConfigReader(*v, what_ + ":" + key);
}

json parse_json_file(const std::string& path) {
  std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(path, ": malformed JSON (", e.what(), ")");
  }
}

// ---------------------------------------------------------------------------------------------------------------

namespace {
void check_positive(const std::string& what, const char* key, int64_t v) {
  H3_CHECK(v > 0, what, ": '", key, "' must be positive, got ", v);
}
}  // namespace

void DitConfig::validate(const std::string& what) const {
  for (auto [k, v] : {std::pair{"num_attention_heads", num_attention_heads}, {"attention_head_dim", attention_head_dim},
                      {"hidden_size", hidden_size}, {"num_layers", num_layers}, {"ffn_dim", ffn_dim},
                      {"in_channels", in_channels}, {"audio_in_channels", audio_in_channels}, {"text_dim", text_dim},
                      {"freq_dim", freq_dim}, {"time_embed_hidden_dim", time_embed_hidden_dim},
                      {"time_embed_dim", time_embed_dim}, {"rope_freq_dim", rope_freq_dim}})
    check_positive(what, k, v);
  H3_CHECK(num_refiner_layers >= 0, what, ": 'num_refiner_layers' must be >= 0");
  for (int64_t p : patch_size) H3_CHECK(p > 0, what, ": 'patch_size' entries must be positive");
  H3_CHECK(freq_dim % 2 == 0, what, ": 'freq_dim' must be even, got ", freq_dim);
  H3_CHECK(rotary_dim() <= attention_head_dim, what, ": 6 x rope_freq_dim (", rotary_dim(),
           ") must not exceed attention_head_dim (", attention_head_dim, ")");
}

DitConfig parse_dit_config(const json& j, const std::string& what, bool original) {
  ConfigReader r(j, what);
  DitConfig c;
  if (!original) {
    c.num_attention_heads = r.get_int("num_attention_heads", c.num_attention_heads);
    c.attention_head_dim = r.get_int("attention_head_dim", c.attention_head_dim);
    c.hidden_size = r.get_int("hidden_size", c.hidden_size);
    c.num_layers = r.get_int("num_layers", c.num_layers);
    c.num_refiner_layers = r.get_int("num_refiner_layers", c.num_refiner_layers);
    c.ffn_dim = r.get_int("ffn_dim", c.ffn_dim);
    c.in_channels = r.get_int("in_channels", c.in_channels);
    c.audio_in_channels = r.get_int("audio_in_channels", c.audio_in_channels);
    c.text_dim = r.get_int("text_dim", c.text_dim);
    c.freq_dim = r.get_int("freq_dim", c.freq_dim);
    c.time_embed_hidden_dim = r.get_int("time_embed_hidden_dim", c.time_embed_hidden_dim);
    c.time_embed_dim = r.get_int("time_embed_dim", c.time_embed_dim);
    c.rope_freq_dim = r.get_int("rope_freq_dim", c.rope_freq_dim);
    c.rope_theta = r.get_double("rope_theta", c.rope_theta);
    c.norm_eps = r.get_double("norm_eps", c.norm_eps);
    c.qk_norm_eps = r.get_double("qk_norm_eps", c.qk_norm_eps);
    c.final_norm_eps = r.get_double("final_norm_eps", c.final_norm_eps);
  } else {
    c.hidden_size = r.get_int("hidden_size", c.hidden_size);
    c.num_layers = r.get_int("num_layers", c.num_layers);
    c.num_refiner_layers = r.get_int("token_refiner_num_layers", c.num_refiner_layers);
    c.num_attention_heads = r.get_int("num_attention_heads", c.num_attention_heads);
    c.attention_head_dim = r.get_int("attention_head_dim", c.attention_head_dim);
    c.ffn_dim = r.get_int("ffn_hidden_size", c.ffn_dim);
    c.in_channels = r.get_int("latents_dim", c.in_channels);
    c.audio_in_channels = r.get_int("audio_latents_dim", c.audio_in_channels);
    c.text_dim = r.get_int("text_dim", c.text_dim);
    c.freq_dim = r.get_int("timestep_input_dim", c.freq_dim);
    c.time_embed_hidden_dim = r.get_int("time_embed_hidden_size", c.time_embed_hidden_dim);
    c.time_embed_dim = r.get_int("time_embed_dim", c.time_embed_dim);
    c.rope_freq_dim = r.get_int("rope_inv_freq_len", c.rope_freq_dim);
    c.qk_norm_eps = r.get_double("qk_norm_eps", c.qk_norm_eps);
    // The original config also states the AdaLN widths; they must agree with the rest.
    int64_t adaln = r.get_int("adaln_out_features", 18 * c.hidden_size);
    H3_CHECK(adaln == 18 * c.hidden_size, what, ": 'adaln_out_features' (", adaln, ") must be 18 x hidden_size");
    int64_t fin = r.get_int("final_adaln_out_features", 2 * c.hidden_size);
    H3_CHECK(fin == 2 * c.hidden_size, what, ": 'final_adaln_out_features' (", fin, ") must be 2 x hidden_size");
  }
  auto ps = r.get_int_list("patch_size", {c.patch_size[0], c.patch_size[1], c.patch_size[2]});
  H3_CHECK(ps.size() == 3, what, ": 'patch_size' must have 3 entries, got ", ps.size());
  c.patch_size = {ps[0], ps[1], ps[2]};
  c.validate(what);
  return c;
}

// ---------------------------------------------------------------------------------------------------------------

int64_t VideoVaeConfig::spatial_ratio() const {
  int64_t r = 1;
  for (int64_t f : spatial_downsample_factors) r *= f;
  return r;
}

int64_t VideoVaeConfig::temporal_ratio() const {
  int64_t r = 1;
  for (int64_t f : temporal_downsample_factors) r *= f;
  return r;
}

void VideoVaeConfig::validate(const std::string& what) const {
  check_positive(what, "latent_channels", latent_channels);
  check_positive(what, "decoder_num_layers", decoder_num_layers);
  check_positive(what, "decoder_num_attention_heads", decoder_num_attention_heads);
  check_positive(what, "decoder_attention_head_dim", decoder_attention_head_dim);
  check_positive(what, "decoder_ffn_mult", decoder_ffn_mult);
  check_positive(what, "clip_length", clip_length);
  H3_CHECK(decoder_num_register_tokens >= 0, what, ": 'decoder_num_register_tokens' must be >= 0");
  H3_CHECK(!block_out_channels.empty(), what, ": 'block_out_channels' must not be empty");
  H3_CHECK(spatial_downsample_factors.size() == block_out_channels.size() &&
               temporal_downsample_factors.size() == block_out_channels.size(),
           what, ": 'spatial_downsample_factors' and 'temporal_downsample_factors' need one entry per block (",
           block_out_channels.size(), ")");
  H3_CHECK(static_cast<int64_t>(latents_mean.size()) == latent_channels &&
               static_cast<int64_t>(latents_std.size()) == latent_channels,
           what, ": 'latents_mean' and 'latents_std' need latent_channels (", latent_channels, ") values each, got ",
           latents_mean.size(), " and ", latents_std.size());
  for (double s : latents_std) H3_CHECK(s > 0, what, ": 'latents_std' values must be positive");
}

VideoVaeConfig parse_video_vae_config(const json& j, const std::string& what) {
  ConfigReader r(j, what);
  VideoVaeConfig c;
  c.in_channels = r.get_int("in_channels", c.in_channels);
  c.out_channels = r.get_int("out_channels", c.out_channels);
  c.latent_channels = r.get_int("latent_channels", c.latent_channels);
  c.block_out_channels = r.get_int_list("block_out_channels", c.block_out_channels);
  c.layers_per_block = r.get_int("layers_per_block", c.layers_per_block);
  c.spatial_downsample_factors = r.get_int_list("spatial_downsample_factors", c.spatial_downsample_factors);
  c.temporal_downsample_factors = r.get_int_list("temporal_downsample_factors", c.temporal_downsample_factors);
  c.norm_num_groups = r.get_int("norm_num_groups", c.norm_num_groups);
  c.norm_eps = r.get_double("norm_eps", c.norm_eps);
  c.spatial_padding_mode = r.get_string("spatial_padding_mode", c.spatial_padding_mode);
  c.decoder_num_layers = r.get_int("decoder_num_layers", c.decoder_num_layers);
  c.decoder_num_attention_heads = r.get_int("decoder_num_attention_heads", c.decoder_num_attention_heads);
  c.decoder_attention_head_dim = r.get_int("decoder_attention_head_dim", c.decoder_attention_head_dim);
  c.decoder_num_register_tokens = r.get_int("decoder_num_register_tokens", c.decoder_num_register_tokens);
  c.decoder_ffn_mult = r.get_int("decoder_ffn_mult", c.decoder_ffn_mult);
  c.decoder_rope_theta = r.get_double("decoder_rope_theta", c.decoder_rope_theta);
  c.decoder_rope_dim_ratio = r.get_double("decoder_rope_dim_ratio", c.decoder_rope_dim_ratio);
  c.decoder_norm_eps = r.get_double("decoder_norm_eps", c.decoder_norm_eps);
  c.clip_length = r.get_int("clip_length", c.clip_length);
  c.token_drop = r.get_int("token_drop", c.token_drop);
  c.latents_mean = r.get_double_list("latents_mean", {});
  c.latents_std = r.get_double_list("latents_std", {});
  c.validate(what);
  return c;
}

VideoVaeConfig parse_original_video_vae_config(const json& wrapper, const json& source, const std::string& what) {
  ConfigReader w(wrapper, what + " (video_vae/config.json)");
  ConfigReader s(source, what + " (video_vae/source/config.json)");
  VideoVaeConfig c;
  c.latent_channels = w.get_int("latent_channels", s.get_int("z_channels", c.latent_channels));
  c.out_channels = s.get_int("out_ch", c.out_channels);
  int64_t ch = s.get_int("ch", 128);
  auto mult = s.get_int_list("ch_mult", {1, 2, 2, 4, 4, 8});
  c.block_out_channels.clear();
  for (int64_t m : mult) c.block_out_channels.push_back(ch * m);
  c.layers_per_block = s.get_int("num_res_blocks", c.layers_per_block);
  c.spatial_downsample_factors = s.get_int_list("space_down", c.spatial_downsample_factors);
  c.temporal_downsample_factors = s.get_int_list("time_down", c.temporal_downsample_factors);
  c.spatial_padding_mode = s.get_string("padding_mode", c.spatial_padding_mode);
  ConfigReader vit = s.child("vit_decoder_kwargs");
  c.decoder_num_layers = vit.get_int("num_layers", c.decoder_num_layers);
  c.decoder_num_attention_heads = vit.get_int("heads", c.decoder_num_attention_heads);
  c.decoder_attention_head_dim = vit.get_int("dim_head", c.decoder_attention_head_dim);
  c.decoder_rope_theta = vit.get_double("rope_theta", c.decoder_rope_theta);
  c.decoder_rope_dim_ratio = vit.get_double("rope_dim_ratio", c.decoder_rope_dim_ratio);
  c.clip_length = w.get_int("vae_clip_length", c.clip_length);
  c.token_drop = w.get_int("vae_token_drop", c.token_drop);
  c.latents_mean = w.get_double_list("latents_mean", {});
  c.latents_std = w.get_double_list("latents_std", {});
  c.validate(what);
  return c;
}

// ---------------------------------------------------------------------------------------------------------------

int64_t AudioVaeConfig::hop_length() const {
  int64_t h = 1;
  for (int64_t r : decoder_rates) h *= r;
  return h;
}

void AudioVaeConfig::validate(const std::string& what) const {
  check_positive(what, "latent_channels", latent_channels);
  check_positive(what, "decoder_dim", decoder_dim);
  check_positive(what, "sampling_rate", sampling_rate);
  H3_CHECK(!decoder_rates.empty() && decoder_rates.size() == decoder_kernel_sizes.size(), what,
           ": 'decoder_rates' and 'decoder_kernel_sizes' need the same, non-zero number of entries");
  H3_CHECK(resblock_kernel_sizes.size() == resblock_dilation_sizes.size() && !resblock_kernel_sizes.empty(), what,
           ": 'resblock_kernel_sizes' and 'resblock_dilation_sizes' need the same, non-zero number of entries");
  int64_t enc = 1;
  for (int64_t r : encoder_rates) enc *= r;
  H3_CHECK(enc == hop_length(), what, ": the product of encoder_rates (", enc,
           ") must equal the product of decoder_rates (", hop_length(), ")");
  H3_CHECK(decoder_dim % (int64_t{1} << decoder_rates.size()) == 0, what, ": 'decoder_dim' (", decoder_dim,
           ") must be divisible by 2^len(decoder_rates)");
  H3_CHECK(static_cast<int64_t>(latents_mean.size()) == latent_channels &&
               static_cast<int64_t>(latents_std.size()) == latent_channels,
           what, ": 'latents_mean' and 'latents_std' need latent_channels (", latent_channels, ") values each, got ",
           latents_mean.size(), " and ", latents_std.size());
  for (double s : latents_std) H3_CHECK(s > 0, what, ": 'latents_std' values must be positive");
}

namespace {
void read_audio_arch(const ConfigReader& r, AudioVaeConfig& c, const char* latent_key) {
  c.encoder_dim = r.get_int("encoder_dim", c.encoder_dim);
  c.encoder_rates = r.get_int_list("encoder_rates", c.encoder_rates);
  c.latent_dim = r.get_int("latent_dim", c.latent_dim);
  c.latent_channels = r.get_int(latent_key, c.latent_channels);
  c.num_attention_heads = r.get_int("num_attention_heads", c.num_attention_heads);
  c.decoder_dim = r.get_int("decoder_dim", c.decoder_dim);
  c.decoder_rates = r.get_int_list("decoder_rates", c.decoder_rates);
  std::vector<int64_t> kernels;
  for (int64_t u : c.decoder_rates) kernels.push_back(u % 2 == 0 ? 2 * u : 2 * u - 1);
  c.decoder_kernel_sizes = r.get_int_list("decoder_kernel_sizes", kernels);
  c.resblock_kernel_sizes = r.get_int_list("resblock_kernel_sizes", c.resblock_kernel_sizes);
  c.resblock_dilation_sizes = r.get_int_lists("resblock_dilation_sizes", c.resblock_dilation_sizes);
}
}  // namespace

AudioVaeConfig parse_audio_vae_config(const json& j, const std::string& what) {
  ConfigReader r(j, what);
  AudioVaeConfig c;
  read_audio_arch(r, c, "latent_channels");
  c.sampling_rate = r.get_int("sampling_rate", c.sampling_rate);
  c.latents_mean = r.get_double_list("latents_mean", {});
  c.latents_std = r.get_double_list("latents_std", {});
  c.validate(what);
  return c;
}

AudioVaeConfig parse_original_audio_vae_config(const json& config, const json& metadata, const std::string& what) {
  ConfigReader cfg(config, what + " (audio_vae/config.json)");
  ConfigReader meta = ConfigReader(metadata, what + " (audio_vae/metadata.json)").child("metadata").child("kwargs");
  AudioVaeConfig c;
  read_audio_arch(meta, c, "vae_latent_channels");
  c.latent_channels = cfg.get_int("latent_channels", c.latent_channels);
  c.sampling_rate = cfg.get_int("sample_rate", meta.get_int("sample_rate", c.sampling_rate));
  c.latents_mean = cfg.get_double_list("latents_mean", {});
  c.latents_std = cfg.get_double_list("latents_std", {});
  c.validate(what);
  return c;
}

// ---------------------------------------------------------------------------------------------------------------

void TextEncoderConfig::validate(const std::string& what) const {
  const auto& t = text;
  check_positive(what, "text_config.hidden_size", t.hidden_size);
  check_positive(what, "text_config.num_attention_heads", t.num_attention_heads);
  check_positive(what, "text_config.num_key_value_heads", t.num_key_value_heads);
  check_positive(what, "text_config.head_dim", t.head_dim);
  check_positive(what, "text_config.intermediate_size", t.intermediate_size);
  check_positive(what, "text_config.vocab_size", t.vocab_size);
  check_positive(what, "text_config.max_position_embeddings", t.max_position_embeddings);
  H3_CHECK(t.num_attention_heads % t.num_key_value_heads == 0, what,
           ": text_config.num_attention_heads must be a multiple of num_key_value_heads");
  H3_CHECK(t.num_hidden_layers >= kConditionerLayers, what, ": text_config.num_hidden_layers (", t.num_hidden_layers,
           ") must be at least ", kConditionerLayers, " (MiniMax-H3 reads the hidden state after layer 50)");
  H3_CHECK(t.head_dim % 2 == 0, what, ": text_config.head_dim must be even");
  int64_t sec = 0;
  for (int64_t s : t.mrope_section) sec += s;
  H3_CHECK(t.mrope_section.size() == 3 && sec <= t.head_dim / 2, what,
           ": text_config mrope_section must have 3 entries summing to at most head_dim/2 (", t.head_dim / 2, ")");
  H3_CHECK(!t.attention_bias, what, ": text_config.attention_bias=true is not supported (Qwen3-VL has no biases)");
}

TextEncoderConfig parse_text_encoder_config(const json& j, const std::string& what) {
  ConfigReader top(j, what);
  TextEncoderConfig c;
  ConfigReader t = top.child("text_config");
  auto& tc = c.text;
  tc.hidden_size = t.get_int("hidden_size", tc.hidden_size);
  tc.num_hidden_layers = t.get_int("num_hidden_layers", tc.num_hidden_layers);
  tc.num_attention_heads = t.get_int("num_attention_heads", tc.num_attention_heads);
  tc.num_key_value_heads = t.get_int("num_key_value_heads", tc.num_key_value_heads);
  tc.head_dim = t.get_int("head_dim", tc.head_dim);
  tc.intermediate_size = t.get_int("intermediate_size", tc.intermediate_size);
  tc.rms_norm_eps = t.get_double("rms_norm_eps", tc.rms_norm_eps);
  tc.vocab_size = t.get_int("vocab_size", tc.vocab_size);
  tc.attention_bias = t.get_bool("attention_bias", tc.attention_bias);
  tc.max_position_embeddings = t.get_int("max_position_embeddings", tc.max_position_embeddings);
  // transformers 5 keeps rope settings under rope_parameters; older files use rope_scaling + rope_theta.
  ConfigReader rope = t.has("rope_parameters") ? t.child("rope_parameters") : t.child("rope_scaling");
  tc.rope_theta = rope.get_double("rope_theta", t.get_double("rope_theta", tc.rope_theta));
  tc.mrope_section = rope.get_int_list("mrope_section", tc.mrope_section);
  tc.mrope_interleaved = rope.get_bool("mrope_interleaved", tc.mrope_interleaved);
  std::string rope_type = rope.get_string("rope_type", rope.get_string("type", "default"));
  H3_CHECK(rope_type == "default" || rope_type == "mrope", what, ": rope_type '", rope_type,
           "' is not supported (expected 'default')");

  ConfigReader v = top.child("vision_config");
  auto& vc = c.vision;
  vc.depth = v.get_int("depth", vc.depth);
  vc.hidden_size = v.get_int("hidden_size", vc.hidden_size);
  vc.num_heads = v.get_int("num_heads", vc.num_heads);
  vc.intermediate_size = v.get_int("intermediate_size", vc.intermediate_size);
  vc.in_channels = v.get_int("in_channels", vc.in_channels);
  vc.patch_size = v.get_int("patch_size", vc.patch_size);
  vc.temporal_patch_size = v.get_int("temporal_patch_size", vc.temporal_patch_size);
  vc.spatial_merge_size = v.get_int("spatial_merge_size", vc.spatial_merge_size);
  vc.out_hidden_size = v.get_int("out_hidden_size", vc.out_hidden_size);
  vc.num_position_embeddings = v.get_int("num_position_embeddings", vc.num_position_embeddings);
  vc.deepstack_visual_indexes = v.get_int_list("deepstack_visual_indexes", vc.deepstack_visual_indexes);
  vc.hidden_act = v.get_string("hidden_act", vc.hidden_act);
  vc.rope_theta = v.child("rope_parameters").get_double("rope_theta", vc.rope_theta);

  c.image_token_id = top.get_int("image_token_id", c.image_token_id);
  c.video_token_id = top.get_int("video_token_id", c.video_token_id);
  c.vision_start_token_id = top.get_int("vision_start_token_id", c.vision_start_token_id);
  c.vision_end_token_id = top.get_int("vision_end_token_id", c.vision_end_token_id);
  c.validate(what);
  return c;
}

// The rules the image and the video processor share (patch sizes, pixel bounds, normalization, resample).
template <typename ProcessorConfig>
void validate_patch_processor(const ProcessorConfig& c, const std::string& what) {
  check_positive(what, "patch_size", c.patch_size);
  check_positive(what, "temporal_patch_size", c.temporal_patch_size);
  check_positive(what, "merge_size", c.merge_size);
  check_positive(what, "size.shortest_edge", c.min_pixels);
  H3_CHECK(c.max_pixels >= c.min_pixels, what, ": size.longest_edge (", c.max_pixels,
           ") must be at least size.shortest_edge (", c.min_pixels, ")");
  H3_CHECK(c.image_mean.size() == 3 && c.image_std.size() == 3, what,
           ": image_mean and image_std must have 3 entries (R, G, B), got ", c.image_mean.size(), " and ",
           c.image_std.size());
  for (double s : c.image_std) H3_CHECK(s > 0, what, ": every image_std entry must be positive, got ", s);
  H3_CHECK(c.rescale_factor > 0, what, ": rescale_factor must be positive, got ", c.rescale_factor);
  H3_CHECK(c.resample == 3, what, ": resample ", c.resample, " is not supported (h3 implements 3, bicubic)");
}

void ImageProcessorConfig::validate(const std::string& what) const { validate_patch_processor(*this, what); }

ImageProcessorConfig parse_image_processor_config(const json& j, const std::string& what) {
  ConfigReader top(j, what);
  ConfigReader r = top.has("image_processor") ? top.child("image_processor") : top;
  ImageProcessorConfig c;
  const std::string type = r.get_string("image_processor_type", "Qwen2VLImageProcessor");
  H3_CHECK(type == "Qwen2VLImageProcessor" || type == "Qwen2VLImageProcessorFast", what, ": image_processor_type '",
           type, "' is not supported (expected Qwen2VLImageProcessor or Qwen2VLImageProcessorFast)");
  for (const char* flag : {"do_resize", "do_rescale", "do_normalize"})
    H3_CHECK(r.get_bool(flag, true), what, ": ", flag, "=false is not supported");
  c.patch_size = r.get_int("patch_size", c.patch_size);
  c.temporal_patch_size = r.get_int("temporal_patch_size", c.temporal_patch_size);
  c.merge_size = r.get_int("merge_size", c.merge_size);
  ConfigReader size = r.child("size");
  c.min_pixels = r.get_int("min_pixels", size.get_int("shortest_edge", c.min_pixels));
  c.max_pixels = r.get_int("max_pixels", size.get_int("longest_edge", c.max_pixels));
  c.image_mean = r.get_double_list("image_mean", c.image_mean);
  c.image_std = r.get_double_list("image_std", c.image_std);
  c.rescale_factor = r.get_double("rescale_factor", c.rescale_factor);
  c.resample = r.get_int("resample", c.resample);
  c.validate(what);
  return c;
}

void VideoProcessorConfig::validate(const std::string& what) const {
  validate_patch_processor(*this, what);
  check_positive(what, "max_video_tokens", max_video_tokens);
}

VideoProcessorConfig parse_video_processor_config(const json& j, const std::string& what) {
  ConfigReader top(j, what);
  ConfigReader r = top.has("video_processor") ? top.child("video_processor") : top;
  VideoProcessorConfig c;
  const std::string type = r.get_string("video_processor_type", "Qwen3VLVideoProcessor");
  H3_CHECK(type == "Qwen3VLVideoProcessor", what, ": video_processor_type '", type,
           "' is not supported (expected Qwen3VLVideoProcessor)");
  for (const char* flag : {"do_resize", "do_rescale", "do_normalize"})
    H3_CHECK(r.get_bool(flag, true), what, ": ", flag, "=false is not supported");
  c.patch_size = r.get_int("patch_size", c.patch_size);
  c.temporal_patch_size = r.get_int("temporal_patch_size", c.temporal_patch_size);
  c.merge_size = r.get_int("merge_size", c.merge_size);
  if (r.has("size")) {  // the reference's resize raises for a size without both keys
    ConfigReader size = r.child("size");
    H3_CHECK(size.has("shortest_edge") && size.has("longest_edge"), what,
             ": size must have both shortest_edge and longest_edge (the video's pixel bounds)");
    c.min_pixels = size.get_int("shortest_edge", c.min_pixels);
    c.max_pixels = size.get_int("longest_edge", c.max_pixels);
  }
  c.image_mean = r.get_double_list("image_mean", c.image_mean);
  c.image_std = r.get_double_list("image_std", c.image_std);
  c.rescale_factor = r.get_double("rescale_factor", c.rescale_factor);
  c.resample = r.get_int("resample", c.resample);
  c.cap_pixels_per_frame = r.get_bool("cap_pixels_per_frame", c.cap_pixels_per_frame);
  c.max_video_tokens = r.get_int("max_video_tokens", c.max_video_tokens);
  c.validate(what);
  return c;
}

SchedulerConfig parse_scheduler_config(const json& j, const std::string& what, double default_shift) {
  ConfigReader r(j, what);
  SchedulerConfig c;
  c.shift = r.get_double("shift", default_shift);
  H3_CHECK(c.shift > 0, what, ": 'shift' must be positive, got ", c.shift);
  return c;
}

CanvasConfig parse_canvas_config(const json& j, const std::string& what) {
  H3_CHECK(j.is_object(), what, ": expected a JSON object, got ", json_type(j));
  CanvasConfig c;
  for (auto [key, field] : {std::pair{"canvas_short_edge", &c.canvas_short_edge},
                            std::pair{"canvas_max_pixels", &c.canvas_max_pixels},
                            std::pair{"reference_image_short_edge", &c.reference_image_short_edge}}) {
    if (!j.contains(key)) continue;
    const json& v = j.at(key);
    H3_CHECK(v.is_number_integer() && v.get<int64_t>() > 0, what, ": key '", key, "' must be a positive integer, got ",
             v.dump(), ".");
    *field = v.get<int64_t>();
  }
  return c;
}

CanvasConfig load_canvas_config(const std::string& index_file) {
  if (index_file.empty()) return {};
  return parse_canvas_config(parse_json_file(index_file), index_file);
}

}  // namespace h3
