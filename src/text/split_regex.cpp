#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/split_regex.h"

#include <pcre2.h>
#include <utf8proc.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "text/utf8.h"
#include "util/error.h"

namespace h3 {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
using CodePtr = std::unique_ptr<pcre2_code, CodeDeleter>;

CodePtr compile_or_throw(const std::string& pattern, uint32_t options, const std::string& shown_pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  std::unique_ptr<pcre2_compile_context, decltype(&pcre2_compile_context_free)> ctx(
      pcre2_compile_context_create(nullptr), &pcre2_compile_context_free);
  pcre2_set_newline(ctx.get(), PCRE2_NEWLINE_LF);  // Oniguruma's only newline is LF
  CodePtr code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                             &err_offset, ctx.get()));
  if (!code)
    fail("tokenizer split regex ", shown_pattern, " does not compile (", pcre2_message(err), " at offset ",
         err_offset, ")");
  return code;
}


// `\x{a}-\x{b}` ranges of the code points in `group_text` (every code point of a category group, in
// order) that PCRE2 does not put in the group: the matches of `complement_property` (e.g. "\\P{L}").
std::string ranges_missing_from_pcre2(const std::string& group_text, const char* complement_property) {
  CodePtr code = compile_or_throw(complement_property, PCRE2_UTF | PCRE2_UCP, complement_property);
  pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code.get(), nullptr), &pcre2_match_data_free);
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  size_t pos = 0;
  while (pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(group_text.data()), group_text.size(), pos,
                     PCRE2_NO_UTF_CHECK, md.get(), nullptr) >= 0) {
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    utf8proc_int32_t cp = 0;
    utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(group_text.data()) + ov[0],
                     static_cast<utf8proc_ssize_t>(ov[1] - ov[0]), &cp);
    const auto c = static_cast<uint32_t>(cp);
    if (!ranges.empty() && ranges.back().second + 1 == c)
      ranges.back().second = c;
    else
      ranges.emplace_back(c, c);
    pos = ov[1];
  }
  std::string out;
  char buf[32];
  for (auto [lo, hi] : ranges) {
    if (lo == hi)
      std::snprintf(buf, sizeof buf, "\\x{%X}", lo);
    else
      std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", lo, hi);
    out += buf;
  }
  return out;
}

struct UnicodeCatchUp {
  std::string letters, numbers;
};

UnicodeCatchUp compute_unicode_catch_up() {
  std::string letters, numbers;  // every code point utf8proc calls L (resp. N), in order
  for (uint32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (cp >= kSurrogateFirst && cp <= kSurrogateLast) continue;
    const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    if (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) utf8::append_code_point(letters, cp);  // L*
    if (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) utf8::append_code_point(numbers, cp);  // N*
  }
  return {ranges_missing_from_pcre2(letters, "\\P{L}"), ranges_missing_from_pcre2(numbers, "\\P{N}")};
}

// Computed once per process: both libraries are fixed for the life of the process.
const UnicodeCatchUp& unicode_catch_up() {
  static const UnicodeCatchUp extra = compute_unicode_catch_up();
  return extra;
}

[[noreturn]] void reject(std::string_view pattern, const std::string& what) {
  fail("tokenizer split regex uses ", what,
       ", whose meaning differs between Oniguruma (HF tokenizers) and PCRE2; unsupported pattern: ", pattern);
}

}  // namespace

