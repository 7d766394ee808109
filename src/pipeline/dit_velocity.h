// The DiT as the sampler's velocity model: a thin adapter from the packed layout to Dit's request API.
#pragma once
#include "models/dit/dit.h"
#include "pipeline/sampler.h"

namespace h3 {

class DitVelocityModel : public VelocityModel {
 public:
  explicit DitVelocityModel(Dit& dit) : dit_(dit) {}
  void begin_request(const PackedLayout& layout, const Tensor& text, const std::vector<float>& timesteps) override;
  Velocity step(const Tensor& video_rows, const Tensor& audio_rows,
                const std::vector<int64_t>& timestep_index_per_row) override;
  void end_request() override { dit_.end_request(); }

 private:
  Dit& dit_;
};

}  // namespace h3
