#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "util/env.h"

namespace h3 {

namespace {

thread_local bool t_in_worker = false;
constexpr int kMaxThreads = 1024;

// One parallel_for region: its job and chunk count (fixed before the region is published), the chunk counter the
// threads take indices from, and what the pool's mutex guards: the workers inside and the first error. It lives on
// the calling thread's stack; run() returns only when no worker is left inside it. That is also when every chunk is
// done: the caller's own work() returns only once every index is taken, and a worker takes an index only after
// joining, and leaves only after finishing what it took.
struct Region {
  const std::function<void(int64_t)>* job = nullptr;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  int users = 0;
  std::exception_ptr error;
};

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 0; i < n - 1; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)>& job) {
    std::lock_guard<std::mutex> serial(run_mutex_);  // one parallel region at a time
    Region r;
    r.job = &job;
    r.chunks = chunks;
    {
      std::lock_guard<std::mutex> l(m_);
      region_ = &r;
      ++generation_;
    }
    cv_.notify_all();
    work(r);
    std::unique_lock<std::mutex> l(m_);
    region_ = nullptr;  // every chunk is taken: a worker that has not joined yet stays out
    done_cv_.wait(l, [&] { return r.users == 0; });
    // The first error of any chunk is raised here, on the calling thread, once no thread is left inside.
    if (r.error) {
      l.unlock();
      std::rethrow_exception(r.error);
    }
  }

 private:
  void work(Region& r) {
    t_in_worker = true;
    for (;;) {
      const int64_t i = r.next.fetch_add(1);
      if (i >= r.chunks) break;
      try {
        (*r.job)(i);
      } catch (...) {
        std::lock_guard<std::mutex> l(m_);
        if (!r.error) r.error = std::current_exception();
      }
    }
    t_in_worker = false;
  }
  // A worker joins each region it sees published (at most once), works on it, and leaves it under the mutex, so the
  // region's owner knows when the last one is out.
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      Region* r = nullptr;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || (generation_ != seen && region_ != nullptr); });
        if (stop_) return;
        seen = generation_;
        r = region_;
        ++r->users;
      }
      work(*r);
      std::lock_guard<std::mutex> l(m_);
      if (--r->users == 0) done_cv_.notify_all();
    }
  }
  std::vector<std::thread> workers_;
  std::mutex m_, run_mutex_;
  std::condition_variable cv_, done_cv_;
  Region* region_ = nullptr;  // the region being published, null between regions
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// H3_THREADS, or one thread per core (a bad value is refused with a sentence at the first parallel region).
int configured_threads() {
  const int n = env_int("H3_THREADS", 0, 1, kMaxThreads);
  return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Pool& pool() {
  static Pool p(configured_threads());
  return p;
}

}  // namespace

int thread_count() { return pool().size(); }

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = thread_count();
  if (t_in_worker || threads == 1 || n <= grain) {
    fn(begin, end);
    return;
  }
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, int64_t{threads} * 4);
  int64_t size = (n + chunks - 1) / chunks;
  chunks = (n + size - 1) / size;
  pool().run(chunks, [&](int64_t c) {
    int64_t b = begin + c * size;
    fn(b, std::min(end, b + size));
  });
}

}  // namespace h3
