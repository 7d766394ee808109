// The MiniMax-H3 video VAE encoder and the conditioning encode (spec/video_vae.md §6–§7.1): parity with the
// diffusers reference stage by stage on the fixtures of tests/fixtures/video_vae_encoder (tools/reference/
// fx_video_vae_encoder.py), the float16 step of the recipe exactly, the engine's own noise, both checkpoint layouts,
// the log-variance clamp, input validation, the weight and workspace accounting, and (with a GPU) the CUDA backend
// against the CPU one.
//
// Tolerances. The CPU backend computes in float32; the fixtures hold the reference's float64 run of the same model
// (`model.double()` on the same float32 pixels and draw). Up to the sample, every stage is held to 1e-5 relative L2
// of float64 (measured: ≤ 7e-7; the reference's own float32 run is 3e-7–8e-7 away). The float16 rounding that
// follows is discontinuous, so a float32 computation may land on another float16 value than the float64 one (the
// reference's own float32 run does so for 1 of the 560 values of frames22_tiles). The rounded latent is therefore
// compared element by element: it must equal the float64 sample rounded, or else be the float16 rounding of some
// value within 10× the reference's own float32-vs-float64 distance (the largest |sampled_f32 − sampled_f64| of the
// case) of the float64 sample.
// The normalization after it is exact arithmetic on the rounded value: where our rounding equals the reference's
// float32 one, our normalized latent must equal the pipeline's output bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "temp_dir.h"
#include "io/safetensors.h"
#include "media/video_frames.h"
#include "models/video_vae/encoder.h"
#include "models/video_vae/geometry.h"
#include "models/video_vae/weights.h"
#include "pipeline/rng.h"
#include "tensor/dtype.h"
#include "test_source_dir.h"
#include "util/error.h"
#include "util/scoped_env.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kCases = {"frame_one_tile", "frame_tiles", "frame_portrait_tiles", "frames22_tiles",
                                         "frames10_padded"};

std::string fixture_root() { return test_source_dir() + "/tests/fixtures/video_vae_encoder/"; }

struct Fixture {
  std::shared_ptr<SafetensorsFile> in, expected;
  Rgb8Video frames;
  Tensor eps;
  EncodeTileOptions tiles;

  Tensor f32(const std::string& name) const { return squeeze(expected->tensor(name).to(DType::F32)); }
  Tensor f64(const std::string& name) const { return squeeze(expected->tensor(name).to(DType::F64)); }
  // (1, C, F, h, w) → [C, F, h, w].
  static Tensor squeeze(const Tensor& t) {
    return t.ndim() == 5 ? t.reshape({t.dim(1), t.dim(2), t.dim(3), t.dim(4)}) : t;
  }
};

// The reference's (1, 3, F, H, W) uint8 pixels as interleaved RGB24 frames.
Rgb8Video rgb8_of(const Tensor& u8) {
  Rgb8Video v;
  v.frames = static_cast<int>(u8.dim(2));
  v.height = static_cast<int>(u8.dim(3));
  v.width = static_cast<int>(u8.dim(4));
  const int64_t plane = static_cast<int64_t>(v.height) * v.width;
  v.rgb.resize(static_cast<size_t>(v.frames) * v.frame_bytes());
  const uint8_t* src = u8.ptr<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t f = 0; f < v.frames; ++f)
      for (int64_t k = 0; k < plane; ++k) v.rgb[(f * plane + k) * 3 + c] = src[(c * v.frames + f) * plane + k];
  return v;
}

Fixture load_fixture(const std::string& name) {
  const std::string dir = fixture_root() + name;
  Fixture fx;
  fx.in = SafetensorsFile::open(dir + "/case.safetensors");
  fx.expected = SafetensorsFile::open(dir + "/expected.safetensors");
  fx.frames = rgb8_of(fx.in->tensor("pixels"));
  fx.eps = fx.in->tensor("eps").to(DType::F32);
  fx.tiles.tile = static_cast<int64_t>(fx.in->tensor("tile").at(0));
  fx.tiles.tile_overlap = static_cast<int64_t>(fx.in->tensor("tile_overlap").at(0));
  return fx;
}

Component fixture_vae() { return video_vae_component_at(fixture_root() + "vae"); }

bool have_fixtures() { return fs::exists(fixture_root() + "vae/config.json"); }

