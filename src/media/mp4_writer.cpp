#include "media/mp4_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "media/ffmpeg_util.h"
#include "util/cancel.h"
#include "util/error.h"
#include "util/output_file.h"

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/mathematics.h>
#include <libavutil/opt.h>
}

namespace h3 {

using ffmpeg::check;

int64_t audio_samples_for_frames(int frames, int fps, int sample_rate) {
  return std::llround(static_cast<double>(frames) * sample_rate / fps);
}

namespace {

constexpr int kAudioChannels = 2;

void validate(const Rgb8Video& video, const float* audio, int64_t samples, const Mp4Options& o) {
  H3_CHECK(video.frames > 0 && video.width > 0 && video.height > 0, "an MP4 needs at least one frame of at least 2x2 ",
           "pixels (got ", video.frames, " frames of ", video.width, "x", video.height, ")");
  H3_CHECK(video.width % 2 == 0 && video.height % 2 == 0, "H.264 yuv420p needs an even width and height (got ",
           video.width, "x", video.height, "); odd sizes are not padded");
  H3_CHECK(video.rgb.size() == static_cast<size_t>(video.frames) * video.frame_bytes(), "the video holds ",
           video.rgb.size(), " bytes but ", video.frames, " frames of ", video.width, "x", video.height,
           " RGB24 need ", static_cast<size_t>(video.frames) * video.frame_bytes());
  H3_CHECK(o.fps >= 1 && o.fps <= 240, "the frame rate must be in [1, 240] fps (got ", o.fps, ")");
  H3_CHECK(o.crf >= 0 && o.crf <= 51, "the H.264 CRF must be in [0, 51] (got ", o.crf, ")");
  H3_CHECK(o.threads >= 0, "the encoder thread count must be >= 0 (0 = automatic; got ", o.threads, ")");
  H3_CHECK(samples >= 0, "the audio sample count must be >= 0 (got ", samples, ")");
  H3_CHECK(samples == 0 || audio != nullptr, "the audio samples are missing (", samples, " announced)");
  if (samples > 0) {
    H3_CHECK(o.audio_sample_rate >= 8000 && o.audio_sample_rate <= 96000, "the audio sample rate must be in ",
             "[8000, 96000] Hz (got ", o.audio_sample_rate, ")");
    H3_CHECK(o.audio_bitrate >= 16000 && o.audio_bitrate <= 512000, "the AAC bit rate must be in [16000, 512000] ",
             "bit/s (got ", o.audio_bitrate, ")");
  }
}

// One encoder feeding one stream of the muxer.
struct Track {
  ffmpeg::CodecContextPtr enc;
  AVStream* stream = nullptr;
  const char* name = "";
};

// Owns the muxer context and its open file; everything is released (file closed) on destruction.
class Muxer {
 public:
  explicit Muxer(const std::string& temp_path) {
    check(avformat_alloc_output_context2(&fmt_, nullptr, "mp4", temp_path.c_str()), "allocating the MP4 muxer");
    int rc = avio_open(&fmt_->pb, temp_path.c_str(), AVIO_FLAG_WRITE);
    if (rc < 0) {
      release();
      check(rc, cat("creating ", temp_path).c_str());
    }
  }
  ~Muxer() { release(); }
  Muxer(const Muxer&) = delete;
  Muxer& operator=(const Muxer&) = delete;

  AVFormatContext* fmt() { return fmt_; }

