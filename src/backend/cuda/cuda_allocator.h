// A caching device allocator: freed blocks go to free lists keyed by their (rounded) size and are handed out again,
// so a model's repeated forwards do no cudaMalloc/cudaFree. All work runs on the backend's one stream, so a block
// returned by a Tensor whose last kernel is still queued can be reused by the next kernel on that stream safely.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace h3::cuda {

struct AllocatorStats {
  size_t reserved_bytes = 0;   // held from the driver (in use + cached)
  size_t in_use_bytes = 0;     // handed out and not yet returned
  size_t peak_in_use_bytes = 0;
  uint64_t device_allocations = 0;  // cudaMalloc calls so far
};

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  CachingAllocator() = default;
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (256-byte aligned). The shared_ptr's deleter returns it to the cache.
  std::shared_ptr<void> allocate(size_t bytes);
  // Gives every cached (free) block back to the driver.
  void release_cached();
  AllocatorStats stats() const;
  void reset_peak();
  // The device-memory budget (backend/memory_budget.h): what the allocator holds from the driver (in use + cached)
  // never passes `bytes`; a block that would take it past is refused, after the cache is given back, with one
  // sentence naming the budget. std::nullopt: the device's capacity is the only limit.
  void set_limit(std::optional<size_t> bytes);
  std::optional<size_t> limit() const;

  // The size a request is rounded to: quarter steps between powers of two below 1 MiB, whole 2 MiB pages above
  // (so large weight tensors waste at most 2 MiB each).
  static size_t rounded_size(size_t bytes);

 private:
  void give_back(void* p, size_t size);
  void release_cached_locked();

  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // size -> block
  AllocatorStats stats_;
  std::optional<size_t> limit_;
};

}  // namespace h3::cuda
