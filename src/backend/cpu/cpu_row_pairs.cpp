#include "backend/cpu/cpu_row_pairs.h"

#include <algorithm>
#include <vector>

#include "backend/backend.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace h3::cpu {

namespace {

// v as a tensor of dtype `dt` stores it.
float stored(DType dt, float v) {
  switch (dt) {
    case DType::BF16: return round_bf16(v);
    case DType::F16: return round_f16(v);
    default: return v;
  }
}

// The pairs as host int32 values, checked to be a partition of full's rows (the definition's precondition).
const int32_t* partition(const char* op, const Tensor& full, const Tensor& pairs) {
  H3_CHECK(full.device() == Device::CPU && pairs.device() == Device::CPU, "cpu backend: ", op,
           " got a tensor that is not on the CPU");
  const int32_t* P = pairs.ptr<int32_t>();
  const int64_t L = full.dim(0);
  std::vector<char> seen(static_cast<size_t>(L), 0);
  for (int64_t i = 0; i < pairs.dim(0); ++i) {
    const int32_t a = P[2 * i], b = P[2 * i + 1];
    H3_CHECK(a >= 0 && a < L && b >= 0 && b < L, op, ": pair ", i, " = (", a, ", ", b, ") names a row outside [0, ",
             L, ")");
    H3_CHECK(!seen[a] && (a == b || !seen[b]), op, ": pair ", i, " = (", a, ", ", b,
             ") names a row another pair already holds; the pairs must partition the rows");
    seen[a] = seen[b] = 1;
  }
  H3_CHECK(std::all_of(seen.begin(), seen.end(), [](char s) { return s != 0; }), op,
           ": some rows are in no pair; the pairs must partition the rows");
  return P;
}

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::F32 ? t : t.to(DType::F32); }

}  // namespace

void pool_row_pairs(const Tensor& full, const Tensor& pairs, Tensor& reduced) {
  check_row_pairs("pool_row_pairs", full, pairs, reduced);
  const int32_t* P = partition("pool_row_pairs", full, pairs);
  const Tensor f = as_f32(full);
  Tensor r = reduced.dtype() == DType::F32 ? reduced : Tensor::empty(reduced.shape(), DType::F32);
  const float* F = f.ptr<float>();
  float* R = r.ptr<float>();
  const int64_t D = full.dim(1);
  const DType dt = reduced.dtype();
  parallel_for(0, pairs.dim(0), 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* a = F + P[2 * i] * D;
      const float* b = F + P[2 * i + 1] * D;
      float* out = R + i * D;
      if (a == b) {
        std::copy_n(a, D, out);
        continue;
      }
      for (int64_t c = 0; c < D; ++c) out[c] = stored(dt, (a[c] + b[c]) * 0.5f);
    }
  });
  if (dt != DType::F32) std::copy_n(static_cast<const char*>(r.to(dt).data()), reduced.nbytes(),
                                    static_cast<char*>(reduced.data()));
}

void unpool_row_pairs(const Tensor& reduced, const Tensor& pairs, Tensor& full) {
  check_row_pairs("unpool_row_pairs", full, pairs, reduced);
  const int32_t* P = partition("unpool_row_pairs", full, pairs);
  const Tensor r = as_f32(reduced);
  Tensor f = full.dtype() == DType::F32 ? full : full.to(DType::F32);
  const float* R = r.ptr<float>();
  float* F = f.ptr<float>();
  const int64_t D = full.dim(1);
  const DType dt = full.dtype();
  parallel_for(0, pairs.dim(0), 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* a = F + P[2 * i] * D;
      float* b = F + P[2 * i + 1] * D;
      const float* in = R + i * D;
      if (a == b) {
        std::copy_n(in, D, a);
        continue;
      }
      for (int64_t c = 0; c < D; ++c) {
        const float update = in[c] - stored(dt, (a[c] + b[c]) * 0.5f);
        a[c] = stored(dt, a[c] + update);
        b[c] = stored(dt, b[c] + update);
      }
    }
  });
  if (dt != DType::F32) std::copy_n(static_cast<const char*>(f.to(dt).data()), full.nbytes(),
                                    static_cast<char*>(full.data()));
}

}  // namespace h3::cpu
