// The video VAE encoder's backend ops (backend/backend.h): conv3d with its spatial padding modes, asymmetric pads,
// causal temporal padding and strides, and the per-frame group norm (+ SiLU) — the CPU backend against float64
// transcriptions of the definitions written here, and with a GPU every CUDA implementation against the CPU backend
// (cuDNN's TF32 convolution, our f32 twin, the group-norm kernel, the CPU round trip behind
// H3_DISABLE_CUDA_VIDEO_KERNELS). CUDA suites skip without a GPU.
//
// Tolerances (relative L2):
// - CPU conv3d vs float64: float32 products summed tap by tap in float32; with at most Cin·27 = 486 random-sign
//   products per output the rounding error is ~sqrt(486)·2^-24 ≈ 1.3e-6 of the output's scale: 1e-5.
// - CPU group norm vs float64: float64 throughout but for the final rounding to float32 (and expf in the SiLU): a
//   few ulps, 1e-6.
// - CUDA f32 convolution and group norm vs CPU: both float32, differing in summation order (and FMA contraction):
//   1e-5. cuDNN's TF32 convolution (the default, as in the reference): operands keep 10 mantissa bits, ~6e-4
//   relative L2 over many random-sign products (test_backend_vae_ops.cpp's reasoning): 4e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "random_tensor.h"
#include "util/error.h"
#include "util/scoped_env.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

using namespace h3;

namespace {

// ---- float64 transcriptions of the definitions ----

// F.pad's index rule for position p of an axis of n samples padded by `before` on the low side, or −1 for a zero.
int64_t source_index(int64_t p, int64_t before, int64_t n, PadMode mode) {
  const int64_t i = p - before;
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::Zeros) return -1;
  if (mode == PadMode::Replicate) return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * (n - 1) - i;  // reflect: mirror about the edge sample
}

std::vector<double> conv3d_f64(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g) {
  const int64_t Cin = x.dim(0), T = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t Cout = w.dim(0), kt = w.dim(2), kh = w.dim(3), kw = w.dim(4);
  const auto [To, Ho, Wo] = conv3d_output_shape(T, H, W, kt, kh, kw, g);
  std::vector<double> y(static_cast<size_t>(Cout * To * Ho * Wo));
  for (int64_t o = 0; o < Cout; ++o)
    for (int64_t t = 0; t < To; ++t)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double s = bias ? bias->ptr<float>()[o] : 0.0;
          for (int64_t c = 0; c < Cin; ++c)
            for (int64_t a = 0; a < kt; ++a)
              for (int64_t b = 0; b < kh; ++b)
                for (int64_t d = 0; d < kw; ++d) {
                  const int64_t tt = t * g.stride_t + a - g.pad_front;  // zero frames before frame 0
                  const int64_t yy = source_index(i * g.stride_h + b, g.pad_top, H, g.spatial_mode);
                  const int64_t xx = source_index(j * g.stride_w + d, g.pad_left, W, g.spatial_mode);
                  if (tt < 0 || yy < 0 || xx < 0) continue;
                  s += static_cast<double>(w.ptr<float>()[(((o * Cin + c) * kt + a) * kh + b) * kw + d]) *
                       x.ptr<float>()[((c * T + tt) * H + yy) * W + xx];
                }
          y[((o * To + t) * Ho + i) * Wo + j] = s;
        }
  return y;
}

