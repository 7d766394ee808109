// Configs checked before anything is sized from them (issue 22, item 3): each value against its plausible range and
// against the tensors the component's weights hold (io/weights_fit.h), and against what h3 can run — one sentence
// naming the file and the key, in --info and before generation loads any weight. Every case mutates one value of a
// tiny snapshot made by `h3 tool make-tiny-model` (or, for the key-by-key checks, of a config whose weights are the
// manifest's, in both layouts).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "h3/h3.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "io/weights_fit.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/video_processor.h"
#include "temp_dir.h"
#include "tools/inspect.h"
#include "tools/tiny_model.h"
#include "util/mapped_file.h"

using namespace h3;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string& tiny_model() {
  static TempDir dir("config-checks");
  static const std::string path = [] {
    make_tiny_model(dir / "model", 7);
    return dir / "model";
  }();
  return path;
}

// A copy of the tiny model whose files are changed one value at a time.
class Copy {
 public:
  Copy() { fs::copy(tiny_model(), root(), fs::copy_options::recursive); }
  std::string root() const { return dir_ / "model"; }
  std::string file(const std::string& name) const { return root() + "/" + name; }
  // Sets the value at the JSON pointer `at` of `name` (a file of the snapshot) and returns the file's path.
  std::string set(const std::string& name, const std::string& at, const json& value) const {
    json j = parse_json_file(file(name));
    j[json::json_pointer(at)] = value;
    write_file_atomic(file(name), j.dump(2));
    return file(name);
  }

 private:
  TempDir dir_{"config-checks-copy"};
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every config of the snapshot, read as Engine::open and the loaders read them.
void load_every_config(const std::string& root) {
  const Snapshot s = Snapshot::discover(root);
  load_dit_config(s.transformer);
  load_dit_config(s.transformer_ref);
  load_video_vae_config(s.vae);
  load_audio_vae_config(s.audio_vae);
  load_text_encoder_config(s.text_encoder);
  load_scheduler_config(s, false);
  load_scheduler_config(s, true);
  load_canvas_config(s.index_file);
  load_image_processor_config(s.processor);
  load_video_processor_config(s.processor);
}

struct RunResult {
  int status;
  std::string out;
  double seconds;
};

RunResult run_shell(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int st = pclose(p);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out, seconds};
}

}  // namespace

// The tiny model's configs pass every check: the checks refuse only what they should.
TEST(ConfigChecks, TheTinyModelPasses) {
  EXPECT_EQ(error_of([] { load_every_config(tiny_model()); }), "");
  const InspectReport r = inspect_snapshot(tiny_model());
  EXPECT_TRUE(r.problems.empty()) << r.text;
}

// A block count the weights contradict: the sentence names the file, the key, the value and what the weights hold.
TEST(ConfigChecks, BlockCountsAreTheWeights) {
  Copy c;
  std::string f = c.set("transformer/config.json", "/num_layers", 1000000000);
  EXPECT_EQ(error_of([&] { load_every_config(c.root()); }),
            f + ": num_layers is 1000000000 but the weights hold 2 blocks (transformer_blocks.0 .. 1)");
  c.set("transformer/config.json", "/num_layers", 2);
  f = c.set("vae/config.json", "/decoder_num_layers", 1000000000);
  EXPECT_EQ(error_of([&] { load_every_config(c.root()); }),
            f + ": decoder_num_layers is 1000000000 but the weights hold 2 decoder blocks "
                "(decoder.transformer_blocks.0 .. 1)");
  c.set("vae/config.json", "/decoder_num_layers", 2);
  f = c.set("text_encoder/config.json", "/vision_config/depth", 3);
  EXPECT_EQ(error_of([&] { load_every_config(c.root()); }),
            f + ": vision_config.depth is 3 but the weights hold 2 vision blocks (model.visual.blocks.0 .. 1)");
  c.set("text_encoder/config.json", "/vision_config/depth", 2);
  f = c.set("audio_vae/config.json", "/decoder_rates", {5, 5, 2, 2, 2, 2, 2, 2});
  EXPECT_EQ(error_of([&] { load_every_config(c.root()); }),
            f + ": len(decoder_rates) is 8 but the weights hold 7 upsamplers (decoder.ups.0 .. 6)");
}

