// The device-memory budget (issue 17: --memory-budget GB, H3_DEVICE_MEMORY_LIMIT): under a limit no backend
// allocation goes past it — the allocation that would is refused with one sentence naming the budget — so a run
// capped at 24 GB on a larger GPU proves its residency plan on a 24 GB card. The CUDA allocator counts what it holds
// from the driver; the CPU backend counts its "device" tensors (those it makes through empty() and upload()) so the
// tiny-model tests can force every residency plan with small budgets.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace h3 {

// Bytes in a budget of `gb` decimal gigabytes (the GB of format_gb and of --memory-budget: 10^9 bytes).
uint64_t gigabytes_to_bytes(double gb);

constexpr double kMemoryBudgetMinGb = 1e-6;  // 1 kB: the tiny-model tests force every plan
constexpr double kMemoryBudgetMaxGb = 100000;
// The budget in bytes the variable `name` sets, in decimal GB as --memory-budget takes it (unset or empty: none);
// throws h3::Error naming the variable, `what` it budgets and the range kMemoryBudgetMinGb..kMemoryBudgetMaxGb for
// anything else.
std::optional<uint64_t> env_memory_limit(const char* name, const char* what);
// H3_DEVICE_MEMORY_LIMIT's.
std::optional<uint64_t> env_device_memory_limit();

// Throws h3::Error: allocating `asked` bytes with `held` already held would pass the budget of `limit` bytes.
[[noreturn]] void fail_over_budget(uint64_t asked, uint64_t held, uint64_t limit);

class Backend;
// The budget of backend `be` (the CPU and CUDA backends keep one; set it before anything is made on `be`): from now
// on no allocation takes its device memory past `bytes` (std::nullopt: no budget, the device's own capacity), and
// be.memory_stats() reports at most the budget as the device's. Throws for a backend that cannot keep a budget.
// make_backend applies H3_DEVICE_MEMORY_LIMIT.
void set_device_memory_limit(Backend& be, std::optional<uint64_t> bytes);
std::optional<uint64_t> device_memory_limit(const Backend& be);

// A thread-safe count of the bytes held against a limit, with its high-water mark.
class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit) : limit_(limit) {}
  uint64_t limit() const { return limit_; }
  // Counts `bytes` in, or throws (fail_over_budget) without counting them when that would pass the limit.
  void charge(uint64_t bytes);
  void refund(uint64_t bytes);
  uint64_t in_use() const;
  uint64_t peak() const;
  void reset_peak();

 private:
  const uint64_t limit_;
  mutable std::mutex mutex_;
  uint64_t in_use_ = 0, peak_ = 0;
};

}  // namespace h3
