#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/output_file.h"

namespace h3 {

namespace {

// What is at `path` unless it is of the type `wanted` (S_IFREG or S_IFDIR) or absent; see not_a_regular_file.
std::string unless_of_type(const std::string& path, mode_t wanted) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    const mode_t type = st.st_mode & S_IFMT;
    if (type == wanted) return {};
    switch (type) {
      case S_IFREG: return "is a file";
      case S_IFDIR: return "is a folder";
      case S_IFIFO: return "is a FIFO";
      case S_IFCHR: return "is a character device";
      case S_IFBLK: return "is a block device";
      case S_IFSOCK: return "is a socket";
      default: return "is neither a file nor a folder";
    }
  }
  const int err = errno;
  if (err == ELOOP) return "is a symbolic link loop";
  struct stat link {};
  if (err == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
    return "is a symbolic link to a missing file";
  if (err == ENOENT || err == ENOTDIR) return {};  // nothing there
  return cat("cannot be inspected (", std::strerror(err), ")");
}

}  // namespace

std::string not_a_regular_file(const std::string& path) { return unless_of_type(path, S_IFREG); }
std::string not_a_folder(const std::string& path) { return unless_of_type(path, S_IFDIR); }

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  if (const std::string what = not_a_regular_file(path); !what.empty()) fail(path, " ", what, ", not a file");
  // O_NONBLOCK: a FIFO put in the file's place since the check is refused below instead of blocking the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  H3_CHECK(fd >= 0, path, ": cannot open (", std::strerror(errno), ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail(path, ": cannot memory-map (", std::strerror(e), ")");
    }
    f->data_ = p;
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(data_, size_);
}

std::string read_text_file(const std::string& path) {
  // Checked first: a FIFO would block the read, /dev/zero never end it.
  if (const std::string what = not_a_regular_file(path); !what.empty()) fail(path, " ", what, ", not a file");
  std::ifstream in(path, std::ios::binary);
  H3_CHECK(in.good(), path, ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  OutputFile(path).write_all_and_commit(bytes.data(), bytes.size());
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool dir_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace h3