// A width the weights contradict, and head counts against the widths the weights hold.
TEST(ConfigChecks, WidthsAndHeadCountsAreTheWeights) {
  Copy c;
  std::string f = c.set("transformer/config.json", "/hidden_size", 64);
  EXPECT_EQ(error_of([&] { load_every_config(c.root()); }),
            f + ": hidden_size is 64 but the weights hold 48 (proj_in.weight is [48, 32])");
  c.set("transformer/config.json", "/hidden_size", 48);
  f = c.set("transformer/config.json", "/num_attention_heads", 3);
  EXPECT_EQ(error_of([&] { load_every_config(c.root()); }),
            f + ": num_attention_heads is 3 but the weights hold 2 (transformer_blocks.0.attn.to_q.weight is [32, 48])");
  c.set("transformer/config.json", "/num_attention_heads", 2);
  f = c.set("text_encoder/config.json", "/text_config/num_key_value_heads", 1);
  EXPECT_EQ(error_of([&] { load_every_config(c.root()); }),
            f + ": text_config.num_key_value_heads is 1 but the weights hold 2 "
                "(model.language_model.layers.0.self_attn.k_proj.weight is [16, 32])");
}

// A value no key-by-key check names is still held against every tensor's shape, after validation.
TEST(ConfigChecks, EveryShapeIsTheWeights) {
  Copy c;
  const std::string f = c.set("text_encoder/config.json", "/vision_config/spatial_merge_size", 3);
  const std::string e = error_of([&] { load_every_config(c.root()); });
  EXPECT_EQ(e.rfind(f + ": the weights do not fit this config: tensor 'model.visual.", 0), 0u) << e;
}

// Out of range, or not what h3 can run: one sentence naming the file, the key and the valid range.
TEST(ConfigChecks, ValuesOutOfRangeOrUnrunnableAreRefused) {
  struct Case {
    const char* file;
    const char* at;
    json value;
    const char* says;
  };
  const Case cases[] = {
      {"vae/config.json", "/clip_length", 1000000000, ": 'clip_length' must be in [1, 1024], got 1000000000"},
      {"vae/config.json", "/clip_length", 16, ": h3's frame rule (17·n + 5 frames) needs clip_length 17 encoded to 5 "
                                              "latent frames and token_drop 3, got clip_length 16"},
      {"vae/config.json", "/token_drop", -1, ": 'token_drop' must be in [0, 4], got -1"},
      {"vae/config.json", "/norm_num_groups", 3,
       ": every block_out_channels entry must be a multiple of norm_num_groups (3), but block_out_channels[0] is 8"},
      {"vae/config.json", "/spatial_padding_mode", "circular",
       ": 'spatial_padding_mode' must be 'reflect', 'replicate' or 'constant', got 'circular'"},
      {"vae/config.json", "/norm_eps", 0.0, ": 'norm_eps' must be a number in (0, 1], got 0"},
      {"vae/config.json", "/decoder_rope_dim_ratio", 0.7, ": the decoder's rotary dims int(decoder_attention_head_dim "
                                                          "· decoder_rope_dim_ratio) = 11 must be a positive multiple of 6"},
      {"audio_vae/config.json", "/sampling_rate", 44100, ": 'sampling_rate' must be 32000"},
      {"audio_vae/config.json", "/latents_std/0", -1.0, ": 'latents_std' values must be positive and finite, got -1"},
      {"transformer/config.json", "/norm_eps", -1e-5, ": 'norm_eps' must be a number in (0, 1], got -1e-05"},
      {"transformer/config.json", "/rope_theta", 0.0, ": 'rope_theta' must be a number in (0, 1e+12], got 0"},
      {"transformer_ref/config.json", "/qk_norm_eps", 2.0, ": 'qk_norm_eps' must be a number in (0, 1], got 2"},
      {"text_encoder/config.json", "/text_config/rms_norm_eps", 0.0,
       ": 'text_config.rms_norm_eps' must be a number in (0, 1], got 0"},
      {"text_encoder/config.json", "/text_config/rope_parameters/rope_theta", -5.0,
       ": 'text_config.rope_theta' must be a number in (0, 1e+12], got -5"},
      {"text_encoder/config.json", "/text_config/max_position_embeddings", 1e12,
       ": 'text_config.max_position_embeddings' must be in [1, 16777216], got 1000000000000"},
      {"scheduler/scheduler_config.json", "/shift", 0.0, ": 'shift' must be a number in [0.001, 1000], got 0"},
      {"audio_scheduler/scheduler_config.json", "/shift", 1e300,
       ": 'shift' must be a number in [0.001, 1000], got 1e+300"},
      {"modular_model_index.json", "/canvas_max_pixels", 1000000000000,
       ": key 'canvas_max_pixels' must be a positive integer at most 67108864, got 1000000000000."},
      {"processor/preprocessor_config.json", "/size/longest_edge", 1000000000000000,
       ": 'size.longest_edge' must be in [65536, 67108864], got 1000000000000000"},
      {"processor/video_preprocessor_config.json", "/max_video_tokens", 1000000000,
       ": 'max_video_tokens' must be in [1, 65536], got 1000000000"},
  };
  for (const Case& k : cases) {
    Copy c;
    const std::string f = c.set(k.file, k.at, k.value);
    const std::string e = error_of([&] { load_every_config(c.root()); });
    EXPECT_EQ(e.rfind(f + k.says, 0), 0u) << k.file << k.at << ": " << e;
  }
}

