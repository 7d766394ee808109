// The Qwen3-VL vision path on the CUDA backend against the CPU backend (the f32 oracle), on the fixtures of
// tools/reference/fx_vision.py. Skips without a CUDA build or a GPU.
//
// Tolerances (relative L2 = ||cuda − cpu|| / ||cpu||), with the reason for each:
// - vision-shaped attention (head_dim 72, 2-D rotary from F32 tables on bf16 q/k, one window per image): q and k are
//   rounded to bf16 after the float32 rotation, P before P·V, the output once: 1e-2 with the cosine above 0.9999, as
//   for every attention shape (test_backend_cuda.cpp).
// - the tower: bf16 weights and activations through 4 blocks (8 residual roundings of ~1.1e-3 RMS relative each, the
//   branches' own, and the bf16 position table) and the mergers: 2e-2, cosine above 0.999.
// - the fl2va conditioner (tower + 52 bf16 layers): as the text-only conditioner (test_pipeline_cuda.cpp), 5e-2 with
//   the cosine above 0.998. The measured values are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/backend.h"
#include "vision_fixture.h"
#include "test_source_dir.h"
#include "util/scoped_env.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "io/safetensors.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/rope.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/vision_model.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"

using namespace h3;

#ifndef H3_HAVE_CUDA
TEST(QwenVisionCuda, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

namespace {

std::string fixture(const std::string& name) { return test_source_dir() + "/tests/fixtures/vision/" + name; }

Rgb8Image image_of(const Tensor& hwc) {
  Rgb8Image img;
  img.height = static_cast<int>(hwc.dim(0));
  img.width = static_cast<int>(hwc.dim(1));
  img.rgb.assign(hwc.ptr<uint8_t>(), hwc.ptr<uint8_t>() + hwc.numel());
  return img;
}

void expect_close(const Tensor& got, const Tensor& ref, double tol, double min_cos, const std::string& what) {
  const Tensor g = got.to(DType::F32), r = ref.to(DType::F32);
  ASSERT_EQ(g.shape(), r.shape()) << what;
  for (int64_t i = 0; i < g.numel(); ++i) ASSERT_TRUE(std::isfinite(g.ptr<float>()[i])) << what << " element " << i;
  const double e = rel_l2(g, r), c = cosine(g, r);
  std::printf("  %-40s rel_l2 %.2e  cosine %.6f\n", what.c_str(), e, c);
  EXPECT_LE(e, tol) << what;
  EXPECT_GE(c, min_cos) << what;
}

class QwenVisionCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device on this machine";
    if (!file_exists(fixture("fl2va.safetensors"))) GTEST_FAIL() << "missing fixture " << fixture("");
  }
};

// The fl2va_2 keyframes through the image processor (host).
QwenVisionInputs keyframe_inputs() {
  auto f = SafetensorsFile::open(fixture("fl2va.safetensors"));
  Component p;
  p.name = "processor";
  p.present = true;
  p.config_files = {fixture("processor/processor_config.json")};
  return prepare_images(load_image_processor_config(p), {image_of(f->tensor("fl2va_2_keyframe_0")),
                                                         image_of(f->tensor("fl2va_2_keyframe_1"))});
}

}  // namespace

// The released tower's attention shape (16 heads × 72, the whole head rotated by F32 tables) over the windows of three
// inputs of different sizes (one of two temporal blocks), on the default attention path and on the flash twin.
TEST_F(QwenVisionCuda, VisionAttentionMatchesCpu) {
  const std::vector<ImageGrid> grids = {{1, 12, 20}, {1, 8, 6}, {2, 4, 4}};
  const int H = 16, Dh = 72;
  int64_t R = 0;
  std::vector<int64_t> segments = {0};
  for (const ImageGrid& g : grids) {
    R += g.patches();
    for (int64_t t = 0; t < g.t; ++t) segments.push_back(segments.back() + g.h * g.w);
  }
  const RopeTables rope = vision_rope_tables(grids, 2, torch_rope_inv_freq(10000.0, Dh / 2));
  std::mt19937 g(7);
  std::normal_distribution<float> n(0.f, 1.f);
  Tensor qkv = Tensor::empty({R, 3 * H * Dh}, DType::F32);
  for (int64_t i = 0; i < qkv.numel(); ++i) qkv.ptr<float>()[i] = round_bf16(n(g));
  auto run = [&](Backend& be) {
    const DType dt = be.activation_dtype();
    Tensor x = be.upload(qkv, dt), out = be.empty({R, H * Dh}, dt);
    const Tensor cos = be.upload(rope.cos, DType::F32), sin = be.upload(rope.sin, DType::F32);
    AttentionSpec s;
    s.heads_q = s.heads_kv = H;
    s.head_dim = Dh;
    s.scale = 1.f / std::sqrt(static_cast<float>(Dh));
    s.rotary_dim = Dh;
    s.cos = &cos;
    s.sin = &sin;
    s.segments = segments;
    be.self_attention(x, s, out);
    return be.download(out).to(DType::F32);
  };
  auto cpu = make_cpu_backend();
  const Tensor want = run(*cpu);
  expect_close(run(*make_cuda_backend()), want, 1e-2, 0.9999, "vision attention (default path)");
  ScopedEnv off("H3_DISABLE_CUDNN_ATTENTION", "1");
  ScopedEnv off2("H3_DISABLE_HOPPER_ATTENTION", "1");
  expect_close(run(*make_cuda_backend()), want, 1e-2, 0.9999, "vision attention (flash twin)");
}

TEST_F(QwenVisionCuda, TowerMatchesCpu) {
  const QwenVisionInputs in = keyframe_inputs();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const VisionFeatures want = QwenVisionModel::load(*cpu, vision_fixture_text_encoder())->encode(in);
  const VisionFeatures got = QwenVisionModel::load(*gpu, vision_fixture_text_encoder())->encode(in);
  expect_close(gpu->download(got.embeds), cpu->download(want.embeds), 2e-2, 0.999, "tower output");
  ASSERT_EQ(got.deepstack.size(), want.deepstack.size());
  for (size_t k = 0; k < got.deepstack.size(); ++k)
    expect_close(gpu->download(got.deepstack[k]), cpu->download(want.deepstack[k]), 2e-2, 0.999,
                 cat("deepstack ", k));
}

TEST_F(QwenVisionCuda, Fl2vaHiddenStatesMatchCpu) {
  const QwenVisionInputs in = keyframe_inputs();
  const Tokenizer tok = Tokenizer::from_file(fixture("tokenizer"));
  const Presentation p = present_fl2va(tok, "a robot dancing", in.grids, 2);
  auto encode = [&](Backend& be) {
    const VisionFeatures vf = QwenVisionModel::load(be, vision_fixture_text_encoder())->encode(in);
    return QwenTextModel::load(be, vision_fixture_text_encoder())->encode(p.ids, &vf);
  };
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  expect_close(encode(*gpu), encode(*cpu), 5e-2, 0.998, "fl2va hidden_states[50]");
}

#endif