double rel_l2_f64(const Tensor& a, const Tensor& ref) {
  EXPECT_EQ(a.numel(), ref.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.ptr<double>()[i];
    num += (a.ptr<float>()[i] - r) * (a.ptr<float>()[i] - r);
    den += r * r;
  }
  return std::sqrt(num / den);
}

double max_abs_f32_f64(const Tensor& a, const Tensor& ref) {
  double m = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) m = std::max(m, std::abs(a.ptr<float>()[i] - ref.ptr<double>()[i]));
  return m;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The first spatial tile of the first clip of ImageNet-normalized pixels [3, F, H, W], as the reference's _encode
// and _encode_clip cut it (a stack padded to a whole clip by repeating its last frame).
Tensor first_tile(const Tensor& px, const VideoVaeConfig& c, const EncodeTileOptions& o) {
  const int64_t F = px.dim(1), H = px.dim(2), W = px.dim(3), s = c.spatial_ratio();
  const int64_t T = F == 1 ? 1 : c.clip_length;
  const int64_t th = split_tiles(H, o.tile, o.tile_overlap, s).length;
  const int64_t tw = split_tiles(W, o.tile, o.tile_overlap, s).length;
  Tensor t = Tensor::empty({3, T, th, tw}, DType::F32);
  for (int64_t ch = 0; ch < 3; ++ch)
    for (int64_t f = 0; f < T; ++f)
      for (int64_t y = 0; y < th; ++y)
        for (int64_t x = 0; x < tw; ++x)
          t.ptr<float>()[((ch * T + f) * th + y) * tw + x] =
              px.ptr<float>()[((ch * F + std::min(f, F - 1)) * H + y) * W + x];
  return t;
}

// A tensor source over the fixture's diffusers checkpoint with `edit` applied to the tensors it names.
VideoVaeTensorSource edited_source(const Checkpoint& ckpt, std::map<std::string, std::function<Tensor(Tensor)>> edits) {
  auto base = diffusers_video_vae_source(ckpt);
  return [base, edits](const std::string& name) {
    Tensor t = base(name).to(DType::F32);
    auto it = edits.find(name);
    return it == edits.end() ? t : it->second(t);
  };
}

// The error message of `fn`, or "" when it does not throw.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Parity with the reference

TEST(VideoVaeEncoderFixtures, StageByStageAgainstTheFloat64Reference) {
  ASSERT_TRUE(have_fixtures()) << "missing " << fixture_root() << " (made by tools/reference/fx_video_vae_encoder.py)";
  auto be = make_cpu_backend();
  auto enc = VideoVaeEncoder::load(*be, fixture_vae());
  const VideoVaeConfig& config = enc->config();
  for (const std::string& name : kCases) {
    SCOPED_TRACE(name);
    const Fixture fx = load_fixture(name);
    const Tensor pixels = imagenet_normalized_pixels(fx.frames);

    // The network on the first tile, untiled.
    const Tensor moments = enc->encode_tile(first_tile(pixels, config, fx.tiles));
    const Tensor moments_ref = fx.f64("tile0_moments_f64");
    ASSERT_EQ(moments.shape(), moments_ref.shape());
    EXPECT_LE(rel_l2_f64(moments, moments_ref), 1e-5) << "first tile's moments";

    // Tiles, clips, token drop and the posterior.
    const VideoVaePosterior posterior = enc->encode(pixels, fx.tiles);
    ASSERT_EQ(posterior.mean.shape(), fx.f64("mean_f64").shape());
    const double mean_err = rel_l2_f64(posterior.mean, fx.f64("mean_f64"));
    const double logvar_err = rel_l2_f64(posterior.logvar, fx.f64("logvar_f64"));
    EXPECT_LE(mean_err, 1e-5) << "posterior mean";
    EXPECT_LE(logvar_err, 1e-5) << "posterior log-variance";

    // The sample with the reference's draw.
    const VisualConditionStages st = sample_visual_condition(config, posterior, &fx.eps);
    const Tensor sampled_ref = fx.f64("sampled_f64");
    const double sample_err = rel_l2_f64(st.sampled, sampled_ref);
    EXPECT_LE(sample_err, 1e-5) << "sampled latent";

    // The float16 step (see the file comment).
    const Tensor rounded_ref = fx.f64("rounded_f64"), rounded_ref32 = fx.f32("rounded_f32");
    const double window = 10 * max_abs_f32_f64(fx.f32("sampled_f32"), sampled_ref);
    int64_t other_side = 0;
    for (int64_t i = 0; i < sampled_ref.numel(); ++i) {
      const float ours = st.rounded.ptr<float>()[i];
      const double exact = sampled_ref.ptr<double>()[i];
      if (ours == static_cast<float>(rounded_ref.ptr<double>()[i])) continue;
      ++other_side;
      // Some value within the window of the exact sample must round to ours (near 0 the float16 spacing is finer
      // than the window, so that may be more than one step away).
      const float lo = round_f16(static_cast<float>(exact - window));
      const float hi = round_f16(static_cast<float>(exact + window));
      EXPECT_TRUE(lo <= ours && ours <= hi) << "element " << i << ": " << ours << " is not the float16 rounding of a "
                                            << "value within " << window << " of " << exact;
    }
    // The normalized latent: exact wherever our rounding is the reference's float32 one.
    const Tensor pipeline = fx.f32("normalized_pipeline");
    int64_t differ = 0;
    for (int64_t i = 0; i < pipeline.numel(); ++i) {
      if (st.rounded.ptr<float>()[i] != rounded_ref32.ptr<float>()[i]) {
        ++differ;
        continue;
      }
      ASSERT_EQ(st.normalized.ptr<float>()[i], pipeline.ptr<float>()[i]) << "normalized element " << i;
    }

    // The public entry point: the same values, shaped (1, C, F, h, w).
    const Tensor latent = enc->encode_visual_condition(fx.frames, &fx.eps, fx.tiles);
    ASSERT_EQ(latent.shape(), fx.expected->tensor("normalized_pipeline").shape());
    EXPECT_TRUE(bitwise_equal(latent.reshape(st.normalized.shape()), st.normalized));
    std::printf("[ fixture  ] video_vae_encoder/%s: latent %s; rel L2 vs f64: mean %.2g, logvar %.2g, sample %.2g; "
                "float16 roundings off the f64 one %lld, off the reference's f32 one %lld of %lld\n",
                name.c_str(), shape_str(latent.shape()).c_str(), mean_err, logvar_err, sample_err,
                static_cast<long long>(other_side), static_cast<long long>(differ),
                static_cast<long long>(pipeline.numel()));
  }
}