std::vector<double> group_norm_f64(const Tensor& x, const Tensor& wt, const Tensor& bs, int64_t groups, double eps,
                                   bool silu) {
  const int64_t C = x.dim(0), T = x.dim(1), P = x.dim(2) * x.dim(3), cg = C / groups;
  std::vector<double> y(static_cast<size_t>(x.numel()));
  auto at = [&](int64_t c, int64_t t, int64_t k) { return (c * T + t) * P + k; };
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t t = 0; t < T; ++t) {
      double mean = 0, var = 0;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t k = 0; k < P; ++k) mean += x.ptr<float>()[at(c, t, k)];
      mean /= static_cast<double>(cg * P);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t k = 0; k < P; ++k) var += std::pow(x.ptr<float>()[at(c, t, k)] - mean, 2);
      var /= static_cast<double>(cg * P);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t k = 0; k < P; ++k) {
          double v = (x.ptr<float>()[at(c, t, k)] - mean) / std::sqrt(var + eps) * wt.ptr<float>()[c] +
                     bs.ptr<float>()[c];
          y[at(c, t, k)] = silu ? v / (1 + std::exp(-v)) : v;
        }
    }
  return y;
}

double rel_l2_f64(const Tensor& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += std::pow(a.ptr<float>()[i] - ref[i], 2);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

Conv3dGeometry geometry(int64_t st, int64_t sh, int64_t sw, int64_t front, int64_t top, int64_t bottom, int64_t left,
                        int64_t right, PadMode mode) {
  Conv3dGeometry g;
  g.stride_t = st;
  g.stride_h = sh;
  g.stride_w = sw;
  g.pad_front = front;
  g.pad_top = top;
  g.pad_bottom = bottom;
  g.pad_left = left;
  g.pad_right = right;
  g.spatial_mode = mode;
  return g;
}

struct ConvCase {
  const char* what;
  int64_t Cin, Cout, T, H, W, kt, kh, kw;
  Conv3dGeometry g;
  bool bias;
};

// The encoder's convolutions (conv_in, ResNet, downsamplers t1/t2, 1×1×1 shortcut and quant_conv, a single frame)
// and edge cases: every padding mode, reflect pads of extent − 1, odd sizes, a kernel longer than the clip, strides
// that skip samples, asymmetric pads on every side, one channel.
std::vector<ConvCase> conv_cases() {
  const PadMode R = PadMode::Reflect, Z = PadMode::Zeros, P = PadMode::Replicate;
  return {
      {"conv_in 17 frames", 3, 8, 17, 12, 10, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"resnet conv, one frame", 8, 6, 1, 9, 7, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"downsampler t1 s2", 6, 6, 5, 8, 6, 3, 3, 3, geometry(1, 2, 2, 2, 0, 1, 0, 1, R), true},
      {"downsampler t2 s2, 17 frames", 4, 5, 17, 10, 12, 3, 3, 3, geometry(2, 2, 2, 2, 0, 1, 0, 1, R), true},
      {"downsampler t2 s2, odd sizes", 4, 4, 9, 7, 5, 3, 3, 3, geometry(2, 2, 2, 2, 0, 1, 0, 1, R), false},
      {"shortcut 1x1x1", 12, 18, 3, 5, 4, 1, 1, 1, Conv3dGeometry{}, true},
      {"reflect pads of extent - 1", 2, 3, 2, 3, 2, 3, 3, 3, geometry(1, 1, 1, 2, 2, 2, 1, 1, R), true},
      {"reflect on a 2 x 2 frame", 5, 2, 1, 2, 2, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"zeros, asymmetric", 3, 4, 4, 6, 5, 3, 2, 3, geometry(1, 1, 2, 1, 2, 0, 1, 3, Z), true},
      {"replicate, wide pads", 3, 2, 3, 4, 3, 2, 3, 3, geometry(1, 2, 1, 1, 3, 2, 4, 0, P), true},
      {"kernel longer than the clip", 2, 3, 1, 4, 4, 3, 3, 3, geometry(3, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"strides skip samples", 3, 3, 11, 13, 11, 2, 2, 2, geometry(3, 3, 4, 1, 0, 0, 0, 0, Z), true},
      {"one channel", 1, 1, 2, 3, 3, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"many input channels", 18, 4, 2, 6, 6, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
  };
}

Tensor output_for(const ConvCase& c) {
  const auto [To, Ho, Wo] = conv3d_output_shape(c.T, c.H, c.W, c.kt, c.kh, c.kw, c.g);
  return Tensor::empty({c.Cout, To, Ho, Wo}, DType::F32);
}

}  // namespace

TEST(BackendVideoEncoderOps, Conv3dOutputShapes) {
  // spec §6.1: k3, q2: stride 1 keeps T, stride 2 gives ⌊(T − 1)/2⌋ + 1 (17 → 9 → 5, 1 → 1); the downsampler's
  // bottom/right pad gives ceil(size / 2).
  const Conv3dGeometry down = geometry(2, 2, 2, 2, 0, 1, 0, 1, PadMode::Reflect);
  EXPECT_EQ(conv3d_output_shape(17, 256, 256, 3, 3, 3, down), (std::array<int64_t, 3>{9, 128, 128}));
  // Odd sizes give floor(size / 2): the reference's "exactly ceil(size / 2)" holds for the even sizes every valid
  // canvas has at every downsampler.
  EXPECT_EQ(conv3d_output_shape(9, 7, 5, 3, 3, 3, down), (std::array<int64_t, 3>{5, 3, 2}));
  EXPECT_EQ(conv3d_output_shape(1, 2, 2, 3, 3, 3, down), (std::array<int64_t, 3>{1, 1, 1}));
  const Conv3dGeometry same = geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect);
  EXPECT_EQ(conv3d_output_shape(17, 16, 24, 3, 3, 3, same), (std::array<int64_t, 3>{17, 16, 24}));
  EXPECT_EQ(conv3d_output_shape(2, 2, 2, 3, 3, 3, Conv3dGeometry{})[0], 0);  // too short: rejected by the check
}

TEST(BackendVideoEncoderOps, Conv3dMatchesFloat64Definition) {
  std::mt19937 rng(61);
  auto cpu = make_cpu_backend();
  for (const ConvCase& c : conv_cases()) {
    const Tensor x = randn({c.Cin, c.T, c.H, c.W}, rng), w = randn({c.Cout, c.Cin, c.kt, c.kh, c.kw}, rng, 0.3f),
                 b = randn({c.Cout}, rng);
    Tensor y = output_for(c);
    cpu->conv3d(x, w, c.bias ? &b : nullptr, c.g, y);
    EXPECT_LE(rel_l2_f64(y, conv3d_f64(x, w, c.bias ? &b : nullptr, c.g)), 1e-5) << c.what;
  }
}

TEST(BackendVideoEncoderOps, Conv3dRejectsBadGeometry) {
  auto cpu = make_cpu_backend();
  const Tensor x = Tensor::zeros({2, 3, 4, 4}, DType::F32), w = Tensor::zeros({3, 2, 3, 3, 3}, DType::F32);
  Tensor y = Tensor::empty({3, 3, 4, 4}, DType::F32);
  cpu->conv3d(x, w, nullptr, geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), y);  // the valid call
  // Reflect needs pad < extent (PyTorch's rule): 3 rows above 4 are fine, 4 are not (zeros or replicate are).
  Tensor y7 = Tensor::empty({3, 3, 7, 4}, DType::F32), y8 = Tensor::empty({3, 3, 8, 4}, DType::F32);
  EXPECT_NO_THROW(cpu->conv3d(x, w, nullptr, geometry(1, 1, 1, 2, 3, 2, 1, 1, PadMode::Reflect), y7));
  EXPECT_THROW(cpu->conv3d(x, w, nullptr, geometry(1, 1, 1, 2, 4, 2, 1, 1, PadMode::Reflect), y8), Error);
  EXPECT_NO_THROW(cpu->conv3d(x, w, nullptr, geometry(1, 1, 1, 2, 4, 2, 1, 1, PadMode::Zeros), y8));
  EXPECT_NO_THROW(cpu->conv3d(x, w, nullptr, geometry(1, 1, 1, 2, 4, 2, 1, 1, PadMode::Replicate), y8));
  // A padded input shorter than the kernel (2 frames, no causal pad, kt 3), a wrong output shape, a weight of
  // other input channels, a bad bias, a zero stride, non-F32 data.
  const Tensor x2 = Tensor::zeros({2, 2, 4, 4}, DType::F32);
  Tensor y2 = Tensor::empty({3, 1, 2, 2}, DType::F32);
  EXPECT_THROW(cpu->conv3d(x2, w, nullptr, Conv3dGeometry{}, y2), Error);
  Tensor wrong = Tensor::empty({3, 3, 4, 5}, DType::F32);
  EXPECT_THROW(cpu->conv3d(x, w, nullptr, geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), wrong), Error);
  const Tensor w3 = Tensor::zeros({3, 3, 3, 3, 3}, DType::F32), b2 = Tensor::zeros({2}, DType::F32);
  EXPECT_THROW(cpu->conv3d(x, w3, nullptr, geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), y), Error);
  EXPECT_THROW(cpu->conv3d(x, w, &b2, geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), y), Error);
  EXPECT_THROW(cpu->conv3d(x, w, nullptr, geometry(0, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), y), Error);
  EXPECT_THROW(cpu->conv3d(x.to(DType::BF16), w, nullptr, geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), y),
               Error);
}

