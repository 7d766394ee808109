// Errors: one exception type carrying one clear sentence for the user.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace h3 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

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
