// `h3 tool make-tiny-model` and `h3 --info`: the tiny model lists every component; a damaged copy (one shard
// deleted, one truncated, one tensor renamed) gives one clear line per problem and a non-zero exit.
#include <gtest/gtest.h>

#include "h3/h3.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_encoder.h"
#include "models/dit/dit.h"
#include "models/qwen3vl/video_processor.h"
#include "models/qwen3vl/vision_model.h"
#include "tools/inspect.h"
#include "tools/tiny_model.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

struct RunResult {
  int status;
  std::string out;
};

RunResult run(const std::string& args) {
  std::string cmd = std::string(H3_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string tiny_model() {
  static std::string dir = [] {
    std::string d = (fs::temp_directory_path() / ("h3_info_tiny_" + std::to_string(getpid()))).string();
    fs::remove_all(d);
    RunResult r = run("tool make-tiny-model " + d + " --seed 7");
    EXPECT_EQ(r.status, 0) << r.out;
    return d;
  }();
  return dir;
}

int count_lines_with(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}

}  // namespace

TEST(Info, TinyModelListsEveryComponentAndServesEveryWorkflow) {
  RunResult r = run("--info -d " + tiny_model());
  EXPECT_EQ(r.status, 0) << r.out;
  for (const char* c : {"transformer:", "transformer_ref:", "text_encoder:", "tokenizer:", "processor:", "vae:",
                        "audio_vae:", "scheduler:", "audio_scheduler:"})
    EXPECT_NE(r.out.find(std::string("  ") + c + " present"), std::string::npos) << c << "\n" << r.out;
  // The snapshot's side ("yes": every component present), then what this h3 generates.
  for (Workflow w : {Workflow::T2VA, Workflow::FL2VA, Workflow::Ref2VA}) {
    const std::string line = cat(workflow_name(w), ": yes", workflow_served(w) ? "\n" : "; h3 does not serve it yet\n");
    EXPECT_NE(r.out.find(line), std::string::npos) << line << r.out;
  }
  EXPECT_TRUE(workflow_served(Workflow::T2VA));
  EXPECT_TRUE(workflow_served(Workflow::FL2VA));
  EXPECT_TRUE(workflow_served(Workflow::Ref2VA));
  EXPECT_NE(r.out.find("device: "), std::string::npos);
  EXPECT_EQ(r.out.find("problems"), std::string::npos);
  EXPECT_EQ(count_lines_with(r.out, "    base checkpoint (no to_gate_compress): attention: dense by default; "
                                    "--attention sparse: VSA-H3 without gates (pure sparse, gate GEMM skipped), tile "
                                    "256 (4x8x8), sparsity 0, exempt"),
            2)  // transformer and transformer_ref
      << r.out;
  // The default step grid: kDefaultSteps passes on the snapshot's shifts.
  EXPECT_NE(r.out.find(cat("sampling: ", kDefaultSteps, " passes (", kDefaultSteps + 1, " grid points) by default\n")),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n  video timesteps 0, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(shift 12)\n  audio timesteps 0, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(cat(kDefaultSteps, " passes): resident")), std::string::npos) << r.out;
}

// A copy whose transformer carries FastVideo's to_gate_compress in every main block (a third shard, listed in the
// index) is a FastH3 student: --info says so and gives the student's defaults (models/dit/dit_fasth3.h).
TEST(Info, GatedTransformerIsAFastH3Student) {
  std::string d = (fs::temp_directory_path() / ("h3_info_fasth3_" + std::to_string(getpid()))).string();
  fs::remove_all(d);
  fs::copy(tiny_model(), d, fs::copy_options::recursive);
  const std::string dir = d + "/transformer";
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  const int64_t inner = config.at("num_attention_heads").get<int64_t>() * config.at("attention_head_dim").get<int64_t>();
  const int64_t hidden = config.at("hidden_size").get<int64_t>();
  const std::string index_path = dir + "/diffusion_pytorch_model.safetensors.index.json";
  nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path));
  std::vector<NamedTensor> gates;
  for (int64_t i = 0; i < config.at("num_layers").get<int64_t>(); ++i) {
    gates.push_back({cat("transformer_blocks.", i, ".attn.to_gate_compress.weight"),
                     Tensor::zeros({inner, hidden}, DType::BF16)});
    index["weight_map"][gates.back().name] = "fasth3_gates.safetensors";
  }
  write_safetensors(dir + "/fasth3_gates.safetensors", gates);
  std::ofstream(index_path) << index.dump(2);
  RunResult r = run("--info -d " + d);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("    FastH3 student (to_gate_compress in every block): attention: VSA-H3 with gates "
                       "(FastH3 student), tile 64 (4x4x4), sparsity 0, exempt; 4 passes by default"),
            std::string::npos)
      << r.out;
  // The student's grid (basic_fasth3.py: 5 grid points on the base shifts; spec/sampling.md §8's timesteps) is the
  // default sampling, and the default request runs it.
  EXPECT_NE(r.out.find("sampling: 4 passes (5 grid points) by default, the FastH3 student's grid (basic_fasth3.py)\n"
                       "  video timesteps 0, 0.027027, 0.0769231, 0.2 (shift 12)\n"
                       "  audio timesteps 0, 0.1, 0.25, 0.5 (shift 3)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("default 864x480x124, 4 passes)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("problems"), std::string::npos) << r.out;
  fs::remove_all(d);
}

