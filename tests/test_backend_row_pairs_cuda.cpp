// The CUDA backend's row-pair ops (Backend::pool_row_pairs, unpool_row_pairs) against the CPU backend on the same
// stored inputs, f32 and bf16, at a width of whole 16-byte groups (the vector path) and one that is not (the scalar
// path). Both compute one f32 add, an exact halving, an f32 subtraction and add, and round once, so the results must
// agree bit for bit. Skips where the build has no CUDA or the machine has no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "backend/backend.h"
#include "random_tensor.h"

using namespace h3;

namespace {

// A random partition of `rows` rows into pairs and rows alone, as an I32 [R, 2] host table.
Tensor random_pairs(int64_t rows, std::mt19937& g) {
  std::vector<int32_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), g);
  std::vector<int32_t> flat;
  for (size_t i = 0; i < order.size();) {
    const bool pair = i + 1 < order.size() && g() % 3 != 0;
    flat.insert(flat.end(), {order[i], order[pair ? i + 1 : i]});
    i += pair ? 2 : 1;
  }
  Tensor t = Tensor::empty({static_cast<int64_t>(flat.size() / 2), 2}, DType::I32);
  std::copy(flat.begin(), flat.end(), t.ptr<int32_t>());
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

TEST(BackendRowPairsCuda, PoolAndUnpoolMatchTheCpuBitForBit) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device (or a build without the CUDA backend)";
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  std::mt19937 g(17);
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t D : {256, 203}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " D " << D);
      const int64_t L = 77;
      const Tensor full = randn({L, D}, g).to(dt);
      const Tensor pairs = random_pairs(L, g);
      const int64_t R = pairs.dim(0);
      Tensor cpu_reduced = Tensor::empty({R, D}, dt);
      cpu->pool_row_pairs(full, pairs, cpu_reduced);
      const Tensor dev_full = gpu->upload(full, dt), dev_pairs = gpu->upload(pairs, DType::I32);
      Tensor dev_reduced = gpu->empty({R, D}, dt);
      gpu->fill(dev_reduced, NAN);
      gpu->pool_row_pairs(dev_full, dev_pairs, dev_reduced);
      EXPECT_TRUE(same_bits(gpu->download(dev_reduced), cpu_reduced));
      // The restore of an updated reduced stack.
      const Tensor updated = (randn({R, D}, g, 0.1f)).to(dt);
      Tensor cpu_full = full.clone();
      cpu->unpool_row_pairs(updated, pairs, cpu_full);
      Tensor dev_restored = gpu->upload(full, dt);
      gpu->unpool_row_pairs(gpu->upload(updated, dt), dev_pairs, dev_restored);
      EXPECT_TRUE(same_bits(gpu->download(dev_restored), cpu_full));
    }
}

TEST(BackendRowPairsCuda, RefusesARowOutsideTheTensor) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device (or a build without the CUDA backend)";
  auto gpu = make_cuda_backend();
  Tensor pairs = Tensor::empty({2, 2}, DType::I32);
  const int32_t bad[] = {0, 1, 2, 9};
  std::memcpy(pairs.data(), bad, sizeof bad);
  const Tensor full = gpu->zeros({4, 8}, DType::BF16);
  Tensor reduced = gpu->empty({2, 8}, DType::BF16);
  try {
    gpu->pool_row_pairs(full, gpu->upload(pairs, DType::I32), reduced);
    gpu->synchronize();
    FAIL() << "a row outside the tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pool_row_pairs"), std::string::npos) << e.what();
  }
}
