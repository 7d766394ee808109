// The packed layout against the worked examples of spec/packing.md §6 and the reference's fl2va layout, and the
// per-pass timestep plan (spec/sampling.md §6).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "util/mapped_file.h"
#include "pipeline/layout.h"
#include "test_source_dir.h"

namespace h3 {
namespace {

std::vector<int64_t> text_tags(int64_t n) { return std::vector<int64_t>(static_cast<size_t>(n), kTagText); }

double pos(const PackedLayout& l, int64_t row, int axis) { return l.position_ids.ptr<double>()[row * 3 + axis]; }

std::vector<int64_t> range(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i < b; ++i) v.push_back(i);
  return v;
}

// The spec prints positions to 7 decimals.
constexpr double kPrinted = 5e-7;

// The fl2va layout of the DiT fixture three_timesteps_permuted, made by the reference's
// MiniMaxH3PrepareLayoutStep.build_packed_sequence (tools/reference/fx_dit.py: 7 latent frames of 4 × 4, 12 audio
// latents, both keyframes, a vision block inside the text) and then permuted: row k of each index set is row k of
// ours, bit for bit.
TEST(PipelineLayout, Fl2vaMatchesTheReferenceLayout) {
  const auto c = SafetensorsFile::open(test_source_dir() + "/tests/fixtures/dit/three_timesteps_permuted/case.safetensors");
  const Tensor tags = c->tensor("token_tags"), positions = c->tensor("position_ids");
  const Tensor text = c->tensor("text_indices"), video = c->tensor("video_indices"), audio = c->tensor("audio_indices");
  LayoutSpec spec;
  for (int64_t k = 0; k < text.numel(); ++k) spec.text_tags.push_back(static_cast<int64_t>(tags.at(static_cast<int64_t>(text.at(k)))));
  spec.target = LatentGeometry::make(64, 64, 22);  // 7 latent frames of 4 × 4 (a /16 VAE)
  spec.target.audio_latents = 12;
  spec.keyframes = {KeyframeAnchor::First, KeyframeAnchor::Last};
  const PackedLayout l = build_layout(spec);
  ASSERT_EQ(l.length(), positions.dim(0));
  ASSERT_EQ(static_cast<int64_t>(l.video_indices.size()), video.numel());
  ASSERT_EQ(static_cast<int64_t>(l.audio_indices.size()), audio.numel());
  EXPECT_EQ(l.num_condition_video_rows, 8);
  EXPECT_EQ(l.num_condition_audio_rows, 0);
  auto same_rows = [&](const std::vector<int64_t>& ours, const Tensor& theirs) {
    for (int64_t k = 0; k < theirs.numel(); ++k) {
      const int64_t r = static_cast<int64_t>(theirs.at(k)), o = ours[static_cast<size_t>(k)];
      EXPECT_EQ(l.token_tags[o], static_cast<int64_t>(tags.at(r))) << "row " << k;
      for (int a = 0; a < 3; ++a) ASSERT_EQ(pos(l, o, a), positions.at(r * 3 + a)) << "row " << k << " axis " << a;
    }
  };
  same_rows(l.text_indices, text);
  same_rows(l.video_indices, video);
  same_rows(l.audio_indices, audio);
  // The keyframe rows: first at t = Nt, last at the final pixel frame, Nt + (5/3)(22 − 1) = Nt + 35.
  const double nt = static_cast<double>(spec.text_tags.size());
  EXPECT_EQ(pos(l, l.video_indices[0], 0), nt);
  EXPECT_NEAR(pos(l, l.video_indices[4], 0), nt + 35.0, 1e-12);
}

// ref2va layouts made by the reference's build_ref2va_packed_sequence (tools/reference/fx_layout.py): image, video
// (with and without soundtrack), standalone audio, a soundtrack longer than its frames and a video of 37 latent frames
// on the shared rotary clock — every position, tag and index bit for bit.
TEST(PipelineLayout, Ref2vaMatchesTheReferenceLayouts) {
  const std::string dir = test_source_dir() + "/tests/fixtures/layout";
  const auto meta = nlohmann::json::parse(read_text_file(dir + "/cases.json"));
  const auto file = SafetensorsFile::open(dir + "/ref2va.safetensors");
  ASSERT_GE(meta["cases"].size(), 5u);
  for (const auto& [name, c] : meta["cases"].items()) {
    SCOPED_TRACE(name);
    LayoutSpec spec;
    spec.text_tags = c["text_tags"].get<std::vector<int64_t>>();
    LatentGeometry& g = spec.target;
    g.latent_frames = c["target"]["latent_frames"];
    g.latent_height = c["target"]["latent_height"];
    g.latent_width = c["target"]["latent_width"];
    g.audio_latents = c["target"]["audio_latents"];
    for (const auto& r : c["references"]) {
      ReferenceBlock b;
      const std::string kind = r[0];
      if (kind == "image") {
        b.kind = ReferenceBlock::Kind::Image;
        b.latent_height = r[1];
        b.latent_width = r[2];
      } else if (kind == "audio") {
        b.kind = ReferenceBlock::Kind::Audio;
        b.audio_latents = r[1];
      } else {
        b.kind = ReferenceBlock::Kind::Video;
        b.latent_frames = r[1];
        b.latent_height = r[2];
        b.latent_width = r[3];
        b.audio_latents = r[4];
      }
      spec.references.push_back(b);
    }
    const PackedLayout l = build_layout(spec);
    const Tensor positions = file->tensor(name + "/position_ids"), tags = file->tensor(name + "/token_tags");
    ASSERT_EQ(l.length(), c["length"].get<int64_t>());
    ASSERT_EQ(positions.dim(0), l.length());
    EXPECT_EQ(l.num_condition_video_rows, c["num_condition_video_rows"].get<int64_t>());
    EXPECT_EQ(l.num_condition_audio_rows, c["num_condition_audio_rows"].get<int64_t>());
    for (int64_t row = 0; row < l.length(); ++row) {
      ASSERT_EQ(l.token_tags[row], static_cast<int64_t>(tags.at(row))) << "row " << row;
      for (int a = 0; a < 3; ++a) ASSERT_EQ(pos(l, row, a), positions.at(row * 3 + a)) << "row " << row << " axis " << a;
    }
    auto same = [&](const std::vector<int64_t>& ours, const std::string& key) {
      const Tensor theirs = file->tensor(name + "/" + key);
      ASSERT_EQ(static_cast<int64_t>(ours.size()), theirs.numel()) << key;
      for (int64_t k = 0; k < theirs.numel(); ++k) ASSERT_EQ(ours[k], static_cast<int64_t>(theirs.at(k))) << key << k;
    };
    same(l.video_indices, "video_indices");
    same(l.audio_indices, "audio_indices");
    same(l.text_indices, "text_indices");
    // Reference audio rows are held clean (timestep 1.0), visual reference rows at 0.999.
    for (int64_t k = 0; k < l.num_condition_audio_rows; ++k)
      EXPECT_EQ(l.roles[l.audio_indices[k]], RowRole::ReferenceAudio);
    for (int64_t k = 0; k < l.num_condition_video_rows; ++k)
      EXPECT_EQ(l.roles[l.video_indices[k]], RowRole::ConditionVideo);
  }
}

// numpy's pairwise summation, which the reference's "last" anchor time uses, against values numpy 1.24 printed
// (np.sum of the 5/3·p spans, repr as float.hex): it differs from a sequential sum from 16 latent frames on.
TEST(PipelineLayout, PairwiseSumIsNumpys) {
  auto spans = [](int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t f = 0; f < n; ++f) v[f] = kRopeFrameRescale * static_cast<double>(kRopeFramesPerLatent[f % 5]);
    return v;
  };
  auto sequential = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
  };
  const std::vector<double> s37 = spans(37), s102 = spans(102), s307 = spans(307);
  EXPECT_EQ(numpy_pairwise_sum(s37.data(), 37), 0x1.9d55555555554p+7);
  EXPECT_EQ(numpy_pairwise_sum(s102.data(), 102), 0x1.1f7fffffffffep+9);
  EXPECT_EQ(numpy_pairwise_sum(s307.data(), 307), 0x1.b22aaaaaaaaaap+10);
  EXPECT_NE(numpy_pairwise_sum(s102.data(), 102), sequential(s102));
}

