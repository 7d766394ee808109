// Collectives between the ranks of one sequence-parallel group (issue 21: Ulysses sequence parallelism of the DiT,
// models/dit/dit.h's Dit::set_communicator). A rank is one backend (one GPU, or one CPU backend in the tests) driven
// by one thread; every rank of a group calls the same collectives in the same order, each from its own thread.
//
// Two implementations: the in-process one (in_process_communicators: CPU backends, shared-memory exchange, so that
// the multi-rank tests run anywhere) and NCCL's (parallel/nccl_communicator.h, CUDA builds with NCCL only).
//
// Buffers are tensors of the rank's own backend, contiguous, of one dtype across the group. Counts are elements.
// A chunk list is in rank order: chunk j of a buffer starts after chunks 0..j-1.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace h3 {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // All-to-all with per-peer counts (MPI's alltoallv, chunks contiguous): chunk j of `send` (send_counts[j]
  // elements) goes to rank j, which receives it as its chunk rank() of `recv`; chunk j of `recv` (recv_counts[j]
  // elements) comes from rank j. recv_counts[j] must equal rank j's send_counts[rank()].
  virtual void all_to_all(const Tensor& send, const std::vector<int64_t>& send_counts, Tensor& recv,
                          const std::vector<int64_t>& recv_counts) = 0;
  // out = every rank's `part` concatenated in rank order (rank j's part holds counts[j] elements; every rank passes
  // the same counts).
  virtual void all_gather(const Tensor& part, const std::vector<int64_t>& counts, Tensor& out) = 0;
  // Returns when every rank has entered it (and, on a device, when the work each rank enqueued before has been
  // issued in order with the others': NCCL's collectives are stream-ordered).
  virtual void barrier() = 0;
  // Called from any thread when one rank failed: every rank blocked in a collective of this group, and every later
  // collective, throws h3::Error instead of waiting for the failed rank forever.
  virtual void abort() = 0;
};

// `ranks` communicators of one in-process group (rank r is element r), for CPU backends: the collectives exchange
// host memory between the ranks' threads (tensors on Device::CPU only).
std::vector<std::unique_ptr<Communicator>> in_process_communicators(int ranks);

// Helpers every implementation shares: the element offsets of a chunk list, and the checks of its arguments
// (throw h3::Error naming the collective and the rule).
std::vector<int64_t> chunk_offsets(const std::vector<int64_t>& counts);
void check_all_to_all(const Communicator& c, const Tensor& send, const std::vector<int64_t>& send_counts,
                      const Tensor& recv, const std::vector<int64_t>& recv_counts);
void check_all_gather(const Communicator& c, const Tensor& part, const std::vector<int64_t>& counts, const Tensor& out);

}  // namespace h3
