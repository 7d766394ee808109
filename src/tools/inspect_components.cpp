// `h3 --info`, the components part: every component's config and weights' headers (no tensor payload).
#include "tools/inspect.h"

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "h3/request.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "models/dit/dit_fasth3.h"
#include "pipeline/schedule.h"
#include "util/error.h"

namespace h3 {

namespace {

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (uint64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  else if (b >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string human_count(uint64_t n) {
  char buf[64];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1000000ull) std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  else if (n >= 1000ull) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

// Checks a checkpoint against a manifest: one problem per missing tensor or wrong shape (capped).
void check_manifest(const std::string& comp, const Checkpoint& ck, const std::vector<TensorSpec>& need,
                    std::vector<std::string>& problems, const char* role) {
  size_t reported = 0, more = 0;
  for (const auto& t : need) {
    std::string msg;
    if (!ck.has(t.name)) {
      if (ck.unavailable(t.name)) continue;  // its shard is already reported
      msg = cat(comp, ": tensor '", t.name, "' ", role, " is missing from ", ck.location());
    } else if (ck.info(t.name).shape != t.shape) {
      msg = cat(comp, ": tensor '", t.name, "' has shape ", shape_str(ck.info(t.name).shape), ", the config implies ",
                shape_str(t.shape));
    } else {
      continue;
    }
    if (reported < 20) {
      problems.push_back(msg);
      ++reported;
    } else {
      ++more;
    }
  }
  if (more) problems.push_back(cat(comp, ": ... and ", more, " more missing or misshapen tensors"));
}

struct Inspector {
  std::ostringstream out;
  std::vector<std::string> problems;
  nlohmann::json components = nlohmann::json::array();

  void line(const std::string& s) { out << s << "\n"; }

  // Opens the weights (headers only; each problem recorded) for the config's loader and the manifest, or nothing on
  // a fatal error.
  std::optional<Checkpoint> open_weights(const Component& c) {
    try {
      Checkpoint ck = Checkpoint::open(c.weights, /*inspect=*/true);
      for (const auto& p : ck.problems()) problems.push_back(c.name + ": " + p);
      return ck;
    } catch (const Error& e) {
      problems.push_back(c.name + ": " + e.what());
      return std::nullopt;
    }
  }

  void weights_line(const Checkpoint& ck) {
    std::string dt;
    for (const auto& [d, b] : ck.bytes_per_dtype()) dt += cat(dt.empty() ? "" : ", ", dtype_name(d), " ", human_bytes(b));
    line(cat("    ", ck.tensor_count(), " tensors, ", human_count(ck.param_count()), " parameters, ", dt, "; ",
             ck.shard_count(), ck.shard_count() == 1 ? " file" : " shards"));
  }

  void component(const Component& c, const std::function<void(const Component&)>& details) {
    components.push_back({{"name", c.name},
                          {"present", c.present},
                          {"layout", c.present ? nlohmann::json(layout_name(c.layout)) : nlohmann::json()},
                          {"dir", c.present ? nlohmann::json(c.dir) : nlohmann::json()}});
    if (!c.present) {
      line(cat("  ", c.name, ": missing"));
      return;
    }
    line(cat("  ", c.name, ": present (", layout_name(c.layout), " layout) ", c.dir));
    try {
      details(c);
    } catch (const Error& e) {
      problems.push_back(c.name + ": " + e.what());
    }
  }
};

// The default passes' timesteps of one modality, e.g. "video timesteps 0, 0.027027, 0.0769231, 0.2 (shift 12)".
std::string default_timesteps(const char* modality, double shift, int64_t passes) {
  const FlowSchedule schedule = FlowSchedule::shifted(shift, passes + 1);
  std::string list;
  for (const float t : schedule.timesteps()) list += cat(list.empty() ? "" : ", ", t);
  return cat("  ", modality, " timesteps ", list, " (shift ", shift, ")");
}

}  // namespace

InspectReport inspect_components(const Snapshot& s) {
  Inspector in;
  bool student = false;  // the transformer is a FastH3 student: its grid is the default sampling
  auto dit = [&](const Component& c) {
    const std::optional<Checkpoint> ck = in.open_weights(c);
    DitConfig cfg = load_dit_config(c, ck ? &*ck : nullptr);
    in.line(cat("    hidden ", cfg.hidden_size, ", ", cfg.num_layers, " blocks + ", cfg.num_refiner_layers,
                " refiner, ", cfg.num_attention_heads, "x", cfg.attention_head_dim, " heads, ffn ", cfg.ffn_dim,
                ", text_dim ", cfg.text_dim, ", latent ", cfg.in_channels, " video / ", cfg.audio_in_channels,
                " audio channels"));
    if (!ck) return;
    in.weights_line(*ck);
    check_manifest(c.name, *ck, dit_manifest(cfg, c.layout), in.problems, "needed by the model");
    // spec/fasth3.md §1: FastVideo's FastH3 students carry to_gate_compress in every main block.
    if (dit_has_gates(*ck, cfg, c.layout)) {
      if (c.name == "transformer") student = true;
      in.line(cat("    FastH3 student (to_gate_compress in every block): ",
                  describe_fasth3_plan(resolve_fasth3_plan(true, {}, kDefaultSteps)), " by default"));
    } else {
      FastH3Choices sparse;
      sparse.attention = AttentionChoice::Sparse;
      in.line(cat("    base checkpoint (no to_gate_compress): attention: dense by default; --attention sparse: ",
                  describe_fasth3_attention(resolve_fasth3_plan(false, sparse, kDefaultSteps))));
    }
  };
  in.component(s.transformer, dit);
  in.component(s.transformer_ref, dit);
  in.component(s.text_encoder, [&](const Component& c) {
    const std::optional<Checkpoint> ck = in.open_weights(c);
    TextEncoderConfig cfg = load_text_encoder_config(c, ck ? &*ck : nullptr);
    const auto& t = cfg.text;
    in.line(cat("    Qwen3-VL text: hidden ", t.hidden_size, ", ", t.num_hidden_layers, " layers (", kConditionerLayers,
                " used), ", t.num_attention_heads, "/", t.num_key_value_heads, " heads x ", t.head_dim, ", ffn ",
                t.intermediate_size, ", vocab ", t.vocab_size, "; vision: ", cfg.vision.depth, " blocks x ",
                cfg.vision.hidden_size));
    if (ck) {
      in.weights_line(*ck);
      check_manifest(c.name, *ck, text_encoder_manifest(cfg, false), in.problems, "needed by the conditioner");
      auto full = text_encoder_manifest(cfg, true);
      size_t vision_missing = 0;
      for (const auto& t2 : full)
        if (t2.name.rfind("model.visual.", 0) == 0 && !ck->has(t2.name)) ++vision_missing;
      if (vision_missing) in.line(cat("    vision tower incomplete (", vision_missing, " tensors missing): fl2va and ref2va unavailable"));
    }
  });
  in.component(s.tokenizer, [&](const Component& c) { in.line(cat("    ", c.config_files.at(0))); });
  in.component(s.processor, [&](const Component& c) {
    in.line(cat("    ", c.config_files.at(0)));
    const ImageProcessorConfig p = parse_image_processor_config(parse_json_file(c.config_files[0]), c.config_files[0]);
    in.line(cat("    image processor: patch ", p.patch_size, ", merge ", p.merge_size, ", ", p.min_pixels, " to ",
                p.max_pixels, " pixels"));
  });
  in.component(s.vae, [&](const Component& c) {
    const std::optional<Checkpoint> ck = in.open_weights(c);
    VideoVaeConfig cfg = load_video_vae_config(c, ck ? &*ck : nullptr);
    in.line(cat("    latent ", cfg.latent_channels, " channels, /", cfg.spatial_ratio(), " space, /",
                cfg.temporal_ratio(), " time; ViT decoder ", cfg.decoder_num_layers, " blocks x ", cfg.decoder_dim(),
                "; clip ", cfg.clip_length, " frames"));
    if (!ck) return;
    in.weights_line(*ck);
    check_manifest(c.name, *ck, video_vae_manifest(cfg, c.layout, false), in.problems, "needed by the decoder");
  });
  in.component(s.audio_vae, [&](const Component& c) {
    const std::optional<Checkpoint> ck = in.open_weights(c);
    AudioVaeConfig cfg = load_audio_vae_config(c, ck ? &*ck : nullptr);
    in.line(cat("    latent ", cfg.latent_channels, " channels, hop ", cfg.hop_length(), " at ", cfg.sampling_rate,
                " Hz; BigVGAN decoder width ", cfg.decoder_dim, ", ", cfg.decoder_rates.size(), " upsamplers"));
    if (!ck) return;
    in.weights_line(*ck);
    check_manifest(c.name, *ck, audio_vae_manifest(cfg, false), in.problems, "needed by the decoder");
  });
  std::optional<SchedulerConfig> shifts[2];  // video, audio
  for (bool audio : {false, true}) {
    const Component& c = audio ? s.audio_scheduler : s.scheduler;
    std::optional<SchedulerConfig>& sc = shifts[audio];
    try {
      sc = load_scheduler_config(s, audio);
    } catch (const Error& e) {
      in.problems.push_back(c.name + ": " + e.what());
    }
    in.line(cat("  ", audio ? "audio_scheduler" : "scheduler", ": ",
                c.present ? (c.layout == Layout::Diffusers ? "present" : "from model_index.json") : "missing (using the released value)",
                sc ? cat(", shift ", sc->shift) : std::string(", shift unknown (its config is unreadable)")));
  }
  // The step grid a request without --steps runs (our --steps counts passes: grid points − 1).
  const int64_t passes = checkpoint_default_passes(student, kDefaultSteps);
  in.line(cat("sampling: ", passes, " passes (", passes + 1, " grid points) by default",
              student ? ", the FastH3 student's grid (basic_fasth3.py)" : ""));
  for (bool audio : {false, true})
    if (shifts[audio]) in.line(default_timesteps(audio ? "audio" : "video", shifts[audio]->shift, passes));

  try {
    load_canvas_config(s.index_file);
  } catch (const Error& e) {
    in.problems.push_back(e.what());
  }
  return {in.out.str(), in.problems, in.components};
}

}  // namespace h3