TEST(VideoVaeEncoderFixtures, RecipeAfterTheSampleIsExact) {
  // On the reference's own float32 sample, the float16 round trip and the normalization reproduce its pipeline's
  // output bit for bit (the same IEEE operations in the same order).
  ASSERT_TRUE(have_fixtures());
  const VideoVaeConfig config = load_video_vae_config(fixture_vae());
  for (const std::string& name : kCases) {
    const Fixture fx = load_fixture(name);
    const VisualConditionStages st = round_and_normalize_condition(config, fx.f32("sampled_f32"));
    EXPECT_TRUE(bitwise_equal(st.rounded, fx.f32("rounded_f32"))) << name;
    EXPECT_TRUE(bitwise_equal(st.normalized, fx.f32("normalized_pipeline"))) << name;
  }
}

TEST(VideoVaeEncoderFixtures, ImageAndDefaultNoise) {
  ASSERT_TRUE(have_fixtures());
  auto be = make_cpu_backend();
  auto enc = VideoVaeEncoder::load(*be, fixture_vae());
  const Fixture fx = load_fixture("frame_tiles");
  // Without ε the engine draws NoiseStream(42) afresh for every condition (torch's generator is not reproduced).
  const Tensor a = enc->encode_visual_condition(fx.frames, nullptr, fx.tiles);
  const Tensor b = enc->encode_visual_condition(fx.frames, nullptr, fx.tiles);
  EXPECT_TRUE(bitwise_equal(a, b));
  const Tensor own = NoiseStream(kVisualConditionSeed).draw(a.shape());
  EXPECT_TRUE(bitwise_equal(a, enc->encode_visual_condition(fx.frames, &own, fx.tiles)));
  EXPECT_FALSE(bitwise_equal(a, enc->encode_visual_condition(fx.frames, &fx.eps, fx.tiles)));
  // An image is a one-frame video.
  const Rgb8Image image = frame_image(fx.frames, 0);
  EXPECT_TRUE(bitwise_equal(enc->encode_visual_condition(image, &fx.eps, fx.tiles),
                            enc->encode_visual_condition(fx.frames, &fx.eps, fx.tiles)));
}

