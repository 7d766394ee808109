// NCCL communicators for a group of CUDA backends, one per GPU of one process (parallel/rank_group.h's
// RankGroup::cuda): built only when CMake found NCCL's header beside CUDA (H3_HAVE_NCCL), the library opened at run
// time. nccl_available(): whether it opened; when not, a GPU group is refused with a sentence.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "parallel/communicator.h"

namespace h3 {

bool nccl_available();

#ifdef H3_HAVE_NCCL
// One communicator per rank (ncclCommInitAll over `devices`, distinct ordinals): rank r's collectives are enqueued
// on backends[r]'s stream (a CUDA backend on devices[r]), so they are ordered with its other ops and the host does
// not wait for them. Call each rank's collectives from its thread (device current).
std::vector<std::unique_ptr<Communicator>> nccl_communicators(const std::vector<int>& devices,
                                                              const std::vector<Backend*>& backends);
#endif

}  // namespace h3
