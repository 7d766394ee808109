#include "io/manifest.h"

namespace h3 {

namespace {
struct Builder {
  std::vector<TensorSpec> out;
  void add(std::string name, Shape shape, DType dt) { out.push_back({std::move(name), std::move(shape), dt}); }
};
std::string at(const std::string& prefix, int64_t i) { return prefix + "." + std::to_string(i); }
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
std::vector<TensorSpec> dit_manifest(const DitConfig& c, Layout layout) {
  const DType B = DType::BF16, F = DType::F32;
  const int64_t D = c.hidden_size, I = c.inner_dim(), Hd = c.attention_head_dim, Ff = c.ffn_dim;
  const int64_t E = c.time_embed_dim, P = c.patch_dim(), A = c.audio_in_channels;
  Builder b;
  const bool orig = layout == Layout::Original;
  // One attention + FFN block (shared by the refiner and the main blocks).
  auto block = [&](const std::string& p) {
    b.add(p + ".norm1.weight", {D}, B);
    b.add(p + ".norm2.weight", {D}, B);
    if (orig) {
      b.add(p + ".attn.qkv_proj.weight", {3 * I, D}, B);
      b.add(p + ".attn.q_norm.weight", {Hd}, B);
      b.add(p + ".attn.k_norm.weight", {Hd}, B);
      b.add(p + ".attn.out_proj.weight", {D, I}, B);
      b.add(p + ".mlp.fc1.weight", {2 * Ff, D}, B);
      b.add(p + ".mlp.fc2.weight", {D, Ff}, B);
    } else {
      b.add(p + ".attn.to_q.weight", {I, D}, B);
      b.add(p + ".attn.to_k.weight", {I, D}, B);
      b.add(p + ".attn.to_v.weight", {I, D}, B);
      b.add(p + ".attn.norm_q.weight", {Hd}, B);
      b.add(p + ".attn.norm_k.weight", {Hd}, B);
      b.add(p + ".attn.to_out.0.weight", {D, I}, B);
      b.add(p + ".ff.net.0.proj.weight", {2 * Ff, D}, B);
      b.add(p + ".ff.net.2.weight", {D, Ff}, B);
    }
  };
  b.add(orig ? "video_patch_proj.weight" : "proj_in.weight", {D, P}, F);
  b.add(orig ? "video_patch_proj.bias" : "proj_in.bias", {D}, F);
  b.add(orig ? "audio_patch_proj.weight" : "audio_proj_in.weight", {D, A}, F);
  b.add(orig ? "audio_patch_proj.bias" : "audio_proj_in.bias", {D}, F);
  b.add(orig ? "condition_proj.weight" : "context_embedder.weight", {D, c.text_dim}, B);
  b.add(orig ? "condition_proj.bias" : "context_embedder.bias", {D}, B);
  const std::string t1 = orig ? "time_embedder.proj_in" : "time_embedder.linear_1";
  const std::string t2 = orig ? "time_embedder.proj_out" : "time_embedder.linear_2";
  b.add(t1 + ".weight", {c.time_embed_hidden_dim, c.freq_dim}, F);
  b.add(t1 + ".bias", {c.time_embed_hidden_dim}, F);
  b.add(t2 + ".weight", {E, c.time_embed_hidden_dim}, F);
  b.add(t2 + ".bias", {E}, F);
  for (int64_t i = 0; i < c.num_refiner_layers; ++i)
    block(at(orig ? "token_refiner.blocks" : "token_refiner.refiner_blocks", i));
  b.add("token_refiner.final_norm.weight", {D}, B);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    std::string p = at(orig ? "blocks" : "transformer_blocks", i);
    block(p);
    b.add(p + ".adaln_proj.linear.weight", {18 * D, E}, B);
    b.add(p + ".adaln_proj.linear.bias", {18 * D}, B);
  }
  b.add(orig ? "final_layer.norm.weight" : "norm_out.norm.weight", {D}, B);
  b.add(orig ? "final_layer.adaln_proj.linear.weight" : "norm_out.linear.weight", {2 * D, E}, B);
  b.add(orig ? "final_layer.adaln_proj.linear.bias" : "norm_out.linear.bias", {2 * D}, B);
  b.add(orig ? "final_layer.video_out.weight" : "proj_out.weight", {P, D}, F);
  b.add(orig ? "final_layer.video_out.bias" : "proj_out.bias", {P}, F);
  b.add(orig ? "final_layer.audio_out.weight" : "audio_proj_out.weight", {A, D}, F);
  b.add(orig ? "final_layer.audio_out.bias" : "audio_proj_out.bias", {A}, F);
  if (orig) b.add("rope.inv_freq", {c.rope_freq_dim}, F);
  return b.out;
}

// ---------------------------------------------------------------------------------------------------------------
std::vector<TensorSpec> text_encoder_manifest(const TextEncoderConfig& c, bool with_vision) {
  const DType B = DType::BF16;
  const auto& t = c.text;
  const int64_t D = t.hidden_size, Hd = t.head_dim;
  Builder b;
  const std::string lm = "model.language_model";
  b.add(lm + ".embed_tokens.weight", {t.vocab_size, D}, B);
  for (int64_t i = 0; i < kConditionerLayers; ++i) {
    std::string p = at(lm + ".layers", i);
    b.add(p + ".input_layernorm.weight", {D}, B);
    b.add(p + ".self_attn.q_proj.weight", {t.num_attention_heads * Hd, D}, B);
    b.add(p + ".self_attn.k_proj.weight", {t.num_key_value_heads * Hd, D}, B);
    b.add(p + ".self_attn.v_proj.weight", {t.num_key_value_heads * Hd, D}, B);
    b.add(p + ".self_attn.o_proj.weight", {D, t.num_attention_heads * Hd}, B);
    b.add(p + ".self_attn.q_norm.weight", {Hd}, B);
    b.add(p + ".self_attn.k_norm.weight", {Hd}, B);
    b.add(p + ".post_attention_layernorm.weight", {D}, B);
    b.add(p + ".mlp.gate_proj.weight", {t.intermediate_size, D}, B);
    b.add(p + ".mlp.up_proj.weight", {t.intermediate_size, D}, B);
    b.add(p + ".mlp.down_proj.weight", {D, t.intermediate_size}, B);
  }
  if (with_vision) {
    const auto& v = c.vision;
    const int64_t V = v.hidden_size, M = V * v.spatial_merge_size * v.spatial_merge_size;
    const std::string vp = "model.visual";
    b.add(vp + ".patch_embed.proj.weight", {V, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}, B);
    b.add(vp + ".patch_embed.proj.bias", {V}, B);
    b.add(vp + ".pos_embed.weight", {v.num_position_embeddings, V}, B);
    for (int64_t i = 0; i < v.depth; ++i) {
      std::string p = at(vp + ".blocks", i);
      for (const char* n : {".norm1", ".norm2"}) {
        b.add(p + n + ".weight", {V}, B);
        b.add(p + n + ".bias", {V}, B);
      }
      b.add(p + ".attn.qkv.weight", {3 * V, V}, B);
      b.add(p + ".attn.qkv.bias", {3 * V}, B);
      b.add(p + ".attn.proj.weight", {V, V}, B);
      b.add(p + ".attn.proj.bias", {V}, B);
      b.add(p + ".mlp.linear_fc1.weight", {v.intermediate_size, V}, B);
      b.add(p + ".mlp.linear_fc1.bias", {v.intermediate_size}, B);
      b.add(p + ".mlp.linear_fc2.weight", {V, v.intermediate_size}, B);
      b.add(p + ".mlp.linear_fc2.bias", {V}, B);
    }
    auto merger = [&](const std::string& p, int64_t norm_width) {
      b.add(p + ".norm.weight", {norm_width}, B);
      b.add(p + ".norm.bias", {norm_width}, B);
      b.add(p + ".linear_fc1.weight", {M, M}, B);
      b.add(p + ".linear_fc1.bias", {M}, B);
      b.add(p + ".linear_fc2.weight", {v.out_hidden_size, M}, B);
      b.add(p + ".linear_fc2.bias", {v.out_hidden_size}, B);
    };
    merger(vp + ".merger", V);
    for (size_t k = 0; k < v.deepstack_visual_indexes.size(); ++k)
      merger(at(vp + ".deepstack_merger_list", static_cast<int64_t>(k)), M);
  }
  return b.out;
}

// ---------------------------------------------------------------------------------------------------------------
std::vector<TensorSpec> video_vae_manifest(const VideoVaeConfig& c, Layout layout, bool with_encoder) {
  const DType F = DType::F32;
  const bool orig = layout == Layout::Original;
  const int64_t Z = c.latent_channels, D = c.decoder_dim(), Hdim = D * c.decoder_ffn_mult;
  const int64_t out_feat = c.out_channels * c.temporal_ratio() * c.spatial_ratio() * c.spatial_ratio();
  Builder b;
  if (with_encoder) {
    const auto& ch = c.block_out_channels;
    b.add("encoder.conv_in.weight", {ch[0], c.in_channels, 3, 3, 3}, F);
    b.add("encoder.conv_in.bias", {ch[0]}, F);
    for (size_t i = 0; i < ch.size(); ++i) {
      int64_t ci = ch[i == 0 ? 0 : i - 1], co = ch[i];
      for (int64_t j = 0; j < c.layers_per_block; ++j) {
        int64_t cin = j == 0 ? ci : co;
        std::string p = orig ? cat("encoder.down.", i, ".block.", j) : cat("encoder.down_blocks.", i, ".resnets.", j);
        b.add(p + ".norm1.weight", {cin}, F);
        b.add(p + ".norm1.bias", {cin}, F);
        b.add(p + ".conv1.weight", {co, cin, 3, 3, 3}, F);
        b.add(p + ".conv1.bias", {co}, F);
        b.add(p + ".norm2.weight", {co}, F);
        b.add(p + ".norm2.bias", {co}, F);
        b.add(p + ".conv2.weight", {co, co, 3, 3, 3}, F);
        b.add(p + ".conv2.bias", {co}, F);
        if (j == 0 && cin != co) {
          b.add(p + (orig ? ".nin_shortcut.weight" : ".conv_shortcut.weight"), {co, cin, 1, 1, 1}, F);
          b.add(p + (orig ? ".nin_shortcut.bias" : ".conv_shortcut.bias"), {co}, F);
        }
      }
      if (c.spatial_downsample_factors[i] > 1 || c.temporal_downsample_factors[i] > 1) {
        std::string p = orig ? cat("encoder.down.", i, ".downsample.conv") : cat("encoder.down_blocks.", i, ".downsamplers.0.conv");
        b.add(p + ".weight", {co, co, 3, 3, 3}, F);
        b.add(p + ".bias", {co}, F);
      }
    }
    b.add("encoder.norm_out.weight", {ch.back()}, F);
    b.add("encoder.norm_out.bias", {ch.back()}, F);
    b.add("encoder.conv_out.weight", {2 * Z, ch.back(), 3, 3, 3}, F);
    b.add("encoder.conv_out.bias", {2 * Z}, F);
    b.add("quant_conv.weight", {2 * Z, 2 * Z, 1, 1, 1}, F);
    b.add("quant_conv.bias", {2 * Z}, F);
  }
  b.add("post_quant_conv.weight", {Z, Z, 1, 1, 1}, F);
  b.add("post_quant_conv.bias", {Z}, F);
  b.add(orig ? "decoder.x_embedder.weight" : "decoder.proj_in.weight", {D, Z}, F);
  b.add(orig ? "decoder.x_embedder.bias" : "decoder.proj_in.bias", {D}, F);
  b.add("decoder.register_tokens", {1, c.decoder_num_register_tokens, D}, F);
  for (int64_t k = 0; k < c.decoder_num_layers; ++k) {
    std::string p = at("decoder.transformer_blocks", k);
    b.add(p + ".norm1.weight", {D}, F);
    b.add(p + ".norm2.weight", {D}, F);
    if (orig) {
      b.add(p + ".attn.to_qkv.weight", {3 * D, D}, F);
      b.add(p + ".attn.to_qkv.bias", {3 * D}, F);
      b.add(p + ".attn.to_out.weight", {D, D}, F);
      b.add(p + ".attn.to_out.bias", {D}, F);
      b.add(p + ".ff.w1.weight", {2 * Hdim, D}, F);
      b.add(p + ".ff.w1.bias", {2 * Hdim}, F);
      b.add(p + ".ff.w2.weight", {D, Hdim}, F);
      b.add(p + ".ff.w2.bias", {D}, F);
    } else {
      for (const char* n : {".attn.to_q", ".attn.to_k", ".attn.to_v", ".attn.to_out.0"}) {
        b.add(p + n + ".weight", {D, D}, F);
        b.add(p + n + ".bias", {D}, F);
      }
      b.add(p + ".ff.net.0.proj.weight", {2 * Hdim, D}, F);
      b.add(p + ".ff.net.0.proj.bias", {2 * Hdim}, F);
      b.add(p + ".ff.net.2.weight", {D, Hdim}, F);
      b.add(p + ".ff.net.2.bias", {D}, F);
    }
    b.add(p + ".scale1", {D}, F);
    b.add(p + ".scale2", {D}, F);
  }
  b.add("decoder.norm_out.weight", {D}, F);
  b.add("decoder.norm_out.bias", {D}, F);
  b.add("decoder.proj_out.weight", {out_feat, D}, F);
  b.add("decoder.proj_out.bias", {out_feat}, F);
  return b.out;
}

// ---------------------------------------------------------------------------------------------------------------
std::vector<TensorSpec> audio_vae_manifest(const AudioVaeConfig& c, bool with_encoder) {
  const DType F = DType::F32;
  Builder b;
  auto wn_conv = [&](const std::string& p, int64_t cout, int64_t cin, int64_t k, bool bias) {
    b.add(p + ".weight_g", {cout, 1, 1}, F);
    b.add(p + ".weight_v", {cout, cin, k}, F);
    if (bias) b.add(p + ".bias", {cout}, F);
  };
  const int64_t Z = c.latent_channels, L = c.latent_dim;
  if (with_encoder) {
    int64_t ch = c.encoder_dim;
    wn_conv("encoder.block.0", ch, 1, 7, true);
    for (size_t bi = 0; bi < c.encoder_rates.size(); ++bi) {
      std::string p = at("encoder.block", static_cast<int64_t>(bi + 1)) + ".block";
      for (int64_t u = 0; u < 3; ++u) {
        std::string q = at(p, u) + ".block";
        b.add(q + ".0.alpha", {1, ch, 1}, F);
        wn_conv(q + ".1", ch, ch, 7, true);
        b.add(q + ".2.alpha", {1, ch, 1}, F);
        wn_conv(q + ".3", ch, ch, 1, true);
      }
      b.add(p + ".3.alpha", {1, ch, 1}, F);
      wn_conv(p + ".4", 2 * ch, ch, 2 * c.encoder_rates[bi], true);
      ch *= 2;
    }
    const int64_t n = static_cast<int64_t>(c.encoder_rates.size());
    b.add(at("encoder.block", n + 1) + ".alpha", {1, ch, 1}, F);
    wn_conv(at("encoder.block", n + 2), L, ch, 3, true);
    for (const char* nm : {"pre_block.norm1", "pre_block.norm3"}) {
      b.add(std::string(nm) + ".weight", {L}, F);
      b.add(std::string(nm) + ".bias", {L}, F);
    }
    b.add("pre_block.attn.qkv.weight", {3 * L, L}, F);
    b.add("pre_block.attn.q_bias", {L}, F);
    b.add("pre_block.attn.v_bias", {L}, F);
    b.add("pre_block.attn.zero_k_bias", {L}, F);
    b.add("pre_block.attn.proj.weight", {Z, Z}, F);
    b.add("pre_block.attn.proj.bias", {Z}, F);
    b.add("pre_block.proj.weight", {Z, L}, F);
    b.add("pre_block.proj.bias", {Z}, F);
    for (const char* nm : {"pre_block.norm2", "pre_block.mlp.norm"}) {
      b.add(std::string(nm) + ".weight", {Z}, F);
      b.add(std::string(nm) + ".bias", {Z}, F);
    }
    b.add("pre_block.mlp.w0.weight", {2 * Z, Z}, F);
    b.add("pre_block.mlp.w0.bias", {2 * Z}, F);
    b.add("pre_block.mlp.w1.weight", {2 * Z, Z}, F);
    b.add("pre_block.mlp.w1.bias", {2 * Z}, F);
    b.add("pre_block.mlp.w2.weight", {Z, 2 * Z}, F);
    b.add("pre_block.mlp.w2.bias", {Z}, F);
    b.add("mean_proj.weight", {Z, Z, 1}, F);
    b.add("mean_proj.bias", {Z}, F);
    b.add("logs_proj.weight", {Z, Z, 1}, F);
    b.add("logs_proj.bias", {Z}, F);
  }
  b.add("dec_in_proj.weight", {L, Z, 1}, F);
  b.add("dec_in_proj.bias", {L}, F);
  wn_conv("decoder.conv_pre", c.decoder_dim, L, 7, true);
  auto aa_act = [&](const std::string& p, int64_t ch) {
    b.add(p + ".act.alpha", {ch}, F);
    b.add(p + ".act.beta", {ch}, F);
    b.add(p + ".upsample.filter", {1, 1, 12}, F);
    b.add(p + ".downsample.lowpass.filter", {1, 1, 12}, F);
  };
  int64_t ch = c.decoder_dim;
  const int64_t nk = static_cast<int64_t>(c.resblock_kernel_sizes.size());
  for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
    std::string p = at("decoder.ups", static_cast<int64_t>(i)) + ".0";
    int64_t co = ch / 2;
    b.add(p + ".weight_g", {ch, 1, 1}, F);  // transposed conv: one norm per input channel
    b.add(p + ".weight_v", {ch, co, c.decoder_kernel_sizes[i]}, F);
    b.add(p + ".bias", {co}, F);
    for (int64_t j = 0; j < nk; ++j) {
      std::string r = at("decoder.resblocks", static_cast<int64_t>(i) * nk + j);
      const auto& dil = c.resblock_dilation_sizes[j];
      for (size_t m = 0; m < dil.size(); ++m) {
        wn_conv(at(r + ".convs1", static_cast<int64_t>(m)), co, co, c.resblock_kernel_sizes[j], true);
        wn_conv(at(r + ".convs2", static_cast<int64_t>(m)), co, co, c.resblock_kernel_sizes[j], true);
      }
      for (size_t n = 0; n < 2 * dil.size(); ++n) aa_act(at(r + ".activations", static_cast<int64_t>(n)), co);
    }
    ch = co;
  }
  aa_act("decoder.activation_post", ch);
  wn_conv("decoder.conv_post", 1, ch, 7, false);
  return b.out;
}

}  // namespace h3
