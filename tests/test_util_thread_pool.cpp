// parallel_for's pool when a chunk throws: the exception reaches the caller, and the pool stays usable (no thread
// left inside a finished region, no stale count carried into the next region).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <vector>

#include "util/thread_pool.h"

using namespace h3;

TEST(UtilThreadPool, ExceptionInAChunkReachesTheCallerAndThePoolRecovers) {
  for (int round = 0; round < 200; ++round) {
    // Every chunk throws: whichever thread runs one, the caller gets the error once all chunks are done.
    EXPECT_THROW(parallel_for(0, 64, 1, [](int64_t, int64_t) { throw std::runtime_error("chunk failed"); }),
                 std::runtime_error);
    // One chunk throws: the others still run.
    std::atomic<int64_t> ran{0};
    EXPECT_THROW(parallel_for(0, 64, 1,
                              [&](int64_t b, int64_t e) {
                                ran += e - b;
                                if (b == 0) throw std::runtime_error("first chunk failed");
                              }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 64);
    // The next region covers every index exactly once.
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(0, 1000, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round << " index " << i;
  }
}

// Many short regions back to back, alternating chunk counts, each index exactly once. A worker that woke for one
// region but ran late used to take a chunk index from the previous region's counter against the next region's
// chunk count: a chunk ran twice, the region's done count overshot and its caller waited forever (seen on the CI
// machine as a hung or crashed DiT test). A hang here fails the test after a minute instead of blocking the run.
TEST(UtilThreadPool, BackToBackRegionsRunEveryChunkOnce) {
  auto regions = std::async(std::launch::async, [] {
    std::vector<std::atomic<int>> hits(64);
    for (int round = 0; round < 200000; ++round) {
      const int64_t n = round % 3 == 0 ? 64 : round % 3 == 1 ? 2 : 9;
      for (int64_t i = 0; i < n; ++i) hits[i] = 0;
      parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[i];
      });
      for (int64_t i = 0; i < n; ++i)
        if (hits[i].load() != 1) return round;
    }
    return -1;
  });
  if (regions.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "BackToBackRegionsRunEveryChunkOnce: a parallel region never finished (pool deadlock)\n");
    std::_Exit(1);
  }
  EXPECT_EQ(regions.get(), -1) << "a region ran some chunk more or less than once";
}