TEST(PipelineLayout, WorkedExample864x480x124) {
  const LatentGeometry g = LatentGeometry::make(864, 480, 124);
  const PackedLayout l = build_layout({text_tags(36), g, {}, {}});
  ASSERT_EQ(l.length(), 15435);
  EXPECT_EQ(l.text_indices, range(0, 36));
  EXPECT_EQ(l.audio_indices, range(36, 450));
  EXPECT_EQ(l.video_indices, range(450, 15435));
  EXPECT_EQ(l.num_condition_video_rows, 0);
  EXPECT_EQ(l.num_condition_audio_rows, 0);
  for (int64_t r = 0; r < l.length(); ++r) {
    const int64_t expect = r < 36 ? kTagText : r < 450 ? kTagAudio : kTagVideo;
    ASSERT_EQ(l.token_tags[r], expect) << r;
  }
  // Text rows: (k, 0, 0).
  for (int64_t k = 0; k < 36; ++k) {
    EXPECT_EQ(pos(l, k, 0), static_cast<double>(k));
    EXPECT_EQ(pos(l, k, 1), 0.0);
    EXPECT_EQ(pos(l, k, 2), 0.0);
  }
  // The spatial grids: S = √1620, step 2/S·32 on both axes.
  const std::vector<double> h = spatial_position_grid(30, 2, 30 * 54), w = spatial_position_grid(54, 2, 30 * 54);
  ASSERT_EQ(h.size(), 15u);
  ASSERT_EQ(w.size(), 27u);
  EXPECT_NEAR(std::sqrt(1620.0), 40.24922359499622, 1e-14);
  EXPECT_NEAR(h.front(), 4.0743041, kPrinted);
  EXPECT_NEAR(h.back(), 26.3356031, kPrinted);
  EXPECT_NEAR(w.front(), -5.4662526, kPrinted);
  EXPECT_NEAR(w.back(), 35.8761598, kPrinted);
  for (size_t i = 1; i < h.size(); ++i) EXPECT_NEAR(h[i] - h[i - 1], 1.5900928, kPrinted);
  for (size_t j = 1; j < w.size(); ++j) EXPECT_NEAR(w[j] - w[j - 1], 1.5900928, kPrinted);
  // Audio rows: t = 36..242, h = 0, w at the width grid's extremes (float32 −5.46625280 / 35.87615967).
  for (int64_t a = 0; a < 207; ++a) {
    EXPECT_EQ(pos(l, 36 + a, 0), 36.0 + a);
    EXPECT_EQ(pos(l, 243 + a, 0), 36.0 + a);
    EXPECT_EQ(pos(l, 36 + a, 1), 0.0);
    EXPECT_EQ(pos(l, 36 + a, 2), w.front());
    EXPECT_EQ(pos(l, 243 + a, 2), w.back());
  }
  EXPECT_EQ(static_cast<float>(w.front()), -5.46625280f);
  EXPECT_EQ(static_cast<float>(w.back()), 35.87615967f);
  // Video rows: frame f at 450 + 405f, h-major over the patch grid.
  const double offsets[] = {0, 5.0 / 3, 25.0 / 3, 15, 65.0 / 3, 85.0 / 3, 30, 110.0 / 3};
  for (int f = 0; f < 8; ++f) EXPECT_NEAR(pos(l, 450 + 405 * f, 0), 36 + offsets[f], 1e-12) << f;
  EXPECT_NEAR(pos(l, 450 + 405 * 36, 0), 236.0, 1e-12);
  for (int64_t i = 0; i < 15; ++i)
    for (int64_t j = 0; j < 27; ++j) {
      const int64_t row = 450 + 405 * 5 + i * 27 + j;
      ASSERT_EQ(pos(l, row, 0), pos(l, 450 + 405 * 5, 0));
      ASSERT_EQ(pos(l, row, 1), h[i]);
      ASSERT_EQ(pos(l, row, 2), w[j]);
    }
  EXPECT_EQ(pos(l, 15434, 1), h.back());
  EXPECT_EQ(pos(l, 15434, 2), w.back());
}

