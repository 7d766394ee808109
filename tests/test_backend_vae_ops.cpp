// The backend ops the GPU pipeline adds: the video VAE's stitch_video_tiles and video_frames_to_pixels (CPU backend
// against the host compositions of models/video_vae/stitch.h, exactly), fill_random_normal, the statistics and
// timing defaults, and — with a GPU — every CUDA implementation against the CPU backend: the audio VAE's conv1d,
// conv_transpose1d (tiled and direct), snake_beta_aa and divide in f32, the video VAE ops, the random fill, the
// asynchronous download, memory statistics and device timing. CUDA suites skip without a GPU.
//
// Tolerances (relative L2 against the CPU backend on identical inputs):
// - f32 convolutions and the fused anti-aliased SnakeBeta: both sides compute in f32 and differ only in summation
//   order (and FMA contraction) and in the last ulp of expf / sinf; sums of up to Cin·k = 2,560 products: 1e-5.
// - cuDNN's TF32 convolutions (the default, as in the reference): each operand keeps 10 mantissa bits (relative
//   rounding up to 2^-11, so up to ~2^-10 per product); over many random-sign products the relative L2 error is
//   ~2^-10 / sqrt(3) ≈ 6e-4: 4e-3.
// - stitching and pixel conversion: the CUDA kernels use round-to-nearest intrinsics in the CPU's order: exact.
// - random fill: hash and Box–Muller are shared; the device's cospif / logf differ from the host's in the last
//   ulps: max abs difference 1e-5 for N(0, 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "random_tensor.h"
#include "util/scoped_env.h"
#include "models/video_vae/stitch.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

using namespace h3;

namespace {

// A grid of ny × nx tiles with the given overlaps (pixels), tile latent extents lh × lw, r = 2, s = 4.
VideoTileGrid make_grid(int64_t lt, int64_t lh, int64_t lw, const std::vector<int64_t>& y_overlaps,
                        const std::vector<int64_t>& x_overlaps) {
  VideoTileGrid g;
  g.channels = 3;
  g.temporal_patch = 2;
  g.spatial_patch = 4;
  g.latent_frames = lt;
  g.tile_latent_h = lh;
  g.tile_latent_w = lw;
  g.y_overlaps = y_overlaps;
  g.x_overlaps = x_overlaps;
  g.y_starts = {0};
  for (int64_t o : y_overlaps) g.y_starts.push_back(g.y_starts.back() + g.tile_height() - o);
  g.x_starts = {0};
  for (int64_t o : x_overlaps) g.x_starts.push_back(g.x_starts.back() + g.tile_width() - o);
  return g;
}

// The tiles of `features` unpatchified one by one (the decoder's former host path).
std::vector<Tensor> unpatchify_tiles(const Tensor& features, const VideoTileGrid& g) {
  std::vector<Tensor> tiles;
  const int64_t r = g.temporal_patch, s = g.spatial_patch, P = g.features();
  for (int64_t k = 0; k < g.tiles(); ++k) {
    Tensor t = Tensor::empty({g.channels, g.frames(), g.tile_height(), g.tile_width()}, DType::F32);
    for (int64_t c = 0; c < g.channels; ++c)
      for (int64_t f = 0; f < g.frames(); ++f)
        for (int64_t y = 0; y < g.tile_height(); ++y)
          for (int64_t x = 0; x < g.tile_width(); ++x) {
            const int64_t token = k * g.tile_tokens() + ((f / r) * g.tile_latent_h + y / s) * g.tile_latent_w + x / s;
            t.ptr<float>()[((c * g.frames() + f) * g.tile_height() + y) * g.tile_width() + x] =
                features.ptr<float>()[token * P + ((c * r + f % r) * s + y % s) * s + x % s];
          }
    tiles.push_back(t);
  }
  return tiles;
}

Tensor frames_of(const Tensor& t, int64_t begin, int64_t end) {
  const int64_t C = t.dim(0), F = t.dim(1), plane = t.dim(2) * t.dim(3);
  Tensor out = Tensor::empty({C, end - begin, t.dim(2), t.dim(3)}, DType::F32);
  for (int64_t c = 0; c < C; ++c)
    std::copy_n(t.ptr<float>() + (c * F + begin) * plane, (end - begin) * plane,
                out.ptr<float>() + c * (end - begin) * plane);
  return out;
}

const std::vector<float> kMean = {0.485f, 0.456f, 0.406f}, kStd = {0.229f, 0.224f, 0.225f};

// The pixel conversion of the decoder's former host path: cross-fade, then clamp(v·std + mean, 0, 1).
Tensor host_pixels(const Tensor& frames, const Tensor* fade_from, int64_t extent, int64_t n) {
  Tensor f = frames.clone();
  if (fade_from) cross_fade_frames(*fade_from, f, extent);
  Tensor out = frames_of(f, 0, n);
  const int64_t plane = out.dim(2) * out.dim(3);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < n * plane; ++i) {
      float& v = out.ptr<float>()[c * n * plane + i];
      v = std::clamp(v * kStd[c] + kMean[c], 0.f, 1.f);
    }
  return out;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

TEST(BackendVaeOps, StitchVideoTilesEqualsTheHostComposition) {
  std::mt19937 g(7);
  auto cpu = make_cpu_backend();
  // 2 × 3 tiles of 3 latent frames × 5 × 4 latents (20 × 16 px), overlaps of 8 / 4 px and 4 / 12 px.
  const VideoTileGrid grid = make_grid(3, 5, 4, {8, 4}, {4, 12});
  const Tensor features = randn({grid.tiles() * grid.tile_tokens(), grid.features()}, g);
  const Tensor full = stitch_tiles(unpatchify_tiles(features, grid), TileSplit{grid.y_starts, grid.tile_height(),
                                                                                grid.y_overlaps},
                                   TileSplit{grid.x_starts, grid.tile_width(), grid.x_overlaps});
  ASSERT_EQ(full.dim(2), grid.height());
  ASSERT_EQ(full.dim(3), grid.width());
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 6}, {1, 4}, {5, 6}}) {
    Tensor canvas = Tensor::empty({3, e - b, grid.height(), grid.width()}, DType::F32);
    cpu->stitch_video_tiles(features, grid, b, e, canvas);
    EXPECT_TRUE(bit_equal(canvas, frames_of(full, b, e))) << "frames [" << b << ", " << e << ")";
  }
}