// The key-by-key checks in both layouts: weights made from the manifest of a config, then every probed key changed by
// one is refused with its name, as the file spells it (so no check reads a tensor name the manifest does not write).
TEST(ConfigChecks, EveryCheckedKeyIsNamed) {
  TempDir dir("config-checks-keys");
  int n = 0;
  auto weights_of = [&](const std::vector<TensorSpec>& manifest) {
    std::vector<NamedTensor> ts;
    for (const TensorSpec& s : manifest) ts.push_back({s.name, Tensor::zeros(s.shape, DType::F32)});
    const std::string path = dir / cat("w", n++, ".safetensors");
    write_safetensors(path, ts);
    return Checkpoint::open(path);
  };
  const Snapshot s = Snapshot::discover(tiny_model());
  const DitConfig dit = load_dit_config(s.transformer);
  for (Layout layout : {Layout::Diffusers, Layout::Original}) {
    const Checkpoint ck = weights_of(dit_manifest(dit, layout));
    const bool o = layout == Layout::Original;
    const std::pair<const char*, std::function<void(DitConfig&)>> keys[] = {
        {"num_layers", [](DitConfig& c) { ++c.num_layers; }},
        {o ? "token_refiner_num_layers" : "num_refiner_layers", [](DitConfig& c) { ++c.num_refiner_layers; }},
        {"hidden_size", [](DitConfig& c) { ++c.hidden_size; }},
        {o ? "latents_dim × patch_size" : "in_channels × patch_size", [](DitConfig& c) { ++c.in_channels; }},
        {o ? "latents_dim × patch_size" : "in_channels × patch_size", [](DitConfig& c) { ++c.patch_size[2]; }},
        {o ? "audio_latents_dim" : "audio_in_channels", [](DitConfig& c) { ++c.audio_in_channels; }},
        {"text_dim", [](DitConfig& c) { ++c.text_dim; }},
        {o ? "timestep_input_dim" : "freq_dim", [](DitConfig& c) { ++c.freq_dim; }},
        {o ? "time_embed_hidden_size" : "time_embed_hidden_dim", [](DitConfig& c) { ++c.time_embed_hidden_dim; }},
        {"time_embed_dim", [](DitConfig& c) { ++c.time_embed_dim; }},
        {"attention_head_dim", [](DitConfig& c) { ++c.attention_head_dim; }},
        {"num_attention_heads", [](DitConfig& c) { ++c.num_attention_heads; }},
        {o ? "ffn_hidden_size" : "ffn_dim", [](DitConfig& c) { ++c.ffn_dim; }},
    };
    EXPECT_EQ(error_of([&] { check_dit_fits_weights(dit, layout, ck, "f"); }), "");
    for (const auto& [key, change] : keys) {
      DitConfig c = dit;
      change(c);
      EXPECT_EQ(error_of([&] { check_dit_fits_weights(c, layout, ck, "f"); }).rfind(cat("f: ", key, " is "), 0), 0u)
          << layout_name(layout) << " " << key;
    }
    if (o) {
      DitConfig c = dit;
      ++c.rope_freq_dim;
      EXPECT_NE(error_of([&] { check_dit_fits_weights(c, layout, ck, "f"); }).find("f: rope_inv_freq_len is "),
                std::string::npos);
    }
  }

  const VideoVaeConfig vae = load_video_vae_config(s.vae);
  for (Layout layout : {Layout::Diffusers, Layout::Original}) {
    const Checkpoint ck = weights_of(video_vae_manifest(vae, layout, true));
    const bool o = layout == Layout::Original;
    const std::string decoder_dim = o ? "vit_decoder_kwargs.heads × dim_head"
                                      : "decoder_num_attention_heads × decoder_attention_head_dim";
    const std::pair<std::string, std::function<void(VideoVaeConfig&)>> keys[] = {
        {o ? "vit_decoder_kwargs.num_layers" : "decoder_num_layers", [](VideoVaeConfig& c) { ++c.decoder_num_layers; }},
        {"latent_channels", [](VideoVaeConfig& c) { ++c.latent_channels; }},
        {decoder_dim, [](VideoVaeConfig& c) { ++c.decoder_num_attention_heads; }},
        {decoder_dim, [](VideoVaeConfig& c) { ++c.decoder_attention_head_dim; }},
        {"decoder_num_register_tokens", [](VideoVaeConfig& c) { ++c.decoder_num_register_tokens; }},
        {"decoder_ffn_mult", [](VideoVaeConfig& c) { ++c.decoder_ffn_mult; }},
        {o ? "out_ch × the temporal and spatial ratios" : "out_channels × the temporal and spatial ratios",
         [](VideoVaeConfig& c) { ++c.out_channels; }},
        {o ? "len(ch_mult)" : "len(block_out_channels)", [](VideoVaeConfig& c) {
           c.block_out_channels.push_back(16);
         }},
        {o ? "num_res_blocks" : "layers_per_block", [](VideoVaeConfig& c) { ++c.layers_per_block; }},
        {"in_channels", [](VideoVaeConfig& c) { ++c.in_channels; }},
        {o ? "ch × ch_mult[1]" : "block_out_channels[1]", [](VideoVaeConfig& c) { ++c.block_out_channels[1]; }},
    };
    EXPECT_EQ(error_of([&] { check_video_vae_fits_weights(vae, layout, ck, "f"); }), "");
    for (const auto& [key, change] : keys) {
      VideoVaeConfig c = vae;
      change(c);
      EXPECT_EQ(error_of([&] { check_video_vae_fits_weights(c, layout, ck, "f"); }).rfind(cat("f: ", key), 0), 0u)
          << layout_name(layout) << " " << key;
    }
  }

  const AudioVaeConfig audio = load_audio_vae_config(s.audio_vae);
  {
    const Checkpoint ck = weights_of(audio_vae_manifest(audio, true));
    const std::pair<std::string, std::function<void(AudioVaeConfig&)>> keys[] = {
        {"len(decoder_rates)", [](AudioVaeConfig& c) { c.decoder_rates.push_back(1); }},
        {"len(decoder_rates) × len(resblock_kernel_sizes)", [](AudioVaeConfig& c) {
           c.resblock_kernel_sizes.push_back(3);
         }},
        {"latent_dim", [](AudioVaeConfig& c) { ++c.latent_dim; }},
        {"latent_channels", [](AudioVaeConfig& c) { ++c.latent_channels; }},
        {"decoder_dim", [](AudioVaeConfig& c) { ++c.decoder_dim; }},
        {"decoder_kernel_sizes[1]", [](AudioVaeConfig& c) { ++c.decoder_kernel_sizes[1]; }},
        {"resblock_kernel_sizes[1]", [](AudioVaeConfig& c) { ++c.resblock_kernel_sizes[1]; }},
        {"len(resblock_dilation_sizes[0])", [](AudioVaeConfig& c) { c.resblock_dilation_sizes[0].push_back(5); }},
        {"encoder_dim", [](AudioVaeConfig& c) { ++c.encoder_dim; }},
        {"encoder_rates[2]", [](AudioVaeConfig& c) { ++c.encoder_rates[2]; }},
    };
    EXPECT_EQ(error_of([&] { check_audio_vae_fits_weights(audio, ck, "f"); }), "");
    for (const auto& [key, change] : keys) {
      AudioVaeConfig c = audio;
      change(c);
      EXPECT_EQ(error_of([&] { check_audio_vae_fits_weights(c, ck, "f"); }).rfind(cat("f: ", key, " is "), 0), 0u)
          << key;
    }
  }

  const TextEncoderConfig text = load_text_encoder_config(s.text_encoder);
  {
    const Checkpoint ck = weights_of(text_encoder_manifest(text, true));
    const std::pair<std::string, std::function<void(TextEncoderConfig&)>> keys[] = {
        {"text_config.vocab_size", [](TextEncoderConfig& c) { ++c.text.vocab_size; }},
        {"text_config.hidden_size", [](TextEncoderConfig& c) { ++c.text.hidden_size; }},
        {"text_config.head_dim", [](TextEncoderConfig& c) { ++c.text.head_dim; }},
        {"text_config.num_attention_heads", [](TextEncoderConfig& c) { ++c.text.num_attention_heads; }},
        {"text_config.num_key_value_heads", [](TextEncoderConfig& c) { ++c.text.num_key_value_heads; }},
        {"text_config.intermediate_size", [](TextEncoderConfig& c) { ++c.text.intermediate_size; }},
        {"vision_config.depth", [](TextEncoderConfig& c) { ++c.vision.depth; }},
        {"len(vision_config.deepstack_visual_indexes)", [](TextEncoderConfig& c) {
           c.vision.deepstack_visual_indexes.push_back(1);
         }},
        {"vision_config.hidden_size", [](TextEncoderConfig& c) { ++c.vision.hidden_size; }},
        {"vision_config.in_channels", [](TextEncoderConfig& c) { ++c.vision.in_channels; }},
        {"vision_config.temporal_patch_size", [](TextEncoderConfig& c) { ++c.vision.temporal_patch_size; }},
        {"vision_config.patch_size", [](TextEncoderConfig& c) { ++c.vision.patch_size; }},
        {"vision_config.num_position_embeddings", [](TextEncoderConfig& c) { ++c.vision.num_position_embeddings; }},
        {"vision_config.intermediate_size", [](TextEncoderConfig& c) { ++c.vision.intermediate_size; }},
        {"vision_config.out_hidden_size", [](TextEncoderConfig& c) { ++c.vision.out_hidden_size; }},
    };
    EXPECT_EQ(error_of([&] { check_text_encoder_fits_weights(text, ck, "f"); }), "");
    for (const auto& [key, change] : keys) {
      TextEncoderConfig c = text;
      change(c);
      EXPECT_EQ(error_of([&] { check_text_encoder_fits_weights(c, ck, "f"); }).rfind(cat("f: ", key, " is "), 0), 0u)
          << key;
    }
  }
}

