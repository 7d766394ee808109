#include "text/byte_level.h"

#include "text/utf8.h"

namespace h3::byte_level {

namespace {

bool stands_for_itself(uint8_t b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

constexpr uint32_t kFirstRemappedCodePoint = 0x100;
constexpr size_t kRemappedBytes = 68;

struct Tables {
  std::array<uint32_t, 256> code_point{};
  std::array<std::string, 256> symbol;
  std::array<uint8_t, kRemappedBytes> byte_of_remapped{};  // index: code point - U+0100
  Tables() {
    uint32_t next_remapped = kFirstRemappedCodePoint;
    for (int b = 0; b < 256; ++b) {
      if (stands_for_itself(static_cast<uint8_t>(b))) {
        code_point[b] = static_cast<uint32_t>(b);
      } else {
        byte_of_remapped[next_remapped - kFirstRemappedCodePoint] = static_cast<uint8_t>(b);
        code_point[b] = next_remapped++;
      }
      utf8::append_code_point(symbol[b], code_point[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t code_point_of_byte(uint8_t b) { return tables().code_point[b]; }

const std::string& symbol_of_byte(uint8_t b) { return tables().symbol[b]; }

std::array<uint8_t, 256> bytes_in_gpt2_order() {
  std::array<uint8_t, 256> order{};
  size_t n = 0;
  for (int b = 0; b < 256; ++b)
    if (stands_for_itself(static_cast<uint8_t>(b))) order[n++] = static_cast<uint8_t>(b);
  for (int b = 0; b < 256; ++b)
    if (!stands_for_itself(static_cast<uint8_t>(b))) order[n++] = static_cast<uint8_t>(b);
  return order;
}

std::string to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += symbol_of_byte(static_cast<uint8_t>(c));
  return out;
}

bool from_symbols(std::string_view symbols, std::string& bytes_out) {
  // Symbols are U+0021..U+0143: one or two UTF-8 bytes each.
  size_t i = 0;
  while (i < symbols.size()) {
    const auto b0 = static_cast<uint8_t>(symbols[i]);
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < symbols.size()) {
      cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(symbols[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;
    }
    const bool remapped = cp >= kFirstRemappedCodePoint && cp < kFirstRemappedCodePoint + kRemappedBytes;
    if (remapped) {
      bytes_out += static_cast<char>(tables().byte_of_remapped[cp - kFirstRemappedCodePoint]);
    } else if (cp < 0x100 && stands_for_itself(static_cast<uint8_t>(cp))) {
      bytes_out += static_cast<char>(cp);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace h3::byte_level
