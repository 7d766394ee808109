#include "io/weights_fit.h"

#include <cstdint>
#include <limits>
#include <set>

#include "util/error.h"

namespace h3 {

namespace {

// a·b, or INT64_MAX when it would overflow (or a factor is not positive: no tensor has such a size either).
int64_t saturated_product(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (a <= 0 || b <= 0) return kMax;
  return a > kMax / b ? kMax : a * b;
}

int64_t saturated_product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p = saturated_product(p, x);
  return p;
}

std::string at(const std::string& prefix, int64_t i) { return cat(prefix, ".", i); }

const char* const kVisual = "model.visual";  // the vision tower's tensors (spec/layout.md §2.3)

// The checks of one config against one checkpoint's headers (the tensor names and shapes of io/manifest.cpp,
// spec/layout.md §2-3); each throws its sentence at once.
class Fit {
 public:
  Fit(const Checkpoint& ck, std::string file) : ck_(ck), file_(std::move(file)), names_(ck.names()) {}

  // The weights hold `noun`s prefix.0 .. prefix.N-1 (an index counts when some tensor is named prefix.i.*): `value`
  // must be N. A stack that is `optional` and absent from the weights is not judged. Returns N.
  int64_t blocks(const std::string& key, int64_t value, const std::string& prefix, const char* noun,
                 bool optional = false) {
    std::set<int64_t> indices;
    const std::string head = prefix + ".";
    for (const std::string& n : names_) {
      if (n.compare(0, head.size(), head) != 0) continue;
      size_t end = head.size();
      while (end < n.size() && end - head.size() < 9 && n[end] >= '0' && n[end] <= '9') ++end;
      if (end > head.size() && end < n.size() && n[end] == '.')
        indices.insert(std::stoll(n.substr(head.size(), end - head.size())));
    }
    const int64_t held = indices.empty() ? 0 : *indices.rbegin() + 1;
    if (held == 0 && optional) return 0;
    if (value != held) {
      if (held == 0) fail(file_, ": ", key, " is ", value, " but the weights hold no ", noun, " (no tensor ", head, "0.*)");
      const bool gaps = static_cast<int64_t>(indices.size()) != held;
      fail(file_, ": ", key, " is ", value, " but the weights hold ", indices.size(), " ", noun,
           indices.size() == 1 ? "" : "s", " (", prefix, ".0 .. ", held - 1, gaps ? ", with gaps" : "", ")");
    }
    return held;
  }

  // Dimension `dim` of `tensor` must be value·per (per: the keys it is a multiple of, checked before).
  void width(const std::string& key, int64_t value, const std::string& tensor, size_t dim, int64_t per = 1) {
    if (!ck_.has(tensor) || per <= 0) return;
    const Shape& shape = ck_.info(tensor).shape;
    H3_CHECK(dim < shape.size(), file_, ": ", key, " is ", value, " but the weights hold ", tensor, " as ",
             shape_str(shape), ", with no dimension ", dim);
    const int64_t held = shape[dim];
    if (held == saturated_product(value, per)) return;
    if (held % per != 0)
      fail(file_, ": ", key, " is ", value, " but the weights hold ", tensor, " as ", shape_str(shape),
           ", which no value of ", key, " fits");
    fail(file_, ": ", key, " is ", value, " but the weights hold ", held / per, " (", tensor, " is ", shape_str(shape),
         ")");
  }

  bool has(const std::string& tensor) const { return ck_.has(tensor); }

 private:
  const Checkpoint& ck_;
  std::string file_;
  std::vector<std::string> names_;
};

}  // namespace

