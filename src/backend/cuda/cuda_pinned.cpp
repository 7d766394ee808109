#include "backend/cuda/cuda_pinned.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace h3::cuda {

namespace {
constexpr size_t kPinnedGranule = size_t(1) << 20;  // sizes rounded up to whole MiB
}

PinnedPool::~PinnedPool() {
  for (auto& [size, p] : free_) cudaFreeHost(p);  // at exit errors are ignored on purpose
}

std::shared_ptr<void> PinnedPool::allocate(size_t bytes) {
  const size_t want = (std::max<size_t>(bytes, 1) + kPinnedGranule - 1) / kPinnedGranule * kPinnedGranule;
  void* p = nullptr;
  size_t got = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(want);
    if (it != free_.end() && it->first <= want + want / 4) {
      got = it->first;
      p = it->second;
      free_.erase(it);
    }
  }
  if (!p) {
    H3_CUDA_CHECK(cudaHostAlloc(&p, want, cudaHostAllocDefault), "pinned host allocation");
    got = want;
  }
  std::shared_ptr<PinnedPool> self = shared_from_this();
  return std::shared_ptr<void>(p, [self, got](void* q) { self->give_back(q, got); });
}

size_t PinnedPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& [size, p] : free_) n += size;
  return n;
}

void PinnedPool::give_back(void* p, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace(size, p);
}

}  // namespace h3::cuda
