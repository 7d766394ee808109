// The DiT as the sampler's velocity model: a thin adapter from the packed layout to Dit's request API.
#pragma once
#include <array>
#include <functional>
#include <vector>

#include "models/dit/dit.h"
#include "parallel/dit_group.h"
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
  explicit DitVelocityModel(Dit& dit, DitRequestSettings settings = {});
  // The transformer on the ranks of a sequence-parallel group (issue 21).
  explicit DitVelocityModel(ParallelDit& dit, DitRequestSettings settings = {});
  void begin_request(const PackedLayout& layout, const Tensor& text, const std::vector<float>& timesteps) override;
  Velocity step(const Tensor& video_rows, const Tensor& audio_rows,
                const std::vector<int64_t>& timestep_index_per_row) override;
  void end_request() override { end_(); }

 private:
  // The request API of the Dit or the ParallelDit given (the same calls: models/dit/dit.h).
  std::function<void(const DitLayout&, const Tensor&, const std::vector<float>&, const DitRequestOptions&)> begin_;
  std::function<DitOutput(const Tensor&, const Tensor&, const std::vector<int64_t>&, std::optional<int64_t>)> step_;
  std::function<void()> end_;
  DitRequestSettings settings_;
  std::vector<float> timesteps_;  // the request's (begin_request's list)
  int64_t target_video_row_ = -1;  // a target-video row of the layout (-1: none)
};

}  // namespace h3
