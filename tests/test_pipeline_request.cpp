// Request validation: defaults, every rule's message, the frame rounding note.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipeline/request.h"
#include "util/error.h"

namespace h3 {
namespace {

GenerationRequest valid() {
  GenerationRequest r;
  r.prompt = "A red fox walks through fresh snow.";
  return r;
}

// The single problem a request has.
std::string only_problem(const GenerationRequest& r) {
  const std::vector<std::string> p = request_problems(r);
  EXPECT_EQ(p.size(), 1u);
  return p.empty() ? "" : p.front();
}

TEST(PipelineRequest, DefaultsAreValid) {
  const ResolvedRequest r = validate_request(valid());
  EXPECT_EQ(r.width, 864);
  EXPECT_EQ(r.height, 480);
  EXPECT_FALSE(r.request.width.has_value());
  EXPECT_EQ(r.frames, 124);
  EXPECT_EQ(r.requested_frames, 124);
  EXPECT_TRUE(r.frames_note.empty());
  EXPECT_FALSE(r.request.steps);
  EXPECT_EQ(r.steps, kDefaultSteps);
  EXPECT_EQ(r.grid_points(), kDefaultSteps + 1);
  EXPECT_EQ(r.request.seed, 42u);
  EXPECT_EQ(r.workflow, Workflow::T2VA);
}

TEST(PipelineRequest, CanvasRules) {
  GenerationRequest r = valid();
  r.width = 850;
  EXPECT_EQ(only_problem(r), "The width must be a multiple of 32 and at least 32 pixels, got 850.");
  r = valid();
  r.height = 0;
  EXPECT_EQ(only_problem(r), "The height must be a multiple of 32 and at least 32 pixels, got 0.");
  r = valid();
  r.height = -64;
  EXPECT_EQ(only_problem(r), "The height must be a multiple of 32 and at least 32 pixels, got -64.");
  r = valid();
  r.width = 1344;
  r.height = 1344;
  EXPECT_EQ(only_problem(r), "The canvas must have at most 768 × 1344 = 1032192 pixels, got 1344 × 1344.");
  r = valid();
  r.width = 1344;
  r.height = 768;  // exactly the cap
  EXPECT_TRUE(request_problems(r).empty());
  r.width = 32;
  r.height = 32;  // the smallest canvas
  EXPECT_TRUE(request_problems(r).empty());
}

TEST(PipelineRequest, FrameRules) {
  GenerationRequest r = valid();
  r.frames = 0;
  EXPECT_EQ(only_problem(r),
            "--frames must be between 1 and 362 (it is rounded up to the next 17·n + 5, 5..362 frames = up to "
            "15.083 s at 24 fps), got 0.");
  r.frames = 363;  // would round up to 379
  EXPECT_NE(only_problem(r).find("got 363."), std::string::npos);
  r.frames = 362;
  EXPECT_TRUE(request_problems(r).empty());
  r.frames = 1;
  EXPECT_TRUE(request_problems(r).empty());

  r = valid();
  r.frames = 124;
  r.seconds = 5.0;
  EXPECT_EQ(only_problem(r), "--frames and --seconds are mutually exclusive; give at most one of them.");

  r = valid();
  r.seconds = 20.0;
  EXPECT_EQ(only_problem(r), "--seconds must give between 1 and 362 frames at 24 fps (0.021 to 15.083 s), got 20.");
  r.seconds = -1.0;
  EXPECT_NE(only_problem(r).find("got -1."), std::string::npos);
  r.seconds = std::nan("");
  EXPECT_EQ(request_problems(r).size(), 1u);
  r.seconds = std::numeric_limits<double>::infinity();
  EXPECT_EQ(request_problems(r).size(), 1u);
  r.seconds = 0.01;  // 0.24 frames rounds to 0
  EXPECT_EQ(request_problems(r).size(), 1u);
  r.seconds = 15.08;  // 361.92 → 362 frames
  EXPECT_TRUE(request_problems(r).empty());
}

TEST(PipelineRequest, StepAndWorkflowAndPromptRules) {
  GenerationRequest r = valid();
  r.steps = 1;
  EXPECT_EQ(only_problem(r), "--steps (model passes) must be between 2 and 1000, got 1.");
  r.steps = 1001;
  EXPECT_EQ(only_problem(r), "--steps (model passes) must be between 2 and 1000, got 1001.");
  r.steps = 1000;
  EXPECT_TRUE(request_problems(r).empty());
  r.steps = 2;
  EXPECT_TRUE(request_problems(r).empty());

  // The workflow follows from what the request carries; whether this h3 serves it is the engine's to say.
  r = valid();
  r.first_frame = ImageInput::file("fox.png");
  EXPECT_EQ(r.workflow(), Workflow::FL2VA);
  EXPECT_TRUE(request_problems(r).empty());
  // Keyframes without a canvas: the engine resolves it from the first keyframe (0 until then).
  ResolvedRequest keyframe = validate_request(r);
  EXPECT_EQ(keyframe.workflow, Workflow::FL2VA);
  EXPECT_EQ(keyframe.width, 0);
  r.width = 64;  // one side alone
  EXPECT_EQ(only_problem(r),
            "With keyframes, give --width and --height together or neither (the canvas then follows the first "
            "keyframe's aspect ratio).");
  r.height = 32;
  keyframe = validate_request(r);
  EXPECT_EQ(keyframe.width, 64);
  EXPECT_EQ(keyframe.height, 32);
  r = valid();
  ReferenceInput image;
  image.path = "fox.png";
  r.references.push_back(image);
  EXPECT_EQ(r.workflow(), Workflow::Ref2VA);
  EXPECT_TRUE(request_problems(r).empty());
  r.last_frame = ImageInput::rgb8(Rgb8Image{2, 2, std::vector<uint8_t>(12, 7)});
  EXPECT_EQ(only_problem(r),
            "Keyframes (--first-frame, --last-frame) and references (--ref-*) cannot be combined: keyframes select "
            "the fl2va workflow, references ref2va.");

  r = valid();
  r.prompt = " \n\t";
  EXPECT_EQ(only_problem(r), "The prompt must not be empty.");
  // The settings alone (a session before its first prompt): every rule but the prompt's.
  EXPECT_TRUE(request_problems(r, kCanvasMultiple, RequestCheck::SettingsOnly).empty());
  EXPECT_EQ(validate_request(r, kCanvasMultiple, RequestCheck::SettingsOnly).frames, 124);
  r.steps = 1;
  const std::vector<std::string> settings = request_problems(r, kCanvasMultiple, RequestCheck::SettingsOnly);
  ASSERT_EQ(settings.size(), 1u);
  EXPECT_EQ(settings.front(), "--steps (model passes) must be between 2 and 1000, got 1.");
}

// ref2va's media-free rules, each its own sentence (the reference's MiniMaxH3Ref2VASetupStep limits and h3.c's).
TEST(PipelineRequest, ReferenceRules) {
  auto ref = [](ReferenceInput::Kind k, ReferenceInput::Soundtrack s = ReferenceInput::Soundtrack::None) {
    ReferenceInput r;
    r.kind = k;
    r.path = "media";
    r.soundtrack = s;
    return r;
  };
  using K = ReferenceInput::Kind;
  GenerationRequest r = valid();
  r.references = {ref(K::Image), ref(K::Video, ReferenceInput::Soundtrack::Own), ref(K::Audio)};
  EXPECT_TRUE(request_problems(r).empty());
  r.references.assign(10, ref(K::Image));
  EXPECT_EQ(only_problem(r), "A request takes at most 9 image references, got 10.");
  r.references.assign(4, ref(K::Video));
  EXPECT_EQ(only_problem(r), "A request takes at most 3 video references, got 4.");
  r.references = {ref(K::Image), ref(K::Audio), ref(K::Audio), ref(K::Audio), ref(K::Audio)};
  EXPECT_EQ(only_problem(r), "A request takes at most 3 audio references, got 4.");
  r.references.assign(9, ref(K::Image));
  for (int i = 0; i < 3; ++i) r.references.push_back(ref(K::Video));
  r.references.push_back(ref(K::Audio));
  EXPECT_EQ(only_problem(r), "A request takes at most 12 references in all, got 13.");
  r.references = {ref(K::Audio)};
  EXPECT_EQ(only_problem(r), "An audio reference needs an image or video reference beside it (--ref-image, --ref-video).");
  r.references = {ref(K::Image), ref(K::Audio)};
  r.frames = 39;  // 1.63 s: too short to keep 2 s of reference sound
  EXPECT_EQ(only_problem(r),
            "With reference sound (--ref-audio, or a video's soundtrack) the video needs at least 56 frames (2.333 s) "
            "to keep 2 s of it, got 39 frames.");
  r.frames = 40;  // rounds up to 56
  EXPECT_TRUE(request_problems(r).empty());
  r.references = {ref(K::Video, ReferenceInput::Soundtrack::None)};
  r.frames = 5;  // a silent video needs no length
  EXPECT_TRUE(request_problems(r).empty());
  r.references = {ref(K::Video, ReferenceInput::Soundtrack::Replaced)};
  r.frames.reset();
  EXPECT_EQ(only_problem(r), "A video reference with a replaced soundtrack needs the soundtrack's file path.");
  r.references = {ref(K::Image)};
  r.references[0].path.clear();
  EXPECT_EQ(only_problem(r), "A reference needs a file path or media in memory.");
}

TEST(PipelineRequest, EverySeedIsValid) {
  GenerationRequest r = valid();
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, std::numeric_limits<uint64_t>::max()}) {
    r.seed = seed;
    EXPECT_EQ(validate_request(r).request.seed, seed);
  }
}

