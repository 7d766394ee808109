#include "io/snapshot.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/manifest.h"
#include "io/safetensors.h"
#include "io/weights_fit.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* layout_name(Layout l) { return l == Layout::Diffusers ? "diffusers" : "original"; }

const char* workflow_name(Workflow w) {
  switch (w) {
    case Workflow::T2VA: return "t2va";
    case Workflow::FL2VA: return "fl2va";
    case Workflow::Ref2VA: return "ref2va";
  }
  return "?";
}

std::string join_path(const std::string& a, const std::string& b) { return (fs::path(a) / b).string(); }

namespace {

// Whether a file of the snapshot is there. Something else in its place (a folder, a FIFO, a device, a symbolic link
// loop) is reported as what it is, not taken for a missing file.
bool snapshot_file(const std::string& path) {
  if (const std::string what = not_a_regular_file(path); !what.empty())
    fail(path, " ", what, "; the snapshot needs a regular file there.");
  return file_exists(path);
}

// A folder is an original partition (FL2VA/ or Ref2VA/) when its model_index.json names MiniMaxH3Pipeline or it
// holds the original-only `video_vae/` folder.
bool is_original_partition(const std::string& dir) {
  std::string idx = join_path(dir, "model_index.json");
  if (snapshot_file(idx)) {
    try {
      json j = parse_json_file(idx);
      if (j.is_object() && j.value("_class_name", "") == "MiniMaxH3Pipeline") return true;
    } catch (const Error&) {
    }
  }
  return dir_exists(join_path(dir, "video_vae"));
}

Component diffusers_component(const std::string& root, const std::string& name, const std::string& config_name,
                              bool weights) {
  Component c;
  c.name = name;
  c.dir = join_path(root, name);
  std::string cfg = join_path(c.dir, config_name);
  if (!snapshot_file(cfg)) return c;
  c.present = true;
  c.layout = Layout::Diffusers;
  c.config_files = {cfg};
  if (weights) c.weights = c.dir;
  return c;
}

// The partition's transformer serves ref2va when model_index.json says partition "ref2va" (or the folder is
// named Ref2VA), else t2va/fl2va.
bool is_ref_partition(const std::string& part) {
  std::string idx = join_path(part, "model_index.json");
  if (snapshot_file(idx)) {
    json j = parse_json_file(idx);
    if (j.is_object() && j.contains("_minimax_h3") && j["_minimax_h3"].is_object()) {
      std::string p = ConfigReader(j["_minimax_h3"], idx).get_string("partition", "");
      if (!p.empty()) return p == "ref2va";
    }
  }
  return fs::path(part).filename() == "Ref2VA";
}

// Fills, from one original partition, its transformer slot and every shared component not found yet.
void find_original(Snapshot& s, const std::string& part) {
  bool ref = is_ref_partition(part);
  Component tr;
  tr.name = ref ? "transformer_ref" : "transformer";
  tr.dir = join_path(part, "transformer");
  if (snapshot_file(join_path(tr.dir, "config.json"))) {
    tr.present = true;
    tr.layout = Layout::Original;
    tr.config_files = {join_path(tr.dir, "config.json")};
    tr.weights = tr.dir;
  }
  Component& slot = ref ? s.transformer_ref : s.transformer;
  if (!slot.present && tr.present) slot = tr;

  auto fill = [&](Component& c, const std::string& name, Component candidate) {
    candidate.name = name;
    if (!c.present && candidate.present) c = candidate;
  };
  {
    Component v;
    v.dir = join_path(part, "video_vae");
    std::string wrapper = join_path(v.dir, "config.json"), source = join_path(v.dir, "source/config.json");
    if (snapshot_file(wrapper) && snapshot_file(source)) {
      v.present = true;
      v.layout = Layout::Original;
      v.config_files = {wrapper, source};
      // The wrapper names the weights file (source_path / source_safetensors_path).
      std::string sp = "source", sf = "model.safetensors";
      try {
        json w = parse_json_file(wrapper);
        if (w.is_object()) {
          if (w.contains("source_path") && w["source_path"].is_string()) sp = w["source_path"];
          if (w.contains("source_safetensors_path") && w["source_safetensors_path"].is_string())
            sf = w["source_safetensors_path"];
        }
      } catch (const Error&) {
      }
      v.weights = join_path(join_path(v.dir, sp), sf);
    }
    fill(s.vae, "vae", v);
  }
  {
    Component a;
    a.dir = join_path(part, "audio_vae");
    std::string cfg = join_path(a.dir, "config.json"), meta = join_path(a.dir, "metadata.json");
    if (snapshot_file(cfg) && snapshot_file(meta)) {
      a.present = true;
      a.layout = Layout::Original;
      a.config_files = {cfg, meta};
      a.weights = join_path(a.dir, "model.safetensors");
    }
    fill(s.audio_vae, "audio_vae", a);
  }
  {
    Component t = diffusers_component(part, "text_encoder", "config.json", true);
    t.layout = Layout::Original;  // same files as the root layout; named for where it was found
    fill(s.text_encoder, "text_encoder", t);
  }
  {
    Component t = diffusers_component(part, "tokenizer", "tokenizer.json", false);
    if (!t.present) t = diffusers_component(part, "text_encoder", "tokenizer.json", false);
    t.layout = Layout::Original;
    fill(s.tokenizer, "tokenizer", t);
  }
  {
    Component p = diffusers_component(part, "processor", "preprocessor_config.json", false);
    if (!p.present) p = diffusers_component(part, "processor", "processor_config.json", false);
    p.layout = Layout::Original;
    fill(s.processor, "processor", p);
  }
  std::string idx = join_path(part, "model_index.json");
  if (snapshot_file(idx)) {
    json j = parse_json_file(idx);
    if (j.is_object() && j.contains("_minimax_h3") && j["_minimax_h3"].is_object()) {
      ConfigReader r = ConfigReader(j, idx).child("_minimax_h3").child("sigma_shift_scales");
      if (r.has("video") && !s.original_video_shift) s.original_video_shift = r.get_double("video", 12.0);
      if (r.has("audio") && !s.original_audio_shift) s.original_audio_shift = r.get_double("audio", 3.0);
    }
  }
}

}  // namespace

