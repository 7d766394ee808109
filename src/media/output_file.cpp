#include "media/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace h3 {

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  H3_CHECK(!path_.empty(), "the output path is empty");
  temp_path_ = cat(path_, ".partial-", ::getpid());
}

OutputFile::~OutputFile() {
  if (!committed_) ::unlink(temp_path_.c_str());  // absent when nothing was written: ignore ENOENT
}

void OutputFile::write_all_and_commit(const void* data, size_t size) {
  int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  H3_CHECK(fd >= 0, "cannot create ", temp_path_, ": ", std::strerror(errno));
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail("cannot write ", temp_path_, ": ", std::strerror(err));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  H3_CHECK(::close(fd) == 0, "cannot write ", temp_path_, ": ", std::strerror(errno));
  commit();
}

void OutputFile::commit() {
  // fsync before rename: after a crash the destination holds either the old file or the complete new one.
  int fd = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
  H3_CHECK(fd >= 0, "cannot reopen ", temp_path_, " to flush it: ", std::strerror(errno));
  int sync_rc = ::fsync(fd);
  int sync_errno = errno;
  ::close(fd);
  H3_CHECK(sync_rc == 0, "cannot flush ", temp_path_, " to disk: ", std::strerror(sync_errno));
  H3_CHECK(std::rename(temp_path_.c_str(), path_.c_str()) == 0, "cannot rename ", temp_path_, " to ", path_, ": ",
           std::strerror(errno));
  committed_ = true;
}

void check_output_directory(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  H3_CHECK(std::filesystem::is_directory(dir, ec), "cannot write ", path, ": the directory ", dir.string(),
           " does not exist (or is not a directory)");
}

}  // namespace h3
