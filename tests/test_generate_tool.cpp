// `h3 tool generate` (the parity harness of the FL2VA issue, part 7) and its request JSON: the t2va end-to-end
// fixture through the tool, and every rule of the request and noise files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "pipeline/request_json.h"
#include "test_source_dir.h"
#include "tools/registry.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& text, const std::string& base = "") {
  try {
    parse_request_json(text, base);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RequestJson, ReadsEveryFieldAndResolvesPathsAgainstItsFolder) {
  const GenerationRequest r = parse_request_json(
      R"({"prompt": "a fox", "width": 64, "height": 32, "frames": 124, "steps": 3, "seed": 18446744073709551615,
          "first_frame": "a.png", "last_frame": "/abs/b.png"})",
      "/cases/one");
  EXPECT_EQ(r.prompt, "a fox");
  EXPECT_EQ(r.width, 64);
  EXPECT_EQ(r.height, 32);
  EXPECT_EQ(r.frames, 124);
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.seed, 18446744073709551615ull);
  ASSERT_TRUE(r.first_frame && r.last_frame);
  EXPECT_EQ(r.first_frame->path, "/cases/one/a.png");
  EXPECT_EQ(r.last_frame->path, "/abs/b.png");
  EXPECT_EQ(r.workflow(), Workflow::FL2VA);
  // Absent fields keep the request's defaults.
  const GenerationRequest d = parse_request_json(R"({"prompt": "a fox"})", "");
  EXPECT_FALSE(d.width || d.height || d.frames || d.seconds || d.first_frame);
  EXPECT_FALSE(d.steps);  // the checkpoint's passes (Engine::validate)
  EXPECT_EQ(d.seed, kDefaultSeed);
}

TEST(RequestJson, ReferencesInOrder) {
  const GenerationRequest r = parse_request_json(
      R"({"prompt": "p", "references": [{"image": "i.png"}, {"video": "v.mp4"}, {"video": "s.mp4", "audio": false},
          {"video": "r.mp4", "audio": "r.wav"}, {"audio": "a.wav"}]})",
      "d");
  ASSERT_EQ(r.references.size(), 5u);
  using K = ReferenceInput::Kind;
  using S = ReferenceInput::Soundtrack;
  EXPECT_EQ(r.references[0].kind, K::Image);
  EXPECT_EQ(r.references[0].path, "d/i.png");
  EXPECT_EQ(r.references[1].kind, K::Video);
  EXPECT_EQ(r.references[1].soundtrack, S::Own);
  EXPECT_EQ(r.references[2].soundtrack, S::None);
  EXPECT_EQ(r.references[3].soundtrack, S::Replaced);
  EXPECT_EQ(r.references[3].soundtrack_path, "d/r.wav");
  EXPECT_EQ(r.references[4].kind, K::Audio);
  EXPECT_EQ(r.workflow(), Workflow::Ref2VA);
}

TEST(RequestJson, EachMistakeIsOneSentence) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1]", "a request must be a JSON object, got array"},
      {"{", "not valid JSON"},
      {R"({"width": 64})", "a request needs a \"prompt\""},
      {R"({"prompt": 3})", "\"prompt\" must be a string, got number"},
      {R"({"prompt": "p", "widht": 64})", "unknown key \"widht\""},
      {R"({"prompt": "p", "width": 64.5})", "\"width\" must be an integer, got number 64.5"},
      {R"({"prompt": "p", "frames": -1})", "\"frames\" must be between 0 and"},
      {R"({"prompt": "p", "steps": 99999999999999999999})", "\"steps\" must be"},
      {R"({"prompt": "p", "seed": -1})", "\"seed\" must be an integer between 0 and 18446744073709551615, got -1"},
      {R"({"prompt": "p", "seconds": "5"})", "\"seconds\" must be a number, got string"},
      {R"({"prompt": "p", "first_frame": ""})", "\"first_frame\" must name a file"},
      {R"({"prompt": "p", "last_frame": 7})", "\"last_frame\" must be a file path (a string), got number"},
      {R"({"prompt": "p", "references": {}})", "\"references\" must be an array, got object"},
      {R"({"prompt": "p", "references": [{"picture": "a.png"}]})", "\"references[0]\" has the unknown key \"picture\""},
      {R"({"prompt": "p", "references": [{}]})", "\"references[0]\" must hold \"image\", \"video\" or \"audio\""},
      {R"({"prompt": "p", "references": [{"image": "a", "audio": "b"}]})", "an image reference takes no"},
      {R"({"prompt": "p", "references": [{"video": "v", "audio": true}]})",
       "\"references[0].audio\" must be false (a silent video) or the path of a replacement soundtrack, got true"},
  };
  for (const auto& [text, want] : cases) {
    const std::string got = error_of(text);
    EXPECT_NE(got.find(want), std::string::npos) << text << "\n  gave: " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  }
}

