#include "app/outputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "app/cli_options.h"
#include "media/mp4_writer.h"
#include "media/ppm_writer.h"
#include "text/quote.h"
#include "util/output_file.h"

namespace h3::app {

namespace fs = std::filesystem;

namespace {

std::string folder_of(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

// Whether a file can be created in `dir`: tried for real (a probe file, removed at once), because access() says
// yes to root everywhere, even on a read-only or pseudo file system.
bool writable_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  std::string probe = (dir / ".h3-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

// The number in NAME = PREFIX<digits>EXT, or -1.
long number_in(const std::string& name, const std::string& prefix, const std::string& ext) {
  if (name.size() <= prefix.size() + ext.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
  if (digits.empty() || digits.size() > 9) return -1;
  for (char c : digits)
    if (c < '0' || c > '9') return -1;
  return std::stol(digits);
}

}  // namespace

void check_file_destination(const std::string& flag, const std::string& path) {
  const OutputTarget target = inspect_output_target(path);
  switch (target.kind) {
    case OutputKind::Refused: throw UsageError(cat(flag, " ", quoted_input(path), " ", target.what, "."));
    case OutputKind::Stream:
      if (::access(path.c_str(), W_OK) != 0)
        throw UsageError(cat(flag, " ", quoted_input(path), " is ", target.what, " that h3 cannot write to (",
                             std::strerror(errno), ")."));
      return;
    case OutputKind::NewFile:
    case OutputKind::RegularFile: break;
  }
  const std::string dir = folder_of(target.file);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError(
        cat("The output folder ", quoted_input(dir), " of ", flag, " does not exist; create it or choose another."));
  if (!writable_folder(dir))
    throw UsageError(cat("The output folder ", quoted_input(dir), " of ", flag, " is not writable."));
}

void check_mp4_name(const std::string& flag, const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext != ".mp4" && ext != ".mov" && ext != ".m4v")
    throw UsageError(cat(flag, " '", path, "' must end in .mp4, .mov or .m4v: h3 writes an MP4 (H.264 + AAC)."));
}

void check_mp4_destination(const std::string& flag, const std::string& path) {
  const OutputTarget target = inspect_output_target(path);
  if (target.kind == OutputKind::Stream)
    throw UsageError(cat(flag, " ", quoted_input(path), " is ", target.what, ", and ", kMp4NeedsAFile, " (or ", flag,
                         " '' for no MP4)."));
  check_file_destination(flag, path);
}

void check_outputs_apart(const std::string& model_dir, const std::vector<NamedPath>& inputs,
                         const std::vector<NamedPath>& outputs, const NamedPath& frames_dir) {
  std::vector<OutputFolder> folders;
  if (!frames_dir.path.empty()) folders.push_back({frames_dir, is_frame_file_name});
  if (const std::optional<std::string> problem = overwrite_problem(model_dir, inputs, outputs, folders))
    throw UsageError(*problem);
}

void check_folder_destination(const std::string& flag, const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) throw UsageError(cat(flag, " ", quoted_input(dir), " exists and is not a folder."));
    if (!writable_folder(p)) throw UsageError(cat("The folder ", quoted_input(dir), " of ", flag, " is not writable."));
    return;
  }
  while (p.has_parent_path() && p != p.parent_path() && !fs::exists(p, ec)) p = p.parent_path();
  if (!writable_folder(p))
    throw UsageError(
        cat(flag, " ", quoted_input(dir), " cannot be created: ", quoted_input(p.string()),
            " is not a writable folder."));
}

bool is_standard_output(const std::string& path) {
  struct stat out {}, at {};
  return ::fstat(STDOUT_FILENO, &out) == 0 && ::stat(path.c_str(), &at) == 0 && out.st_dev == at.st_dev &&
         out.st_ino == at.st_ino;
}

NumberedFiles::NumberedFiles(std::string dir, std::string prefix, std::string ext)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), ext_(std::move(ext)) {}

std::string NumberedFiles::staging_path() const {
  return (fs::path(dir_) / cat(".", prefix_, "writing-", ::getpid(), ext_)).string();
}

