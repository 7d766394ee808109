// Test helper: host F32 tensors of normal draws from a seeded std::mt19937, the random inputs of the op tests.
#pragma once
#include <random>
#include <utility>

#include "tensor/tensor.h"

namespace h3 {

inline Tensor randn(Shape s, std::mt19937& g, float scale = 1.f, float mean = 0.f) {
  std::normal_distribution<float> n(mean, scale);
  Tensor t = Tensor::empty(std::move(s), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = n(g);
  return t;
}

}  // namespace h3
