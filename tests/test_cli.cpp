// The h3 binary end to end on a tiny random-weight model made here (`h3 tool make-tiny-model`): one-shot runs and
// their outputs, every usage error (exit 2, before any weight loads, nothing written), the interactive session
// through a pipe and through a pseudo-terminal (libedit), and --show's escape sequences per terminal protocol.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include <libavformat/avformat.h>
}

#include "cli_run.h"
#include "fifo_reader.h"
#include "h3/h3.h"
#include "io/safetensors.h"
#include "media/mp4_writer.h"
#include "models/dit/dit.h"
#include "models/dit/dit_fasth3.h"
#include "media/wav_writer.h"

namespace fs = std::filesystem;

namespace {

using namespace h3_cli_test;

// ---- checking an MP4 with libavformat --------------------------------------------------------------------------

struct Mp4Info {
  int video_streams = 0, audio_streams = 0;
  AVCodecID video_codec = AV_CODEC_ID_NONE, audio_codec = AV_CODEC_ID_NONE;
  int width = 0, height = 0, video_packets = 0, channels = 0, sample_rate = 0;
};

Mp4Info probe(const std::string& path) {
  Mp4Info m;
  AVFormatContext* fmt = nullptr;
  if (avformat_open_input(&fmt, path.c_str(), nullptr, nullptr) != 0) return m;
  avformat_find_stream_info(fmt, nullptr);
  int video_index = -1;
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    const AVCodecParameters* p = fmt->streams[i]->codecpar;
    if (p->codec_type == AVMEDIA_TYPE_VIDEO) {
      ++m.video_streams;
      m.video_codec = p->codec_id;
      m.width = p->width;
      m.height = p->height;
      video_index = static_cast<int>(i);
    } else if (p->codec_type == AVMEDIA_TYPE_AUDIO) {
      ++m.audio_streams;
      m.audio_codec = p->codec_id;
      m.channels = p->ch_layout.nb_channels;
      m.sample_rate = p->sample_rate;
    }
  }
  AVPacket* pkt = av_packet_alloc();
  while (av_read_frame(fmt, pkt) >= 0) {
    m.video_packets += pkt->stream_index == video_index;  // one packet per frame for H.264 in MP4
    av_packet_unref(pkt);
  }
  av_packet_free(&pkt);
  avformat_close_input(&fmt);
  return m;
}

void expect_video_with_sound(const std::string& path, int width, int height, int frames) {
  const Mp4Info m = probe(path);
  EXPECT_EQ(m.video_streams, 1) << path;
  EXPECT_EQ(m.audio_streams, 1) << path;
  EXPECT_EQ(m.video_codec, AV_CODEC_ID_H264);
  EXPECT_EQ(m.audio_codec, AV_CODEC_ID_AAC);
  EXPECT_EQ(m.width, width);
  EXPECT_EQ(m.height, height);
  EXPECT_EQ(m.video_packets, frames);
  EXPECT_EQ(m.channels, 2);
  EXPECT_EQ(m.sample_rate, 32000);
}

// ---- terminal image sequences ----------------------------------------------------------------------------------

std::string base64_decode(const std::string& s) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    if (v == std::string::npos) return "<not base64>";
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

bool is_png(const std::string& bytes) { return bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0; }

// Every kitty image in `out`: checks the chunking rules and returns the decoded PNGs.
std::vector<std::string> kitty_images(const std::string& out) {
  std::vector<std::string> images;
  std::string payload;
  bool in_image = false;
  for (size_t at = out.find("\033_G"); at != std::string::npos; at = out.find("\033_G", at + 3)) {
    const size_t end = out.find("\033\\", at);
    EXPECT_NE(end, std::string::npos) << "unterminated kitty sequence";
    if (end == std::string::npos) break;
    const std::string body = out.substr(at + 3, end - at - 3);
    const size_t semi = body.find(';');
    const std::string keys = body.substr(0, semi), data = body.substr(semi + 1);
    EXPECT_LE(data.size(), 4096u) << "kitty chunks carry at most 4096 base64 characters";
    if (!in_image) {
      EXPECT_NE(keys.find("a=T,f=100"), std::string::npos) << keys;
    } else {
      EXPECT_EQ(keys.rfind("m=", 0), 0u) << "a continuation chunk has only m=: " << keys;
    }
    payload += data;
    const bool more = keys.find("m=1") != std::string::npos;
    EXPECT_TRUE(more || keys.find("m=0") != std::string::npos) << keys;
    in_image = more;
    if (!more) {
      images.push_back(base64_decode(payload));
      payload.clear();
    }
  }
  EXPECT_FALSE(in_image) << "the last kitty image has no m=0 chunk";
  return images;
}

struct Iterm2Image {
  std::string png;
  std::string args;
};

std::vector<Iterm2Image> iterm2_images(const std::string& out) {
  std::vector<Iterm2Image> images;
  const std::string start = "\033]1337;File=";
  for (size_t at = out.find(start); at != std::string::npos; at = out.find(start, at + 1)) {
    const size_t colon = out.find(':', at), bel = out.find('\a', at);
    EXPECT_TRUE(colon != std::string::npos && bel != std::string::npos && colon < bel) << "malformed iTerm2 sequence";
    if (colon == std::string::npos || bel == std::string::npos) break;
    Iterm2Image im;
    im.args = out.substr(at + start.size(), colon - at - start.size());
    im.png = base64_decode(out.substr(colon + 1, bel - colon - 1));
    std::smatch m;
    EXPECT_TRUE(std::regex_search(im.args, m, std::regex("^inline=1;size=(\\d+);"))) << im.args;
    if (m.size() > 1) {
      EXPECT_EQ(std::stoul(m[1]), im.png.size()) << "size= is the PNG's byte count";
    }
    images.push_back(im);
  }
  return images;
}

}  // namespace

// ================================================================================================================
// One-shot runs