TEST(BackendVideoEncoderOps, FrameGroupNormMatchesFloat64Definition) {
  std::mt19937 rng(62);
  auto cpu = make_cpu_backend();
  struct Case {
    int64_t C, T, H, W, groups;
    float mean, scale;
  };
  // One and many groups, one channel per group, one sample per frame plane, and a large offset with a small spread
  // (a one-pass E[x²] − E[x]² would lose it).
  for (const Case& c : {Case{8, 3, 5, 4, 2, 0.f, 1.f}, Case{6, 1, 7, 3, 1, 0.5f, 2.f}, Case{4, 5, 1, 1, 4, 0.f, 1.f},
                        Case{12, 2, 6, 6, 3, 300.f, 0.01f}, Case{4, 17, 3, 2, 2, -2.f, 3.f}})
    for (bool silu : {false, true}) {
      const Tensor x = randn({c.C, c.T, c.H, c.W}, rng, c.scale, c.mean), wt = randn({c.C}, rng, 0.2f, 1.f),
                   bs = randn({c.C}, rng, 0.3f);
      const std::vector<double> ref = group_norm_f64(x, wt, bs, c.groups, 1e-6, silu);
      Tensor y = Tensor::empty(x.shape(), DType::F32);
      cpu->frame_group_norm(x, wt, bs, c.groups, 1e-6f, silu, y);
      const std::string what = cat("C", c.C, " T", c.T, " ", c.H, "x", c.W, " groups ", c.groups, silu ? " silu" : "");
      EXPECT_LE(rel_l2_f64(y, ref), 1e-6) << what;
      Tensor in_place = x.clone();
      cpu->frame_group_norm(in_place, wt, bs, c.groups, 1e-6f, silu, in_place);
      EXPECT_EQ(std::memcmp(in_place.data(), y.data(), y.nbytes()), 0) << what << " in place";
    }
}

