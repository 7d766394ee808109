#include "backend/cuda/cuda_allocator.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/memory_budget.h"

namespace h3::cuda {

namespace {
constexpr size_t kSmallLimit = size_t(1) << 20;  // 1 MiB
constexpr size_t kLargePage = size_t(2) << 20;   // 2 MiB
constexpr size_t kMinBlock = 512;
}  // namespace

size_t CachingAllocator::rounded_size(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  if (bytes >= kSmallLimit) return (bytes + kLargePage - 1) / kLargePage * kLargePage;
  size_t pow2 = kMinBlock;
  while (pow2 * 2 < bytes) pow2 *= 2;  // pow2 < bytes <= 2·pow2
  const size_t step = pow2 / 4;
  return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
  // Blocks still handed out keep a shared_ptr to this allocator, so everything here is free; errors at process
  // exit (driver already shut down) are ignored on purpose.
  for (auto& [size, p] : free_) cudaFree(p);
}

std::shared_ptr<void> CachingAllocator::allocate(size_t bytes) {
  const size_t want = rounded_size(bytes);
  void* p = nullptr;
  size_t got = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Reuse a cached block no more than 1/8 larger than asked (large blocks: plus one page).
    auto it = free_.lower_bound(want);
    const size_t slack = want / 8 + (want >= kSmallLimit ? kLargePage : 0);
    if (it != free_.end() && it->first <= want + slack) {
      got = it->first;
      p = it->second;
      free_.erase(it);
    } else {
      if (limit_ && stats_.reserved_bytes + want > *limit_) {
        release_cached_locked();
        if (stats_.reserved_bytes + want > *limit_) fail_over_budget(bytes, stats_.reserved_bytes, *limit_);
      }
      cudaError_t e = cudaMalloc(&p, want);
      if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // clear, then retry once with the cache given back
        release_cached_locked();
        e = cudaMalloc(&p, want);
      }
      if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fail("out of GPU memory allocating ", bytes, " bytes (", cudaGetErrorString(e), "); ",
             stats_.in_use_bytes >> 20, " MiB in use by h3, ", free_b >> 20, " MiB of ", total_b >> 20,
             " MiB free on the device");
      }
      got = want;
      stats_.reserved_bytes += got;
      ++stats_.device_allocations;
    }
    stats_.in_use_bytes += got;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  }
  std::shared_ptr<CachingAllocator> self = shared_from_this();
  return std::shared_ptr<void>(p, [self, got](void* q) { self->give_back(q, got); });
}

void CachingAllocator::give_back(void* p, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use_bytes -= size;
  free_.emplace(size, p);
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  if (free_.empty()) return;
  // Blocks in the cache may still be read by queued kernels of the stream that freed them.
  H3_CUDA_CHECK(cudaDeviceSynchronize(), "allocator release");
  for (auto& [size, p] : free_) {
    H3_CUDA_CHECK(cudaFree(p), "allocator release");
    stats_.reserved_bytes -= size;
  }
  free_.clear();
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
}

void CachingAllocator::set_limit(std::optional<size_t> bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = bytes;
  if (limit_ && stats_.reserved_bytes > *limit_) release_cached_locked();
}

std::optional<size_t> CachingAllocator::limit() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return limit_;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace h3::cuda
