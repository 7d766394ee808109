// Per-op device time of the CUDA backend (H3_CUDA_PROFILE=1): every op records a CUDA event before and after its
// work on the backend's stream; the intervals are summed per op name (nested scopes, such as the q/k preparation
// inside attention, are reported as their own lines). Off by default: then a scope costs one branch.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace h3::cuda {

class OpProfiler {
 public:
  explicit OpProfiler(cudaStream_t stream) : stream_(stream) {}
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // Starts an interval named `name`, nested in the intervals still open (depth 0: a backend op; deeper: a part of
  // one, or an op another op calls); returns its slot.
  int begin(std::string name);
  void end(int slot);

  // A table of every op name: calls, total and mean device milliseconds, share of the ops' total; the span from the
  // first op's start to the last op's end, and the idle time inside it (span − sum of top-level ops). Resets.
  std::string report();

 private:
  struct Pending {
    std::string name;
    int depth = 0;
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  struct Total {
    int64_t calls = 0;
    double ms = 0;
    int depth = 0;
  };
  void resolve();  // waits for the recorded intervals and adds them to the totals
  cudaEvent_t take_event();

  cudaStream_t stream_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  std::map<std::string, Total> totals_;
  cudaEvent_t first_ = nullptr, last_ = nullptr;  // the span's ends (owned, recorded on the first/last op)
  bool have_first_ = false;
  int depth_ = 0;            // intervals open now
  double top_level_ms_ = 0;  // sum of the depth-0 intervals resolved since the last report
};

// RAII scope over one op; a null profiler makes it a no-op (no string is built: the name is a literal, or made by
// `make_name()` only while profiling).
class OpScope {
 public:
  OpScope(OpProfiler* p, const char* name) : p_(p) {
    if (p_) slot_ = p_->begin(name);
  }
  template <typename MakeName>
    requires std::is_invocable_r_v<std::string, MakeName>
  OpScope(OpProfiler* p, MakeName&& make_name) : p_(p) {
    if (p_) slot_ = p_->begin(make_name());
  }
  ~OpScope() {
    if (p_) p_->end(slot_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfiler* p_;
  int slot_ = -1;
};

}  // namespace h3::cuda
