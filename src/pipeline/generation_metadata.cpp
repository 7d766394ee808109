#include "pipeline/generation_metadata.h"

#include "h3/version.h"
#include "util/error.h"

namespace h3 {

namespace {

// "image a.png", "video v.mp4 with its soundtrack", "video v.mp4 with the soundtrack of a.wav", "audio a.wav".
std::string reference_text(const ReferenceInput& r) {
  using K = ReferenceInput::Kind;
  using S = ReferenceInput::Soundtrack;
  switch (r.kind) {
    case K::Image: return "image " + r.describe();
    case K::Audio: return "audio " + r.describe();
    case K::Video: break;
  }
  switch (r.soundtrack) {
    case S::Own: return cat("video ", r.describe(), " with its soundtrack");
    case S::None: return cat("video ", r.describe(), " without its soundtrack");
    case S::Replaced: break;
  }
  return cat("video ", r.describe(), " with the soundtrack of ", r.in_memory() ? "its in-memory waveform" : r.soundtrack_path);
}

}  // namespace

MetadataTags generation_metadata(const ResolvedRequest& r) {
  const GenerationRequest& q = r.request;
  const BuildInfo build = build_info();
  const std::string version = cat(build.version, " (commit ", build.commit, ")");
  MetadataTags tags = {
      {"comment", cat("MiniMax-H3 ", workflow_name(r.workflow), " by h3 ", build.version, ": ", r.width, "x", r.height,
                      ", ", r.frames, " frames, ", r.steps, " passes, seed ", q.seed)},
      {"description", q.prompt},
      {"h3_version", version},
      {"h3_workflow", workflow_name(r.workflow)},
      {"h3_prompt", q.prompt},
      {"h3_seed", cat(q.seed)},
      {"h3_passes", cat(r.steps)},
      {"h3_canvas", cat(r.width, "x", r.height)},
      {"h3_frames", cat(r.frames)},
  };
  if (q.first_frame) tags.emplace_back("h3_first_frame", q.first_frame->describe());
  if (q.last_frame) tags.emplace_back("h3_last_frame", q.last_frame->describe());
  for (size_t i = 0; i < q.references.size(); ++i)
    tags.emplace_back(cat("h3_reference_", i + 1), reference_text(q.references[i]));
  if (!q.references.empty())
    tags.emplace_back("h3_reference_image_size", reference_image_size_name(q.reference_image_size));
  // The speed controls that were set, under the request JSON's names (pipeline/request_json.cpp), each only when
  // it leaves the exact path (or, for layers and the render canvas, when given).
  if (q.reuse != 1) tags.emplace_back("h3_reuse", cat(q.reuse));
  if (q.core_reuse != 1) tags.emplace_back("h3_core_reuse", cat(q.core_reuse));
  if (q.layers) tags.emplace_back("h3_layers", cat(*q.layers));
  if (q.token_reduction) tags.emplace_back("h3_token_reduction", "on");
  if (q.render_width || q.render_height)
    tags.emplace_back("h3_render_canvas", cat(r.render_width, "x", r.render_height));
  if (q.use_reference_rope) tags.emplace_back("h3_use_reference_rope", "on");
  return tags;
}

}  // namespace h3
