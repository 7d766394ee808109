// Small helpers shared by the media writers that use FFmpeg's libraries (internal to src/media).
#pragma once
#include <memory>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

namespace h3::ffmpeg {

// FFmpeg's message for an error code ("Invalid argument", "Encoder not found", ...).
std::string error_string(int errnum);

// Lowers FFmpeg's own logging to errors only (once per process; FFmpeg's log level is global).
void quiet_logging();

// Throws h3::Error "<step>: <FFmpeg's message>" when rc < 0; returns rc otherwise.
int check(int rc, const char* step);

struct CodecContextDeleter { void operator()(AVCodecContext* c) const { avcodec_free_context(&c); } };
struct FrameDeleter { void operator()(AVFrame* f) const { av_frame_free(&f); } };
struct PacketDeleter { void operator()(AVPacket* p) const { av_packet_free(&p); } };
struct SwsDeleter { void operator()(SwsContext* s) const { sws_freeContext(s); } };

using CodecContextPtr = std::unique_ptr<AVCodecContext, CodecContextDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using SwsPtr = std::unique_ptr<SwsContext, SwsDeleter>;

FramePtr alloc_frame();
PacketPtr alloc_packet();

}  // namespace h3::ffmpeg
