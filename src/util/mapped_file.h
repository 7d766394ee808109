// A read-only memory-mapped file. Mapping reads nothing: pages are faulted in on first touch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace h3 {

class MappedFile {
 public:
  // Throws h3::Error naming the path when the file cannot be opened or mapped, or is not a regular file (a FIFO is
  // refused without waiting for a writer).
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }

 private:
  MappedFile() = default;
  std::string path_;
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

// Whole-file helpers.
std::string read_text_file(const std::string& path);                   // throws naming the path (and what else it is)
void write_file_atomic(const std::string& path, const std::string& bytes);  // through OutputFile (output_file.h)
bool file_exists(const std::string& path);
bool dir_exists(const std::string& path);
// What is at `path` when it is not what the caller needs, as the rest of a sentence that starts with the path:
// "is a folder", "is a FIFO", "is a character device", "is a block device", "is a socket", "is a symbolic link
// loop", "is a symbolic link to a missing file", "cannot be inspected (Permission denied)". Empty when it is a
// regular file (not_a_regular_file) or a folder (not_a_folder), a symbolic link to one included, and when nothing
// is there (the caller's "missing").
std::string not_a_regular_file(const std::string& path);
std::string not_a_folder(const std::string& path);

}  // namespace h3
