// The Qwen3-VL vision path of the conditioner (spec/conditioner.md §3.3, §5, §6, §7): image processor settings,
// smart_resize, torchvision's uint8 resize, patch rows, the vision tower, the fl2va presentation, the multimodal
// positions and the layer-50 hidden states, against the transformers / diffusers fixtures of
// tools/reference/fx_vision.py (tests/fixtures/vision) and against rules that hold without them.
//
// Tolerances: the processor is bit-exact (the port reproduces torchvision's integer resize and the reference's float32
// normalization). The tower and the conditioner run in float32 on the CPU backend; their summation orders differ from
// the reference's, which over 4 blocks / 52 layers stays near 1e-6 relative (printed), so 1e-5 relative L2 (the
// fixture acceptance bound, against the float64 reference too) catches any layout or formula mistake (those show at
// 1e-2 or more).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "util/scoped_env.h"
#include "vision_fixture.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "media/torch_resize.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/rope.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/vision_model.h"
#include "test_source_dir.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"

using namespace h3;

namespace {

std::string fixture(const std::string& name) { return test_source_dir() + "/tests/fixtures/vision/" + name; }

std::shared_ptr<SafetensorsFile> open_fixture(const std::string& file) {
  const std::string path = fixture(file);
  if (!file_exists(path)) return nullptr;
  return SafetensorsFile::open(path);
}

#define REQUIRE_FIXTURE(f) \
  if (!(f)) GTEST_FAIL() << "missing fixture under " << fixture("") << " (made by tools/reference/fx_vision.py)"

Rgb8Image image_of(const Tensor& hwc) {  // U8 [H, W, 3]
  EXPECT_EQ(hwc.dtype(), DType::U8);
  EXPECT_EQ(hwc.ndim(), 3);
  Rgb8Image img;
  img.height = static_cast<int>(hwc.dim(0));
  img.width = static_cast<int>(hwc.dim(1));
  img.rgb.assign(hwc.ptr<uint8_t>(), hwc.ptr<uint8_t>() + hwc.numel());
  return img;
}

std::vector<int32_t> ids_of(const Tensor& t) {
  const Tensor v = t.to(DType::I64);
  return std::vector<int32_t>(v.ptr<int64_t>(), v.ptr<int64_t>() + v.numel());
}

ImageProcessorConfig fixture_processor() {
  Component c;
  c.name = "processor";
  c.present = true;
  c.dir = fixture("processor");
  c.config_files = {fixture("processor/processor_config.json")};
  return load_image_processor_config(c);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.dim(0);
  Tensor out = Tensor::empty({rows, parts.front().dim(1)}, DType::F32);
  char* dst = static_cast<char*>(out.data());
  for (const Tensor& p : parts) {
    const Tensor f = p.to(DType::F32);
    std::memcpy(dst, f.data(), f.nbytes());
    dst += f.nbytes();
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Processor settings (layout.md §2.4): both layouts, the older min/max_pixels keys, the reference class's defaults for
// absent keys, and one clear sentence for what h3 does not implement.
TEST(QwenImageProcessorConfig, ReadsBothLayoutsAndTheReferenceDefaults) {
  const nlohmann::json nested = parse_json_file(fixture("processor/processor_config.json"));
  const ImageProcessorConfig a = parse_image_processor_config(nested, "processor_config.json");
  EXPECT_EQ(a.patch_size, 8);
  EXPECT_EQ(a.temporal_patch_size, 2);
  EXPECT_EQ(a.merge_size, 2);
  EXPECT_EQ(a.min_pixels, 1024);
  EXPECT_EQ(a.max_pixels, 4096);
  EXPECT_EQ(a.image_mean, (std::vector<double>{0.48145466, 0.4578275, 0.40821073}));
  EXPECT_EQ(a.image_std, (std::vector<double>{0.26862954, 0.26130258, 0.27577711}));
  EXPECT_EQ(a.rescale_factor, 0.00392156862745098);
  EXPECT_EQ(a.factor(), 16);
  // The flat preprocessor_config.json of older transformers: the same object at the top level.
  const ImageProcessorConfig b = parse_image_processor_config(nested.at("image_processor"), "preprocessor_config.json");
  EXPECT_EQ(b.min_pixels, a.min_pixels);
  EXPECT_EQ(b.max_pixels, a.max_pixels);
  EXPECT_EQ(b.image_mean, a.image_mean);
  // min_pixels / max_pixels override size (the reference's backward compatibility).
  const ImageProcessorConfig c = parse_image_processor_config(
      {{"min_pixels", 3136}, {"max_pixels", 12845056}, {"size", {{"shortest_edge", 1}, {"longest_edge", 2}}}}, "x");
  EXPECT_EQ(c.min_pixels, 3136);
  EXPECT_EQ(c.max_pixels, 12845056);
  // Absent keys: Qwen2VLImageProcessor's class defaults (patch 14, CLIP statistics, 56² .. 28²·1280 pixels).
  const ImageProcessorConfig d = parse_image_processor_config(nlohmann::json::object(), "x");
  EXPECT_EQ(d.patch_size, 14);
  EXPECT_EQ(d.min_pixels, 56 * 56);
  EXPECT_EQ(d.max_pixels, 28 * 28 * 1280);
  EXPECT_EQ(d.image_mean[0], 0.48145466);

  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {{{"resample", 2}}, "resample 2 is not supported"},
      {{{"image_mean", {0.5, 0.5}}}, "image_mean and image_std must have 3 entries"},
      {{{"image_std", {0.5, 0.0, 0.5}}}, "every image_std entry must be positive"},
      {{{"do_resize", false}}, "do_resize=false is not supported"},
      {{{"image_processor_type", "SiglipImageProcessor"}}, "image_processor_type 'SiglipImageProcessor'"},
      {{{"size", {{"shortest_edge", 100}, {"longest_edge", 99}}}}, "must be at least size.shortest_edge"},
      {{{"patch_size", 0}}, "patch_size"},
  };
  for (const auto& [j, message] : bad) {
    const std::string e = error_of([&] { parse_image_processor_config(j, "processor_config.json"); });
    EXPECT_NE(e.find(message), std::string::npos) << e;
    EXPECT_EQ(e.rfind("processor_config.json", 0), 0u) << e;
  }
}

// transformers' smart_resize, evaluated in Python for these inputs: both branches, ties rounded to even
// (40/16 = 2.5 -> 2, 56/16 = 3.5 -> 4), beta < 1 in the max-pixels branch, and the release's own cases (§5.2).
TEST(QwenImageProcessor, SmartResizeMatchesPython) {
  struct Case {
    int64_t h, w, factor, min_px, max_px, want_h, want_w;
  };
  const Case cases[] = {
      {40, 56, 16, 1024, 4096, 32, 64},     {24, 20, 16, 1024, 4096, 48, 32},
      {80, 70, 16, 1024, 4096, 64, 48},     {48, 48, 16, 1024, 4096, 48, 48},
      {32, 50, 16, 1024, 4096, 32, 48},     {150, 24, 16, 1024, 4096, 160, 16},
      {17, 123, 16, 1024, 4096, 16, 128},   {32, 24, 16, 1024, 4096, 32, 32},
      {32, 32, 32, 65536, 16777216, 256, 256},  // a 32x32 test canvas (§5.2)
      {768, 1344, 32, 65536, 16777216, 768, 1344},
      {2048, 8192, 32, 65536, 16777216, 2048, 8192},  // exactly at the cap
      {2048, 3648, 32, 65536, 16777216, 2048, 3648},
  };
  for (const Case& c : cases) {
    const auto [h, w] = smart_resize(c.h, c.w, c.factor, c.min_px, c.max_px);
    EXPECT_EQ(h, c.want_h) << c.h << "x" << c.w;
    EXPECT_EQ(w, c.want_w) << c.h << "x" << c.w;
  }
  EXPECT_NE(error_of([] { smart_resize(1, 201, 16, 1024, 4096); }).find("aspect ratio must be at most 200"),
            std::string::npos);
  EXPECT_EQ(smart_resize(1, 200, 16, 1024, 4096).first % 16, 0);
  EXPECT_NE(error_of([] { smart_resize(0, 5, 16, 1024, 4096); }).find("at least 1x1"), std::string::npos);
}

// torchvision.transforms.v2.functional.resize(uint8 CHW, size, BICUBIC, antialias=True) on the CPU, bit for bit:
// strong down- and upscaling, one axis only, a 1-pixel-high source, and every processor case's resize.
TEST(TorchResize, MatchesTorchvisionBitForBit) {
  auto f = open_fixture("processor.safetensors");
  REQUIRE_FIXTURE(f);
  int cases = 0;
  for (int k = 0; f->find(cat("resize_in_", k)); ++k, ++cases) {
    const Rgb8Image in = image_of(f->tensor(cat("resize_in_", k)));
    const Rgb8Image want = image_of(f->tensor(cat("resize_out_", k)));
    const Rgb8Image got = resize_bicubic_antialiased(in, want.width, want.height);
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.height, want.height);
    EXPECT_EQ(got.rgb, want.rgb) << in.width << "x" << in.height << " -> " << want.width << "x" << want.height;
  }
  for (int k = 0; f->find(cat("image_", k)); ++k, ++cases) {
    const Rgb8Image in = image_of(f->tensor(cat("image_", k)));
    const Rgb8Image want = image_of(f->tensor(cat("resized_", k)));
    EXPECT_EQ(resize_bicubic_antialiased(in, want.width, want.height).rgb, want.rgb) << "processor case " << k;
  }
  EXPECT_GE(cases, 10);
  // The clamps are reached (noise makes the bicubic overshoot), so the rounding and clamping paths are exercised.
  const Rgb8Image big = image_of(f->tensor("resize_in_1"));
  const Rgb8Image up = resize_bicubic_antialiased(big, 31, 40);
  EXPECT_NE(std::count(up.rgb.begin(), up.rgb.end(), 0) + std::count(up.rgb.begin(), up.rgb.end(), 255), 0);
  EXPECT_THROW(resize_bicubic_antialiased(big, 0, 3), Error);
}

// pixel_values and image_grid_thw of transformers' Qwen2VLImageProcessor (torchvision backend, as
// Qwen3VLProcessor.from_pretrained loads it): bit for bit, one image per call and several in one call.
TEST(QwenImageProcessor, PixelValuesMatchTransformersBitForBit) {
  auto f = open_fixture("processor.safetensors");
  REQUIRE_FIXTURE(f);
  const nlohmann::json cases = parse_json_file(fixture("cases.json"));
  EXPECT_EQ(cases.at("image_processor_loaded").at("backend"), "torchvision");
  const ImageProcessorConfig config = fixture_processor();
  std::vector<Rgb8Image> with_pixels;
  std::vector<Tensor> want_pixels;
  int k = 0;
  for (; f->find(cat("image_", k)); ++k) {
    const Rgb8Image img = image_of(f->tensor(cat("image_", k)));
    const QwenVisionInputs in = prepare_images(config, {img});
    ASSERT_EQ(in.grids.size(), 1u);
    EXPECT_EQ(in.grids[0], grids_of(f->tensor(cat("grid_", k)))[0]) << "case " << k;
    if (f->find(cat("pixel_values_", k))) {
      EXPECT_TRUE(bit_equal(in.pixel_values, f->tensor(cat("pixel_values_", k)))) << "case " << k;
      with_pixels.push_back(img);
      want_pixels.push_back(f->tensor(cat("pixel_values_", k)));
    }
  }
  EXPECT_GE(k, 7);
  ASSERT_GE(with_pixels.size(), 2u);
  const QwenVisionInputs both = prepare_images(config, with_pixels);
  EXPECT_TRUE(bit_equal(both.pixel_values, concat_rows(want_pixels)));
  EXPECT_NE(error_of([&] { prepare_images(config, {}); }).find("at least one image"), std::string::npos);
  Rgb8Image broken = with_pixels[0];
  broken.rgb.pop_back();
  EXPECT_NE(error_of([&] { prepare_images(config, {broken}); }).find("image 1 must be"), std::string::npos);
}

// The row layout of §5.1.5 checked on its own: with mean 0 and std = rescale_factor the normalized value is the
// pixel itself, and every pixel is coded by its position, so each value names where it came from.
TEST(QwenImageProcessor, PatchRowsFollowTheSpecLayout) {
  ImageProcessorConfig c;
  c.patch_size = 2;
  c.temporal_patch_size = 3;
  c.merge_size = 2;
  c.min_pixels = 16;
  c.max_pixels = 1 << 20;
  c.image_mean = {0, 0, 0};
  c.image_std = {c.rescale_factor, c.rescale_factor, c.rescale_factor};
  Rgb8Image img;
  img.width = 8;
  img.height = 4;  // a multiple of patch · merge on both axes: not resized
  img.rgb.resize(8 * 4 * 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 8; ++x)
      for (int ch = 0; ch < 3; ++ch) img.rgb[(y * 8 + x) * 3 + ch] = static_cast<uint8_t>(100 * ch + 10 * y + x);
  const QwenVisionInputs in = prepare_images(c, {img});
  ASSERT_EQ(in.grids, (std::vector<ImageGrid>{{1, 2, 4}}));
  const int64_t p = 2, m = 2, tp = 3, row = 3 * tp * p * p;
  ASSERT_EQ(in.pixel_values.shape(), (Shape{8, row}));
  const float* v = in.pixel_values.ptr<float>();
  int64_t r = 0;
  for (int64_t bh = 0; bh < 1; ++bh)
    for (int64_t bw = 0; bw < 2; ++bw)
      for (int64_t mh = 0; mh < m; ++mh)
        for (int64_t mw = 0; mw < m; ++mw, ++r)
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t t = 0; t < tp; ++t)
              for (int64_t py = 0; py < p; ++py)
                for (int64_t px = 0; px < p; ++px) {
                  const int64_t y = p * (m * bh + mh) + py, x = p * (m * bw + mw) + px;
                  EXPECT_EQ(v[r * row + ((ch * tp + t) * p + py) * p + px], 100 * ch + 10 * y + x)
                      << "row " << r << " c " << ch << " t " << t << " y " << py << " x " << px;
                }
}

