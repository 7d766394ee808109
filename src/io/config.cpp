#include "io/config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

#include "media/mp4_writer.h"
#include "pipeline/geometry.h"
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

// The plausible ranges (issue 22, item 3): far above the release's values (spec/layout.md §2), far below what would
// overflow a size computed from them (the widest weight, 18·hidden x time_embed_dim x blocks, stays under 2^53).
constexpr int64_t kMaxLayers = 1024;      // blocks of one stack (the release: 50, 2, 36, 64, 27)
constexpr int64_t kMaxWidth = 1 << 18;    // a hidden, FFN, channel or vocabulary-free width (the widest: 25600)
constexpr int64_t kMaxHeads = 1024;       // attention heads, and the size of one head (56, 128)
constexpr int64_t kMaxFactor = 64;        // a patch, stride, rate, merge or multiplier (at most 16)
constexpr int64_t kMaxStages = 16;        // VAE levels, audio stages, resblocks, dilations (6, 7, 3, 3)
constexpr int64_t kMaxVocab = 1 << 22;    // vocabulary rows (151936)
constexpr int64_t kMaxPositions = 1 << 24;  // max_position_embeddings (262144)
constexpr int64_t kMaxPixels = 1 << 26;   // a processor's or canvas' pixel bound (the release's largest: 25165824)
constexpr int64_t kMaxEdge = 1 << 14;     // a canvas' or reference picture's short edge (2048)
constexpr int64_t kMaxHop = 1 << 16;      // audio samples per latent frame (800)
constexpr double kMaxRopeTheta = 1e12;    // a rotary base (100, 10000, 5e6)
constexpr double kMaxEps = 1.0;           // a norm epsilon (1e-6, 1e-5)
// The schedule shift (12 and 3): far from where float32 sigmas shift·s / (1 + (shift − 1)·s) overflow or flush
// to zero (spec/sampling.md §2).
constexpr double kMinShift = 1e-3, kMaxShift = 1e3;

void check_range(const std::string& what, const std::string& key, int64_t v, int64_t lo, int64_t hi) {
  H3_CHECK(v >= lo && v <= hi, what, ": '", key, "' must be in [", lo, ", ", hi, "], got ", v);
}

void check_positive(const std::string& what, const std::string& key, double v, double hi) {
  H3_CHECK(std::isfinite(v) && v > 0 && v <= hi, what, ": '", key, "' must be a number in (0, ", hi, "], got ", v);
}

// A list's length, then each entry, in ranges.
void check_list(const std::string& what, const std::string& key, const std::vector<int64_t>& v, int64_t min_size,
                int64_t lo, int64_t hi) {
  H3_CHECK(static_cast<int64_t>(v.size()) >= min_size && static_cast<int64_t>(v.size()) <= kMaxStages, what, ": '",
           key, "' must have ", min_size, " to ", kMaxStages, " entries, got ", v.size());
  for (size_t i = 0; i < v.size(); ++i) check_range(what, cat(key, "[", i, "]"), v[i], lo, hi);
}

// One latent statistic per latent channel, finite, the deviations positive.
void check_latent_statistics(const std::string& what, int64_t channels, const std::vector<double>& mean,
                             const std::vector<double>& std_dev) {
  H3_CHECK(static_cast<int64_t>(mean.size()) == channels && static_cast<int64_t>(std_dev.size()) == channels, what,
           ": 'latents_mean' and 'latents_std' need latent_channels (", channels, ") values each, got ", mean.size(),
           " and ", std_dev.size());
  for (double m : mean) H3_CHECK(std::isfinite(m), what, ": 'latents_mean' values must be finite, got ", m);
  for (double s : std_dev)
    H3_CHECK(std::isfinite(s) && s > 0, what, ": 'latents_std' values must be positive and finite, got ", s);
}

}  // namespace