TEST(BackendVaeOps, StitchRejectsInconsistentGrids) {
  auto cpu = make_cpu_backend();
  VideoTileGrid grid = make_grid(1, 2, 2, {4}, {});
  const Tensor features = Tensor::zeros({grid.tiles() * grid.tile_tokens(), grid.features()}, DType::F32);
  Tensor canvas = Tensor::empty({3, 2, grid.height(), grid.width()}, DType::F32);
  grid.y_starts[1] += 4;  // no longer "previous start + tile − overlap"
  EXPECT_THROW(cpu->stitch_video_tiles(features, grid, 0, 2, canvas), Error);
  grid = make_grid(1, 2, 2, {4}, {});
  EXPECT_THROW(cpu->stitch_video_tiles(features, grid, 0, 3, canvas), Error);  // past the window's 2 frames
  Tensor wrong = Tensor::empty({3, 1, grid.height(), grid.width()}, DType::F32);
  EXPECT_THROW(cpu->stitch_video_tiles(features, grid, 0, 2, wrong), Error);
}

TEST(BackendVaeOps, PixelsCrossFadeAndClampLikeTheHostPath) {
  std::mt19937 g(8);
  auto cpu = make_cpu_backend();
  const Tensor frames = randn({3, 7, 5, 6}, g, 1.5f), prev = randn({3, 4, 5, 6}, g, 1.5f);
  for (int64_t n : {7, 3}) {
    for (const Tensor* fade : {static_cast<const Tensor*>(nullptr), &prev}) {
      Tensor px = Tensor::empty({3, n, 5, 6}, DType::F32);
      cpu->video_frames_to_pixels(frames, fade, 5, kMean, kStd, px);  // extent 5 > 4 previous frames: E = 4
      EXPECT_TRUE(bit_equal(px, host_pixels(frames, fade, 5, n))) << "n " << n << (fade ? " with fade" : "");
    }
  }
  Tensor too_many = Tensor::empty({3, 8, 5, 6}, DType::F32);
  EXPECT_THROW(cpu->video_frames_to_pixels(frames, nullptr, 5, kMean, kStd, too_many), Error);
}

