// The C API (include/h3/h3_c.h) on the tiny random-weight model: the same video as the C++ engine's, callbacks,
// statuses and their sentences, cancellation, the MP4 with the settings in its metadata.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

extern "C" {
#include <libavformat/avformat.h>
}

#include "h3/h3.h"
#include "h3/h3_c.h"
#include "h3/version.h"
#include "media/mp4_writer.h"
#include "media/video_frames.h"
#include "tools/tiny_model.h"

namespace fs = std::filesystem;

namespace {

const std::string& tiny_model() {
  static const std::string dir = [] {
    const std::string d = (fs::temp_directory_path() / ("h3_c_api_tiny_" + std::to_string(getpid()))).string();
    fs::remove_all(d);
    h3::make_tiny_model(d, 0);
    return d;
  }();
  return dir;
}

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("h3_c_api_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// The format's tags, as ffprobe lists them.
std::map<std::string, std::string> mp4_tags(const std::string& path) {
  std::map<std::string, std::string> tags;
  AVFormatContext* fmt = nullptr;
  if (avformat_open_input(&fmt, path.c_str(), nullptr, nullptr) != 0) return tags;
  const AVDictionaryEntry* e = nullptr;
  while ((e = av_dict_get(fmt->metadata, "", e, AV_DICT_IGNORE_SUFFIX))) tags[e->key] = e->value;
  avformat_close_input(&fmt);
  return tags;
}

// An engine and a small request (64x64, 5 frames, 2 passes), freed at the end of the test.
struct Fixture {
  h3_engine* engine = nullptr;
  h3_request* request = h3_request_new();
  Fixture() {
    EXPECT_EQ(h3_engine_open(tiny_model().c_str(), "cpu", &engine), H3_OK) << h3_last_error();
    h3_request_set_prompt(request, "A red fox walks through fresh snow.");
    h3_request_set_size(request, 64, 64);
    h3_request_set_frames(request, 5);
    h3_request_set_steps(request, 2);
  }
  ~Fixture() {
    h3_request_free(request);
    h3_engine_free(engine);
  }
};

struct Recorded {
  std::vector<std::tuple<h3_phase, int64_t, int64_t>> events;
  std::vector<uint8_t> frames;
  std::vector<int64_t> firsts;
  h3_engine* cancel_at_first_pass = nullptr;
};

const h3_callbacks kRecording = {
    [](void* user, h3_phase phase, int64_t done, int64_t total) {
      auto* r = static_cast<Recorded*>(user);
      r->events.emplace_back(phase, done, total);
      if (r->cancel_at_first_pass && phase == H3_PHASE_DENOISE && done == 1) h3_engine_cancel(r->cancel_at_first_pass);
    },
    [](void* user, const uint8_t* rgb, int64_t first, int64_t count, int width, int height) {
      auto* r = static_cast<Recorded*>(user);
      r->firsts.push_back(first);
      r->frames.insert(r->frames.end(), rgb, rgb + count * width * height * 3);
    },
    nullptr};

}  // namespace

TEST(CApi, StatusNamesPhaseNamesAndVersions) {
  std::vector<std::string> names;
  for (int s = H3_OK; s <= H3_ERROR_FAILED; ++s) names.push_back(h3_status_name(static_cast<h3_status>(s)));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end()) << "every status has its own name";
  EXPECT_STREQ(h3_phase_name(H3_PHASE_DENOISE), "denoise");
  EXPECT_STREQ(h3_phase_name(H3_PHASE_DECODE_VIDEO), h3::phase_name(h3::Phase::DecodeVideo));
  EXPECT_EQ(h3_phase_name(static_cast<h3_phase>(8)), nullptr);
  EXPECT_EQ(h3_version(), h3::build_info().version);
  EXPECT_EQ(h3_build_info(), h3::build_info_text());
}

