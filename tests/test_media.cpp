#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fifo_reader.h"
#include "media/mp4_writer.h"
#include "media/png_writer.h"
#include "media/ppm_writer.h"
#include "media/terminal_image.h"
#include "media/video_frames.h"
#include "media/wav_writer.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

using namespace h3;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "h3-media-XXXXXX").string();
    H3_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    return names;
  }

 private:
  fs::path path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint32_t le32(const std::vector<uint8_t>& b, size_t at) {
  return b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (uint32_t{b[at + 3]} << 24);
}
uint16_t le16(const std::vector<uint8_t>& b, size_t at) { return static_cast<uint16_t>(b[at] | (b[at + 1] << 8)); }
uint32_t be32(const uint8_t* p) { return (uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }
std::string tag_at(const std::vector<uint8_t>& b, size_t at) { return std::string(b.begin() + at, b.begin() + at + 4); }

// A (3, F, H, W) float clip: a diagonal gradient that moves 2 px per frame, with values in [0.1, 0.9] (never
// flat zeros, so a broken encoder cannot pass by accident).
std::vector<float> moving_gradient(int frames, int height, int width) {
  std::vector<float> v(static_cast<size_t>(3) * frames * height * width);
  const size_t plane = static_cast<size_t>(height) * width, channel = frames * plane;
  for (int f = 0; f < frames; ++f)
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) {
        const float u = static_cast<float>((x + 2 * f) % width) / width, w = static_cast<float>(y) / height;
        const size_t i = f * plane + static_cast<size_t>(y) * width + x;
        v[i] = 0.1f + 0.8f * u;
        v[channel + i] = 0.1f + 0.8f * w;
        v[2 * channel + i] = 0.1f + 0.4f * (u + w);
      }
  return v;
}

// Planar stereo: a 440 Hz sine at 0.5 on the left, the same at 0.25 with a quarter-period shift on the right.
std::vector<float> stereo_tone(int64_t samples, int rate) {
  std::vector<float> a(2 * samples);
  for (int64_t i = 0; i < samples; ++i) {
    const double t = 2 * M_PI * 440.0 * static_cast<double>(i) / rate;
    a[i] = static_cast<float>(0.5 * std::sin(t));
    a[samples + i] = static_cast<float>(0.25 * std::cos(t));
  }
  return a;
}

// --- a minimal libavformat/libavcodec reader for the checks ---------------------------------------------------
struct DecodedMp4 {
  int video_streams = 0, audio_streams = 0;
  AVCodecID video_codec = AV_CODEC_ID_NONE, audio_codec = AV_CODEC_ID_NONE;
  int width = 0, height = 0;
  AVRational avg_frame_rate{0, 1};
  AVColorSpace colorspace = AVCOL_SPC_UNSPECIFIED;
  AVColorRange color_range = AVCOL_RANGE_UNSPECIFIED;
  int sample_rate = 0, channels = 0;
  double container_seconds = 0, video_seconds = 0, audio_seconds = 0;
  int video_frames = 0;
  int64_t audio_samples = 0;
  std::vector<float> audio[2];  // decoded channels (planar float from FFmpeg's AAC decoder)
  std::vector<uint8_t> first_frame_rgb;  // decoded frame 0 converted back to RGB24 (BT.709 limited range)
  std::vector<uint8_t> first_frame_luma;  // its Y plane
};

DecodedMp4 decode_mp4(const std::string& path) {
  DecodedMp4 d;
  AVFormatContext* fmt = nullptr;
  H3_CHECK(avformat_open_input(&fmt, path.c_str(), nullptr, nullptr) == 0, "cannot open ", path);
  H3_CHECK(avformat_find_stream_info(fmt, nullptr) >= 0, "no stream info in ", path);
  d.container_seconds = static_cast<double>(fmt->duration) / AV_TIME_BASE;
  std::map<int, AVCodecContext*> decoders;
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    const AVStream* st = fmt->streams[i];
    const AVCodecParameters* par = st->codecpar;
    const double seconds = static_cast<double>(st->duration) * av_q2d(st->time_base);
    if (par->codec_type == AVMEDIA_TYPE_VIDEO) {
      ++d.video_streams;
      d.video_codec = par->codec_id;
      d.width = par->width;
      d.height = par->height;
      d.avg_frame_rate = st->avg_frame_rate;
      d.colorspace = par->color_space;
      d.color_range = par->color_range;
      d.video_seconds = seconds;
    } else if (par->codec_type == AVMEDIA_TYPE_AUDIO) {
      ++d.audio_streams;
      d.audio_codec = par->codec_id;
      d.sample_rate = par->sample_rate;
      d.channels = par->ch_layout.nb_channels;
      d.audio_seconds = seconds;
    } else {
      continue;
    }
    AVCodecContext* dec = avcodec_alloc_context3(avcodec_find_decoder(par->codec_id));
    avcodec_parameters_to_context(dec, par);
    H3_CHECK(avcodec_open2(dec, dec->codec, nullptr) == 0, "cannot open a decoder");
    decoders[static_cast<int>(i)] = dec;
  }
  AVPacket* pkt = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  auto drain = [&](AVCodecContext* dec) {
    while (avcodec_receive_frame(dec, frame) == 0) {
      if (dec->codec_type == AVMEDIA_TYPE_AUDIO) {
        d.audio_samples += frame->nb_samples;
        H3_CHECK(frame->format == AV_SAMPLE_FMT_FLTP && frame->ch_layout.nb_channels == 2, "unexpected AAC output");
        for (int c = 0; c < 2; ++c) {
          const float* p = reinterpret_cast<const float*>(frame->extended_data[c]);
          d.audio[c].insert(d.audio[c].end(), p, p + frame->nb_samples);
        }
      } else {
        if (d.video_frames++ == 0) {
          const int w = frame->width, h = frame->height;
          d.first_frame_luma.resize(static_cast<size_t>(w) * h);
          for (int y = 0; y < h; ++y)
            std::memcpy(&d.first_frame_luma[static_cast<size_t>(y) * w], frame->data[0] + y * frame->linesize[0], w);
          SwsContext* sws = sws_getContext(w, h, static_cast<AVPixelFormat>(frame->format), w, h, AV_PIX_FMT_RGB24,
                                           SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr, nullptr,
                                           nullptr);
          const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
          sws_setColorspaceDetails(sws, bt709, 0, bt709, 1, 0, 1 << 16, 1 << 16);
          d.first_frame_rgb.resize(static_cast<size_t>(w) * h * 3);
          uint8_t* dst[1] = {d.first_frame_rgb.data()};
          const int dst_stride[1] = {w * 3};
          sws_scale(sws, frame->data, frame->linesize, 0, h, dst, dst_stride);
          sws_freeContext(sws);
        }
      }
      av_frame_unref(frame);
    }
  };
  while (av_read_frame(fmt, pkt) == 0) {
    auto it = decoders.find(pkt->stream_index);
    if (it != decoders.end()) {
      avcodec_send_packet(it->second, pkt);
      drain(it->second);
    }
    av_packet_unref(pkt);
  }
  for (auto& [index, dec] : decoders) {
    avcodec_send_packet(dec, nullptr);
    drain(dec);
    avcodec_free_context(&dec);
  }
  av_frame_free(&frame);
  av_packet_free(&pkt);
  avformat_close_input(&fmt);
  return d;
}

