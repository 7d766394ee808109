// libFuzzer target: encodes arbitrary bytes with the tiny tokenizer. Invalid UTF-8 must raise h3::Error;
// valid text must encode without crashing, and its ids must decode back to the text's NFC form (the tiny
// tokenizer's added tokens all start with '<', so the check applies to inputs without one).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"
#include "util/error.h"

namespace {

const h3::Tokenizer& tokenizer() {
  static const h3::Tokenizer t =
      h3::Tokenizer::from_json(h3::make_tiny_tokenizer_json(), h3::make_tiny_tokenizer_config_json());
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = h3::utf8::first_invalid_offset(text) == std::string_view::npos;
  try {
    const auto ids = tokenizer().encode(text);
    if (!valid) std::abort();  // invalid UTF-8 must not encode
    if (text.find('<') == std::string_view::npos && tokenizer().decode_bytes(ids) != h3::utf8::nfc(text))
      std::abort();
  } catch (const h3::Error&) {
    if (valid) std::abort();  // valid text must always encode
  }
  return 0;
}