TEST(CApi, ArgumentsTheApiRefusesAreNamed) {
  h3_engine* engine = reinterpret_cast<h3_engine*>(1);
  EXPECT_EQ(h3_engine_open(nullptr, nullptr, &engine), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr) << "a failed open leaves no engine";
  EXPECT_STREQ(h3_last_error(), "h3_engine_open: model_dir must not be NULL.");
  EXPECT_EQ(h3_engine_open(tiny_model().c_str(), "gpu", &engine), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(h3_last_error()).find("gpu"), std::string::npos) << h3_last_error();
  EXPECT_EQ(h3_request_set_prompt(nullptr, "x"), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(h3_last_error(), "h3_request_set_prompt: request must not be NULL.");
  h3_request* r = h3_request_new();
  EXPECT_EQ(h3_request_add_reference(r, static_cast<h3_reference_kind>(9), "a.png", nullptr),
            H3_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(h3_request_add_reference(r, H3_REFERENCE_VIDEO, "v.mp4", "a.wav"), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(h3_request_add_reference(r, H3_REFERENCE_VIDEO_AUDIO, "v.mp4", nullptr), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(h3_request_set_keyframe(r, static_cast<h3_keyframe>(2), "k.png"), H3_ERROR_INVALID_ARGUMENT);
  const uint8_t pixel[3] = {1, 2, 3};
  EXPECT_EQ(h3_request_set_keyframe_rgb8(r, H3_KEYFRAME_FIRST, pixel, 0, 1), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(h3_request_set_reference_image_size(r, 2), H3_ERROR_INVALID_ARGUMENT);
  h3_result* result = reinterpret_cast<h3_result*>(1);
  EXPECT_EQ(h3_engine_generate(nullptr, r, nullptr, &result), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(result, nullptr);
  h3_request_free(r);
}

TEST(CApi, AMissingModelIsAModelErrorNamingIt) {
  h3_engine* engine = nullptr;
  EXPECT_EQ(h3_engine_open("/nonexistent-h3-model", nullptr, &engine), H3_ERROR_MODEL);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(h3_last_error()).find("/nonexistent-h3-model"), std::string::npos) << h3_last_error();
}

// The rules are the engine's: the same sentences, all of them, before anything loads.
TEST(CApi, ValidateGivesEveryRuleOrTheResolvedShape) {
  Fixture f;
  h3_request_set_size(f.request, 500, 64);
  h3_request_set_steps(f.request, 1);
  EXPECT_EQ(h3_engine_validate(f.engine, f.request, nullptr, nullptr, nullptr), H3_ERROR_INVALID_REQUEST);
  const std::string message = h3_last_error();
  auto cpp = h3::Engine::open({.model_dir = tiny_model(), .device = "cpu"});
  h3::GenerationRequest r;
  r.prompt = "A red fox walks through fresh snow.";
  r.width = 500;
  r.height = 64;
  r.frames = 5;
  r.steps = 1;
  try {
    cpp->validate(r);
    ADD_FAILURE() << "the C++ engine accepted the request";
  } catch (const h3::Error& e) {
    EXPECT_EQ(message, e.what());
  }
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << "two rules, one line each: " << message;
  h3_result* result = nullptr;
  EXPECT_EQ(h3_engine_generate(f.engine, f.request, nullptr, &result), H3_ERROR_INVALID_REQUEST);
  EXPECT_EQ(result, nullptr);

  h3_request_set_size(f.request, 64, 32);
  h3_request_set_steps(f.request, 2);
  h3_request_set_seconds(f.request, 1.0);  // 24 frames, rounded up to 39 = 17·2 + 5; replaces the frame count
  int64_t width = 0, height = 0, frames = 0;
  ASSERT_EQ(h3_engine_validate(f.engine, f.request, &width, &height, &frames), H3_OK) << h3_last_error();
  EXPECT_EQ(width, 64);
  EXPECT_EQ(height, 32);
  EXPECT_EQ(frames, 39);
}

// The C API's video and soundtrack are the C++ engine's, converted as the MP4 writer converts them.
TEST(CApi, GenerateGivesTheEnginesVideoWithProgressAndFrames) {
  Fixture f;
  h3_request_set_seed(f.request, 1234567890123ull);
  Recorded rec;
  h3_callbacks cb = kRecording;
  cb.user = &rec;
  h3_result* result = nullptr;
  ASSERT_EQ(h3_engine_generate(f.engine, f.request, &cb, &result), H3_OK) << h3_last_error();

  auto cpp = h3::Engine::open({.model_dir = tiny_model(), .device = "cpu"});
  h3::GenerationRequest r;
  r.prompt = "A red fox walks through fresh snow.";
  r.width = 64;
  r.height = 64;
  r.frames = 5;
  r.steps = 2;
  r.seed = 1234567890123ull;
  const h3::GenerationResult want = cpp->generate(r);
  const h3::Rgb8Video want8 = h3::rgb8_from_tensor(want.video);

  ASSERT_EQ(h3_result_width(result), 64);
  ASSERT_EQ(h3_result_height(result), 64);
  ASSERT_EQ(h3_result_frames(result), 5);
  EXPECT_EQ(h3_result_fps(result), 24);
  EXPECT_EQ(h3_result_seed(result), 1234567890123ull);
  EXPECT_EQ(h3_result_sample_rate(result), 32000);
  const std::vector<uint8_t> video(h3_result_video_rgb8(result), h3_result_video_rgb8(result) + 5 * 64 * 64 * 3);
  EXPECT_EQ(video, want8.rgb);
  // The soundtrack: the engine's, cut to the video's length when longer.
  const int64_t total = want.audio.dim(1);
  const int64_t samples = std::min<int64_t>(total, h3::audio_samples_for_frames(5, 24, 32000));
  ASSERT_EQ(h3_result_audio_samples(result), samples);
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < samples; ++i)
      ASSERT_EQ(h3_result_audio(result)[c * samples + i], want.audio.ptr<float>()[c * total + i]) << c << " " << i;

  // Frames arrive in order and are the result's bytes; every phase begins at 0 and the denoise counts passes.
  EXPECT_EQ(rec.frames, video);
  EXPECT_TRUE(std::is_sorted(rec.firsts.begin(), rec.firsts.end()));
  using E = std::tuple<h3_phase, int64_t, int64_t>;
  for (const E& e : {E{H3_PHASE_ENCODE_PROMPT, 0, 1}, E{H3_PHASE_DENOISE, 0, 2}, E{H3_PHASE_DENOISE, 2, 2},
                     E{H3_PHASE_DECODE_VIDEO, 0, 5}, E{H3_PHASE_DECODE_AUDIO, 0, 1}})
    EXPECT_NE(std::find(rec.events.begin(), rec.events.end(), e), rec.events.end())
        << h3_phase_name(std::get<0>(e)) << " " << std::get<1>(e) << "/" << std::get<2>(e);
  EXPECT_GT(h3_result_phase_seconds(result, H3_PHASE_DENOISE), 0);
  EXPECT_EQ(h3_result_phase_seconds(result, H3_PHASE_ENCODE_KEYFRAMES), 0) << "t2va encodes no keyframes";

  const std::string dir = temp_dir("generate");
  ASSERT_EQ(h3_result_write_mp4(result, (dir + "/fox.mp4").c_str()), H3_OK) << h3_last_error();
  const std::map<std::string, std::string> tags = mp4_tags(dir + "/fox.mp4");
  EXPECT_EQ(tags.at("h3_seed"), "1234567890123");
  EXPECT_EQ(tags.at("h3_prompt"), "A red fox walks through fresh snow.");
  EXPECT_EQ(tags.at("h3_workflow"), "t2va");
  // Writing where no file can be: an i/o error, nothing left.
  EXPECT_EQ(h3_result_write_mp4(result, (dir + "/missing/fox.mp4").c_str()), H3_ERROR_IO);
  EXPECT_NE(std::string(h3_last_error()).find("missing/fox.mp4"), std::string::npos) << h3_last_error();
  EXPECT_FALSE(fs::exists(dir + "/missing"));
  h3_result_free(result);
}

TEST(CApi, CancelStopsTheGenerationAndTheEngineGoesOn) {
  Fixture f;
  Recorded rec;
  rec.cancel_at_first_pass = f.engine;
  h3_callbacks cb = kRecording;
  cb.user = &rec;
  h3_result* result = reinterpret_cast<h3_result*>(1);
  EXPECT_EQ(h3_engine_generate(f.engine, f.request, &cb, &result), H3_ERROR_CANCELLED);
  EXPECT_EQ(result, nullptr);
  EXPECT_TRUE(rec.frames.empty()) << "cancelled before the decode";
  // A cancel while nothing runs does not reach the next generation.
  h3_engine_cancel(f.engine);
  ASSERT_EQ(h3_engine_generate(f.engine, f.request, nullptr, &result), H3_OK) << h3_last_error();
  EXPECT_EQ(h3_result_frames(result), 5);
  h3_result_free(result);
}

// A keyframe in memory makes an fl2va video; its MP4 says so.
TEST(CApi, AnInMemoryKeyframeMakesAnFl2vaVideo) {
  Fixture f;
  std::vector<uint8_t> rgb(64 * 48 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7);
  ASSERT_EQ(h3_request_set_keyframe_rgb8(f.request, H3_KEYFRAME_FIRST, rgb.data(), 64, 48), H3_OK);
  h3_result* result = nullptr;
  ASSERT_EQ(h3_engine_generate(f.engine, f.request, nullptr, &result), H3_OK) << h3_last_error();
  const std::string dir = temp_dir("keyframe");
  ASSERT_EQ(h3_result_write_mp4(result, (dir + "/k.mp4").c_str()), H3_OK) << h3_last_error();
  const std::map<std::string, std::string> tags = mp4_tags(dir + "/k.mp4");
  EXPECT_EQ(tags.at("h3_workflow"), "fl2va");
  EXPECT_EQ(tags.at("h3_first_frame"), "an RGB8 picture of 64×48 pixels");
  EXPECT_EQ(tags.count("h3_last_frame"), 0u);
  h3_result_free(result);
  // Removing the keyframe makes it t2va again.
  ASSERT_EQ(h3_request_set_keyframe(f.request, H3_KEYFRAME_FIRST, nullptr), H3_OK);
  ASSERT_EQ(h3_engine_generate(f.engine, f.request, nullptr, &result), H3_OK) << h3_last_error();
  ASSERT_EQ(h3_result_write_mp4(result, (dir + "/t.mp4").c_str()), H3_OK) << h3_last_error();
  EXPECT_EQ(mp4_tags(dir + "/t.mp4").at("h3_workflow"), "t2va");
  h3_result_free(result);
}

// The speed controls' setters store what they are given; the rules are validate_request's, through the engine: the
// C++ engine's sentence for the same request, one per rule.
TEST(CApi, SpeedControlsAreCheckedByTheRequestsRules) {
  Fixture f;
  auto cpp = h3::Engine::open({.model_dir = tiny_model(), .device = "cpu"});
  struct Case {
    const char* what;
    void (*set_c)(h3_request*);
    void (*set_cpp)(h3::GenerationRequest&);
  };
  const Case cases[] = {
      {"reuse 4", [](h3_request* r) { h3_request_set_reuse(r, 4); }, [](h3::GenerationRequest& r) { r.reuse = 4; }},
      {"core_reuse 7", [](h3_request* r) { h3_request_set_core_reuse(r, 7); },
       [](h3::GenerationRequest& r) { r.core_reuse = 7; }},
      {"reuse 2 with core_reuse 2",
       [](h3_request* r) {
         h3_request_set_reuse(r, 2);
         h3_request_set_core_reuse(r, 2);
       },
       [](h3::GenerationRequest& r) {
         r.reuse = 2;
         r.core_reuse = 2;
       }},
      {"layers 1", [](h3_request* r) { h3_request_set_layers(r, 1); }, [](h3::GenerationRequest& r) { r.layers = 1; }},
      {"a render width alone", [](h3_request* r) { h3_request_set_render_size(r, 32, 0); },
       [](h3::GenerationRequest& r) { r.render_width = 32; }},
      {"a render canvas larger than the output", [](h3_request* r) { h3_request_set_render_size(r, 128, 128); },
       [](h3::GenerationRequest& r) {
         r.render_width = 128;
         r.render_height = 128;
       }},
  };
  for (const Case& c : cases) {
    h3_request* request = h3_request_new();
    h3_request_set_prompt(request, "A red fox walks through fresh snow.");
    h3_request_set_size(request, 64, 64);
    h3_request_set_frames(request, 5);
    h3_request_set_steps(request, 2);
    c.set_c(request);
    EXPECT_EQ(h3_engine_validate(f.engine, request, nullptr, nullptr, nullptr), H3_ERROR_INVALID_REQUEST) << c.what;
    const std::string message = h3_last_error();
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 0) << c.what << ": one rule, one sentence: " << message;
    h3::GenerationRequest r;
    r.prompt = "A red fox walks through fresh snow.";
    r.width = 64;
    r.height = 64;
    r.frames = 5;
    r.steps = 2;
    c.set_cpp(r);
    try {
      cpp->validate(r);
      ADD_FAILURE() << c.what << ": the C++ engine accepted the request";
    } catch (const h3::Error& e) {
      EXPECT_EQ(message, e.what()) << c.what;
    }
    h3_request_free(request);
  }
  // The switches are C booleans: 0 or 1.
  EXPECT_EQ(h3_request_set_token_reduction(f.request, 2), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(h3_last_error(), "h3_request_set_token_reduction: on is 0 or 1, got 2.");
  EXPECT_EQ(h3_request_set_use_reference_rope(f.request, -1), H3_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(h3_request_set_reuse(nullptr, 2), H3_ERROR_INVALID_ARGUMENT);
  // 0 restores the defaults: all layers, the output canvas.
  h3_request_set_layers(f.request, 1);
  h3_request_set_render_size(f.request, 32, 0);
  h3_request_set_layers(f.request, 0);
  h3_request_set_render_size(f.request, 0, 0);
  EXPECT_EQ(h3_engine_validate(f.engine, f.request, nullptr, nullptr, nullptr), H3_OK) << h3_last_error();
}

// Set through the C API, the controls reach the engine (the C++ engine's video for the same fields, not the exact
// path's) and the MP4's metadata.
TEST(CApi, SpeedControlsReachTheEngineAndTheMp4) {
  Fixture f;
  h3_request_set_steps(f.request, 4);
  ASSERT_EQ(h3_request_set_reuse(f.request, 2), H3_OK);
  ASSERT_EQ(h3_request_set_layers(f.request, 2), H3_OK);
  ASSERT_EQ(h3_request_set_token_reduction(f.request, 1), H3_OK);
  ASSERT_EQ(h3_request_set_render_size(f.request, 32, 32), H3_OK);
  ASSERT_EQ(h3_request_set_use_reference_rope(f.request, 1), H3_OK);
  h3_result* result = nullptr;
  ASSERT_EQ(h3_engine_generate(f.engine, f.request, nullptr, &result), H3_OK) << h3_last_error();
  ASSERT_EQ(h3_result_width(result), 64) << "upscaled to the output canvas";
  const std::vector<uint8_t> video(h3_result_video_rgb8(result), h3_result_video_rgb8(result) + 5 * 64 * 64 * 3);

  auto cpp = h3::Engine::open({.model_dir = tiny_model(), .device = "cpu"});
  h3::GenerationRequest r;
  r.prompt = "A red fox walks through fresh snow.";
  r.width = 64;
  r.height = 64;
  r.frames = 5;
  r.steps = 4;
  const h3::Rgb8Video exact = h3::rgb8_from_tensor(cpp->generate(r).video);
  r.reuse = 2;
  r.layers = 2;
  r.token_reduction = true;
  r.render_width = 32;
  r.render_height = 32;
  r.use_reference_rope = true;
  EXPECT_EQ(video, h3::rgb8_from_tensor(cpp->generate(r).video).rgb);
  EXPECT_NE(video, exact.rgb);

  const std::string dir = temp_dir("speed");
  ASSERT_EQ(h3_result_write_mp4(result, (dir + "/fast.mp4").c_str()), H3_OK) << h3_last_error();
  const std::map<std::string, std::string> tags = mp4_tags(dir + "/fast.mp4");
  EXPECT_EQ(tags.at("h3_reuse"), "2");
  EXPECT_EQ(tags.at("h3_layers"), "2");
  EXPECT_EQ(tags.at("h3_token_reduction"), "on");
  EXPECT_EQ(tags.at("h3_render_canvas"), "32x32");
  EXPECT_EQ(tags.at("h3_use_reference_rope"), "on");
  EXPECT_EQ(tags.count("h3_core_reuse"), 0u);
  h3_result_free(result);
}
