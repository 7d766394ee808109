// Internal to src/media: a MediaSource opened by libavformat as PyAV's av.open opens a file (avformat_open_input,
// then avformat_find_stream_info), and the decode loop of one of its streams. Every refusal is one sentence,
// "Cannot read the <what> <name>: <rule>."
#pragma once
#include <functional>
#include <string>

#include "media/ffmpeg_util.h"
#include "media/media_source.h"
#include "util/error.h"

namespace h3::ffmpeg {

class Demuxer {
 public:
  // `what` names the input in messages ("video", "audio"). Refuses a missing, non-regular or empty file, bytes
  // FFmpeg recognizes as no media format, and a container whose stream info cannot be read.
  Demuxer(const MediaSource& source, std::string what);
  ~Demuxer();
  Demuxer(const Demuxer&) = delete;
  Demuxer& operator=(const Demuxer&) = delete;

  AVFormatContext* format() const { return format_; }
  // The first stream of `type` in the container's order, as PyAV's container.streams.video[0]; nullptr if none.
  AVStream* first_stream(AVMediaType type) const;

  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    h3::fail("Cannot read the ", what_, " ", name_, ": ", std::forward<Args>(args)..., ".");
  }

  // Demuxes packets, decodes those of `stream` and hands each decoded frame to `on_frame` until it returns false
  // (then true is returned at once) or the stream ends (the decoder is flushed; false is returned). A read or
  // decode error is refused as corrupt, as PyAV raises it.
  bool decode(AVStream* stream, const std::function<bool(AVFrame*)>& on_frame);

  // PyAV's container.seek(0): av_seek_frame(-1, 0, AVSEEK_FLAG_BACKWARD). Refused when the container cannot.
  void seek_to_start();

 private:
  struct CustomIo;
  void open(const MediaSource& source);
  void release();
  std::string what_, name_;
  AVFormatContext* format_ = nullptr;
  CustomIo* io_ = nullptr;
};

}  // namespace h3::ffmpeg
