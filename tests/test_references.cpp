// ref2va's setup step (pipeline/references.h): the image canvas rules (the reference's `max` and h3.c's `match`, with
// Python's ties-to-even rounding), the VAE's snapping of a video reference, every media rule checked from the headers
// before any model loads, and the normalization of real files (an image, a video with its soundtrack, an audio file
// at another rate). The parity of the normalized media with the reference's is tests/test_e2e_ref2va.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "media/image_input.h"
#include "media/mp4_writer.h"
#include "media/png_writer.h"
#include "media/wav_writer.h"
#include "pipeline/references.h"
#include "temp_dir.h"
#include "test_source_dir.h"

namespace h3 {
namespace {

using Kind = ReferenceInput::Kind;

ReferenceInput ref(Kind kind, const std::string& path, ReferenceInput::Soundtrack sound = ReferenceInput::Soundtrack::Own,
                   const std::string& soundtrack = "") {
  ReferenceInput r;
  r.kind = kind;
  r.path = path;
  r.soundtrack = sound;
  r.soundtrack_path = soundtrack;
  return r;
}

// A picture with structure (a gradient and a square) so a resize shows.
Rgb8Image picture(int w, int h) {
  Rgb8Image im;
  im.width = w;
  im.height = h;
  im.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &im.rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / std::max(w - 1, 1));
      p[1] = static_cast<uint8_t>(255 * y / std::max(h - 1, 1));
      p[2] = (x > w / 4 && x < w / 2 && y > h / 4 && y < h / 2) ? 255 : 0;
    }
  return im;
}

// A sine of `seconds` at `rate`, planar, `channels` channels.
std::vector<float> tone(double seconds, int rate, int channels) {
  const int64_t n = static_cast<int64_t>(seconds * rate);
  std::vector<float> out(static_cast<size_t>(n) * channels);
  for (int c = 0; c < channels; ++c)
    for (int64_t i = 0; i < n; ++i) out[c * n + i] = 0.5f * std::sin(0.05f * static_cast<float>(i) * (c + 1));
  return out;
}

void write_tone(const std::string& path, double seconds, int rate, int channels) {
  const std::vector<float> t = tone(seconds, rate, channels);
  write_wav(path, t.data(), channels, static_cast<int64_t>(t.size()) / channels, rate);
}

// A 24 fps clip of `frames` frames of w × h with a `sound_seconds` stereo 32 kHz soundtrack (none for 0).
void write_clip(const std::string& path, int frames, int w, int h, double sound_seconds) {
  Rgb8Video v;
  v.width = w;
  v.height = h;
  v.frames = frames;
  for (int f = 0; f < frames; ++f) {
    Rgb8Image p = picture(w, h);
    for (size_t i = 0; i < p.rgb.size(); i += 3) p.rgb[i + 2] = static_cast<uint8_t>(8 * f);
    v.rgb.insert(v.rgb.end(), p.rgb.begin(), p.rgb.end());
  }
  Mp4Options o;
  o.trim_audio_to_video = false;
  o.preset = "ultrafast";
  const std::vector<float> sound = tone(sound_seconds, kAudioSampleRate, 2);
  write_mp4(path, v, sound.empty() ? nullptr : sound.data(), static_cast<int64_t>(sound.size()) / 2, o);
}

ReferenceRules tiny_rules() {
  ReferenceRules r;
  r.canvas_multiple = 8;
  r.canvas.canvas_short_edge = 16;
  r.canvas.canvas_max_pixels = 16 * 24;
  r.canvas.reference_image_short_edge = 24;
  r.audio_rate = 32000;
  r.temporal_patch = 2;
  return r;
}

std::string problems_text(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += p + "\n";
  return out;
}

