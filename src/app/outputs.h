// Where the CLI's files go: destination checks made before any work, numbered names that never overwrite, the
// session folder, copies.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "util/overwrite_check.h"

namespace h3::app {

// Throw UsageError unless `path` can be written (util/output_file.h): a FIFO or a character device that h3 may write
// to, or a file whose folder exists and is writable; not a folder, a block device, a socket or a link to nothing.
// `flag` names the option in the sentence ("--wav").
void check_file_destination(const std::string& flag, const std::string& path);
// The same for an MP4, which also refuses a FIFO or a device (media/mp4_writer.h's kMp4NeedsAFile).
void check_mp4_destination(const std::string& flag, const std::string& path);
// Throw UsageError when an output would overwrite the model folder, an input or another output
// (util/overwrite_check.h); `frames_dir` (--frames-dir, may be empty) writes its frame files.
void check_outputs_apart(const std::string& model_dir, const std::vector<NamedPath>& inputs,
                         const std::vector<NamedPath>& outputs, const NamedPath& frames_dir = {});
// Throw UsageError unless `dir` is a writable folder or can be created (its nearest existing ancestor is a
// writable folder).
void check_folder_destination(const std::string& flag, const std::string& dir);

// Whether `path` names the file or pipe standard output writes to (/dev/stdout, or the file stdout was redirected to).
bool is_standard_output(const std::string& path);

// Numbered files DIR/PREFIX0001.EXT, PREFIX0002.EXT, ...: publish() creates DIR when missing, writes through
// `write(temp_path)` to a temporary name in DIR, then links it to the number after the highest one present — an existing file is never
// replaced, even by a concurrent h3 (a taken number moves on to the next). Returns the final path.
class NumberedFiles {
 public:
  NumberedFiles(std::string dir, std::string prefix, std::string ext);
  std::string publish(const std::function<void(const std::string& temp_path)>& write) const;

 private:
  std::string dir_, prefix_, ext_;
};

// Where generated videos go unless -o says otherwise (numbered files there; a session folder in it).
constexpr const char* kDefaultOutputDir = "outputs";

// Every line of a (possibly multi-line) message on stderr, each marked "h3: ".
void print_error_lines(const std::string& text);

// Creates BASE/session-YYYYMMDD-HHMMSS (with -2, -3, ... when taken) and returns it.
std::string create_session_folder(const std::string& base);

// Copies `from` to `to` through OutputFile (util/output_file.h): a file is replaced whole or not at all, a FIFO or a
// character device is written straight into.
void copy_file_to(const std::string& from, const std::string& to);

// "3.2 s", "1 m 05 s"
std::string format_seconds(double s);
// "512 MiB", "1.50 GiB"
std::string format_bytes(uint64_t bytes);

}  // namespace h3::app
