// The GPT-2 byte-level alphabet (tokenizer.md §4): every byte maps to one printable code point, so that a
// byte string becomes a string of "symbols" that BPE vocabularies are written in.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace h3::byte_level {

// The code point that stands for byte b: bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for themselves;
// the other 68 bytes, in increasing order, get U+0100, U+0101, ... U+0143.
uint32_t code_point_of_byte(uint8_t b);

// The UTF-8 string of that code point (the byte's one-symbol vocabulary entry).
const std::string& symbol_of_byte(uint8_t b);

// All 256 bytes in GPT-2 order: the 188 self-standing bytes ascending, then the 68 remapped bytes ascending.
// Byte-level vocabularies such as Qwen's give the i-th of them id i.
std::array<uint8_t, 256> bytes_in_gpt2_order();

// The byte-level symbol string of raw bytes (each byte replaced by its symbol's UTF-8).
std::string to_symbols(std::string_view bytes);

// The inverse of to_symbols; false when `symbols` holds a code point that stands for no byte.
bool from_symbols(std::string_view symbols, std::string& bytes_out);

}  // namespace h3::byte_level
