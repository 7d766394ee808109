// The whole pipeline on the CUDA backend against the CPU backend (the f32 oracle), stage by stage and end to end,
// on the tiny models of the test fixtures. Skips without a GPU.
//
// The fixtures are found under $H3_SOURCE_DIR when it is set (the GPU machine runs a copy of the checkout at
// another path), else under the source directory this test was built from.
//
// Tolerances (relative L2 = ||cuda − cpu|| / ||cpu||), with the reason for each:
// - audio VAE decode: float32 on both backends; only summation order, FMA contraction and the last ulp of
//   expf/sinf differ, through 7 stages of convolutions: 1e-4 (the CPU path is 9e-7 from the reference).
// - video VAE decode: the GPU runs the decoder's GEMMs and attention in float16 as the reference's autocast does
//   (11-bit significands: 2^-11 ≈ 4.9e-4 per rounding), the residual stream in float32; a couple of blocks of
//   roundings on unit-scale activations: 5e-3. With H3_VIDEO_VAE_BF16=1 (8-bit significands, 2^-8 ≈ 3.9e-3 per
//   rounding): 3e-2.
// - conditioner: bf16 weights and activations through 50 layers; the residual stream (bf16, ~1.1e-3 RMS relative
//   rounding) is rounded 100 times (≈ 1.1e-2 if the roundings do not grow) and each branch adds its own: 5e-2,
//   with the cosine similarity above 0.998.
// - end to end (conditioner, 3 DiT passes in bf16, both decoders): the bf16 errors above reach the latents
//   (~1e-2) and the decoders pass them on; pixels are clamped to [0, 1]: 5e-2 for video and audio, with the
//   cosine similarity above 0.998. The measured values are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "temp_dir.h"
#include "test_source_dir.h"
#include "util/mapped_file.h"
#include "util/scoped_env.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "h3/h3.h"
#include "io/manifest.h"
#include "io/snapshot.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/audio_vae/audio_vae_random.h"
#include "models/qwen3vl/text_model.h"
#include "media/video_input.h"
#include "models/video_vae/decoder.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

using namespace h3;
namespace fs = std::filesystem;

#ifndef H3_HAVE_CUDA
TEST(PipelineCuda, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

namespace {

std::string e2e_model() { return test_source_dir() + "/tests/fixtures/e2e/model"; }

Tensor host_randn(const Shape& s, uint64_t seed, float scale = 1.f) {
  Tensor t = Tensor::empty(s, DType::F32);
  random_normal_host(t, seed, 0.f, scale);
  return t;
}


class PipelineCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device on this machine";
    ASSERT_TRUE(fs::exists(e2e_model())) << "missing fixture " << e2e_model() << " (set H3_SOURCE_DIR)";
  }
};

void expect_close(const Tensor& gpu, const Tensor& cpu, double tol, double min_cosine, const std::string& what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  for (int64_t i = 0; i < gpu.numel(); ++i) ASSERT_TRUE(std::isfinite(gpu.ptr<float>()[i])) << what << " at " << i;
  const double r = rel_l2(gpu, cpu), c = cosine(gpu, cpu);
  std::printf("[ cuda vs cpu ] %s: rel L2 %.3g, cosine %.6f (tolerance %.3g)\n", what.c_str(), r, c, tol);
  EXPECT_LE(r, tol) << what;
  EXPECT_GE(c, min_cosine) << what;
}

// Random decoder weights by diffusers name (unit-scale activations; non-zero layer scales and register tokens).
std::map<std::string, Tensor> vae_weights(const VideoVaeConfig& c) {
  std::map<std::string, Tensor> w;
  uint64_t seed = 100;
  for (const TensorSpec& s : video_vae_manifest(c, Layout::Diffusers, false)) {
    const std::string& n = s.name;
    Tensor t = host_randn(s.shape, ++seed);
    float* p = t.ptr<float>();
    float scale = 1.f, shift = 0.f;
    if (n.ends_with("norm1.weight") || n.ends_with("norm2.weight") || n.ends_with("norm_out.weight"))
      scale = 0.1f, shift = 1.f;
    else if (n.ends_with(".bias") || n.ends_with("scale1") || n.ends_with("scale2"))
      scale = 0.2f;
    else if (n != "decoder.register_tokens")
      scale = 1.f / std::sqrt(static_cast<float>(s.shape[1]));
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = shift + scale * p[i];
    w[n] = t;
  }
  return w;
}

}  // namespace

