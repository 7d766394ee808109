// The ranks of one sequence-parallel group (issue 21): per rank a backend, a communicator and a thread of its own
// that runs every call on that rank — one process, one thread per GPU (a CUDA rank's thread has its device
// current, and its backend was made there). parallel/dit_group.h runs a DiT on them.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "parallel/communicator.h"

namespace h3 {

class RankGroup {
 public:
  // `ranks` CPU backends with in-process communicators: the multi-rank tests, anywhere.
  static std::unique_ptr<RankGroup> cpu(int ranks);
  // One CUDA backend per device ordinal (distinct), NCCL communicators over them (ncclCommInitAll). Throws one
  // sentence when the build has no CUDA or no NCCL, when a device is listed twice or does not exist (naming how
  // many the machine has), and before any backend is made.
  static std::unique_ptr<RankGroup> cuda(const std::vector<int>& devices);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int size() const;
  Backend& backend(int rank);
  Communicator& communicator(int rank);
  // "cpu ×2", "cuda devices 0,1": for logs and benchmarks.
  const std::string& description() const;

  // Runs fn(rank) on every rank's thread at once and returns when all have returned. When one throws, the group's
  // communicators are aborted (so that no rank waits in a collective for it) and the first error is rethrown here;
  // the group is unusable afterwards (a later run throws).
  void run(const std::function<void(int rank)>& fn);

  struct Impl;

 private:
  explicit RankGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// How many CUDA devices the machine has (0 without CUDA in the build or on the machine).
int cuda_device_count();
// One line for --info: the GPUs --gpus / --devices can use (ordinal, name, memory, or why not) and whether the build
// has NCCL.
std::string gpu_group_summary();

}  // namespace h3