double psnr(const std::vector<uint8_t>& a, const uint8_t* b) {
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) se += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  const double mse = se / static_cast<double>(a.size());
  return mse == 0 ? INFINITY : 10 * std::log10(255.0 * 255.0 / mse);
}

constexpr int kClipFrames = 22, kClipHeight = 32, kClipWidth = 64;
// The model's soundtrack for 22 frames: 37 audio latents of 800 samples (spec/audio_vae.md §6.1), 29,600
// samples = 0.925 s against 0.9167 s of video.
constexpr int64_t kClipAudioSamples = 37 * 800;

Rgb8Video test_clip() {
  const std::vector<float> px = moving_gradient(kClipFrames, kClipHeight, kClipWidth);
  return rgb8_from_planar(px.data(), kClipFrames, kClipHeight, kClipWidth);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// float -> uint8 conversion

TEST(MediaFrames, RoundsHalvesToEvenAndClamps) {
  EXPECT_EQ(unit_float_to_u8(0.0f), 0);
  EXPECT_EQ(unit_float_to_u8(1.0f), 255);
  EXPECT_EQ(unit_float_to_u8(-0.25f), 0);
  EXPECT_EQ(unit_float_to_u8(1.75f), 255);
  EXPECT_EQ(unit_float_to_u8(NAN), 0);
  EXPECT_EQ(unit_float_to_u8(INFINITY), 255);
  EXPECT_EQ(unit_float_to_u8(-INFINITY), 0);
  EXPECT_EQ(unit_float_to_u8(0.5f), 128);  // 127.5 exactly: ties to the even 128
  // For every boundary k + 0.5 find a float32 x with x·255 (in float32, as NumPy computes it) landing exactly on
  // it; such an x must go to the even neighbour, and its float neighbours to the nearer integer.
  int ties = 0;
  for (int k = 0; k < 255; ++k) {
    const float target = static_cast<float>(k) + 0.5f;
    float x = target / 255.0f;
    for (int step = 0; step < 8 && x * 255.0f != target; ++step) x = std::nextafter(x, x * 255.0f < target ? 2.0f : -1.0f);
    if (x * 255.0f != target) continue;
    ++ties;
    EXPECT_EQ(unit_float_to_u8(x), k % 2 == 0 ? k : k + 1) << "tie at " << target;
    const float below = std::nextafter(x, 0.0f), above = std::nextafter(x, 1.0f);
    if (below * 255.0f < target) {
      EXPECT_EQ(unit_float_to_u8(below), k) << "just below " << target;
    }
    if (above * 255.0f > target) {
      EXPECT_EQ(unit_float_to_u8(above), k + 1) << "just above " << target;
    }
  }
  EXPECT_GT(ties, 200) << "most half-way points should be reachable in float32";
}

TEST(MediaFrames, MatchesNearbyintOracle) {
  // The conversion rounds with the 2^23 trick; std::nearbyint (ties to even) is its exact, slower twin. Walk
  // the float32 values in [0, 1] with a prime stride (about 11 million of them, every exponent).
  uint32_t one;
  const float one_f = 1.0f;
  std::memcpy(&one, &one_f, 4);
  int64_t mismatches = 0;
  for (uint32_t bits = 0; bits <= one; bits += 97) {
    float x;
    std::memcpy(&x, &bits, 4);
    mismatches += unit_float_to_u8(x) != static_cast<int>(std::nearbyint(x * 255.0f));
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(MediaFrames, PlanarToInterleavedLayout) {
  // (3, F=2, H=2, W=3): value = (c·100 + f·10 + y·3 + x) / 255 so every byte names its source.
  const int F = 2, H = 2, W = 3;
  std::vector<float> v(3 * F * H * W);
  for (int c = 0; c < 3; ++c)
    for (int f = 0; f < F; ++f)
      for (int i = 0; i < H * W; ++i) v[(c * F + f) * H * W + i] = static_cast<float>(c * 100 + f * 10 + i) / 255.0f;
  const Rgb8Video video = rgb8_from_planar(v.data(), F, H, W);
  ASSERT_EQ(video.rgb.size(), static_cast<size_t>(F * H * W * 3));
  for (int f = 0; f < F; ++f)
    for (int i = 0; i < H * W; ++i)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(video.frame(f)[i * 3 + c], c * 100 + f * 10 + i);
  const Rgb8Image second = frame_image(video, 1);
  EXPECT_EQ(second.width, W);
  EXPECT_EQ(second.rgb[0], 10);
  EXPECT_THROW(video.frame(2), Error);

  const Tensor t = Tensor::from_f32({1, 3, F, H, W}, v);
  EXPECT_EQ(rgb8_from_tensor(t).rgb, video.rgb);
  EXPECT_THROW(rgb8_from_tensor(Tensor::from_f32({2, F, H, W}, std::vector<float>(2 * F * H * W))), Error);
}

// ---------------------------------------------------------------------------------------------------------------
// MP4

TEST(MediaMp4, AudioSamplesForFrames) {
  EXPECT_EQ(audio_samples_for_frames(22, 24, 32000), 29333);    // 29,333.33
  EXPECT_EQ(audio_samples_for_frames(124, 24, 32000), 165333);  // 165,333.33
  EXPECT_EQ(audio_samples_for_frames(23, 24, 32000), 30667);    // 30,666.67
  EXPECT_EQ(audio_samples_for_frames(24, 24, 32000), 32000);
}

TEST(MediaMp4, WritesH264AndTrimmedAac) {
  TempDir dir;
  const std::string path = dir.file("clip.mp4");
  const Rgb8Video video = test_clip();
  const std::vector<float> audio = stereo_tone(kClipAudioSamples, kAudioSampleRate);
  write_mp4(path, video, audio.data(), kClipAudioSamples);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"clip.mp4"}) << "no temporary file may remain";

  const DecodedMp4 d = decode_mp4(path);
  EXPECT_EQ(d.video_streams, 1);
  EXPECT_EQ(d.audio_streams, 1);
  EXPECT_EQ(d.video_codec, AV_CODEC_ID_H264);
  EXPECT_EQ(d.audio_codec, AV_CODEC_ID_AAC);
  EXPECT_EQ(d.width, kClipWidth);
  EXPECT_EQ(d.height, kClipHeight);
  EXPECT_EQ(d.avg_frame_rate.num, 24);
  EXPECT_EQ(d.avg_frame_rate.den, 1);
  EXPECT_EQ(d.colorspace, AVCOL_SPC_BT709);
  EXPECT_EQ(d.color_range, AVCOL_RANGE_MPEG);
  EXPECT_EQ(d.video_frames, kClipFrames);
  EXPECT_EQ(d.sample_rate, 32000);
  EXPECT_EQ(d.channels, 2);

  const double video_seconds = kClipFrames / 24.0;
  // The video track is exact: 22 frames of 1/24 s (the muxer's time base 1/12288 represents 1/24 exactly).
  EXPECT_NEAR(d.video_seconds, video_seconds, 1e-6);
  // The audio was cut to round(22·32000/24) = 29,333 samples (0.91667 s) instead of the 29,600 given (0.925 s).
  // AAC codes whole frames of 1024 samples: the encoder puts 1024 priming samples in front and pads the last
  // frame; the MP4 edit list hides both, but it counts in the movie time scale of 1/1000 s, so the audio
  // stream's length is 29,333 samples rounded to a millisecond (0.917 s). Tolerance 1.5 ms: that rounding
  // plus margin, and well under the 8.3 ms an untrimmed soundtrack would add (see UntrimmedAudioKeepsItsLength).
  EXPECT_NEAR(d.audio_seconds, video_seconds, 1.5e-3);
  EXPECT_NEAR(d.container_seconds, video_seconds, 1.5e-3);
  // Decoding honours the priming skip at the start but returns the padded tail: the decoded count is within
  // one AAC frame (1024 samples) above the 29,333 written.
  EXPECT_GE(d.audio_samples, 29333);
  EXPECT_LT(d.audio_samples, 29333 + 1024);

  // The tone comes back on the right channels, in time (the priming is skipped): correlation with the input
  // over the trimmed length, away from the edges, is near 1 (AAC at 192 kb/s codes a pure tone almost exactly;
  // a swapped channel, a one-frame shift or a scale error would score far lower or fail the RMS ratio).
  for (int c = 0; c < 2; ++c) {
    double dot = 0, in2 = 0, out2 = 0;
    for (int64_t i = 1024; i < 28000; ++i) {
      const double in = audio[c * kClipAudioSamples + i], out = d.audio[c][i];
      dot += in * out;
      in2 += in * in;
      out2 += out * out;
    }
    EXPECT_GT(dot / std::sqrt(in2 * out2), 0.99) << "channel " << c;
    EXPECT_NEAR(std::sqrt(out2 / in2), 1.0, 0.05) << "channel " << c;
  }

  // First frame back: H.264 at CRF 18 on a smooth gradient, plus yuv420p chroma halving and the 8-bit
  // RGB -> YUV -> RGB round trip (about ±1 LSB), costs well under 1% RMS error; 30 dB PSNR (3.2% RMS) would
  // flag a wrong matrix (BT.601 vs 709 shifts colours by several %), a swapped channel or a wrong frame.
  ASSERT_EQ(d.first_frame_rgb.size(), video.frame_bytes());
  const double first_psnr = psnr(d.first_frame_rgb, video.frame(0));
  EXPECT_GT(first_psnr, 30.0);
  // The second frame differs from the first (moving gradient), so comparing with it must score lower.
  EXPECT_LT(psnr(d.first_frame_rgb, video.frame(1)), first_psnr);
}

TEST(MediaMp4, UntrimmedAudioKeepsItsLength) {
  TempDir dir;
  const std::vector<float> audio = stereo_tone(kClipAudioSamples, kAudioSampleRate);
  Mp4Options keep;
  keep.trim_audio_to_video = false;
  write_mp4(dir.file("clip.mp4"), test_clip(), audio.data(), kClipAudioSamples, keep);
  const DecodedMp4 d = decode_mp4(dir.file("clip.mp4"));
  // 29,600 samples = 0.925 s, to the edit list's millisecond.
  EXPECT_NEAR(d.audio_seconds, 0.925, 1.5e-3);
  EXPECT_EQ(d.video_frames, kClipFrames);
}

TEST(MediaMp4, UsesBt709LimitedRange) {
  // A flat pure red picture: BT.709 limited-range luma is 16 + 219·0.2126 = 62.6, BT.601 would give 81.5.
  TempDir dir;
  Rgb8Video red{16, 16, 2, {}};
  for (int i = 0; i < 16 * 16 * 2; ++i) red.rgb.insert(red.rgb.end(), {255, 0, 0});
  write_mp4(dir.file("red.mp4"), red, nullptr, 0);
  const DecodedMp4 d = decode_mp4(dir.file("red.mp4"));
  EXPECT_EQ(d.audio_streams, 0);
  ASSERT_FALSE(d.first_frame_luma.empty());
  // ±2: CRF 18 quantization on a flat block.
  EXPECT_NEAR(d.first_frame_luma[8 * 16 + 8], 63, 2);
}

TEST(MediaMp4, VideoOnlyWhenAudioIsEmpty) {
  TempDir dir;
  const std::string path = dir.file("silent.mp4");
  write_mp4(path, test_clip(), nullptr, 0);
  const DecodedMp4 d = decode_mp4(path);
  EXPECT_EQ(d.video_streams, 1);
  EXPECT_EQ(d.audio_streams, 0);
  EXPECT_EQ(d.video_frames, kClipFrames);
  EXPECT_NEAR(d.container_seconds, kClipFrames / 24.0, 1e-3);
}

TEST(MediaMp4, FfprobeAgrees) {
  if (std::system("command -v ffprobe >/dev/null 2>&1") != 0) GTEST_SKIP() << "ffprobe is not installed";
  TempDir dir;
  const std::string path = dir.file("clip.mp4");
  const std::vector<float> audio = stereo_tone(kClipAudioSamples, kAudioSampleRate);
  write_mp4(path, test_clip(), audio.data(), kClipAudioSamples);
  const std::string cmd = "ffprobe -v error -count_frames -show_entries "
                          "stream=codec_name,pix_fmt,width,height,avg_frame_rate,sample_rate,channels,nb_read_frames,"
                          "duration:format=duration -of json '" + path + "'";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["streams"].size(), 2u) << out;
  const auto& v = j["streams"][0]["codec_name"] == "h264" ? j["streams"][0] : j["streams"][1];
  const auto& a = j["streams"][0]["codec_name"] == "h264" ? j["streams"][1] : j["streams"][0];
  EXPECT_EQ(v["codec_name"], "h264");
  EXPECT_EQ(v["pix_fmt"], "yuv420p");
  EXPECT_EQ(v["width"], kClipWidth);
  EXPECT_EQ(v["height"], kClipHeight);
  EXPECT_EQ(v["avg_frame_rate"], "24/1");
  EXPECT_EQ(v["nb_read_frames"], std::to_string(kClipFrames));
  EXPECT_EQ(a["codec_name"], "aac");
  EXPECT_EQ(a["sample_rate"], "32000");
  EXPECT_EQ(a["channels"], 2);
  // Same tolerance as WritesH264AndTrimmedAac: the trimmed soundtrack rounded to the edit list's millisecond.
  EXPECT_NEAR(std::stod(j["format"]["duration"].get<std::string>()), kClipFrames / 24.0, 1.5e-3);
}

