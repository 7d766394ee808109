#include "media/video_input.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "media/demuxer.h"
#include "media/image_resize.h"
#include "util/error.h"

extern "C" {
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
}


namespace h3 {

namespace {

using ffmpeg::Demuxer;

void check_frame_size(const Demuxer& demuxer, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0) demuxer.fail("its frames have no size");
  if (width * height > kMaxVideoFramePixels)
    demuxer.fail("its frames are ", width, "x", height, " pixels, more than the ", kMaxVideoFramePixels,
                 " a reference video may have");
}

AVStream* video_stream(const Demuxer& demuxer) {
  AVStream* stream = demuxer.first_stream(AVMEDIA_TYPE_VIDEO);
  if (stream == nullptr) demuxer.fail("it has no video stream");
  check_frame_size(demuxer, stream->codecpar->width, stream->codecpar->height);
  return stream;
}

// float(stream.average_rate or stream.guessed_rate) (references.py _decode_video_file): PyAV's Fraction of
// avg_frame_rate when both its terms are non-zero, else av_guess_frame_rate's.
AVRational stream_rate(const Demuxer& demuxer, AVStream* stream) {
  AVRational rate = stream->avg_frame_rate;
  if (rate.num == 0 || rate.den == 0) rate = av_guess_frame_rate(demuxer.format(), stream, nullptr);
  if (rate.num <= 0 || rate.den <= 0) demuxer.fail("it has no frame rate");
  return rate;
}

double rate_value(AVRational rate) { return static_cast<double>(rate.num) / static_cast<double>(rate.den); }

// The stream's display matrix: codecpar's coded side data from FFmpeg 6.1 on, the stream's side data before.
const int32_t* stream_display_matrix(const AVStream* stream) {
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(60, 30, 100)
  const AVPacketSideData* side = av_packet_side_data_get(stream->codecpar->coded_side_data,
                                                         stream->codecpar->nb_coded_side_data,
                                                         AV_PKT_DATA_DISPLAYMATRIX);
  return side != nullptr && side->size >= 9 * sizeof(int32_t) ? reinterpret_cast<const int32_t*>(side->data)
                                                               : nullptr;
#else
  size_t size = 0;
  const uint8_t* data = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  return data != nullptr && size >= 9 * sizeof(int32_t) ? reinterpret_cast<const int32_t*>(data) : nullptr;
#endif
}

// The reference's quarter turns: PyAV's int(av_display_rotation_get(m)) (truncated), then
// round(rotation / 90.0) % 4 in Python (ties to even, a non-negative remainder).
int matrix_quarter_turns(const Demuxer& demuxer, const int32_t* matrix) {
  if (matrix == nullptr) return 0;
  const double angle = av_display_rotation_get(matrix);
  if (!std::isfinite(angle)) demuxer.fail("its display matrix is not a rotation");
  const double turns = std::nearbyint(std::trunc(angle) / 90.0);
  return static_cast<int>(((static_cast<int64_t>(turns) % 4) + 4) % 4);
}

int frame_quarter_turns(const Demuxer& demuxer, const AVStream* stream, const AVFrame* frame) {
  const AVFrameSideData* side = av_frame_get_side_data(frame, AV_FRAME_DATA_DISPLAYMATRIX);
  if (side != nullptr && side->size >= 9 * sizeof(int32_t))
    return matrix_quarter_turns(demuxer, reinterpret_cast<const int32_t*>(side->data));
  return matrix_quarter_turns(demuxer, stream_display_matrix(stream));
}

// Decoded frames to RGB24 as PyAV's to_ndarray(format="rgb24") asks swscale for them (see the header).
class RgbConverter {
 public:
  explicit RgbConverter(const Demuxer& demuxer) : demuxer_(demuxer) {}
  ~RgbConverter() {
    sws_freeContext(sws_);
    av_freep(&buffer_[0]);
  }
  RgbConverter(const RgbConverter&) = delete;
  RgbConverter& operator=(const RgbConverter&) = delete;

