// The rules of the DiT's Ulysses sequence parallelism (issue 21), shared by the DiT (models/dit/dit.h's
// Dit::set_communicator), the group that drives its ranks (parallel/dit_group.h) and the CLI's --gpus / --devices.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h3 {

// The most ranks a group may have (--gpus' range; a host holds at most 16 GPUs on one NVLink domain today).
constexpr int kMaxSequenceParallelRanks = 16;

// Every rank's number of packed rows when `ranks` ranks split `rows` rows: contiguous shards in rank order, sizes
// differing by at most one (the first rows mod ranks shards one longer). No row is padding: the attention needs no
// mask.
std::vector<int64_t> shard_rows(int64_t rows, int ranks);

// The sentence that refuses `degree` ranks for a transformer of `heads` attention heads (each rank attends with
// heads / degree of them, so the degree must divide the heads and lie in 1..kMaxSequenceParallelRanks); absent when
// they fit. `what` names the option in the sentence ("--gpus 3").
std::optional<std::string> sequence_parallel_problem(const std::string& what, int64_t heads, int64_t degree);

// How the options name a device list: "--gpus N" for 0..N-1, else "--devices A,B,...".
std::string gpu_option_text(const std::vector<int>& devices);

// The rules of a GPU group for the transformer (--gpus N: devices 0..N-1; --devices LIST), in the order they are
// told, as one sentence (absent: none broken): the degree (sequence_parallel_problem), the CPU backend (one rank:
// the CPU groups are the tests'), the devices the machine has (`available` CUDA devices), NCCL in the build.
// `what` names the option as given ("--gpus 4", "--devices 0,2"). One device is no group: never a problem.
std::optional<std::string> gpu_group_problem(const std::string& what, const std::vector<int>& devices,
                                             int64_t heads, bool cpu_backend, int available, bool nccl);

}  // namespace h3
