#include "util/cancel.h"

namespace h3 {

namespace {
// Per thread: two engines on two threads (a server) cancel independently.
thread_local const std::atomic<bool>* t_cancel = nullptr;
}  // namespace

CancelScope::CancelScope(const std::atomic<bool>* flag) : previous_(t_cancel) { t_cancel = flag; }
CancelScope::~CancelScope() { t_cancel = previous_; }

bool cancel_requested() { return t_cancel && t_cancel->load(std::memory_order_relaxed); }

void throw_if_cancelled() {
  if (cancel_requested()) throw Cancelled();
}

}  // namespace h3
