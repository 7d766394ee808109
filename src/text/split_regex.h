// The pre-tokenizer's split regex. Tokenizer files store patterns written for Oniguruma (what HF tokenizers
// runs); we run them with PCRE2 (UTF + UCP, JIT) after translating the few constructs whose meaning differs
// between the two engines (see translate_oniguruma_pattern).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

struct pcre2_real_code_8;

namespace h3 {

// Rewrites an Oniguruma (Ruby syntax) pattern into a PCRE2 pattern with the same matches, or throws h3::Error
// naming a construct it cannot translate exactly:
//  * `\s` / `\S` become `\p{White_Space}` / `\P{White_Space}`: with UCP, PCRE2's \s also matches U+180E
//    (MONGOLIAN VOWEL SEPARATOR, not White_Space since Unicode 6.3), Oniguruma's does not (tokenizer.md §3).
//  * `\p{L}` / `\p{N}` (also `\pL` / `\pN`) gain the code points that utf8proc's Unicode tables (also used
//    for NFC) classify as letters / numbers but this PCRE2's older tables leave unassigned, so both
//    properties follow one Unicode version (Oniguruma in HF tokenizers is at least as new as utf8proc).
//  * Rejected: \w \W \b \B \h \H \X \R \K \O \y \Y, POSIX brackets, nested classes and class
//    intersections, inline options other than i, and ^ / $ (each differs between the engines).
std::string translate_oniguruma_pattern(std::string_view pattern);

class SplitRegex {
 public:
  // Compiles `pattern` (Oniguruma syntax) once; use_jit=false selects PCRE2's interpreter (the exact,
  // slower twin of the JIT).
  SplitRegex(std::string_view pattern, bool use_jit);
  ~SplitRegex();
  SplitRegex(SplitRegex&& other) noexcept;
  SplitRegex& operator=(SplitRegex&& other) noexcept;
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  const std::string& pattern() const { return pattern_; }
  const std::string& pcre2_pattern() const { return pcre2_pattern_; }

  // Splits well-formed UTF-8 `text` with behavior "Isolated": every match and every stretch of text between
  // matches is one piece; empty pieces are dropped. Calls on_piece(std::string_view) for each, in order.
  template <typename OnPiece>
  void split(std::string_view text, OnPiece&& on_piece) const {
    Matcher m(*this, text);
    size_t gap_start = 0, start = 0, end = 0;
    while (m.next(start, end)) {
      if (start > gap_start) on_piece(text.substr(gap_start, start - gap_start));
      on_piece(text.substr(start, end - start));
      gap_start = end;
    }
    if (gap_start < text.size()) on_piece(text.substr(gap_start));
  }

 private:
  // Iterates the non-empty, non-overlapping matches left to right; after an empty match the search resumes
  // one character later (as Oniguruma's find_iter does).
  class Matcher {
   public:
    Matcher(const SplitRegex& re, std::string_view text);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    bool next(size_t& start, size_t& end);

   private:
    const SplitRegex& re_;
    std::string_view text_;
    size_t pos_ = 0;
    void* match_data_;
  };

  std::string pattern_;
  std::string pcre2_pattern_;
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace h3
