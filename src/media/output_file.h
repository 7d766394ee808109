// Write-then-rename for every file the media writers produce: the data goes to a temporary name in the
// same directory as the destination, and only a successful commit() renames it into place. A writer that
// throws before commit() leaves nothing behind: the destructor removes the temporary file.
#pragma once
#include <string>

namespace h3 {

class OutputFile {
 public:
  // Picks the temporary name "<path>.partial-<pid>"; creates nothing yet.
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

  // Writes `size` bytes to the temporary file in one go (creating or truncating it) and commits.
  void write_all_and_commit(const void* data, size_t size);

  // Flushes the temporary file to disk and renames it to path(). Throws (and keeps the destination
  // untouched) when either step fails.
  void commit();

 private:
  std::string path_;
  std::string temp_path_;
  bool committed_ = false;
};

// Throws unless `path`'s directory exists and is a directory (so a writer fails before any work with a
// sentence naming the directory, not with a library error string).
void check_output_directory(const std::string& path);

}  // namespace h3
