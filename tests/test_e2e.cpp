// End to end on the CPU: the reference t2va pipeline (tiny transformer, tiny Qwen3-VL, tiny VAEs, the same tiny
// tokenizer, injected noise) and h3::Engine produce the same decoded frames and waveform.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <vector>
#include <nlohmann/json.hpp>

#include "h3/h3.h"
#include "io/safetensors.h"
#include "util/mapped_file.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {
const std::string kFixture = std::string(H3_SOURCE_DIR) + "/tests/fixtures/e2e";

std::unique_ptr<Engine> open_fixture_engine() {
  EngineOptions o;
  o.model_dir = kFixture + "/model";
  o.device = "cpu";
  return Engine::open(o);
}

// The fixture case's prompt and canvas (its steps are each test's own).
GenerationRequest fixture_request(const nlohmann::json& meta) {
  GenerationRequest r;
  r.prompt = meta["prompt"].get<std::string>();
  r.width = meta["width"].get<int64_t>();
  r.height = meta["height"].get<int64_t>();
  r.frames = meta["num_frames"].get<int64_t>();
  return r;
}
}

TEST(EndToEnd, MatchesTheReferencePipeline) {
  ASSERT_TRUE(fs::exists(kFixture + "/expected.safetensors")) << "missing " << kFixture;
  auto meta = nlohmann::json::parse(read_text_file(kFixture + "/case.json"));
  auto c = SafetensorsFile::open(kFixture + "/case.safetensors");
  auto e = SafetensorsFile::open(kFixture + "/expected.safetensors");

  auto engine = open_fixture_engine();
  GenerationRequest r = fixture_request(meta);
  r.steps = meta["num_inference_steps"].get<int64_t>() - 1;  // grid points → passes
  InjectedNoise noise;
  noise.video = c->tensor("latents").to_f32();
  noise.audio = c->tensor("audio_latents").to_f32();
  GenerationResult out = engine->generate(r, {}, noise);

  // Stage by stage first, so a failure says where the paths part.
  Tensor ids = e->tensor("input_ids");
  EXPECT_EQ(out.prompt_tokens, ids.numel());
  Tensor video_ref = e->tensor("video").to_f32();
  Tensor audio_ref = e->tensor("audio").to_f32();
  ASSERT_EQ(out.video.numel(), video_ref.numel()) << out.video.str() << " vs " << video_ref.str();
  ASSERT_EQ(out.audio.numel(), audio_ref.numel()) << out.audio.str() << " vs " << audio_ref.str();
  // The bound: both paths are float32 end to end (no autocast on the CPU); measured far below it.
  const double dv = rel_l2(out.video, video_ref), da = rel_l2(out.audio, audio_ref);
  std::printf("[ e2e ] video rel L2 %.3g, audio rel L2 %.3g\n", dv, da);
  EXPECT_LE(dv, 1e-4);
  EXPECT_LE(da, 1e-4);
}

TEST(EndToEnd, SecondGenerationReusesLoadedModelsAndThePromptCache) {
  EngineOptions o;
  o.model_dir = kFixture + "/model";
  o.device = "cpu";
  auto engine = Engine::open(o);
  GenerationRequest r;
  r.prompt = "a robot dancing in the rain";
  r.width = 16;
  r.height = 8;
  r.frames = 22;
  r.steps = 2;
  // Progress: every phase begins at 0 of its total (passes, frames); Load only when something loads.
  std::vector<ProgressEvent> events;
  GenerateCallbacks cb;
  cb.on_progress = [&](const ProgressEvent& e) { events.push_back(e); };
  auto begins = [&](Phase p) {
    for (const ProgressEvent& e : events)
      if (e.phase == p && e.done == 0) return e.total;
    return int64_t(-1);
  };
  GenerationResult a = engine->generate(r, cb);
  EXPECT_EQ(begins(Phase::Load), 1);
  EXPECT_EQ(begins(Phase::Denoise), r.steps);
  EXPECT_EQ(begins(Phase::DecodeVideo), a.video.dim(1));
  const EngineStats s1 = engine->stats();
  r.seed = 7;
  events.clear();
  GenerationResult b = engine->generate(r, cb);
  EXPECT_EQ(begins(Phase::Load), -1);  // resident: no load announced
  EXPECT_EQ(begins(Phase::EncodePrompt), 1);
  const EngineStats s2 = engine->stats();
  EXPECT_EQ(s2.component_loads, s1.component_loads);  // nothing loaded twice
  EXPECT_EQ(s2.prompt_encodes, s1.prompt_encodes);    // prompt encoding skipped
  EXPECT_TRUE(b.prompt_cache_hit);
  EXPECT_FALSE(a.prompt_cache_hit);
  EXPECT_GT(rel_l2(a.video, b.video), 1e-3);  // another seed, another video
  // Same seed again: identical output.
  r.seed = 42;
  GenerationResult c = engine->generate(r);
  EXPECT_EQ(max_abs_diff(a.video, c.video), 0.0);
  EXPECT_EQ(max_abs_diff(a.audio, c.audio), 0.0);
}

TEST(EndToEnd, BadRequestsFailBeforeAnyModelLoads) {
  EngineOptions o;
  o.model_dir = kFixture + "/model";
  o.device = "cpu";
  auto engine = Engine::open(o);
  GenerationRequest r;
  r.prompt = "x";
  r.width = 10;  // not a multiple of 8 (this tiny VAE is /4, patch 2)
  EXPECT_THROW(engine->generate(r), Error);
  EXPECT_EQ(engine->stats().component_loads, 0);
  r.width = 16;
  r.prompt = "";
  EXPECT_THROW(engine->generate(r), Error);
  EXPECT_EQ(engine->stats().component_loads, 0);
}

namespace h3 {
namespace {

// Non-finite values are caught at the phase that made them, with the component named (issue 22): a NaN in the
// injected video noise runs through every transformer pass and is refused after the denoise, before any decode.
TEST(EndToEnd, NonFiniteValuesAreRefusedAtThePhaseThatMadeThem) {
  auto meta = nlohmann::json::parse(read_text_file(kFixture + "/case.json"));
  auto c = SafetensorsFile::open(kFixture + "/case.safetensors");
  auto engine = open_fixture_engine();
  GenerationRequest r = fixture_request(meta);
  r.steps = 2;
  InjectedNoise noise;
  noise.video = c->tensor("latents").to_f32().clone();
  noise.video.ptr<float>()[noise.video.numel() / 2] = std::numeric_limits<float>::quiet_NaN();
  std::vector<Phase> phases;
  GenerateCallbacks cb;
  cb.on_progress = [&](const ProgressEvent& e) {
    if (e.done == 0) phases.push_back(e.phase);
  };
  try {
    engine->generate(r, cb, noise);
    ADD_FAILURE() << "a NaN in the video noise was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("The transformer gave "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("non-finite values"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in the denoise phase"), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::count(phases.begin(), phases.end(), Phase::DecodeVideo), 0) << "refused before the decode";
  // The same request with clean noise goes through (the check refuses nothing finite).
  noise.video = c->tensor("latents").to_f32();
  EXPECT_NO_THROW(engine->generate(r, {}, noise));
}

}  // namespace
}  // namespace h3