// --info reads headers only: on configs that claim 10^9 blocks it answers at once, under a 2 GiB data limit (so an
// attempt to allocate for them fails the test instead of the machine), with one line per config.
TEST(ConfigChecks, InfoAnswersAtOnceOnAbsurdBlockCounts) {
  Copy c;
  const std::string dit = c.set("transformer/config.json", "/num_layers", 1000000000);
  const std::string vae = c.set("vae/config.json", "/decoder_num_layers", 1000000000);
  const RunResult r = run_shell("ulimit -d 2097152 && exec " + std::string(H3_BINARY) + " --info -d " + c.root());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_LT(r.seconds, 1.0) << r.out;
  EXPECT_NE(r.out.find(dit + ": num_layers is 1000000000 but the weights hold 2 blocks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(vae + ": decoder_num_layers is 1000000000 but the weights hold 2 decoder blocks"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("problems (2):"), std::string::npos) << r.out;
}

// Generation refuses a config its weights contradict when the engine opens, before any weight loads (the text encoder,
// loaded first, used to be read in full before the transformer's config was found wrong), and writes nothing.
TEST(ConfigChecks, GenerationIsRefusedBeforeAnyWeightLoads) {
  Copy c;
  const std::string f = c.set("audio_vae/config.json", "/decoder_dim", 256);
  EXPECT_EQ(error_of([&] { Engine::open({.model_dir = c.root(), .device = "cpu"}); }),
            f + ": decoder_dim is 256 but the weights hold 128 (decoder.conv_pre.weight_v is [128, 128, 7])");
  const std::string out = c.file("../out.mp4");
  const RunResult r = run_shell(std::string(H3_BINARY) + " -d " + c.root() +
                                " -p 'A fox' --width 64 --height 64 --frames 5 --steps 2 --device cpu -o " + out);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(f + ": decoder_dim is 256 but the weights hold 128"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}
