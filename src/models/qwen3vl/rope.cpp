#include "models/qwen3vl/rope.h"

#include <sleef.h>

#include <cmath>

#include "util/error.h"

namespace h3 {

std::vector<float> torch_rope_inv_freq(double theta, int64_t dim) {
  H3_CHECK(dim > 0 && dim % 2 == 0, "rotary dimension must be positive and even, got ", dim);
  H3_CHECK(theta > 0, "rope theta must be positive, got ", theta);
  const float base = static_cast<float>(theta);
  std::vector<float> inv(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[i] = 1.0f / Sleef_powf_u10(base, exponent);
  }
  return inv;
}

void MropePositions::append_text(int64_t start, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    t.push_back(start + i);
    h.push_back(start + i);
    w.push_back(start + i);
  }
}

int mrope_axis(int64_t slot, const std::vector<int64_t>& section) {
  H3_CHECK(section.size() == 3, "mrope_section must have 3 entries, got ", section.size());
  if (slot % 3 == 1 && slot < 3 * section[1]) return 1;
  if (slot % 3 == 2 && slot < 3 * section[2]) return 2;
  return 0;
}

RopeTables mrope_tables(const MropePositions& pos, const std::vector<float>& inv_freq,
                        const std::vector<int64_t>& section) {
  const int64_t n = pos.size(), half = static_cast<int64_t>(inv_freq.size()), dim = 2 * half;
  H3_CHECK(static_cast<int64_t>(pos.h.size()) == n && static_cast<int64_t>(pos.w.size()) == n,
           "M-RoPE positions: the three axes must have the same length");
  std::vector<int> axis(half);
  for (int64_t i = 0; i < half; ++i) axis[i] = mrope_axis(i, section);
  RopeTables r{Tensor::empty({n, dim}, DType::F32), Tensor::empty({n, dim}, DType::F32)};
  float* C = r.cos.ptr<float>();
  float* S = r.sin.ptr<float>();
  const std::vector<int64_t>* axes[3] = {&pos.t, &pos.h, &pos.w};
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>((*axes[axis[i]])[p]) * inv_freq[i];
      const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
      const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
      C[p * dim + i] = C[p * dim + half + i] = c;
      S[p * dim + i] = S[p * dim + half + i] = s;
    }
  return r;
}

}  // namespace h3