std::string NumberedFiles::publish(const std::string& written) const {
  long next = 1;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec))
    next = std::max(next, number_in(e.path().filename().string(), prefix_, ext_) + 1);
  for (;; ++next) {
    char digits[24];
    std::snprintf(digits, sizeof digits, "%04ld", next);
    const std::string path = (fs::path(dir_) / (prefix_ + digits + ext_)).string();
    // link() fails with EEXIST instead of replacing: the number is taken, try the next one.
    if (::link(written.c_str(), path.c_str()) == 0) return path;
    if (errno == EEXIST) continue;
    // File systems without hard links: check, then rename (a race with another writer could replace its file).
    if (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP) {
      if (fs::exists(path, ec)) continue;
      H3_CHECK(std::rename(written.c_str(), path.c_str()) == 0, "cannot rename ", written, " to ", path, ": ",
               std::strerror(errno));
      return path;
    }
    fail("cannot name the output ", path, ": ", std::strerror(errno));
  }
}

StagedOutputs::~StagedOutputs() {
  files_.clear();  // each removes its temporary file unless it was committed
  if (published_) return;
  for (auto it = created_folders_.rbegin(); it != created_folders_.rend(); ++it) ::rmdir(it->c_str());
}

void StagedOutputs::create_folders(const std::string& dir) {
  std::vector<fs::path> missing;  // innermost first
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    const bool made = fs::create_directory(*it, ec);
    H3_CHECK(!ec && fs::is_directory(*it), "cannot create the folder ", quoted_input(it->string()),
             ec ? cat(": ", ec.message()) : std::string());
    if (!made) continue;  // made meanwhile by someone else: theirs
    created_folders_.push_back(it->string());
    folder_registrations_.emplace_back(it->string(), PartialPath::Kind::Folder);
  }
}

OutputFile& StagedOutputs::file(const std::string& path) {
  files_.push_back(std::make_unique<OutputFile>(path));
  return *files_.back();
}

OutputFile& StagedOutputs::numbered_file(const NumberedFiles& numbered) {
  H3_CHECK(!numbered_, "StagedOutputs: one numbered file per run");
  create_folders(numbered.dir());
  numbered_ = numbered;
  numbered_file_ = &file(numbered.staging_path());
  return *numbered_file_;
}

std::string StagedOutputs::publish() {
  std::string numbered_path;
  for (const std::unique_ptr<OutputFile>& f : files_) {
    if (f.get() != numbered_file_) {
      f->commit();
      continue;
    }
    // Numbered straight from the finished temporary file, which its OutputFile then removes (the number stays).
    f->finish();
    numbered_path = numbered_->publish(f->temp_path());
  }
  published_ = true;
  return numbered_path;
}

std::string create_session_folder(const std::string& base) {
  std::error_code ec;
  fs::create_directories(base, ec);
  H3_CHECK(!ec && fs::is_directory(base), "cannot create the output folder ", base, ": ", ec.message());
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "session-%Y%m%d-%H%M%S", &local);
  for (int n = 1;; ++n) {
    const fs::path dir = fs::path(base) / (n == 1 ? std::string(stamp) : cat(stamp, "-", n));
    if (fs::create_directory(dir, ec)) return dir.string();
    H3_CHECK(!ec, "cannot create the session folder ", dir.string(), ": ", ec.message());
  }
}

void print_error_lines(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) std::fprintf(stderr, "h3: %s\n", line.c_str());
}

void copy_file_to(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  H3_CHECK(in.good(), "cannot read ", from, " to copy it to ", to);
  OutputFile out(to);  // removes its temporary file unless committed
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (in.gcount() > 0) out.write(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  H3_CHECK(in.eof(), "cannot read ", from, " to copy it to ", to);
  out.commit();
}

std::string format_seconds(double s) {
  char buf[48];
  if (s < 60)
    std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
  else
    std::snprintf(buf, sizeof buf, "%d m %02d s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  char buf[48];
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (mib < 1024)
    std::snprintf(buf, sizeof buf, "%.0f MiB", mib);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", mib / 1024.0);
  return buf;
}

}  // namespace h3::app