TEST(BackendVaeOps, RandomFillIsDeterministicAndNormal) {
  auto cpu = make_cpu_backend();
  Tensor a = Tensor::empty({100003}, DType::F32), b = a.clone(), c = a.clone();
  cpu->fill_random_normal(a, 5, 2.f, 0.5f);
  cpu->fill_random_normal(b, 5, 2.f, 0.5f);
  cpu->fill_random_normal(c, 6, 2.f, 0.5f);
  EXPECT_TRUE(bit_equal(a, b));
  EXPECT_FALSE(bit_equal(a, c));
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    sum += a.ptr<float>()[i];
    sq += a.ptr<float>()[i] * a.ptr<float>()[i];
  }
  const double mean = sum / a.numel(), sd = std::sqrt(sq / a.numel() - mean * mean);
  // 100k draws: the standard error of the mean is 0.5/316 ≈ 0.0016.
  EXPECT_NEAR(mean, 2.0, 0.01);
  EXPECT_NEAR(sd, 0.5, 0.01);
  // Other dtypes go through the default (host draw, upload): the same values rounded.
  Tensor h = Tensor::empty({100003}, DType::BF16);
  cpu->fill_random_normal(h, 5, 2.f, 0.5f);
  EXPECT_TRUE(bit_equal(h, a.to(DType::BF16)));
}

TEST(BackendVaeOps, CpuStatisticsAndTimingDefaults) {
  auto cpu = make_cpu_backend();
  const MemoryStats m = cpu->memory_stats();
  EXPECT_EQ(m.device_total, 0u);  // the CPU backend does not track memory: the memory plan is skipped
  auto a = cpu->mark_time();
  auto b = cpu->mark_time();
  EXPECT_GE(cpu->device_seconds(*a, *b), 0.0);
  Tensor t = Tensor::from_f32({3}, {1.f, 2.f, 3.f});
  auto pending = cpu->download_async(t);
  Tensor got = pending->wait();
  EXPECT_TRUE(bit_equal(got, t));
}

// ---------------------------------------------------------------------------------------------------------------
// CUDA against the CPU backend

#ifndef H3_HAVE_CUDA
TEST(BackendCudaVae, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

namespace {

constexpr double kF32Tol = 1e-5;
constexpr double kTf32Tol = 4e-3;


class BackendCudaVae : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device on this machine";
    gpu = make_cuda_backend();
    cpu = make_cpu_backend();
  }
  Tensor up(const Tensor& h) { return gpu->upload(h, DType::F32); }
  Tensor poisoned(const Shape& s) {
    Tensor t = gpu->empty(s, DType::F32);
    gpu->fill(t, NAN);
    return t;
  }
  void expect_close(const Tensor& gpu_t, const Tensor& ref, double tol, const std::string& what) {
    Tensor h = gpu->download(gpu_t);
    for (int64_t i = 0; i < h.numel(); ++i)
      ASSERT_TRUE(std::isfinite(h.ptr<float>()[i])) << what << ": element " << i << " unwritten or non-finite";
    const double r = rel_l2(h, ref);
    EXPECT_LE(r, tol) << what;
  }

  // The three convolution paths: cuDNN TF32 (the default backend), our tiled f32 kernels, our direct f32 kernels.
  struct ConvPath {
    Backend* be;
    const char* name;
  };
  std::vector<ConvPath> conv_paths() {
    if (!tiled_f32) {
      ScopedEnv off("H3_DISABLE_TF32_CONV", "1");
      tiled_f32 = make_cuda_backend();
      ScopedEnv direct_env("H3_DISABLE_CUDA_CONV_TILED", "1");
      direct_f32 = make_cuda_backend();
    }
    return {{gpu.get(), "cuDNN TF32"}, {tiled_f32.get(), "tiled f32"}, {direct_f32.get(), "direct f32"}};
  }
  // The tolerance for what served the last convolution on `be`.
  static double conv_tolerance(Backend& be) { return cuda_last_conv_path(be) == "h3-f32" ? kF32Tol : kTf32Tol; }

  std::unique_ptr<Backend> gpu, cpu, tiled_f32, direct_f32;
  std::mt19937 rng{20251130};
};

