// Page-locked host memory for the CUDA backend's asynchronous downloads: blocks are kept for reuse (cudaHostAlloc
// costs ~0.1 s per GB), handed out as shared_ptrs whose deleter returns them to the pool.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace h3::cuda {

class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  PinnedPool() = default;
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // At least `bytes` of pinned host memory (a cached block no more than 1/4 larger, else a new one).
  std::shared_ptr<void> allocate(size_t bytes);
  // The bytes of the blocks kept for reuse, not handed out.
  size_t cached_bytes() const;

 private:
  void give_back(void* p, size_t size);

  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;
};

}  // namespace h3::cuda
