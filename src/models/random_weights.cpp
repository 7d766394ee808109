#include "models/random_weights.h"

#include <cmath>

namespace h3 {

uint64_t random_weight_stream(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h ^ (seed * 0x9E3779B97F4A7C15ull);
}

Tensor RandomWeights::normal(const std::string& name, const Shape& shape, DType dt, float mean, float stddev) {
  Tensor t = be_.empty(shape, dt);
  be_.fill_random_normal(t, random_weight_stream(seed_, name), mean, stddev);
  bytes_ += t.nbytes();
  return t;
}

Tensor RandomWeights::matrix(const std::string& name, const Shape& shape, DType dt, int64_t fan_in, float gain) {
  H3_CHECK(!shape.empty(), "RandomWeights::matrix: '", name, "' needs a shape");
  const int64_t f = fan_in > 0 ? fan_in : shape.back();
  H3_CHECK(f > 0, "RandomWeights::matrix: '", name, "' has no fan-in");
  return normal(name, shape, dt, 0.f, gain / std::sqrt(static_cast<float>(f)));
}

}  // namespace h3