TEST(BackendVideoEncoderOps, FrameGroupNormKeepsFramesApart) {
  // Frame 1 is frame 0 scaled and shifted: per-frame statistics normalize both to the same values.
  auto cpu = make_cpu_backend();
  std::mt19937 rng(63);
  const Tensor f0 = randn({4, 1, 3, 3}, rng);
  Tensor x = Tensor::empty({4, 2, 3, 3}, DType::F32);
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t k = 0; k < 9; ++k) {
      const float v = f0.ptr<float>()[c * 9 + k];
      x.ptr<float>()[(c * 2) * 9 + k] = v;
      x.ptr<float>()[(c * 2 + 1) * 9 + k] = 5.f * v + 7.f;
    }
  const Tensor wt = Tensor::from_f32({4}, {1.f, 1.f, 1.f, 1.f}), bs = Tensor::zeros({4}, DType::F32);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  cpu->frame_group_norm(x, wt, bs, 2, 0.f, false, y);
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t k = 0; k < 9; ++k)
      EXPECT_NEAR(y.ptr<float>()[(c * 2) * 9 + k], y.ptr<float>()[(c * 2 + 1) * 9 + k], 1e-5);
}

TEST(BackendVideoEncoderOps, FrameGroupNormRejectsBadShapes) {
  auto cpu = make_cpu_backend();
  const Tensor x = Tensor::zeros({6, 2, 3, 3}, DType::F32), w6 = Tensor::zeros({6}, DType::F32);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  EXPECT_THROW(cpu->frame_group_norm(x, w6, w6, 4, 1e-6f, false, y), Error);  // 6 channels in 4 groups
  const Tensor w4 = Tensor::zeros({4}, DType::F32);
  EXPECT_THROW(cpu->frame_group_norm(x, w4, w6, 2, 1e-6f, false, y), Error);
  Tensor other = Tensor::empty({6, 2, 3, 4}, DType::F32);
  EXPECT_THROW(cpu->frame_group_norm(x, w6, w6, 2, 1e-6f, false, other), Error);
  const Tensor rows = Tensor::zeros({6, 9}, DType::F32);
  Tensor rows_out = Tensor::empty({6, 9}, DType::F32);
  EXPECT_THROW(cpu->frame_group_norm(rows, w6, w6, 2, 1e-6f, false, rows_out), Error);
}

