// libFuzzer target: generation requests as JSON (`h3 tool generate --request`), then the request's rules.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipeline/request_json.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const h3::GenerationRequest r =
        h3::parse_request_json(std::string_view(reinterpret_cast<const char*>(data), size), "base");
    (void)h3::request_problems(r);
  } catch (const h3::Error&) {
  }
  return 0;
}
