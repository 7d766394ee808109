#include "text/utf8.h"

#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "util/error.h"

namespace h3::utf8 {

size_t sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const auto in = [](uint8_t b, uint8_t lo, uint8_t hi) { return b >= lo && b <= hi; };
  const uint8_t b0 = byte(i);
  const size_t left = s.size() - i;
  if (b0 < 0x80) return 1;
  if (in(b0, 0xC2, 0xDF)) return left >= 2 && in(byte(i + 1), 0x80, 0xBF) ? 2 : 0;
  if (in(b0, 0xE0, 0xEF)) {
    if (left < 3) return 0;
    const uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80;  // E0: no overlong forms
    const uint8_t hi = b0 == 0xED ? 0x9F : 0xBF;  // ED: no surrogates
    return in(byte(i + 1), lo, hi) && in(byte(i + 2), 0x80, 0xBF) ? 3 : 0;
  }
  if (in(b0, 0xF0, 0xF4)) {
    if (left < 4) return 0;
    const uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80;  // F0: no overlong forms
    const uint8_t hi = b0 == 0xF4 ? 0x8F : 0xBF;  // F4: nothing above U+10FFFF
    return in(byte(i + 1), lo, hi) && in(byte(i + 2), 0x80, 0xBF) && in(byte(i + 3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;  // continuation byte, C0/C1 (always overlong) or F5..FF
}

size_t first_invalid_offset(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void require_valid(std::string_view text) {
  const size_t bad = first_invalid_offset(text);
  if (bad == std::string_view::npos) return;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(static_cast<uint8_t>(text[bad])));
  fail("prompt is not valid UTF-8 (byte ", hex, " at offset ", bad,
       "); the text must be UTF-8 encoded without surrogates, overlong forms or truncated sequences");
}

bool is_ascii(std::string_view text) {
  for (char c : text)
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  return true;
}

std::string nfc(std::string_view text) {
  utf8proc_uint8_t* mapped = nullptr;
  // STABLE|COMPOSE is exactly utf8proc_NFC, but with an explicit length so that U+0000 is ordinary text.
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  if (n < 0) fail("NFC normalization failed: ", utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

void append_code_point(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace h3::utf8
