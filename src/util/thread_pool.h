// parallel_for over an index range on a process-wide pool (H3_THREADS overrides the thread count).
#pragma once
#include <cstdint>
#include <functional>

namespace h3 {

int thread_count();
// Calls fn(begin_i, end_i) on disjoint chunks covering [begin, end); returns when all are done.
// `grain` is the smallest chunk worth a task. Nested calls run inline.
void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace h3
