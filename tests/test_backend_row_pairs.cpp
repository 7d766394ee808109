// The row-pair ops of token reduction (Backend::pool_row_pairs, unpool_row_pairs) on the CPU backend, by their
// definition: hand-computed rows, rows alone copied bit for bit, the restore's update formula, the identity of a
// restore that received the pooled rows unchanged (in f32 and in bf16 storage), and every rule refused.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/backend.h"
#include "random_tensor.h"

using namespace h3;

namespace {

Tensor pairs_of(const std::vector<std::pair<int32_t, int32_t>>& p) {
  Tensor t = Tensor::empty({static_cast<int64_t>(p.size()), 2}, DType::I32);
  for (size_t i = 0; i < p.size(); ++i) {
    t.ptr<int32_t>()[2 * i] = p[i].first;
    t.ptr<int32_t>()[2 * i + 1] = p[i].second;
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

float at(const Tensor& t, int64_t r, int64_t c) { return static_cast<float>(t.at(r * t.dim(1) + c)); }

}  // namespace

TEST(BackendRowPairs, PoolAveragesPairsAndCopiesRowsAlone) {
  auto be = make_cpu_backend();
  const Tensor full = Tensor::from_f32({5, 2}, {1, 2, 0.1f, 0.2f, 3, 6, 7, -1, 5, 1});
  const Tensor pairs = pairs_of({{0, 2}, {1, 1}, {3, 4}});
  Tensor reduced = be->empty({3, 2}, DType::F32);
  be->pool_row_pairs(full, pairs, reduced);
  EXPECT_EQ(at(reduced, 0, 0), 2.f);
  EXPECT_EQ(at(reduced, 0, 1), 4.f);
  EXPECT_EQ(std::memcmp(reduced.ptr<float>() + 2, full.ptr<float>() + 2, 2 * sizeof(float)), 0);  // alone: its bits
  EXPECT_EQ(at(reduced, 2, 0), 6.f);
  EXPECT_EQ(at(reduced, 2, 1), 0.f);
}

TEST(BackendRowPairs, UnpoolAddsEachPooledRowsUpdateToItsMembers) {
  auto be = make_cpu_backend();
  Tensor full = Tensor::from_f32({5, 2}, {1, 2, 0.1f, 0.2f, 3, 6, 7, -1, 5, 1});
  const Tensor pairs = pairs_of({{0, 2}, {1, 1}, {3, 4}});
  // The reduced stack moved pair 0 by (+0.5, −1), replaced the row alone, and left pair 2 where it was.
  const Tensor reduced = Tensor::from_f32({3, 2}, {2.5f, 3, 9, -9, 6, 0});
  be->unpool_row_pairs(reduced, pairs, full);
  const std::vector<float> want = {1.5f, 1, 9, -9, 3.5f, 5, 7, -1, 5, 1};
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(full.ptr<float>()[i], want[i]) << i;
}

// unpool(pool(x)) with the pooled rows untouched gives x back bit for bit: the update reduced − p is exactly 0
// because p is recomputed as pool stored it — in f32, and in bf16 storage (p rounded to bf16 as stored).
TEST(BackendRowPairs, RestoringThePooledRowsUnchangedIsTheIdentity) {
  auto be = make_cpu_backend();
  std::mt19937 g(3);
  const Tensor x = randn({9, 13}, g);
  const Tensor pairs = pairs_of({{4, 0}, {1, 1}, {2, 8}, {3, 7}, {5, 5}, {6, 6}});
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor stored = x.to(dt);
    Tensor full = stored.clone();
    Tensor reduced = Tensor::empty({6, 13}, dt);
    be->pool_row_pairs(full, pairs, reduced);
    be->unpool_row_pairs(reduced, pairs, full);
    EXPECT_TRUE(same_bits(full, stored)) << dtype_name(dt);
    // A pooled row is the stored mean of its members, rounded once.
    const float mean = (static_cast<float>(stored.at(2 * 13)) + static_cast<float>(stored.at(8 * 13))) * 0.5f;
    EXPECT_EQ(static_cast<float>(reduced.at(2 * 13)), dt == DType::BF16 ? round_bf16(mean) : mean);
  }
}

TEST(BackendRowPairs, RefusesPairsThatDoNotPartitionTheRows) {
  auto be = make_cpu_backend();
  const Tensor full = Tensor::zeros({4, 2}, DType::F32);
  auto message = [&](const Tensor& pairs, const Tensor& reduced) {
    try {
      Tensor r = reduced;
      be->pool_row_pairs(full, pairs, r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const Tensor three = Tensor::zeros({3, 2}, DType::F32);
  EXPECT_NE(message(pairs_of({{0, 1}, {1, 2}, {3, 3}}), three).find("names a row another pair already holds"),
            std::string::npos);
  EXPECT_NE(message(pairs_of({{0, 1}, {2, 2}}), Tensor::zeros({2, 2}, DType::F32)).find("some rows are in no pair"),
            std::string::npos);
  EXPECT_NE(message(pairs_of({{0, 1}, {2, 4}, {3, 3}}), three).find("names a row outside [0, 4)"), std::string::npos);
  EXPECT_NE(message(pairs_of({{0, 1}, {2, 3}}), three).find("must be [2, 2] of full's dtype F32"), std::string::npos);
  EXPECT_NE(message(pairs_of({{0, 1}, {2, 3}}), Tensor::zeros({2, 2}, DType::BF16)).find("of full's dtype"),
            std::string::npos);
}