TEST(PipelineLayout, WorkedExample512x512x22) {
  const LatentGeometry g = LatentGeometry::make(512, 512, 22);
  const int64_t nt = 36;
  const PackedLayout l = build_layout({text_tags(nt), g, {}, {}});
  EXPECT_EQ(l.length(), nt + 1866);
  // Square canvas: ratio 1, left 0, grid 0, 2, ..., 30 exactly.
  const std::vector<double> grid = spatial_position_grid(32, 2, 32 * 32);
  for (int k = 0; k < 16; ++k) EXPECT_EQ(grid[k], 2.0 * k);
  const double offsets[] = {0, 5.0 / 3, 25.0 / 3, 15, 65.0 / 3, 85.0 / 3, 30};
  const int64_t video_start = nt + 74;
  for (int f = 0; f < 7; ++f) EXPECT_NEAR(pos(l, video_start + 256 * f, 0), nt + offsets[f], 1e-12);
  EXPECT_EQ(pos(l, nt, 0), nt);
  EXPECT_EQ(pos(l, nt + 36, 0), nt + 36);
  EXPECT_EQ(pos(l, nt, 2), 0.0);
  EXPECT_EQ(pos(l, nt + 37, 2), 30.0);
  // The closest pipeline-legal request, 124 frames: video 9,472 rows, audio 414.
  EXPECT_EQ(build_layout({text_tags(nt), LatentGeometry::make(512, 512, 124), {}, {}}).length(), nt + 9886);
}

