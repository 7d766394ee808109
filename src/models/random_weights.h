// Random model weights made directly on a backend (no checkpoint, no host copy): for benchmarks at the released
// sizes and for tests at tiny sizes. Values come from Backend::fill_random_normal, seeded by (seed, tensor name), so
// one seed gives the same model whatever order the tensors are made in. Never zeros; scales that keep activations in
// range through deep stacks: matrices N(0, 1/√fan_in), norm weights N(1, kRandomNormStd), biases N(0, kRandomBiasStd).
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace h3 {

constexpr float kRandomNormStd = 0.05f;
constexpr float kRandomBiasStd = 0.02f;

class RandomWeights {
 public:
  RandomWeights(Backend& backend, uint64_t seed) : be_(backend), seed_(seed) {}

  // N(mean, stddev) on the backend.
  Tensor normal(const std::string& name, const Shape& shape, DType dt, float mean, float stddev);
  // A linear/conv weight with fan-in `fan_in` (0: the last dimension, as a [out, in] matrix): N(0, gain/√fan_in).
  Tensor matrix(const std::string& name, const Shape& shape, DType dt, int64_t fan_in = 0, float gain = 1.f);
  Tensor norm(const std::string& name, const Shape& shape, DType dt) {
    return normal(name, shape, dt, 1.f, kRandomNormStd);
  }
  Tensor bias(const std::string& name, const Shape& shape, DType dt) {
    return normal(name, shape, dt, 0.f, kRandomBiasStd);
  }

  Backend& backend() const { return be_; }
  uint64_t seed() const { return seed_; }
  // Bytes made so far (what the weights occupy on the backend, before allocator rounding).
  uint64_t bytes() const { return bytes_; }

 private:
  Backend& be_;
  uint64_t seed_;
  uint64_t bytes_ = 0;
};

// The stream of one named tensor under `seed` (FNV-1a of the name mixed with the seed).
uint64_t random_weight_stream(uint64_t seed, const std::string& name);

}  // namespace h3