TEST(MediaMp4, UnwritableDirectoryFailsAndLeavesNothing) {
  TempDir dir;
  // A regular file where the directory should be: fails even for root (which ignores permission bits).
  std::ofstream(dir.file("not-a-dir")) << "x";
  const std::string path = dir.file("not-a-dir") + "/clip.mp4";
  try {
    write_mp4(path, test_clip(), nullptr, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not-a-dir"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_mp4(dir.file("missing/clip.mp4"), test_clip(), nullptr, 0), Error);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"not-a-dir"});
  if (::geteuid() != 0) {  // permission bits only bind non-root users
    fs::create_directory(dir.path() / "ro");
    ::chmod((dir.path() / "ro").c_str(), 0555);
    EXPECT_THROW(write_mp4(dir.file("ro/clip.mp4"), test_clip(), nullptr, 0), Error);
    EXPECT_TRUE(fs::is_empty(dir.path() / "ro"));
  }
}

TEST(MediaMp4, FailureAfterTheFileIsOpenLeavesNothing) {
  TempDir dir;
  const std::string path = dir.file("clip.mp4");
  const std::vector<float> audio = stereo_tone(kClipAudioSamples, kAudioSampleRate);
  // An unknown x264 preset fails when the encoder opens, after the temporary file was created.
  Mp4Options bad;
  bad.preset = "no-such-preset";
  try {
    write_mp4(path, test_clip(), audio.data(), kClipAudioSamples, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("opening the H.264 video encoder"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());

  // An existing file at the path survives a failed write untouched.
  std::ofstream(path) << "previous";
  EXPECT_THROW(write_mp4(path, test_clip(), audio.data(), kClipAudioSamples, bad), Error);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"clip.mp4"});
  EXPECT_EQ(read_bytes(path).size(), 8u);
}

// An MP4 cannot be streamed (kMp4NeedsAFile): a FIFO or a device at the path is refused before the encoders open,
// without waiting for a reader, and stays what it is.
TEST(MediaMp4, AFifoOrADeviceIsRefusedBeforeAnyWork) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/null")}) {
    try {
      write_mp4(path, test_clip(), nullptr, 0);
      FAIL() << "expected an error for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "cannot write " + path + ": it is " +
                                           (path == fifo ? "a FIFO" : "a character device") + ", and " +
                                           kMp4NeedsAFile);
    }
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"pipe"});
}