TEST(VideoVaeEncoderFixtures, OriginalLayoutLoadsTheSameEncoder) {
  // The original release names (spec §11.2): encoder.down.{i}.block.{j}.* (nin_shortcut) and
  // encoder.down.{i}.downsample.conv.*.
  ASSERT_TRUE(have_fixtures());
  auto be = make_cpu_backend();
  const Component vae = fixture_vae();
  const VideoVaeConfig config = load_video_vae_config(vae);
  const Checkpoint diffusers = Checkpoint::open(vae.weights);
  std::vector<NamedTensor> renamed;
  for (const std::string& name : diffusers.names()) {
    if (!name.starts_with("encoder.") && !name.starts_with("quant_conv.")) continue;
    std::string n = name;
    auto swap = [&n](const std::string& from, const std::string& to) {
      const size_t at = n.find(from);
      if (at != std::string::npos) n.replace(at, from.size(), to);
    };
    swap("encoder.down_blocks.", "encoder.down.");
    swap(".resnets.", ".block.");
    swap(".conv_shortcut.", ".nin_shortcut.");
    swap(".downsamplers.0.", ".downsample.");
    renamed.push_back({n, diffusers.get(name).clone()});
  }
  TempDir dir("venc");
  write_safetensors(dir / "model.safetensors", renamed);
  const Checkpoint original = Checkpoint::open(dir / "model.safetensors");
  EXPECT_FALSE(original.has("encoder.down_blocks.0.resnets.0.conv1.weight"));
  auto from_original = VideoVaeEncoder::create(*be, config, original_video_vae_source(original, config));
  auto from_diffusers = VideoVaeEncoder::create(*be, config, diffusers_video_vae_source(diffusers));
  const Fixture fx = load_fixture("frames22_tiles");
  const Tensor px = imagenet_normalized_pixels(fx.frames);
  const VideoVaePosterior a = from_original->encode(px, fx.tiles), b = from_diffusers->encode(px, fx.tiles);
  EXPECT_TRUE(bitwise_equal(a.mean, b.mean));
  EXPECT_TRUE(bitwise_equal(a.logvar, b.logvar));
}

