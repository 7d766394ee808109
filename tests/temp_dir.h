// Test helper: a fresh folder under the system's temporary directory, removed with everything in it at scope exit.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include "util/error.h"

namespace h3 {

class TempDir {
 public:
  // `tag` goes into the folder's name ("h3-<tag>-XXXXXX").
  explicit TempDir(const std::string& tag) {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("h3-" + tag + "-XXXXXX")).string();
    H3_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

}  // namespace h3