// ---------------------------------------------------------------------------------------------------------------
// CUDA against the CPU backend

#ifndef H3_HAVE_CUDA
TEST(BackendCudaVideoEncoder, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

namespace {

class BackendCudaVideoEncoder : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device on this machine";
    gpu = make_cuda_backend();
    cpu = make_cpu_backend();
    {
      ScopedEnv off("H3_DISABLE_TF32_CONV", "1");
      f32_conv = make_cuda_backend();
    }
    ScopedEnv host("H3_DISABLE_CUDA_VIDEO_KERNELS", "1");
    host_ops = make_cuda_backend();
  }
  Tensor poisoned(Backend& be, const Shape& s) {
    Tensor t = be.empty(s, DType::F32);
    be.fill(t, NAN);
    return t;
  }
  std::unique_ptr<Backend> gpu, cpu, f32_conv, host_ops;
  std::mt19937 rng{20260101};
};

}  // namespace

TEST_F(BackendCudaVideoEncoder, Conv3dMatchesCpu) {
  // Plus a release-sized level-0 convolution (128 channels on a 9-frame 64 x 64 crop): cuDNN must take it.
  std::vector<ConvCase> cases = conv_cases();
  cases.push_back({"release level 0", 128, 128, 9, 64, 64, 3, 3, 3,
                   geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), true});
  for (const ConvCase& c : cases) {
    const Tensor x = randn({c.Cin, c.T, c.H, c.W}, rng), w = randn({c.Cout, c.Cin, c.kt, c.kh, c.kw}, rng, 0.3f),
                 b = randn({c.Cout}, rng);
    Tensor ref = output_for(c);
    cpu->conv3d(x, w, c.bias ? &b : nullptr, c.g, ref);
    for (Backend* be : {gpu.get(), f32_conv.get(), host_ops.get()}) {
      const Tensor xd = be->upload(x, DType::F32), wd = be->upload(w, DType::F32), bd = be->upload(b, DType::F32);
      Tensor y = poisoned(*be, ref.shape());
      be->conv3d(xd, wd, c.bias ? &bd : nullptr, c.g, y);
      const Tensor h = be->download(y);
      be->conv3d(xd, wd, c.bias ? &bd : nullptr, c.g, y);  // deterministic: the same bits again
      EXPECT_EQ(std::memcmp(h.data(), be->download(y).data(), h.nbytes()), 0) << c.what;
      const std::string path = cuda_last_conv_path(*be);
      if (be == f32_conv.get()) {
        EXPECT_EQ(path, "h3-f32") << c.what;
      }
      if (be == gpu.get() && std::string(c.what) == "release level 0") {
        EXPECT_EQ(path, "cudnn-tf32");
      }
      for (int64_t i = 0; i < h.numel(); ++i) ASSERT_TRUE(std::isfinite(h.ptr<float>()[i])) << c.what << " " << i;
      const double tol = be == gpu.get() && path != "h3-f32" ? 4e-3 : 1e-5;
      EXPECT_LE(rel_l2(h, ref), tol) << c.what << " via " << (be == host_ops.get() ? "the CPU round trip" : path);
    }
  }
}

