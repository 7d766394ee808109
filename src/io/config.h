// Typed configuration of every component, parsed from its config.json. Defaults equal the released values;
// unknown keys are ignored; a key of the wrong type is rejected with its name.
//
// Every parsed value is then checked (each struct's `validate`, the one place its rules live): against a plausible
// range, generous around the release's values, that keeps every size, product and loop a config implies far from
// overflow and from an allocation that could never succeed (issue 22, item 3), and against what h3 can run. Each
// failure is one sentence naming the file, the key, the valid range and the value. The loaders of a snapshot's
// components (io/snapshot.h) also compare the values with the tensors the weights hold, before validating.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace h3 {

// Reads typed values out of one JSON object; `what` (e.g. "transformer/config.json") prefixes every error.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string what);
  bool has(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_double(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_string(const std::string& key, const std::string& def) const;
  std::vector<int64_t> get_int_list(const std::string& key, std::vector<int64_t> def) const;
  std::vector<double> get_double_list(const std::string& key, std::vector<double> def) const;
  std::vector<std::vector<int64_t>> get_int_lists(const std::string& key, std::vector<std::vector<int64_t>> def) const;
  ConfigReader child(const std::string& key) const;  // a nested object ({} when absent)
  const std::string& what() const { return what_; }

 private:
  const nlohmann::json* find(const std::string& key) const;
  const nlohmann::json& j_;
  std::string what_;
};

nlohmann::json parse_json_file(const std::string& path);  // throws naming the file

// Run by a parser on the values it read, before it validates them: how the snapshot's loaders hold a config against
// the weights' headers first (io/weights_fit.h), so that a value the weights contradict is named with what they hold.
template <typename Config>
using BeforeValidation = std::function<void(const Config&)>;

// ---------------------------------------------------------------------------------------------------------------
// MiniMax-H3 transformer (spec/dit.md §2 of layout.md). Field names are the diffusers ones.
struct DitConfig {
  int64_t num_attention_heads = 56;
  int64_t attention_head_dim = 128;
  int64_t hidden_size = 5376;
  int64_t num_layers = 50;  // kReleaseTransformerBlocks (include/h3/request.h)
  int64_t num_refiner_layers = 2;
  int64_t ffn_dim = 14336;
  int64_t in_channels = 24;
  int64_t audio_in_channels = 32;
  std::array<int64_t, 3> patch_size = {1, 2, 2};
  int64_t text_dim = 5120;
  int64_t freq_dim = 256;
  int64_t time_embed_hidden_dim = 5376;
  int64_t time_embed_dim = 2688;
  int64_t rope_freq_dim = 16;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  double qk_norm_eps = 1e-5;
  double final_norm_eps = 1e-5;

  int64_t patch_dim() const { return in_channels * patch_size[0] * patch_size[1] * patch_size[2]; }
  int64_t inner_dim() const { return num_attention_heads * attention_head_dim; }
  int64_t rotary_dim() const { return 6 * rope_freq_dim; }
  void validate(const std::string& what) const;
};
// `original` selects the original release's field names (layout.md §3.2).
DitConfig parse_dit_config(const nlohmann::json& j, const std::string& what, bool original = false,
                           const BeforeValidation<DitConfig>& before = {});

// ---------------------------------------------------------------------------------------------------------------
// Video VAE (spec/video_vae.md §2).
struct VideoVaeConfig {
  int64_t in_channels = 3;
  int64_t out_channels = 3;
  int64_t latent_channels = 24;
  std::vector<int64_t> block_out_channels = {128, 256, 256, 512, 512, 1024};
  int64_t layers_per_block = 2;
  std::vector<int64_t> spatial_downsample_factors = {2, 2, 2, 2, 1, 1};
  std::vector<int64_t> temporal_downsample_factors = {1, 2, 2, 1, 1, 1};
  int64_t norm_num_groups = 32;
  double norm_eps = 1e-6;
  std::string spatial_padding_mode = "reflect";
  int64_t decoder_num_layers = 36;
  int64_t decoder_num_attention_heads = 32;
  int64_t decoder_attention_head_dim = 64;
  int64_t decoder_num_register_tokens = 4;
  int64_t decoder_ffn_mult = 4;
  double decoder_rope_theta = 100.0;
  double decoder_rope_dim_ratio = 0.75;
  double decoder_norm_eps = 1e-5;
  int64_t clip_length = 17;
  int64_t token_drop = 3;
  std::vector<double> latents_mean;  // latent_channels values (required)
  std::vector<double> latents_std;

  int64_t spatial_ratio() const;   // product of spatial factors (16)
  int64_t temporal_ratio() const;  // product of temporal factors (4)
  int64_t decoder_dim() const { return decoder_num_attention_heads * decoder_attention_head_dim; }
  void validate(const std::string& what) const;
};
VideoVaeConfig parse_video_vae_config(const nlohmann::json& j, const std::string& what,
                                      const BeforeValidation<VideoVaeConfig>& before = {});
// Original release: video_vae/config.json (wrapper) + video_vae/source/config.json (architecture).
VideoVaeConfig parse_original_video_vae_config(const nlohmann::json& wrapper, const nlohmann::json& source,
                                               const std::string& what,
                                               const BeforeValidation<VideoVaeConfig>& before = {});

// ---------------------------------------------------------------------------------------------------------------
// Audio VAE (spec/audio_vae.md §2).
struct AudioVaeConfig {
  int64_t encoder_dim = 64;
  std::vector<int64_t> encoder_rates = {2, 4, 4, 5, 5};
  int64_t latent_dim = 2048;
  int64_t latent_channels = 32;
  int64_t num_attention_heads = 8;
  int64_t decoder_dim = 1024;
  std::vector<int64_t> decoder_rates = {5, 5, 2, 2, 2, 2, 2};
  std::vector<int64_t> decoder_kernel_sizes = {9, 9, 4, 4, 4, 4, 4};
  std::vector<int64_t> resblock_kernel_sizes = {3, 7, 11};
  std::vector<std::vector<int64_t>> resblock_dilation_sizes = {{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
  int64_t sampling_rate = 32000;
  std::vector<double> latents_mean;
  std::vector<double> latents_std;

  int64_t hop_length() const;  // product of decoder_rates (800)
  void validate(const std::string& what) const;
};
AudioVaeConfig parse_audio_vae_config(const nlohmann::json& j, const std::string& what,
                                      const BeforeValidation<AudioVaeConfig>& before = {});
// Original release: audio_vae/config.json + audio_vae/metadata.json (metadata.kwargs).
AudioVaeConfig parse_original_audio_vae_config(const nlohmann::json& config, const nlohmann::json& metadata,
                                               const std::string& what,
                                               const BeforeValidation<AudioVaeConfig>& before = {});

// ---------------------------------------------------------------------------------------------------------------
// Qwen3-VL conditioner (spec/conditioner.md §2).
struct QwenTextConfig {
  int64_t hidden_size = 5120;
  int64_t num_hidden_layers = 64;
  int64_t num_attention_heads = 64;
  int64_t num_key_value_heads = 8;
  int64_t head_dim = 128;
  int64_t intermediate_size = 25600;
  double rms_norm_eps = 1e-6;
  double rope_theta = 5000000.0;
  std::vector<int64_t> mrope_section = {24, 20, 20};
  bool mrope_interleaved = true;
  int64_t vocab_size = 151936;
  bool attention_bias = false;
  // The longest prompt h3 accepts, in tokens (the release says 262144; a file without it takes transformers'
  // Qwen3VLTextConfig default). The reference neither truncates nor refuses longer ones (conditioner.md §4).
  int64_t max_position_embeddings = 128000;
};
struct QwenVisionConfig {
  int64_t depth = 27;
  int64_t hidden_size = 1152;
  int64_t num_heads = 16;
  int64_t intermediate_size = 4304;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t out_hidden_size = 5120;
  int64_t num_position_embeddings = 2304;
  std::vector<int64_t> deepstack_visual_indexes = {8, 16, 24};
  std::string hidden_act = "gelu_pytorch_tanh";
  double rope_theta = 10000.0;  // the 2-D rotary's base (vision_config.rope_parameters in transformers 5)
};
struct TextEncoderConfig {
  QwenTextConfig text;
  QwenVisionConfig vision;
  int64_t image_token_id = 151655;
  int64_t video_token_id = 151656;
  int64_t vision_start_token_id = 151652;
  int64_t vision_end_token_id = 151653;
  void validate(const std::string& what) const;
  // The vision tower's rules as h3 runs it (transformers' Qwen3VLVisionModel), beyond validate's ranges: judged
  // where the tower is used or its weights are present (a text-only checkpoint may keep any vision_config).
  void validate_vision(const std::string& what) const;
};
// The conditioner output is the hidden state after this many decoder layers (layers 0..49).
constexpr int64_t kConditionerLayers = 50;
TextEncoderConfig parse_text_encoder_config(const nlohmann::json& j, const std::string& what,
                                            const BeforeValidation<TextEncoderConfig>& before = {});

// ---------------------------------------------------------------------------------------------------------------
// Qwen3-VL image processor (spec/conditioner.md §5, layout.md §2.4): the processor/ folder's preprocessor_config.json,
// or the "image_processor" object of its processor_config.json (both layouts are accepted: the JSON given is read
// from its "image_processor" object when it has one, else from its top level). A key the file leaves out takes the
// reference class's default (transformers' Qwen2VLImageProcessor), as transformers does — not the release's value.
struct ImageProcessorConfig {
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  int64_t min_pixels = 56 * 56;         // size.shortest_edge (or the older min_pixels key)
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge (or max_pixels)
  std::vector<double> image_mean = {0.48145466, 0.4578275, 0.40821073};  // one per channel (RGB)
  std::vector<double> image_std = {0.26862954, 0.26130258, 0.27577711};
  double rescale_factor = 1.0 / 255;
  int64_t resample = 3;  // PIL's numbering: 3 = bicubic (the only one implemented)

  int64_t factor() const { return patch_size * merge_size; }  // smart_resize's multiple
  void validate(const std::string& what) const;
};
ImageProcessorConfig parse_image_processor_config(const nlohmann::json& j, const std::string& what);

// Qwen3-VL video processor (spec/conditioner.md §5, §5.3): transformers' Qwen3VLVideoProcessor — the "video_processor"
// object of the processor/ folder's processor_config.json, or its flat video_preprocessor_config.json (the JSON given
// is read from its "video_processor" object when it has one, else from its top level). A key the file leaves out
// takes that class's default, as transformers does. The older min_pixels / max_pixels keys are ignored, as the
// reference ignores them for videos (its resize reads `size` only).
struct VideoProcessorConfig {
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  int64_t min_pixels = 128 * 32 * 32;  // size.shortest_edge: the least t'·h'·w' of a resized clip
  int64_t max_pixels = 32 * 32 * 768;  // size.longest_edge: the most t'·h'·w'
  std::vector<double> image_mean = {0.5, 0.5, 0.5};  // one per channel (RGB)
  std::vector<double> image_std = {0.5, 0.5, 0.5};
  double rescale_factor = 1.0 / 255;
  int64_t resample = 3;  // PIL's numbering: 3 = bicubic (the only one implemented)
  // The per-frame pixel cap of qwen-vl-utils (off when absent or null, transformers 5.17's behaviour) and its
  // ceiling in vision tokens per frame.
  bool cap_pixels_per_frame = false;
  int64_t max_video_tokens = 768;

  int64_t factor() const { return patch_size * merge_size; }  // smart_resize's spatial multiple
  void validate(const std::string& what) const;
};
VideoProcessorConfig parse_video_processor_config(const nlohmann::json& j, const std::string& what);

// ---------------------------------------------------------------------------------------------------------------
struct SchedulerConfig {
  double shift = 12.0;
  void validate(const std::string& what) const;
};
SchedulerConfig parse_scheduler_config(const nlohmann::json& j, const std::string& what, double default_shift);

// ---------------------------------------------------------------------------------------------------------------
// The canvas rule of the checkpoint (spec/sampling.md §3.1, §4): the modular pipeline's configs `canvas_short_edge`,
// `canvas_max_pixels` and `reference_image_short_edge`, top-level keys of the snapshot root's
// modular_model_index.json (diffusers reads model_index.json only when that file is absent). Defaults are the
// blocks' ConfigSpec defaults, the released values.
struct CanvasConfig {
  int64_t canvas_short_edge = 768;
  int64_t canvas_max_pixels = 768 * 1344;
  int64_t reference_image_short_edge = 2048;
};
// Throws naming `what` and the key when a present value is not a positive integer.
CanvasConfig parse_canvas_config(const nlohmann::json& j, const std::string& what);
// From Snapshot::index_file; the defaults when it is empty (no index) or the keys are absent, as in the original
// FL2VA/ and Ref2VA/ layout, whose model_index.json has none of them.
CanvasConfig load_canvas_config(const std::string& index_file);

}  // namespace h3
