#include "media/png_writer.h"

#include <cstring>

#include "media/ffmpeg_util.h"
#include "util/error.h"
#include "util/output_file.h"

namespace h3 {

using ffmpeg::check;

std::vector<uint8_t> encode_png(const uint8_t* rgb, int width, int height) {
  H3_CHECK(width > 0 && height > 0, "a PNG image needs at least 1x1 pixels (got ", width, "x", height, ")");
  H3_CHECK(rgb != nullptr, "the PNG pixels are missing");
  ffmpeg::quiet_logging();
  const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
  H3_CHECK(codec != nullptr, "this FFmpeg build has no PNG encoder");
  ffmpeg::CodecContextPtr enc(avcodec_alloc_context3(codec));
  H3_CHECK(enc != nullptr, "allocating the PNG encoder: out of memory");
  enc->width = width;
  enc->height = height;
  enc->pix_fmt = AV_PIX_FMT_RGB24;
  enc->time_base = AVRational{1, 1};
  check(avcodec_open2(enc.get(), codec, nullptr), "opening the PNG encoder");

  ffmpeg::FramePtr frame = ffmpeg::alloc_frame();
  frame->format = AV_PIX_FMT_RGB24;
  frame->width = width;
  frame->height = height;
  check(av_frame_get_buffer(frame.get(), 0), "allocating a PNG frame");
  const size_t row = static_cast<size_t>(width) * 3;
  for (int y = 0; y < height; ++y)
    std::memcpy(frame->data[0] + static_cast<size_t>(y) * frame->linesize[0], rgb + y * row, row);
  frame->pts = 0;

  check(avcodec_send_frame(enc.get(), frame.get()), "encoding the PNG");
  check(avcodec_send_frame(enc.get(), nullptr), "encoding the PNG");
  ffmpeg::PacketPtr pkt = ffmpeg::alloc_packet();
  check(avcodec_receive_packet(enc.get(), pkt.get()), "encoding the PNG");
  return std::vector<uint8_t>(pkt->data, pkt->data + pkt->size);
}

std::vector<uint8_t> encode_png(const Rgb8Image& image) {
  H3_CHECK(image.rgb.size() == static_cast<size_t>(image.width) * image.height * 3, "the image holds ",
           image.rgb.size(), " bytes, not the ", static_cast<size_t>(image.width) * image.height * 3, " of ",
           image.width, "x", image.height, " RGB24");
  return encode_png(image.rgb.data(), image.width, image.height);
}

void write_png(const std::string& path, const Rgb8Image& image) {
  OutputFile out(path);  // refuses a bad destination before the encode
  const std::vector<uint8_t> png = encode_png(image);
  out.write_all_and_commit(png.data(), png.size());
}

}  // namespace h3