// ---------------------------------------------------------------------------------------------------------------
// torch.linspace(0, end, n) in float32 (the interpolation's sample points, §6.2) bit for bit, for the release's 48x48
// table (end 47) up to n = 512 and the fixture's 6x6 table.
TEST(QwenVisionRope, LinspaceMatchesTorchBitForBit) {
  auto f = open_fixture("processor.safetensors");
  REQUIRE_FIXTURE(f);
  for (int end : {47, 5}) {
    const Tensor values = f->tensor(cat("linspace_", end)), counts = f->tensor(cat("linspace_", end, "_counts"));
    int64_t at = 0;
    for (int64_t i = 0; i < counts.numel(); ++i) {
      const int64_t n = counts.ptr<int64_t>()[i];
      const std::vector<float> got = torch_linspace(0.f, static_cast<float>(end), n);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(got[j], values.ptr<float>()[at + j]) << "linspace(0, " << end << ", " << n << ")[" << j << "]";
      at += n;
    }
    EXPECT_EQ(at, values.numel());
  }
}

// The bilinear resampling's orientation and row order on a table that is linear in the position: p(y, x) = 2y + x on
// a 2x2 table interpolates exactly (up to float32 rounding) to 2·y_i + x_j, rows in merge-block order, repeated per
// temporal block; in bf16 every value is a bf16 value.
TEST(QwenVisionRope, PositionEmbeddingInterpolatesInMergeBlockOrder) {
  const Tensor table = Tensor::from_f32({4, 1}, {0.f, 1.f, 2.f, 3.f});
  const std::vector<ImageGrid> grids = {{2, 4, 6}};
  const Tensor pe = interpolate_position_embedding(table, grids, 2, DType::F32);
  ASSERT_EQ(pe.shape(), (Shape{48, 1}));
  const std::vector<float> ys = torch_linspace(0.f, 1.f, 4), xs = torch_linspace(0.f, 1.f, 6);
  int64_t r = 0;
  for (int t = 0; t < 2; ++t)
    for (int bh = 0; bh < 2; ++bh)
      for (int bw = 0; bw < 3; ++bw)
        for (int mh = 0; mh < 2; ++mh)
          for (int mw = 0; mw < 2; ++mw, ++r)
            EXPECT_NEAR(pe.ptr<float>()[r], 2 * ys[2 * bh + mh] + xs[2 * bw + mw], 1e-6) << "row " << r;
  const Tensor half = interpolate_position_embedding(table, grids, 2, DType::BF16);
  for (int64_t i = 0; i < half.numel(); ++i) EXPECT_EQ(half.ptr<float>()[i], round_bf16(half.ptr<float>()[i]));
  EXPECT_LT(max_abs_diff(half, pe), 2e-2);  // bf16 rounding of values up to 3
}

