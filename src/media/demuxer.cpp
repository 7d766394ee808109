#include "media/demuxer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

extern "C" {
#include <libavutil/dict.h>
}

namespace h3::ffmpeg {

namespace {

constexpr int kIoBufferBytes = 1 << 16;

}  // namespace

// An AVIOContext over a MediaSource's read_at, with the position it reads from.
struct Demuxer::CustomIo {
  const MediaSource* source = nullptr;
  int64_t position = 0;
  AVIOContext* avio = nullptr;

  static int read(void* opaque, uint8_t* buf, int size) {
    auto* io = static_cast<CustomIo*>(opaque);
    const size_t n = io->source->read_at()(io->position, buf, static_cast<size_t>(size));
    if (n == 0) return AVERROR_EOF;
    io->position += static_cast<int64_t>(n);
    return static_cast<int>(n);
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* io = static_cast<CustomIo*>(opaque);
    const int64_t size = io->source->size();
    switch (whence & ~AVSEEK_FORCE) {
      case AVSEEK_SIZE: return size;
      case SEEK_SET: break;
      case SEEK_CUR: offset += io->position; break;
      case SEEK_END: offset += size; break;
      default: return AVERROR(EINVAL);
    }
    if (offset < 0) return AVERROR(EINVAL);
    io->position = offset;
    return offset;
  }
};

Demuxer::Demuxer(const MediaSource& source, std::string what) : what_(std::move(what)), name_(source.name()) {
  quiet_logging();
  try {
    open(source);
  } catch (...) {
    release();
    throw;
  }
}

void Demuxer::open(const MediaSource& source) {
  AVDictionary* options = nullptr;
  std::string url;
  if (source.is_file()) {
    struct stat st {};
    if (stat(name_.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) fail("the file does not exist");
      fail("it cannot be inspected (", std::strerror(errno), ")");
    }
    if (!S_ISREG(st.st_mode)) fail("it is not a regular file");
    if (st.st_size == 0) fail("the file is empty");
    // The file protocol only, also for what a playlist-like container would open next to it; "file:" keeps a
    // name with a colon from being read as another protocol.
    url = "file:" + name_;
    av_dict_set(&options, "protocol_whitelist", "file", 0);
  } else {
    if (source.size() == 0) fail("it is empty");
    format_ = avformat_alloc_context();
    H3_CHECK(format_ != nullptr, "out of memory allocating an FFmpeg demuxer");
    io_ = new CustomIo{&source};
    auto* buffer = static_cast<uint8_t*>(av_malloc(kIoBufferBytes));
    io_->avio = buffer ? avio_alloc_context(buffer, kIoBufferBytes, 0, io_, &CustomIo::read, nullptr,
                                            &CustomIo::seek)
                       : nullptr;
    if (io_->avio == nullptr) {
      av_free(buffer);
      H3_CHECK(false, "out of memory allocating an FFmpeg reader");
    }
    format_->pb = io_->avio;
    format_->flags |= AVFMT_FLAG_CUSTOM_IO;
    // Bytes in memory open nothing else (a playlist-like container would otherwise reach for files).
    av_dict_set(&options, "protocol_whitelist", "none", 0);
  }
  const int rc = avformat_open_input(&format_, url.c_str(), nullptr, &options);
  av_dict_free(&options);
  if (rc < 0) {
    format_ = nullptr;  // freed by avformat_open_input
    fail("it is not in a media format FFmpeg can read (FFmpeg: ", error_string(rc), ")");
  }
  const int info = avformat_find_stream_info(format_, nullptr);
  if (info < 0) fail("it is corrupt (FFmpeg: ", error_string(info), ")");
}

Demuxer::~Demuxer() { release(); }

void Demuxer::release() {
  avformat_close_input(&format_);
  if (io_ != nullptr) {
    if (io_->avio != nullptr) av_freep(&io_->avio->buffer);
    avio_context_free(&io_->avio);
    delete io_;
    io_ = nullptr;
  }
}

AVStream* Demuxer::first_stream(AVMediaType type) const {
  for (unsigned i = 0; i < format_->nb_streams; ++i)
    if (format_->streams[i]->codecpar->codec_type == type) return format_->streams[i];
  return nullptr;
}

bool Demuxer::decode(AVStream* stream, const std::function<bool(AVFrame*)>& on_frame) {
  const AVCodec* codec = avcodec_find_decoder(stream->codecpar->codec_id);
  if (codec == nullptr) fail("FFmpeg has no decoder for its ", avcodec_get_name(stream->codecpar->codec_id), " stream");
  CodecContextPtr context(avcodec_alloc_context3(codec));
  H3_CHECK(context != nullptr, "out of memory allocating an FFmpeg decoder");
  int rc = avcodec_parameters_to_context(context.get(), stream->codecpar);
  if (rc >= 0) {
    context->pkt_timebase = stream->time_base;
    rc = avcodec_open2(context.get(), codec, nullptr);
  }
  if (rc < 0) fail("its ", avcodec_get_name(stream->codecpar->codec_id), " decoder cannot be opened (FFmpeg: ",
                   error_string(rc), ")");

  PacketPtr packet = alloc_packet();
  FramePtr frame = alloc_frame();
  // Every frame the decoder has ready; false when `on_frame` asked to stop.
  const auto drain = [&]() {
    for (;;) {
      const int got = avcodec_receive_frame(context.get(), frame.get());
      if (got == AVERROR(EAGAIN) || got == AVERROR_EOF) return true;
      if (got < 0) fail("it is corrupt (FFmpeg's decoder: ", error_string(got), ")");
      const bool more = on_frame(frame.get());
      av_frame_unref(frame.get());
      if (!more) return false;
    }
  };
  for (;;) {
    const int read = av_read_frame(format_, packet.get());
    if (read == AVERROR_EOF) break;
    if (read < 0) fail("it is corrupt (FFmpeg's demuxer: ", error_string(read), ")");
    if (packet->stream_index != stream->index) {
      av_packet_unref(packet.get());
      continue;
    }
    int sent = avcodec_send_packet(context.get(), packet.get());
    while (sent == AVERROR(EAGAIN)) {  // the decoder wants its frames taken first
      if (!drain()) return true;
      sent = avcodec_send_packet(context.get(), packet.get());
    }
    av_packet_unref(packet.get());
    if (sent < 0) fail("it is corrupt (FFmpeg's decoder: ", error_string(sent), ")");
    if (!drain()) return true;
  }
  const int flushed = avcodec_send_packet(context.get(), nullptr);
  if (flushed < 0 && flushed != AVERROR_EOF) fail("it is corrupt (FFmpeg's decoder: ", error_string(flushed), ")");
  return !drain();
}

void Demuxer::seek_to_start() {
  const int rc = av_seek_frame(format_, -1, 0, AVSEEK_FLAG_BACKWARD);
  if (rc < 0) fail("it cannot be seeked back to its start (FFmpeg: ", error_string(rc), ")");
}

}  // namespace h3::ffmpeg
