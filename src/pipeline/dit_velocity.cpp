#include "pipeline/dit_velocity.h"

namespace h3 {

void DitVelocityModel::begin_request(const PackedLayout& layout, const Tensor& text,
                                     const std::vector<float>& timesteps) {
  DitLayout dit_layout;
  dit_layout.token_tags = layout.token_tags;
  dit_layout.position_ids = layout.position_ids;
  dit_layout.video_indices = layout.video_indices;
  dit_layout.audio_indices = layout.audio_indices;
  dit_layout.text_indices = layout.text_indices;
  dit_.begin_request(dit_layout, text, timesteps);
}

Velocity DitVelocityModel::step(const Tensor& video_rows, const Tensor& audio_rows,
                                const std::vector<int64_t>& timestep_index_per_row) {
  DitOutput out = dit_.step(video_rows, audio_rows, timestep_index_per_row);
  return {std::move(out.sample), std::move(out.audio_sample)};
}

}  // namespace h3
