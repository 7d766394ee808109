// The device-memory budget on the CUDA backend (backend/memory_budget.h, cuda_allocator.h): what the caching
// allocator holds from the driver never passes the budget — a block that would is refused with the sentence naming
// it, after the cache is given back — and memory_stats() reports the budget as the device.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"
#include "backend/memory_budget.h"

using namespace h3;

TEST(MemoryBudgetCuda, TheAllocatorRefusesPastTheBudgetAndReportsItAsTheDevice) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device (or a build without the CUDA backend)";
  std::unique_ptr<Backend> be = make_cuda_backend();
  const uint64_t held = be->memory_stats().cached + be->memory_stats().in_use;  // its GEMM workspace
  const uint64_t budget = held + (uint64_t(64) << 20);
  set_device_memory_limit(*be, budget);
  EXPECT_EQ(device_memory_limit(*be), std::optional<uint64_t>(budget));
  const MemoryStats m = be->memory_stats();
  EXPECT_EQ(m.device_total, budget);
  EXPECT_LE(m.device_free + m.cached + m.in_use, budget);
  {
    // 48 MiB fits; freed, the block stays cached, and a 40 MiB one (another size class) needs it given back.
    Tensor a = be->empty({48 << 20}, DType::U8);
  }
  Tensor b = be->empty({40 << 20}, DType::U8);
  try {
    Tensor c = be->empty({40 << 20}, DType::U8);
    FAIL() << "80 MiB fit a 64 MiB budget";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("past its memory budget"), std::string::npos) << e.what();
  }
  EXPECT_LE(be->memory_stats().in_use + be->memory_stats().cached, budget);
  set_device_memory_limit(*be, std::nullopt);
  Tensor c = be->empty({40 << 20}, DType::U8);  // no budget: the device's capacity again
  EXPECT_FALSE(device_memory_limit(*be));
}