TEST(PipelineRequest, AllProblemsAreReportedAtOnce) {
  GenerationRequest r;
  r.width = 100;
  r.height = 50;
  r.frames = 400;
  r.steps = 0;
  EXPECT_EQ(request_problems(r).size(), 5u);  // prompt, width, height, frames, steps
  try {
    validate_request(r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 4);
    EXPECT_NE(msg.find("The width must be"), std::string::npos);
    EXPECT_NE(msg.find("--steps"), std::string::npos);
  }
}

TEST(PipelineRequest, FrameRoundingIsExplained) {
  GenerationRequest r = valid();
  r.frames = 100;
  ResolvedRequest rr = validate_request(r);
  EXPECT_EQ(rr.requested_frames, 100);
  EXPECT_EQ(rr.frames, 107);
  EXPECT_EQ(rr.frames_note, "--frames 100 rounded up to 107 frames (the video VAE needs 17·n + 5 frames), 4.458 s at 24 fps");

  r.frames = 3;
  EXPECT_EQ(validate_request(r).frames, 5);

  r = valid();
  r.seconds = 5.0;
  rr = validate_request(r);
  EXPECT_EQ(rr.requested_frames, 120);
  EXPECT_EQ(rr.frames, 124);
  EXPECT_EQ(rr.frames_note,
            "--seconds 5 = 120 frames, rounded up to 124 frames (the video VAE needs 17·n + 5 frames), 5.167 s at 24 fps");

  r.seconds = 124.0 / 24.0;
  rr = validate_request(r);
  EXPECT_EQ(rr.frames, 124);
  EXPECT_NE(rr.frames_note.find(" = 124 frames, 5.167 s at 24 fps"), std::string::npos) << rr.frames_note;
}

}  // namespace
}  // namespace h3
