#include "pipeline/dit_velocity.h"

#include <algorithm>

namespace h3 {

namespace {

// begin_, step_ and end_ of DitVelocityModel over `dit` (a Dit or a ParallelDit).
template <typename Transformer, typename Begin, typename Step, typename End>
void bind_requests(Transformer& dit, Begin& begin, Step& step, End& end) {
  begin = [&dit](const DitLayout& l, const Tensor& t, const std::vector<float>& ts, const DitRequestOptions& o) {
    dit.begin_request(l, t, ts, o);
  };
  step = [&dit](const Tensor& v, const Tensor& a, const std::vector<int64_t>& i, std::optional<int64_t> pass) {
    return dit.step(v, a, i, pass);
  };
  end = [&dit] { dit.end_request(); };
}

}  // namespace

DitVelocityModel::DitVelocityModel(Dit& dit, DitRequestSettings settings) : settings_(std::move(settings)) {
  bind_requests(dit, begin_, step_, end_);
}

DitVelocityModel::DitVelocityModel(ParallelDit& dit, DitRequestSettings settings) : settings_(std::move(settings)) {
  bind_requests(dit, begin_, step_, end_);
}

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
  begin_(dit_layout, text, timesteps, options);
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
  DitOutput out = step_(video_rows, audio_rows, timestep_index_per_row, pass);
  return {std::move(out.sample), std::move(out.audio_sample)};
}

}  // namespace h3