TEST(ReferenceImageCanvas, MaxScalesTheShortEdgeUpOrDownWithTiesToEven) {
  // The release: a 1920x1080 photo at a 2048 short edge (upscaled; 3640.9 rounds to 114 multiples of 32).
  EXPECT_EQ(reference_image_canvas(1920, 1080, ReferenceImageSize::Max, 2048, 864, 480, 32), (CanvasSize{2048, 3648}));
  // Downscaled too, and no area cap.
  EXPECT_EQ(reference_image_canvas(8000, 4000, ReferenceImageSize::Max, 2048, 864, 480, 32), (CanvasSize{2048, 4096}));
  // 24x16 at a short edge of 24 in multiples of 8: the width is 36 = 4.5 multiples, which Python rounds to 4.
  EXPECT_EQ(reference_image_canvas(24, 16, ReferenceImageSize::Max, 24, 24, 16, 8), (CanvasSize{24, 32}));
  // Never below one multiple.
  EXPECT_EQ(reference_image_canvas(400, 100, ReferenceImageSize::Max, 4, 24, 16, 8), (CanvasSize{8, 16}));
}

TEST(ReferenceImageCanvas, MatchShrinksToTheTargetAreaAndNeverUpscales) {
  // h3.c's h3_reference_image_canvas: scale √(864·480 / 1920·1080) = √0.2.
  EXPECT_EQ(reference_image_canvas(1920, 1080, ReferenceImageSize::Match, 2048, 864, 480, 32), (CanvasSize{480, 864}));
  // Smaller than the target: kept, only rounded (240 = 7.5 multiples rounds to 8).
  EXPECT_EQ(reference_image_canvas(320, 240, ReferenceImageSize::Match, 2048, 864, 480, 32), (CanvasSize{256, 320}));
}

TEST(ReferenceVideoEncodeFrames, SnapsDownToWholeClipsAndKeepsShortReferencesWhole) {
  EXPECT_EQ(reference_video_encode_frames(124, 17, 5), 124);
  EXPECT_EQ(reference_video_encode_frames(120, 17, 5), 107);
  EXPECT_EQ(reference_video_encode_frames(39, 17, 5), 39);
  EXPECT_EQ(reference_video_encode_frames(38, 17, 5), 22);
  EXPECT_EQ(reference_video_encode_frames(22, 17, 5), 22);
  EXPECT_EQ(reference_video_encode_frames(13, 17, 5), 13);  // one clip asked for, the reference has fewer
  EXPECT_EQ(reference_video_encode_frames(3, 17, 5), 3);
}

TEST(ReferenceMedia, EveryRuleIsOneSentenceBeforeAnythingIsDecoded) {
  TempDir dir("refs-rules");
  write_png(dir / "wide.png", picture(100, 20));       // 5:1
  write_png(dir / "ok.png", picture(30, 20));
  write_clip(dir / "short.mp4", 8, 32, 16, 0);          // 1/3 s: fewer than 13 frames at 24 fps
  write_clip(dir / "silent.mp4", 30, 32, 16, 0);        // no audio stream
  write_tone(dir / "blip.wav", 0.5, 16000, 1);          // shorter than 2 s
  for (const char* name : {"six1.wav", "six2.wav", "six3.wav"}) write_tone(dir / name, 6.0, 16000, 1);

  GenerationRequest r;
  r.prompt = "x";
  r.references = {ref(Kind::Image, dir / "missing.png"),
                  ref(Kind::Image, dir / "wide.png"),
                  ref(Kind::Video, dir / "short.mp4", ReferenceInput::Soundtrack::None),
                  ref(Kind::Video, dir / "silent.mp4"),
                  ref(Kind::Audio, dir / "blip.wav")};
  // A sound given as a video, a silent clip given as a sound, an empty file.
  { std::ofstream(dir / "empty.mp4"); }
  r.references.push_back(ref(Kind::Video, dir / "blip.wav", ReferenceInput::Soundtrack::None));
  r.references.push_back(ref(Kind::Image, dir / "ok.png"));
  r.references.push_back(ref(Kind::Audio, dir / "silent.mp4"));
  r.references.push_back(ref(Kind::Video, dir / "empty.mp4", ReferenceInput::Soundtrack::None));
  const std::string text = problems_text(reference_media_problems(r, 124, tiny_rules()));
  EXPECT_NE(text.find("missing.png"), std::string::npos) << text;
  EXPECT_NE(text.find("wide.png: a reference image must be within 1:4 and 4:1, got 100x20 pixels."),
            std::string::npos) << text;
  EXPECT_NE(text.find("short.mp4: a reference video is read at 2 fps in groups of 2 frames, so it must last at least "
                      "13 frames at 24 fps"),
            std::string::npos) << text;
  EXPECT_NE(text.find("silent.mp4 has no audio stream: use --ref-silent-video"), std::string::npos) << text;
  EXPECT_NE(text.find("blip.wav: reference audio must last at least 2 s"), std::string::npos) << text;
  EXPECT_NE(text.find("blip.wav"), text.rfind("blip.wav")) << text;  // refused as a video too
  EXPECT_NE(text.find("has no video stream"), std::string::npos) << text;
  EXPECT_NE(text.find("has no audio stream"), std::string::npos) << text;
  EXPECT_NE(text.find("empty.mp4"), std::string::npos) << text;
  // One sentence per broken reference: nine references, eight of them broken.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 8) << text;

  // Three 6 s sounds, each cut to 124 frames (5.17 s): 15.5 s in all, over the 15 s cap.
  GenerationRequest loud;
  loud.prompt = "x";
  loud.references = {ref(Kind::Image, dir / "ok.png"), ref(Kind::Audio, dir / "six1.wav"),
                     ref(Kind::Audio, dir / "six2.wav"), ref(Kind::Audio, dir / "six3.wav")};
  const std::string over = problems_text(reference_media_problems(loud, 124, tiny_rules()));
  EXPECT_NE(over.find("at most 15 s are accepted"), std::string::npos) << over;
  // At 56 frames (2.33 s each) they fit.
  EXPECT_TRUE(reference_media_problems(loud, 56, tiny_rules()).empty());
  // The decoded check says the same.
  try {
    normalize_references(loud, 124, 24, 16, tiny_rules());
    ADD_FAILURE() << "15.5 s of reference audio was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 15 s are accepted"), std::string::npos) << e.what();
  }
}