TEST_F(PipelineCuda, AudioVaeDecodeMatchesCpu) {
  TempDir dir("pcuda");
  AudioVaeConfig c;
  c.latent_channels = 8;
  c.latent_dim = 64;
  c.decoder_dim = 128;
  c.latents_mean.assign(8, 0.1);
  c.latents_std.assign(8, 0.9);
  write_random_audio_vae(dir.path(), c, 5, false);
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  std::unique_ptr<Backend> f32;
  {
    ScopedEnv off("H3_DISABLE_TF32_CONV", "1");
    f32 = make_cuda_backend();
  }
  const Tensor z = host_randn({2, 8, 37}, 6);
  const Tensor ref = AudioVaeDecoder::load(*cpu, audio_vae_component_at(dir.path()))->decode(z);
  // The default: cuDNN's convolutions with TF32 math, as the reference runs them. TF32 keeps 10 mantissa bits of
  // each operand (2^-11 relative rounding, up to ~6e-4 relative L2 per convolution); the decode chains 2 + 7 + 7·3·6
  // convolutions, whose errors mostly average out through the residual sums: 7.0e-4 measured on an H200 with the
  // deterministic algorithms (BENCHMARKS.md, 2026-11-29 session 3, call 6); tolerance 3e-3.
  const Tensor got = AudioVaeDecoder::load(*gpu, audio_vae_component_at(dir.path()))->decode(z);
  // cuDNN serves (its autotune may pick an FMA engine for the small conv_post, the last convolution).
  EXPECT_TRUE(cuda_last_conv_path(*gpu).starts_with("cudnn-")) << cuda_last_conv_path(*gpu);
  expect_close(got, ref, 3e-3, 0.99999, "audio VAE decode (TF32 convolutions), 37 latents x 2");
  // The f32 twin: both sides in f32, differing in summation order only.
  const Tensor exact = AudioVaeDecoder::load(*f32, audio_vae_component_at(dir.path()))->decode(z);
  EXPECT_EQ(cuda_last_conv_path(*f32), "h3-f32");
  expect_close(exact, ref, 1e-4, 0.99999, "audio VAE decode (f32 convolutions), 37 latents x 2");
}

TEST_F(PipelineCuda, VideoVaeDecodeMatchesCpu) {
  // The fixture model's VAE geometry (spatial 16, temporal 4) with a 2-block decoder of 2 heads × 16; latents of
  // 12 frames (2 windows) × 3 × 5 decoded in 32-px tiles overlapping by 16 px: several tiles, chunks, fades.
  VideoVaeConfig c;
  c.latent_channels = 8;
  c.decoder_num_layers = 2;
  c.decoder_num_attention_heads = 2;
  c.decoder_attention_head_dim = 16;
  c.decoder_num_register_tokens = 2;
  c.decoder_ffn_mult = 2;
  c.latents_mean.assign(8, 0.05);
  c.latents_std.assign(8, 1.1);
  const auto w = vae_weights(c);
  auto source = [&](const std::string& n) { return w.at(n); };
  TileOptions t;
  t.tile = 32;
  t.tile_overlap = 16;
  const Tensor z = host_randn({8, 12, 3, 5}, 7);
  auto cpu = make_cpu_backend();
  const Tensor ref = VideoVaeDecoder::create(*cpu, c, source)->decode(z, t);
  {
    auto gpu = make_cuda_backend();
    t.max_batch_tokens = default_video_vae_batch_tokens(*gpu);
    expect_close(VideoVaeDecoder::create(*gpu, c, source)->decode(z, t), ref, 5e-3, 0.9999, "video VAE decode, fp16");
    t.max_batch_tokens = 1;  // one tile per batch: the same result
    expect_close(VideoVaeDecoder::create(*gpu, c, source)->decode(z, t), ref, 5e-3, 0.9999,
                 "video VAE decode, fp16, one tile per batch");
  }
  {
    ScopedEnv bf16("H3_VIDEO_VAE_BF16", "1");
    auto gpu = make_cuda_backend();
    expect_close(VideoVaeDecoder::create(*gpu, c, source)->decode(z, t), ref, 3e-2, 0.999, "video VAE decode, bf16");
  }
}

TEST_F(PipelineCuda, ConditionerMatchesCpu) {
  const Snapshot s = Snapshot::discover(e2e_model());
  const Tokenizer tok = Tokenizer::from_file(s.tokenizer.dir);
  const Presentation p = present_t2va(tok, "a robot dancing in the rain, then a red fox walks through fresh snow");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const Tensor ref = QwenTextModel::load(*cpu, s.text_encoder)->encode(p.ids);
  const Tensor got = QwenTextModel::load(*gpu, s.text_encoder)->encode(p.ids);
  expect_close(got, ref, 5e-2, 0.998, "conditioner, 50 layers");
}

TEST_F(PipelineCuda, TinyEndToEndMatchesCpu) {
  GenerationRequest r;
  r.prompt = "a robot dancing in the rain";
  r.width = 32;
  r.height = 32;
  r.frames = 39;  // two VAE windows
  r.steps = 3;
  r.seed = 11;
  EngineOptions o;
  o.model_dir = e2e_model();
  o.device = "cpu";
  const GenerationResult ref = Engine::open(o)->generate(r);
  o.device = "cuda";
  auto engine = Engine::open(o);
  const GenerationResult got = engine->generate(r);
  EXPECT_EQ(engine->backend_name(), "cuda");
  expect_close(got.video, ref.video, 5e-2, 0.998, "end to end, video");
  expect_close(got.audio, ref.audio, 5e-2, 0.998, "end to end, audio");
  // The GPU run reports device time and the allocator's high-water mark per phase.
  for (const PhaseTiming& t : got.timings) {
    if (t.phase == Phase::Load) continue;  // wall time only
    EXPECT_GT(t.device_seconds, 0.0) << phase_name(t.phase);
    EXPECT_GT(t.peak_device_bytes, 0u) << phase_name(t.phase);
  }
}

