// A read-only memory-mapped file. Mapping reads nothing: pages are faulted in on first touch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace h3 {

class MappedFile {
 public:
  // Throws h3::Error naming the path when the file cannot be opened or mapped.
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
std::string read_text_file(const std::string& path);                   // throws naming the path
void write_file_atomic(const std::string& path, const std::string& bytes);  // through OutputFile (output_file.h)
bool file_exists(const std::string& path);
bool dir_exists(const std::string& path);

}  // namespace h3
