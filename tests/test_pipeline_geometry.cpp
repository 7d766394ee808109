// Frame/latent/audio counts (spec/sampling.md §3) and the latent ↔ row conversions (spec/packing.md §4).
#include <gtest/gtest.h>

#include <random>

#include "pipeline/geometry.h"

namespace h3 {
namespace {

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::F32);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

TEST(PipelineGeometry, FrameLatentAndAudioCounts) {
  struct Row {
    int64_t frames, latent_frames, audio_latents;
  };
  // spec/sampling.md §3.2 table, plus 362 (n = 21, our upper limit).
  for (const Row& r : {Row{22, 7, 37}, Row{124, 37, 207}, Row{141, 42, 235}, Row{192, 57, 320}, Row{243, 72, 405},
                       Row{345, 102, 575}, Row{362, 107, 603}}) {
    SCOPED_TRACE(r.frames);
    EXPECT_TRUE(is_aligned_frame_count(r.frames));
    EXPECT_EQ(latent_frame_count(r.frames), r.latent_frames);
    EXPECT_EQ(audio_latent_count(r.frames), r.audio_latents);
    EXPECT_EQ(kAudioStereoChannels * audio_latent_count(r.frames), 2 * r.audio_latents);  // audio rows
  }
  EXPECT_EQ(latent_frame_count(5), 2);  // n = 0
  EXPECT_THROW(latent_frame_count(100), Error);
}

TEST(PipelineGeometry, AudioCountIsRoundedFiveThirds) {
  for (int64_t f = 1; f <= 400; ++f) EXPECT_EQ(audio_latent_count(f), std::llround(5.0 * f / 3.0)) << f;
}

TEST(PipelineGeometry, FramesRoundUpToSeventeenNPlusFive) {
  EXPECT_EQ(align_frame_count(1), 5);
  EXPECT_EQ(align_frame_count(5), 5);
  EXPECT_EQ(align_frame_count(6), 22);
  EXPECT_EQ(align_frame_count(22), 22);
  EXPECT_EQ(align_frame_count(100), 107);
  EXPECT_EQ(align_frame_count(120), 124);
  EXPECT_EQ(align_frame_count(124), 124);
  EXPECT_EQ(align_frame_count(125), 141);
  EXPECT_EQ(align_frame_count(346), 362);
  EXPECT_EQ(align_frame_count(363), 379);
  EXPECT_THROW(align_frame_count(0), Error);
}

TEST(PipelineGeometry, ShapesOfTheDefaultCanvas) {
  const LatentGeometry g = LatentGeometry::make(864, 480, 124);
  EXPECT_EQ(g.latent_height, 30);
  EXPECT_EQ(g.latent_width, 54);
  EXPECT_EQ(g.latent_frames, 37);
  EXPECT_EQ(g.rows_per_frame(), 15 * 27);
  EXPECT_EQ(g.video_rows(), 14985);
  EXPECT_EQ(g.audio_rows(), 414);
  EXPECT_EQ(g.patch_dim(), 96);
  EXPECT_EQ(g.video_latent_shape(), (Shape{1, 24, 37, 30, 54}));
  EXPECT_EQ(g.audio_latent_shape(), (Shape{2, 32, 207}));
  EXPECT_THROW(LatentGeometry::make(850, 480, 124), Error);
  EXPECT_THROW(LatentGeometry::make(864, 480, 100), Error);
}

TEST(PipelineGeometry, PatchifyIsChannelMajorWithinAPatch) {
  const LatentGeometry g = LatentGeometry::make(96, 64, 22);  // Hl 4, Wl 6, F 7
  const Tensor lat = random_tensor(g.video_latent_shape(), 1);
  const Tensor rows = patchify_video(lat, g.patch);
  ASSERT_EQ(rows.shape(), (Shape{7 * 2 * 3, 96}));
  const int64_t Hp = 2, Wp = 3, H = 4, W = 6, F = 7;
  const float* l = lat.ptr<float>();
  const float* r = rows.ptr<float>();
  for (int64_t f = 0; f < F; ++f)
    for (int64_t i = 0; i < Hp; ++i)
      for (int64_t j = 0; j < Wp; ++j)
        for (int64_t c = 0; c < 24; ++c)
          for (int64_t dy = 0; dy < 2; ++dy)
            for (int64_t dx = 0; dx < 2; ++dx) {
              const int64_t row = f * Hp * Wp + i * Wp + j, feature = c * 4 + dy * 2 + dx;
              ASSERT_EQ(r[row * 96 + feature], l[((c * F + f) * H + 2 * i + dy) * W + 2 * j + dx]);
            }
}

TEST(PipelineGeometry, UnpatchifyInvertsPatchify) {
  for (const std::array<int64_t, 3>& patch :
       {std::array<int64_t, 3>{1, 2, 2}, std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{1, 1, 2}}) {
    const LatentGeometry g = LatentGeometry::make(128, 96, 39, patch);
    const Tensor lat = random_tensor(g.video_latent_shape(), 7);
    const Tensor rows = patchify_video(lat, g.patch);
    EXPECT_EQ(rows.dim(0), g.video_rows());
    EXPECT_EQ(rows.dim(1), g.patch_dim());
    EXPECT_EQ(max_abs_diff(unpatchify_video(rows, g), lat), 0.0);
  }
}

TEST(PipelineGeometry, AudioRowsAreChannelMajor) {
  const Tensor lat = random_tensor({2, 32, 37}, 3);
  const Tensor rows = audio_latents_to_rows(lat);
  ASSERT_EQ(rows.shape(), (Shape{74, 32}));
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t a = 0; a < 37; ++a)
      for (int64_t c = 0; c < 32; ++c)
        ASSERT_EQ(rows.ptr<float>()[(ch * 37 + a) * 32 + c], lat.ptr<float>()[(ch * 32 + c) * 37 + a]);
  EXPECT_EQ(max_abs_diff(audio_rows_to_latents(rows, 37), lat), 0.0);
  EXPECT_THROW(audio_rows_to_latents(rows, 36), Error);
}

}  // namespace
}  // namespace h3
