#include "parallel/rank_group.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "parallel/nccl_communicator.h"
#include "util/error.h"

#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/device.h"
#endif

namespace h3 {

struct RankGroup::Impl {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Communicator>> comms;
  // What every rank's thread does first: makes its device current (CUDA), nothing on the CPU.
  std::function<void(int rank)> bind;
  std::string description;

  // One thread per rank for this call (a thread is cheap beside a transformer step, and a fresh one carries no
  // state between calls but its device, which bind sets).
  void run(const std::function<void(int rank)>& fn) {
    const int n = static_cast<int>(backends.size());
    std::mutex m;
    std::exception_ptr first;
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        try {
          if (bind) bind(r);
          fn(r);
        } catch (...) {
          {
            std::lock_guard<std::mutex> l(m);
            if (!first) first = std::current_exception();
          }
          for (auto& c : comms)
            if (c) c->abort();
        }
      });
    for (std::thread& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }
};

RankGroup::RankGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RankGroup::~RankGroup() {
  impl_->comms.clear();
  // Each backend is released on its rank's thread, with its device current.
  try {
    impl_->run([&](int r) { impl_->backends[r].reset(); });
  } catch (...) {  // a destructor does not throw; the memory is the driver's to reclaim at exit
  }
}

int RankGroup::size() const { return static_cast<int>(impl_->backends.size()); }
Backend& RankGroup::backend(int rank) { return *impl_->backends.at(rank); }
Communicator& RankGroup::communicator(int rank) { return *impl_->comms.at(rank); }
const std::string& RankGroup::description() const { return impl_->description; }
void RankGroup::run(const std::function<void(int rank)>& fn) { impl_->run(fn); }

std::unique_ptr<RankGroup> RankGroup::cpu(int ranks) {
  auto impl = std::make_unique<Impl>();
  impl->comms = in_process_communicators(ranks);
  for (int r = 0; r < ranks; ++r) impl->backends.push_back(make_cpu_backend());
  impl->description = cat("cpu x", ranks, " (in-process exchange)");
  return std::unique_ptr<RankGroup>(new RankGroup(std::move(impl)));
}

std::unique_ptr<RankGroup> RankGroup::cuda(const std::vector<int>& devices) {
  H3_CHECK(!devices.empty(), "a GPU group needs at least one device");
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      H3_CHECK(devices[i] != devices[j], "--devices lists GPU ", devices[i],
               " twice: each rank needs a GPU of its own (NCCL does not run two ranks on one GPU)");
  const int available = cuda_device_count();
  for (int d : devices)
    H3_CHECK(d >= 0 && d < available, "GPU ", d, " was asked for but this machine has ", available,
             available == 1 ? " CUDA device (0)" : " CUDA devices",
             available > 1 ? cat(" (0..", available - 1, ")") : "");
  H3_CHECK(nccl_available(), "running the transformer on several GPUs needs NCCL, which this build of h3 lacks "
                             "or this machine does not have (NCCL's nccl.h at build time, libnccl.so.2 at run time)");
#ifdef H3_HAVE_NCCL
  auto impl = std::make_unique<Impl>();
  impl->backends.resize(devices.size());
  impl->bind = [devices](int r) { cuda_bind_device(devices[r]); };
  impl->run([&](int r) { impl->backends[r] = make_cuda_backend_on(devices[r]); });
  std::vector<Backend*> backends;
  for (auto& b : impl->backends) backends.push_back(b.get());
  impl->comms = nccl_communicators(devices, backends);
  std::string list;
  for (int d : devices) list += cat(list.empty() ? "" : ",", d);
  impl->description = cat("cuda devices ", list, " (NCCL)");
  return std::unique_ptr<RankGroup>(new RankGroup(std::move(impl)));
#else
  fail("unreachable: nccl_available() without H3_HAVE_NCCL");
#endif
}

#ifndef H3_HAVE_CUDA
int cuda_device_count() { return 0; }
#endif

std::string gpu_group_summary() {
  const int n = cuda_device_count();
  std::string s = cat("GPUs for --gpus / --devices (NCCL ", nccl_available() ? "found" : "not found",
                      "): ");
  if (n == 0) return s + "none";
  for (int i = 0; i < n; ++i) {
#ifdef H3_HAVE_CUDA
    ComputeDevice d;
    const bool usable = cuda_detect_device(d, i);
    s += cat(i ? "; " : "", i, ": ", usable ? cat(d.name, ", ", d.memory_bytes / (1024 * 1024), " MiB") : d.note);
#endif
  }
  return s;
}
#ifndef H3_HAVE_NCCL
bool nccl_available() { return false; }
#endif

}  // namespace h3