  // Opens `enc` (with its private options) and adds a stream carrying its parameters.
  // `settings` is appended to the error message when opening fails.
  Track add_track(ffmpeg::CodecContextPtr enc, AVDictionary** opts, const char* name, const std::string& settings) {
    if (fmt_->oformat->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    check(avcodec_open2(enc.get(), enc->codec, opts), cat("opening the ", name, " encoder", settings).c_str());
    const AVDictionaryEntry* unused = av_dict_get(*opts, "", nullptr, AV_DICT_IGNORE_SUFFIX);
    H3_CHECK(unused == nullptr, "the ", name, " encoder does not know the option ", unused ? unused->key : "");
    AVStream* st = avformat_new_stream(fmt_, nullptr);
    H3_CHECK(st != nullptr, "adding the ", name, " stream: out of memory");
    check(avcodec_parameters_from_context(st->codecpar, enc.get()), cat("copying the ", name, " parameters").c_str());
    st->time_base = enc->time_base;  // a hint; the muxer picks its own in write_header
    return Track{std::move(enc), st, name};
  }

  void write_header(const Mp4Options& o) {
    for (const auto& [key, value] : o.metadata)
      check(av_dict_set(&fmt_->metadata, key.c_str(), value.c_str(), 0), "setting the MP4's metadata");
    AVDictionary* opts = nullptr;
    av_dict_set(&opts, "movflags", o.metadata.empty() ? "+faststart" : "+faststart+use_metadata_tags", 0);
    int rc = avformat_write_header(fmt_, &opts);
    av_dict_free(&opts);
    check(rc, "writing the MP4 header");
  }

  // Sends `frame` (null: flush) to the track's encoder and writes every packet it returns.
  void encode(Track& t, AVFrame* frame, AVPacket* pkt) {
    check(avcodec_send_frame(t.enc.get(), frame), cat("encoding ", t.name).c_str());
    for (;;) {
      throw_if_cancelled();  // the flush at the end returns the encoder's whole lookahead, a packet at a time
      int rc = avcodec_receive_packet(t.enc.get(), pkt);
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      check(rc, cat("encoding ", t.name).c_str());
      // libx264 leaves the duration unset; every video packet lasts one frame (1 tick of 1/fps).
      if (pkt->duration == 0 && t.enc->codec_type == AVMEDIA_TYPE_VIDEO) pkt->duration = 1;
      av_packet_rescale_ts(pkt, t.enc->time_base, t.stream->time_base);
      pkt->stream_index = t.stream->index;
      check(av_interleaved_write_frame(fmt_, pkt), cat("writing a ", t.name, " packet").c_str());
    }
  }

  void finish() {
    check(av_write_trailer(fmt_), "finishing the MP4 (trailer and faststart index)");
    check(avio_closep(&fmt_->pb), "closing the MP4 file");
  }

 private:
  void release() {
    if (fmt_ && fmt_->pb) avio_closep(&fmt_->pb);
    avformat_free_context(fmt_);
    fmt_ = nullptr;
  }

  AVFormatContext* fmt_ = nullptr;
};

ffmpeg::CodecContextPtr video_encoder(const Rgb8Video& video, const Mp4Options& o, AVDictionary** opts) {
  const AVCodec* codec = avcodec_find_encoder_by_name(o.video_encoder.c_str());
  H3_CHECK(codec != nullptr, "this FFmpeg build has no '", o.video_encoder, "' encoder, which MP4 output needs ",
           "for H.264 (Debian's libavcodec has libx264)");
  H3_CHECK(codec->id == AV_CODEC_ID_H264, "the encoder '", o.video_encoder, "' does not produce H.264");
  ffmpeg::CodecContextPtr enc(avcodec_alloc_context3(codec));
  H3_CHECK(enc != nullptr, "allocating the H.264 encoder: out of memory");
  enc->width = video.width;
  enc->height = video.height;
  enc->pix_fmt = AV_PIX_FMT_YUV420P;
  enc->time_base = AVRational{1, o.fps};
  enc->framerate = AVRational{o.fps, 1};
  enc->sample_aspect_ratio = AVRational{1, 1};
  enc->thread_count = o.threads;
  // The pixels are converted with the BT.709 matrix into limited range, and tagged so players agree.
  enc->color_range = AVCOL_RANGE_MPEG;
  enc->colorspace = AVCOL_SPC_BT709;
  enc->color_primaries = AVCOL_PRI_BT709;
  enc->color_trc = AVCOL_TRC_BT709;
  if (o.video_encoder == "libx264" || o.video_encoder == "libx264rgb") {
    av_dict_set(opts, "preset", o.preset.c_str(), 0);
    av_dict_set_int(opts, "crf", o.crf, 0);
  }
  return enc;
}

ffmpeg::CodecContextPtr audio_encoder(const Mp4Options& o) {
  const AVCodec* codec = avcodec_find_encoder_by_name("aac");
  H3_CHECK(codec != nullptr, "this FFmpeg build has no native 'aac' encoder, which MP4 audio needs");
  ffmpeg::CodecContextPtr enc(avcodec_alloc_context3(codec));
  H3_CHECK(enc != nullptr, "allocating the AAC encoder: out of memory");
  enc->sample_fmt = AV_SAMPLE_FMT_FLTP;
  enc->sample_rate = o.audio_sample_rate;
  av_channel_layout_default(&enc->ch_layout, kAudioChannels);
  enc->bit_rate = o.audio_bitrate;
  enc->time_base = AVRational{1, o.audio_sample_rate};
  return enc;
}

// Feeds RGB24 frames, converted to yuv420p BT.709 limited range, to the video track.
class VideoSource {
 public:
  VideoSource(const Rgb8Video& video, const AVCodecContext* enc) : video_(video), frame_(ffmpeg::alloc_frame()) {
    frame_->format = enc->pix_fmt;
    frame_->width = enc->width;
    frame_->height = enc->height;
    frame_->color_range = enc->color_range;
    frame_->colorspace = enc->colorspace;
    frame_->color_primaries = enc->color_primaries;
    frame_->color_trc = enc->color_trc;
    check(av_frame_get_buffer(frame_.get(), 0), "allocating a video frame");
    sws_.reset(sws_getContext(video.width, video.height, AV_PIX_FMT_RGB24, enc->width, enc->height, enc->pix_fmt,
                              SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP, nullptr, nullptr, nullptr));
    H3_CHECK(sws_ != nullptr, "setting up the RGB to yuv420p conversion for ", video.width, "x", video.height);
    const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
    // Source range 1 (full: RGB), destination range 0 (limited, 16..235 / 16..240).
    check(sws_setColorspaceDetails(sws_.get(), bt709, 1, bt709, 0, 0, 1 << 16, 1 << 16),
          "setting the BT.709 conversion matrix");
  }