// A keyframe through a causal convolution (one frame, kt − 1 causal zero frames: one window over the whole time
// axis) runs as cuDNN's 2-D convolution over (channel, frame) pairs; its twin (H3_DISABLE_CONV3D_AS_2D=1) is the 3-D
// plan. Both against the CPU, at TF32's bound (as the 3-D convolutions above), incl. a release-sized level-0 and a
// strided downsampler-like case.
TEST_F(BackendCudaVideoEncoder, SingleFrameCausalConvFoldsTo2dAndMatchesItsTwin) {
  std::unique_ptr<Backend> unfolded;
  {
    ScopedEnv off("H3_DISABLE_CONV3D_AS_2D", "1");
    unfolded = make_cuda_backend();
  }
  const ConvCase cases[] = {
      {"keyframe level 0", 128, 128, 1, 96, 160, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), true},
      {"keyframe conv_in", 3, 128, 1, 48, 80, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, PadMode::Reflect), true},
      {"keyframe downsampler", 64, 64, 1, 32, 48, 3, 3, 3, geometry(2, 2, 2, 2, 0, 1, 0, 1, PadMode::Reflect), true},
  };
  for (const ConvCase& c : cases) {
    const Tensor x = randn({c.Cin, c.T, c.H, c.W}, rng), w = randn({c.Cout, c.Cin, c.kt, c.kh, c.kw}, rng, 0.3f),
                 b = randn({c.Cout}, rng);
    Tensor ref = output_for(c);
    ASSERT_EQ(ref.dim(1), 1) << c.what;
    cpu->conv3d(x, w, &b, c.g, ref);
    std::vector<Tensor> got;
    for (Backend* be : {gpu.get(), unfolded.get()}) {
      const Tensor xd = be->upload(x, DType::F32), wd = be->upload(w, DType::F32), bd = be->upload(b, DType::F32);
      Tensor y = poisoned(*be, ref.shape());
      be->conv3d(xd, wd, &bd, c.g, y);
      got.push_back(be->download(y));
      // cuDNN serves it: TF32 tensor cores, or an FMA engine where the autotune finds one faster (conv_in's 3 input
      // channels, call 6 of session 5); never h3's f32 fallback kernels.
      EXPECT_TRUE(cuda_last_conv_path(*be).starts_with("cudnn-")) << c.what << ": " << cuda_last_conv_path(*be);
      EXPECT_LE(rel_l2(got.back(), ref), 4e-3) << c.what;  // TF32 operands, f32 accumulation
    }
    EXPECT_LE(rel_l2(got[0], got[1]), 4e-3) << c.what;
  }
}