// fl2va on the tiny e2e model: both keyframes as RGB8 buffers (the GPU bundle reads no image files), the canvas
// resolved from the first, CUDA against CPU within the t2va test's tolerance.
TEST_F(PipelineCuda, TinyFl2vaEndToEndMatchesCpu) {
  auto picture = [](int w, int h, int seed) {
    Rgb8Image img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
    for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37 + seed * 101) % 251);
    return img;
  };
  GenerationRequest r;
  r.prompt = "The fox keeps walking through the snow.";
  r.first_frame = ImageInput::rgb8(picture(48, 32, 1));
  r.last_frame = ImageInput::rgb8(picture(30, 40, 2));
  r.width = 32;
  r.height = 32;
  r.frames = 39;
  r.steps = 3;
  r.seed = 12;
  EngineOptions o;
  o.model_dir = e2e_model();
  o.device = "cpu";
  const GenerationResult ref = Engine::open(o)->generate(r);
  o.device = "cuda";
  auto engine = Engine::open(o);
  const GenerationResult got = engine->generate(r);
  EXPECT_EQ(got.request.workflow, Workflow::FL2VA);
  expect_close(got.video, ref.video, 5e-2, 0.998, "fl2va end to end, video");
  expect_close(got.audio, ref.audio, 5e-2, 0.998, "fl2va end to end, audio");
}

// ref2va on the tiny e2e model (a copy whose index asks for the small canvas and reference pictures of the e2e_fl2va
// family): an image, a 30 fps clip with its soundtrack and a 16 kHz sound, all in memory (the GPU bundle decodes no
// media files), CUDA against CPU within the t2va test's tolerance. Covers the vision tower's video path, the audio
// VAE encoder, the ref2va transformer and the reference rows on CUDA.
TEST_F(PipelineCuda, TinyRef2vaEndToEndMatchesCpu) {
  TempDir dir("ref2va-cuda");
  const std::string model = dir / "model";
  fs::copy(e2e_model(), model, fs::copy_options::recursive);
  for (const char* index : {"modular_model_index.json", "model_index.json"}) {
    const std::string path = model + "/" + index;
    if (!fs::exists(path)) continue;
    nlohmann::json j = nlohmann::json::parse(read_text_file(path));
    j["canvas_short_edge"] = 16;
    j["canvas_max_pixels"] = 16 * 24;
    j["reference_image_short_edge"] = 24;
    std::ofstream(path) << j.dump(2);
  }
  auto picture = [](int w, int h, int seed) {
    Rgb8Image img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
    for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37 + seed * 101) % 251);
    return img;
  };
  auto tone = [](double seconds, int rate, int channels, float f) {
    Waveform w{rate, channels, {}};
    const int64_t n = static_cast<int64_t>(seconds * rate);
    for (int c = 0; c < channels; ++c)
      for (int64_t i = 0; i < n; ++i) w.samples.push_back(0.4f * std::sin(f * static_cast<float>(i) * (c + 1)));
    return w;
  };
  Rgb8Video clip;
  for (int f = 0; f < 75; ++f) append_frame(clip, picture(40, 24, 10 + f));
  GenerationRequest r;
  r.prompt = "The fox keeps walking through the snow.";
  ReferenceInput image, video, sound;
  image.kind = ReferenceInput::Kind::Image;
  image.image = std::make_shared<const Rgb8Image>(picture(30, 20, 1));
  video.kind = ReferenceInput::Kind::Video;
  video.video = std::make_shared<const DecodedVideo>(DecodedVideo{clip, 30.0});
  video.audio = std::make_shared<const Waveform>(tone(2.5, 44100, 2, 0.03f));
  sound.kind = ReferenceInput::Kind::Audio;
  sound.audio = std::make_shared<const Waveform>(tone(3.0, 16000, 1, 0.07f));
  r.references = {image, video, sound};
  r.width = 24;
  r.height = 16;
  r.frames = 56;
  r.steps = 3;
  r.seed = 12;
  EngineOptions o;
  o.model_dir = model;
  o.device = "cpu";
  const GenerationResult ref = Engine::open(o)->generate(r);
  o.device = "cuda";
  auto engine = Engine::open(o);
  const GenerationResult got = engine->generate(r);
  EXPECT_EQ(got.request.workflow, Workflow::Ref2VA);
  expect_close(got.video, ref.video, 5e-2, 0.998, "ref2va end to end, video");
  expect_close(got.audio, ref.audio, 5e-2, 0.998, "ref2va end to end, audio");
}

#endif
