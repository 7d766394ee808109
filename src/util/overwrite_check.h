// Outputs never overwrite inputs: the rule every entry point applies to its paths before it loads anything.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace h3 {

// A path a run reads or writes, with the name its sentences give it: the flag or command ("-o", "--first-frame").
struct NamedPath {
  std::string name;
  std::string path;
};

// An output folder and the names of the files the run writes in it (--frames-dir: frame_00000.ppm, ...).
struct OutputFolder {
  NamedPath folder;
  std::function<bool(const std::string& file_name)> writes;
};

// The first way the outputs would overwrite what they must not, as one sentence naming both paths; nothing when
// they keep apart. An output (a file of `outputs`, or a file an OutputFolder writes) must not be inside the model
// folder `model_dir` or the same file as one of that folder's files (a hard link, a Hugging Face cache's blob that a
// snapshot links to), nor the same file as one of `inputs`, nor the same file as another output. Files are compared
// by identity — device and inode — when they exist, and by canonical folder and name when they do not yet; so
// "a.mp4", "./a.mp4" and a link to it are one file. Empty paths are skipped (an output not asked for).
std::optional<std::string> overwrite_problem(const std::string& model_dir, const std::vector<NamedPath>& inputs,
                                             const std::vector<NamedPath>& outputs,
                                             const std::vector<OutputFolder>& folders = {});

}  // namespace h3