bool all_finite(const Tensor& t) {
  const Tensor f = t.to(DType::F32);
  for (int64_t i = 0; i < f.numel(); ++i)
    if (!std::isfinite(f.ptr<float>()[i])) return false;
  return true;
}

// What ref2va reads beyond t2va and fl2va loads from a made tiny model and computes: the ref transformer, the video
// processor's settings (the release's, on the tiny vision tower's patch), the audio VAE encoder, and a reference
// picture size small enough for a CPU demo.
TEST(Info, TinyModelLoadsWhatRef2vaNeeds) {
  const Snapshot s = Snapshot::discover(tiny_model());
  EXPECT_TRUE(s.missing_for(Workflow::Ref2VA).empty());
  std::unique_ptr<Backend> cpu = make_cpu_backend();

  const std::unique_ptr<Dit> ref = Dit::load(*cpu, s.transformer_ref);
  EXPECT_EQ(ref->config().hidden_size, Dit::load(*cpu, s.transformer)->config().hidden_size);

  const VideoProcessorConfig video = load_video_processor_config(s.processor);
  EXPECT_EQ(video.patch_size, 16);
  EXPECT_EQ(video.temporal_patch_size, 2);
  EXPECT_EQ(video.merge_size, 2);
  EXPECT_EQ(video.min_pixels, 4096);
  EXPECT_EQ(video.max_pixels, 25165824);
  EXPECT_FALSE(video.cap_pixels_per_frame);
  // Four 64x64 frames through the processor and the tower: grid (2, 4, 4), 2·2·2 merged rows.
  const std::unique_ptr<QwenVisionModel> vision = QwenVisionModel::load(*cpu, s.text_encoder);
  EXPECT_EQ(vision->config().patch_size, video.patch_size);
  Rgb8Video clip;
  clip.width = clip.height = 64;
  clip.frames = 4;
  clip.rgb.resize(clip.frame_bytes() * clip.frames);
  for (size_t i = 0; i < clip.rgb.size(); ++i) clip.rgb[i] = static_cast<uint8_t>(i * 31 % 256);
  const VisionFeatures features = vision->encode(prepare_videos(video, {clip}));
  ASSERT_EQ(features.grids.size(), 1u);
  EXPECT_EQ(features.grids[0].t, 2);
  EXPECT_EQ(features.grids[0].h, 4);
  EXPECT_EQ(features.grids[0].w, 4);
  const Tensor embeds = cpu->download(features.embeds);
  EXPECT_EQ(embeds.dim(0), 8);
  EXPECT_TRUE(all_finite(embeds));

  // Two hops of stereo sound: two finite latent frames per channel.
  const std::unique_ptr<AudioVaeEncoder> audio = AudioVaeEncoder::load(*cpu, s.audio_vae);
  const int64_t samples = 2 * audio->config().hop_length();
  std::vector<float> wave(2 * samples);
  for (size_t i = 0; i < wave.size(); ++i) wave[i] = 0.5f * std::sin(0.01f * static_cast<float>(i));
  const Tensor mean = audio->encode(Tensor::from_f32({2, samples}, wave));
  EXPECT_EQ(mean.shape(), (std::vector<int64_t>{2, audio->config().latent_channels, 2}));
  EXPECT_TRUE(all_finite(mean));

  const CanvasConfig canvas = load_canvas_config(s.index_file);
  EXPECT_EQ(canvas.reference_image_short_edge, kTinyReferenceImageShortEdge);
  EXPECT_EQ(canvas.canvas_short_edge, kTinyCanvasShortEdge);
  EXPECT_EQ(canvas.canvas_max_pixels, kTinyCanvasMaxPixels);
}