  Rgb8Image convert(const AVFrame* frame) {
    const auto format = static_cast<AVPixelFormat>(frame->format);
    sws_ = sws_getCachedContext(sws_, frame->width, frame->height, format, frame->width, frame->height,
                                AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
    if (sws_ == nullptr)
      demuxer_.fail("FFmpeg cannot convert its ", av_get_pix_fmt_name(format), " frames of ", frame->width, "x",
                    frame->height, " pixels to RGB");
    follow_colour_tags(frame, format);
    if (frame->width != buffer_width_ || frame->height != buffer_height_) {
      av_freep(&buffer_[0]);
      // PyAV's own output buffers: av_image_alloc / av_frame_get_buffer with 16-byte alignment.
      if (av_image_alloc(buffer_, stride_, frame->width, frame->height, AV_PIX_FMT_RGB24, 16) < 0)
        fail("out of memory converting a ", frame->width, "x", frame->height, " video frame to RGB");
      buffer_width_ = frame->width;
      buffer_height_ = frame->height;
    }
    sws_scale(sws_, frame->data, frame->linesize, 0, frame->height, buffer_, stride_);
    Rgb8Image image;
    image.width = frame->width;
    image.height = frame->height;
    image.rgb.resize(static_cast<size_t>(image.width) * image.height * 3);
    for (int y = 0; y < image.height; ++y)
      std::memcpy(image.rgb.data() + static_cast<size_t>(y) * image.width * 3,
                  buffer_[0] + static_cast<ptrdiff_t>(y) * stride_[0], static_cast<size_t>(image.width) * 3);
    return image;
  }

 private:
  // The frame's YUV matrix and range, replacing swscale's untagged defaults only where the tags say otherwise
  // (so an untagged frame converts exactly as sws_getContext alone sets it up).
  void follow_colour_tags(const AVFrame* frame, AVPixelFormat format) {
    const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(format);
    if (desc == nullptr || (desc->flags & AV_PIX_FMT_FLAG_RGB) || desc->nb_components < 3) return;
    int *inverse = nullptr, *table = nullptr;
    int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
    if (sws_getColorspaceDetails(sws_, &inverse, &src_range, &table, &dst_range, &brightness, &contrast,
                                 &saturation) < 0)
      return;
    const int* wanted = sws_getCoefficients(frame->colorspace);
    const bool yuvj = format == AV_PIX_FMT_YUVJ420P || format == AV_PIX_FMT_YUVJ422P || format == AV_PIX_FMT_YUVJ444P ||
                      format == AV_PIX_FMT_YUVJ440P || format == AV_PIX_FMT_YUVJ411P;
    const int wanted_range = yuvj || frame->color_range == AVCOL_RANGE_JPEG ? 1 : 0;
    if (std::memcmp(wanted, inverse, 4 * sizeof(int)) == 0 && wanted_range == src_range) return;
    if (sws_setColorspaceDetails(sws_, wanted, wanted_range, table, dst_range, brightness, contrast, saturation) < 0)
      demuxer_.fail("FFmpeg cannot convert its frames with their colour tags");
  }

  const Demuxer& demuxer_;
  SwsContext* sws_ = nullptr;
  uint8_t* buffer_[4] = {};
  int stride_[4] = {};
  int buffer_width_ = 0, buffer_height_ = 0;
};

// Decodes the video stream, calling `on_frame(index, frame, turns)` for each decoded frame until it returns false;
// refuses a frame size change. Returns the number of frames seen.
template <typename OnFrame>
int64_t decode_frames(Demuxer& demuxer, AVStream* stream, OnFrame&& on_frame) {
  int64_t index = 0;
  int width = 0, height = 0, turns = 0;
  demuxer.decode(stream, [&](AVFrame* frame) {
    if (index == 0) {
      width = frame->width;
      height = frame->height;
      turns = frame_quarter_turns(demuxer, stream, frame);
      check_frame_size(demuxer, width, height);
    } else if (frame->width != width || frame->height != height) {
      demuxer.fail("its frames change size from ", width, "x", height, " to ", frame->width, "x", frame->height,
                   " at frame ", index);
    }
    return on_frame(index++, frame, turns);
  });
  if (index == 0) demuxer.fail("it holds no video frames");
  return index;
}

}  // namespace

VideoProbe probe_video(const MediaSource& source) {
  Demuxer demuxer(source, "video");
  AVStream* stream = video_stream(demuxer);
  const AVRational rate = stream_rate(demuxer, stream);
  VideoProbe probe;
  probe.coded_width = stream->codecpar->width;
  probe.coded_height = stream->codecpar->height;
  probe.clockwise_quarter_turns = matrix_quarter_turns(demuxer, stream_display_matrix(stream));
  const bool swapped = probe.clockwise_quarter_turns % 2 == 1;
  probe.width = swapped ? probe.coded_height : probe.coded_width;
  probe.height = swapped ? probe.coded_width : probe.coded_height;
  probe.fps = rate_value(rate);
  probe.fps_num = rate.num;
  probe.fps_den = rate.den;
  if (demuxer.format()->duration > 0) {
    probe.duration_seconds = static_cast<double>(demuxer.format()->duration) / AV_TIME_BASE;
  } else if (stream->duration > 0) {
    probe.duration_seconds = static_cast<double>(stream->duration) * av_q2d(stream->time_base);
  }
  probe.has_audio = demuxer.first_stream(AVMEDIA_TYPE_AUDIO) != nullptr;
  probe.codec = avcodec_get_name(stream->codecpar->codec_id);
  return probe;
}

DecodedVideo read_video(const MediaSource& source, int64_t max_frames) {
  H3_CHECK(max_frames >= 1, "read_video needs max_frames >= 1, got ", max_frames);
  Demuxer demuxer(source, "video");
  AVStream* stream = video_stream(demuxer);
  DecodedVideo out;
  out.fps = rate_value(stream_rate(demuxer, stream));
  RgbConverter converter(demuxer);
  decode_frames(demuxer, stream, [&](int64_t index, AVFrame* frame, int turns) {
    append_frame(out.frames, rotate_clockwise(converter.convert(frame), turns), 1);
    return index + 1 < max_frames;
  });
  return out;
}

Rgb8Video read_reference_video(const MediaSource& source, int64_t num_frames, int canvas_width, int canvas_height,
                               double target_fps) {
  H3_CHECK(num_frames >= 1 && canvas_width >= 1 && canvas_height >= 1, "reading a reference video needs at least ",
           "one frame on a canvas of at least 1x1 pixels, got ", num_frames, " frames on ", canvas_width, "x",
           canvas_height);
  Demuxer demuxer(source, "video");
  AVStream* stream = video_stream(demuxer);
  const double fps = rate_value(stream_rate(demuxer, stream));
  const bool same_rate = fps == target_fps;
  RgbConverter converter(demuxer);
  Rgb8Video out;
  const int stream_turns = matrix_quarter_turns(demuxer, stream_display_matrix(stream));
  decode_frames(demuxer, stream, [&](int64_t index, AVFrame* frame, int turns) {
    // The caller's canvas comes from probe_video's size: frames of another size (or turned otherwise) would
    // make it the wrong one.
    if (index == 0 && (turns != stream_turns || frame->width != stream->codecpar->width ||
                       frame->height != stream->codecpar->height))
      demuxer.fail("its frames decode at ", frame->width, "x", frame->height, " pixels and ", turns,
                   " quarter turns where its header says ", stream->codecpar->width, "x", stream->codecpar->height,
                   " and ", stream_turns);
    const int64_t shown = same_rate ? std::min<int64_t>(index + 1, num_frames)
                                    : std::min(fps_slot(index + 1, fps, target_fps), num_frames);
    const int64_t copies = shown - out.frames;
    if (copies > 0) {
      Rgb8Image image = rotate_clockwise(converter.convert(frame), turns);
      if (image.width != canvas_width || image.height != canvas_height)
        image = resize_rgb8(image, canvas_width, canvas_height, ResampleFilter::Lanczos);
      append_frame(out, image, copies);
    }
    return out.frames < num_frames;
  });
  if (out.frames == 0)
    demuxer.fail("it gives no frame at ", target_fps, " fps (its frames at ", fps, " fps are all dropped)");
  return out;
}

}  // namespace h3
