#include "util/env.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/error.h"

namespace h3 {

namespace {

// The value of `name`, or null when unset or empty.
const char* env_value(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Whole-string base-10 integer within int's range (no surrounding blanks).
bool parse_int(const char* s, int& out) {
  if (std::isspace(static_cast<unsigned char>(*s))) return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < -2147483647L - 1 || v > 2147483647L) return false;
  out = static_cast<int>(v);
  return true;
}

}  // namespace

bool env_flag(const char* name) {
  const char* v = env_value(name);
  return v && std::strcmp(v, "0") != 0;
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = env_value(name);
  if (!v) return fallback;
  int n = 0;
  H3_CHECK(parse_int(v, n) && n >= lo && n <= hi, name, " must be an integer in [", lo, ", ", hi, "], got '", v,
           "'");
  return n;
}

int env_choice(const char* name, int fallback, std::initializer_list<int> allowed) {
  const char* v = env_value(name);
  if (!v) return fallback;
  int n = 0;
  const bool parsed = parse_int(v, n);
  for (int a : allowed)
    if (parsed && n == a) return n;
  std::string list;
  for (int a : allowed) list += (list.empty() ? "" : " or ") + std::to_string(a);
  fail(name, " must be ", list, ", got '", v, "'");
}

std::string env_word(const char* name, const char* fallback, std::initializer_list<const char*> allowed) {
  const char* v = env_value(name);
  if (!v) return fallback;
  for (const char* a : allowed)
    if (std::strcmp(v, a) == 0) return v;
  std::string list;
  for (const char* a : allowed) list += cat(list.empty() ? "" : " or ", a);
  fail(name, " must be ", list, ", got '", v, "'");
}

}  // namespace h3
