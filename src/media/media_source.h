// Where the bytes of a video or audio reference come from (spec/sampling.md §4): a file, opened by its path as
// PyAV's av.open(path) opens it (the reference's references.py from_file); a buffer in memory; or a reader called
// for byte ranges, for a source that is never held whole. Decoded by FFmpeg's libavformat/libavcodec in
// media/video_input.h and media/audio_input.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace h3 {

class MediaSource {
 public:
  // Copies up to `size` bytes starting at `offset` into `dst` and returns how many; fewer only at the end.
  using ReadAt = std::function<size_t(int64_t offset, uint8_t* dst, size_t size)>;

  // A file on disk. Whether it exists and is a regular, non-empty file is checked when a reader opens it.
  static MediaSource file(std::string path);
  // `size` bytes at `data`, which must outlive every reader of this source; `name` stands for it in messages.
  static MediaSource memory(const uint8_t* data, size_t size, std::string name);
  // `size` bytes served by `read_at`; `name` stands for it in messages.
  static MediaSource reader(std::string name, int64_t size, ReadAt read_at);

  const std::string& name() const { return name_; }
  bool is_file() const { return !read_at_; }
  int64_t size() const { return size_; }  // memory and reader sources
  const ReadAt& read_at() const { return read_at_; }

 private:
  std::string name_;
  int64_t size_ = 0;
  ReadAt read_at_;
};

}  // namespace h3