std::string translate_oniguruma_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // offset in p just after the class's `[` or `[^`
  const auto property = [&](const std::string& name, const std::string& extra) {
    if (extra.empty()) return "\\p{" + name + "}";
    return in_class ? "\\p{" + name + "}" + extra : "[\\p{" + name + "}" + extra + "]";
  };
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) reject(p, "a trailing backslash");
      const char e = p[i + 1];
      if (e == 'Q') {  // \Q...\E: literal text, copied as is
        const size_t close = p.find("\\E", i + 2);
        const size_t stop = close == std::string_view::npos ? p.size() : close + 2;
        out.append(p.substr(i, stop - i));
        i = stop - 1;
        continue;
      }
      if (e == 's' || e == 'S') {
        out += e == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
        ++i;
        continue;
      }
      if (e == 'p' && (p.substr(i, 5) == "\\p{L}" || p.substr(i, 3) == "\\pL")) {
        out += property("L", unicode_catch_up().letters);
        i += p[i + 2] == '{' ? 4 : 2;
        continue;
      }
      if (e == 'p' && (p.substr(i, 5) == "\\p{N}" || p.substr(i, 3) == "\\pN")) {
        out += property("N", unicode_catch_up().numbers);
        i += p[i + 2] == '{' ? 4 : 2;
        continue;
      }
      if (std::string_view("wWbBhHXRKOyY").find(e) != std::string_view::npos) reject(p, std::string("\\") + e);
      out += c;
      out += e;
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']' && i > class_start) {
        in_class = false;
      } else if (c == '[') {
        reject(p, p.substr(i, 2) == "[:" ? "a POSIX bracket expression" : "a nested character class");
      } else if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
        reject(p, "a class intersection (&&)");
      }
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      class_start = i + 1 < p.size() && p[i + 1] == '^' ? i + 2 : i + 1;
    } else if (c == '^' || c == '$') {
      reject(p, std::string("the line anchor ") + c);
    } else if (c == '(' && p.substr(i, 2) == "(?") {
      // Inline options: Oniguruma's Ruby syntax gives (?m) the meaning of PCRE2's (?s); allow only i.
      size_t j = i + 2;
      while (j < p.size() && (std::isalpha(static_cast<unsigned char>(p[j])) || p[j] == '-')) ++j;
      const std::string_view letters = p.substr(i + 2, j - i - 2);
      if (!letters.empty() && j < p.size() && (p[j] == ':' || p[j] == ')') &&
          letters.find_first_not_of("i-") != std::string_view::npos)
        reject(p, "the inline option group (?" + std::string(letters) + ")");
    }
    out += c;
  }
  if (in_class) fail("tokenizer split regex has an unterminated character class: ", p);
  return out;
}

SplitRegex::SplitRegex(std::string_view pattern, bool use_jit)
    : pattern_(pattern), pcre2_pattern_(translate_oniguruma_pattern(pattern)) {
  CodePtr code = compile_or_throw(pcre2_pattern_, PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, pattern_);
  if (use_jit) {
    // Without JIT support PCRE2 falls back to its interpreter, which gives the same matches.
    pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
  }
  code_ = code.release();
}

SplitRegex::~SplitRegex() { pcre2_code_free(code_); }

SplitRegex::SplitRegex(SplitRegex&& other) noexcept
    : pattern_(std::move(other.pattern_)),
      pcre2_pattern_(std::move(other.pcre2_pattern_)),
      code_(std::exchange(other.code_, nullptr)) {}

SplitRegex& SplitRegex::operator=(SplitRegex&& other) noexcept {
  if (this != &other) {
    pcre2_code_free(code_);
    pattern_ = std::move(other.pattern_);
    pcre2_pattern_ = std::move(other.pcre2_pattern_);
    code_ = std::exchange(other.code_, nullptr);
  }
  return *this;
}

SplitRegex::Matcher::Matcher(const SplitRegex& re, std::string_view text)
    : re_(re), text_(text), match_data_(pcre2_match_data_create_from_pattern(re.code_, nullptr)) {
  if (!match_data_) fail("out of memory creating regex match data");
}

SplitRegex::Matcher::~Matcher() { pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_)); }

bool SplitRegex::Matcher::next(size_t& start, size_t& end) {
  auto* md = static_cast<pcre2_match_data*>(match_data_);
  while (pos_ < text_.size()) {
    // The text was validated as UTF-8 before it got here.
    const int rc = pcre2_match(re_.code_, reinterpret_cast<PCRE2_SPTR>(text_.data()), text_.size(), pos_,
                               PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) fail("tokenizer split regex failed on the text (", pcre2_message(rc), ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    start = ov[0];
    end = ov[1];
    if (end > start) {
      pos_ = end;
      return true;
    }
    // Empty match: produces no piece; resume one character later.
    pos_ = start + 1;
    while (pos_ < text_.size() && (static_cast<uint8_t>(text_[pos_]) & 0xC0) == 0x80) ++pos_;
  }
  return false;
}

}  // namespace h3
