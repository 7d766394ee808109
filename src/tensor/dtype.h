// The scalar conversions between element types (bf16 and f16 are stored as raw uint16_t); DType itself is public
// (include/h3/tensor.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "h3/tensor.h"

namespace h3 {

// bf16: the top 16 bits of an IEEE f32. Rounding is round-to-nearest-even; NaN stays NaN.
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// Round an f32 to the nearest bf16 value and back (what a bf16 store + load does).
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// IEEE 754 binary16, round-to-nearest-even, overflow to inf.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
inline float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

}  // namespace h3