TEST(MediaMp4, RejectsBadInputBeforeWriting) {
  TempDir dir;
  const std::string path = dir.file("clip.mp4");
  Rgb8Video odd{63, 32, 1, std::vector<uint8_t>(63 * 32 * 3, 128)};
  try {
    write_mp4(path, odd, nullptr, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("even width and height"), std::string::npos) << e.what();
  }
  Rgb8Video short_buffer{64, 32, 2, std::vector<uint8_t>(64 * 32 * 3)};
  EXPECT_THROW(write_mp4(path, short_buffer, nullptr, 0), Error);
  EXPECT_THROW(write_mp4(path, test_clip(), nullptr, 100), Error);  // samples announced, none given
  Mp4Options no_encoder;
  no_encoder.video_encoder = "no-such-encoder";
  try {
    write_mp4(path, test_clip(), nullptr, 0, no_encoder);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-encoder'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());
}

// Not run by default: the encode time of the model's default clip (124 frames of 864x480, with its 165,600-sample
// soundtrack). ./build/h3_tests --gtest_also_run_disabled_tests --gtest_filter='MediaMp4.DISABLED_*'
TEST(MediaMp4, DISABLED_EncodeTimeDefaultClip) {
  const int F = 124, H = 480, W = 864;
  std::vector<float> px(static_cast<size_t>(3) * F * H * W);
  const size_t plane = static_cast<size_t>(H) * W;
  for (int c = 0; c < 3; ++c)
    for (int f = 0; f < F; ++f)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)  // moving, textured colour field (smooth waves, like natural footage)
          px[(c * F + f) * plane + static_cast<size_t>(y) * W + x] =
              0.5f + 0.4f * std::sin(0.021f * x * (c + 1) + 0.017f * y + 0.15f * f + c) *
                         std::cos(0.013f * y * (3 - c) - 0.07f * f);
  const std::vector<float> audio = stereo_tone(207 * 800, kAudioSampleRate);
  TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  const Rgb8Video video = rgb8_from_planar(px.data(), F, H, W);
  const auto t1 = std::chrono::steady_clock::now();
  write_mp4(dir.file("clip.mp4"), video, audio.data(), 207 * 800);
  const auto t2 = std::chrono::steady_clock::now();
  const double convert_s = std::chrono::duration<double>(t1 - t0).count();
  const double encode_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("float->RGB8 %.3f s, MP4 encode+mux %.3f s (%.1f frames/s), %zu bytes, %u cores\n", convert_s,
              encode_s, F / encode_s, static_cast<size_t>(fs::file_size(dir.file("clip.mp4"))),
              std::thread::hardware_concurrency());
  EXPECT_EQ(decode_mp4(dir.file("clip.mp4")).video_frames, F);
}

