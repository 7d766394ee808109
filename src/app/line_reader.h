// Lines for the interactive session: libedit (editing, history kept in a file) when stdin is a terminal; plain
// reads otherwise, so scripts and tests drive the session through a pipe.
#pragma once
#include <memory>
#include <string>

namespace h3::app {

enum class ReadStatus { Line, Interrupted, EndOfInput };

struct ReadResult {
  ReadStatus status = ReadStatus::EndOfInput;
  std::string line;  // without the newline
};

class LineReader {
 public:
  virtual ~LineReader() = default;
  // Interrupted: Ctrl-C arrived while waiting (the partial line is dropped).
  virtual ReadResult read(const std::string& prompt) = 0;
  virtual void remember(const std::string& line) = 0;  // add to the history
};

// libedit on stdin/stdout; history loaded from and saved to `history_path` (empty: no history file).
std::unique_ptr<LineReader> make_editline_reader(const std::string& history_path);
// Unbuffered reads from `fd`, no prompt, no history.
std::unique_ptr<LineReader> make_plain_reader(int fd);

// $XDG_STATE_HOME/h3/history when XDG_STATE_HOME is set, else ~/.h3_history; empty when neither is known.
std::string default_history_path();

}  // namespace h3::app
