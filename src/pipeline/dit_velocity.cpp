#include "pipeline/dit_velocity.h"

#include <algorithm>

namespace h3 {

void DitVelocityModel::begin_request(const PackedLayout& layout, const Tensor& text,
                                     const std::vector<float>& timesteps) {
  DitLayout dit_layout;
  dit_layout.token_tags = layout.token_tags;
  dit_layout.position_ids = layout.position_ids;
  dit_layout.video_indices = layout.video_indices;
  dit_layout.audio_indices = layout.audio_indices;
  dit_layout.text_indices = layout.text_indices;
  dit_layout.target_video_grid = settings_.target_video_grid;
  const auto it = std::find(layout.roles.begin(), layout.roles.end(), RowRole::TargetVideo);
  target_video_row_ = it == layout.roles.end() ? -1 : it - layout.roles.begin();
  timesteps_ = timesteps;
  DitRequestOptions options = settings_.options;
  options.passes = static_cast<int64_t>(settings_.video_timesteps.size());
  dit_.begin_request(dit_layout, text, timesteps, options);
}

Velocity DitVelocityModel::step(const Tensor& video_rows, const Tensor& audio_rows,
                                const std::vector<int64_t>& timestep_index_per_row) {
  std::optional<int64_t> pass;
  if (!settings_.video_timesteps.empty() && target_video_row_ >= 0) {
    const float t = timesteps_.at(timestep_index_per_row.at(target_video_row_));
    const std::vector<float>& schedule = settings_.video_timesteps;
    const auto at = std::lower_bound(schedule.begin(), schedule.end(), t);
    H3_CHECK(at != schedule.end() && *at == t, "the target video's timestep ", t,
             " is not one of the video schedule's (its passes' timesteps ascend)");
    pass = at - schedule.begin();
  }
  DitOutput out = dit_.step(video_rows, audio_rows, timestep_index_per_row, pass);
  return {std::move(out.sample), std::move(out.audio_sample)};
}

}  // namespace h3