  bool done() const { return next_ >= video_.frames; }
  int64_t next_pts() const { return next_; }

  AVFrame* next() {
    check(av_frame_make_writable(frame_.get()), "preparing a video frame");
    const uint8_t* src[1] = {video_.frame(next_)};
    const int src_stride[1] = {video_.width * 3};
    sws_scale(sws_.get(), src, src_stride, 0, video_.height, frame_->data, frame_->linesize);
    frame_->pts = next_++;
    return frame_.get();
  }

 private:
  const Rgb8Video& video_;
  ffmpeg::FramePtr frame_;
  ffmpeg::SwsPtr sws_;
  int next_ = 0;
};

// Feeds planar float stereo in frames of the encoder's frame_size (the last one may be shorter).
class AudioSource {
 public:
  AudioSource(const float* planar, int64_t stride, int64_t samples, const AVCodecContext* enc)
      : planar_(planar), stride_(stride), samples_(samples), enc_(enc), frame_(ffmpeg::alloc_frame()) {}

  bool done() const { return next_ >= samples_; }
  int64_t next_pts() const { return next_; }

  AVFrame* next() {
    const int n = static_cast<int>(std::min<int64_t>(enc_->frame_size, samples_ - next_));
    av_frame_unref(frame_.get());
    frame_->format = enc_->sample_fmt;
    frame_->sample_rate = enc_->sample_rate;
    frame_->nb_samples = n;
    check(av_channel_layout_copy(&frame_->ch_layout, &enc_->ch_layout), "setting the audio channel layout");
    check(av_frame_get_buffer(frame_.get(), 0), "allocating an audio frame");
    for (int c = 0; c < kAudioChannels; ++c)
      std::memcpy(frame_->data[c], planar_ + c * stride_ + next_, sizeof(float) * static_cast<size_t>(n));
    frame_->pts = next_;
    next_ += n;
    return frame_.get();
  }

 private:
  const float* planar_;
  int64_t stride_, samples_;
  const AVCodecContext* enc_;
  ffmpeg::FramePtr frame_;
  int64_t next_ = 0;
};

}  // namespace

void write_mp4(const std::string& path, const Rgb8Video& video, const float* audio, int64_t samples,
               const Mp4Options& options) {
  validate(video, audio, samples, options);
  OutputFile out(path);  // declared before the muxer: the file is closed before the temporary is removed
  write_mp4(out, video, audio, samples, options);
  out.commit();
}

void write_mp4(OutputFile& out, const Rgb8Video& video, const float* audio, int64_t samples,
               const Mp4Options& options) {
  validate(video, audio, samples, options);
  ffmpeg::quiet_logging();
  H3_CHECK(!out.streamed(), "cannot write ", out.path(), ": it is ", out.stream_kind(), ", and ", kMp4NeedsAFile);

  const bool with_audio = samples > 0;
  const int64_t audio_used =
      options.trim_audio_to_video
          ? std::min(samples, audio_samples_for_frames(video.frames, options.fps, options.audio_sample_rate))
          : samples;

  Muxer mux(out.temp_path());

  AVDictionary* video_opts = nullptr;
  Track vtrack;
  try {
    vtrack = mux.add_track(video_encoder(video, options, &video_opts), &video_opts, "H.264 video",
                           cat(" (", options.video_encoder, ", preset ", options.preset, ", crf ", options.crf, ")"));
  } catch (...) {
    av_dict_free(&video_opts);
    throw;
  }
  av_dict_free(&video_opts);
  vtrack.stream->avg_frame_rate = AVRational{options.fps, 1};

  Track atrack;
  if (with_audio) {
    AVDictionary* no_opts = nullptr;
    atrack = mux.add_track(audio_encoder(options), &no_opts, "AAC audio",
                           cat(" (", options.audio_sample_rate, " Hz, ", options.audio_bitrate, " bit/s)"));
  }
  mux.write_header(options);

  VideoSource vsrc(video, vtrack.enc.get());
  std::unique_ptr<AudioSource> asrc;
  if (with_audio) asrc = std::make_unique<AudioSource>(audio, samples, audio_used, atrack.enc.get());
  ffmpeg::PacketPtr pkt = ffmpeg::alloc_packet();

  // Feed both encoders in presentation order so the muxer's interleaving queue stays short.
  while (!vsrc.done() || (asrc && !asrc->done())) {
    throw_if_cancelled();  // a frame or an audio frame at a time (util/cancel.h)
    const bool video_next =
        !asrc || asrc->done() ||
        (!vsrc.done() && av_compare_ts(vsrc.next_pts(), vtrack.enc->time_base, asrc->next_pts(),
                                       atrack.enc->time_base) <= 0);
    if (video_next)
      mux.encode(vtrack, vsrc.next(), pkt.get());
    else
      mux.encode(atrack, asrc->next(), pkt.get());
  }
  mux.encode(vtrack, nullptr, pkt.get());
  if (asrc) mux.encode(atrack, nullptr, pkt.get());
  mux.finish();
  out.finish();
}

}  // namespace h3
