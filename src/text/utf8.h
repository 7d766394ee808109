// UTF-8 helpers for the tokenizer: strict validation, Unicode NFC (utf8proc), code point encoding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace h3::utf8 {

// Length of the well-formed sequence at text[i] (1 to 4 bytes), or 0 when it is ill-formed (Unicode Table 3-7).
size_t sequence_length(std::string_view text, size_t i);

// Offset of the first byte that does not start a well-formed UTF-8 sequence (Unicode Table 3-7: no
// overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF, no truncated sequences), or
// std::string_view::npos when the whole text is well-formed.
size_t first_invalid_offset(std::string_view text);

// Throws h3::Error "prompt is not valid UTF-8 (byte 0x.. at offset N)" unless text is well-formed.
void require_valid(std::string_view text);

// True when every byte is < 0x80 (such text is invariant under NFC).
bool is_ascii(std::string_view text);

// Unicode canonical composition (NFC) of well-formed UTF-8 text, with utf8proc's Unicode tables.
std::string nfc(std::string_view text);

// Appends the UTF-8 encoding of one Unicode scalar value.
void append_code_point(std::string& out, uint32_t cp);

}  // namespace h3::utf8
