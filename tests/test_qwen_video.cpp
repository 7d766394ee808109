// The Qwen3-VL video path of the conditioner (spec/conditioner.md §3.4, §5.3, §7; packing.md §3): the ref2va block's
// frame sampling and timestamp labels, the video processor's settings, smart_resize and patch rows, the ref2va
// presentation, the multimodal positions with videos, and the layer-50 hidden states of requests that mix images and
// videos, against the transformers / diffusers fixtures of tools/reference/fx_qwen_video.py (tests/fixtures/qwen_video,
// on the conditioner of tests/fixtures/vision) and against rules that hold without them.
//
// Tolerances: sampling, labels, the presentation, the positions and the processor are exact (the processor bit for
// bit: torchvision's integer resize, the reference's float32 normalization). The tower and the conditioner run in
// float32 on the CPU backend with summation orders of their own, which stay near 1e-6 relative over 4 blocks and 52
// layers (printed), so 1e-5 relative L2 — against the float64 reference too — catches any layout or formula mistake
// (those show at 1e-2 or more).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "vision_fixture.h"
#include "io/safetensors.h"
#include "media/torch_resize.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/rope.h"
#include "models/qwen3vl/text_model.h"
#include "models/qwen3vl/video_processor.h"
#include "models/qwen3vl/vision_model.h"
#include "test_source_dir.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"

using namespace h3;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) { return test_source_dir() + "/tests/fixtures/qwen_video/" + name; }

std::shared_ptr<SafetensorsFile> open_fixture(const std::string& file) {
  const std::string path = fixture(file);
  if (!file_exists(path)) return nullptr;
  return SafetensorsFile::open(path);
}

#define REQUIRE_FIXTURE(f) \
  if (!(f)) GTEST_FAIL() << "missing fixture under " << fixture("") << " (made by tools/reference/fx_qwen_video.py)"

json cases() { return parse_json_file(fixture("cases.json")); }

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(json::parse(line));
  return rows;
}

Rgb8Image image_of(const Tensor& hwc) {  // U8 [H, W, 3]
  EXPECT_EQ(hwc.dtype(), DType::U8);
  Rgb8Image img;
  img.height = static_cast<int>(hwc.dim(0));
  img.width = static_cast<int>(hwc.dim(1));
  img.rgb.assign(hwc.ptr<uint8_t>(), hwc.ptr<uint8_t>() + hwc.numel());
  return img;
}

Rgb8Video video_of(const Tensor& thwc) {  // U8 [T, H, W, 3]
  EXPECT_EQ(thwc.dtype(), DType::U8);
  EXPECT_EQ(thwc.ndim(), 4);
  Rgb8Video v;
  v.frames = static_cast<int>(thwc.dim(0));
  v.height = static_cast<int>(thwc.dim(1));
  v.width = static_cast<int>(thwc.dim(2));
  v.rgb.assign(thwc.ptr<uint8_t>(), thwc.ptr<uint8_t>() + thwc.numel());
  return v;
}

std::vector<ImageGrid> grids_of(const json& j) {
  std::vector<ImageGrid> out;
  for (const auto& g : j) out.push_back({g.at(0).get<int64_t>(), g.at(1).get<int64_t>(), g.at(2).get<int64_t>()});
  return out;
}

std::vector<int64_t> i64_of(const Tensor& t) {
  const Tensor v = t.to(DType::I64);
  return std::vector<int64_t>(v.ptr<int64_t>(), v.ptr<int64_t>() + v.numel());
}

// FNV-1a (64 bit) of a host F32 tensor's bytes, as the fixture script's fnv1a64 writes it (16 hex digits).
std::string fnv1a64(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::F32);
  const auto* p = static_cast<const uint8_t*>(t.data());
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Component processor_folder(const std::string& dir) {
  Component c;
  c.name = "processor";
  c.present = true;
  c.dir = dir;
  return c;
}

VideoProcessorConfig fixture_video_processor() {
  return load_video_processor_config(processor_folder(fixture("processor")));
}