void DitConfig::validate(const std::string& what) const {
  check_range(what, "num_layers", num_layers, 1, kMaxLayers);
  check_range(what, "num_refiner_layers", num_refiner_layers, 0, kMaxLayers);
  for (auto [k, v] : {std::pair{"hidden_size", hidden_size}, {"ffn_dim", ffn_dim}, {"in_channels", in_channels},
                      {"audio_in_channels", audio_in_channels}, {"text_dim", text_dim}, {"freq_dim", freq_dim},
                      {"time_embed_hidden_dim", time_embed_hidden_dim}, {"time_embed_dim", time_embed_dim}})
    check_range(what, k, v, 1, kMaxWidth);
  check_range(what, "num_attention_heads", num_attention_heads, 1, kMaxHeads);
  check_range(what, "attention_head_dim", attention_head_dim, 1, kMaxHeads);
  for (size_t i = 0; i < patch_size.size(); ++i) check_range(what, cat("patch_size[", i, "]"), patch_size[i], 1, kMaxFactor);
  H3_CHECK(freq_dim % 2 == 0, what, ": 'freq_dim' must be even, got ", freq_dim);
  check_range(what, "rope_freq_dim", rope_freq_dim, 1, kMaxHeads);
  H3_CHECK(rotary_dim() <= attention_head_dim, what, ": 6 x rope_freq_dim (", rotary_dim(),
           ") must not exceed attention_head_dim (", attention_head_dim, ")");
  check_positive(what, "rope_theta", rope_theta, kMaxRopeTheta);
  check_positive(what, "norm_eps", norm_eps, kMaxEps);
  check_positive(what, "qk_norm_eps", qk_norm_eps, kMaxEps);
  check_positive(what, "final_norm_eps", final_norm_eps, kMaxEps);
}

DitConfig parse_dit_config(const json& j, const std::string& what, bool original,
                           const BeforeValidation<DitConfig>& before) {
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
  if (before) before(c);
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
  H3_CHECK(in_channels == 3 && out_channels == 3, what,
           ": 'in_channels' and 'out_channels' must be 3 (RGB frames), got ", in_channels, " and ", out_channels);
  check_range(what, "latent_channels", latent_channels, 1, kMaxWidth);
  check_list(what, "block_out_channels", block_out_channels, 1, 1, kMaxWidth);
  check_range(what, "layers_per_block", layers_per_block, 1, kMaxLayers);
  H3_CHECK(spatial_downsample_factors.size() == block_out_channels.size() &&
               temporal_downsample_factors.size() == block_out_channels.size(),
           what, ": 'spatial_downsample_factors' and 'temporal_downsample_factors' need one entry per block (",
           block_out_channels.size(), ")");
  check_range(what, "norm_num_groups", norm_num_groups, 1, kMaxWidth);
  for (size_t i = 0; i < block_out_channels.size(); ++i) {
    const int64_t s = spatial_downsample_factors[i], t = temporal_downsample_factors[i];
    // A spatial stride 1 with a temporal stride > 1 would shrink the frame by the unpadded 3x3 kernel, a stride
    // above 2 would not divide it: the reference builds such levels, but no released geometry has them.
    H3_CHECK((s == 2 && t >= 1 && t <= kMaxFactor) || (s == 1 && t == 1), what, ": level ", i,
             " has spatial/temporal downsample factors ", s, "/", t, "; supported are spatial 2 with a temporal ",
             "factor in [1, ", kMaxFactor, "], or 1/1");
    H3_CHECK(block_out_channels[i] % norm_num_groups == 0, what, ": every block_out_channels entry must be a ",
             "multiple of norm_num_groups (", norm_num_groups, "), but block_out_channels[", i, "] is ",
             block_out_channels[i]);
  }
  check_positive(what, "norm_eps", norm_eps, kMaxEps);
  H3_CHECK(spatial_padding_mode == "reflect" || spatial_padding_mode == "replicate" ||
               spatial_padding_mode == "constant",
           what, ": 'spatial_padding_mode' must be 'reflect', 'replicate' or 'constant', got '", spatial_padding_mode,
           "'");
  check_range(what, "decoder_num_layers", decoder_num_layers, 1, kMaxLayers);
  check_range(what, "decoder_num_attention_heads", decoder_num_attention_heads, 1, kMaxHeads);
  check_range(what, "decoder_attention_head_dim", decoder_attention_head_dim, 1, kMaxHeads);
  check_range(what, "decoder_num_register_tokens", decoder_num_register_tokens, 0, kMaxLayers);
  check_range(what, "decoder_ffn_mult", decoder_ffn_mult, 1, kMaxFactor);
  check_positive(what, "decoder_rope_theta", decoder_rope_theta, kMaxRopeTheta);
  check_positive(what, "decoder_rope_dim_ratio", decoder_rope_dim_ratio, 1.0);
  // MiniMaxH3VideoRotaryPosEmbed rotates int(head_dim · ratio) channels, 2 per axis and frequency.
  const int64_t rotary = static_cast<int64_t>(static_cast<double>(decoder_attention_head_dim) * decoder_rope_dim_ratio);
  H3_CHECK(rotary > 0 && rotary % 6 == 0, what,
           ": the decoder's rotary dims int(decoder_attention_head_dim · decoder_rope_dim_ratio) = ", rotary,
           " must be a positive multiple of 6 (2 per axis of 3)");
  check_positive(what, "decoder_norm_eps", decoder_norm_eps, kMaxEps);
  // h3's frame rule (17·n + 5 frames ↔ 5·n + 2 latent frames, pipeline/geometry.h) is this clip geometry.
  int64_t ratio = 1;
  for (int64_t t : temporal_downsample_factors) {
    ratio *= t;  // at most 64 · 64 before the check
    H3_CHECK(ratio <= kMaxFactor, what, ": the temporal_downsample_factors must multiply to at most ", kMaxFactor);
  }
  check_range(what, "clip_length", clip_length, 1, kMaxLayers);
  const int64_t latents_per_clip = (clip_length + ratio - 1) / ratio;
  check_range(what, "token_drop", token_drop, 0, latents_per_clip - 1);
  H3_CHECK(clip_length == kVaeFramesPerChunk && latents_per_clip == kVaeLatentsPerChunk &&
               latents_per_clip - token_drop == latent_frame_count(kVaeLatentsPerChunk),
           what, ": h3's frame rule (", kVaeFramesPerChunk, "·n + ", kVaeLatentsPerChunk, " frames) needs clip_length ",
           kVaeFramesPerChunk, " encoded to ", kVaeLatentsPerChunk, " latent frames and token_drop ",
           kVaeLatentsPerChunk - latent_frame_count(kVaeLatentsPerChunk), ", got clip_length ", clip_length, " (",
           latents_per_clip, " latent frames at temporal ratio ", ratio, ") and token_drop ", token_drop);
  check_latent_statistics(what, latent_channels, latents_mean, latents_std);
}