TEST(ReferenceMedia, NormalizesEachReferenceOntoItsOwnCanvasRateAndDuration) {
  TempDir dir("refs-normalize");
  write_png(dir / "pic.png", picture(30, 20));
  write_clip(dir / "clip.mp4", 72, 48, 24, 3.0);  // 3 s at 24 fps, 2:1, a 3 s soundtrack
  write_tone(dir / "voice.wav", 3.0, 16000, 1);    // mono 16 kHz
  GenerationRequest r;
  r.prompt = "x";
  r.references = {ref(Kind::Image, dir / "pic.png"), ref(Kind::Video, dir / "clip.mp4"),
                  ref(Kind::Audio, dir / "voice.wav")};
  ASSERT_TRUE(reference_media_problems(r, 56, tiny_rules()).empty());
  const std::vector<NormalizedReference> n = normalize_references(r, 56, 24, 16, tiny_rules());
  ASSERT_EQ(n.size(), 3u);
  // The picture at the snapshot's reference_image_short_edge (24): 30x20 scales to 36x24, and 36 = 4.5 multiples
  // of 8 rounds (to even) to 32.
  EXPECT_EQ(n[0].kind, Kind::Image);
  EXPECT_EQ(n[0].image.width, 32);
  EXPECT_EQ(n[0].image.height, 24);
  EXPECT_FALSE(n[0].has_audio());
  // The clip on the canvas its own 2:1 aspect resolves to under the 16-short-edge, 384-pixel rule, cut to the 56
  // generated frames; its soundtrack cut to 56/24 s at 32 kHz, stereo.
  const CanvasSize c = resolve_canvas_size(48, 24, 8, 16, 384);
  EXPECT_EQ(n[1].frames.width, c.width);
  EXPECT_EQ(n[1].frames.height, c.height);
  EXPECT_EQ(n[1].frames.frames, 56);
  ASSERT_TRUE(n[1].has_audio());
  EXPECT_EQ(n[1].audio->channels, 2);
  EXPECT_EQ(n[1].audio->sample_rate, 32000);
  EXPECT_EQ(n[1].audio->frames(), reference_audio_samples(56, 32000));
  // The mono 16 kHz voice: cut at its own rate (int(56/24·16000) samples), repeated onto two channels, doubled.
  ASSERT_TRUE(n[2].has_audio());
  EXPECT_EQ(n[2].audio->channels, 2);
  EXPECT_EQ(n[2].audio->frames(), 2 * reference_audio_samples(56, 16000));
  for (int64_t i = 0; i < n[2].audio->frames(); i += 997)
    EXPECT_EQ(n[2].audio->channel(0)[i], n[2].audio->channel(1)[i]) << i;
}

}  // namespace
}  // namespace h3

