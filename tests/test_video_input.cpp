// Video references (src/media/video_input.h) against tests/fixtures/media (tools/reference/fx_media.py): the
// reference's 24 fps slots for every (frames, fps, generated frames) case, its canvas step byte for byte, the
// reference's own PyAV decode of small files byte for byte (rotations included), decoding that stops early on a
// file of 37 GB, and one sentence for every bad input.
#include <gtest/gtest.h>

#include <chrono>

#include "media/video_input.h"
#include "media_fixtures.h"
#include "pipeline/keyframes.h"

namespace h3 {
namespace {

// The base-36 repeat counts of fps.json: source frame i shown repeats[i] times.
std::string repeats_string(const std::vector<int64_t>& shown) {
  std::string out;
  for (int64_t r : shown) out += static_cast<char>(r < 10 ? '0' + r : 'a' + (r - 10));
  return out;
}

// How often each source frame appears in the first `num_frames` outputs of fps_repeats, up to the last one used.
std::vector<int64_t> truncated_repeats(int64_t source_frames, double fps, int64_t num_frames) {
  std::vector<int64_t> shown;
  int64_t total = 0;
  for (int64_t r : fps_repeats(source_frames, fps, kVideoFps)) {
    if (total >= num_frames) break;
    const int64_t take = std::min(r, num_frames - total);
    shown.push_back(take);
    total += take;
  }
  while (!shown.empty() && shown.back() == 0) shown.pop_back();
  return shown;
}

// Frames carrying their index, as the fixture's: R = low byte, G = high byte.
Rgb8Video index_video(int64_t frames, int side) {
  Rgb8Video v;
  v.width = v.height = side;
  v.frames = static_cast<int>(frames);
  v.rgb.assign(static_cast<size_t>(frames) * side * side * 3, 0);
  for (int64_t f = 0; f < frames; ++f)
    for (int p = 0; p < side * side; ++p) {
      v.rgb[(f * side * side + p) * 3] = static_cast<uint8_t>(f & 255);
      v.rgb[(f * side * side + p) * 3 + 1] = static_cast<uint8_t>(f >> 8);
    }
  return v;
}

TEST(VideoInputFps, SlotsAreTheReferences) {
  const nlohmann::json index = media_fixture_json("fps.json");
  ASSERT_EQ(index["target_fps"].get<double>(), kVideoFps);
  int cases = 0;
  for (const auto& c : index["cases"]) {
    const double fps = c["fps"].get<double>();
    ASSERT_EQ(fps, static_cast<double>(c["fps_num"].get<int>()) / c["fps_den"].get<int>()) << c.dump();
    const int64_t source = c["source_frames"], num_frames = c["num_frames"];
    const std::string want = c["repeats"];
    EXPECT_EQ(repeats_string(truncated_repeats(source, fps, num_frames)), want) << c.dump();

    // Bounded decoding: the first source_frames_needed frames give the same frames, one fewer does not.
    const int64_t needed = source_frames_needed(num_frames, fps);
    EXPECT_EQ(repeats_string(truncated_repeats(std::min(source, needed), fps, num_frames)), want) << c.dump();
    if (needed > 0 && needed <= source) {
      int64_t total = 0;
      for (int64_t r : fps_repeats(needed - 1, fps, kVideoFps)) total += r;
      EXPECT_LT(total, num_frames) << c.dump();
    }
    ++cases;
  }
  EXPECT_GE(cases, 16 * 4 * 2);  // 16 rates x 4 generated lengths x at least 2 source lengths
}

TEST(VideoInputFps, NormalizationOfIndexFramesIsTheReferences) {
  // The same cases through normalize_reference_video (frames already on their 32x32 canvas are left alone).
  const nlohmann::json index = media_fixture_json("fps.json");
  for (const auto& c : index["cases"]) {
    const int64_t source = c["source_frames"], num_frames = c["num_frames"];
    if (source > 400) continue;  // the long ones are covered by the slot test above
    const std::string want = c["repeats"];
    if (want.empty()) {
      EXPECT_NE(media_error_of([&] { normalize_reference_video(index_video(source, 32), c["fps"], num_frames, 32, 32); })
                    .find("at least one frame"),
                std::string::npos);
      continue;
    }
    const Rgb8Video out = normalize_reference_video(index_video(source, 32), c["fps"], num_frames, 32, 32);
    std::vector<int64_t> shown;
    for (int f = 0; f < out.frames; ++f) {
      const size_t at = static_cast<size_t>(f) * out.frame_bytes();
      const int64_t i = out.rgb[at] | (out.rgb[at + 1] << 8);
      if (static_cast<int64_t>(shown.size()) <= i) shown.resize(static_cast<size_t>(i) + 1, 0);
      ++shown[static_cast<size_t>(i)];
    }
    EXPECT_EQ(repeats_string(shown), want) << c.dump();
  }
}

TEST(VideoInputFps, SameRateIsUntouchedAndBadRatesAreRefused) {
  EXPECT_EQ(fps_repeats(5, 24.0, 24.0), std::vector<int64_t>(5, 1));
  EXPECT_EQ(source_frames_needed(124, 24.0), 124);
  EXPECT_EQ(source_frames_needed(0, 30.0), 0);
  for (double bad : {0.0, -24.0, std::nan("")}) {
    EXPECT_NE(media_error_of([&] { fps_repeats(3, bad, 24.0); }).find("positive frame rate"), std::string::npos);
    EXPECT_NE(media_error_of([&] { normalize_reference_video(index_video(2, 4), bad, 5, 4, 4); })
                  .find("positive frame rate"),
              std::string::npos);
  }
}

TEST(VideoInputCanvas, LanczosStepIsTheReferences) {
  const nlohmann::json index = media_fixture_json("canvas.json");
  for (const auto& c : index["cases"]) {
    Rgb8Video in;
    in.width = c["width"];
    in.height = c["height"];
    in.frames = c["frames"];
    in.rgb = read_media_fixture(c["input"]);
    ASSERT_EQ(in.rgb.size(), static_cast<size_t>(in.frames) * in.frame_bytes());
    const CanvasSize canvas = resolve_canvas_size(in.width, in.height, c["multiple"], c["short_edge"],
                                                  c["max_pixels"]);
    ASSERT_EQ(canvas.width, c["out_width"].get<int64_t>());
    ASSERT_EQ(canvas.height, c["out_height"].get<int64_t>());
    const Rgb8Video out = normalize_reference_video(in, c["fps"], c["num_frames"], static_cast<int>(canvas.width),
                                                    static_cast<int>(canvas.height));
    EXPECT_EQ(out.frames, c["out_frames"].get<int>()) << c["name"];
    EXPECT_EQ(out.width, canvas.width);
    EXPECT_EQ(out.height, canvas.height);
    EXPECT_TRUE(out.rgb == read_media_fixture(c["expected"])) << c["name"];
  }
}

TEST(VideoInputRotation, QuarterTurnsAreNumpysRot90) {
  // A 3x2 picture (pixel value = 10·row + column) and np.rot90(m, -k) written out by hand.
  Rgb8Image image{3, 2, {}};
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) image.rgb.insert(image.rgb.end(), 3, static_cast<uint8_t>(10 * y + x));
  const auto grey = [](const Rgb8Image& m) {
    std::vector<int> v;
    for (size_t i = 0; i < m.rgb.size(); i += 3) v.push_back(m.rgb[i]);
    return v;
  };
  const Rgb8Image cw = rotate_clockwise(image, 1), half = rotate_clockwise(image, 2), ccw = rotate_clockwise(image, 3);
  EXPECT_EQ(cw.width, 2);
  EXPECT_EQ(cw.height, 3);
  EXPECT_EQ(grey(cw), (std::vector<int>{10, 0, 11, 1, 12, 2}));
  EXPECT_EQ(grey(half), (std::vector<int>{12, 11, 10, 2, 1, 0}));
  EXPECT_EQ(grey(ccw), (std::vector<int>{2, 12, 1, 11, 0, 10}));
  EXPECT_EQ(grey(rotate_clockwise(image, -1)), grey(ccw));
  EXPECT_EQ(grey(rotate_clockwise(image, 4)), grey(image));
}

class VideoInputFiles : public ::testing::Test {
 protected:
  static std::vector<nlohmann::json> video_cases() {
    std::vector<nlohmann::json> out;
    const nlohmann::json index = media_fixture_json("files.json");
    for (const auto& c : index["cases"])
      if (c.contains("rgb")) out.push_back(c);
    return out;
  }
};

TEST_F(VideoInputFiles, DecodeIsTheReferencesByteForByte) {
  int files = 0;
  for (const auto& c : video_cases()) {
    const std::string path = media_fixture_path(c["file"]);
    const std::vector<uint8_t> want = read_media_fixture(c["rgb"]);
    const VideoProbe probe = probe_video(MediaSource::file(path));
    EXPECT_EQ(probe.width, c["width"].get<int>()) << path;
    EXPECT_EQ(probe.height, c["height"].get<int>()) << path;
    EXPECT_EQ(probe.fps, c["fps"].get<double>()) << path;
    EXPECT_EQ(probe.has_audio, c.contains("audio")) << path;
    EXPECT_GT(probe.duration_seconds, 0) << path;
    const DecodedVideo got = read_video(MediaSource::file(path), 100000);
    EXPECT_EQ(got.fps, c["fps"].get<double>()) << path;
    EXPECT_EQ(got.frames.frames, c["frames"].get<int>()) << path;
    EXPECT_EQ(got.frames.width, c["width"].get<int>()) << path;
    EXPECT_EQ(got.frames.height, c["height"].get<int>()) << path;
    EXPECT_TRUE(got.frames.rgb == want) << path << " (" << c["what"] << ", frames from " << c["frames_from"] << ")";
    // The same bytes from memory.
    const std::vector<uint8_t> bytes = read_media_fixture(c["file"]);
    const DecodedVideo from_memory = read_video(MediaSource::memory(bytes.data(), bytes.size(), "clip"), 100000);
    EXPECT_TRUE(from_memory.frames.rgb == want) << path << " from memory";
    ++files;
  }
  EXPECT_EQ(files, 8);
}

TEST_F(VideoInputFiles, RotatedClipsAreTheUnrotatedOneTurned) {
  const std::string base = media_fixture_path("files/clip30_aac44k.mp4");
  const DecodedVideo upright = read_video(MediaSource::file(base), 3);
  for (int degrees : {90, 180, 270}) {
    const std::string path = media_fixture_path("files/clip30_rot" + std::to_string(degrees) + ".mp4");
    const VideoProbe probe = probe_video(MediaSource::file(path));
    const DecodedVideo turned = read_video(MediaSource::file(path), 3);
    // The matrix's counterclockwise angle (ffprobe: 90, -180, -90) undone clockwise, as the reference does.
    const int turns = degrees == 90 ? 1 : 2;
    EXPECT_EQ(probe.clockwise_quarter_turns, degrees == 270 ? 3 : turns) << path;
    for (int f = 0; f < 3; ++f)
      EXPECT_TRUE(rotate_clockwise(frame_image(upright.frames, f), probe.clockwise_quarter_turns).rgb ==
                  frame_image(turned.frames, f).rgb)
          << path << " frame " << f;
  }
}

TEST_F(VideoInputFiles, StreamingNormalizationIsReadThenNormalize) {
  for (const auto& c : video_cases()) {
    const std::string path = media_fixture_path(c["file"]);
    const VideoProbe probe = probe_video(MediaSource::file(path));
    const CanvasSize canvas = resolve_canvas_size(probe.width, probe.height, 16, 32, 32 * 64);
    for (int64_t num_frames : {1, 5, 22}) {
      const Rgb8Video whole = normalize_reference_video(read_video(MediaSource::file(path), 100000).frames,
                                                        probe.fps, num_frames, static_cast<int>(canvas.width),
                                                        static_cast<int>(canvas.height));
      const Rgb8Video streamed = read_reference_video(MediaSource::file(path), num_frames,
                                                      static_cast<int>(canvas.width), static_cast<int>(canvas.height));
      EXPECT_EQ(streamed.frames, whole.frames) << path << " " << num_frames;
      EXPECT_TRUE(streamed.rgb == whole.rgb) << path << " " << num_frames;
    }
  }
}

TEST(VideoInputBounded, TwoHourFileStopsAfterWhatTheRequestUses) {
  // 2 hours of 320x180 4:4:4 at 30 fps: 216,000 frames, 37 GB that exist only as they are read.
  const VirtualMedia file = virtual_y4m(320, 180, 30, 2 * 3600 * 30);
  ASSERT_GT(file.size(), int64_t{30} << 30);
  const VideoProbe probe = probe_video(file.source("long.y4m"));
  EXPECT_EQ(probe.fps, 30.0);
  EXPECT_EQ(probe.width, 320);

  const auto start = std::chrono::steady_clock::now();
  const Rgb8Video out = read_reference_video(file.source("long.y4m"), 362, 64, 36);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.frames, 362);
  EXPECT_EQ(out.width, 64);
  // 362 frames at 24 fps come from the first 452 at 30 fps (slot(452) = floor(361.6 + 0.5) = 362); the demuxer
  // reads ahead a little, never far.
  const int64_t needed = source_frames_needed(362, 30.0);
  EXPECT_EQ(needed, 452);
  EXPECT_LT(*file.furthest, (needed + 64) * file.record_bytes) << "read up to byte " << *file.furthest;
  EXPECT_LT(seconds, 60.0);
  // The output frames are source frames 0, 1, 2, 3, 5, ...: frame f's luma is 16 + f % 200 (grey after the
  // conversion, one value per frame), so dropped frames show as jumps.
  const std::vector<int64_t> repeats = fps_repeats(needed, 30.0, 24.0);
  int distinct = 1;
  for (int f = 1; f < out.frames; ++f) distinct += out.rgb[f * out.frame_bytes()] != out.rgb[(f - 1) * out.frame_bytes()];
  int64_t shown = 0;
  for (int64_t r : repeats) shown += r > 0;
  EXPECT_EQ(distinct, shown);