struct ConvCase {
  int64_t B, Cin, Cout, T, k, s, p, d;
};

std::string name(const ConvCase& c) {
  return cat("B", c.B, " Cin", c.Cin, " Cout", c.Cout, " T", c.T, " k", c.k, " s", c.s, " p", c.p, " d", c.d);
}

}  // namespace

TEST_F(BackendCudaVae, Conv1dMatchesCpu) {
  // The decoder's shapes (k 1/3/7/11, dilations 1/3/5, "same" padding; Cout 1 for conv_post) and awkward ones
  // (strides, partial tiles, more input channels than a shared-memory stage holds).
  const std::vector<ConvCase> cases = {{2, 32, 96, 37, 1, 1, 0, 1},   {2, 64, 64, 130, 3, 1, 1, 1},
                                       {2, 48, 80, 200, 11, 1, 25, 5}, {1, 40, 1, 300, 7, 1, 3, 1},
                                       {2, 8, 8, 1000, 7, 1, 9, 3},    {1, 70, 33, 65, 5, 3, 2, 2},
                                       {2, 17, 5, 1, 3, 1, 1, 1},      {1, 300, 70, 20, 11, 2, 4, 1}};
  // The first five: cuDNN must take them (its autotune may find an FMA engine as fast as a TF32 one for these small
  // shapes: either serves).
  const size_t decoder_cases = 5;
  for (size_t ci = 0; ci < cases.size(); ++ci)
    for (const ConvPath& path : conv_paths()) {
      const ConvCase& c = cases[ci];
      Backend* be = path.be;
      const Tensor x = randn({c.B, c.Cin, c.T}, rng), w = randn({c.Cout, c.Cin, c.k}, rng, 0.2f),
                   b = randn({c.Cout}, rng);
      const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
      Tensor ref = Tensor::empty({c.B, c.Cout, To}, DType::F32);
      cpu->conv1d(x, w, &b, c.s, c.p, c.d, ref);
      Tensor y = be->empty({c.B, c.Cout, To}, DType::F32);
      be->fill(y, NAN);
      const Tensor bd = be->upload(b, DType::F32);
      const Tensor xd = be->upload(x, DType::F32), wd = be->upload(w, DType::F32);
      be->conv1d(xd, wd, &bd, c.s, c.p, c.d, y);
      Tensor h = be->download(y);
      be->conv1d(xd, wd, &bd, c.s, c.p, c.d, y);  // deterministic: the same bits again
      EXPECT_EQ(std::memcmp(h.data(), be->download(y).data(), h.nbytes()), 0) << name(c) << " " << path.name;
      if (be == gpu.get() && ci < decoder_cases) {
        EXPECT_TRUE(cuda_last_conv_path(*be).starts_with("cudnn-")) << name(c) << ": " << cuda_last_conv_path(*be);
      }
      if (be != gpu.get()) {
        EXPECT_EQ(cuda_last_conv_path(*be), "h3-f32") << name(c);
      }
      EXPECT_LE(rel_l2(h, ref), conv_tolerance(*be)) << name(c) << " " << path.name;
      for (int64_t i = 0; i < h.numel(); ++i) ASSERT_TRUE(std::isfinite(h.ptr<float>()[i])) << name(c);
    }
}

