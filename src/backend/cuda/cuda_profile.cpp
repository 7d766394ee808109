#include "backend/cuda/cuda_profile.h"

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_check.h"

namespace h3::cuda {

namespace {
// Intervals kept unresolved before the profiler waits for them (bounds the events alive; a wait perturbs timing
// only when profiling).
constexpr size_t kMaxPending = 4096;
}  // namespace

OpProfiler::~OpProfiler() {
  for (Pending& p : pending_) {
    cudaEventDestroy(p.start);
    cudaEventDestroy(p.stop);
  }
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  if (first_) cudaEventDestroy(first_);
  if (last_) cudaEventDestroy(last_);
}

cudaEvent_t OpProfiler::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  H3_CUDA_CHECK(cudaEventCreate(&e), "op profiler");
  return e;
}

int OpProfiler::begin(std::string name) {
  if (pending_.size() >= kMaxPending && depth_ == 0) resolve();
  Pending p;
  p.name = std::move(name);
  p.depth = depth_;
  p.start = take_event();
  p.stop = take_event();
  H3_CUDA_CHECK(cudaEventRecord(p.start, stream_), "op profiler");
  if (!have_first_) {
    if (!first_) H3_CUDA_CHECK(cudaEventCreate(&first_), "op profiler");
    H3_CUDA_CHECK(cudaEventRecord(first_, stream_), "op profiler");
    have_first_ = true;
  }
  pending_.push_back(std::move(p));
  ++depth_;
  return static_cast<int>(pending_.size()) - 1;
}

void OpProfiler::end(int slot) {
  --depth_;
  H3_CUDA_CHECK(cudaEventRecord(pending_[static_cast<size_t>(slot)].stop, stream_), "op profiler");
  if (!last_) H3_CUDA_CHECK(cudaEventCreate(&last_), "op profiler");
  H3_CUDA_CHECK(cudaEventRecord(last_, stream_), "op profiler");
}

void OpProfiler::resolve() {
  if (pending_.empty()) return;
  H3_CUDA_CHECK(cudaEventSynchronize(pending_.back().stop), "op profiler");
  for (Pending& p : pending_) {
    float ms = 0.f;
    H3_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop), "op profiler");
    Total& t = totals_[p.name];
    ++t.calls;
    t.ms += ms;
    t.depth = p.depth;
    if (p.depth == 0) top_level_ms_ += ms;  // per interval: one name may run both as an op and inside another
    free_events_.push_back(p.start);
    free_events_.push_back(p.stop);
  }
  pending_.clear();
}

std::string OpProfiler::report() {
  H3_CUDA_CHECK(cudaStreamSynchronize(stream_), "op profiler");
  resolve();
  float span = 0.f;
  if (have_first_ && last_) H3_CUDA_CHECK(cudaEventElapsedTime(&span, first_, last_), "op profiler");
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::string s = "  op                                          calls    total ms     mean ms   share\n";
  char line[256];
  for (const auto& [name, t] : rows) {
    std::snprintf(line, sizeof line, "  %-*s%-*s %8lld %11.3f %11.4f %6.1f%%\n", 2 * t.depth, "",
                  44 - 2 * t.depth, name.c_str(), static_cast<long long>(t.calls), t.ms, t.ms / double(t.calls),
                  top_level_ms_ > 0 ? 100.0 * t.ms / top_level_ms_ : 0.0);
    s += line;
  }
  std::snprintf(line, sizeof line, "  ops %.3f ms within a span of %.3f ms (idle between ops %.3f ms)\n",
                top_level_ms_, double(span), double(span) - top_level_ms_);
  s += line;
  totals_.clear();
  top_level_ms_ = 0;
  have_first_ = false;
  return s;
}

}  // namespace h3::cuda