// ---------------------------------------------------------------------------------------------------------------
// WAV

TEST(MediaWav, Pcm16HeaderAndSamples) {
  TempDir dir;
  const std::string path = dir.file("a.wav");
  // Planar: left then right. 0.5·32767 = 16383.5 ties to the even 16384; 1.2 clips; -1 maps to -32767.
  const std::vector<float> planar = {0.0f, 0.5f, -1.0f, 1.2f, -1e-5f,  // left
                                     0.25f, -0.5f, 1.0f, -3.0f, NAN};  // right
  write_wav(path, planar.data(), 2, 5, 32000);
  const std::vector<uint8_t> b = read_bytes(path);
  ASSERT_EQ(b.size(), 44u + 5 * 2 * 2);
  EXPECT_EQ(tag_at(b, 0), "RIFF");
  EXPECT_EQ(le32(b, 4), b.size() - 8);
  EXPECT_EQ(tag_at(b, 8), "WAVE");
  EXPECT_EQ(tag_at(b, 12), "fmt ");
  EXPECT_EQ(le32(b, 16), 16u);
  EXPECT_EQ(le16(b, 20), 1);  // PCM
  EXPECT_EQ(le16(b, 22), 2);
  EXPECT_EQ(le32(b, 24), 32000u);
  EXPECT_EQ(le32(b, 28), 32000u * 4);
  EXPECT_EQ(le16(b, 32), 4);
  EXPECT_EQ(le16(b, 34), 16);
  EXPECT_EQ(tag_at(b, 36), "data");
  EXPECT_EQ(le32(b, 40), 20u);
  const int16_t expected[10] = {0, 8192, 16384, -16384, -32767, 32767, 32767, -32767, 0, 0};  // interleaved L R
  for (int i = 0; i < 10; ++i) EXPECT_EQ(static_cast<int16_t>(le16(b, 44 + 2 * i)), expected[i]) << "sample " << i;
  EXPECT_EQ(audio_float_to_i16(0.25f), 8192);  // 8191.75
  EXPECT_EQ(audio_float_to_i16(1.5f / 32767.0f), 2);  // 1.5 ties to even
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.wav"});
}

