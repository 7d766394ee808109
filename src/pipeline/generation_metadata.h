// The settings a video was made from, as the MP4's container metadata (what `ffprobe -show_entries format_tags`
// lists): enough to make the same video again.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "h3/request.h"

namespace h3 {

using MetadataTags = std::vector<std::pair<std::string, std::string>>;

// "comment": one line for players that show it; "description": the prompt; then one h3_* key per setting —
// h3_version, h3_workflow, h3_prompt, h3_seed, h3_passes, h3_canvas (WxH), h3_frames, h3_first_frame /
// h3_last_frame (fl2va), h3_reference_N (ref2va, from 1, in order) and h3_reference_image_size; the speed
// controls that were set: h3_reuse, h3_core_reuse, h3_layers, h3_token_reduction (on), h3_render_canvas (WxH, where
// the model ran) and h3_use_reference_rope (on).
MetadataTags generation_metadata(const ResolvedRequest& r);

}  // namespace h3