// Runs `h3 tool generate` with these arguments; returns its exit status.
int generate(std::vector<std::string> args) {
  args.insert(args.begin(), "generate");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return run_tool(static_cast<int>(argv.size()), argv.data());
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The t2va end-to-end fixture (tests/fixtures/e2e) through the tool: the request as JSON, the reference's noise as a
// noise file; the tool's output within the bound EndToEnd.MatchesTheReferencePipeline holds the engine to.
TEST(GenerateTool, T2vaMatchesTheReferencePipeline) {
  const std::string fixture = test_source_dir() + "/tests/fixtures/e2e";
  const auto meta = nlohmann::json::parse(read_text_file(fixture + "/case.json"));
  const std::string dir = testing::TempDir() + "/generate_t2va";
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json request = {{"prompt", meta["prompt"]}, {"width", meta["width"]}, {"height", meta["height"]},
                            {"frames", meta["num_frames"]}, {"steps", meta["num_inference_steps"].get<int>() - 1}};
  write_text(dir + "/request.json", request.dump());
  const auto c = SafetensorsFile::open(fixture + "/case.safetensors");
  write_safetensors(dir + "/noise.safetensors",
                    {{"latents", c->tensor("latents")}, {"audio_latents", c->tensor("audio_latents")}});
  ASSERT_EQ(generate({"--model", fixture + "/model", "--request", dir + "/request.json", "--noise",
                      dir + "/noise.safetensors", "--out", dir + "/out.safetensors", "--device", "cpu"}),
            0);
  const auto out = SafetensorsFile::open(dir + "/out.safetensors");
  const auto e = SafetensorsFile::open(fixture + "/expected.safetensors");
  const Tensor video = out->tensor("video"), audio = out->tensor("audio");
  const Tensor video_ref = e->tensor("video").to_f32(), audio_ref = e->tensor("audio").to_f32();
  ASSERT_EQ(video.numel(), video_ref.numel());
  ASSERT_EQ(video.ndim(), 4);  // (3, F, H, W)
  EXPECT_EQ(video.dim(0), 3);
  ASSERT_EQ(audio.shape(), audio_ref.shape());
  EXPECT_LE(rel_l2(video, video_ref.reshape(video.shape())), 1e-4);
  EXPECT_LE(rel_l2(audio, audio_ref), 1e-4);
}

TEST(GenerateTool, BadInputIsRefusedBeforeAnyWork) {
  const std::string fixture = test_source_dir() + "/tests/fixtures/e2e";
  const std::string dir = testing::TempDir() + "/generate_bad";
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_text(dir + "/good.json", R"({"prompt": "a robot", "width": 16, "height": 8, "frames": 5, "steps": 2})");
  write_text(dir + "/bad.json", R"({"prompt": "a robot", "width": 12})");
  write_text(dir + "/typo.json", R"({"prompt": "a robot", "step": 2})");
  write_safetensors(dir + "/noise.safetensors", {{"latent", Tensor::zeros({1}, DType::F32)}});
  write_safetensors(dir + "/gap.safetensors", {{"condition_noise_1", Tensor::zeros({1}, DType::F32)}});
  const std::string model = fixture + "/model", out = dir + "/out.safetensors";
  EXPECT_EQ(generate({"--model", model, "--request", dir + "/good.json"}), 2);  // --out missing: usage
  EXPECT_EQ(generate({"--model", model, "--request", dir + "/good.json", "--out", out, "--tile", "x"}), 2);
  for (const char* request : {"bad.json", "typo.json", "missing.json"})
    EXPECT_EQ(generate({"--model", model, "--request", dir + "/" + request, "--out", out, "--device", "cpu"}), 1)
        << request;
  for (const char* noise : {"noise.safetensors", "gap.safetensors"})
    EXPECT_EQ(generate({"--model", model, "--request", dir + "/good.json", "--noise", dir + "/" + noise, "--out", out,
                        "--device", "cpu"}),
              1)
        << noise;
  EXPECT_FALSE(fs::exists(out));
  // --out never overwrites an input or goes into the model folder: usage errors, found before the noise is read.
  EXPECT_EQ(generate({"--model", model, "--request", dir + "/good.json", "--out", dir + "/good.json"}), 2);
  EXPECT_EQ(read_text_file(dir + "/good.json"),
            R"({"prompt": "a robot", "width": 16, "height": 8, "frames": 5, "steps": 2})");
  EXPECT_EQ(generate({"--model", model, "--request", dir + "/good.json", "--noise", dir + "/noise.safetensors",
                      "--out", dir + "/./noise.safetensors"}),
            2);
  EXPECT_EQ(generate({"--model", model, "--request", dir + "/good.json", "--out", model + "/out.safetensors"}), 2);
  EXPECT_FALSE(fs::exists(model + "/out.safetensors"));
}

}  // namespace
}  // namespace h3