TEST(MediaWav, Float32HeaderAndSamples) {
  TempDir dir;
  const std::string path = dir.file("f.wav");
  const std::vector<float> planar = {0.125f, -2.0f, 0.75f, 0.5f};  // 2 channels x 2 samples
  write_wav(path, planar.data(), 2, 2, 32000, WavFormat::Float32);
  const std::vector<uint8_t> b = read_bytes(path);
  ASSERT_EQ(b.size(), 12u + 26 + 12 + 8 + 16);
  EXPECT_EQ(le32(b, 4), b.size() - 8);
  EXPECT_EQ(le32(b, 16), 18u);
  EXPECT_EQ(le16(b, 20), 3);  // IEEE float
  EXPECT_EQ(le32(b, 28), 32000u * 8);
  EXPECT_EQ(le16(b, 32), 8);
  EXPECT_EQ(le16(b, 34), 32);
  EXPECT_EQ(le16(b, 36), 0);  // cbSize
  EXPECT_EQ(tag_at(b, 38), "fact");
  EXPECT_EQ(le32(b, 46), 2u);
  EXPECT_EQ(tag_at(b, 50), "data");
  EXPECT_EQ(le32(b, 54), 16u);
  const float expected[4] = {0.125f, 0.75f, -1.0f, 0.5f};
  for (int i = 0; i < 4; ++i) {
    float v;
    const uint32_t bits = le32(b, 58 + 4 * i);
    std::memcpy(&v, &bits, 4);
    EXPECT_EQ(v, expected[i]);
  }
}

TEST(MediaWav, FailureLeavesNothing) {
  TempDir dir;
  const std::vector<float> s(4, 0.f);
  EXPECT_THROW(write_wav(dir.file("missing/a.wav"), s.data(), 2, 2, 32000), Error);
  EXPECT_THROW(write_wav(dir.file("a.wav"), s.data(), 0, 2, 32000), Error);
  EXPECT_TRUE(dir.entries().empty());
}

// A WAV is written whole, so it streams: into a FIFO (the reader gets the bytes the file would hold), and into a full
// device as an error.
TEST(MediaWav, StreamsIntoAFifoAndAFullDeviceIsAnError) {
  TempDir dir;
  const std::vector<float> s = stereo_tone(20000, 32000);  // 80 kB of PCM: more than a pipe holds
  write_wav(dir.file("file.wav"), s.data(), 2, 20000, 32000);
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FifoReader reader(fifo);
  write_wav(fifo, s.data(), 2, 20000, 32000);
  const std::vector<uint8_t> file = read_bytes(dir.file("file.wav"));
  EXPECT_EQ(reader.finish(), std::string(file.begin(), file.end()));
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  try {
    write_wav("/dev/full", s.data(), 2, 20000, 32000);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write /dev/full: No space left on device");
  }
}

// ---------------------------------------------------------------------------------------------------------------
// PPM and PNG

TEST(MediaPpm, HeaderAndBytes) {
  TempDir dir;
  Rgb8Image img{3, 2, {}};
  for (int i = 0; i < 18; ++i) img.rgb.push_back(static_cast<uint8_t>(i * 13));
  write_ppm(dir.file("a.ppm"), img);
  const std::vector<uint8_t> b = read_bytes(dir.file("a.ppm"));
  const std::string header = "P6\n3 2\n255\n";
  ASSERT_EQ(b.size(), header.size() + 18);
  EXPECT_EQ(std::string(b.begin(), b.begin() + header.size()), header);
  EXPECT_TRUE(std::equal(img.rgb.begin(), img.rgb.end(), b.begin() + header.size()));
}

TEST(MediaPpm, FrameFileNames) {
  // Five digits, more when needed; --frames-dir's files (app/generation.cpp) are named so.
  EXPECT_EQ(frame_file_name(7), "frame_00007.ppm");
  EXPECT_EQ(frame_file_name(123456), "frame_123456.ppm");
  EXPECT_TRUE(is_frame_file_name("frame_00021.ppm"));
  EXPECT_TRUE(is_frame_file_name(frame_file_name(123456)));
  EXPECT_FALSE(is_frame_file_name("frame_0021.ppm"));
  EXPECT_FALSE(is_frame_file_name("frame_00021.ppm.partial-42"));
}

namespace {

// Decodes a PNG with libavcodec into RGB24.
Rgb8Image decode_png(const std::vector<uint8_t>& png) {
  AVCodecContext* dec = avcodec_alloc_context3(avcodec_find_decoder(AV_CODEC_ID_PNG));
  H3_CHECK(avcodec_open2(dec, dec->codec, nullptr) == 0, "cannot open the PNG decoder");
  AVPacket* pkt = av_packet_alloc();
  av_new_packet(pkt, static_cast<int>(png.size()));
  std::memcpy(pkt->data, png.data(), png.size());
  AVFrame* frame = av_frame_alloc();
  H3_CHECK(avcodec_send_packet(dec, pkt) == 0 && avcodec_receive_frame(dec, frame) == 0, "cannot decode the PNG");
  H3_CHECK(frame->format == AV_PIX_FMT_RGB24, "the PNG is not RGB24");
  Rgb8Image img{frame->width, frame->height, {}};
  for (int y = 0; y < img.height; ++y)
    img.rgb.insert(img.rgb.end(), frame->data[0] + y * frame->linesize[0],
                   frame->data[0] + y * frame->linesize[0] + img.width * 3);
  av_frame_free(&frame);
  av_packet_free(&pkt);
  avcodec_free_context(&dec);
  return img;
}

// PNG signature, then the IHDR chunk's width and height.
void expect_png_header(const std::vector<uint8_t>& png, int width, int height) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  ASSERT_GE(png.size(), 33u);
  EXPECT_EQ(std::memcmp(png.data(), kSignature, 8), 0);
  EXPECT_EQ(std::string(png.begin() + 12, png.begin() + 16), "IHDR");
  EXPECT_EQ(be32(&png[16]), static_cast<uint32_t>(width));
  EXPECT_EQ(be32(&png[20]), static_cast<uint32_t>(height));
}