namespace h3 {
namespace {

// In-memory media (the library's form of the reference's dataclasses) normalize as the same media from files do.
TEST(ReferenceMedia, InMemoryMediaNormalizeAsTheirFilesDo) {
  TempDir dir("refs-memory");
  write_tone(dir / "voice.wav", 3.0, 16000, 1);
  // The samples the 16-bit WAV holds, as FFmpeg decodes them (s16 / 32768).
  std::vector<float> samples = tone(3.0, 16000, 1);
  for (float& x : samples) x = static_cast<float>(audio_float_to_i16(x)) / 32768.f;
  ReferenceInput from_file = ref(Kind::Audio, dir / "voice.wav");
  ReferenceInput in_memory;
  in_memory.kind = Kind::Audio;
  in_memory.audio = std::make_shared<const Waveform>(Waveform{16000, 1, samples});
  GenerationRequest r;
  r.prompt = "x";
  ReferenceInput image;
  image.kind = Kind::Image;
  image.image = std::make_shared<const Rgb8Image>(picture(30, 20));
  ReferenceInput clip;
  clip.kind = Kind::Video;
  clip.soundtrack = ReferenceInput::Soundtrack::None;
  Rgb8Video frames;
  for (int f = 0; f < 45; ++f) append_frame(frames, picture(48, 24));
  clip.video = std::make_shared<const DecodedVideo>(DecodedVideo{frames, 30.0});
  r.references = {image, clip, from_file, in_memory};
  EXPECT_TRUE(request_problems(r).empty()) << problems_text(request_problems(r));
  ASSERT_TRUE(reference_media_problems(r, 56, tiny_rules()).empty())
      << problems_text(reference_media_problems(r, 56, tiny_rules()));
  const std::vector<NormalizedReference> n = normalize_references(r, 56, 24, 16, tiny_rules());
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(n[0].image.width, 32);
  // 45 frames at 30 fps are 36 at 24 fps (1.5 s), fewer than the 56 generated: all kept.
  EXPECT_EQ(n[1].frames.frames, 36);
  EXPECT_FALSE(n[1].has_audio());
  ASSERT_TRUE(n[2].has_audio() && n[3].has_audio());
  EXPECT_EQ(n[2].audio->samples, n[3].audio->samples);
}

// What an in-memory reference must hold, one sentence.
TEST(ReferenceMedia, InMemoryReferencesHoldTheirKindsMedia) {
  GenerationRequest r;
  r.prompt = "x";
  ReferenceInput bad;
  bad.kind = Kind::Video;  // frames missing, a waveform given
  bad.audio = std::make_shared<const Waveform>(Waveform{16000, 1, tone(3.0, 16000, 1)});
  r.references = {bad};
  const std::string text = problems_text(request_problems(r));
  EXPECT_NE(text.find("An in-memory reference holds a picture (an image), frames and, unless silent, a waveform"),
            std::string::npos) << text;
}

}  // namespace
}  // namespace h3

namespace h3 {
namespace {

// An image reference is opened as diffusers' load_image opens it: a JPEG tagged orientation 6 (stored 7x5, shown
// 5x7) is sized and resized upright (tests/fixtures/image_exif).
TEST(ReferenceMedia, ImageFilesAreReadUprightAsLoadImageReadsThem) {
  const std::string jpeg = test_source_dir() + "/tests/fixtures/image_exif/sources/jpeg_6.jpg";
  GenerationRequest r;
  r.prompt = "x";
  r.references = {ref(Kind::Image, jpeg)};
  ReferenceRules rules = tiny_rules();
  rules.canvas.reference_image_short_edge = 5;  // unscaled, in multiples of 1: the upright 5x7 as it is
  rules.canvas_multiple = 1;
  const std::vector<NormalizedReference> n = normalize_references(r, 56, 24, 16, rules);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].image.width, 5);
  EXPECT_EQ(n[0].image.height, 7);
  EXPECT_EQ(n[0].image.rgb, read_image_file_upright(jpeg).rgb);
  EXPECT_NE(n[0].image.rgb, rotate_clockwise(read_image_file(jpeg), 0).rgb);
}

}  // namespace
}  // namespace h3