// The worked fl2va example of §7.4: two 768x1344 keyframes (merge 2: 24 x 42 tokens each) behind 6-token labels.
TEST(QwenVisionRope, MultimodalPositionsFollowTheSpecExample) {
  constexpr int32_t kPad = 9, kText = 1;
  std::vector<int32_t> ids;
  auto text = [&](int n) { ids.insert(ids.end(), n, kText); };
  text(6 + 1);  // label, vision_start
  ids.insert(ids.end(), 1008, kPad);
  text(1 + 6 + 1);  // vision_end, label, vision_start
  ids.insert(ids.end(), 1008, kPad);
  text(1 + 3);  // vision_end, prompt
  const std::vector<ImageGrid> grids = {{1, 48, 84}, {1, 48, 84}};
  const MropePositions p = multimodal_positions(ids, kPad, grids, 2);
  ASSERT_EQ(p.size(), 2035);
  for (int i = 0; i <= 6; ++i) EXPECT_EQ(p.t[i], i);
  EXPECT_EQ(p.t[7], 7);
  EXPECT_EQ(p.h[7], 7);
  EXPECT_EQ(p.w[7], 7);
  EXPECT_EQ(p.h[7 + 1007], 30);  // the last token of image 1: row 23, column 41
  EXPECT_EQ(p.w[7 + 1007], 48);
  EXPECT_EQ(p.t[7 + 1007], 7);
  EXPECT_EQ(p.t[1015], 49);  // vision_end
  EXPECT_EQ(p.h[1015], 49);
  EXPECT_EQ(p.t[1022], 56);  // vision_start of image 2
  EXPECT_EQ(p.t[1023], 57);
  EXPECT_EQ(p.h[1023 + 1007], 80);
  EXPECT_EQ(p.w[1023 + 1007], 98);
  EXPECT_EQ(p.t[2031], 99);  // vision_end
  EXPECT_EQ(p.w[2032], 100);  // the prompt
  EXPECT_EQ(p.t[2034], 102);

  EXPECT_NE(error_of([&] { multimodal_positions(ids, kPad, {grids[0]}, 2); }).find("more image-pad runs"),
            std::string::npos);
  EXPECT_NE(error_of([&] { multimodal_positions(ids, kPad, {grids[0], {1, 48, 82}}, 2); }).find("its run of image pads"),
            std::string::npos);
  EXPECT_NE(error_of([&] { multimodal_positions(ids, kPad, {grids[0], grids[0], grids[0]}, 2); })
                .find("2 image-pad run(s) for 3 image(s)"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
namespace {

struct TowerCase {
  std::string name;
  QwenVisionInputs inputs;
};

std::vector<TowerCase> tower_cases(const SafetensorsFile& processor, const SafetensorsFile& tower) {
  TowerCase images{"images", {}};
  images.inputs.pixel_values = concat_rows({processor.tensor("pixel_values_0"), processor.tensor("pixel_values_1")});
  images.inputs.grids = grids_of(tower.tensor("images_grid"));
  TowerCase video{"video", {}};
  video.inputs.pixel_values = tower.tensor("video_pixel_values").to(DType::F32);
  video.inputs.grids = grids_of(tower.tensor("video_grid"));
  return {images, video};
}

}  // namespace

// Every stage of the tower against transformers' float32 run (patch embedding, position embedding, rotary tables,
// each block) and the outputs against the float32 and float64 runs.
TEST(QwenVisionModel, StagesMatchTransformers) {
  auto pf = open_fixture("processor.safetensors");
  auto tf = open_fixture("tower.safetensors");
  REQUIRE_FIXTURE(pf && tf);
  auto be = make_cpu_backend();
  auto model = QwenVisionModel::load(*be, vision_fixture_text_encoder());
  const int64_t merge = model->config().spatial_merge_size;
  for (const TowerCase& c : tower_cases(*pf, *tf)) {
    VisionStages st;
    const VisionFeatures f = model->encode(c.inputs, &st);
    const std::string n = c.name;
    expect_rel(st.patch_embed, tf->tensor(n + "_patch_embed_f32"), 1e-6, n + " patch embed");
    expect_rel(st.block_input, tf->tensor(n + "_block_0_input_f32"), 1e-6, n + " + position embedding");
    for (size_t b = 0; b < st.blocks.size(); ++b)
      expect_rel(st.blocks[b], tf->tensor(cat(n, "_block_", b, "_f32")), 1e-5, cat(n, " block ", b));
    // The interpolated position table on its own: the reference's block input minus its patch embedding.
    const Tensor ref_in = tf->tensor(n + "_block_0_input_f32").to(DType::F32);
    const Tensor ref_pe = tf->tensor(n + "_patch_embed_f32").to(DType::F32);
    Tensor diff = ref_in.clone();
    for (int64_t i = 0; i < diff.numel(); ++i) diff.ptr<float>()[i] -= ref_pe.ptr<float>()[i];
    Checkpoint ck = Checkpoint::open(fixture("text_encoder"));
    const Tensor pe = interpolate_position_embedding(ck.get("model.visual.pos_embed.weight"), c.inputs.grids, merge,
                                                     DType::F32);
    EXPECT_LT(max_abs_diff(pe, diff), 1e-6) << n;  // the subtraction's rounding only
    if (tf->find(n + "_rotary_cos_f32")) {
      const RopeTables r =
          vision_rope_tables(c.inputs.grids, merge,
                             torch_rope_inv_freq(model->config().rope_theta,
                                                 model->config().hidden_size / model->config().num_heads / 2));
      EXPECT_LT(max_abs_diff(r.cos, tf->tensor(n + "_rotary_cos_f32").to(DType::F32).reshape(r.cos.shape())), 2e-7);
      EXPECT_LT(max_abs_diff(r.sin, tf->tensor(n + "_rotary_sin_f32").to(DType::F32).reshape(r.sin.shape())), 2e-7);
    }
    for (const char* dt : {"f32", "f64"}) {
      if (!tf->find(cat(n, "_merged_", dt))) continue;
      expect_rel(be->download(f.embeds), tf->tensor(cat(n, "_merged_", dt)), 1e-5, cat(n, " merged vs ", dt));
      ASSERT_EQ(f.deepstack.size(), 2u);
      for (size_t k = 0; k < f.deepstack.size(); ++k)
        expect_rel(be->download(f.deepstack[k]), tf->tensor(cat(n, "_deepstack_", k, "_", dt)), 1e-5,
                   cat(n, " deepstack ", k, " vs ", dt));
    }
  }
}

// Attention never crosses a window: changing one image's pixels leaves the other image's rows exactly as they were.
TEST(QwenVisionModel, ImagesDoNotSeeEachOther) {
  auto pf = open_fixture("processor.safetensors");
  auto tf = open_fixture("tower.safetensors");
  REQUIRE_FIXTURE(pf && tf);
  auto be = make_cpu_backend();
  auto model = QwenVisionModel::load(*be, vision_fixture_text_encoder());
  const TowerCase c = tower_cases(*pf, *tf)[0];
  QwenVisionInputs changed = c.inputs;
  changed.pixel_values = c.inputs.pixel_values.clone();
  const int64_t first_rows = c.inputs.grids[0].patches(), first_tokens = c.inputs.grids[0].tokens(2);
  float* v = changed.pixel_values.ptr<float>();
  for (int64_t i = 0; i < first_rows * changed.pixel_values.dim(1); ++i) v[i] = -v[i];
  const Tensor a = be->download(model->encode(c.inputs).embeds), b = be->download(model->encode(changed).embeds);
  EXPECT_GT(max_abs_diff(a.slice(0, first_tokens), b.slice(0, first_tokens)), 1e-3);
  EXPECT_EQ(max_abs_diff(a.slice(first_tokens, a.dim(0)), b.slice(first_tokens, b.dim(0))), 0.0);
}

// The position rows from the cached rounded table and per-grid blocks are exactly the ones recomputed from the
// checkpoint every call (its twin, H3_DISABLE_VISION_POSITION_CACHE=1): over repeated calls, with the grids in
// another order and a grid seen first in between.
TEST(QwenVisionModel, PositionCacheGivesTheRecomputedRows) {
  auto pf = open_fixture("processor.safetensors");
  auto tf = open_fixture("tower.safetensors");
  REQUIRE_FIXTURE(pf && tf);
  auto be = make_cpu_backend();
  auto model = QwenVisionModel::load(*be, vision_fixture_text_encoder());
  const TowerCase c = tower_cases(*pf, *tf)[0];
  Tensor recomputed;
  {
    ScopedEnv twin("H3_DISABLE_VISION_POSITION_CACHE", "1");
    recomputed = be->download(model->encode(c.inputs).embeds);
  }
  for (int call = 0; call < 3; ++call) {
    EXPECT_EQ(max_abs_diff(be->download(model->encode(c.inputs).embeds), recomputed), 0.0) << "call " << call;
    if (c.inputs.grids.size() < 2) continue;
    QwenVisionInputs second;  // the second image alone: a grid the cache holds, first in its call
    second.grids = {c.inputs.grids[1]};
    const int64_t first_rows = c.inputs.grids[0].patches();
    second.pixel_values = c.inputs.pixel_values.slice(first_rows, c.inputs.pixel_values.dim(0)).clone();
    const Tensor alone = be->download(model->encode(second).embeds);
    const int64_t first_tokens = c.inputs.grids[0].tokens(2);
    EXPECT_EQ(max_abs_diff(alone, recomputed.slice(first_tokens, recomputed.dim(0))), 0.0) << "call " << call;
  }
}

TEST(QwenVisionModel, RejectsBadConfigsTensorsAndInputs) {
  auto be = make_cpu_backend();
  TextEncoderConfig c = load_text_encoder_config(vision_fixture_text_encoder());
  const std::string w = fixture("text_encoder");
  const std::vector<std::pair<std::function<void(TextEncoderConfig&)>, std::string>> bad = {
      {[](TextEncoderConfig& x) { x.vision.num_heads = 8; }, "must be a whole multiple of 4"},
      {[](TextEncoderConfig& x) { x.vision.deepstack_visual_indexes = {0, 4}; }, "block indices in [0, 4), got 4"},
      {[](TextEncoderConfig& x) { x.vision.deepstack_visual_indexes = {2, 2}; }, "lists block 2 twice"},
      {[](TextEncoderConfig& x) { x.vision.hidden_act = "quick_gelu"; }, "hidden_act 'quick_gelu' is not supported"},
      {[](TextEncoderConfig& x) { x.vision.out_hidden_size = 8; }, "must equal text_config.hidden_size"},
      {[](TextEncoderConfig& x) { x.vision.intermediate_size = 25; }, "model.visual.blocks.0.mlp.linear_fc1.weight"},
  };
  for (const auto& [edit, message] : bad) {
    TextEncoderConfig x = c;
    edit(x);
    const std::string e = error_of([&] { QwenVisionModel::load(*be, x, w); });
    EXPECT_NE(e.find(message), std::string::npos) << e;
  }
  auto model = QwenVisionModel::load(*be, c, w);
  QwenVisionInputs in;
  in.grids = {{1, 4, 4}};
  in.pixel_values = Tensor::zeros({15, 384}, DType::F32);
  EXPECT_NE(error_of([&] { model->encode(in); }).find("must be a host float [16, 384] matrix"), std::string::npos);
  in.grids = {{1, 4, 3}};
  EXPECT_NE(error_of([&] { model->encode(in); }).find("multiples of the merge size 2"), std::string::npos);
  // Every vision tensor of the manifest is resident except the position table, which stays on the host.
  uint64_t elements = 0;
  for (const TensorSpec& t : text_encoder_manifest(c, true))
    if (t.name.rfind("model.visual.", 0) == 0 && t.name != "model.visual.pos_embed.weight")
      elements += static_cast<uint64_t>(shape_numel(t.shape));
  EXPECT_EQ(QwenVisionModel::resident_bytes(c, DType::BF16), 2 * elements);
}

// ---------------------------------------------------------------------------------------------------------------
// The fl2va presentation (§3.3) with the real Qwen3 vocabulary: §3.3's worked example (two 768x1344 keyframes).
TEST(QwenPrompt, Fl2vaPresentationFollowsTheSpec) {
  const Tokenizer t = Tokenizer::from_file(std::string(H3_TEST_DATA_DIR) + "/qwen3_tokenizer");
  const Presentation p = present_fl2va(t, "a robot dancing", {{1, 48, 84}, {1, 48, 84}}, 2);
  ASSERT_EQ(p.ids.size(), 2035u);
  ASSERT_EQ(p.tags.size(), 2035u);
  const std::vector<int32_t> head = {21604, 3826, 220, 16, 26818, 220, 151652, 151655};
  EXPECT_EQ(std::vector<int32_t>(p.ids.begin(), p.ids.begin() + 8), head);
  EXPECT_EQ(p.ids[7 + 1007], 151655);
  EXPECT_EQ(p.ids[1015], 151653);
  const std::vector<int32_t> second = {21604, 3826, 220, 17, 26818, 220, 151652};
  EXPECT_EQ(std::vector<int32_t>(p.ids.begin() + 1016, p.ids.begin() + 1023), second);
  EXPECT_EQ(std::vector<int32_t>(p.ids.end() - 4, p.ids.end()), (std::vector<int32_t>{151653, 64, 12305, 27966}));
  EXPECT_EQ(std::count(p.tags.begin(), p.tags.end(), kVisionTokenTag), 2 * 1010);
  EXPECT_EQ(p.tags[5], kTextTokenTag);
  EXPECT_EQ(p.tags[6], kVisionTokenTag);
  EXPECT_EQ(p.tags[1015], kVisionTokenTag);
  EXPECT_EQ(p.tags[1016], kTextTokenTag);
  // One keyframe (first or last frame alone) is "Picture 1".
  const Presentation one = present_fl2va(t, "x", {{1, 4, 6}}, 2);
  EXPECT_EQ(one.ids.size(), 6u + 8u + 1u);
  EXPECT_EQ(one.ids[3], 16);
  EXPECT_NE(error_of([&] { present_fl2va(t, "x", {}, 2); }).find("one or two keyframes, got 0"), std::string::npos);
  EXPECT_NE(error_of([&] { present_fl2va(t, "x", {{1, 2, 2}, {1, 2, 2}, {1, 2, 2}}, 2); }).find("got 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { present_fl2va(t, "a <|image_pad|>", {{1, 2, 2}}, 2); }).find("the prompt contains"),
            std::string::npos);
}

// The whole fl2va conditioner path — keyframe pixels, image processor, presentation, tower, language model — against
// diffusers' get_qwen3vl_prompt_embeds (hidden_states[50]) with one and with two keyframes.
TEST(QwenFl2va, HiddenStatesMatchDiffusers) {
  auto f = open_fixture("fl2va.safetensors");
  REQUIRE_FIXTURE(f);
  const Tokenizer tok = Tokenizer::from_file(fixture("tokenizer"));
  const ImageProcessorConfig pc = fixture_processor();
  const nlohmann::json cases = parse_json_file(fixture("cases.json"));
  auto be = make_cpu_backend();
  auto vision = QwenVisionModel::load(*be, vision_fixture_text_encoder());
  auto text = QwenTextModel::load(*be, vision_fixture_text_encoder());
  int run = 0;
  for (const auto& c : cases.at("fl2va")) {
    const std::string n = c.at("name");
    std::vector<Rgb8Image> keyframes;
    for (int k = 0; f->find(cat(n, "_keyframe_", k)); ++k) keyframes.push_back(image_of(f->tensor(cat(n, "_keyframe_", k))));
    const QwenVisionInputs in = prepare_images(pc, keyframes);
    EXPECT_EQ(in.grids, grids_of(f->tensor(n + "_grids"))) << n;
    const Presentation p = present_fl2va(tok, cases.at("prompt").get<std::string>(), in.grids, pc.merge_size);
    EXPECT_EQ(p.ids, ids_of(f->tensor(n + "_input_ids"))) << n;
    const Tensor want_tags = f->tensor(n + "_tags").to(DType::I64);
    EXPECT_EQ(p.tags, std::vector<int64_t>(want_tags.ptr<int64_t>(), want_tags.ptr<int64_t>() + want_tags.numel()));

    const TextEncoderConfig& tc = text->config();
    const MropePositions pos = multimodal_positions(p.ids, static_cast<int32_t>(tc.image_token_id), in.grids, 2);
    const Tensor want_pos = f->tensor(n + "_position_ids").to(DType::I64);
    ASSERT_EQ(want_pos.numel(), 3 * pos.size());
    const std::vector<int64_t>* axes[3] = {&pos.t, &pos.h, &pos.w};
    for (int a = 0; a < 3; ++a)
      for (int64_t i = 0; i < pos.size(); ++i)
        EXPECT_EQ((*axes[a])[i], want_pos.ptr<int64_t>()[a * pos.size() + i]) << n << " axis " << a << " token " << i;

    const VisionFeatures vf = vision->encode(in);
    expect_rel(be->download(vf.embeds), f->tensor(n + "_merged_f32"), 1e-5, n + " vision rows");
    const Tensor got = text->encode(p.ids, &vf);
    for (const char* dt : {"f32", "f64"})
      if (f->find(cat(n, "_hidden_", dt)))
        expect_rel(got, f->tensor(cat(n, "_hidden_", dt)), 1e-5, cat(n, " hidden_states[50] vs ", dt));
    // The vision rows matter: the same ids embedded as plain tokens give other states.
    EXPECT_GT(rel_l2(text->encode(p.ids), got), 1e-2);
    ++run;
  }
  EXPECT_EQ(run, 2);
}

TEST(QwenFl2va, TextModelRejectsMismatchedVision) {
  auto f = open_fixture("fl2va.safetensors");
  REQUIRE_FIXTURE(f);
  auto be = make_cpu_backend();
  auto vision = QwenVisionModel::load(*be, vision_fixture_text_encoder());
  auto text = QwenTextModel::load(*be, vision_fixture_text_encoder());
  const std::vector<int32_t> ids = ids_of(f->tensor("fl2va_2_input_ids"));
  std::vector<Rgb8Image> one = {image_of(f->tensor("fl2va_2_keyframe_0"))};
  const VisionFeatures vf = vision->encode(prepare_images(fixture_processor(), one));
  EXPECT_NE(error_of([&] { text->encode(ids, &vf); }).find("16 <|image_pad|> tokens but the images give 8 rows"),
            std::string::npos);
  std::vector<int32_t> with_video = ids_of(f->tensor("fl2va_1_input_ids"));
  with_video.push_back(static_cast<int32_t>(text->config().video_token_id));
  EXPECT_NE(error_of([&] { text->encode(with_video, &vf); }).find("is a <|video_pad|> but no video features"),
            std::string::npos);
}
