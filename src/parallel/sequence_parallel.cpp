#include "parallel/sequence_parallel.h"

#include <algorithm>

#include "util/error.h"

namespace h3 {

std::vector<int64_t> shard_rows(int64_t rows, int ranks) {
  H3_CHECK(ranks >= 1 && rows >= 0, "shard_rows: ", rows, " rows over ", ranks, " ranks");
  std::vector<int64_t> out(ranks, rows / ranks);
  for (int64_t r = 0; r < rows % ranks; ++r) ++out[r];
  return out;
}

std::optional<std::string> sequence_parallel_problem(const std::string& what, int64_t heads, int64_t degree) {
  if (degree >= 1 && degree <= kMaxSequenceParallelRanks && heads % degree == 0) return std::nullopt;
  std::string fitting;
  for (int64_t d = 1; d <= std::min<int64_t>(heads, kMaxSequenceParallelRanks); ++d)
    if (heads % d == 0) fitting += cat(fitting.empty() ? "" : ", ", d);
  return cat(what, ": the transformer's ", heads, " attention heads are split evenly across the GPUs, so the number "
             "of GPUs must divide them and be at most ", kMaxSequenceParallelRanks, ": one of ", fitting);
}

std::string gpu_option_text(const std::vector<int>& devices) {
  bool leading = true;
  std::string list;
  for (size_t i = 0; i < devices.size(); ++i) {
    leading = leading && devices[i] == static_cast<int>(i);
    list += cat(i ? "," : "", devices[i]);
  }
  return leading ? cat("--gpus ", devices.size()) : cat("--devices ", list);
}

std::optional<std::string> gpu_group_problem(const std::string& what, const std::vector<int>& devices,
                                             int64_t heads, bool cpu_backend, int available, bool nccl) {
  const int64_t n = static_cast<int64_t>(devices.size());
  if (n <= 1) return std::nullopt;
  if (auto problem = sequence_parallel_problem(what, heads, n)) return problem;
  if (cpu_backend)
    return cat(what, ": the transformer runs on several GPUs with the CUDA backend only (the CPU backend computes "
               "on one rank): use --device cuda or auto on a machine with ", n, " GPUs");
  for (int d : devices)
    if (d < 0 || d >= available)
      return cat(what, " asks for GPU ", d, " but this machine has ", available,
                 available == 1 ? " CUDA device (0)" : " CUDA devices",
                 available > 1 ? cat(" (0..", available - 1, ")") : "");
  if (!nccl)
    return cat(what, ": running the transformer on several GPUs needs NCCL, which this build of h3 lacks or this "
               "machine does not have (NCCL's nccl.h at build time, libnccl.so.2 at run time)");
  return std::nullopt;
}

}  // namespace h3