ImageProcessorConfig fixture_image_processor() {
  Component c = processor_folder(fixture("processor"));
  c.config_files = {fixture("processor/processor_config.json")};
  return load_image_processor_config(c);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Which settings transformers 5.17 reads for each processor/ layout (recorded by the fixture script): the nested
// processor_config.json object (over a flat file beside it), the flat video_preprocessor_config.json, the class
// defaults for absent keys, min_pixels / max_pixels ignored; and one sentence for what h3 does not implement.
TEST(QwenVideoProcessorConfig, ReadsEveryLayoutAsTransformersDoes) {
  const json c = cases();
  ASSERT_GE(c.at("layouts").size(), 8u);
  for (const auto& [variant, loaded] : c.at("layouts").items()) {
    const Component folder = processor_folder(fixture("layouts/" + variant));
    const json& want = loaded.at("video");
    if (want.at("class") != "Qwen3VLVideoProcessor") {  // the flat image-only layout: a Qwen2VLVideoProcessor
      EXPECT_NE(error_of([&] { load_video_processor_config(folder); }).find("Qwen2VLVideoProcessor"),
                std::string::npos) << variant;
      continue;
    }
    const VideoProcessorConfig got = load_video_processor_config(folder);
    EXPECT_EQ(got.patch_size, want.at("patch_size").get<int64_t>()) << variant;
    EXPECT_EQ(got.temporal_patch_size, want.at("temporal_patch_size").get<int64_t>()) << variant;
    EXPECT_EQ(got.merge_size, want.at("merge_size").get<int64_t>()) << variant;
    EXPECT_EQ(got.min_pixels, want.at("size").at("shortest_edge").get<int64_t>()) << variant;
    EXPECT_EQ(got.max_pixels, want.at("size").at("longest_edge").get<int64_t>()) << variant;
    EXPECT_EQ(got.image_mean, want.at("image_mean").get<std::vector<double>>()) << variant;
    EXPECT_EQ(got.image_std, want.at("image_std").get<std::vector<double>>()) << variant;
    EXPECT_EQ(got.rescale_factor, want.at("rescale_factor").get<double>()) << variant;
    EXPECT_EQ(got.cap_pixels_per_frame, want.at("cap_pixels_per_frame").is_boolean() &&
                                            want.at("cap_pixels_per_frame").get<bool>()) << variant;
    EXPECT_EQ(got.max_video_tokens, want.at("max_video_tokens").get<int64_t>()) << variant;
  }
  // The nested object wins over a flat file that says otherwise (patch 4 there).
  EXPECT_EQ(load_video_processor_config(processor_folder(fixture("layouts/nested_and_flat_video"))).patch_size, 8);

  const std::vector<std::pair<json, std::string>> bad = {
      {{{"video_processor_type", "Qwen2VLVideoProcessor"}}, "video_processor_type 'Qwen2VLVideoProcessor'"},
      {{{"resample", 2}}, "resample 2 is not supported"},
      {{{"image_std", {0.5, 0.0, 0.5}}}, "every image_std entry must be positive"},
      {{{"do_normalize", false}}, "do_normalize=false is not supported"},
      {{{"size", {{"height", 32}, {"width", 32}}}}, "size must have both shortest_edge and longest_edge"},
      {{{"size", {{"shortest_edge", 100}, {"longest_edge", 99}}}}, "must be at least size.shortest_edge"},
      {{{"max_video_tokens", 0}}, "max_video_tokens"},
      {{{"cap_pixels_per_frame", "yes"}}, "'cap_pixels_per_frame' must be true or false"},
  };
  for (const auto& [j, message] : bad) {
    const std::string e = error_of([&] { parse_video_processor_config(j, "processor_config.json"); });
    EXPECT_NE(e.find(message), std::string::npos) << e;
    EXPECT_EQ(e.rfind("processor_config.json", 0), 0u) << e;
  }
  EXPECT_NE(error_of([] { load_video_processor_config(Component{}); }).find("no processor/ component"),
            std::string::npos);
}

// transformers' video smart_resize on every processor case (the pre-scale of a side under the factor, t' rounded
// half to even, both pixel bounds, a side held at the factor), and the capped budget of cap_pixels_per_frame.
TEST(QwenVideoProcessor, SmartResizeMatchesTransformers) {
  const json c = cases();
  const VideoProcessorConfig vc = fixture_video_processor();
  ASSERT_EQ(c.at("processor").size(), 10u);
  for (const auto& p : c.at("processor")) {
    const int64_t n = p.at("frames"), h = p.at("size").at(0), w = p.at("size").at(1);
    const auto [rh, rw] = video_smart_resize(n, h, w, vc.temporal_patch_size, vc.factor(), vc.min_pixels,
                                             video_max_pixels(vc, n));
    EXPECT_EQ(rh, p.at("resized").at(0).get<int64_t>()) << n << "x" << h << "x" << w;
    EXPECT_EQ(rw, p.at("resized").at(1).get<int64_t>()) << n << "x" << h << "x" << w;
  }
  // The spec's release cases (§5.3): 768x1344 unchanged up to 25 sampled frames, shrunk from 26 on.
  for (auto [n, want_h, want_w] : {std::tuple{25, 768, 1344}, {26, 736, 1280}, {31, 672, 1184}}) {
    const auto [h, w] = video_smart_resize(n, 768, 1344, 2, 32, 4096, 25165824);
    EXPECT_EQ(h, want_h) << n;
    EXPECT_EQ(w, want_w) << n;
  }
  VideoProcessorConfig capped = vc;
  capped.cap_pixels_per_frame = true;  // max(min(768·16², 8192 // 5), int(1024·1.05)) · 5
  EXPECT_EQ(video_max_pixels(capped, 5), 1638 * 5);
  EXPECT_EQ(video_max_pixels(capped, 100), 1075 * 100);
  EXPECT_EQ(video_max_pixels(vc, 5), 8192);
  EXPECT_NE(error_of([] { video_smart_resize(1, 32, 32, 2, 16, 1024, 8192); }).find("at least 2 frames"),
            std::string::npos);
  EXPECT_NE(error_of([] { video_smart_resize(2, 16, 3300, 2, 16, 1024, 8192); }).find("at most 200"),
            std::string::npos);
}

// Qwen3VLVideoProcessor(videos=[clip], do_sample_frames=False) on every clip: the grid, the resized frames (bit for
// bit), the FNV-1a hash of pixel_values_videos, and the rows themselves where the fixture keeps them; one call with
// four clips (a repeated shape among them) gives the clips' rows in order.
TEST(QwenVideoProcessor, PixelValuesMatchTransformersBitForBit) {
  auto f = open_fixture("processor.safetensors");
  REQUIRE_FIXTURE(f);
  const json c = cases();
  const VideoProcessorConfig vc = fixture_video_processor();
  int full = 0;
  for (const auto& p : c.at("processor")) {
    const int k = p.at("k");
    const Rgb8Video clip = video_of(f->tensor(cat("clip_", k)));
    const QwenVisionInputs in = prepare_videos(vc, {clip});
    ASSERT_EQ(in.grids.size(), 1u);
    EXPECT_EQ(in.grids[0], grids_of(json::array({p.at("grid")}))[0]) << k;
    EXPECT_EQ(in.pixel_values.dim(0), p.at("rows").get<int64_t>()) << k;
    EXPECT_EQ(fnv1a64(in.pixel_values), p.at("pixel_values_fnv1a64").get<std::string>()) << "clip " << k;
    const Rgb8Video want = video_of(f->tensor(cat("resized_", k)));
    for (int t = 0; t < clip.frames; ++t) {
      const Rgb8Image got = want.width == clip.width && want.height == clip.height
                                ? frame_image(clip, t)
                                : resize_bicubic_antialiased(frame_image(clip, t), want.width, want.height);
      EXPECT_EQ(got.rgb, frame_image(want, t).rgb) << "clip " << k << " frame " << t;
    }
    if (f->find(cat("pixel_values_", k))) {
      EXPECT_TRUE(bit_equal(in.pixel_values, f->tensor(cat("pixel_values_", k)))) << k;
      ++full;
    }
  }
  EXPECT_EQ(full, 3);

  const json& batch = c.at("batch");
  std::vector<Rgb8Video> clips;
  for (int i = 0; f->find(cat("batch_clip_", i)); ++i) clips.push_back(video_of(f->tensor(cat("batch_clip_", i))));
  ASSERT_EQ(clips.size(), 4u);
  const QwenVisionInputs in = prepare_videos(vc, clips);
  EXPECT_EQ(in.grids, grids_of(batch.at("grids")));
  EXPECT_EQ(fnv1a64(in.pixel_values), batch.at("pixel_values_fnv1a64").get<std::string>());

  // A config with cap_pixels_per_frame (grids and rows change) or a small max_video_tokens alone (nothing changes).
  for (const auto& [label, key, value] : {std::tuple{"cap_pixels_per_frame", "cap_pixels_per_frame", json(true)},
                                          {"max_video_tokens_2", "max_video_tokens", json(2)}}) {
    json j = parse_json_file(fixture("processor/processor_config.json"));
    j["video_processor"][key] = value;
    const VideoProcessorConfig other = parse_video_processor_config(j, label);
    for (const auto& [k, want] : batch.at("other_settings").at(label).items()) {
      const QwenVisionInputs o = prepare_videos(other, {video_of(f->tensor("clip_" + k))});
      EXPECT_EQ(o.grids[0], grids_of(json::array({want.at("grid")}))[0]) << label << " clip " << k;
      EXPECT_EQ(fnv1a64(o.pixel_values), want.at("pixel_values_fnv1a64").get<std::string>()) << label << " " << k;
    }
  }

  Rgb8Video bad = clips[0];
  bad.rgb.pop_back();
  EXPECT_NE(error_of([&] { prepare_videos(vc, {bad}); }).find("video 1 must have at least one frame"),
            std::string::npos);
  EXPECT_NE(error_of([&] { prepare_videos(vc, {select_frames(clips[0], {0})}); }).find("at least 2 frames"),
            std::string::npos);
  EXPECT_NE(error_of([&] { prepare_videos(vc, {}); }).find("at least one video"), std::string::npos);
}

// The odd frame of a 3-frame clip is repeated into the second temporal block; rows follow spec §5.1 step 5.
TEST(QwenVideoProcessor, PatchRowsFollowTheSpecLayout) {
  VideoProcessorConfig vc;
  vc.patch_size = 2;
  vc.merge_size = 2;
  vc.min_pixels = 1;
  vc.max_pixels = 1 << 20;
  vc.image_mean = {0, 0, 0};
  vc.image_std = {1, 1, 1};
  vc.rescale_factor = 1.0;  // values stay the bytes
  Rgb8Video v;
  v.frames = 3;
  v.height = 4;
  v.width = 8;
  for (int t = 0; t < 3; ++t)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 8; ++x)
        for (int ch = 0; ch < 3; ++ch) v.rgb.push_back(static_cast<uint8_t>(t * 64 + y * 8 + x + ch * 100 % 7));
  const QwenVisionInputs in = prepare_videos(vc, {v});
  ASSERT_EQ(in.grids[0], (ImageGrid{2, 2, 4}));
  const float* rows = in.pixel_values.ptr<float>();
  const int64_t row = 3 * 2 * 2 * 2;
  for (int64_t r = 0; r < in.pixel_values.dim(0); ++r) {
    const int64_t tb = r / 8, bw = (r % 8) / 4, mh = (r % 4) / 2, mw = r % 2;  // (t_blk, bh = 0, bw, mh, mw)
    for (int64_t j = 0; j < row; ++j) {
      const int64_t ch = j / 8, tt = (j / 4) % 2, py = (j / 2) % 2, px = j % 2;
      const int64_t t = std::min<int64_t>(2 * tb + tt, 2), y = 2 * mh + py, x = 2 * (2 * bw + mw) + px;
      EXPECT_EQ(rows[r * row + j], static_cast<float>(v.rgb[((t * 4 + y) * 8 + x) * 3 + ch])) << r << " " << j;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// _sample_video_condition_frames for 441 (frame count, rate, temporal patch) cases: the indices, the block
// timestamps (exact doubles), their labels, and the minimum-frames sentence word for word.
TEST(QwenVideoSampling, MatchesTheReferenceBlock) {
  const std::vector<json> rows = read_jsonl(fixture("sampling.jsonl"));
  ASSERT_GE(rows.size(), 400u);
  int errors = 0;
  for (const json& r : rows) {
    const int64_t n = r.at("num_frames"), tp = r.at("temporal_patch");
    const double fps = r.at("fps"), sample_fps = r.at("sample_fps");
    const std::string what = cat(n, " frames at ", fps, " read at ", sample_fps, ", patch ", tp);
    if (r.contains("error")) {
      EXPECT_EQ(error_of([&] { sample_video_condition_frames(n, fps, sample_fps, tp); }),
                r.at("error").get<std::string>()) << what;
      ++errors;
      continue;
    }
    const VideoConditionFrames got = sample_video_condition_frames(n, fps, sample_fps, tp);
    EXPECT_EQ(got.indices, r.at("indices").get<std::vector<int64_t>>()) << what;
    ASSERT_EQ(got.block_timestamps, r.at("block_timestamps").get<std::vector<double>>()) << what;
    for (size_t b = 0; b < got.block_timestamps.size(); ++b)
      EXPECT_EQ(timestamp_label(got.block_timestamps[b]), r.at("labels").at(b).get<std::string>()) << what;
  }
  EXPECT_GT(errors, 20);
  // The spec's example (packing.md §3): 25 frames -> frames 0, 12, 24 -> blocks at 0.25 s and 1.0 s.
  const VideoConditionFrames s = sample_video_condition_frames(25, 24, 2, 2);
  EXPECT_EQ(s.indices, (std::vector<int64_t>{0, 12, 24}));
  EXPECT_EQ(s.block_timestamps, (std::vector<double>{0.25, 1.0}));
  EXPECT_NE(error_of([] { sample_video_condition_frames(30, 0, 2, 2); }).find("must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { sample_video_condition_frames(30, 24, 2, 0); }).find("temporal patch"), std::string::npos);
  Rgb8Video v;
  v.frames = 3;
  v.width = v.height = 1;
  v.rgb = {0, 0, 0, 1, 1, 1, 2, 2, 2};
  EXPECT_EQ(select_frames(v, {2, 0}).rgb, (std::vector<uint8_t>{2, 2, 2, 0, 0, 0}));
  EXPECT_NE(error_of([&] { select_frames(v, {3}); }).find("outside the video's 3 frames"), std::string::npos);
}

// Python's f"{x:.1f}" (correctly rounded, ties to even on the binary value) for 186 values.
TEST(QwenVideoSampling, TimestampLabelsFormatLikePython) {
  const std::vector<json> rows = read_jsonl(fixture("timestamp_format.jsonl"));
  ASSERT_EQ(rows.size(), 186u);
  for (const json& r : rows)
    EXPECT_EQ(timestamp_label(r.at("value").get<double>()), cat("<", r.at("text").get<std::string>(), " seconds>"))
        << r.dump();
  EXPECT_EQ(timestamp_label(0.25), "<0.2 seconds>");
  EXPECT_EQ(timestamp_label(14.5), "<14.5 seconds>");
}

// ---------------------------------------------------------------------------------------------------------------
namespace {

// A presentation case's references as present_ref2va takes them: an image of `tokens` tokens is a (1, 2, 2·tokens)
// grid, a video of `block_tokens` per block (t, 2, 2·block_tokens) (merge 2).
std::vector<Ref2vaReference> references_of(const json& refs) {
  std::vector<Ref2vaReference> out;
  for (const auto& r : refs) {
    Ref2vaReference ref;
    ref.has_audio = r.at("has_audio");
    const std::string kind = r.at("kind");
    if (kind == "image") {
      ref.kind = Ref2vaReference::Kind::Image;
      ref.grid = {1, 2, 2 * r.at("tokens").get<int64_t>()};
    } else if (kind == "video") {
      ref.kind = Ref2vaReference::Kind::Video;
      ref.block_timestamps = r.at("block_timestamps").get<std::vector<double>>();
      ref.grid = {static_cast<int64_t>(ref.block_timestamps.size()), 2, 2 * r.at("block_tokens").get<int64_t>()};
    } else {
      ref.kind = Ref2vaReference::Kind::Audio;
    }
    out.push_back(ref);
  }
  return out;
}

}  // namespace

// _build_presentation's ids and tags for mixes: image + video with sound + audio, a silent video, two videos among
// images and audios, ten pictures (two-digit labels).
TEST(QwenPrompt, Ref2vaPresentationMatchesTheReferenceBlock) {
  const json c = cases();
  const Tokenizer tok = Tokenizer::from_file(vision_fixture("tokenizer"));
  int run = 0;
  for (const auto& p : c.at("presentations")) {
    const Presentation got =
        present_ref2va(tok, c.at("prompt").get<std::string>(), references_of(p.at("references")), 2);
    EXPECT_EQ(got.ids, p.at("ids").get<std::vector<int32_t>>()) << p.at("name");
    EXPECT_EQ(got.tags, p.at("tags").get<std::vector<int64_t>>()) << p.at("name");
    ++run;
  }
  EXPECT_EQ(run, 4);
}

// The worked example of packing.md §3 with the real Qwen3 vocabulary: a 48-frame video with its soundtrack on
// 768x1344 (two blocks of 1008 tokens), then a 2048x3648 image (7296 tokens).
TEST(QwenPrompt, Ref2vaPresentationFollowsTheSpec) {
  const Tokenizer t = Tokenizer::from_file(std::string(H3_TEST_DATA_DIR) + "/qwen3_tokenizer");
  Ref2vaReference video{Ref2vaReference::Kind::Video, true, {2, 48, 84}, {0.25, 1.25}};
  Ref2vaReference image{Ref2vaReference::Kind::Image, false, {1, 128, 228}, {}};
  const Presentation p = present_ref2va(t, "a robot dancing", {video, image}, 2);
  std::vector<int32_t> want = {65406, 220, 16, 26818, 220, 27, 10724, 220, 16, 26818, 220, 27, 15, 13, 17, 6486, 29,
                               151652};
  want.insert(want.end(), 1008, 151656);
  for (int32_t id : {151653, 27, 16, 13, 17, 6486, 29, 151652}) want.push_back(id);
  want.insert(want.end(), 1008, 151656);
  for (int32_t id : {151653, 21604, 3826, 220, 16, 26818, 220, 151652}) want.push_back(id);
  want.insert(want.end(), 7296, 151655);
  for (int32_t id : {151653, 64, 12305, 27966}) want.push_back(id);
  EXPECT_EQ(p.ids, want);
  ASSERT_EQ(p.tags.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const bool vision = want[i] >= 151652 && want[i] <= 151656;
    EXPECT_EQ(p.tags[i], vision ? kVisionTokenTag : kTextTokenTag) << i;
  }
  const Ref2vaReference audio{Ref2vaReference::Kind::Audio, true, {}, {}};
  const Ref2vaReference silent{Ref2vaReference::Kind::Video, false, {1, 2, 2}, {0.25}};
  EXPECT_EQ(present_ref2va(t, "x", {audio, silent}, 2).ids.size(), 5u + 6u + 6u + 3u + 1u);
  EXPECT_NE(error_of([&] { present_ref2va(t, "x", {}, 2); }).find("at least one reference"), std::string::npos);
  Ref2vaReference loud_image = image;
  loud_image.has_audio = true;
  EXPECT_NE(error_of([&] { present_ref2va(t, "x", {loud_image}, 2); }).find("cannot carry audio"), std::string::npos);
  Ref2vaReference unlabelled = silent;
  unlabelled.grid.t = 2;
  EXPECT_NE(error_of([&] { present_ref2va(t, "x", {unlabelled}, 2); }).find("into 2 vision blocks, but MiniMax-H3 "
                                                                             "labels 1 of them"),
            std::string::npos);
  EXPECT_NE(error_of([&] { present_ref2va(t, "<|video_pad|>", {silent}, 2); }).find("the prompt contains"),
            std::string::npos);
}

// §7.4 with videos: each temporal block is its own (1, h, w) run, between text runs of its own.
TEST(QwenVisionRope, VideoBlocksAreRunsOfTheirOwn) {
  constexpr int32_t kImage = 9, kVideo = 8, kText = 1;
  std::vector<int32_t> ids;
  auto add = [&](int32_t id, int n) { ids.insert(ids.end(), n, id); };
  add(kText, 3);
  add(kVideo, 6);  // video 1 block 0: 2 x 3 tokens
  add(kText, 2);
  add(kImage, 4);  // image 1: 2 x 2
  add(kText, 1);
  add(kVideo, 6);  // video 1 block 1
  add(kText, 1);
  add(kVideo, 1);  // video 2: one block of 1 x 1
  add(kText, 2);
  const MropePositions p = multimodal_positions(ids, kImage, {{1, 4, 4}}, kVideo, {{2, 4, 6}, {1, 2, 2}}, 2);
  ASSERT_EQ(p.size(), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(p.t[3], 3);
  EXPECT_EQ(p.h[8], 4);  // block 0's last token: row 1, column 2
  EXPECT_EQ(p.w[8], 5);
  EXPECT_EQ(p.t[9], 6);  // text after a 2 x 3 block: cursor 3 + max(2, 3)
  EXPECT_EQ(p.t[11], 8);  // the image
  EXPECT_EQ(p.w[14], 9);
  EXPECT_EQ(p.t[15], 10);
  EXPECT_EQ(p.t[16], 11);  // block 1 starts like a new image
  EXPECT_EQ(p.h[21], 12);
  EXPECT_EQ(p.w[21], 13);
  EXPECT_EQ(p.t[22], 14);
  EXPECT_EQ(p.t[23], 15);  // video 2
  EXPECT_EQ(p.t[24], 16);
  EXPECT_NE(error_of([&] { multimodal_positions(ids, kImage, {{1, 4, 4}}, kVideo, {{2, 4, 6}}, 2); })
                .find("more video-pad runs than the blocks of the 1 video(s) given"),
            std::string::npos);
  EXPECT_NE(error_of([&] { multimodal_positions(ids, kImage, {{1, 4, 4}}, kVideo, {{3, 4, 6}, {1, 2, 2}}, 2); })
                .find("video 1 has 6 tokens per block but its run of video pads in the presentation has 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { multimodal_positions(ids, kImage, {{1, 4, 4}}, kVideo, {{2, 4, 6}, {2, 2, 2}}, 2); })
                .find("3 video-pad run(s) for 4 video block(s)"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// The whole ref2va conditioner path — sampling the reference videos, the video and image processors, the
// presentation, the tower once per modality, the language model — against diffusers' MiniMaxH3Ref2VATextEncoderStep
// (get_qwen3vl_prompt_embeds: hidden_states[50]) for a video with sound + an image + an audio clip, and for an image
// + a silent video + a video with sound (the second video's blocks in the second video's runs).
TEST(QwenRef2va, HiddenStatesMatchDiffusers) {
  auto f = open_fixture("ref2va.safetensors");
  REQUIRE_FIXTURE(f);
  const json c = cases();
  const Tokenizer tok = Tokenizer::from_file(vision_fixture("tokenizer"));
  const VideoProcessorConfig vc = fixture_video_processor();
  const ImageProcessorConfig ic = fixture_image_processor();
  auto be = make_cpu_backend();
  auto vision = QwenVisionModel::load(*be, vision_fixture_text_encoder());
  auto text = QwenTextModel::load(*be, vision_fixture_text_encoder());
  const TextEncoderConfig& tc = text->config();
  const double fps = c.at("fps"), sample_fps = c.at("sample_fps");
  int run = 0;
  for (const auto& rc : c.at("ref2va")) {
    const std::string n = rc.at("name");
    std::vector<Rgb8Image> images;
    std::vector<Rgb8Video> videos;
    std::vector<Ref2vaReference> refs;
    std::vector<size_t> image_of_ref, video_of_ref;  // index into images / videos per reference
    for (const auto& r : rc.at("references")) {
      Ref2vaReference ref;
      ref.has_audio = r.at("has_audio");
      const std::string kind = r.at("kind");
      if (kind == "image") {
        ref.kind = Ref2vaReference::Kind::Image;
        image_of_ref.push_back(images.size());
        images.push_back(image_of(f->tensor(r.at("tensor").get<std::string>())));
      } else if (kind == "video") {
        ref.kind = Ref2vaReference::Kind::Video;
        // The normalized reference: black frames but where the conditioner reads (all the fixture keeps).
        Rgb8Video clip;
        clip.frames = r.at("num_frames");
        clip.height = r.at("size").at(0);
        clip.width = r.at("size").at(1);
        clip.rgb.assign(clip.frame_bytes() * clip.frames, 0);
        const std::vector<int64_t> kept = r.at("sampled_indices").get<std::vector<int64_t>>();
        for (size_t j = 0; j < kept.size(); ++j) {
          const Tensor frame = f->tensor(cat(n, "_video_", videos.size(), "_frame_", j));
          std::memcpy(clip.rgb.data() + kept[j] * clip.frame_bytes(), frame.data(), clip.frame_bytes());
        }
        const VideoConditionFrames s = sample_video_condition_frames(clip.frames, fps, sample_fps,
                                                                     vc.temporal_patch_size);
        EXPECT_EQ(s.indices, kept) << n;
        ref.block_timestamps = s.block_timestamps;
        video_of_ref.push_back(videos.size());
        videos.push_back(select_frames(clip, s.indices));
      } else {
        ref.kind = Ref2vaReference::Kind::Audio;
      }
      refs.push_back(ref);
    }
    // The processors run once per modality, on that modality's references in request order.
    QwenVisionInputs image_in;
    if (!images.empty()) image_in = prepare_images(ic, images);
    const QwenVisionInputs video_in = prepare_videos(vc, videos);
    EXPECT_EQ(fnv1a64(video_in.pixel_values), rc.at("pixel_values_videos_fnv1a64").get<std::string>()) << n;
    EXPECT_EQ(video_in.grids, grids_of(f->tensor(n + "_video_grids"))) << n;
    if (!images.empty()) {
      EXPECT_EQ(image_in.grids, grids_of(f->tensor(n + "_image_grids"))) << n;
    }
    size_t next_image = 0, next_video = 0;
    for (Ref2vaReference& ref : refs) {
      if (ref.kind == Ref2vaReference::Kind::Image) ref.grid = image_in.grids[image_of_ref[next_image++]];
      if (ref.kind == Ref2vaReference::Kind::Video) ref.grid = video_in.grids[video_of_ref[next_video++]];
    }
    const Presentation p = present_ref2va(tok, c.at("prompt").get<std::string>(), refs, ic.merge_size);
    EXPECT_EQ(p.ids, rc.at("ids").get<std::vector<int32_t>>()) << n;
    EXPECT_EQ(p.tags, rc.at("tags").get<std::vector<int64_t>>()) << n;

    const MropePositions pos = multimodal_positions(p.ids, static_cast<int32_t>(tc.image_token_id), image_in.grids,
                                                    static_cast<int32_t>(tc.video_token_id), video_in.grids,
                                                    vision->config().spatial_merge_size);
    const std::vector<int64_t> want_pos = i64_of(f->tensor(n + "_position_ids"));
    ASSERT_EQ(static_cast<int64_t>(want_pos.size()), 3 * pos.size()) << n;
    const std::vector<int64_t>* axes[3] = {&pos.t, &pos.h, &pos.w};
    for (int a = 0; a < 3; ++a)
      for (int64_t i = 0; i < pos.size(); ++i)
        EXPECT_EQ((*axes[a])[i], want_pos[a * pos.size() + i]) << n << " axis " << a << " token " << i;

    VisionFeatures image_features;
    if (!images.empty()) {
      image_features = vision->encode(image_in);
      expect_rel(be->download(image_features.embeds), f->tensor(n + "_image_merged_f32"), 1e-5, n + " image rows");
    }
    const VisionFeatures video_features = vision->encode(video_in);
    expect_rel(be->download(video_features.embeds), f->tensor(n + "_video_merged_f32"), 1e-5, n + " video rows");
    for (size_t i = 0; i < video_features.deepstack.size(); ++i)
      expect_rel(be->download(video_features.deepstack[i]), f->tensor(cat(n, "_video_deepstack_", i, "_f32")), 1e-5,
                 cat(n, " video deepstack ", i));
    const Tensor got = text->encode(p.ids, images.empty() ? nullptr : &image_features, &video_features);
    for (const char* dt : {"f32", "f64"})
      if (f->find(cat(n, "_hidden_", dt)))
        expect_rel(got, f->tensor(cat(n, "_hidden_", dt)), 1e-5, cat(n, " hidden_states[50] vs ", dt));
    // The video rows matter: the same ids embedded as plain tokens give other states.
    EXPECT_GT(rel_l2(text->encode(p.ids), got), 1e-2);
    ++run;
  }
  EXPECT_EQ(run, 2);
}

// The fixture was made on the vision family's conditioner: a few of its weights, as the script read them.
TEST(QwenRef2va, FixtureUsesTheVisionFamilysConditioner) {
  auto f = open_fixture("ref2va.safetensors");
  REQUIRE_FIXTURE(f);
  const json names = cases().at("model_fingerprint");
  const auto weights = SafetensorsFile::open(vision_fixture("text_encoder/model.safetensors"));
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor w = weights->tensor(names.at(i).get<std::string>()).to(DType::F32);
    const Tensor want = f->tensor(cat("model_fingerprint_", i));
    ASSERT_LE(want.numel(), w.numel());
    EXPECT_EQ(std::memcmp(w.data(), want.data(), want.nbytes()), 0) << names.at(i);
  }
}

// A presentation with video pads needs video features, and their rows must match the pads.
TEST(QwenRef2va, TextModelRejectsMismatchedVideos) {
  auto f = open_fixture("ref2va.safetensors");
  REQUIRE_FIXTURE(f);
  auto be = make_cpu_backend();
  auto vision = QwenVisionModel::load(*be, vision_fixture_text_encoder());
  auto text = QwenTextModel::load(*be, vision_fixture_text_encoder());
  const std::vector<int32_t> ids32 = [&] {
    const std::vector<int64_t> v = i64_of(f->tensor("image_two_videos_input_ids"));
    return std::vector<int32_t>(v.begin(), v.end());
  }();
  const VideoProcessorConfig vc = fixture_video_processor();
  Rgb8Video one;
  one.frames = 2;
  one.width = one.height = 32;
  one.rgb.assign(one.frame_bytes() * 2, 7);
  const VisionFeatures few = vision->encode(prepare_videos(vc, {one}));
  const VisionFeatures image = vision->encode(prepare_images(fixture_image_processor(), {frame_image(one, 0)}));
  EXPECT_NE(error_of([&] { text->encode(ids32, &image); }).find("is a <|video_pad|> but no video features were given"),
            std::string::npos);
  EXPECT_NE(error_of([&] { text->encode(ids32, nullptr, &few); }).find("is a <|image_pad|> but no image features"),
            std::string::npos);
  EXPECT_NE(error_of([&] { text->encode(ids32, &image, &few); }).find("12 <|video_pad|> tokens but the videos give 4"),
            std::string::npos);
}
