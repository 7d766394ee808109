// Every file h3 writes goes through OutputFile, which writes by what is at the destination path:
//
//   nothing, or a regular file   the data goes to "<file>.partial-<pid>" beside the file and only commit() renames
//                                it into place; a writer that fails or throws before commit() leaves nothing behind
//                                (the destructor removes the temporary file). A symbolic link to a regular file is
//                                followed: the file it points to is replaced, the link stays. Until then the
//                                temporary file is registered in util/partial_files.h, so an immediate exit (a
//                                second Ctrl-C) removes it too.
//   a FIFO or character device   written straight into (a pipe, /dev/null, /dev/stdout, a terminal), never replaced;
//                                a failed write (ENOSPC on /dev/full, EPIPE) is an error.
//   anything else                refused with one sentence: a folder, a block device, a socket, a link to nothing.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "util/partial_files.h"

namespace h3 {

enum class OutputKind {
  NewFile,      // nothing at the path yet
  RegularFile,  // a regular file at the path, or where the symbolic link at the path points
  Stream,       // a FIFO or a character device
  Refused,      // something h3 does not write to (OutputTarget::problem says what)
};

struct OutputTarget {
  OutputKind kind = OutputKind::NewFile;
  // NewFile, RegularFile: the file the data ends up in (the path itself, or a link's destination).
  std::string file;
  // Stream: "a FIFO" or "a character device". Refused: the rest of a sentence that starts with the path ("is a
  // block device; ..."), without the final full stop.
  std::string what;
};

// What is at `path` and how it would be written; looks only, creates nothing.
OutputTarget inspect_output_target(const std::string& path);

class OutputFile {
 public:
  // Inspects the destination: throws for a refused one and for a file whose folder does not exist; creates nothing.
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::string& path() const { return path_; }
  // The destination is a FIFO or a character device, written straight into (no temporary file).
  bool streamed() const { return target_.kind == OutputKind::Stream; }
  // What the destination is when streamed() ("a FIFO", "a character device").
  const std::string& stream_kind() const { return target_.what; }

  // The temporary file, for a writer that opens files by name (FFmpeg's muxer); it must close the file before
  // commit(). Throws for a streamed destination, which has none.
  const std::string& temp_path() const;

  // Appends `size` bytes (opening the temporary file, or the stream, on the first call).
  void write(const void* data, size_t size);
  // The data is complete: a temporary file is flushed to disk and closed, so that commit() only renames it (a stream
  // stays open until commit). Throws when a step fails; the destination is untouched either way. Idempotent.
  void finish();
  // Finishes (when not done yet), then a temporary file is renamed into place, a stream is closed. Throws (and leaves
  // a regular destination untouched) when a step fails.
  void commit();
  void write_all_and_commit(const void* data, size_t size) {
    write(data, size);
    commit();
  }

 private:
  void open_for_writing();

  std::string path_;
  OutputTarget target_;
  std::string temp_path_;  // empty for a stream
  int fd_ = -1;
  bool finished_ = false;
  bool committed_ = false;
  std::optional<PartialPath> partial_;  // the temporary file, until it is renamed or removed
};

}  // namespace h3
