#include "util/overwrite_check.h"

#include <sys/stat.h>

#include <filesystem>

#include "util/error.h"

namespace h3 {

namespace fs = std::filesystem;

namespace {

// Where a path leads: the file's identity when it exists, its canonical place (folders resolved) in any case.
struct Location {
  fs::path canonical;
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
};

Location locate(const std::string& path) {
  Location l;
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  l.canonical = fs::weakly_canonical(absolute, ec);
  if (ec) l.canonical = absolute.lexically_normal();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    l.exists = true;
    l.device = st.st_dev;
    l.inode = st.st_ino;
  }
  return l;
}

bool same_file(const Location& a, const Location& b) {
  if (a.exists || b.exists) return a.exists && b.exists && a.device == b.device && a.inode == b.inode;
  return a.canonical == b.canonical;
}

// Whether `l` is the folder `root` or lies inside it: some folder on its canonical path is `root` itself.
bool within(const Location& l, const Location& root) {
  if (!root.exists) return false;
  for (fs::path p = l.canonical;; p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && st.st_dev == root.device && st.st_ino == root.inode) return true;
    if (p.empty() || p == p.parent_path()) return false;
  }
}

// The files under `dir` (links followed to the files they name), as the sentences name them.
std::vector<std::pair<std::string, Location>> files_under(const std::string& dir) {
  std::vector<std::pair<std::string, Location>> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (!it->is_directory(ec)) out.emplace_back(it->path().string(), locate(it->path().string()));
  return out;
}

}  // namespace

std::optional<std::string> overwrite_problem(const std::string& model_dir, const std::vector<NamedPath>& inputs,
                                             const std::vector<NamedPath>& outputs,
                                             const std::vector<OutputFolder>& folders) {
  const Location model = locate(model_dir);
  auto in_model = [&](const NamedPath& p, const Location& at) -> std::optional<std::string> {
    if (model_dir.empty() || !within(at, model)) return std::nullopt;
    return cat(p.name, " '", p.path, "' ", same_file(at, model) ? "is" : "is inside", " the model folder '", model_dir,
               "'; write outputs elsewhere.");
  };
  std::vector<std::pair<NamedPath, Location>> files, read;
  for (const NamedPath& o : outputs)
    if (!o.path.empty()) files.emplace_back(o, locate(o.path));
  for (const NamedPath& i : inputs)
    if (!i.path.empty()) read.emplace_back(i, locate(i.path));

  for (const OutputFolder& f : folders) {
    if (f.folder.path.empty()) continue;
    const Location folder = locate(f.folder.path);
    if (auto problem = in_model(f.folder, folder)) return problem;
    auto written = [&](const Location& at) {
      return same_file(locate(at.canonical.parent_path().string()), folder) && f.writes(at.canonical.filename().string());
    };
    for (const auto& [i, at] : read)
      if (written(at))
        return cat(f.folder.name, " '", f.folder.path, "' would write over the input ", i.name, " '", i.path,
                   "'; h3 does not write over its inputs.");
    for (const auto& [o, at] : files)
      if (written(at))
        return cat(f.folder.name, " '", f.folder.path, "' would write over ", o.name, " '", o.path,
                   "'; give each output its own place.");
  }

  std::optional<std::vector<std::pair<std::string, Location>>> model_files;  // read once, when an output exists
  for (size_t k = 0; k < files.size(); ++k) {
    const auto& [o, at] = files[k];
    if (auto problem = in_model(o, at)) return problem;
    if (at.exists && !model_dir.empty()) {
      if (!model_files) model_files = files_under(model_dir);
      for (const auto& [name, file] : *model_files)
        if (same_file(at, file))
          return cat(o.name, " '", o.path, "' is the model file '", name, "' (the same file); write outputs "
                     "elsewhere.");
    }
    for (const auto& [i, file] : read)
      if (same_file(at, file))
        return cat(o.name, " '", o.path, "' is the same file as ", i.name, " '", i.path,
                   "'; h3 does not write over its inputs.");
    for (size_t j = 0; j < k; ++j)
      if (same_file(at, files[j].second))
        return cat(o.name, " '", o.path, "' is the same file as ", files[j].first.name, " '", files[j].first.path,
                   "'; give each output its own name.");
  }
  return std::nullopt;
}

}  // namespace h3