void check_dit_fits_weights(const DitConfig& c, Layout layout, const Checkpoint& ck, const std::string& file) {
  const bool o = layout == Layout::Original;
  // The key as the file spells it (spec/layout.md §3.2 for the original names).
  auto key = [o](const char* diffusers, const char* original) { return std::string(o ? original : diffusers); };
  const std::string proj_in = o ? "video_patch_proj.weight" : "proj_in.weight";
  if (!ck.has(proj_in)) return;  // not this layout's weights: the loader names the layout they follow
  Fit f(ck, file);
  f.blocks("num_layers", c.num_layers, o ? "blocks" : "transformer_blocks", "block");
  f.blocks(key("num_refiner_layers", "token_refiner_num_layers"), c.num_refiner_layers,
           o ? "token_refiner.blocks" : "token_refiner.refiner_blocks", "refiner block");
  f.width("hidden_size", c.hidden_size, proj_in, 0);
  f.width(key("in_channels × patch_size", "latents_dim × patch_size"),
          saturated_product({c.in_channels, c.patch_size[0], c.patch_size[1], c.patch_size[2]}), proj_in, 1);
  f.width(key("audio_in_channels", "audio_latents_dim"), c.audio_in_channels,
          o ? "audio_patch_proj.weight" : "audio_proj_in.weight", 1);
  f.width("text_dim", c.text_dim, o ? "condition_proj.weight" : "context_embedder.weight", 1);
  const std::string t1 = o ? "time_embedder.proj_in.weight" : "time_embedder.linear_1.weight";
  f.width(key("freq_dim", "timestep_input_dim"), c.freq_dim, t1, 1);
  f.width(key("time_embed_hidden_dim", "time_embed_hidden_size"), c.time_embed_hidden_dim, t1, 0);
  f.width("time_embed_dim", c.time_embed_dim, o ? "time_embedder.proj_out.weight" : "time_embedder.linear_2.weight",
          0);
  const std::string b0 = o ? "blocks.0" : "transformer_blocks.0";
  f.width("attention_head_dim", c.attention_head_dim, b0 + (o ? ".attn.q_norm.weight" : ".attn.norm_q.weight"), 0);
  f.width("num_attention_heads", c.num_attention_heads, b0 + (o ? ".attn.qkv_proj.weight" : ".attn.to_q.weight"), 0,
          saturated_product(o ? 3 : 1, c.attention_head_dim));
  f.width(key("ffn_dim", "ffn_hidden_size"), c.ffn_dim, b0 + (o ? ".mlp.fc2.weight" : ".ff.net.2.weight"), 1);
  if (o) f.width("rope_inv_freq_len", c.rope_freq_dim, "rope.inv_freq", 0);
}

void check_video_vae_fits_weights(const VideoVaeConfig& c, Layout layout, const Checkpoint& ck,
                                  const std::string& file) {
  const bool o = layout == Layout::Original;
  // The original layout's names (spec/layout.md §3): the wrapper's and source/config.json's keys; the two the
  // original configs do not state keep h3's defaults (the release's values).
  auto key = [o](const std::string& diffusers, const std::string& original) { return o ? original : diffusers; };
  const std::string unstated = " (not in the original configs: the release's value)";
  Fit f(ck, file);
  f.blocks(key("decoder_num_layers", "vit_decoder_kwargs.num_layers"), c.decoder_num_layers,
           "decoder.transformer_blocks", "decoder block");
  f.width("latent_channels", c.latent_channels, "post_quant_conv.weight", 0);
  const int64_t dim = saturated_product(c.decoder_num_attention_heads, c.decoder_attention_head_dim);
  f.width(key("decoder_num_attention_heads × decoder_attention_head_dim", "vit_decoder_kwargs.heads × dim_head"), dim,
          o ? "decoder.x_embedder.weight" : "decoder.proj_in.weight", 0);
  f.width(key("decoder_num_register_tokens", "decoder_num_register_tokens" + unstated), c.decoder_num_register_tokens,
          "decoder.register_tokens", 1);
  f.width(key("decoder_ffn_mult", "decoder_ffn_mult" + unstated), c.decoder_ffn_mult,
          std::string("decoder.transformer_blocks.0") + (o ? ".ff.w2.weight" : ".ff.net.2.weight"), 1, dim);
  const int64_t spatial = saturated_product(c.spatial_downsample_factors);
  f.width(key("out_channels", "out_ch") + " × the temporal and spatial ratios",
          saturated_product({c.out_channels, saturated_product(c.temporal_downsample_factors), spatial, spatial}),
          "decoder.proj_out.weight", 0);
  // The encoder, when the weights hold it.
  const std::string down = o ? "encoder.down" : "encoder.down_blocks";
  const int64_t levels = f.blocks(key("len(block_out_channels)", "len(ch_mult)"),
                                  static_cast<int64_t>(c.block_out_channels.size()), down, "encoder level", true);
  if (levels == 0) return;
  const std::string resnets = o ? ".block" : ".resnets";
  f.blocks(key("layers_per_block", "num_res_blocks"), c.layers_per_block, at(down, 0) + resnets, "ResNet block");
  f.width("in_channels", c.in_channels, "encoder.conv_in.weight", 1);
  for (int64_t i = 0; i < levels; ++i)
    f.width(key(cat("block_out_channels[", i, "]"), cat("ch × ch_mult[", i, "]")), c.block_out_channels[i],
            at(down, i) + resnets + ".0.conv1.weight", 0);
}