TEST_F(BackendCudaVae, ConvTranspose1dMatchesCpu) {
  // The decoder's upsamplers (rate 5 / kernel 9 / padding 2, rate 2 / kernel 4 / padding 1) and awkward ones
  // (kernel shorter than the stride, padding past a phase, a single input sample, no bias).
  const std::vector<ConvCase> cases = {{2, 96, 48, 41, 9, 5, 2, 1}, {2, 64, 32, 150, 4, 2, 1, 1},
                                       {1, 7, 9, 30, 3, 4, 0, 1},   {2, 33, 70, 1, 9, 5, 2, 1},
                                       {1, 40, 24, 77, 5, 2, 3, 1}};
  for (size_t ci = 0; ci < cases.size(); ++ci)
    for (const ConvPath& path : conv_paths())
      for (bool with_bias : {true, false}) {
        const ConvCase& c = cases[ci];
        Backend* be = path.be;
        const Tensor x = randn({c.B, c.Cin, c.T}, rng), w = randn({c.Cin, c.Cout, c.k}, rng, 0.2f),
                     b = randn({c.Cout}, rng);
        const int64_t To = conv_transpose1d_output_length(c.T, c.k, c.s, c.p);
        Tensor ref = Tensor::empty({c.B, c.Cout, To}, DType::F32);
        cpu->conv_transpose1d(x, w, with_bias ? &b : nullptr, c.s, c.p, ref);
        Tensor y = be->empty({c.B, c.Cout, To}, DType::F32);
        be->fill(y, NAN);
        const Tensor bd = be->upload(b, DType::F32);
        const Tensor xd = be->upload(x, DType::F32), wd = be->upload(w, DType::F32);
        be->conv_transpose1d(xd, wd, with_bias ? &bd : nullptr, c.s, c.p, y);
        Tensor h = be->download(y);
        be->conv_transpose1d(xd, wd, with_bias ? &bd : nullptr, c.s, c.p, y);  // deterministic: the same bits again
        EXPECT_EQ(std::memcmp(h.data(), be->download(y).data(), h.nbytes()), 0) << name(c) << " " << path.name;
        if (be == gpu.get() && ci < 2) {  // the decoder's upsamplers
          EXPECT_EQ(cuda_last_conv_path(*be), "cudnn-tf32") << name(c);
        }
        if (be != gpu.get()) {
          EXPECT_EQ(cuda_last_conv_path(*be), "h3-f32") << name(c);
        }
        EXPECT_LE(rel_l2(h, ref), conv_tolerance(*be)) << name(c) << " " << path.name << (with_bias ? "" : " no bias");
        for (int64_t i = 0; i < h.numel(); ++i) ASSERT_TRUE(std::isfinite(h.ptr<float>()[i])) << name(c);
      }
}

TEST_F(BackendCudaVae, SnakeBetaAntiAliasedMatchesCpu) {
  std::vector<float> taps12(12);
  for (int i = 0; i < 12; ++i) taps12[i] = 0.08f + 0.01f * static_cast<float>(i % 5);
  const Tensor filter12 = Tensor::from_f32({12}, taps12);
  const Tensor filter5 = Tensor::from_f32({5}, {0.1f, 0.2f, 0.4f, 0.2f, 0.1f});
  // Lengths below, at and across the 256-output tile; the decoder's filters (12 taps) and odd ones.
  struct Case {
    int64_t B, C, T;
    const Tensor* up;
    const Tensor* down;
  };
  for (const Case& c : {Case{2, 3, 1, &filter12, &filter12}, Case{2, 5, 255, &filter12, &filter12},
                        Case{1, 4, 256, &filter12, &filter12}, Case{2, 3, 1031, &filter12, &filter12},
                        Case{1, 2, 700, &filter5, &filter12}, Case{1, 2, 300, &filter12, &filter5}}) {
    const Tensor x = randn({c.B, c.C, c.T}, rng, 2.f), la = randn({c.C}, rng, 0.3f), lb = randn({c.C}, rng, 0.3f);
    Tensor ref = Tensor::empty(x.shape(), DType::F32);
    cpu->snake_beta_aa(x, la, lb, *c.up, *c.down, ref);
    Tensor y = poisoned(x.shape());
    gpu->snake_beta_aa(up(x), up(la), up(lb), up(*c.up), up(*c.down), y);
    expect_close(y, ref, kF32Tol, cat("snake_beta_aa B", c.B, " C", c.C, " T", c.T, " up ", c.up->numel(), " down ",
                                      c.down->numel()));
  }
}