TEST(Info, TinyModelIsDeterministicForASeed) {
  std::string a = tiny_model();
  std::string b = (fs::temp_directory_path() / ("h3_info_tiny_b_" + std::to_string(getpid()))).string();
  fs::remove_all(b);
  ASSERT_EQ(run("tool make-tiny-model " + b + " --seed 7").status, 0);
  auto f1 = SafetensorsFile::open(a + "/audio_vae/diffusion_pytorch_model.safetensors");
  auto f2 = SafetensorsFile::open(b + "/audio_vae/diffusion_pytorch_model.safetensors");
  ASSERT_EQ(f1->file_size(), f2->file_size());
  EXPECT_EQ(0, std::memcmp(f1->tensor("decoder.conv_post.weight_v").data(), f2->tensor("decoder.conv_post.weight_v").data(),
                           f1->tensor("decoder.conv_post.weight_v").nbytes()));
  fs::remove_all(b);
}

TEST(Info, DamagedCopyGivesOneLinePerProblem) {
  std::string d = (fs::temp_directory_path() / ("h3_info_damaged_" + std::to_string(getpid()))).string();
  fs::remove_all(d);
  fs::copy(tiny_model(), d, fs::copy_options::recursive);
  // 1. Delete a transformer shard.
  fs::remove(d + "/transformer/diffusion_pytorch_model-00002-of-00002.safetensors");
  // 2. Truncate a VAE shard.
  std::string vae_shard = d + "/vae/diffusion_pytorch_model-00002-of-00002.safetensors";
  fs::resize_file(vae_shard, fs::file_size(vae_shard) / 2);
  // 3. Rename one tensor of the audio VAE.
  std::string au = d + "/audio_vae/diffusion_pytorch_model.safetensors";
  {
    auto f = SafetensorsFile::open(au);
    std::vector<NamedTensor> ts;
    for (const auto& t : f->tensors())
      ts.push_back({t.name == "decoder.conv_pre.bias" ? "decoder.conv_pre.b1as" : t.name, f->tensor(t).clone()});
    write_safetensors(au, ts);
  }
  RunResult r = run("--info -d " + d);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("problems (3):"), std::string::npos) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "diffusion_pytorch_model-00002-of-00002.safetensors: shard listed in"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "truncated"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "tensor 'decoder.conv_pre.bias' needed by the decoder is missing"), 1) << r.out;
  fs::remove_all(d);
}

TEST(Info, RealDiffusersSnapshotPassesTheManifests) {
  // The end-to-end fixture was written by diffusers' own save from the reference classes.
  InspectReport r = inspect_snapshot(std::string(H3_SOURCE_DIR) + "/tests/fixtures/e2e/model");
  EXPECT_TRUE(r.problems.empty()) << r.text;
}

// The target of make-tiny-model is never clobbered by accident (issue 22, items 2 and 5): a file, a folder that is not
// empty (unless --force) and a path that cannot be made are each refused with one sentence, never an abort.
TEST(Info, MakeTinyModelGuardsItsTarget) {
  const fs::path base = fs::temp_directory_path() / ("h3_info_target_" + std::to_string(getpid()));
  fs::remove_all(base);
  fs::create_directories(base / "full");
  std::ofstream((base / "file.mp4").string()) << "x";
  std::ofstream((base / "full" / "keep.txt").string()) << "keep";
  RunResult r = run("tool make-tiny-model " + (base / "file.mp4").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("file.mp4 exists and is not a folder."), std::string::npos) << r.out;
  r = run("tool make-tiny-model " + (base / "full").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is not empty; give an empty or new folder (or --force"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(base / "full" / "transformer"));
  EXPECT_EQ(run("tool make-tiny-model " + (base / "full").string() + " --force").status, 0);
  EXPECT_TRUE(fs::exists(base / "full" / "transformer" / "config.json"));
  EXPECT_TRUE(fs::exists(base / "full" / "keep.txt"));
  r = run("tool make-tiny-model /proc/h3-no-such-dir/x");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("cannot write /proc/h3-no-such-dir/x: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  fs::remove_all(base);
}

// An unreadable scheduler config is a problem and its shift is not made up (issue 22, item 4).
TEST(Info, UnreadableSchedulerConfigHasNoShift) {
  const fs::path copy = fs::temp_directory_path() / ("h3_info_sched_" + std::to_string(getpid()));
  fs::remove_all(copy);
  fs::copy(tiny_model(), copy, fs::copy_options::recursive);
  std::ofstream((copy / "scheduler" / "scheduler_config.json").string(), std::ios::trunc);
  const RunResult r = run("--info -d " + copy.string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("  scheduler: present, shift unknown (its config is unreadable)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scheduler_config.json: malformed JSON"), std::string::npos) << r.out;
  fs::remove_all(copy);
}

TEST(Info, BadArguments) {
  EXPECT_EQ(run("--info").status, 2);
  RunResult r = run("--info -d /nonexistent-h3-dir");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("model folder not found"), std::string::npos) << r.out;
  EXPECT_EQ(run("tool make-tiny-model").status, 2);
  EXPECT_EQ(run("tool no-such-tool").status, 2);
}
