// The DiT on the ranks of a RankGroup (issue 21): Ulysses sequence parallelism (Dit::set_communicator). Every rank
// holds the whole transformer on its own backend; a step splits the packed rows across the ranks, the attention
// its heads. The request API is Dit's, called from one thread: each call runs on every rank's thread at once and
// returns rank 0's result (every rank computes the whole output).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "models/dit/dit.h"
#include "parallel/rank_group.h"

namespace h3 {

class ParallelDit {
 public:
  // Makes rank r's DiT with make(group.backend(r), r) on rank r's thread (the same weights on every rank), then
  // joins them into the group. Throws the degree's sentence when the group's size does not divide the heads.
  using Maker = std::function<std::unique_ptr<Dit>(Backend& be, int rank)>;
  ParallelDit(RankGroup& group, const Maker& make);
  ~ParallelDit();
  ParallelDit(const ParallelDit&) = delete;
  ParallelDit& operator=(const ParallelDit&) = delete;

  int ranks() const { return group_.size(); }
  const DitConfig& config() const { return dits_.front()->config(); }
  Dit& rank(int r) { return *dits_.at(r); }

  // Dit's request API (models/dit/dit.h), on every rank. The arguments are checked on the calling thread before any
  // rank starts. A cancel (util/cancel.h) is seen between steps: the ranks' threads do not check it, so that no
  // rank leaves a collective its peers are in. After a rank failed, every later call throws.
  DitOutput forward(const DitForwardArgs& args);
  void begin_request(const DitLayout& layout, const Tensor& encoder_hidden_states, const std::vector<float>& timesteps,
                     const DitRequestOptions& options = {});
  DitOutput step(const Tensor& video_rows, const Tensor& audio_rows, const std::vector<int64_t>& timestep_index_per_row,
                 std::optional<int64_t> pass = std::nullopt);
  void end_request();

 private:
  // fn(r) on every rank; rank 0's output.
  void run(const std::function<void(int rank)>& fn);

  RankGroup& group_;
  std::vector<std::unique_ptr<Dit>> dits_;
  bool failed_ = false;
};

}  // namespace h3