// The keyframe paths of conv3d (a single frame through a causal convolution) against the CPU and against each
// other: the default (the kernel's last frame alone, channels-last cuDNN graph plans, autotuned), its twins one by
// one — channels-first (H3_DISABLE_CHANNELS_LAST_CONV3D), the whole kernel over the zero frames
// (H3_DISABLE_KEYFRAME_CONV_SLICE), the legacy API (H3_DISABLE_CUDNN_CONV_GRAPH), the heuristic's first
// (H3_DISABLE_CONV_AUTOTUNE) — and the f32 kernel on the sliced kernel (H3_DISABLE_TF32_CONV) at f32's bound. Each
// twice (deterministic: the same bits). Then a weight freed and another made (likely at its address): the cached
// slice must not be reused.
TEST_F(BackendCudaVideoEncoder, KeyframeConvSliceAndChannelsLastMatchCpuAndTwins) {
  const char* twins[] = {"H3_DISABLE_CHANNELS_LAST_CONV3D", "H3_DISABLE_KEYFRAME_CONV_SLICE",
                         "H3_DISABLE_CUDNN_CONV_GRAPH", "H3_DISABLE_CONV_AUTOTUNE"};
  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> backends;
  backends.emplace_back("default", make_cuda_backend());
  for (const char* t : twins) {
    ScopedEnv off(t, "1");
    backends.emplace_back(t, make_cuda_backend());
  }
  const PadMode R = PadMode::Reflect;
  const ConvCase cases[] = {
      {"keyframe level 0", 128, 128, 1, 64, 96, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"keyframe conv_in", 3, 128, 1, 48, 80, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"keyframe level 2 -> 3", 256, 512, 1, 16, 16, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"keyframe downsampler", 64, 64, 1, 32, 48, 3, 3, 3, geometry(2, 2, 2, 2, 0, 1, 0, 1, R), true},
      {"keyframe shortcut 1x1x1", 128, 256, 1, 16, 24, 1, 1, 1, Conv3dGeometry{}, true},
      {"keyframe conv_out", 96, 32, 1, 8, 8, 3, 3, 3, geometry(1, 1, 1, 2, 1, 1, 1, 1, R), true},
      {"odd channels, zeros, asymmetric, no bias", 5, 7, 1, 9, 11, 3, 2, 3,
       geometry(1, 1, 2, 2, 2, 0, 1, 3, PadMode::Zeros), false},
      {"replicate, kt 2", 12, 20, 1, 7, 6, 2, 3, 3, geometry(1, 2, 1, 1, 3, 2, 4, 0, PadMode::Replicate), true},
  };
  for (const ConvCase& c : cases) {
    const Tensor x = randn({c.Cin, c.T, c.H, c.W}, rng), w = randn({c.Cout, c.Cin, c.kt, c.kh, c.kw}, rng, 0.3f),
                 b = randn({c.Cout}, rng);
    Tensor ref = output_for(c);
    ASSERT_EQ(ref.dim(1), 1) << c.what;
    cpu->conv3d(x, w, c.bias ? &b : nullptr, c.g, ref);
    std::vector<Tensor> got;
    auto run = [&](Backend& be, const std::string& name, double tol) {
      const Tensor xd = be.upload(x, DType::F32), wd = be.upload(w, DType::F32), bd = be.upload(b, DType::F32);
      Tensor y = poisoned(be, ref.shape());
      be.conv3d(xd, wd, c.bias ? &bd : nullptr, c.g, y);
      const Tensor h = be.download(y);
      const std::string path = cuda_last_conv_path(be);
      be.conv3d(xd, wd, c.bias ? &bd : nullptr, c.g, y);
      EXPECT_EQ(std::memcmp(h.data(), be.download(y).data(), h.nbytes()), 0) << c.what << " " << name;
      int64_t bad = 0;
      for (int64_t i = 0; i < h.numel(); ++i) bad += !std::isfinite(h.ptr<float>()[i]);
      EXPECT_EQ(bad, 0) << c.what << " " << name << ": non-finite outputs";
      EXPECT_LE(rel_l2(h, ref), tol) << c.what << " " << name << " via " << path;
      std::printf("[ keyframe ] %-42s %-32s %-16s rel %.2e\n", c.what, name.c_str(), path.c_str(), rel_l2(h, ref));
      return h;
    };
    for (auto& [name, be] : backends) got.push_back(run(*be, name, 4e-3));  // TF32 operands, f32 accumulation
    for (size_t i = 1; i < got.size(); ++i) EXPECT_LE(rel_l2(got[i], got[0]), 4e-3) << c.what << " " << i;
    run(*f32_conv, "H3_DISABLE_TF32_CONV", 1e-5);
  }
  // A freed weight's cached slice is not served for a new weight at the same address.
  Backend& be = *backends[0].second;
  const ConvCase& c = cases[0];
  const Tensor x = randn({c.Cin, c.T, c.H, c.W}, rng), b = randn({c.Cout}, rng);
  const Tensor xd = be.upload(x, DType::F32), bd = be.upload(b, DType::F32);
  for (int k = 0; k < 3; ++k) {
    const Tensor w = randn({c.Cout, c.Cin, c.kt, c.kh, c.kw}, rng, 0.3f);
    Tensor ref = output_for(c);
    cpu->conv3d(x, w, &b, c.g, ref);
    Tensor y = poisoned(be, ref.shape());
    {
      const Tensor wd = be.upload(w, DType::F32);
      be.conv3d(xd, wd, &bd, c.g, y);
    }
    EXPECT_LE(rel_l2(be.download(y), ref), 4e-3) << "weight " << k;
  }
}

