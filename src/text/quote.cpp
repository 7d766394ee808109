#include "text/quote.h"

#include <cstdint>
#include <cstdio>

#include "text/utf8.h"

namespace h3 {

namespace {

std::string hex_escape(const char* format, unsigned value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// One character of the echo: itself, or its escape.
std::string shown(std::string_view value, size_t i, size_t length) {
  const auto b0 = static_cast<uint8_t>(value[i]);
  if (length == 0) return hex_escape("\\x%02X", b0);  // not well-formed UTF-8
  if (length > 1) {
    // C1 controls (U+0080..U+009F) are two bytes, C2 80..C2 9F.
    const auto b1 = static_cast<uint8_t>(value[i + 1]);
    if (b0 == 0xC2 && b1 < 0xA0) return hex_escape("\\u%04X", b1);
    return std::string(value.substr(i, length));
  }
  switch (b0) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case 0x1B: return "\\e";
    default: break;
  }
  if (b0 < 0x20 || b0 == 0x7F) return hex_escape("\\x%02X", b0);
  return std::string(1, static_cast<char>(b0));
}

}  // namespace

std::string quoted_input(std::string_view value) {
  std::string out = "'";
  size_t chars = 0, i = 0;
  while (i < value.size() && chars < kQuotedChars) {
    const size_t length = utf8::sequence_length(value, i);
    out += shown(value, i, length);
    i += length == 0 ? 1 : length;
    ++chars;
  }
  if (i < value.size()) out += "…";
  return out + "'";
}

}  // namespace h3
