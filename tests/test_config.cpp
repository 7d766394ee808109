// Config parsing: released defaults, unknown keys ignored, wrong types rejected with the key's name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/config.h"
#include "util/error.h"

using namespace h3;
using json = nlohmann::json;

namespace {
std::string err_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, DitDefaultsAreTheReleasedValues) {
  DitConfig c = parse_dit_config(json::object({{"unknown_key", 1}, {"_class_name", "MiniMaxH3Transformer3DModel"}}), "t");
  EXPECT_EQ(c.hidden_size, 5376);
  EXPECT_EQ(c.num_layers, 50);
  EXPECT_EQ(c.inner_dim(), 7168);
  EXPECT_EQ(c.patch_dim(), 96);
  EXPECT_EQ(c.rotary_dim(), 96);
  EXPECT_EQ(c.time_embed_dim, 2688);
}

TEST(Config, DitOriginalNamesMapToTheSameFields) {
  json o = {{"hidden_size", 48}, {"num_layers", 3}, {"token_refiner_num_layers", 1}, {"num_attention_heads", 2},
            {"attention_head_dim", 16}, {"ffn_hidden_size", 96}, {"latents_dim", 8}, {"audio_latents_dim", 6},
            {"patch_size", {1, 2, 2}}, {"text_dim", 32}, {"timestep_input_dim", 32}, {"time_embed_hidden_size", 48},
            {"time_embed_dim", 24}, {"adaln_out_features", 864}, {"final_adaln_out_features", 96},
            {"rope_inv_freq_len", 2}};
  DitConfig c = parse_dit_config(o, "orig", true);
  EXPECT_EQ(c.ffn_dim, 96);
  EXPECT_EQ(c.in_channels, 8);
  EXPECT_EQ(c.audio_in_channels, 6);
  EXPECT_EQ(c.num_refiner_layers, 1);
  EXPECT_EQ(c.rope_freq_dim, 2);
  o["adaln_out_features"] = 100;
  EXPECT_NE(err_of([&] { parse_dit_config(o, "orig", true); }).find("adaln_out_features"), std::string::npos);
}

TEST(Config, WrongTypesNameTheKey) {
  EXPECT_EQ(err_of([] { parse_dit_config(json{{"hidden_size", "big"}}, "transformer/config.json"); }),
            "transformer/config.json: key 'hidden_size' must be an integer, got string");
  EXPECT_NE(err_of([] { parse_dit_config(json{{"norm_eps", true}}, "t"); }).find("'norm_eps' must be a number"),
            std::string::npos);
  EXPECT_NE(err_of([] { parse_dit_config(json{{"patch_size", {1, 2}}}, "t"); }).find("3 entries"), std::string::npos);
  EXPECT_NE(err_of([] { parse_dit_config(json{{"hidden_size", 2.5}}, "t"); }).find("must be an integer"),
            std::string::npos);
  EXPECT_EQ(parse_dit_config(json{{"hidden_size", 64.0}}, "t").hidden_size, 64);  // integral floats are accepted
  EXPECT_NE(err_of([] { parse_dit_config(json{{"rope_freq_dim", 30}}, "t"); }).find("must not exceed"),
            std::string::npos);
  EXPECT_NE(err_of([] { parse_audio_vae_config(json{{"decoder_rates", "x"}}, "a"); }).find("'decoder_rates'"),
            std::string::npos);
}

TEST(Config, VaeNeedsItsLatentStatistics) {
  json v = {{"latent_channels", 2}, {"latents_mean", {0.1, 0.2}}, {"latents_std", {1.0, 2.0}}};
  VideoVaeConfig c = parse_video_vae_config(v, "vae");
  EXPECT_EQ(c.spatial_ratio(), 16);
  EXPECT_EQ(c.temporal_ratio(), 4);
  EXPECT_EQ(c.decoder_dim(), 2048);
  v["latents_std"] = {1.0};
  EXPECT_NE(err_of([&] { parse_video_vae_config(v, "vae"); }).find("latents_std"), std::string::npos);
  json a = {{"latent_channels", 1}, {"latents_mean", {0.0}}, {"latents_std", {1.0}}};
  AudioVaeConfig ac = parse_audio_vae_config(a, "audio");
  EXPECT_EQ(ac.hop_length(), 800);
  EXPECT_EQ(ac.decoder_kernel_sizes, (std::vector<int64_t>{9, 9, 4, 4, 4, 4, 4}));
  a["encoder_rates"] = {2, 2};
  EXPECT_NE(err_of([&] { parse_audio_vae_config(a, "audio"); }).find("product of encoder_rates"), std::string::npos);
}

TEST(Config, QwenReadsBothRopeSpellings) {
  json t5 = {{"text_config", {{"num_hidden_layers", 52}, {"rope_parameters", {{"rope_theta", 1e6}, {"mrope_section", {4, 2, 2}}}}}}};
  TextEncoderConfig c = parse_text_encoder_config(t5, "te");
  EXPECT_EQ(c.text.rope_theta, 1e6);
  EXPECT_EQ(c.text.mrope_section, (std::vector<int64_t>{4, 2, 2}));
  json t4 = {{"text_config", {{"rope_theta", 2e6}, {"rope_scaling", {{"mrope_section", {24, 20, 20}}, {"type", "default"}}}}}};
  EXPECT_EQ(parse_text_encoder_config(t4, "te").text.rope_theta, 2e6);
  json few = {{"text_config", {{"num_hidden_layers", 40}}}};
  EXPECT_NE(err_of([&] { parse_text_encoder_config(few, "te"); }).find("at least 50"), std::string::npos);
  EXPECT_EQ(c.image_token_id, 151655);
}
