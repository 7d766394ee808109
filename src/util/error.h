// Errors: h3::Error (include/h3/error.h) carries one clear sentence for the user; cat, fail and H3_CHECK build it.
#pragma once
#include <sstream>
#include <string>
#include <utility>

#include "h3/error.h"

namespace h3 {

// Concatenate anything printable into a string: cat("tensor ", name, " has ", n, " rows").
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

}  // namespace h3

// H3_CHECK(cond, "message parts", ...) throws h3::Error with the concatenated message.
#define H3_CHECK(cond, ...)            \
  do {                                 \
    if (!(cond)) ::h3::fail(__VA_ARGS__); \
  } while (0)