TEST(VideoVaeEncoderFixtures, LogVarianceIsClamped) {
  ASSERT_TRUE(have_fixtures());
  auto be = make_cpu_backend();
  const Component vae = fixture_vae();
  const VideoVaeConfig config = load_video_vae_config(vae);
  const Checkpoint ckpt = Checkpoint::open(vae.weights);
  const Fixture fx = load_fixture("frame_one_tile");
  const Tensor px = imagenet_normalized_pixels(fx.frames);
  const VideoVaePosterior plain = VideoVaeEncoder::create(*be, config, diffusers_video_vae_source(ckpt))->encode(px);
  const int64_t C = config.latent_channels;
  for (float shift : {1000.f, -1000.f}) {
    // quant_conv's bias moved far out on the log-variance channels [C, 2C) only.
    auto shifted = edited_source(ckpt, {{"quant_conv.bias", [&](Tensor b) {
                                           for (int64_t c = C; c < 2 * C; ++c) b.ptr<float>()[c] += shift;
                                           return b;
                                         }}});
    const VideoVaePosterior p = VideoVaeEncoder::create(*be, config, shifted)->encode(px);
    EXPECT_TRUE(bitwise_equal(p.mean, plain.mean));
    const float bound = shift > 0 ? kPosteriorLogvarMax : kPosteriorLogvarMin;
    for (int64_t i = 0; i < p.logvar.numel(); ++i) ASSERT_EQ(p.logvar.ptr<float>()[i], bound);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Geometry, validation, accounting

TEST(VideoVaeEncoder, LatentFramesFollowTheClipRule) {
  // spec §5: one frame → 1 latent; F > 1 → 5·ceil(F/17) − 3.
  ASSERT_TRUE(have_fixtures());
  auto be = make_cpu_backend();
  auto enc = VideoVaeEncoder::load(*be, fixture_vae());
  for (auto [frames, latents] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {2, 2}, {10, 2}, {17, 2}, {18, 7}, {22, 7}, {39, 12}, {124, 37}, {345, 102}})
    EXPECT_EQ(enc->latent_frames(frames), latents) << frames << " frames";
}

TEST(VideoVaeEncoder, RejectsBadInputsWithOneSentence) {
  VideoVaeConfig c;  // the release: spatial ratio 16
  c.latents_mean.assign(c.latent_channels, 0.0);
  c.latents_std.assign(c.latent_channels, 1.0);
  const EncodeTileOptions ok;
  EXPECT_EQ(error_of([&] { validate_video_vae_encode(c, 1, 768, 1344, ok); }), "");
  EXPECT_EQ(error_of([&] { validate_video_vae_encode(c, 124, 480, 864, ok); }), "");
  EXPECT_NE(error_of([&] { validate_video_vae_encode(c, 0, 256, 256, ok); }).find("at least one frame"),
            std::string::npos);
  for (auto [h, w] : std::vector<std::pair<int64_t, int64_t>>{{250, 256}, {256, 40}, {16, 256}}) {
    const std::string e = error_of([&] { validate_video_vae_encode(c, 1, h, w, ok); });
    EXPECT_NE(e.find("multiple of 16 px and at least 32 px"), std::string::npos) << h << "x" << w << ": " << e;
  }
  EncodeTileOptions bad = ok;
  bad.tile = 200;
  EXPECT_NE(error_of([&] { validate_video_vae_encode(c, 1, 256, 256, bad); }).find("tile size"), std::string::npos);
  bad.tile = 16;
  EXPECT_NE(error_of([&] { validate_video_vae_encode(c, 1, 256, 256, bad); }).find("at least 32"), std::string::npos);
  bad = ok;
  bad.tile_overlap = 256;
  EXPECT_NE(error_of([&] { validate_video_vae_encode(c, 1, 512, 512, bad); }).find("tile overlap"), std::string::npos);
  bad.tile_overlap = 40;
  EXPECT_NE(error_of([&] { validate_video_vae_encode(c, 1, 512, 512, bad); }).find("tile overlap"), std::string::npos);

  // Inputs of the encoder itself: bytes that do not match the stated size, a wrong ε, a canvas off the grid.
  ASSERT_TRUE(have_fixtures());
  auto be = make_cpu_backend();
  auto enc = VideoVaeEncoder::load(*be, fixture_vae());
  const Fixture fx = load_fixture("frame_one_tile");
  Rgb8Video short_by_one = fx.frames;
  short_by_one.rgb.pop_back();
  EXPECT_NE(error_of([&] { enc->encode_visual_condition(short_by_one); }).find("RGB24"), std::string::npos);
  const Tensor eps = Tensor::zeros({1, 4, 1, 3, 5}, DType::F32);
  EXPECT_NE(error_of([&] { enc->encode_visual_condition(fx.frames, &eps); }).find("eps must"), std::string::npos);
  Rgb8Video off_grid = fx.frames;
  off_grid.width = 20;  // 24 x 20 px, 1440 bytes: the ratio is 8
  off_grid.rgb.resize(off_grid.frame_bytes());
  EXPECT_NE(error_of([&] { enc->encode_visual_condition(off_grid); }).find("multiple of 8"), std::string::npos);
  EXPECT_NE(error_of([&] { enc->encode(Tensor::zeros({3, 1, 24, 32}, DType::BF16)); }).find("host F32"),
            std::string::npos);
}

TEST(VideoVaeEncoder, RejectsUnsupportedConfigurations) {
  ASSERT_TRUE(have_fixtures());
  auto be = make_cpu_backend();
  const Component vae = fixture_vae();
  const VideoVaeConfig good = load_video_vae_config(vae);
  const Checkpoint ckpt = Checkpoint::open(vae.weights);
  auto attempt = [&](const VideoVaeConfig& c) {
    return error_of([&] { VideoVaeEncoder::create(*be, c, diffusers_video_vae_source(ckpt)); });
  };
  EXPECT_EQ(attempt(good), "");
  VideoVaeConfig c = good;
  c.norm_num_groups = 3;
  EXPECT_NE(attempt(c).find("multiple of norm_num_groups"), std::string::npos);
  c = good;
  c.spatial_downsample_factors[1] = 1;  // temporal 2 without a spatial stride
  EXPECT_NE(attempt(c).find("downsample factors"), std::string::npos);
  c = good;
  c.spatial_padding_mode = "circular";
  EXPECT_NE(attempt(c).find("spatial_padding_mode"), std::string::npos);
  c = good;
  c.block_out_channels[3] = 8;  // the checkpoint's tensors no longer fit
  EXPECT_NE(attempt(c).find("has shape"), std::string::npos);
}

TEST(VideoVaeEncoder, WeightAndWorkspaceBytes) {
  // The release's encoder: 180,335,536 parameters + quant_conv's 2,352 (spec §6.2), float32.
  VideoVaeConfig release;
  release.latents_mean.assign(release.latent_channels, 0.0);
  release.latents_std.assign(release.latent_channels, 1.0);
  EXPECT_EQ(VideoVaeEncoder::weight_bytes(release), uint64_t(180335536 + 2352) * 4);
  if (have_fixtures()) {  // the fixture checkpoint's encoder tensors, counted from the file
    const Checkpoint ckpt = Checkpoint::open(fixture_vae().weights);
    uint64_t bytes = 0;
    for (const std::string& n : ckpt.names())
      if (n.starts_with("encoder.") || n.starts_with("quant_conv.")) bytes += ckpt.get(n).nbytes();
    EXPECT_EQ(VideoVaeEncoder::weight_bytes(load_video_vae_config(fixture_vae())), bytes);
  }
  // One tile's forward bounds the workspace: a keyframe of any size costs what one 256 x 256 tile does; a stack
  // costs a 17-frame tile. Level 0 of a 17-frame tile alone holds 128 x 17 x 256 x 256 float32 (570 MB) per
  // activation, and a ResNet block keeps three of them plus a padded copy alive.
  const uint64_t frame = VideoVaeEncoder::encode_workspace_bytes(release, 1, 256, 256);
  EXPECT_EQ(VideoVaeEncoder::encode_workspace_bytes(release, 1, 768, 1344), frame);
  const uint64_t stack = VideoVaeEncoder::encode_workspace_bytes(release, 124, 768, 1344);
  const uint64_t level0 = uint64_t(128) * 17 * 256 * 256 * 4;
  EXPECT_GE(stack, 3 * level0 + uint64_t(128) * 19 * 258 * 258 * 4);
  EXPECT_LE(stack, 5 * level0);
  EXPECT_LT(frame * 5, stack);
  std::printf("[ memory   ] release encoder: weights %.1f MB; workspace %.1f MB (one frame), %.1f MB (stack)\n",
              VideoVaeEncoder::weight_bytes(release) / 1e6, frame / 1e6, stack / 1e6);
}

// ---------------------------------------------------------------------------------------------------------------
// CUDA against the CPU backend

#ifndef H3_HAVE_CUDA
TEST(VideoVaeEncoderCuda, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

TEST(VideoVaeEncoderCuda, MatchesTheCpuBackend) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device on this machine";
  ASSERT_TRUE(have_fixtures());
  auto cpu = make_cpu_backend();
  auto tf32 = make_cuda_backend();
  std::unique_ptr<Backend> f32;
  {
    ScopedEnv off("H3_DISABLE_TF32_CONV", "1");
    f32 = make_cuda_backend();
  }
  // The keyframe convolutions' twins (the whole kernel over the zero frames; channels-first).
  std::unique_ptr<Backend> unsliced, nchw;
  {
    ScopedEnv off("H3_DISABLE_KEYFRAME_CONV_SLICE", "1");
    unsliced = make_cuda_backend();
  }
  {
    ScopedEnv off("H3_DISABLE_CHANNELS_LAST_CONV3D", "1");
    nchw = make_cuda_backend();
  }
  auto ref = VideoVaeEncoder::load(*cpu, fixture_vae());
  // The f32 twin differs from the CPU only in summation order: 1e-5. TF32 convolutions (the reference's default
  // numerics on a GPU) keep 10 mantissa bits per operand, ~6e-4 relative error per convolution; ~20 of them in series
  // (each GroupNorm renormalizes, so errors add rather than multiply): 1e-2.
  for (auto [be, tol] : {std::pair<Backend*, double>{f32.get(), 1e-5}, {tf32.get(), 1e-2}, {unsliced.get(), 1e-2},
                         {nchw.get(), 1e-2}}) {
    auto enc = VideoVaeEncoder::load(*be, fixture_vae());
    for (const std::string& name : {std::string("frame_tiles"), std::string("frames22_tiles")}) {
      const Fixture fx = load_fixture(name);
      const Tensor px = imagenet_normalized_pixels(fx.frames);
      const VideoVaePosterior want = ref->encode(px, fx.tiles), got = enc->encode(px, fx.tiles);
      EXPECT_LE(rel_l2(got.mean, want.mean), tol) << name << (be == f32.get() ? " f32" : " tf32");
      EXPECT_LE(rel_l2(got.logvar, want.logvar), tol) << name << (be == f32.get() ? " f32" : " tf32");
    }
  }
}

#endif
