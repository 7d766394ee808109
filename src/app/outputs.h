// Where the CLI's files go: destination checks made before any work, numbered names that never overwrite, the
// session folder, copies.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/output_file.h"
#include "util/overwrite_check.h"
#include "util/partial_files.h"

namespace h3::app {

// Throw UsageError unless `path` can be written (util/output_file.h): a FIFO or a character device that h3 may write
// to, or a file whose folder exists and is writable; not a folder, a block device, a socket or a link to nothing.
// `flag` names the option in the sentence ("--wav").
void check_file_destination(const std::string& flag, const std::string& path);
// The same for an MP4, which also refuses a FIFO or a device (media/mp4_writer.h's kMp4NeedsAFile).
void check_mp4_destination(const std::string& flag, const std::string& path);
// Throw UsageError unless the MP4's name ends in .mp4, .mov or .m4v (any case).
void check_mp4_name(const std::string& flag, const std::string& path);
// Throw UsageError when an output would overwrite the model folder, an input or another output
// (util/overwrite_check.h); `frames_dir` (--frames-dir, may be empty) writes its frame files.
void check_outputs_apart(const std::string& model_dir, const std::vector<NamedPath>& inputs,
                         const std::vector<NamedPath>& outputs, const NamedPath& frames_dir = {});
// Throw UsageError unless `dir` is a writable folder or can be created (its nearest existing ancestor is a
// writable folder).
void check_folder_destination(const std::string& flag, const std::string& dir);

// Whether `path` names the file or pipe standard output writes to (/dev/stdout, or the file stdout was redirected to).
bool is_standard_output(const std::string& path);

// Numbered files DIR/PREFIX0001.EXT, PREFIX0002.EXT, ...: a file is written under staging_path() (in DIR, which
// the writer creates), then publish() links it to the number after the highest one present — an existing file is
// never replaced, even by a concurrent h3 (a taken number moves on to the next).
class NumberedFiles {
 public:
  NumberedFiles(std::string dir, std::string prefix, std::string ext);
  const std::string& dir() const { return dir_; }
  // DIR/.PREFIXwriting-PID.EXT
  std::string staging_path() const;
  // Gives the complete file `written` (in DIR) its number; returns the final path. `written` is left for its owner
  // to remove.
  std::string publish(const std::string& written) const;

 private:
  std::string dir_, prefix_, ext_;
};

// The outputs of one run, written under temporary names and published together: until publish() nothing new is
// visible, and a run that fails or is cancelled before it (the destructor) leaves nothing new on disk — its
// temporary files are removed, and the folders it created. A FIFO or a character device is written straight into
// (there is nothing to stage). Every temporary file and created folder is registered in util/partial_files.h, so an
// immediate exit (a second Ctrl-C) removes them too.
class StagedOutputs {
 public:
  StagedOutputs() = default;
  ~StagedOutputs();
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;

  // Creates `dir` and its missing parents, removed again unless published.
  void create_folders(const std::string& dir);
  // A file to write at `path` (util/output_file.h: its folder must exist); the caller writes and finish()es it.
  OutputFile& file(const std::string& path);
  // The file that publish() gives the next number of `numbered` (its folder is created).
  OutputFile& numbered_file(const NumberedFiles& numbered);
  // Renames every file into place and numbers the numbered one; returns the numbered file's path ("" when none).
  std::string publish();

 private:
  std::vector<std::unique_ptr<OutputFile>> files_;
  std::vector<std::string> created_folders_;  // outermost first
  std::vector<PartialPath> folder_registrations_;
  std::optional<NumberedFiles> numbered_;
  OutputFile* numbered_file_ = nullptr;
  bool published_ = false;
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