VideoVaeConfig parse_video_vae_config(const json& j, const std::string& what,
                                      const BeforeValidation<VideoVaeConfig>& before) {
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
  if (before) before(c);
  c.validate(what);
  return c;
}

VideoVaeConfig parse_original_video_vae_config(const json& wrapper, const json& source, const std::string& what,
                                               const BeforeValidation<VideoVaeConfig>& before) {
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
  if (before) before(c);
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
  check_range(what, "encoder_dim", encoder_dim, 1, kMaxWidth);
  check_list(what, "encoder_rates", encoder_rates, 1, 1, kMaxFactor);
  // Every encoder stage doubles the channels.
  H3_CHECK(encoder_dim << encoder_rates.size() <= kMaxWidth, what, ": 'encoder_dim' (", encoder_dim, ") doubled by each of the ",
           encoder_rates.size(), " encoder_rates must stay at most ", kMaxWidth);
  check_range(what, "latent_dim", latent_dim, 1, kMaxWidth);
  check_range(what, "latent_channels", latent_channels, 1, kMaxWidth);
  check_range(what, "num_attention_heads", num_attention_heads, 1, kMaxHeads);
  H3_CHECK(latent_dim % latent_channels == 0, what, ": 'latent_dim' (", latent_dim,
           ") must be a multiple of 'latent_channels' (", latent_channels, ")");
  H3_CHECK(latent_dim % num_attention_heads == 0, what, ": 'latent_dim' (", latent_dim,
           ") must be a multiple of 'num_attention_heads' (", num_attention_heads, ")");
  check_range(what, "decoder_dim", decoder_dim, 1, kMaxWidth);
  check_list(what, "decoder_rates", decoder_rates, 1, 1, kMaxFactor);
  H3_CHECK(decoder_rates.size() == decoder_kernel_sizes.size(), what,
           ": 'decoder_rates' and 'decoder_kernel_sizes' need the same, non-zero number of entries");
  // Every upsampler must produce exactly rate × its input (so the output is hop · A samples).
  for (size_t i = 0; i < decoder_rates.size(); ++i) {
    const int64_t u = decoder_rates[i], k = decoder_kernel_sizes[i];
    H3_CHECK(k >= u && k <= 4 * kMaxFactor && (k - u) % 2 == 0, what, ": decoder stage ", i, " has rate ", u,
             " and kernel ", k, "; the kernel must be at least the rate, at most ", 4 * kMaxFactor,
             ", and differ from it by an even number");
  }
  H3_CHECK(decoder_dim % (int64_t{1} << decoder_rates.size()) == 0, what, ": 'decoder_dim' (", decoder_dim,
           ") must be divisible by 2^len(decoder_rates)");
  // Every AMP convolution must keep the length: odd kernels.
  check_list(what, "resblock_kernel_sizes", resblock_kernel_sizes, 1, 1, 4 * kMaxFactor);
  H3_CHECK(resblock_kernel_sizes.size() == resblock_dilation_sizes.size(), what,
           ": 'resblock_kernel_sizes' and 'resblock_dilation_sizes' need the same, non-zero number of entries");
  for (size_t j = 0; j < resblock_kernel_sizes.size(); ++j) {
    H3_CHECK(resblock_kernel_sizes[j] % 2 == 1, what, ": 'resblock_kernel_sizes' must be odd, got ",
             resblock_kernel_sizes[j]);
    check_list(what, cat("resblock_dilation_sizes[", j, "]"), resblock_dilation_sizes[j], 1, 1, kMaxFactor);
  }
  int64_t enc = 1, hop = 1;  // each at most 64 · 2^16 before its check
  for (int64_t r : encoder_rates)
    H3_CHECK((enc *= r) <= kMaxHop, what, ": the product of encoder_rates must be at most ", kMaxHop);
  for (int64_t r : decoder_rates)
    H3_CHECK((hop *= r) <= kMaxHop, what, ": the product of decoder_rates (the hop) must be at most ", kMaxHop);
  H3_CHECK(enc == hop, what, ": the product of encoder_rates (", enc, ") must equal the product of decoder_rates (",
           hop, ")");
  H3_CHECK(sampling_rate == kAudioSampleRate, what, ": 'sampling_rate' must be ", kAudioSampleRate,
           " (the rate MiniMax-H3's soundtrack and audio references run at), got ", sampling_rate);
  check_latent_statistics(what, latent_channels, latents_mean, latents_std);
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

AudioVaeConfig parse_audio_vae_config(const json& j, const std::string& what,
                                      const BeforeValidation<AudioVaeConfig>& before) {
  ConfigReader r(j, what);
  AudioVaeConfig c;
  read_audio_arch(r, c, "latent_channels");
  c.sampling_rate = r.get_int("sampling_rate", c.sampling_rate);
  c.latents_mean = r.get_double_list("latents_mean", {});
  c.latents_std = r.get_double_list("latents_std", {});
  if (before) before(c);
  c.validate(what);
  return c;
}

AudioVaeConfig parse_original_audio_vae_config(const json& config, const json& metadata, const std::string& what,
                                               const BeforeValidation<AudioVaeConfig>& before) {
  ConfigReader cfg(config, what + " (audio_vae/config.json)");
  ConfigReader meta = ConfigReader(metadata, what + " (audio_vae/metadata.json)").child("metadata").child("kwargs");
  AudioVaeConfig c;
  read_audio_arch(meta, c, "vae_latent_channels");
  c.latent_channels = cfg.get_int("latent_channels", c.latent_channels);
  c.sampling_rate = cfg.get_int("sample_rate", meta.get_int("sample_rate", c.sampling_rate));
  c.latents_mean = cfg.get_double_list("latents_mean", {});
  c.latents_std = cfg.get_double_list("latents_std", {});
  if (before) before(c);
  c.validate(what);
  return c;
}

// ---------------------------------------------------------------------------------------------------------------

void TextEncoderConfig::validate(const std::string& what) const {
  const auto& t = text;
  check_range(what, "text_config.hidden_size", t.hidden_size, 1, kMaxWidth);
  H3_CHECK(t.num_hidden_layers >= kConditionerLayers, what, ": text_config.num_hidden_layers (", t.num_hidden_layers,
           ") must be at least ", kConditionerLayers, " (MiniMax-H3 reads the hidden state after layer 50)");
  check_range(what, "text_config.num_hidden_layers", t.num_hidden_layers, kConditionerLayers, kMaxLayers);
  check_range(what, "text_config.num_attention_heads", t.num_attention_heads, 1, kMaxHeads);
  check_range(what, "text_config.num_key_value_heads", t.num_key_value_heads, 1, kMaxHeads);
  check_range(what, "text_config.head_dim", t.head_dim, 1, kMaxHeads);
  check_range(what, "text_config.intermediate_size", t.intermediate_size, 1, kMaxWidth);
  check_range(what, "text_config.vocab_size", t.vocab_size, 1, kMaxVocab);
  check_range(what, "text_config.max_position_embeddings", t.max_position_embeddings, 1, kMaxPositions);
  check_positive(what, "text_config.rms_norm_eps", t.rms_norm_eps, kMaxEps);
  check_positive(what, "text_config.rope_theta", t.rope_theta, kMaxRopeTheta);
  H3_CHECK(t.num_attention_heads % t.num_key_value_heads == 0, what,
           ": text_config.num_attention_heads must be a multiple of num_key_value_heads");
  H3_CHECK(t.head_dim % 2 == 0, what, ": text_config.head_dim must be even");
  H3_CHECK(t.mrope_section.size() == 3, what, ": text_config mrope_section must have 3 entries, got ",
           t.mrope_section.size());
  int64_t sec = 0;
  for (size_t i = 0; i < 3; ++i) {
    check_range(what, cat("text_config.mrope_section[", i, "]"), t.mrope_section[i], 0, t.head_dim / 2);
    sec += t.mrope_section[i];
  }
  H3_CHECK(sec <= t.head_dim / 2, what, ": text_config mrope_section must sum to at most head_dim/2 (",
           t.head_dim / 2, "), got ", sec);
  H3_CHECK(!t.attention_bias, what, ": text_config.attention_bias=true is not supported (Qwen3-VL has no biases)");

  // The vision tower's plausible ranges (a text-only snapshot keeps the vision_config defaults).
  const QwenVisionConfig& v = vision;
  check_range(what, "vision_config.depth", v.depth, 1, kMaxLayers);
  check_range(what, "vision_config.hidden_size", v.hidden_size, 1, kMaxWidth);
  check_range(what, "vision_config.num_heads", v.num_heads, 1, kMaxHeads);
  check_range(what, "vision_config.intermediate_size", v.intermediate_size, 1, kMaxWidth);
  check_range(what, "vision_config.patch_size", v.patch_size, 1, kMaxFactor);
  check_range(what, "vision_config.temporal_patch_size", v.temporal_patch_size, 1, kMaxFactor);
  check_range(what, "vision_config.spatial_merge_size", v.spatial_merge_size, 1, kMaxFactor);
  check_range(what, "vision_config.num_position_embeddings", v.num_position_embeddings, 1, kMaxWidth);
  check_range(what, "vision_config.in_channels", v.in_channels, 1, kMaxFactor);
  check_range(what, "vision_config.out_hidden_size", v.out_hidden_size, 1, kMaxWidth);
  H3_CHECK(static_cast<int64_t>(v.deepstack_visual_indexes.size()) <= v.depth, what,
           ": vision_config.deepstack_visual_indexes lists more blocks than the tower's depth (", v.depth, ")");
  check_positive(what, "vision_config.rope_theta", v.rope_theta, kMaxRopeTheta);
}

void TextEncoderConfig::validate_vision(const std::string& what) const {
  const QwenVisionConfig& v = vision;
  H3_CHECK(v.in_channels == 3, what, ": vision_config.in_channels must be 3 (RGB), got ", v.in_channels);
  H3_CHECK(v.hidden_size % v.num_heads == 0 && (v.hidden_size / v.num_heads) % 4 == 0, what,
           ": vision_config.hidden_size / num_heads (the head size) must be a whole multiple of 4 (its 2-D rotary "
           "splits it in four), got ", v.hidden_size, " / ", v.num_heads);
  H3_CHECK(v.out_hidden_size == text.hidden_size, what, ": vision_config.out_hidden_size (", v.out_hidden_size,
           ") must equal text_config.hidden_size (", text.hidden_size, ")");
  for (size_t k = 0; k < v.deepstack_visual_indexes.size(); ++k) {
    const int64_t i = v.deepstack_visual_indexes[k];
    H3_CHECK(i >= 0 && i < v.depth, what, ": vision_config.deepstack_visual_indexes must be block indices in [0, ",
             v.depth, "), got ", i);
    for (size_t j = 0; j < k; ++j)
      H3_CHECK(v.deepstack_visual_indexes[j] != i, what, ": vision_config.deepstack_visual_indexes lists block ", i,
               " twice");
  }
  H3_CHECK(v.hidden_act == "gelu_pytorch_tanh" || v.hidden_act == "gelu", what, ": vision_config.hidden_act '",
           v.hidden_act, "' is not supported (gelu_pytorch_tanh or gelu)");
}

TextEncoderConfig parse_text_encoder_config(const json& j, const std::string& what,
                                            const BeforeValidation<TextEncoderConfig>& before) {
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
  if (before) before(c);
  c.validate(what);
  return c;
}

// The rules the image and the video processor share (patch sizes, pixel bounds, normalization, resample).
template <typename ProcessorConfig>
void validate_patch_processor(const ProcessorConfig& c, const std::string& what) {
  check_range(what, "patch_size", c.patch_size, 1, kMaxFactor);
  check_range(what, "temporal_patch_size", c.temporal_patch_size, 1, kMaxFactor);
  check_range(what, "merge_size", c.merge_size, 1, kMaxFactor);
  check_range(what, "size.shortest_edge", c.min_pixels, 1, kMaxPixels);
  H3_CHECK(c.max_pixels >= c.min_pixels, what, ": size.longest_edge (", c.max_pixels,
           ") must be at least size.shortest_edge (", c.min_pixels, ")");
  check_range(what, "size.longest_edge", c.max_pixels, c.min_pixels, kMaxPixels);
  H3_CHECK(c.image_mean.size() == 3 && c.image_std.size() == 3, what,
           ": image_mean and image_std must have 3 entries (R, G, B), got ", c.image_mean.size(), " and ",
           c.image_std.size());
  for (double m : c.image_mean) H3_CHECK(std::isfinite(m), what, ": every image_mean entry must be finite, got ", m);
  for (double s : c.image_std)
    H3_CHECK(std::isfinite(s) && s > 0, what, ": every image_std entry must be positive and finite, got ", s);
  check_positive(what, "rescale_factor", c.rescale_factor, 1.0);
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
  check_range(what, "max_video_tokens", max_video_tokens, 1, kMaxPixels / (factor() * factor()));
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
  c.validate(what);
  return c;
}

void SchedulerConfig::validate(const std::string& what) const {
  H3_CHECK(std::isfinite(shift) && shift >= kMinShift && shift <= kMaxShift, what, ": 'shift' must be a number in [",
           kMinShift, ", ", kMaxShift, "], got ", shift);
}

CanvasConfig parse_canvas_config(const json& j, const std::string& what) {
  H3_CHECK(j.is_object(), what, ": expected a JSON object, got ", json_type(j));
  CanvasConfig c;
  for (auto [key, field, most] : {std::tuple{"canvas_short_edge", &c.canvas_short_edge, kMaxEdge},
                                  std::tuple{"canvas_max_pixels", &c.canvas_max_pixels, kMaxPixels},
                                  std::tuple{"reference_image_short_edge", &c.reference_image_short_edge, kMaxEdge}}) {
    if (!j.contains(key)) continue;
    const json& v = j.at(key);
    H3_CHECK(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= most, what, ": key '", key,
             "' must be a positive integer at most ", most, ", got ", v.dump(), ".");
    *field = v.get<int64_t>();
  }
  return c;
}

CanvasConfig load_canvas_config(const std::string& index_file) {
  if (index_file.empty()) return {};
  return parse_canvas_config(parse_json_file(index_file), index_file);
}

}  // namespace h3
