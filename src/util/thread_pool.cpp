#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace h3 {

namespace {

thread_local bool t_in_worker = false;

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
    {
      std::lock_guard<std::mutex> l(m_);
      job_ = &job;
      chunks_ = chunks;
      next_.store(0);
      done_ = 0;
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> l(m_);
    done_cv_.wait(l, [&] { return done_ == chunks_; });
    job_ = nullptr;
    // A chunk that threw still counted as done (so no thread is left inside this region); the first error is
    // raised here, on the calling thread.
    if (std::exception_ptr e = std::exchange(error_, nullptr)) {
      l.unlock();
      std::rethrow_exception(e);
    }
  }

 private:
  void work() {
    t_in_worker = true;
    int64_t finished = 0;
    for (;;) {
      int64_t i = next_.fetch_add(1);
      if (i >= chunks_) break;
      try {
        (*job_)(i);
      } catch (...) {
        std::lock_guard<std::mutex> l(m_);
        if (!error_) error_ = std::current_exception();
      }
      ++finished;
    }
    t_in_worker = false;
    if (finished) {
      std::lock_guard<std::mutex> l(m_);
      done_ += finished;
      if (done_ == chunks_) done_cv_.notify_all();
    }
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
        if (stop_) return;
        seen = generation_;
      }
      work();
    }
  }
  std::vector<std::thread> workers_;
  std::mutex m_, run_mutex_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t chunks_ = 0, done_ = 0;
  std::atomic<int64_t> next_{0};
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // the first exception a chunk of the current region threw
};

int configured_threads() {
  if (const char* e = std::getenv("H3_THREADS")) {
    int n = std::atoi(e);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
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
