#include "media/ffmpeg_util.h"

#include <mutex>

#include "util/error.h"

extern "C" {
#include <libavutil/error.h>
#include <libavutil/log.h>
}

namespace h3::ffmpeg {

std::string error_string(int errnum) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(errnum, buf, sizeof buf);
  return buf;
}

void quiet_logging() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_level(AV_LOG_ERROR); });
}

int check(int rc, const char* step) {
  if (rc < 0) fail(step, ": ", error_string(rc));
  return rc;
}

FramePtr alloc_frame() {
  FramePtr f(av_frame_alloc());
  H3_CHECK(f != nullptr, "out of memory allocating an FFmpeg frame");
  return f;
}

PacketPtr alloc_packet() {
  PacketPtr p(av_packet_alloc());
  H3_CHECK(p != nullptr, "out of memory allocating an FFmpeg packet");
  return p;
}

}  // namespace h3::ffmpeg
