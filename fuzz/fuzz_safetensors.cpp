// libFuzzer target: the safetensors header parser must reject every malformed image with h3::Error and never
// crash, read out of bounds or accept a span outside the buffer.
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    std::map<std::string, std::string> meta;
    auto tensors = h3::parse_safetensors_header(data, size, "fuzz", &meta);
    for (const auto& t : tensors) {
      // Every accepted span lies inside the buffer.
      if (t.offset > size || t.nbytes > size - t.offset) __builtin_trap();
      volatile uint8_t sink = 0;
      if (t.nbytes) sink = data[t.offset] ^ data[t.offset + t.nbytes - 1];
      (void)sink;
    }
  } catch (const h3::Error&) {
  }
  return 0;
}
