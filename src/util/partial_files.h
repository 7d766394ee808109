// The files and folders a run is writing and has not published yet, kept where a signal handler can reach them: a
// process that must end at once (a second Ctrl-C, app/interrupt.cpp) removes them first, so it leaves no partial
// output behind. OutputFile registers its temporary file; app/outputs.h's StagedOutputs the folders it creates.
#pragma once
#include <memory>
#include <string>

namespace h3 {

// Registers `path` for as long as it lives (one of at most kMaxPartialPaths at a time; past that a path is not
// registered, and an immediate exit may leave it).
class PartialPath {
 public:
  enum class Kind { File, Folder };
  static constexpr int kMaxPartialPaths = 1024;

  PartialPath(std::string path, Kind kind);
  ~PartialPath();
  PartialPath(PartialPath&&) noexcept;
  PartialPath& operator=(PartialPath&&) = delete;
  PartialPath(const PartialPath&) = delete;
  PartialPath& operator=(const PartialPath&) = delete;

  struct Entry;

 private:
  void unregister();
  std::unique_ptr<Entry> entry_;
  int slot_ = -1;
};

// Unlinks every registered file, then removes every registered folder that is empty by then (the innermost first).
// Async-signal-safe (for a handler whose process ends next); a registration that ends meanwhile waits for it.
void remove_partial_paths();

}  // namespace h3