void check_audio_vae_fits_weights(const AudioVaeConfig& c, const Checkpoint& ck, const std::string& file) {
  Fit f(ck, file);
  const int64_t stages = static_cast<int64_t>(c.decoder_rates.size());
  const int64_t kernels = static_cast<int64_t>(c.resblock_kernel_sizes.size());
  f.blocks("len(decoder_rates)", stages, "decoder.ups", "upsampler");
  f.blocks("len(decoder_rates) × len(resblock_kernel_sizes)", saturated_product(stages, kernels), "decoder.resblocks",
           "AMP block");
  f.width("latent_dim", c.latent_dim, "dec_in_proj.weight", 0);
  f.width("latent_channels", c.latent_channels, "dec_in_proj.weight", 1);
  f.width("decoder_dim", c.decoder_dim, "decoder.conv_pre.weight_v", 0);
  for (int64_t i = 0; i < stages && i < static_cast<int64_t>(c.decoder_kernel_sizes.size()); ++i)
    f.width(cat("decoder_kernel_sizes[", i, "]"), c.decoder_kernel_sizes[i], at("decoder.ups", i) + ".0.weight_v", 2);
  for (int64_t j = 0; j < kernels && j < static_cast<int64_t>(c.resblock_dilation_sizes.size()); ++j) {
    const std::string r = at("decoder.resblocks", j);
    f.width(cat("resblock_kernel_sizes[", j, "]"), c.resblock_kernel_sizes[j], r + ".convs1.0.weight_v", 2);
    f.blocks(cat("len(resblock_dilation_sizes[", j, "])"), static_cast<int64_t>(c.resblock_dilation_sizes[j].size()),
             r + ".convs1", "dilated convolution");
  }
  // The encoder, when the weights hold it: block 0 is its first convolution, blocks 1.. its strided stages.
  f.width("encoder_dim", c.encoder_dim, "encoder.block.0.weight_v", 0);
  for (int64_t i = 0; i < static_cast<int64_t>(c.encoder_rates.size()); ++i) {
    const std::string conv = at("encoder.block", i + 1) + ".block.4.weight_v";
    if (!f.has(conv)) break;
    f.width(cat("encoder_rates[", i, "]"), c.encoder_rates[i], conv, 2, 2);  // kernel 2·stride
  }
}

void check_text_encoder_fits_weights(const TextEncoderConfig& c, const Checkpoint& ck, const std::string& file) {
  const auto& t = c.text;
  const std::string lm = "model.language_model", embed = lm + ".embed_tokens.weight", l0 = lm + ".layers.0";
  Fit f(ck, file);
  f.width("text_config.vocab_size", t.vocab_size, embed, 0);
  f.width("text_config.hidden_size", t.hidden_size, embed, 1);
  f.width("text_config.head_dim", t.head_dim, l0 + ".self_attn.q_norm.weight", 0);
  f.width("text_config.num_attention_heads", t.num_attention_heads, l0 + ".self_attn.q_proj.weight", 0, t.head_dim);
  f.width("text_config.num_key_value_heads", t.num_key_value_heads, l0 + ".self_attn.k_proj.weight", 0, t.head_dim);
  f.width("text_config.intermediate_size", t.intermediate_size, l0 + ".mlp.gate_proj.weight", 0);
  // The vision tower, when the weights hold it.
  const auto& v = c.vision;
  const std::string vp = kVisual;
  if (f.blocks("vision_config.depth", v.depth, vp + ".blocks", "vision block", true) == 0) return;
  f.blocks("len(vision_config.deepstack_visual_indexes)", static_cast<int64_t>(v.deepstack_visual_indexes.size()),
           vp + ".deepstack_merger_list", "deepstack merger");
  const std::string patch = vp + ".patch_embed.proj.weight";
  f.width("vision_config.hidden_size", v.hidden_size, patch, 0);
  f.width("vision_config.in_channels", v.in_channels, patch, 1);
  f.width("vision_config.temporal_patch_size", v.temporal_patch_size, patch, 2);
  f.width("vision_config.patch_size", v.patch_size, patch, 3);
  f.width("vision_config.num_position_embeddings", v.num_position_embeddings, vp + ".pos_embed.weight", 0);
  f.width("vision_config.intermediate_size", v.intermediate_size, vp + ".blocks.0.mlp.linear_fc1.weight", 0);
  f.width("vision_config.out_hidden_size", v.out_hidden_size, vp + ".merger.linear_fc2.weight", 0);
}

bool holds_vision_tower(const Checkpoint& ck) { return ck.has(cat(kVisual, ".blocks.0.norm1.weight")); }

void check_manifest_shapes(const std::vector<TensorSpec>& manifest, const Checkpoint& ck, const std::string& file) {
  for (const TensorSpec& s : manifest)
    if (ck.has(s.name) && ck.info(s.name).shape != s.shape)
      fail(file, ": the weights do not fit this config: tensor '", s.name, "' has shape ",
           shape_str(ck.info(s.name).shape), " but the config implies ", shape_str(s.shape));
}

}  // namespace h3