Snapshot Snapshot::discover(const std::string& dir) {
  if (const std::string what = not_a_folder(dir); !what.empty())
    fail(dir, " ", what, ", not a model folder (pass the snapshot root with -d).");
  H3_CHECK(dir_exists(dir), dir, ": model folder not found (pass the snapshot root with -d)");
  Snapshot s;
  s.root = dir;
  for (const char* idx : {"modular_model_index.json", "model_index.json"}) {
    std::string p = join_path(dir, idx);
    if (snapshot_file(p)) {
      s.index_file = p;
      break;
    }
  }
  s.transformer = diffusers_component(dir, "transformer", "config.json", true);
  s.transformer_ref = diffusers_component(dir, "transformer_ref", "config.json", true);
  s.vae = diffusers_component(dir, "vae", "config.json", true);
  s.audio_vae = diffusers_component(dir, "audio_vae", "config.json", true);
  s.text_encoder = diffusers_component(dir, "text_encoder", "config.json", true);
  s.tokenizer = diffusers_component(dir, "tokenizer", "tokenizer.json", false);
  s.processor = diffusers_component(dir, "processor", "preprocessor_config.json", false);
  if (!s.processor.present) s.processor = diffusers_component(dir, "processor", "processor_config.json", false);
  s.scheduler = diffusers_component(dir, "scheduler", "scheduler_config.json", false);
  s.audio_scheduler = diffusers_component(dir, "audio_scheduler", "scheduler_config.json", false);
  // -d may point at one original partition, or at a root holding FL2VA/ and/or Ref2VA/.
  if (is_original_partition(dir)) {
    s.transformer = Component{};
    find_original(s, dir);
  } else {
    for (const char* part : {"FL2VA", "Ref2VA"})
      if (is_original_partition(join_path(dir, part))) find_original(s, join_path(dir, part));
  }
  // The original text_encoder folder also carries the tokenizer files.
  if (!s.tokenizer.present && s.text_encoder.present &&
      snapshot_file(join_path(s.text_encoder.dir, "tokenizer.json"))) {
    s.tokenizer.present = true;
    s.tokenizer.dir = s.text_encoder.dir;
    s.tokenizer.layout = s.text_encoder.layout;
    s.tokenizer.config_files = {join_path(s.text_encoder.dir, "tokenizer.json")};
  }
  if (!s.scheduler.present && s.original_video_shift) {
    s.scheduler.present = true;
    s.scheduler.layout = Layout::Original;
    s.scheduler.dir = dir;
  }
  if (!s.audio_scheduler.present && s.original_audio_shift) {
    s.audio_scheduler.present = true;
    s.audio_scheduler.layout = Layout::Original;
    s.audio_scheduler.dir = dir;
  }
  const char* names[] = {"transformer", "transformer_ref", "vae", "audio_vae", "text_encoder",
                         "tokenizer", "processor", "scheduler", "audio_scheduler"};
  Component* slots[] = {&s.transformer, &s.transformer_ref, &s.vae, &s.audio_vae, &s.text_encoder,
                        &s.tokenizer, &s.processor, &s.scheduler, &s.audio_scheduler};
  bool any = false;
  for (int i = 0; i < 9; ++i) {
    slots[i]->name = names[i];
    any = any || slots[i]->present;
  }
  H3_CHECK(any, dir, ": no MiniMax-H3 component found (expected transformer/, vae/, ... or FL2VA/, Ref2VA/)");
  return s;
}

std::vector<const Component*> Snapshot::components() const {
  return {&transformer, &transformer_ref, &text_encoder, &tokenizer, &processor, &vae, &audio_vae, &scheduler,
          &audio_scheduler};
}

std::vector<std::string> Snapshot::missing_for(Workflow w) const {
  // spec/layout.md §4. Schedulers fall back to the released shifts, so they are never missing.
  std::vector<const Component*> need = {&text_encoder, &tokenizer, &vae, &audio_vae};
  need.push_back(w == Workflow::Ref2VA ? &transformer_ref : &transformer);
  if (w != Workflow::T2VA) need.push_back(&processor);
  std::vector<std::string> out;
  for (const Component* c : need)
    if (!c->present) out.push_back(c->name);
  return out;
}