  *file.furthest = 0;
  const DecodedVideo first = read_video(file.source("long.y4m"), 10);
  EXPECT_EQ(first.frames.frames, 10);
  EXPECT_LT(*file.furthest, 80 * file.record_bytes);
}

class VideoInputErrors : public MediaScratch {
 protected:
  // probe_video, read_video and read_reference_video all refuse `source` with a sentence naming it and `rule`.
  void expect_refused(const MediaSource& source, const std::string& rule) {
    for (const std::string& message :
         {media_error_of([&] { probe_video(source); }), media_error_of([&] { read_video(source, 10); }),
          media_error_of([&] { read_reference_video(source, 10, 32, 32); })}) {
      EXPECT_EQ(message.rfind("Cannot read the video " + source.name() + ": ", 0), 0u) << message;
      EXPECT_NE(message.find(rule), std::string::npos) << message;
      EXPECT_EQ(message.back(), '.') << message;
    }
  }
};

TEST_F(VideoInputErrors, EveryRuleHasItsSentence) {
  expect_refused(MediaSource::file((dir_ / "missing.mp4").string()), "the file does not exist");
  expect_refused(MediaSource::file(dir_.string()), "it is not a regular file");
  expect_refused(MediaSource::file(write("empty.mp4", {})), "the file is empty");
  expect_refused(MediaSource::memory(nullptr, 0, "buffer"), "it is empty");
  const std::string text = "this is a text file, not a video, with enough bytes that no prober takes it for one\n";
  expect_refused(MediaSource::file(write("notes.mp4", std::vector<uint8_t>(text.begin(), text.end()))),
                 "it is not in a media format FFmpeg can read");
  expect_refused(MediaSource::file(media_fixture_path("files/tone44k_stereo.wav")), "it has no video stream");
  const VirtualMedia huge = virtual_y4m(9000, 8000, 24, 2);
  expect_refused(huge.source("huge.y4m"), "its frames are 9000x8000 pixels, more than the 67108864 a reference");
  // A Y4M header without a frame: a video stream that holds nothing.
  const VirtualMedia header_only = virtual_y4m(16, 16, 24, 0);
  const std::string y4m = header_only.header;
  const std::string no_frames = write("no_frames.y4m", std::vector<uint8_t>(y4m.begin(), y4m.end()));
  const std::string read = media_error_of([&] { read_video(MediaSource::file(no_frames), 10); });
  EXPECT_NE(read.find("it holds no video frames"), std::string::npos) << read;
  // An MP4 cut short inside its media data: the frames that are there, or a sentence, never a crash.
  std::vector<uint8_t> clip = read_media_fixture("files/clip30_aac44k.mp4");
  clip.resize(clip.size() / 2);
  const std::string cut = write("cut.mp4", clip);
  const std::string message = media_error_of([&] { read_video(MediaSource::file(cut), 100); });
  EXPECT_TRUE(message == "(no error)" || message.rfind("Cannot read the video " + cut + ": ", 0) == 0) << message;
  // 240 fps for one frame gives nothing at 24 fps.
  const VirtualMedia one = virtual_y4m(16, 16, 240, 1);
  const std::string dropped = media_error_of([&] { read_reference_video(one.source("fast.y4m"), 22, 16, 16); });
  EXPECT_NE(dropped.find("it gives no frame at 24 fps"), std::string::npos) << dropped;
}

}  // namespace
}  // namespace h3
