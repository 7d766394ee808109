// The DiT as the sampler's velocity model: a thin adapter from the packed layout to Dit's request API.
#pragma once
#include <array>
#include <vector>

#include "models/dit/dit.h"
#include "pipeline/sampler.h"

namespace h3 {

// What the DiT needs of a request beyond its packed layout: the speed controls (options.passes is set from the
// schedule here), the video schedule's timestep at every pass (a step's pass is the one whose timestep its target
// video rows carry, so that passes the sampler does not evaluate keep their numbers) and the generated video's patch
// grid (DitLayout::target_video_grid). The defaults are the exact forward.
struct DitRequestSettings {
  DitRequestOptions options;
  std::vector<float> video_timesteps;
  std::array<int64_t, 3> target_video_grid{};
};

class DitVelocityModel : public VelocityModel {
 public:
  explicit DitVelocityModel(Dit& dit, DitRequestSettings settings = {}) : dit_(dit), settings_(std::move(settings)) {}
  void begin_request(const PackedLayout& layout, const Tensor& text, const std::vector<float>& timesteps) override;
  Velocity step(const Tensor& video_rows, const Tensor& audio_rows,
                const std::vector<int64_t>& timestep_index_per_row) override;
  void end_request() override { dit_.end_request(); }

 private:
  Dit& dit_;
  DitRequestSettings settings_;
  std::vector<float> timesteps_;  // the request's (begin_request's list)
  int64_t target_video_row_ = -1;  // a target-video row of the layout (-1: none)
};

}  // namespace h3
