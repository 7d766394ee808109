// The pipeline's speed controls through h3::Engine on the tiny random-weight model (CPU): the render canvas (the
// model runs on it, the frames come back upscaled by libswscale's Lanczos, keyframes are placed on it), the
// native-256 RoPE rule and --reuse, each against the same engine with the control off.
#include <gtest/gtest.h>

extern "C" {
#include <libswscale/swscale.h>
}

#include "h3/h3.h"
#include "temp_dir.h"
#include "tensor/tensor.h"
#include "tools/tiny_model.h"

namespace h3 {
namespace {

// One tiny snapshot and one engine for the whole suite (making either is the slow part).
class SpeedEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("speed-controls");
    make_tiny_model(dir_->path() + "/model", 7);
    EngineOptions o;
    o.model_dir = dir_->path() + "/model";
    o.device = "cpu";
    engine_ = Engine::open(o).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete dir_;
  }

  static GenerationRequest request(int64_t w, int64_t h) {
    GenerationRequest r;
    r.prompt = "a red fox in fresh snow";
    r.width = w;
    r.height = h;
    r.frames = 22;
    r.steps = 3;
    r.seed = 11;
    return r;
  }

  // A generation with its final latents (on_latents) and its frame chunks (on_frames).
  struct Run {
    GenerationResult out;
    Tensor latents, audio_latents;
    std::vector<Shape> chunks;
    std::vector<bool> evaluated;
  };
  static Run generate(const GenerationRequest& r, bool decode = true) {
    Run run;
    GenerateCallbacks cb;
    cb.on_latents = [&](const Tensor& v, const Tensor& a) {
      run.latents = v.clone();
      run.audio_latents = a.clone();
      return decode;
    };
    cb.on_frames = [&](const Tensor& f, int64_t) { run.chunks.push_back(f.shape()); };
    cb.on_pass = [&](const PassProgress& p) { run.evaluated.push_back(p.evaluated); };
    run.out = engine_->generate(r, cb);
    return run;
  }

  static TempDir* dir_;
  static Engine* engine_;
};
TempDir* SpeedEngine::dir_ = nullptr;
Engine* SpeedEngine::engine_ = nullptr;

// Each channel plane of each frame through libswscale's Lanczos as a float grey image, called here on its own.
Tensor swscale_lanczos(const Tensor& frames, int width, int height) {
  const int n = static_cast<int>(frames.dim(1)), h = static_cast<int>(frames.dim(2));
  const int w = static_cast<int>(frames.dim(3));
  SwsContext* sws = sws_getContext(w, h, AV_PIX_FMT_GRAYF32, width, height, AV_PIX_FMT_GRAYF32,
                                   SWS_LANCZOS | SWS_ACCURATE_RND | SWS_BITEXACT, nullptr, nullptr, nullptr);
  EXPECT_NE(sws, nullptr);
  Tensor out = Tensor::empty({3, n, height, width}, DType::F32);
  for (int p = 0; p < 3 * n; ++p) {
    const uint8_t* src[4] = {reinterpret_cast<const uint8_t*>(frames.ptr<float>() + int64_t(p) * h * w)};
    uint8_t* dst[4] = {reinterpret_cast<uint8_t*>(out.ptr<float>() + int64_t(p) * height * width)};
    const int src_stride[4] = {w * 4}, dst_stride[4] = {width * 4};
    sws_scale(sws, src, src_stride, 0, h, dst, dst_stride);
  }
  sws_freeContext(sws);
  return out;
}

TEST_F(SpeedEngine, RenderCanvasRunsTheModelSmallAndUpscalesWithSwscaleLanczos) {
  // 128x64 output, 64x32 render canvas; the same request natively at 64x32 is what the model and the VAE compute.
  GenerationRequest small = request(128, 64);
  small.render_width = 64;
  small.render_height = 32;
  const Run rendered = generate(small);
  const Run native = generate(request(64, 32));
  ASSERT_EQ(rendered.out.video.shape(), (Shape{3, 22, 64, 128}));
  EXPECT_TRUE(rendered.out.request.renders_smaller());
  // The model ran on the render canvas: the same latents as the native 64x32 run, bit for bit.
  EXPECT_EQ(rendered.latents.shape(), native.latents.shape());
  EXPECT_EQ(max_abs_diff(rendered.latents, native.latents), 0.0);
  EXPECT_EQ(max_abs_diff(rendered.out.audio, native.out.audio), 0.0);
  // The frames are the native decode through libswscale's Lanczos (an independent call), and every chunk the frame
  // callback saw was already at the output size.
  EXPECT_EQ(max_abs_diff(rendered.out.video, swscale_lanczos(native.out.video, 128, 64)), 0.0);
  ASSERT_FALSE(rendered.chunks.empty());
  for (const Shape& s : rendered.chunks) {
    ASSERT_EQ(s.size(), 4u);
    EXPECT_EQ(s[2], 64);
    EXPECT_EQ(s[3], 128);
  }
  // The preview of a pass is upscaled the same way.
  const Tensor preview = engine_->preview_frame(rendered.latents, 128, 64);
  EXPECT_EQ(preview.shape(), (Shape{3, 1, 64, 128}));
  EXPECT_EQ(max_abs_diff(preview, swscale_lanczos(engine_->preview_frame(rendered.latents), 128, 64)), 0.0);
}

