#include "parallel/dit_group.h"

#include "util/cancel.h"
#include "util/error.h"

namespace h3 {

ParallelDit::ParallelDit(RankGroup& group, const Maker& make) : group_(group), dits_(group.size()) {
  run([&](int r) { dits_[r] = make(group_.backend(r), r); });
  run([&](int r) { dits_[r]->set_communicator(&group_.communicator(r)); });
}

ParallelDit::~ParallelDit() {
  // Each DiT's tensors are released on its rank's thread, with its device current.
  try {
    group_.run([&](int r) { dits_[r].reset(); });
  } catch (...) {  // a destructor does not throw
  }
}

void ParallelDit::run(const std::function<void(int rank)>& fn) {
  H3_CHECK(!failed_, "the transformer's GPU group failed in an earlier call and cannot run again");
  throw_if_cancelled();
  try {
    group_.run(fn);
  } catch (...) {
    failed_ = true;
    throw;
  }
}

DitOutput ParallelDit::forward(const DitForwardArgs& args) {
  validate_dit_forward_args(config(), args);
  dits_.front()->check_request({args.token_tags, args.position_ids, args.video_indices, args.audio_indices,
                                args.text_indices},
                               args.encoder_hidden_states, args.timestep);
  std::vector<DitOutput> out(ranks());
  run([&](int r) { out[r] = dits_[r]->forward(args); });
  return std::move(out.front());
}

void ParallelDit::begin_request(const DitLayout& layout, const Tensor& encoder_hidden_states,
                                const std::vector<float>& timesteps, const DitRequestOptions& options) {
  dits_.front()->check_request(layout, encoder_hidden_states, timesteps, options);
  run([&](int r) { dits_[r]->begin_request(layout, encoder_hidden_states, timesteps, options); });
}

DitOutput ParallelDit::step(const Tensor& video_rows, const Tensor& audio_rows,
                            const std::vector<int64_t>& timestep_index_per_row, std::optional<int64_t> pass) {
  dits_.front()->check_step(video_rows, audio_rows, timestep_index_per_row, pass);
  std::vector<DitOutput> out(ranks());
  run([&](int r) { out[r] = dits_[r]->step(video_rows, audio_rows, timestep_index_per_row, pass); });
  return std::move(out.front());
}

void ParallelDit::end_request() {
  run([&](int r) { dits_[r]->end_request(); });
}

}  // namespace h3