TEST(PipelineLayout, DefaultCanvasAndPortraitCounts) {
  EXPECT_EQ(build_layout({text_tags(10), LatentGeometry::make(1344, 768, 124), {}, {}}).length(), 10 + 37710);
  const PackedLayout landscape = build_layout({text_tags(36), LatentGeometry::make(864, 480, 124), {}, {}});
  const PackedLayout portrait = build_layout({text_tags(36), LatentGeometry::make(480, 864, 124), {}, {}});
  EXPECT_EQ(portrait.length(), landscape.length());
  // Axes swapped: the portrait's h grid is the landscape's w grid.
  EXPECT_EQ(spatial_position_grid(54, 2, 54 * 30), spatial_position_grid(54, 2, 30 * 54));
  EXPECT_EQ(pos(portrait, 450, 1), pos(landscape, 450, 2));
}

TEST(PipelineLayout, TemporalGridIsASequentialCumsumAfterTheOrigin) {
  const std::vector<double> t = temporal_position_grid(12, 7.0);
  double elapsed = 0;
  for (int f = 0; f < 12; ++f) {
    EXPECT_EQ(t[f], 7.0 + elapsed);
    elapsed += (5.0 / 3.0) * (f % 5 == 0 ? 1.0 : 4.0);
  }
}

TEST(PipelineLayout, TextTagsAreKeptAndValidated) {
  const LatentGeometry g = LatentGeometry::make(64, 64, 22);
  const PackedLayout l = build_layout({{1, 0, 0, 1}, g, {}, {}});
  EXPECT_EQ(l.token_tags[1], kTagVideo);
  EXPECT_EQ(l.roles[1], RowRole::Text);
  EXPECT_THROW(build_layout({{1, 2}, g, {}, {}}), Error);
  EXPECT_THROW(build_layout({{}, g, {}, {}}), Error);
}