TEST(CliOneShot, WritesAnMp4WithOneH264AndOneAacStream) {
  const std::string cwd = work_dir("mp4");
  Result r = run({small({"-p", "A red fox walks through fresh snow.", "-o", "fox.mp4"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_video_with_sound(cwd + "/fox.mp4", 64, 64, 22);
  EXPECT_NE(r.out.find("wrote fox.mp4 (64x64, 22 frames"), std::string::npos) << r.out;
  // The summary names every phase and where the video is.
  const size_t done = r.err.find("h3: done: ");
  ASSERT_NE(done, std::string::npos) << r.err;
  const std::string summary = r.err.substr(done, r.err.find('\n', done) - done);
  for (const char* phase : {"load ", "prompt ", "denoise ", "(2 passes)", "video decode ", "audio decode ", "write ",
                            "; total "})
    EXPECT_NE(summary.find(phase), std::string::npos) << phase << "\n" << summary;
  EXPECT_NE(r.err.find("denoise [########################] pass 2/2"), std::string::npos) << r.err;
  // Only the MP4 is left: no temporary names.
  EXPECT_EQ(files_in(cwd), std::vector<std::string>{"fox.mp4"});
}

TEST(CliOneShot, SecondsAndRoundedFrames) {
  const std::string cwd = work_dir("seconds");
  // --seconds 1 = 24 frames, rounded up to 39 = 17·2 + 5.
  Result r = run({{"-d", tiny_model(), "--device", "cpu", "-p", "waves", "--width", "64", "--height", "32", "--seconds",
                   "1", "--steps", "2", "-o", "w.mp4"},
                  {},
                  cwd,
                  ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("rounded up to 39 frames"), std::string::npos) << r.err;
  expect_video_with_sound(cwd + "/w.mp4", 64, 32, 39);
}

// FastH3 (models/dit/dit_fasth3.h): the tiny model made a FastVideo student by adding to_gate_compress to every main
// block of its transformer (a shard of their own in the index). Without --steps it runs the student's grid (4
// passes) with routing, writes its MP4 and says its plan; a second run gives the same frames and sound; --attention
// dense keeps the grid but leaves the gates and the routing out, so its frames differ.
TEST(CliOneShot, FastH3StudentRunsVsaH3AndWritesItsVideo) {
  const std::string cwd = work_dir("fasth3");
  const std::string model = cwd + "/student";
  fs::copy(tiny_model(), model, fs::copy_options::recursive);
  const std::string tdir = model + "/transformer";
  const h3::DitConfig c = h3::load_dit_config(h3::dit_component_from_dir(tdir));
  std::vector<h3::NamedTensor> gates;
  for (int64_t b = 0; b < c.num_layers; ++b) {
    h3::Tensor w = h3::Tensor::zeros({c.inner_dim(), c.hidden_size}, h3::DType::F32);
    for (int64_t i = 0; i < w.numel(); ++i) w.ptr<float>()[i] = 0.05f * static_cast<float>((i * 7 + b) % 11) - 0.25f;
    gates.push_back({h3::dit_gate_name(b), w.to(h3::DType::BF16)});
  }
  h3::write_safetensors(tdir + "/gates.safetensors", gates);
  std::string index_path;
  for (const auto& e : fs::directory_iterator(tdir))
    if (e.path().string().ends_with(".safetensors.index.json")) index_path = e.path().string();
  ASSERT_FALSE(index_path.empty());
  nlohmann::json index = nlohmann::json::parse(read_file(index_path));
  for (const h3::NamedTensor& g : gates) index["weight_map"][g.name] = "gates.safetensors";
  std::ofstream(index_path) << index.dump();

  // One run's outputs: the MP4, every frame and the sound.
  auto generate = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"-d", model, "--device", "cpu", "--width", "64", "--height", "64", "--frames",
                                     "22", "-p", "a fox", "-o", name + ".mp4", "--frames-dir", name,
                                     "--wav", name + ".wav"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run({args, {}, cwd, ""});
  };
  auto frames_of = [&](const std::string& name) {
    std::string all;
    for (const std::string& f : files_in(cwd + "/" + name)) all += read_file(cwd + "/" + name + "/" + f);
    return all;
  };
  Result r = generate("fast", {"--sparsity", "0.5"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_video_with_sound(cwd + "/fast.mp4", 64, 64, 22);
  EXPECT_NE(r.err.find("attention: VSA-H3 with gates (FastH3 student), tile 64 (4x4x4), sparsity 0.5, exempt; 4 "
                       "passes"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(", 4 passes, seed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("denoise [########################] pass 4/4"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(cwd + "/fast").size(), 22u);
  const std::string frames = frames_of("fast"), sound = read_file(cwd + "/fast.wav");

  r = generate("again", {"--sparsity", "0.5"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(frames_of("again") == frames) << "a second run of the same request gave other frames";
  EXPECT_TRUE(read_file(cwd + "/again.wav") == sound) << "a second run of the same request gave other sound";

  r = generate("dense", {"--attention", "dense"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("VSA-H3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("denoise [########################] pass 4/4"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(cwd + "/dense").size(), 22u);
  EXPECT_FALSE(frames_of("dense") == frames) << "the dense attention gave the student's frames";

  // The plain tiny model refuses --sparsity without the sparse attention, before anything loads.
  std::vector<std::string> args = {"-d", tiny_model(), "--device", "cpu", "--sparsity", "0.5", "-p", "a fox", "-o",
                                   "plain.mp4"};
  r = run({args, {}, cwd, ""});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--sparsity and the VSA tile size need the sparse attention"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(cwd + "/plain.mp4"));
}

TEST(CliOneShot, FramesDirAndWavWithoutMp4) {
  const std::string cwd = work_dir("frames");
  Result r = run({small({"-p", "rain on a window", "-o", "", "--frames-dir", "frames/run1", "--wav", "sound.wav"}), {},
                  cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> ppm;
  for (const std::string& f : files_in(cwd + "/frames/run1")) ppm.push_back(f);
  ASSERT_EQ(ppm.size(), 22u);
  EXPECT_EQ(ppm.front(), "frame_00000.ppm");
  EXPECT_EQ(ppm.back(), "frame_00021.ppm");
  const std::string first = read_file(cwd + "/frames/run1/frame_00000.ppm");
  const std::string header = "P6\n64 64\n255\n";
  ASSERT_EQ(first.size(), header.size() + 64 * 64 * 3);
  EXPECT_EQ(first.substr(0, header.size()), header);
  // The WAV: RIFF, stereo 16-bit at 32 kHz, cut to 22 frames = round(22 · 32000 / 24) = 29333 samples.
  const std::string wav = read_file(cwd + "/sound.wav");
  ASSERT_GE(wav.size(), 44u);
  EXPECT_EQ(wav.substr(0, 4), "RIFF");
  EXPECT_EQ(wav.size(), 44u + 29333u * 2 * 2);
  // -o '' writes no MP4 anywhere.
  for (const std::string& f : files_in(cwd)) EXPECT_EQ(f.find(".mp4"), std::string::npos) << f;
  EXPECT_EQ(r.out.find(".mp4"), std::string::npos) << r.out;
}

// A render canvas (issue 16): the frames, the MP4 and --profile are at the output size; the model ran smaller.
TEST(CliOneShot, RenderCanvasOutputsAreAtTheOutputSize) {
  const std::string cwd = work_dir("render_canvas");
  Result r = run({small({"-p", "rain on a window", "--width", "128", "--height", "64", "--render-width", "64",
                         "--render-height", "32", "--reuse", "2", "--frames-dir", "frames", "-o", "rain.mp4",
                         "--profile"}),
                  {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string first = read_file(cwd + "/frames/frame_00000.ppm");
  EXPECT_EQ(first.substr(0, 13), "P6\n128 64\n255");
  expect_video_with_sound(cwd + "/rain.mp4", 128, 64, 22);
  EXPECT_NE(r.err.find("  speed controls: reuse 2: 2 of 2 passes evaluate the model; rendered at 64x32, upscaled "
                       "to 128x64 (lanczos)\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("h3: warning: --reuse 2 with only 2 passes"), std::string::npos) << r.err;
}

TEST(CliOneShot, DefaultOutputIsNumberedAndNeverOverwrites) {
  const std::string cwd = work_dir("numbered");
  fs::create_directories(cwd + "/outputs");
  std::ofstream(cwd + "/outputs/h3-0001.mp4") << "an earlier video";
  for (int i = 0; i < 2; ++i) {
    Result r = run({small({"-p", "a lighthouse at night"}), {}, cwd, ""});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(i == 0 ? "wrote outputs/h3-0002.mp4" : "wrote outputs/h3-0003.mp4"), std::string::npos)
        << r.out;
  }
  EXPECT_EQ(read_file(cwd + "/outputs/h3-0001.mp4"), "an earlier video");
  expect_video_with_sound(cwd + "/outputs/h3-0002.mp4", 64, 64, 22);
  EXPECT_EQ(files_in(cwd + "/outputs"), (std::vector<std::string>{"h3-0001.mp4", "h3-0002.mp4", "h3-0003.mp4"}));
  // Same seed, same settings: the same video.
  EXPECT_EQ(read_file(cwd + "/outputs/h3-0002.mp4"), read_file(cwd + "/outputs/h3-0003.mp4"));
}

TEST(CliOneShot, SeedsChangeTheVideoAndRandomSaysWhichItUsed) {
  const std::string cwd = work_dir("seeds");
  ASSERT_EQ(run({small({"-p", "a kite", "--seed", "1", "-o", "a.mp4"}), {}, cwd, ""}).status, 0);
  ASSERT_EQ(run({small({"-p", "a kite", "--seed", "2", "-o", "b.mp4"}), {}, cwd, ""}).status, 0);
  EXPECT_NE(read_file(cwd + "/a.mp4"), read_file(cwd + "/b.mp4"));
  Result r = run({small({"-p", "a kite", "--seed", "random", "-o", "", "--wav", "/dev/null"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("2 passes, seed [0-9]+\n"))) << r.err;
}

TEST(CliOneShot, ProfilePrintsEveryPhase) {
  const std::string cwd = work_dir("profile");
  Result r = run({small({"-p", "a drum solo", "-o", "", "--wav", "/dev/null", "--profile"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  const size_t table = r.err.find("profile:\n");
  ASSERT_NE(table, std::string::npos) << r.err;
  for (const char* row : {"  load ", "  prompt ", "  denoise ", "  video decode ", "  audio decode ", "  total "})
    EXPECT_NE(r.err.find(row, table), std::string::npos) << row << "\n" << r.err;
  EXPECT_NE(r.err.find("/pass"), std::string::npos);
  EXPECT_NE(r.err.find("peak resident host memory"), std::string::npos);
}

TEST(CliOneShot, CtrlCCancelsAndLeavesNothing) {
  const std::string cwd = work_dir("cancel");
  // Enough passes that the run is still denoising when the signal arrives.
  Child c({{"-d", tiny_model(), "--device", "cpu", "-p", "a storm", "--width", "128", "--height", "128", "--steps",
            "200"},
           {},
           cwd,
           ""});
  ASSERT_TRUE(c.wait_for_stderr("pass 1/200"));
  c.signal(SIGINT);
  Result r = c.finish();
  EXPECT_EQ(r.status, 130) << r.err;
  EXPECT_NE(r.err.find("cancelled; nothing was written."), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("pass 200/200"), std::string::npos);
  EXPECT_TRUE(files_in(cwd).empty()) << "no MP4, no temporary file, not even the outputs/ folder";
}

TEST(CliOneShot, HelpExplainsEveryOptionRangeAndDefault) {
  Result r = run({{"--help"}, {}, work_dir("help"), ""});
  ASSERT_EQ(r.status, 0);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 104u) << line;  // 100 columns + "·"s
  r.out = std::regex_replace(r.out, std::regex("\\s+"), " ");  // the descriptions are word-wrapped
  for (const char* flag : {"--model-dir", "--prompt", "--output", "--width", "--height", "--frames", "--seconds",
                           "--steps", "--seed", "--frames-dir", "--wav", "--profile", "--info", "--show", "--zoom",
                           "--device", "--help"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  for (const char* fact : {"default 864", "default 480", "Default 124 = 5.17 s", "default 20", "default 42",
                           "num_inference_steps N + 1", "2..1000", "1..362", "multiples of 32", "768 x 1344",
                           "-o '' writes no MP4", "1..16"})
    EXPECT_NE(r.out.find(fact), std::string::npos) << fact;
  EXPECT_NE(r.out.find("--ssd-streaming"), std::string::npos);
  EXPECT_NE(r.out.find("--memory-budget GB"), std::string::npos);
  // The speed controls, with their ranges, in their own section.
  const size_t speed = r.out.find("Speed controls");
  ASSERT_NE(speed, std::string::npos);
  for (const char* fact : {"--reuse N", "1..3 (default 1: every pass)", "--render-width W", "--render-height H",
                           "libswscale's Lanczos", "--use-reference-rope", "256x256", "--layers", "--core-reuse",
                           "--token-reduction"})
    EXPECT_GT(r.out.find(fact, speed), speed) << fact;
  EXPECT_EQ(std::regex_replace(run({{"-h"}, {}, work_dir("help"), ""}).out, std::regex("\\s+"), " "), r.out);
}

// Every usage rule: one sentence, exit 2, fast (no weights loaded), nothing written in the working folder.
TEST(CliUsage, EveryBadOptionIsRefusedBeforeLoading) {
  const std::string m = tiny_model();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"-p", "x"}, "h3 needs the model folder: -d DIR"},
      {{"-d", m, "-p", "x", "--bogus"}, "unknown option '--bogus'"},
      {{"-d", m, "-p", "x", "-q"}, "unknown option '-q'"},
      {{"-d", m, "-p", "x", "stray"}, "unexpected argument 'stray'"},
      {{"-d", m, "-p", "x", "--width"}, "--width needs a value"},
      {{"-d", m, "-p"}, "--prompt needs a value"},
      {{"-d", m, "-p", "x", "--width", "wide"}, "--width takes a whole number, got 'wide'."},
      {{"-d", m, "-p", "x", "--steps", "2.5"}, "--steps takes a whole number, got '2.5'."},
      {{"-d", m, "-p", "x", "--seconds", "long"}, "--seconds takes a number, got 'long'."},
      {{"-d", m, "-p", "x", "--seed", "-3"}, "--seed takes a whole number from 0 to 18446744073709551615 or 'random'"},
      {{"-d", m, "-p", "x", "--width", "100"}, "The width must be a multiple of 32 and at least 32 pixels, got 100."},
      {{"-d", m, "-p", "x", "--height", "0"}, "The height must be a multiple of 32 and at least 32 pixels, got 0."},
      {{"-d", m, "-p", "x", "--width", "1344", "--height", "800"}, "The canvas must have at most 768 × 1344"},
      {{"-d", m, "-p", "x", "--frames", "0"}, "--frames must be between 1 and 362"},
      {{"-d", m, "-p", "x", "--frames", "363"}, "--frames must be between 1 and 362"},
      {{"-d", m, "-p", "x", "--seconds", "16"}, "--seconds must give between 1 and 362 frames"},
      {{"-d", m, "-p", "x", "--frames", "22", "--seconds", "1"}, "--frames and --seconds are mutually exclusive"},
      {{"-d", m, "-p", "x", "--steps", "1"}, "--steps (model passes) must be between 2 and 1000, got 1."},
      {{"-d", m, "-p", "x", "--steps", "1001"}, "--steps (model passes) must be between 2 and 1000, got 1001."},
      {{"-d", m, "-p", "x", "--reuse", "4"}, "--reuse must be between 1 and 3 (1 evaluates the model at every pass)"},
      {{"-d", m, "-p", "x", "--render-width", "64"}, "--render-width and --render-height go together"},
      {{"-d", m, "-p", "x", "--width", "128", "--height", "64", "--render-width", "64", "--render-height", "64"},
       "The render canvas (--render-width × --render-height) must have the output canvas' aspect ratio (128x64)"},
      {{"-d", m, "-p", ""}, "The prompt must not be empty."},
      {{"-d", m, "-p", "x", "--layers", "1"}, "--layers must be between 2 and 2 (seven tenths of the transformer's 2 "
                                               "blocks, rounded up, to all of them), got 1."},
      {{"-d", m, "-p", "x", "--core-reuse", "7"}, "--core-reuse must be between 1 and 6, got 7."},
      {{"-d", m, "-p", "x", "--token-reduction=on"}, "--token-reduction takes no value"},
      {{"-d", m, "-p", "x", "--zoom", "0"}, "--zoom must be between 1 and 16, got '0'."},
      {{"-d", m, "-p", "x", "--zoom", "17"}, "--zoom must be between 1 and 16, got '17'."},
      {{"-d", m, "-p", "x", "--device", "tpu"}, "--device must be cpu, cuda or auto, got 'tpu'."},
      {{"-d", m, "-p", "x", "--show=yes"}, "--show takes no value"},
      {{"-d", m, "-p", "x", "-o", "/nonexistent-h3/a.mp4"}, "The output folder '/nonexistent-h3' of -o does not exist"},
      {{"-d", m, "-p", "x", "-o", "/proc/h3-cli-test.mp4"}, "The output folder '/proc' of -o is not writable."},
      {{"-d", m, "-p", "x", "-o", "."}, "-o '.' is a folder"},
      {{"-d", m, "-p", "x", "--wav", "/nonexistent-h3/a.wav"}, "The output folder '/nonexistent-h3' of --wav does not exist"},
      {{"-d", m, "-p", "x", "--frames-dir", "/proc/h3-cli-frames"}, "--frames-dir '/proc/h3-cli-frames' cannot be created"},
      {{"-d", m, "-o", "a.mp4"}, "--output applies to a one-shot run (-p PROMPT)"},
      {{"-d", m, "--frames-dir", "f"}, "--frames-dir applies to a one-shot run"},
      {{"-d", m, "--width", "33"}, "The width must be a multiple of 32"},  // the session checks its settings too
      {{"--info"}, "--info needs the model folder"},
  };
  for (const Case& c : cases) {
    const std::string cwd = work_dir("usage");
    Result r = run({c.args, {}, cwd, ""});
    std::string cmd;
    for (const std::string& a : c.args) cmd += " '" + a + "'";
    EXPECT_EQ(r.status, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("h3: " + c.message), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_EQ(r.err.find("loading the model"), std::string::npos) << cmd;
    EXPECT_LT(r.seconds, 5.0) << cmd;  // configs only: well under a second on the tiny model
    EXPECT_TRUE(files_in(cwd).empty()) << cmd;
    EXPECT_TRUE(r.out.empty()) << cmd << "\n" << r.out;
  }
}

// A binary PPM picture of w × h pixels (any pattern) at `path`: a keyframe file the image reader takes.
void write_ppm(const std::string& path, int w, int h) {
  std::string bytes = "P6\n" + std::to_string(w) + " " + std::to_string(h) + "\n255\n";
  for (int i = 0; i < w * h * 3; ++i) bytes += static_cast<char>((i * 29) % 256);
  std::ofstream(path, std::ios::binary) << bytes;
}

// fl2va from the command line: both keyframes, the canvas resolved from the first, an MP4 of that canvas.
TEST(CliKeyframes, FirstAndLastFramesMakeAnFl2vaVideo) {
  const std::string media = work_dir("keyframes_media"), cwd = work_dir("keyframes");
  write_ppm(media + "/first.ppm", 96, 64);
  write_ppm(media + "/last.ppm", 40, 50);
  std::vector<std::string> args = {"-d", tiny_model(), "--device", "cpu", "--frames", "22", "--steps", "2", "-p",
                                   "The fox keeps walking.", "--first-frame", media + "/first.ppm", "--last-frame",
                                   media + "/last.ppm", "-o", "fox.mp4"};
  // An explicit canvas first, then the one the first keyframe resolves under the tiny model's canvas rule.
  std::vector<std::string> explicit_canvas = args;
  explicit_canvas.insert(explicit_canvas.end(), {"--width", "64", "--height", "64"});
  Result r = run({explicit_canvas, {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_video_with_sound(cwd + "/fox.mp4", 64, 64, 22);
  EXPECT_NE(r.err.find("keyframes: first " + media + "/first.ppm, last " + media + "/last.ppm"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("h3: done: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("keyframes "), std::string::npos) << "the keyframe encode is a phase of its own\n" << r.err;
}

TEST(CliKeyframes, EveryBadKeyframeIsRefusedBeforeLoading) {
  const std::string media = work_dir("keyframes_bad_media");
  write_ppm(media + "/wide.ppm", 100, 20);  // 5:1
  std::ofstream(media + "/notes.txt") << "not a picture";
  std::ofstream(media + "/empty.png");
  const std::string& m = tiny_model();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--first-frame", media + "/missing.png"}, media + "/missing.png"},
      {{"--last-frame", media + "/notes.txt"}, media + "/notes.txt"},
      {{"--first-frame", media + "/empty.png"}, media + "/empty.png"},
      {{"--first-frame", media}, media},  // a folder
      {{"--first-frame", media + "/wide.ppm"}, "MiniMax-H3 supports aspect ratios from 1:4 to 4:1"},
      {{"--first-frame", media + "/wide.ppm", "--width", "64"}, "With keyframes, give --width and --height together"},
      {{"--first-frame", ""}, "--first-frame needs an image file."},
  };
  for (const Case& c : cases) {
    const std::string cwd = work_dir("keyframes_bad");
    std::vector<std::string> args = {"-d", m, "--device", "cpu", "-p", "x"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Result r = run({args, {}, cwd, ""});
    EXPECT_EQ(r.status, 2) << c.message << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one sentence\n" << r.err;
    EXPECT_EQ(r.err.find("loading"), std::string::npos) << r.err;
    EXPECT_TRUE(files_in(cwd).empty());
  }
}

// The session keeps its keyframes between videos; !status shows them; the cache key covers their pixels.
TEST(CliKeyframes, SessionFirstLastAndTheCache) {
  const std::string media = work_dir("keyframes_session_media"), cwd = work_dir("keyframes_session");
  write_ppm(media + "/a.ppm", 64, 64);
  write_ppm(media + "/b.ppm", 80, 60);
  const std::string input = "!first " + media + "/a.ppm\n!status\nA fox\nA fox\n!last " + media +
                            "/b.ppm\nA fox\n!first clear\n!last clear\n!status\n!first " + media +
                            "/nothing.png\n!status\n";
  Result r = run({{"-d", tiny_model(), "--device", "cpu", "--width", "64", "--height", "64", "--frames", "5",
                   "--steps", "2"},
                  {}, cwd, input});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("keyframes: first " + media + "/a.ppm\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("keyframes: first " + media + "/a.ppm, last " + media + "/b.ppm\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("keyframes: none\n"), std::string::npos) << r.out;
  // Three videos: the second reuses the first's conditioning, the third (another keyframe) is encoded anew.
  EXPECT_NE(r.out.find("prompt encodes 2 | prompt cache hits 1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find(media + "/nothing.png"), std::string::npos) << r.err;  // refused, session goes on
}

// The reference flags are parsed in command-line order and checked, their files included, before loading anything.
TEST(CliUsage, ReferenceFlagsAreCheckedBeforeLoading) {
  const std::string& m = tiny_model();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--ref-image", "a.png"}, "Cannot read the image a.png: the file does not exist."},
      {{"--ref-video-audio", "v.mp4", "a.wav", "--ref-silent-video", "s.mp4"}, "v.mp4"},
      {{"--ref-audio", "a.wav"}, "An audio reference needs an image or video reference beside it"},
      {{"--ref-image", "a.png", "--first-frame", "b.png"}, "Keyframes (--first-frame, --last-frame) and references"},
      {{"--ref-video-audio", "v.mp4"}, "--ref-video-audio needs two values (--ref-video-audio VIDEO AUDIO)."},
      {{"--ref-image-size", "huge"}, "--ref-image-size must be max or match, got 'huge'."},
      {{"--ref-image", ""}, "--ref-image needs a file."},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"-d", m, "-p", "x"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Result r = run({args, {}, work_dir("refs"), ""});
    EXPECT_EQ(r.status, 2) << c.message << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("loading"), std::string::npos) << r.err;
  }
}

TEST(CliUsage, SsdStreamingIsASwitch) {
  Result r = run({{"-d", tiny_model(), "-p", "x", "--ssd-streaming=1"}, {}, work_dir("ssd"), ""});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--ssd-streaming takes no value"), std::string::npos) << r.err;
}

TEST(CliUsage, RuntimeFailuresExitOne) {
  Result r = run({{"-d", "/nonexistent-h3-model", "-p", "x"}, {}, work_dir("runtime"), ""});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("model folder not found"), std::string::npos) << r.err;
#ifndef H3_HAVE_CUDA
  r = run({{"-d", tiny_model(), "-p", "x", "--device", "cuda"}, {}, work_dir("runtime"), ""});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no CUDA backend"), std::string::npos) << r.err;
#endif
}

// ================================================================================================================
// Outputs never replace what is not a regular file nor overwrite the model, an input or each other; prompts are
// checked before loading (issue 22, items 1, 2 and 8).

namespace {

struct stat stat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st;
}

// Every file under `dir` with its bytes.
std::map<std::string, std::string> contents_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& f : files_in(dir))
    if (fs::is_regular_file(dir + "/" + f)) out[f] = read_file(dir + "/" + f);
  return out;
}

// Asserts that `args` is refused before loading with exactly `message`, one line, exit 2.
void expect_refused(const std::vector<std::string>& args, const std::string& cwd, const std::string& message) {
  std::string cmd;
  for (const std::string& a : args) cmd += " '" + a + "'";
  const Result r = run({args, {}, cwd, ""});
  EXPECT_EQ(r.status, 2) << cmd << "\n" << r.err;
  EXPECT_EQ(r.err, "h3: " + message + "\n") << cmd;
  EXPECT_LT(r.seconds, 5.0) << cmd;
  EXPECT_TRUE(r.out.empty()) << cmd << "\n" << r.out;
}

}  // namespace

TEST(CliOutputs, AFifoOrADeviceIsWrittenStraightIntoOrRefused) {
  const std::string cwd = work_dir("streams");
  const std::string fifo = cwd + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // An MP4 cannot be streamed: refused before loading, without waiting for a reader, and /dev/null stays a device.
  for (const std::string target : {"pipe", "/dev/null"})
    expect_refused(small({"-p", "x", "-o", target}), cwd,
                   "-o '" + target + "' is " + (target == "pipe" ? "a FIFO" : "a character device") + ", and " +
                       h3::kMp4NeedsAFile + " (or -o '' for no MP4).");
  EXPECT_TRUE(S_ISCHR(stat_of("/dev/null").st_mode));
  // A WAV streams: the reader gets the whole file, the FIFO stays a FIFO and nothing else appears.
  h3::FifoReader reader(fifo);
  Result r = run({small({"-p", "x", "-o", "", "--wav", "pipe"}), {}, cwd, ""});
  const std::string streamed = reader.finish();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(streamed.substr(0, 4), "RIFF");
  EXPECT_EQ(streamed.size(), 44u + 29333u * 2 * 2);
  EXPECT_TRUE(S_ISFIFO(stat_of(fifo).st_mode));
  EXPECT_EQ(files_in(cwd), std::vector<std::string>{"pipe"});
  // Into standard output: stdout carries the WAV alone, and the report goes to stderr.
  r = run({small({"-p", "x", "-o", "", "--wav", "/dev/stdout"}), {}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, streamed);
  EXPECT_NE(r.err.find("wrote /dev/stdout (32 kHz stereo WAV, seed 42)"), std::string::npos) << r.err;
  // A full disk: exit 1 with the reason, nothing left behind, the device still a device.
  if (fs::exists("/dev/full")) {
    r = run({small({"-p", "x", "-o", "", "--wav", "/dev/full"}), {}, cwd, ""});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("h3: cannot write /dev/full: No space left on device\n"), std::string::npos) << r.err;
    EXPECT_TRUE(S_ISCHR(stat_of("/dev/full").st_mode));
  }
  EXPECT_EQ(files_in(cwd), std::vector<std::string>{"pipe"});
  // What cannot be written into at all is refused before loading.
  expect_refused(small({"-p", "x", "-o", "", "--wav", "."}), cwd, "--wav '.' is a folder; give a file name inside it.");
  fs::create_symlink("gone.wav", cwd + "/dangling.wav");
  expect_refused(small({"-p", "x", "-o", "", "--wav", "dangling.wav"}), cwd,
                 "--wav 'dangling.wav' is a symbolic link to a missing file ('gone.wav'); give the file's own path or "
                 "remove the link.");
  EXPECT_FALSE(fs::exists(cwd + "/gone.wav"));
}

// !save copies a finished MP4, so it streams: into a FIFO, into /dev/null; a full device is an error and the session
// goes on.
TEST(CliOutputs, SessionSaveStreamsIntoAFifoOrADevice) {
  const std::string cwd = work_dir("save_streams");
  const std::string fifo = cwd + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  h3::FifoReader reader(fifo);
  std::string input = "!output videos\na kite\n!save pipe\n!save /dev/null\n";
  if (fs::exists("/dev/full")) input += "!save /dev/full\n";
  input += "!status\n";
  const Result r = run({small({}), {}, cwd, input});
  const std::string streamed = reader.finish();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(streamed, read_file(cwd + "/videos/0001.mp4"));
  EXPECT_NE(r.out.find("saved videos/0001.mp4 as pipe\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saved videos/0001.mp4 as /dev/null\n"), std::string::npos) << r.out;
  if (fs::exists("/dev/full")) {
    EXPECT_NE(r.err.find("h3: cannot write /dev/full: No space left on device\n"), std::string::npos) << r.err;
  }
  EXPECT_NE(r.out.find("engine: "), std::string::npos) << "the session went on after the failed !save";
  EXPECT_TRUE(S_ISFIFO(stat_of(fifo).st_mode));
  EXPECT_TRUE(S_ISCHR(stat_of("/dev/null").st_mode));
}

// Each clash is refused before loading with one sentence naming both paths, and every file stays as it was.
TEST(CliOutputs, OutputsNeverOverwriteTheModelAnInputOrEachOther) {
  const std::string cwd = work_dir("apart");
  // A model of its own: a regression here must not spoil the one the other tests share.
  ASSERT_EQ(run({{"tool", "make-tiny-model", "model"}, {}, cwd, ""}).status, 0);
  write_ppm(cwd + "/k.ppm", 64, 64);
  fs::create_directory(cwd + "/frames");
  write_ppm(cwd + "/frames/frame_00003.ppm", 64, 64);
  fs::create_symlink("model/transformer/config.json", cwd + "/link.json");
  fs::create_hard_link(cwd + "/model/vae/config.json", cwd + "/hard.json");
  std::ofstream(cwd + "/a.wav") << "a sound";
  const std::map<std::string, std::string> before = contents_of(cwd);
  const std::string m = "model";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"-o", "model/transformer/config.json"},
       "-o 'model/transformer/config.json' is inside the model folder 'model'; write outputs elsewhere."},
      {{"-o", "", "--wav", "model/audio_vae/config.json"},
       "--wav 'model/audio_vae/config.json' is inside the model folder 'model'; write outputs elsewhere."},
      {{"-o", "", "--frames-dir", "model/vae"},
       "--frames-dir 'model/vae' is inside the model folder 'model'; write outputs elsewhere."},
      {{"-o", "link.json"}, "-o 'link.json' is inside the model folder 'model'; write outputs elsewhere."},
      {{"-o", "hard.json"},
       "-o 'hard.json' is the model file 'model/vae/config.json' (the same file); write outputs elsewhere."},
      {{"-o", "same.mp4", "--wav", "same.mp4"},
       "--wav 'same.mp4' is the same file as -o 'same.mp4'; give each output its own name."},
      {{"-o", "./same.mp4", "--wav", "frames/../same.mp4"},
       "--wav 'frames/../same.mp4' is the same file as -o './same.mp4'; give each output its own name."},
      {{"--first-frame", "k.ppm", "-o", "k.ppm"},
       "-o 'k.ppm' is the same file as --first-frame 'k.ppm'; h3 does not write over its inputs."},
      {{"--last-frame", "frames/frame_00003.ppm", "--frames-dir", "frames"},
       "--frames-dir 'frames' would write over the input --last-frame 'frames/frame_00003.ppm'; h3 does not write "
       "over its inputs."},
      {{"--ref-image", "k.ppm", "--ref-video-audio", "v.mp4", "a.wav", "-o", "", "--wav", "./a.wav"},
       "--wav './a.wav' is the same file as --ref-video-audio 'a.wav'; h3 does not write over its inputs."},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"-d", m, "--device", "cpu", "-p", "x"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    expect_refused(args, cwd, c.message);
  }
  EXPECT_EQ(contents_of(cwd), before);
  EXPECT_TRUE(fs::is_symlink(cwd + "/link.json"));
}

TEST(CliOutputs, SessionSaveNeverOverwritesTheModelOrAnInput) {
  const std::string cwd = work_dir("save_apart");
  write_ppm(cwd + "/k.ppm", 64, 64);
  const std::string before = read_file(cwd + "/k.ppm");
  const std::string model_file = tiny_model() + "/vae/config.json";
  const std::string config = read_file(model_file);
  const Result r = run({small({}), {}, cwd,
                        "!output videos\na kite\n!first k.ppm\n!save k.ppm\n!save videos/0001.mp4\n!save " +
                            model_file + "\n!save ./kept.mp4\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("h3: !save 'k.ppm' is the same file as !first 'k.ppm'; h3 does not write over its inputs.\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("h3: !save 'videos/0001.mp4' is the same file as the last video 'videos/0001.mp4'; h3 does "
                       "not write over its inputs.\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("h3: !save '" + model_file + "' is inside the model folder '" + tiny_model() +
                       "'; write outputs elsewhere.\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(cwd + "/k.ppm"), before);
  EXPECT_EQ(read_file(model_file), config);
  EXPECT_EQ(read_file(cwd + "/kept.mp4"), read_file(cwd + "/videos/0001.mp4"));
}

// Invalid UTF-8 and the tokenizer's control tokens: one sentence each, exit 2, before any model loads (the
// tokenizer is read for them); in a session the prompt is refused and the session goes on.
TEST(CliUsage, PromptsAreCheckedBeforeLoading) {
  const std::string cwd = work_dir("prompts");
  expect_refused(small({"-p", "a fox \xff in snow"}), cwd,
                 "prompt is not valid UTF-8 (byte 0xFF at offset 6); the text must be UTF-8 encoded without "
                 "surrogates, overlong forms or truncated sequences");
  for (const char* token : {"<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|im_start|>",
                            "<|im_end|>", "<|endoftext|>", "<think>", "<tool_call>"})
    expect_refused(small({"-p", std::string("a fox ") + token + " in snow"}), cwd,
                   std::string("the prompt contains '") + token +
                       "', one of the tokenizer's control tokens, which it would read as that token and not as text; "
                       "remove it from the prompt");
  EXPECT_TRUE(files_in(cwd).empty());
  const Result r = run({small({}), {}, cwd, "!output videos\na <|vision_end|> kite\na kite\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("h3: the prompt contains '<|vision_end|>'"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(cwd + "/videos"), std::vector<std::string>{"0001.mp4"}) << "only the good prompt made a video";
}

// The reference neither truncates a long prompt nor refuses it (conditioner.md §4): h3 refuses one longer than the
// text encoder's max_position_embeddings, before loading; a model that says 30 makes it testable (an argument
// holds at most 128 KiB, far from the release's 262144 tokens).
TEST(CliUsage, APromptLongerThanTheTextEncoderTakesIsRefusedBeforeLoading) {
  const std::string cwd = work_dir("long_prompt");
  ASSERT_EQ(run({{"tool", "make-tiny-model", "model"}, {}, cwd, ""}).status, 0);
  const std::string config_path = cwd + "/model/text_encoder/config.json";
  std::string config = read_file(config_path);
  const std::string key = "\"max_position_embeddings\": 262144";
  ASSERT_NE(config.find(key), std::string::npos);
  config.replace(config.find(key), key.size(), "\"max_position_embeddings\": 30");
  std::ofstream(config_path) << config;
  std::vector<std::string> args = {"-d", "model", "--device", "cpu", "--width", "64", "--height", "64", "--frames",
                                   "5", "--steps", "2", "-o", "", "--wav", "/dev/null", "-p"};
  std::string words;
  for (int i = 0; i < 31; ++i) words += "fox ";
  args.push_back(words);
  const Result r = run({args, {}, cwd, ""});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(std::regex_match(r.err, std::regex("h3: The prompt is [0-9]+ tokens long; the text encoder takes at "
                                                 "most 30 \\(max_position_embeddings in text_encoder/config.json\\), "
                                                 "and h3, like the reference, does not cut a prompt short: shorten "
                                                 "it.\n")))
      << r.err;
  EXPECT_EQ(r.err.find("loading"), std::string::npos);
  // 25 bytes of ASCII are at most 25 tokens: this one runs.
  args.back() = "a red fox in fresh snow.";
  const Result ok = run({args, {}, cwd, ""});
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// ================================================================================================================
// The interactive session through a pipe

namespace {

std::string session_folder(const std::string& out) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(out, m, std::regex("videos go to (outputs/session-[0-9]{8}-[0-9]{6})/"))) << out;
  return m.size() > 1 ? m[1].str() : std::string();
}

// The `engine:` line of the n-th !status (0-based).
std::string engine_line(const std::string& out, int n) {
  size_t at = 0;
  for (int i = 0; i <= n; ++i) {
    at = out.find("engine: ", i == 0 ? 0 : at + 1);
    if (at == std::string::npos) return {};
  }
  return out.substr(at, out.find('\n', at) - at);
}

}  // namespace

TEST(CliSession, SecondVideoReusesTheLoadedModelAndTheCachedPrompt) {
  const std::string cwd = work_dir("session");
  Result r = run({small({}), {}, cwd,
                  "!status\n"
                  "A red fox walks through fresh snow.\n"
                  "!status\n"
                  "!seed 8\n"
                  "A red fox walks through fresh snow.\n"
                  "!status\n"
                  "!quit\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(engine_line(r.out, 0), "engine: components loaded 0 | prompt encodes 0 | prompt cache hits 0 | cached "
                                   "prompts 0 | videos 0");
  EXPECT_EQ(engine_line(r.out, 1), "engine: components loaded 5 | prompt encodes 1 | prompt cache hits 0 | cached "
                                   "prompts 1 | videos 1");
  // The second video: nothing loaded again, the prompt not encoded again.
  EXPECT_EQ(engine_line(r.out, 2), "engine: components loaded 5 | prompt encodes 1 | prompt cache hits 1 | cached "
                                   "prompts 1 | videos 2");
  EXPECT_EQ(count(r.err, "loading the model"), 1) << r.err;
  EXPECT_NE(r.err.find("prompt 0"), std::string::npos);
  EXPECT_NE(r.err.find("(cached)"), std::string::npos) << r.err;
  const std::string folder = session_folder(r.out);
  expect_video_with_sound(cwd + "/" + folder + "/0001.mp4", 64, 64, 22);
  expect_video_with_sound(cwd + "/" + folder + "/0002.mp4", 64, 64, 22);
  EXPECT_NE(read_file(cwd + "/" + folder + "/0001.mp4"), read_file(cwd + "/" + folder + "/0002.mp4"));  // seeds 42, 8
  EXPECT_NE(r.err.find("seed 42\n"), std::string::npos);
  EXPECT_NE(r.err.find("seed 8\n"), std::string::npos);
  EXPECT_NE(r.out.find("bye"), std::string::npos);
}

TEST(CliSession, EveryCommandWithAGoodAndABadValue) {
  const std::string cwd = work_dir("commands");
  Result r = run({small({}), {{"H3_TERMINAL_IMAGES", "none"}}, cwd,
                  "!help\n"
                  "!seed 7\n!seed seven\n!seed random\n!seed 9\n"
                  "!size 96x64\n!size 100x64\n!size big\n"
                  "!frames 30\n!frames 400\n"
                  "!seconds 0.5\n!seconds 20\n"
                  "!steps 3\n!steps 1\n"
                  "!show off\n!show on\n!show maybe\n"
                  "!zoom 3\n!zoom 0\n"
                  "!profile on\n!profile sometimes\n!profile off\n"
                  "!save early.mp4\n"
                  "!again\n"
                  "!output elsewhere/videos\n!output /proc/h3-no\n"
                  "!size 64x64\n!frames 22\n!steps 2\n"
                  "a paper boat on a river\n"
                  "!again\n"
                  "!save kept.mp4\n!save /nonexistent-h3/kept.mp4\n!save\n"
                  "!cache\n!cache clear\n!cache\n!cache everything\n"
                  "!nonsense\n"
                  "!status\n"
                  "!quit\n"
                  "a prompt after quitting\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* c : {"!help", "!status", "!seed", "!size", "!frames", "!seconds", "!steps", "!show", "!zoom",
                        "!output", "!save", "!again", "!cache", "!quit"})
    EXPECT_NE(r.out.find(std::string("  ") + c), std::string::npos) << c;
  const std::vector<std::string> good = {
      "seed: 7\n", "seed: random\n", "seed: 9\n", "size: 96x64\n",
      "frames: 39 (1.62 s at 24 fps); !frames 30 rounded up to 39 frames",
      "frames: 22 (0.92 s at 24 fps); !seconds 0.5 = 12 frames, rounded up to 22 frames", "steps: 3 passes\n",
      "show: off\n", "zoom: 3\n", "profile: on\n", "profile: off\n", "videos go to elsewhere/videos/\n",
      "saved elsewhere/videos/0002.mp4 as kept.mp4\n", "prompt cache: 1 cached prompt (most recent first)\n",
      "  1. 11 tokens: a paper boat on a river\n", "prompt cache cleared\n", "prompt cache: 0 cached prompts\n"};
  for (const std::string& g : good) EXPECT_NE(r.out.find(g), std::string::npos) << g << "\n" << r.out;
  const std::vector<std::string> bad = {
      "h3: !seed takes a whole number from 0 to 18446744073709551615 or 'random', got 'seven'.",
      "h3: The width must be a multiple of 32 and at least 32 pixels, got 100.",
      "h3: !size takes WxH, e.g. !size 512x512, got 'big'.",
      "h3: !frames must be between 1 and 362",
      "h3: !seconds must give between 1 and 362 frames",
      "h3: !steps (model passes) must be between 2 and 1000, got 1.",
      "h3: no inline previews here: H3_TERMINAL_IMAGES=none; previews stay off.",
      "h3: !show takes on or off, got 'maybe'.",
      "h3: !zoom must be between 1 and 16, got '0'.",
      "h3: !profile takes on or off, got 'sometimes'.",
      "h3: there is no video to save yet; type a prompt first.",
      "h3: there is no prompt to repeat yet; type one first.",
      "h3: !output '/proc/h3-no' cannot be created",
      "h3: The output folder '/nonexistent-h3' of !save does not exist",
      "h3: !save needs a file name: !save PATH.",
      "h3: !cache takes nothing or 'clear', got 'everything'.",
      "h3: unknown command '!nonsense'; !help lists the commands."};
  for (const std::string& b : bad) EXPECT_NE(r.err.find(b), std::string::npos) << b << "\n" << r.err;
  // A bad value keeps the previous setting: the videos use 64x64, 22 frames, 2 passes, seeds 9 and 10 (!again).
  EXPECT_NE(r.err.find("h3: 64x64, 22 frames (0.92 s at 24 fps), 2 passes, seed 9\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("h3: 64x64, 22 frames (0.92 s at 24 fps), 2 passes, seed 10\n"), std::string::npos) << r.err;
  expect_video_with_sound(cwd + "/elsewhere/videos/0001.mp4", 64, 64, 22);
  expect_video_with_sound(cwd + "/kept.mp4", 64, 64, 22);
  EXPECT_EQ(read_file(cwd + "/kept.mp4"), read_file(cwd + "/elsewhere/videos/0002.mp4"));
  EXPECT_EQ(r.err.find("a prompt after quitting"), std::string::npos);
  EXPECT_EQ(count(r.err, "h3: done:"), 2);  // !quit stops reading
}

// The DiT speed commands: each shows the three controls, a bad value keeps them, and a video is made with them.
TEST(CliSession, SpeedCommandsShowSetAndKeepTheirRules) {
  const std::string cwd = work_dir("speed");
  Result r = run({small({}), {{"H3_TERMINAL_IMAGES", "none"}}, cwd,
                  "!help\n!layers\n!layers 2\n!layers 3\n!layers all\n!core-reuse 2\n!core-reuse 7\n"
                  "!token-reduction on\n!token-reduction maybe\na fox\n!status\n!quit\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* c : {"!layers", "!core-reuse", "!token-reduction"})
    EXPECT_NE(r.out.find(std::string("  ") + c), std::string::npos) << c;
  for (const char* g : {"layers: all\n", "layers: 2\n", "core-reuse: 2\n", "token reduction: on\n",
                        "profile off; core-reuse 2; token reduction\n"})
    EXPECT_NE(r.out.find(g), std::string::npos) << g << "\n" << r.out;
  for (const char* b : {"h3: !layers must be between 2 and 2 (seven tenths of the transformer's 2 blocks, rounded up, "
                        "to all of them), got 3.",
                        "h3: !core-reuse must be between 1 and 6, got 7.",
                        "h3: !token-reduction takes on or off, got 'maybe'."})
    EXPECT_NE(r.err.find(b), std::string::npos) << b << "\n" << r.err;
  EXPECT_EQ(count(r.err, "h3: done:"), 1);
}

// FastH3's commands on a dense checkpoint: --sparsity needs the sparse attention; a bad value keeps the setting.
// !steps default gives the passes back to the checkpoint (kDefaultSteps here; a student's grid on a student).
TEST(CliSession, AttentionAndSparsityCommands) {
  const std::string cwd = work_dir("fasth3_session");
  Result r = run({small({}), {{"H3_TERMINAL_IMAGES", "none"}}, cwd,
                  "!sparsity 0.5\n!attention sparse\n!sparsity 0.5\n!sparsity 1\n!attention maybe\n"
                  "!attention default\n!sparsity default\n!attention default\n!steps default\n!steps 3\n!quit\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string checkpoint_steps = "steps: " + std::to_string(h3::kDefaultSteps) + " passes (the checkpoint's)\n";
  for (const std::string g : {"attention: sparse\n", "sparsity: 0.5\n", "sparsity: default\n",
                              "attention: the checkpoint's\n", checkpoint_steps.c_str(), "steps: 3 passes\n"})
    EXPECT_NE(r.out.find(g), std::string::npos) << g << "\n" << r.out;
  // The first !attention default is refused while the sparsity is set (the dense checkpoint routes nothing).
  for (const char* b :
       {"need the sparse attention", "sparsity must be in [0, 1)", "takes dense or sparse, got 'maybe'"})
    EXPECT_NE(r.err.find(b), std::string::npos) << b << "\n" << r.err;
  EXPECT_EQ(count(r.err, "need the sparse attention"), 2) << r.err;
}

// The speed controls' commands (issue 16): each with a good and a bad value, then a video made under them.
TEST(CliSession, SpeedControlCommands) {
  const std::string cwd = work_dir("speed_commands");
  Result r = run({small({}), {{"H3_TERMINAL_IMAGES", "none"}}, cwd,
                  "!help\n!size 128x64\n!steps 20\n"
                  "!reuse 2\n!reuse 5\n"
                  "!render-size 64x64\n!render-size 64x32\n!render-size native\n!render-size\n!render-size 64x32\n"
                  "!reference-rope on\n!reference-rope maybe\n!reference-rope off\n"
                  "!steps 4\n!reuse 2\n!output vids\n"
                  "a paper boat on a river\n"
                  "!status\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* c : {"!reuse", "!render-size", "!reference-rope"})
    EXPECT_NE(r.out.find(std::string("  ") + c), std::string::npos) << c;
  for (const std::string& g : std::vector<std::string>{
           "reuse: 2 (11 of 20 passes evaluate the model)\n", "render size: native (the output canvas)\n",
           "render size: 64x32, upscaled to 128x64\n", "reference-rope: on (the released spatial RoPE)\n",
           "reference-rope: off (halved at 256x256)\n", "reuse: 2 (3 of 4 passes evaluate the model)\n",
           "settings: 128x64, 22 frames (0.92 s), 4 passes, seed 42, show off, zoom 1, profile off; reuse 2: 3 of 4 "
           "passes evaluate the model; rendered at 64x32, upscaled to 128x64 (lanczos)\n"})
    EXPECT_NE(r.out.find(g), std::string::npos) << g << "\n" << r.out;
  for (const std::string& b : std::vector<std::string>{
           "h3: !reuse must be between 1 and 3 (1 evaluates the model at every pass), got 5.",
           "h3: The render canvas (!render-size) must have the output canvas' aspect ratio (128x64), got 64x64.",
           "h3: !reference-rope takes on or off, got 'maybe'.",
           "h3: warning: !reuse 2 with only 4 passes leaves very few fresh model evaluations"})
    EXPECT_NE(r.err.find(b), std::string::npos) << b << "\n" << r.err;
  EXPECT_NE(r.err.find("h3: 128x64, 22 frames (0.92 s at 24 fps), 4 passes, seed 42; reuse 2: 3 of 4 passes evaluate "
                       "the model; rendered at 64x32, upscaled to 128x64 (lanczos)\n"),
            std::string::npos)
      << r.err;
  expect_video_with_sound(cwd + "/vids/0001.mp4", 128, 64, 22);
}

namespace {

// The lines of `text` (without their newlines).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A 3 s clip with a stereo soundtrack (clip.mp4) and the same 3 s tone alone (tone.wav) in `dir`: media any
// reference rule accepts at 56 frames.
void write_reference_media(const std::string& dir) {
  constexpr int kFrames = 72, kSide = 64;
  h3::Rgb8Video clip;
  clip.width = clip.height = kSide;
  clip.frames = kFrames;
  clip.rgb.resize(clip.frame_bytes() * kFrames);
  for (size_t i = 0; i < clip.rgb.size(); ++i)
    clip.rgb[i] = static_cast<uint8_t>((i * 7 + i / clip.frame_bytes() * 13) % 256);  // a pattern that moves
  const int64_t samples = 3 * h3::kAudioSampleRate;
  std::vector<float> tone(2 * samples);
  for (int64_t i = 0; i < samples; ++i) tone[i] = tone[samples + i] = 0.25f * std::sin(0.05f * static_cast<float>(i));
  h3::write_mp4(dir + "/clip.mp4", clip, tone.data(), samples);
  h3::write_wav(dir + "/tone.wav", tone.data(), 2, samples, h3::kAudioSampleRate);
}

}  // namespace

// Every reference command's bad input is refused with one sentence and changes nothing; a reference beside
// keyframes is refused with the one rule that keeps them apart, not with the rules of the reference it would add.
TEST(CliSessionReferences, BadInputGetsOneSentenceEach) {
  const std::string media = work_dir("refs_bad_media"), cwd = work_dir("refs_bad");
  write_ppm(media + "/a.ppm", 64, 64);
  Result r = run({small({}), {}, cwd,
                  "!help\n"
                  "!ref-image\n!ref-silent-video\n!ref-video-audio v.mp4\n!ref-video-audio a b c\n"
                  "!ref-remove 1\n!refs all\n"
                  "!ref-image-size huge\n!ref-image-size match\n!ref-image-size\n"
                  "!first " + media + "/a.ppm\n"
                  "!ref-video v.mp4\n"  // 22 frames: alone, its soundtrack would break the 56-frame rule too
                  "!ref-image a.png\n"
                  "!first clear\n!frames 56\n"
                  "!ref-audio a.wav\n"
                  "!refs\n!status\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* c : {"!ref-image PATH", "!ref-video PATH", "!ref-silent-video PATH", "!ref-video-audio VIDEO AUDIO",
                        "!ref-audio PATH", "!refs [clear]", "!ref-remove N", "!ref-image-size [max|match]"})
    EXPECT_NE(r.out.find(std::string("\n  ") + c), std::string::npos) << c << "\n" << r.out;
  const std::string apart =
      "h3: Keyframes (!first, !last) and references (!ref-*) cannot be combined: keyframes select the fl2va "
      "workflow, references ref2va.";
  const std::string two_files = "h3: !ref-video-audio needs two files, VIDEO AUDIO (paths without spaces), got ";
  EXPECT_EQ(lines_of(r.err), (std::vector<std::string>{
                                 "h3: !ref-image needs a file.",
                                 "h3: !ref-silent-video needs a file.",
                                 two_files + "'v.mp4'.",
                                 two_files + "'a b c'.",
                                 "h3: there are no references to remove; !ref-image, !ref-video, ... add them.",
                                 "h3: !refs takes nothing or 'clear', got 'all'.",
                                 "h3: !ref-image-size must be max or match, got 'huge'.",
                                 apart,
                                 apart,
                                 "h3: An audio reference needs an image or video reference beside it (!ref-image, "
                                 "!ref-video).",
                             }));
  EXPECT_EQ(count(r.out, "ref-image-size: match\n"), 2) << r.out;
  EXPECT_NE(r.out.find("keyframes: first " + media + "/a.ppm\n"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "references: none\n"), 2) << "!refs and !status\n" << r.out;
}

// The references are kept in order, listed numbered from 1, removed by number (the later ones move up) or all at
// once, and shown by !status. Until the engine serves ref2va, every reference is refused with that sentence.
TEST(CliSessionReferences, ListRemoveClearAndStatus) {
  const std::string media = work_dir("refs_media"), cwd = work_dir("refs");
  write_ppm(media + "/a.ppm", 64, 64);
  write_ppm(media + "/b.ppm", 96, 64);
  write_reference_media(media);
  const std::string a = media + "/a.ppm", b = media + "/b.ppm", clip = media + "/clip.mp4",
                    tone = media + "/tone.wav";
  const std::string adds = "!ref-image " + a + "\n!ref-video " + clip + "\n!ref-silent-video " + clip +
                           "\n!ref-video-audio " + clip + " " + tone + "\n!ref-audio " + tone + "\n!ref-image " + b +
                           "\n!refs\n";
  const std::vector<std::string> args = {"-d", tiny_model(), "--device", "cpu", "--width", "64", "--height", "64",
                                         "--frames", "56", "--steps", "2"};
  if (!h3::workflow_served(h3::Workflow::Ref2VA)) {
    Result r = run({args, {}, cwd, adds});
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string refused = "h3: h3 does not serve the ref2va workflow yet.";
    // Nothing is added, so the audio reference comes alone and breaks its own rule first.
    EXPECT_EQ(lines_of(r.err), (std::vector<std::string>{refused, refused, refused, refused,
                                                          "h3: An audio reference needs an image or video reference "
                                                          "beside it (!ref-image, !ref-video).",
                                                          refused}));
    EXPECT_NE(r.out.find("references: none\n"), std::string::npos) << r.out;
    return;
  }
  Result r = run({args, {}, cwd,
                  adds + "!ref-remove 7\n!ref-remove 0\n!ref-remove two\n!ref-remove 2\n!status\n!first " + a +
                      "\n!refs clear\n!refs\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string six = "references: 6 (pictures sized max)\n  1. image " + a + "\n  2. video " + clip +
                          " with its soundtrack\n  3. video " + clip + " without its soundtrack\n  4. video " + clip +
                          " with the soundtrack of " + tone + "\n  5. audio " + tone + "\n  6. image " + b + "\n";
  EXPECT_NE(r.out.find(six), std::string::npos) << r.out;
  const std::string five = "references: 5 (pictures sized max)\n  1. image " + a + "\n  2. video " + clip +
                           " without its soundtrack\n  3. video " + clip + " with the soundtrack of " + tone +
                           "\n  4. audio " + tone + "\n  5. image " + b + "\n";
  EXPECT_EQ(count(r.out, five), 2) << "!ref-remove 2, then !status\n" << r.out;
  EXPECT_NE(r.out.find("keyframes: none\n" + five), std::string::npos) << r.out;
  EXPECT_EQ(lines_of(r.err), (std::vector<std::string>{
                                 "h3: !ref-remove must be between 1 and 6, got '7'.",
                                 "h3: !ref-remove must be between 1 and 6, got '0'.",
                                 "h3: !ref-remove takes a whole number, got 'two'.",
                                 "h3: Keyframes (!first, !last) and references (!ref-*) cannot be combined: keyframes "
                                 "select the fl2va workflow, references ref2va.",
                             }));
  EXPECT_TRUE(r.out.ends_with("references: none\nbye\n")) << r.out;
}

TEST(CliSession, EndOfInputLeavesAndSettingsComeFromTheCommandLine) {
  const std::string cwd = work_dir("eof");
  Result r = run({{"-d", tiny_model(), "--width", "96", "--height", "64", "--seconds", "2", "--steps", "3", "--seed",
                   "5", "--zoom", "2"},
                  {},
                  cwd,
                  "!status\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("settings: 96x64, 56 frames (2.33 s), 3 passes, seed 5, show off, zoom 2, profile off"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("bye"), std::string::npos);
  // The session folder exists from the start (printed at start-up), empty.
  EXPECT_TRUE(fs::is_directory(cwd + "/" + session_folder(r.out)));
}

// ================================================================================================================
// --show: escape sequences per protocol (the protocol forced through the environment)

TEST(CliShow, KittyGraphicsOnePreviewPerPassThenTheFinalFrames) {
  const std::string cwd = work_dir("kitty");
  Result r = run({small({"-p", "fireworks", "-o", "", "--wav", "/dev/null", "--show", "--steps", "3"}), {{"H3_TERMINAL_IMAGES", "kitty"}},
                  cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> images = kitty_images(r.out);
  ASSERT_EQ(images.size(), 4u) << "3 passes + the final contact sheet";
  for (const std::string& png : images) EXPECT_TRUE(is_png(png));
  EXPECT_EQ(count(r.out, "preview: pass "), 3);
  EXPECT_NE(r.out.find("preview: pass 3/3"), std::string::npos);
  EXPECT_NE(r.out.find("final: 8 of 22 frames"), std::string::npos);
  EXPECT_EQ(r.err.find('\033'), std::string::npos) << "no escape sequences on stderr when it is not a terminal";
}

TEST(CliShow, KittyIsDetectedFromTerm) {
  const std::string cwd = work_dir("kitty_term");
  Result r = run({small({"-p", "fireworks", "-o", "", "--wav", "/dev/null", "--show"}), {{"TERM", "xterm-kitty"}}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(kitty_images(r.out).size(), 3u);
}

TEST(CliShow, Iterm2InlineImagesWithZoom) {
  const std::string cwd = work_dir("iterm2");
  Result r = run({small({"-p", "fireworks", "-o", "", "--wav", "/dev/null", "--show", "--zoom", "2"}), {{"H3_TERMINAL_IMAGES", "iterm2"}},
                  cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<Iterm2Image> images = iterm2_images(r.out);
  ASSERT_EQ(images.size(), 3u) << "2 passes + the final contact sheet";
  for (const Iterm2Image& im : images) EXPECT_TRUE(is_png(im.png));
  // A 64x64 preview shown at zoom 2.
  EXPECT_NE(images[0].args.find(";width=128px;height=128px;"), std::string::npos) << images[0].args;
  // The sheet: 4 columns x 2 rows of 64 px tiles with 4 px gutters = 268 x 132, at zoom 2.
  EXPECT_NE(images[2].args.find(";width=536px;height=264px;"), std::string::npos) << images[2].args;
  EXPECT_EQ(r.out.find("\033_G"), std::string::npos);
}

TEST(CliShow, WezTermIsDetectedAsIterm2) {
  const std::string cwd = work_dir("wezterm");
  Result r = run({small({"-p", "fireworks", "-o", "", "--wav", "/dev/null", "--show"}), {{"TERM_PROGRAM", "WezTerm"}}, cwd, ""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(iterm2_images(r.out).size(), 3u);
}

TEST(CliShow, NoProtocolWarnsAndShowsNothing) {
  for (const std::map<std::string, std::string>& env :
       {std::map<std::string, std::string>{{"H3_TERMINAL_IMAGES", "none"}},
        std::map<std::string, std::string>{{"TERM", "xterm-256color"}}}) {
    const std::string cwd = work_dir("noshow");
    Result r = run({small({"-p", "fireworks", "-o", "", "--wav", "/dev/null", "--show"}), env, cwd, ""});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("h3: warning: --show shows nothing here: "), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find('\033'), std::string::npos);
    EXPECT_EQ(r.err.find('\033'), std::string::npos);
    EXPECT_EQ(r.out.find("preview:"), std::string::npos);
  }
}

TEST(CliShow, SessionShowOn) {
  const std::string cwd = work_dir("session_show");
  Result r = run({small({}), {{"H3_TERMINAL_IMAGES", "kitty"}}, cwd, "!show on\nlanterns\n!show off\nlanterns\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("show: on (kitty graphics)"), std::string::npos) << r.out;
  EXPECT_EQ(kitty_images(r.out).size(), 3u) << "previews for the first video only";
}

// ================================================================================================================
// The interactive session on a pseudo-terminal: libedit, history, Ctrl-C

namespace {

class Pty {
 public:
  Pty(const std::vector<std::string>& args, const std::string& cwd, const std::string& home) {
    std::vector<std::string> argv = {H3_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> envp = environment({{"TERM", "xterm"}}, home);
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      if (chdir(cwd.c_str()) != 0) _exit(127);
      execve(argv[0].c_str(), c_strings(argv).data(), c_strings(envp).data());
      _exit(127);
    }
  }
  ~Pty() {
    if (fd_ >= 0) close(fd_);
  }

  // Reads until the output since `from` contains `needle`.
  bool expect(const std::string& needle, double timeout_s = 60) {
    const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (text_.find(needle, mark_) == std::string::npos && Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[65536];
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      text_.append(buf, static_cast<size_t>(n));
    }
    const size_t at = text_.find(needle, mark_);
    if (at == std::string::npos) return false;
    mark_ = at + needle.size();
    return true;
  }

  void type(const std::string& s) { EXPECT_EQ(write(fd_, s.data(), s.size()), (ssize_t)s.size()); }

  int wait() {
    expect("\x04never", 5);  // drain until the child closes the terminal
    int st = 0;
    waitpid(pid_, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  const std::string& text() const { return text_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string text_;
  size_t mark_ = 0;
};

}  // namespace

TEST(CliSessionTerminal, LineEditingHistoryAndCtrlC) {
  const std::string cwd = work_dir("pty");
  const std::string home = cwd + "/home";
  fs::create_directories(home);
  {
    Pty t({"-d", tiny_model(), "--device", "cpu", "--width", "64", "--height", "64", "--frames", "22", "--steps", "2"},
          cwd, home);
    ASSERT_TRUE(t.expect("h3> ")) << t.text();
    // Ctrl-C at the prompt drops the typed line and gives a fresh prompt.
    t.type("half a prompt");
    ASSERT_TRUE(t.expect("half a prompt"));
    t.type("\x03");
    ASSERT_TRUE(t.expect("h3> ")) << t.text();
    t.type("!seed 3\r");
    ASSERT_TRUE(t.expect("seed: 3")) << t.text();
    // Line editing: type (UTF-8 too), go to the start (Ctrl-A), insert, submit.
    t.type("boat at dawn, caf\xc3\xa9 lights\x01" "A \r");
    ASSERT_TRUE(t.expect("wrote outputs/session-")) << t.text();
    ASSERT_TRUE(t.expect("h3> "));
    t.type("!cache\r");
    ASSERT_TRUE(t.expect("tokens: A boat at dawn, caf\xc3\xa9 lights")) << t.text();
    // Ctrl-C during a generation cancels it and returns to the prompt.
    t.type("!size 256x256\r!frames 124\r!steps 500\r");
    ASSERT_TRUE(t.expect("steps: 500 passes"));
    t.type("a long storm\r");
    ASSERT_TRUE(t.expect("pass 1/500")) << t.text();
    t.type("\x03");
    ASSERT_TRUE(t.expect("cancelled; nothing was written.", 120)) << t.text();
    ASSERT_TRUE(t.expect("h3> "));
    t.type("!status\r");
    ASSERT_TRUE(t.expect("videos 1")) << t.text();
    t.type("!quit\r");
    ASSERT_TRUE(t.expect("bye"));
    EXPECT_EQ(t.wait(), 0);
    EXPECT_EQ(t.text().find("half a prompt!seed"), std::string::npos) << "the interrupted line was not cleared";
  }
  // The history file keeps the lines entered (not the interrupted one).
  const std::string history = read_file(home + "/.h3_history");
  EXPECT_NE(history.find("!seed"), std::string::npos) << history;
  EXPECT_EQ(history.find("half"), std::string::npos) << history;
  // Only the finished video is in the session folder.
  std::vector<std::string> mp4;
  for (const std::string& f : files_in(cwd + "/outputs"))
    if (f.find(".mp4") != std::string::npos) mp4.push_back(f);
  ASSERT_EQ(mp4.size(), 1u);
  EXPECT_NE(mp4[0].find("/0001.mp4"), std::string::npos);
}

namespace h3 {
namespace {

// A checkpoint holding NaN (here every weight of the video VAE decoder's output projection): the decode's result is
// refused with the component and the phase named, exit status 1, and neither the MP4 nor the WAV is written.
TEST(CliNonFinite, NanWeightsAreNamedAndNothingIsWritten) {
  const std::string cwd = work_dir("nan_weights"), model = cwd + "/model";
  fs::copy(tiny_model(), model, fs::copy_options::recursive);
  bool poisoned = false;
  for (const auto& entry : fs::directory_iterator(model + "/vae")) {
    if (entry.path().extension() != ".safetensors") continue;
    std::vector<NamedTensor> tensors;
    {
      const auto file = SafetensorsFile::open(entry.path().string());
      for (const TensorInfo& info : file->tensors()) {
        Tensor t = file->tensor(info).clone();
        if (info.name.starts_with("decoder.proj_out.")) {
          Tensor nan = Tensor::empty(t.shape(), DType::F32);
          std::fill_n(nan.ptr<float>(), nan.numel(), std::numeric_limits<float>::quiet_NaN());
          t = nan.to(t.dtype());
          poisoned = true;
        }
        tensors.push_back({info.name, t});
      }
    }
    write_safetensors(entry.path().string(), tensors);
  }
  ASSERT_TRUE(poisoned) << "no decoder.proj_out.* tensor in the tiny model's vae/";
  std::vector<std::string> args = small({"-p", "A fox.", "-o", "fox.mp4", "--wav", "fox.wav"});
  args[1] = model;
  Result r = run({args, {}, cwd, ""});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("The video VAE decoder gave "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("in the video decode phase"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(cwd + "/fox.mp4"));
  EXPECT_FALSE(fs::exists(cwd + "/fox.wav"));
}

}  // namespace
}  // namespace h3
