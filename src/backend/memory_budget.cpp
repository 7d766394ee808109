#include "backend/memory_budget.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.h"

namespace h3 {

namespace {

std::string gb_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

uint64_t gigabytes_to_bytes(double gb) { return static_cast<uint64_t>(std::llround(gb * 1e9)); }

std::optional<uint64_t> env_memory_limit(const char* name, const char* what) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double gb = std::strtod(v, &end);
  // Plain decimal only, as every option takes numbers (no blanks, signs, hex or inf).
  const bool plain = (*v >= '0' && *v <= '9') && end != v && *end == '\0' && errno == 0;
  H3_CHECK(plain && gb >= kMemoryBudgetMinGb && gb <= kMemoryBudgetMaxGb, name, " must be a ", what,
           " budget in GB from ", kMemoryBudgetMinGb, " to ", kMemoryBudgetMaxGb, " (decimal, e.g. 24 or 0.5), got '",
           v, "'");
  return gigabytes_to_bytes(gb);
}

std::optional<uint64_t> env_device_memory_limit() {
  return env_memory_limit("H3_DEVICE_MEMORY_LIMIT", "device memory");
}

void fail_over_budget(uint64_t asked, uint64_t held, uint64_t limit) {
  fail("allocating ", gb_text(asked), " of device memory would take h3 past its memory budget of ", gb_text(limit),
       " (--memory-budget / H3_DEVICE_MEMORY_LIMIT; ", gb_text(held), " held): raise the budget, or use a smaller "
       "canvas or fewer frames");
}

void MemoryBudget::charge(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > limit_ - std::min(in_use_, limit_)) fail_over_budget(bytes, in_use_, limit_);
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
}

void MemoryBudget::refund(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_use_ -= std::min(bytes, in_use_);
}

uint64_t MemoryBudget::in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

uint64_t MemoryBudget::peak() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

void MemoryBudget::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = in_use_;
}

}  // namespace h3
