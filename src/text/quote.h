// Quoting a value from outside (a flag's argument, a session command's word, a path) in a message: one helper for
// every echo, so a 10 MB argument or an escape sequence never reaches the terminal whole.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace h3 {

// The characters of a value a message shows; a longer one is cut there and ends in "…".
constexpr size_t kQuotedChars = 80;

// `value` in single quotes, cut to kQuotedChars characters, with every control character (C0, DEL, C1) and every
// byte that is not well-formed UTF-8 escaped: \n, \r, \t, \e, \xNN, \u0085.
std::string quoted_input(std::string_view value);

}  // namespace h3