// A picture of pseudo-random pixels (PNG cannot compress it much, so its base64 spans several kitty chunks).
Rgb8Image noise_image(int width, int height) {
  Rgb8Image img{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  uint32_t s = 12345;
  for (auto& p : img.rgb) p = static_cast<uint8_t>((s = s * 1664525u + 1013904223u) >> 24);
  return img;
}

std::vector<uint8_t> base64_decode(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  H3_CHECK(s.size() % 4 == 0, "base64 length ", s.size(), " is not a multiple of 4");
  std::vector<uint8_t> out;
  for (size_t i = 0; i < s.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = s[i + k] == '=' ? (++pad, 0) : val(s[i + k]);
      H3_CHECK(d >= 0, "bad base64 character");
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<uint8_t>(v >> 16));
    if (pad < 2) out.push_back(static_cast<uint8_t>(v >> 8));
    if (pad < 1) out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

}  // namespace

TEST(MediaPng, LosslessRoundTrip) {
  TempDir dir;
  const Rgb8Image img = frame_image(test_clip(), 3);
  write_png(dir.file("a.png"), img);
  const std::vector<uint8_t> png = read_bytes(dir.file("a.png"));
  expect_png_header(png, 64, 32);
  const Rgb8Image back = decode_png(png);
  EXPECT_EQ(back.width, 64);
  EXPECT_EQ(back.height, 32);
  EXPECT_EQ(back.rgb, img.rgb);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.png"});
}

// ---------------------------------------------------------------------------------------------------------------
// Terminal images

TEST(MediaTerminal, Base64) {
  auto b64 = [](const std::string& s) { return base64_encode(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg==");
  EXPECT_EQ(b64("fo"), "Zm8=");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("foob"), "Zm9vYg==");
  EXPECT_EQ(b64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
  const std::vector<uint8_t> all = [] {
    std::vector<uint8_t> v(256);
    for (int i = 0; i < 256; ++i) v[i] = static_cast<uint8_t>(i);
    return v;
  }();
  EXPECT_EQ(base64_decode(base64_encode(all.data(), all.size())), all);
}

TEST(MediaTerminal, KittyChunks) {
  const Rgb8Image img = noise_image(64, 48);  // ~9 KB PNG -> ~12 K base64 chars -> 3 or more chunks
  const std::vector<uint8_t> png = encode_png(img);
  const std::string seq = terminal_image_sequence(TerminalProtocol::Kitty, png, 64, 48, TerminalImageOptions{});
  std::string payload;
  std::vector<std::string> controls;
  size_t pos = 0;
  while (pos < seq.size()) {
    ASSERT_EQ(seq.compare(pos, 3, "\033_G"), 0) << "chunk " << controls.size() << " must start with ESC _ G";
    const size_t end = seq.find("\033\\", pos);
    ASSERT_NE(end, std::string::npos) << "every chunk ends with ESC \\";
    const std::string body = seq.substr(pos + 3, end - pos - 3);
    const size_t semi = body.find(';');
    ASSERT_NE(semi, std::string::npos);
    controls.push_back(body.substr(0, semi));
    const std::string data = body.substr(semi + 1);
    EXPECT_LE(data.size(), kKittyChunkChars);
    EXPECT_EQ(data.find('\033'), std::string::npos);
    payload += data;
    pos = end + 2;
  }
  ASSERT_GE(controls.size(), 3u);
  EXPECT_EQ(controls.front(), "a=T,f=100,q=2,m=1");
  for (size_t i = 1; i + 1 < controls.size(); ++i) EXPECT_EQ(controls[i], "m=1");
  EXPECT_EQ(controls.back(), "m=0");
  // Every chunk but the last is full (a multiple of 4, as the protocol requires).
  EXPECT_EQ(payload.size() - (controls.size() - 1) * kKittyChunkChars, payload.size() % kKittyChunkChars == 0
                                                                            ? kKittyChunkChars
                                                                            : payload.size() % kKittyChunkChars);
  const std::vector<uint8_t> decoded = base64_decode(payload);
  EXPECT_EQ(decoded, png);
  expect_png_header(decoded, 64, 48);

  // A small picture fits one sequence, which carries both the keys and m=0.
  const std::string one = terminal_image_sequence(TerminalProtocol::Kitty, Rgb8Image{2, 2, std::vector<uint8_t>(12, 9)},
                                                  TerminalImageOptions{});
  EXPECT_EQ(one.rfind("\033_Ga=T,f=100,q=2,m=0;", 0), 0u) << one;
  EXPECT_EQ(one.find("\033_G", 1), std::string::npos);
}

TEST(MediaTerminal, KittyZoomUsesCells) {
  const std::vector<uint8_t> png = encode_png(noise_image(4, 4));
  TerminalImageOptions o;
  o.zoom = 2;
  // No cell size known: shown at its own size (no c/r keys).
  EXPECT_EQ(terminal_image_sequence(TerminalProtocol::Kitty, png, 100, 60, o).rfind("\033_Ga=T,f=100,q=2,m=0;", 0), 0u);
  o.cell_width_px = 10;
  o.cell_height_px = 20;
  // 100·2/10 = 20 columns, 60·2/20 = 6 rows.
  EXPECT_EQ(terminal_image_sequence(TerminalProtocol::Kitty, png, 100, 60, o).rfind("\033_Ga=T,f=100,q=2,c=20,r=6,m=0;", 0),
            0u);
}

TEST(MediaTerminal, Iterm2Sequence) {
  const Rgb8Image img = noise_image(40, 30);
  const std::vector<uint8_t> png = encode_png(img);
  TerminalImageOptions o;
  o.zoom = 3;
  const std::string seq = terminal_image_sequence(TerminalProtocol::Iterm2, png, 40, 30, o);
  const std::string prefix = "\033]1337;File=inline=1;size=" + std::to_string(png.size()) +
                             ";width=120px;height=90px;preserveAspectRatio=1:";
  ASSERT_EQ(seq.rfind(prefix, 0), 0u) << seq.substr(0, 100);
  ASSERT_EQ(seq.back(), '\a');
  const std::vector<uint8_t> decoded = base64_decode(seq.substr(prefix.size(), seq.size() - prefix.size() - 1));
  EXPECT_EQ(decoded.size(), png.size());  // size= is the PNG's byte count
  expect_png_header(decoded, 40, 30);
  EXPECT_EQ(decode_png(decoded).rgb, img.rgb);
  EXPECT_THROW(terminal_image_sequence(TerminalProtocol::None, png, 40, 30, o), Error);
  o.zoom = 0;
  EXPECT_THROW(terminal_image_sequence(TerminalProtocol::Iterm2, png, 40, 30, o), Error);
}

TEST(MediaTerminal, TmuxPassthroughDoublesEscapes) {
  const std::vector<uint8_t> png = encode_png(noise_image(2, 2));
  TerminalImageOptions o;
  o.tmux_passthrough = true;
  const std::string plain = terminal_image_sequence(TerminalProtocol::Iterm2, png, 2, 2, TerminalImageOptions{});
  const std::string wrapped = terminal_image_sequence(TerminalProtocol::Iterm2, png, 2, 2, o);
  std::string doubled;
  for (char c : plain) doubled += c == '\033' ? std::string("\033\033") : std::string(1, c);
  EXPECT_EQ(wrapped, "\033Ptmux;" + doubled + "\033\\");
}

TEST(MediaTerminal, Detection) {
  auto detect = [](std::map<std::string, std::string> env) {
    return detect_terminal([env = std::move(env)](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  using P = TerminalProtocol;
  EXPECT_EQ(detect({{"TERM", "xterm-kitty"}}).protocol, P::Kitty);
  EXPECT_EQ(detect({{"TERM", "xterm-256color"}, {"KITTY_WINDOW_ID", "1"}}).protocol, P::Kitty);
  EXPECT_EQ(detect({{"TERM_PROGRAM", "ghostty"}}).protocol, P::Kitty);
  EXPECT_EQ(detect({{"GHOSTTY_RESOURCES_DIR", "/usr/share/ghostty"}}).protocol, P::Kitty);
  EXPECT_EQ(detect({{"TERM_PROGRAM", "iTerm.app"}}).protocol, P::Iterm2);
  EXPECT_EQ(detect({{"LC_TERMINAL", "iTerm2"}}).protocol, P::Iterm2);
  EXPECT_EQ(detect({{"TERM_PROGRAM", "WezTerm"}}).protocol, P::Iterm2);
  EXPECT_EQ(detect({{"KONSOLE_VERSION", "230804"}}).protocol, P::Iterm2);
  EXPECT_EQ(detect({{"TERM", "xterm-256color"}}).protocol, P::None);
  EXPECT_EQ(detect({}).protocol, P::None);
  EXPECT_FALSE(detect({}).description.empty());
  // The terminal named by TERM_PROGRAM wins over a variable inherited from a parent kitty.
  EXPECT_EQ(detect({{"TERM_PROGRAM", "WezTerm"}, {"KITTY_WINDOW_ID", "3"}}).protocol, P::Iterm2);
  // tmux and screen: off, with the reason, unless forced; forced inside tmux wraps for passthrough.
  const TerminalSupport tmux = detect({{"TMUX", "tmux-socket,1,0"}, {"KITTY_WINDOW_ID", "1"}});
  EXPECT_EQ(tmux.protocol, P::None);
  EXPECT_NE(tmux.description.find("tmux"), std::string::npos);
  EXPECT_EQ(detect({{"TERM", "screen-256color"}, {"STY", "1.pts"}, {"TERM_PROGRAM", "iTerm.app"}}).protocol, P::None);
  const TerminalSupport forced = detect({{"TMUX", "x"}, {"H3_TERMINAL_IMAGES", "kitty"}});
  EXPECT_EQ(forced.protocol, P::Kitty);
  EXPECT_TRUE(forced.tmux_passthrough);
  EXPECT_EQ(detect({{"H3_TERMINAL_IMAGES", "iterm2"}}).protocol, P::Iterm2);
  EXPECT_FALSE(detect({{"H3_TERMINAL_IMAGES", "iterm2"}}).tmux_passthrough);
  EXPECT_EQ(detect({{"H3_TERMINAL_IMAGES", "none"}, {"TERM", "xterm-kitty"}}).protocol, P::None);
  const TerminalSupport bad = detect({{"H3_TERMINAL_IMAGES", "sixel"}, {"TERM", "xterm-kitty"}});
  EXPECT_EQ(bad.protocol, P::None);
  EXPECT_NE(bad.description.find("sixel"), std::string::npos);
}

TEST(MediaTerminal, WritersEmitSequenceAndNewline) {
  const Rgb8Image img = noise_image(8, 8);
  TerminalSupport kitty{TerminalProtocol::Kitty, false, "kitty"};
  const std::string expected = terminal_image_sequence(TerminalProtocol::Kitty, img, TerminalImageOptions{}) + "\n";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  write_terminal_image(fds[1], kitty, img);
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  EXPECT_EQ(got, expected);

  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  write_terminal_image(f, kitty, img);
  std::rewind(f);
  got.clear();
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) got.append(buf, n);
  std::fclose(f);
  EXPECT_EQ(got, expected);
  EXPECT_THROW(write_terminal_image(STDOUT_FILENO, TerminalSupport{}, img), Error);
}