TEST_F(SpeedEngine, RenderCanvasEqualToTheOutputIsTheExactPath) {
  const Run plain = generate(request(64, 64));
  GenerationRequest same = request(64, 64);
  same.render_width = 64;
  same.render_height = 64;
  const Run explicit_same = generate(same);
  EXPECT_FALSE(explicit_same.out.request.renders_smaller());
  EXPECT_EQ(max_abs_diff(plain.out.video, explicit_same.out.video), 0.0);
  EXPECT_EQ(max_abs_diff(plain.out.audio, explicit_same.out.audio), 0.0);
}

TEST_F(SpeedEngine, KeyframesArePlacedOnTheRenderCanvas) {
  // fl2va on a 128x64 output rendered at 64x32 conditions exactly as fl2va natively at 64x32: the keyframe is put on
  // the canvas the model runs on.
  Rgb8Image picture;
  picture.width = 96;
  picture.height = 48;
  picture.rgb.resize(96 * 48 * 3);
  for (size_t i = 0; i < picture.rgb.size(); ++i) picture.rgb[i] = static_cast<uint8_t>((i * 37) % 251);
  GenerationRequest small = request(128, 64);
  small.render_width = 64;
  small.render_height = 32;
  small.first_frame = ImageInput::rgb8(picture);
  GenerationRequest native = request(64, 32);
  native.first_frame = small.first_frame;
  const Run a = generate(small, false), b = generate(native, false);
  EXPECT_FALSE(a.out.video.defined());  // stopped after the denoise: nothing decoded
  EXPECT_EQ(max_abs_diff(a.latents, b.latents), 0.0);
  // Without --width/--height the output canvas follows the keyframe (2:1 under the tiny canvas rule: 128x64) and
  // the render canvas is checked against it once resolved.
  GenerationRequest follows = small;
  follows.width.reset();
  follows.height.reset();
  const Run c = generate(follows, false);
  EXPECT_EQ(c.out.request.width, 128);
  EXPECT_EQ(c.out.request.render_width, 64);
  EXPECT_EQ(max_abs_diff(c.latents, b.latents), 0.0);
  follows.render_width = 64;
  follows.render_height = 64;
  try {
    engine_->validate(follows);
    ADD_FAILURE() << "a render canvas of another aspect than the keyframe's canvas was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must have the output canvas' aspect ratio (128x64), got 64x64"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(SpeedEngine, HalvedRopeAt256OnlyAndTheReferenceRopeRestoresIt) {
  GenerationRequest r = request(256, 256);
  r.frames = 5;
  r.steps = 2;
  GenerationRequest reference = r;
  reference.use_reference_rope = true;
  const Run halved = generate(r, false), released = generate(reference, false);
  EXPECT_GT(rel_l2(halved.latents, released.latents), 1e-4);  // the positions changed, so did the prediction
  // At any other canvas the flag changes nothing: the rule is off there.
  GenerationRequest other = request(256, 224);
  other.frames = 5;
  other.steps = 2;
  GenerationRequest other_reference = other;
  other_reference.use_reference_rope = true;
  EXPECT_EQ(max_abs_diff(generate(other, false).latents, generate(other_reference, false).latents), 0.0);
}

TEST_F(SpeedEngine, ReuseSkipsPassesAndReportsThem) {
  GenerationRequest r = request(64, 64);
  r.steps = 5;
  r.reuse = 2;
  const Run reused = generate(r, false);
  EXPECT_EQ(reused.evaluated, (std::vector<bool>{true, false, true, false, true}));
  EXPECT_EQ(reused.out.request.evaluated_passes, 3);
  r.reuse = 1;
  const Run exact = generate(r, false);
  EXPECT_EQ(exact.evaluated, std::vector<bool>(5, true));
  EXPECT_GT(rel_l2(reused.latents, exact.latents), 0.0);
  // Stopped after the denoise: the timings hold the denoise, nothing was decoded.
  EXPECT_EQ(exact.out.timings.back().phase, Phase::Denoise);
  EXPECT_FALSE(exact.out.video.defined());
}

}  // namespace
}  // namespace h3
