#include "app/line_reader.h"

#include <histedit.h>
#include <unistd.h>

#include <langinfo.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <filesystem>

#include "app/interrupt.h"
#include "util/error.h"

namespace h3::app {

namespace {

constexpr int kHistoryEntries = 1000;

// Prompts are UTF-8 (the tokenizer's input): libedit decodes keystrokes with the LC_CTYPE locale, so use the
// environment's when it is UTF-8, else C.UTF-8.
void use_utf8_ctype() {
  const char* env = std::setlocale(LC_CTYPE, "");
  if (env && std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0) return;
  if (!std::setlocale(LC_CTYPE, "C.UTF-8")) std::setlocale(LC_CTYPE, "C");
}

// libedit's own reader retries a read() that a signal interrupted once (and the signal may not interrupt this
// thread's read at all), so the first Ctrl-C at the prompt would be lost; this one gives up the line on Ctrl-C. Returns 1 with a character, 0 at end of
// input, -1 on Ctrl-C or an error.
int read_key(EditLine*, wchar_t* out) {
  mbstate_t state{};
  for (;;) {
    if (!wait_for_input(STDIN_FILENO)) return -1;
    char byte;
    const ssize_t n = ::read(STDIN_FILENO, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : -1;
    const size_t r = std::mbrtowc(out, &byte, 1, &state);
    if (r == static_cast<size_t>(-2)) continue;  // more bytes of this character follow
    if (r == static_cast<size_t>(-1)) {          // not valid in the locale: drop it, start over
      state = mbstate_t{};
      continue;
    }
    return 1;
  }
}

class EditlineReader final : public LineReader {
 public:
  explicit EditlineReader(std::string history_path) : history_path_(std::move(history_path)) {
    history_ = history_init();
    H3_CHECK(history_ != nullptr, "cannot start libedit's history");
    HistEvent ev;
    ::history(history_, &ev, H_SETSIZE, kHistoryEntries);
    ::history(history_, &ev, H_SETUNIQUE, 1);
    if (!history_path_.empty()) ::history(history_, &ev, H_LOAD, history_path_.c_str());
    use_utf8_ctype();
    el_ = el_init("h3", stdin, stdout, stderr);
    H3_CHECK(el_ != nullptr, "cannot start libedit on this terminal");
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_PROMPT, &EditlineReader::prompt_of);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_HIST, ::history, history_);
    el_set(el_, EL_GETCFN, &read_key);
    el_source(el_, nullptr);  // the user's ~/.editrc, when there is one
  }

  ~EditlineReader() override {
    if (!history_path_.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(history_path_).parent_path(), ec);
      HistEvent ev;
      ::history(history_, &ev, H_SAVE, history_path_.c_str());
    }
    el_end(el_);
    history_end(history_);
  }

  ReadResult read(const std::string& prompt) override {
    prompt_ = prompt;
    clear_interrupt();
    int count = 0;
    const char* line = el_gets(el_, &count);
    if (!line || count < 0) {
      if (interrupt_flag().load()) {
        // Ctrl-C: drop what was typed, start a fresh line.
        el_reset(el_);
        std::fputs("^C\n", stdout);
        std::fflush(stdout);
        return {ReadStatus::Interrupted, {}};
      }
      std::fputc('\n', stdout);
      return {ReadStatus::EndOfInput, {}};
    }
    std::string s(line, static_cast<size_t>(count));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return {ReadStatus::Line, std::move(s)};
  }

  void remember(const std::string& line) override {
    HistEvent ev;
    ::history(history_, &ev, H_ENTER, line.c_str());
  }

 private:
  static char* prompt_of(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return const_cast<char*>(static_cast<EditlineReader*>(self)->prompt_.c_str());
  }

  std::string history_path_;
  std::string prompt_;
  History* history_ = nullptr;
  EditLine* el_ = nullptr;
};

class PlainReader final : public LineReader {
 public:
  explicit PlainReader(int fd) : fd_(fd) {}

  ReadResult read(const std::string&) override {
    clear_interrupt();
    for (;;) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return {ReadStatus::Line, std::move(line)};
      }
      if (eof_) {
        if (buffer_.empty()) return {ReadStatus::EndOfInput, {}};
        return {ReadStatus::Line, std::exchange(buffer_, {})};
      }
      if (!wait_for_input(fd_)) {
        buffer_.clear();
        return {ReadStatus::Interrupted, {}};
      }
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof_ = true;
        continue;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void remember(const std::string&) override {}

 private:
  int fd_;
  std::string buffer_;
  bool eof_ = false;
};

}  // namespace

std::unique_ptr<LineReader> make_editline_reader(const std::string& history_path) {
  return std::make_unique<EditlineReader>(history_path);
}

std::unique_ptr<LineReader> make_plain_reader(int fd) { return std::make_unique<PlainReader>(fd); }

std::string default_history_path() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) return std::string(state) + "/h3/history";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.h3_history";
  return {};
}

}  // namespace h3::app