TEST(PipelineLayout, TimestepPlanFollowsTheRowRules) {
  const LatentGeometry g = LatentGeometry::make(64, 64, 22);
  const PackedLayout l = build_layout({text_tags(5), g, {}, {}});
  const FlowSchedule video = FlowSchedule::shifted(12.0, 6), audio = FlowSchedule::shifted(3.0, 6);
  const TimestepPlan plan = TimestepPlan::make(l, video, audio);
  ASSERT_EQ(plan.passes(), 5);
  // Global list: sorted, distinct, every value used.
  EXPECT_TRUE(std::is_sorted(plan.timesteps().begin(), plan.timesteps().end()));
  EXPECT_EQ(std::adjacent_find(plan.timesteps().begin(), plan.timesteps().end()), plan.timesteps().end());
  EXPECT_EQ(plan.timesteps().size(), 1u + 2u * 4u);  // pass 0: t_v = t_a = 0
  for (int64_t i = 0; i < plan.passes(); ++i) {
    const std::vector<int64_t> idx = plan.row_indices(l, i);
    for (int64_t r : l.text_indices) ASSERT_EQ(plan.timesteps()[idx[r]], video.timesteps()[i]);
    for (int64_t r : l.video_indices) ASSERT_EQ(plan.timesteps()[idx[r]], video.timesteps()[i]);
    for (int64_t r : l.audio_indices) ASSERT_EQ(plan.timesteps()[idx[r]], audio.timesteps()[i]);
    // The reference's per-pass form: one value at pass 0, then {t_v, t_a} (t_v < t_a: the video shift is larger).
    const PassTimesteps ref = reference_pass_timesteps(l, plan, i);
    if (i == 0) {
      EXPECT_EQ(ref.values, std::vector<float>{0.0f});
      EXPECT_TRUE(std::all_of(ref.indices.begin(), ref.indices.end(), [](int64_t v) { return v == 0; }));
    } else {
      EXPECT_EQ(ref.values, (std::vector<float>{video.timesteps()[i], audio.timesteps()[i]}));
      EXPECT_EQ(ref.indices[0], 0);                      // text
      EXPECT_EQ(ref.indices[l.audio_indices[0]], 1);     // audio
      EXPECT_EQ(ref.indices[l.video_indices.back()], 0); // video
    }
  }
}

TEST(PipelineLayout, ConditioningRowsGetTheirOwnTimestep) {
  // A layout with the first frame's video rows marked as conditioning (what fl2va will build): they are held at
  // max(t_v, 0.999) = 0.999f, and reference audio rows at 1.
  const LatentGeometry g = LatentGeometry::make(64, 64, 22);
  PackedLayout l = build_layout({text_tags(3), g, {}, {}});
  for (int64_t k = 0; k < g.rows_per_frame(); ++k) l.roles[l.video_indices[k]] = RowRole::ConditionVideo;
  l.roles[l.audio_indices[0]] = RowRole::ReferenceAudio;
  const FlowSchedule video = FlowSchedule::shifted(12.0, 5), audio = FlowSchedule::shifted(3.0, 5);
  const TimestepPlan plan = TimestepPlan::make(l, video, audio);
  for (int64_t i = 0; i < plan.passes(); ++i) {
    EXPECT_EQ(plan.timestep(i, RowRole::ConditionVideo), 0.999f);
    EXPECT_EQ(plan.timestep(i, RowRole::ReferenceAudio), 1.0f);
    const PassTimesteps ref = reference_pass_timesteps(l, plan, i);
    EXPECT_EQ(ref.values.size(), i == 0 ? 3u : 4u);
    EXPECT_EQ(ref.values.back(), 1.0f);
  }
  EXPECT_EQ(static_cast<double>(kConditionNoiseLevel), 0.99900001287460327);
}

}  // namespace
}  // namespace h3