TEST_F(BackendCudaVae, DivideIsATrueDivision) {
  const Tensor x = randn({3, 7, 1001}, rng, 3.f);
  Tensor ref = x.clone();
  cpu->divide(ref, 3.f);
  Tensor d = up(x);
  gpu->divide(d, 3.f);
  Tensor h = gpu->download(d);
  EXPECT_TRUE(bit_equal(h, ref));  // IEEE division on both sides
}

TEST_F(BackendCudaVae, VideoOpsAreBitExactAgainstCpu) {
  const VideoTileGrid grid = make_grid(3, 5, 4, {8, 4}, {4, 12});
  const Tensor features = randn({grid.tiles() * grid.tile_tokens(), grid.features()}, rng);
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor stored = features.to(dt).to(DType::F32);  // what the GPU holds
    Tensor ref = Tensor::empty({3, 4, grid.height(), grid.width()}, DType::F32);
    cpu->stitch_video_tiles(stored, grid, 1, 5, ref);
    Tensor canvas = poisoned(ref.shape());
    gpu->stitch_video_tiles(gpu->upload(features, dt), grid, 1, 5, canvas);
    EXPECT_TRUE(bit_equal(gpu->download(canvas), ref)) << "stitch, features " << dtype_name(dt);
  }
  const Tensor frames = randn({3, 7, 9, 10}, rng, 1.5f), prev = randn({3, 5, 9, 10}, rng, 1.5f);
  for (const Tensor* fade : {static_cast<const Tensor*>(nullptr), &prev}) {
    Tensor ref = Tensor::empty({3, 6, 9, 10}, DType::F32);
    cpu->video_frames_to_pixels(frames, fade, 5, kMean, kStd, ref);
    Tensor px = poisoned(ref.shape());
    const Tensor fd = gpu->upload(prev, DType::F32);
    gpu->video_frames_to_pixels(up(frames), fade ? &fd : nullptr, 5, kMean, kStd, px);
    EXPECT_TRUE(bit_equal(gpu->download(px), ref)) << (fade ? "pixels with fade" : "pixels");
  }
}

TEST_F(BackendCudaVae, RandomFillMatchesTheHostDraw) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    Tensor d = gpu->empty({1 << 20}, dt);
    gpu->fill_random_normal(d, 42, 0.5f, 2.f);
    Tensor h = gpu->download(d).to(DType::F32);
    Tensor ref = Tensor::empty({1 << 20}, DType::F32);
    random_normal_host(ref, 42, 0.5f, 2.f);
    const double tol = dt == DType::F32 ? 2e-5 : 2.f * 8.f / (dt == DType::F16 ? 1024.f : 128.f);  // 8σ values
    EXPECT_LE(max_abs_diff(h, dt == DType::F32 ? ref : ref.to(dt).to(DType::F32)), tol) << dtype_name(dt);
  }
}

TEST_F(BackendCudaVae, AsyncDownloadTimingAndMemoryStatistics) {
  const Tensor x = randn({3, 1000, 77}, rng);
  Tensor d = up(x);
  gpu->reset_peak_memory();
  const MemoryStats before = gpu->memory_stats();
  EXPECT_GT(before.device_total, 0u);
  EXPECT_GT(before.device_free, 0u);
  const auto t0 = gpu->mark_time();
  Tensor big = gpu->empty({256, 1024, 1024}, DType::F32);  // 1 GiB
  gpu->fill(big, 1.f);
  const auto t1 = gpu->mark_time();
  EXPECT_GE(gpu->memory_stats().peak, before.in_use + (uint64_t(1) << 30));
  const double s = gpu->device_seconds(*t0, *t1);
  EXPECT_GT(s, 0.0);
  EXPECT_LT(s, 1.0);  // 1 GiB of stores at > 1 TB/s
  auto pending = gpu->download_async(d);
  gpu->fill(big, 2.f);  // later work on the compute stream while the copy runs on its own
  Tensor h = pending->wait();
  EXPECT_TRUE(bit_equal(h, x));
  EXPECT_TRUE(bit_equal(pending->wait(), x));  // again: the same tensor
  big = Tensor();
  gpu->reset_peak_memory();
  EXPECT_LT(gpu->memory_stats().peak, before.in_use + (uint64_t(1) << 30));
}

#endif
