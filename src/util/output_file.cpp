#include "util/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "util/cancel.h"
#include "util/error.h"

namespace h3 {

namespace fs = std::filesystem;

namespace {

OutputTarget refused(std::string what) { return {OutputKind::Refused, "", std::move(what)}; }

}  // namespace

OutputTarget inspect_output_target(const std::string& path) {
  struct stat at {};
  if (::lstat(path.c_str(), &at) != 0) {
    // Nothing there (or a parent that is not a folder: the folder check says so).
    if (errno == ENOENT || errno == ENOTDIR) return {OutputKind::NewFile, path, ""};
    return refused(cat("cannot be inspected (", std::strerror(errno), ")"));
  }
  struct stat st = at;
  if (S_ISLNK(at.st_mode) && ::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT) return refused(cat("is a symbolic link that cannot be followed (", std::strerror(err), ")"));
    std::error_code ec;
    const fs::path to = fs::read_symlink(path, ec);
    return refused(cat("is a symbolic link to a missing file ('", to.string(),
                       "'); give the file's own path or remove the link"));
  }
  if (S_ISREG(st.st_mode)) {
    if (!S_ISLNK(at.st_mode)) return {OutputKind::RegularFile, path, ""};
    std::error_code ec;
    const fs::path file = fs::canonical(path, ec);
    if (ec) return refused(cat("is a symbolic link that cannot be followed (", ec.message(), ")"));
    return {OutputKind::RegularFile, file.string(), ""};
  }
  if (S_ISFIFO(st.st_mode)) return {OutputKind::Stream, path, "a FIFO"};
  if (S_ISCHR(st.st_mode)) return {OutputKind::Stream, path, "a character device"};
  if (S_ISDIR(st.st_mode)) return refused("is a folder; give a file name inside it");
  const char* what = S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a file";
  return refused(cat("is ", what, "; h3 writes to regular files, FIFOs and character devices only"));
}

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  H3_CHECK(!path_.empty(), "the output path is empty");
  target_ = inspect_output_target(path_);
  H3_CHECK(target_.kind != OutputKind::Refused, "cannot write ", path_, ": it ", target_.what);
  if (streamed()) return;
  fs::path dir = fs::path(target_.file).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  H3_CHECK(fs::is_directory(dir, ec), "cannot write ", path_, ": the directory ", dir.string(),
           " does not exist (or is not a directory)");
  temp_path_ = cat(target_.file, ".partial-", ::getpid());
  partial_.emplace(temp_path_, PartialPath::Kind::File);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !streamed()) ::unlink(temp_path_.c_str());  // absent when nothing was written: ignore ENOENT
}

const std::string& OutputFile::temp_path() const {
  H3_CHECK(!streamed(), "cannot write ", path_, " through a temporary file: it is ", target_.what,
           ", written straight into");
  return temp_path_;
}

void OutputFile::open_for_writing() {
  if (streamed()) {
    // A FIFO blocks here until a reader opens it, as `cat > fifo` does; a Ctrl-C that interrupts the wait cancels
    // (util/cancel.h), any other signal resumes it.
    do {
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd_ < 0 && errno == EINTR) throw_if_cancelled();
    } while (fd_ < 0 && errno == EINTR);
    H3_CHECK(fd_ >= 0, "cannot open ", path_, " (", target_.what, ") for writing: ", std::strerror(errno));
    return;
  }
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  H3_CHECK(fd_ >= 0, "cannot create ", temp_path_, ": ", std::strerror(errno));
}

void OutputFile::write(const void* data, size_t size) {
  if (fd_ < 0) open_for_writing();
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) {
      throw_if_cancelled();
      continue;
    }
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd_);
      fd_ = -1;
      fail("cannot write ", path_, ": ", std::strerror(err));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void OutputFile::finish() {
  if (finished_ || streamed()) return;
  // fsync before rename: after a crash the destination holds either the old file or the complete new one.
  if (fd_ < 0) {  // written by name (FFmpeg)
    fd_ = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
    H3_CHECK(fd_ >= 0, "cannot reopen ", temp_path_, " to flush it: ", std::strerror(errno));
  }
  const int sync_rc = ::fsync(fd_);
  const int sync_errno = errno;
  const int close_rc = ::close(fd_);
  const int close_errno = errno;
  fd_ = -1;
  H3_CHECK(sync_rc == 0, "cannot flush ", temp_path_, " to disk: ", std::strerror(sync_errno));
  H3_CHECK(close_rc == 0, "cannot write ", path_, ": ", std::strerror(close_errno));
  finished_ = true;
}

void OutputFile::commit() {
  if (streamed()) {
    if (fd_ < 0) open_for_writing();  // nothing written: the reader still sees the stream open and close
    const int rc = ::close(fd_);
    fd_ = -1;
    H3_CHECK(rc == 0, "cannot write ", path_, ": ", std::strerror(errno));
    committed_ = true;
    return;
  }
  finish();
  H3_CHECK(std::rename(temp_path_.c_str(), target_.file.c_str()) == 0, "cannot rename ", temp_path_, " to ",
           target_.file, ": ", std::strerror(errno));
  committed_ = true;
  partial_.reset();
}

}  // namespace h3