TEST_F(BackendCudaVideoEncoder, FrameGroupNormMatchesCpu) {
  struct Case {
    int64_t C, T, H, W, groups;
    float mean, scale;
  };
  // Small planes, a release-sized level-0 group (4 channels × 128 × 128 per frame) and a large offset.
  // Split over several blocks per (group, frame) where there are few (the default; H3_DISABLE_SPLIT_GROUP_NORM=1:
  // one block each): a keyframe-sized level 0 (one frame of 160 x 96) and the two-frame case split; both ways.
  std::unique_ptr<Backend> unsplit;
  {
    ScopedEnv off("H3_DISABLE_SPLIT_GROUP_NORM", "1");
    unsplit = make_cuda_backend();
  }
  for (const Case& c : {Case{8, 3, 5, 4, 2, 0.f, 1.f}, Case{128, 2, 128, 128, 32, 0.3f, 2.f},
                        Case{4, 5, 1, 1, 4, 0.f, 1.f}, Case{12, 2, 6, 6, 3, 300.f, 0.01f},
                        Case{128, 1, 96, 160, 32, -0.5f, 1.5f}, Case{512, 1, 32, 32, 32, 50.f, 0.1f}})
    for (bool silu : {false, true}) {
      const Tensor x = randn({c.C, c.T, c.H, c.W}, rng, c.scale, c.mean), wt = randn({c.C}, rng, 0.2f, 1.f),
                   bs = randn({c.C}, rng, 0.3f);
      Tensor ref = Tensor::empty(x.shape(), DType::F32);
      cpu->frame_group_norm(x, wt, bs, c.groups, 1e-6f, silu, ref);
      for (Backend* be : {gpu.get(), unsplit.get(), host_ops.get()}) {
        const Tensor wd = be->upload(wt, DType::F32), bd = be->upload(bs, DType::F32);
        Tensor xd = be->upload(x, DType::F32);
        Tensor y = poisoned(*be, x.shape());
        be->frame_group_norm(xd, wd, bd, c.groups, 1e-6f, silu, y);
        const std::string what = cat("C", c.C, " T", c.T, " ", c.H, "x", c.W, silu ? " silu" : "",
                                     be == host_ops.get() ? " (CPU round trip)" : "");
        const Tensor h = be->download(y);
        EXPECT_LE(rel_l2(h, ref), 1e-5) << what;
        be->frame_group_norm(xd, wd, bd, c.groups, 1e-6f, silu, xd);  // in place
        EXPECT_EQ(std::memcmp(be->download(xd).data(), h.data(), h.nbytes()), 0) << what << " in place";
      }
    }
}

#endif