bool Snapshot::can_serve(Workflow w) const { return missing_for(w).empty(); }

namespace {

// The component's weights, headers only, when they can be judged against its config: `opened`, or the checkpoint
// opened here into `own`; null when they are absent, unreadable or damaged (a missing shard, a truncated file),
// which the loaders and --info report in their own words.
const Checkpoint* judged_weights(const Component& c, const Checkpoint* opened, std::optional<Checkpoint>& own) {
  if (!opened && !c.weights.empty()) {
    try {
      own = Checkpoint::open(c.weights, /*inspect=*/true);
      opened = &*own;
    } catch (const Error&) {
    }
  }
  return opened && opened->problems().empty() ? opened : nullptr;
}

}  // namespace

// Each loader reads the config, holds the values against the weights' headers (io/weights_fit.h), validates them,
// then holds the tensors present against the shapes the config implies: all before anything is sized from it.
DitConfig load_dit_config(const Component& c, const Checkpoint* weights) {
  H3_CHECK(c.present, c.name, ": component is missing");
  const std::string& file = c.config_files.at(0);
  std::optional<Checkpoint> own;
  const Checkpoint* ck = judged_weights(c, weights, own);
  DitConfig cfg = parse_dit_config(parse_json_file(file), file, c.layout == Layout::Original, [&](const DitConfig& read) {
    if (ck) check_dit_fits_weights(read, c.layout, *ck, file);
  });
  if (ck) check_manifest_shapes(dit_manifest(cfg, c.layout), *ck, file);
  return cfg;
}

VideoVaeConfig load_video_vae_config(const Component& c, const Checkpoint* weights) {
  H3_CHECK(c.present, c.name, ": component is missing");
  std::optional<Checkpoint> own;
  const Checkpoint* ck = judged_weights(c, weights, own);
  const bool original = c.layout == Layout::Original;
  const std::string what = original ? c.dir : c.config_files.at(0);
  auto fits = [&](const VideoVaeConfig& read) {
    if (ck) check_video_vae_fits_weights(read, c.layout, *ck, what);
  };
  const VideoVaeConfig cfg =
      original ? parse_original_video_vae_config(parse_json_file(c.config_files.at(0)),
                                                 parse_json_file(c.config_files.at(1)), what, fits)
               : parse_video_vae_config(parse_json_file(what), what, fits);
  if (ck) check_manifest_shapes(video_vae_manifest(cfg, c.layout, true), *ck, what);
  return cfg;
}

AudioVaeConfig load_audio_vae_config(const Component& c, const Checkpoint* weights) {
  H3_CHECK(c.present, c.name, ": component is missing");
  std::optional<Checkpoint> own;
  const Checkpoint* ck = judged_weights(c, weights, own);
  const bool original = c.layout == Layout::Original;
  const std::string what = original ? c.dir : c.config_files.at(0);
  auto fits = [&](const AudioVaeConfig& read) {
    if (ck) check_audio_vae_fits_weights(read, *ck, what);
  };
  const AudioVaeConfig cfg =
      original ? parse_original_audio_vae_config(parse_json_file(c.config_files.at(0)),
                                                 parse_json_file(c.config_files.at(1)), what, fits)
               : parse_audio_vae_config(parse_json_file(what), what, fits);
  if (ck) check_manifest_shapes(audio_vae_manifest(cfg, true), *ck, what);
  return cfg;
}

TextEncoderConfig load_text_encoder_config(const Component& c, const Checkpoint* weights) {
  H3_CHECK(c.present, c.name, ": component is missing");
  const std::string& file = c.config_files.at(0);
  std::optional<Checkpoint> own;
  const Checkpoint* ck = judged_weights(c, weights, own);
  const TextEncoderConfig cfg = parse_text_encoder_config(parse_json_file(file), file, [&](const TextEncoderConfig& read) {
    if (ck) check_text_encoder_fits_weights(read, *ck, file);
  });
  if (!ck) return cfg;
  if (holds_vision_tower(*ck)) cfg.validate_vision(file);
  check_manifest_shapes(text_encoder_manifest(cfg, true), *ck, file);
  return cfg;
}

SchedulerConfig load_scheduler_config(const Snapshot& s, bool audio) {
  const Component& c = audio ? s.audio_scheduler : s.scheduler;
  double def = audio ? 3.0 : 12.0;
  if (c.present && c.layout == Layout::Diffusers)
    return parse_scheduler_config(parse_json_file(c.config_files.at(0)), c.config_files[0], def);
  std::optional<double> orig = audio ? s.original_audio_shift : s.original_video_shift;
  SchedulerConfig sc;
  sc.shift = orig.value_or(def);
  if (orig) sc.validate(cat(s.root, ": the original partition's model_index.json, _minimax_h3.sigma_shift_scales.",
                            audio ? "audio" : "video"));
  return sc;
}

}  // namespace h3
