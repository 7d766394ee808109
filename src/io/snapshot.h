// Finding a MiniMax-H3 snapshot's components on disk (spec/layout.md): the diffusers root layout
// (`transformer/`, `vae/`, ...) and the original per-partition layout (`FL2VA/`, `Ref2VA/`), each component found
// independently, so a snapshot may hold only what one workflow needs.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "h3/request.h"  // Workflow
#include "io/config.h"

namespace h3 {

enum class Layout { Diffusers, Original };
const char* layout_name(Layout l);

struct Component {
  std::string name;           // "transformer", "vae", ...
  bool present = false;
  Layout layout = Layout::Diffusers;
  std::string dir;            // the component's folder
  std::string weights;        // what Checkpoint::open takes (folder or file); empty for weightless components
  std::vector<std::string> config_files;  // the configs it is described by
};

struct Snapshot {
  std::string root;
  std::string index_file;  // modular_model_index.json / model_index.json that was read, if any
  Component transformer, transformer_ref, vae, audio_vae, text_encoder, tokenizer, processor, scheduler,
      audio_scheduler;
  // The original layout keeps the schedule shifts in FL2VA|Ref2VA/model_index.json.
  std::optional<double> original_video_shift, original_audio_shift;

  // Throws when `dir` is not a folder or holds nothing recognizable as a MiniMax-H3 snapshot.
  static Snapshot discover(const std::string& dir);

  std::vector<const Component*> components() const;
  bool can_serve(Workflow w) const;
  std::vector<std::string> missing_for(Workflow w) const;  // component names missing for w
};

class Checkpoint;
// Component configs (each throws naming the file on a bad or missing config), checked against the weights' headers
// (io/weights_fit.h): `weights` is the component's checkpoint when the caller has it open (in inspect mode), else it
// is opened here. Weights that are absent, unreadable or damaged are not judged (their loaders name the damage).
DitConfig load_dit_config(const Component& c, const Checkpoint* weights = nullptr);
VideoVaeConfig load_video_vae_config(const Component& c, const Checkpoint* weights = nullptr);
AudioVaeConfig load_audio_vae_config(const Component& c, const Checkpoint* weights = nullptr);
TextEncoderConfig load_text_encoder_config(const Component& c, const Checkpoint* weights = nullptr);
SchedulerConfig load_scheduler_config(const Snapshot& s, bool audio);

// Path helper.
std::string join_path(const std::string& a, const std::string& b);

}  // namespace h3
