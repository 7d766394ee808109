// Random-weight model constructors (models/random_weights.h and each model's random / random_dit): on the CPU
// backend at tiny sizes, every model runs to finite, non-constant outputs; the same seed gives bit-identical models,
// another seed another model; the byte counts the memory plan uses equal what the constructors allocate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/dit/dit_random.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/vision_model.h"
#include "models/random_weights.h"
#include "models/video_vae/decoder.h"
#include "models/video_vae/encoder.h"
#include "pipeline/engine_parts.h"
#include "pipeline/memory_plan.h"

using namespace h3;

namespace {

bool finite_and_varied(const Tensor& t) {
  const Tensor f = t.to(DType::F32);
  float lo = f.ptr<float>()[0], hi = lo;
  for (int64_t i = 0; i < f.numel(); ++i) {
    const float v = f.ptr<float>()[i];
    if (!std::isfinite(v)) return false;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return hi > lo;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

Tensor host_randn(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::F32);
  random_normal_host(t, seed, 0.f, 1.f);
  return t;
}

// The tiny configurations the engine tests and `bench-pipeline --tiny` use (pipeline/engine_parts.h).
DitConfig tiny_dit() { return tiny_component_configs(300).dit; }
TextEncoderConfig tiny_text() { return tiny_component_configs(300).text; }
VideoVaeConfig tiny_vae() { return tiny_component_configs(300).vae; }

AudioVaeConfig tiny_audio() { return tiny_component_configs(300).audio; }  // decoder_dim 128: 7 stages → 1 channel

// Random patch rows of two images, (1, 4, 6) and (1, 2, 2) patches, for the tiny vision tower.
QwenVisionInputs tiny_vision_inputs(const QwenVisionConfig& v) {
  QwenVisionInputs in;
  in.grids = {{1, 4, 6}, {1, 2, 2}};
  in.pixel_values = host_randn({24 + 4, v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size}, 8);
  return in;
}

// 8-bit RGB noise.
Rgb8Image random_picture(int width, int height, uint32_t seed) {
  Rgb8Image im;
  im.width = width;
  im.height = height;
  uint32_t x = seed;
  for (int64_t i = 0; i < int64_t(width) * height * 3; ++i) {
    x = x * 1664525u + 1013904223u;
    im.rgb.push_back(static_cast<uint8_t>(x >> 24));
  }
  return im;
}

// One tiny packed sequence: 3 text rows, 4 audio rows, a 2×2×2 video grid; one noise level.
DitOutput dit_forward(Dit& dit) {
  const DitConfig& c = dit.config();
  const int64_t Nt = 3, Na = 4, Nv = 8, L = Nt + Na + Nv;
  DitForwardArgs a;
  a.hidden_states = host_randn({Nv, c.patch_dim()}, 1);
  a.audio_hidden_states = host_randn({Na, c.audio_in_channels}, 2);
  a.encoder_hidden_states = host_randn({Nt, c.text_dim}, 3);
  a.timestep = {0.7f};
  a.timestep_indices.assign(L, 0);
  a.position_ids = Tensor::zeros({L, 3}, DType::F32);
  for (int64_t i = 0; i < L; ++i) {
    const int64_t tag = i < Nt ? kDitTagText : i < Nt + Na ? kDitTagAudio : kDitTagVideo;
    a.token_tags.push_back(tag);
    (tag == kDitTagText ? a.text_indices : tag == kDitTagAudio ? a.audio_indices : a.video_indices).push_back(i);
    const int64_t v = i - Nt - Na;
    float* p = a.position_ids.ptr<float>() + 3 * i;
    if (tag == kDitTagVideo) {
      p[0] = float(v / 4);
      p[1] = float((v / 2) % 2);
      p[2] = float(v % 2);
    } else {
      p[0] = float(tag == kDitTagText ? i : i - Nt);
    }
  }
  return dit.forward(a);
}

}  // namespace

TEST(ModelsRandom, WeightsDependOnSeedAndNameNotOrder) {
  auto cpu = make_cpu_backend();
  RandomWeights a(*cpu, 9), b(*cpu, 9), c(*cpu, 10);
  const Tensor a1 = a.matrix("w1", {64, 256}, DType::F32), a2 = a.norm("n", {256}, DType::F32);
  const Tensor b2 = b.norm("n", {256}, DType::F32), b1 = b.matrix("w1", {64, 256}, DType::F32);
  EXPECT_TRUE(same(a1, b1));
  EXPECT_TRUE(same(a2, b2));
  EXPECT_FALSE(same(a1, c.matrix("w1", {64, 256}, DType::F32)));
  EXPECT_FALSE(same(a1, a.matrix("w2", {64, 256}, DType::F32)));
  EXPECT_EQ(a.bytes(), (64 * 256 * 2 + 256) * sizeof(float));
  // Scales: matrices N(0, 1/√fan_in) (fan-in 256: σ = 1/16), norms N(1, 0.05).
  double sq = 0, sum = 0;
  for (int64_t i = 0; i < a1.numel(); ++i) sq += a1.ptr<float>()[i] * a1.ptr<float>()[i];
  for (int64_t i = 0; i < a2.numel(); ++i) sum += a2.ptr<float>()[i];
  EXPECT_NEAR(std::sqrt(sq / a1.numel()), 1.0 / 16, 0.003);
  EXPECT_NEAR(sum / a2.numel(), 1.0, 0.01);
}

TEST(ModelsRandom, DitRunsAndIsDeterministic) {
  auto cpu = make_cpu_backend();
  uint64_t bytes = 0;
  auto d1 = random_dit(*cpu, tiny_dit(), {5, false}, &bytes);
  auto d2 = random_dit(*cpu, tiny_dit(), {5, false});
  auto d3 = random_dit(*cpu, tiny_dit(), {6, true});
  const DitOutput o1 = dit_forward(*d1), o2 = dit_forward(*d2), o3 = dit_forward(*d3);
  EXPECT_TRUE(finite_and_varied(o1.sample));
  EXPECT_TRUE(finite_and_varied(o1.audio_sample));
  EXPECT_TRUE(same(o1.sample, o2.sample));
  EXPECT_FALSE(same(o1.sample, o3.sample));
  EXPECT_TRUE(finite_and_varied(o3.sample));  // resident AdaLN weights, another seed
  // The memory plan's count is what the constructor made (AdaLN projections not resident).
  EXPECT_EQ(bytes, dit_resident_bytes(tiny_dit(), DType::F32, false));
}

TEST(ModelsRandom, TextEncoderRunsAndIsDeterministic) {
  auto cpu = make_cpu_backend();
  auto m1 = QwenTextModel::random(*cpu, tiny_text(), 3), m2 = QwenTextModel::random(*cpu, tiny_text(), 3);
  auto m3 = QwenTextModel::random(*cpu, tiny_text(), 4, 7);
  const std::vector<int32_t> ids = {5, 17, 299, 0, 42, 42, 8};
  const Tensor h1 = m1->encode(ids), h2 = m2->encode(ids), h3 = m3->encode(ids);
  EXPECT_EQ(h1.shape(), (Shape{7, 32}));
  EXPECT_TRUE(finite_and_varied(h1));
  EXPECT_TRUE(same(h1, h2));
  EXPECT_FALSE(same(h1, h3));
  EXPECT_THROW(QwenTextModel::random(*cpu, tiny_text(), 3, kConditionerLayers + 1), Error);
  // 50 layers of the released config in bf16: 487,598,336 parameters per layer (the embedding stays on the host).
  EXPECT_EQ(QwenTextModel::resident_bytes(TextEncoderConfig{}, DType::BF16), uint64_t(487'598'336) * 50 * 2);
}

TEST(ModelsRandom, VideoVaeDecodesToPixelsAndIsDeterministic) {
  auto cpu = make_cpu_backend();
  auto v1 = VideoVaeDecoder::random(*cpu, tiny_vae(), 11), v2 = VideoVaeDecoder::random(*cpu, tiny_vae(), 11);
  auto v3 = VideoVaeDecoder::random(*cpu, tiny_vae(), 12);
  const Tensor z = host_randn({8, 7, 2, 3}, 4);
  TileOptions t;
  t.tile = 16;  // 2 × 3 latents = 32 × 48 px: a 2 × 3 grid of one-latent tiles, no overlap
  t.tile_overlap = 0;
  const Tensor p1 = v1->decode(z, t), p2 = v2->decode(z, t), p3 = v3->decode(z, t);
  EXPECT_EQ(p1.shape(), (Shape{3, 22, 32, 48}));
  EXPECT_TRUE(finite_and_varied(p1));
  for (int64_t i = 0; i < p1.numel(); ++i) ASSERT_TRUE(p1.ptr<float>()[i] >= 0.f && p1.ptr<float>()[i] <= 1.f);
  EXPECT_TRUE(same(p1, p2));
  EXPECT_FALSE(same(p1, p3));
  // The memory plan's weight count for f32 GEMMs: every tensor the decoder holds.
  const VideoVaeConfig released;
  EXPECT_NEAR(VideoVaeDecoder::weight_bytes(released, DType::F16) / 1e9, 4.85, 0.01);
}

TEST(ModelsRandom, AudioVaeDecodesAndIsDeterministic) {
  auto cpu = make_cpu_backend();
  auto a1 = AudioVaeDecoder::random(*cpu, tiny_audio(), 21), a2 = AudioVaeDecoder::random(*cpu, tiny_audio(), 21);
  auto a3 = AudioVaeDecoder::random(*cpu, tiny_audio(), 22);
  const Tensor z = host_randn({2, 8, 5}, 6);
  const Tensor w1 = a1->decode(z), w2 = a2->decode(z), w3 = a3->decode(z);
  EXPECT_EQ(w1.shape(), (Shape{2, 5 * 800}));
  EXPECT_TRUE(finite_and_varied(w1));
  EXPECT_TRUE(same(w1, w2));
  EXPECT_FALSE(same(w1, w3));
  // Released decoder, weight norm folded: spec/audio_vae.md §8 counts 151.3 M parameters with the encoder and
  // weight_g; the decoder alone is well under that.
  const uint64_t released = AudioVaeDecoder::weight_bytes(AudioVaeConfig{});
  EXPECT_GT(released, uint64_t(100) << 20);
  EXPECT_LT(released, uint64_t(606) << 20);
}

TEST(ModelsRandom, VisionTowerRunsAndIsDeterministic) {
  auto cpu = make_cpu_backend();
  const TextEncoderConfig c = tiny_text();
  auto v1 = QwenVisionModel::random(*cpu, c, 31), v2 = QwenVisionModel::random(*cpu, c, 31);
  auto v3 = QwenVisionModel::random(*cpu, c, 32);
  const QwenVisionInputs in = tiny_vision_inputs(c.vision);
  const VisionFeatures f1 = v1->encode(in), f2 = v2->encode(in), f3 = v3->encode(in);
  // 2×3 + 1×1 merge blocks of 2×2 patches; one DeepStack tap (block 0); rows of the conditioner's width.
  EXPECT_EQ(f1.embeds.shape(), (Shape{7, c.text.hidden_size}));
  ASSERT_EQ(f1.deepstack.size(), c.vision.deepstack_visual_indexes.size());
  EXPECT_EQ(f1.deepstack[0].shape(), f1.embeds.shape());
  EXPECT_TRUE(finite_and_varied(f1.embeds));
  EXPECT_TRUE(finite_and_varied(f1.deepstack[0]));
  EXPECT_TRUE(same(f1.embeds, f2.embeds));
  EXPECT_TRUE(same(f1.deepstack[0], f2.deepstack[0]));
  EXPECT_FALSE(same(f1.embeds, f3.embeds));
  // A config the tower cannot run is refused as load() refuses it.
  TextEncoderConfig bad = c;
  bad.vision.out_hidden_size = c.text.hidden_size + 1;
  EXPECT_THROW(QwenVisionModel::random(*cpu, bad, 31), Error);
  // spec/conditioner.md §2.4: the released tower holds 595,266,800 parameters, of which the 48×48 position table
  // (2304 × 1152) stays on the host.
  EXPECT_EQ(QwenVisionModel::resident_bytes(TextEncoderConfig{}, DType::BF16),
            (uint64_t(595'266'800) - 2304 * 1152) * 2);
}

TEST(ModelsRandom, VideoVaeEncoderEncodesAndIsDeterministic) {
  auto cpu = make_cpu_backend();
  const VideoVaeConfig c = tiny_vae();
  auto e1 = VideoVaeEncoder::random(*cpu, c, 41), e2 = VideoVaeEncoder::random(*cpu, c, 41);
  auto e3 = VideoVaeEncoder::random(*cpu, c, 42);
  const Rgb8Image frame = random_picture(48, 32, 5);
  const Tensor z1 = e1->encode_visual_condition(frame), z2 = e2->encode_visual_condition(frame);
  const Tensor z3 = e3->encode_visual_condition(frame);
  EXPECT_EQ(z1.shape(), (Shape{1, c.latent_channels, 1, 2, 3}));
  EXPECT_TRUE(finite_and_varied(z1));
  EXPECT_TRUE(same(z1, z2));
  EXPECT_FALSE(same(z1, z3));
  // The posterior's moments themselves vary (mean and log-variance channels), the log-variance within its clamp.
  const VideoVaePosterior p = e1->encode(imagenet_normalized_pixels(Rgb8Video{48, 32, 1, frame.rgb}));
  EXPECT_TRUE(finite_and_varied(p.mean));
  EXPECT_TRUE(finite_and_varied(p.logvar));
  // The released encoder half (encoder.* and quant_conv.*) in float32.
  EXPECT_NEAR(VideoVaeEncoder::weight_bytes(VideoVaeConfig{}) / 1e9, 0.72, 0.01);
}
