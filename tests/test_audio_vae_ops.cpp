// The 1-D signal ops the audio VAE adds to the backend (conv1d, conv_transpose1d, snake_beta_aa, divide), against
// direct float64 evaluations of their definitions on random inputs at awkward sizes; the fast CPU convolution
// against its slow twin; and the Backend default implementation (CPU round trip) that other backends inherit.
#include <gtest/gtest.h>

#include "cpu_forwarding_backend.h"
#include "random_tensor.h"

#include <cmath>
#include <cstdlib>
#include <random>

#include "audio_vae_f64.h"
#include "backend/backend.h"
#include "util/scoped_env.h"

using namespace h3;

namespace {

std::vector<double> ref_conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t s, int64_t p,
                               int64_t d) {
  std::vector<double> b = bias ? f64::values(*bias) : std::vector<double>{};
  return f64::conv1d(f64::signal(x), f64::values(w), w.dim(0), w.dim(2), bias ? b.data() : nullptr, s, p, d).v;
}

std::vector<double> ref_conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t s, int64_t p) {
  std::vector<double> b = bias ? f64::values(*bias) : std::vector<double>{};
  return f64::conv_transpose1d(f64::signal(x), f64::values(w), w.dim(1), w.dim(2), bias ? b.data() : nullptr, s, p).v;
}

// Tolerance for an f32 sum of n products of unit-scale values against float64: a few ulps per term, √n growth.
void expect_close(const Tensor& y, const std::vector<double>& ref, double terms, const std::string& what) {
  ASSERT_EQ(y.numel(), static_cast<int64_t>(ref.size())) << what;
  const double tol = 2e-6 * std::sqrt(terms) + 1e-6;
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_NEAR(y.ptr<float>()[i], ref[i], tol * (1 + std::fabs(ref[i]))) << what << " at " << i;
}

struct ConvCase {
  int64_t B, Cin, Cout, T, k, s, p, d;
};

std::string name(const ConvCase& c) {
  return cat("B", c.B, " Cin", c.Cin, " Cout", c.Cout, " T", c.T, " k", c.k, " s", c.s, " p", c.p, " d", c.d);
}


// A backend that forwards the pure virtual ops to the CPU backend but keeps Backend's default implementations of
// the 1-D signal ops, as a backend without its own kernels for them does.
class DefaultSignalOpsBackend final : public CpuForwardingBackend {
 public:
  std::string name() const override { return "default-signal-ops"; }
  Tensor upload(const Tensor& h, DType dt) override {
    ++uploads;
    return CpuForwardingBackend::upload(h, dt);
  }
  Tensor download(const Tensor& t) override {
    ++downloads;
    return CpuForwardingBackend::download(t);
  }
  int uploads = 0, downloads = 0;
};

// The CPU convolution's three paths: the AVX2 micro-kernel (where the machine has it), the portable micro-kernel,
// and the direct loops.
struct ConvPath {
  const char* name;
  const char* disable_fast;
  const char* disable_avx2;
};
const ConvPath kConvPaths[] = {{"fast", "0", "0"}, {"fast-portable", "0", "1"}, {"direct", "1", "0"}};

const ConvCase kConvCases[] = {
    {1, 1, 1, 1, 1, 1, 0, 1},      // smallest
    {2, 3, 5, 17, 3, 1, 1, 1},     // odd everything
    {2, 7, 6, 50, 7, 1, 9, 3},     // dilated, AMP-style padding d·(k−1)/2
    {1, 5, 9, 31, 11, 1, 25, 5},   // padding > T
    {2, 4, 1, 29, 7, 1, 3, 1},     // one output channel (conv_post)
    {3, 6, 13, 40, 4, 2, 1, 1},    // strided (encoder-style)
    {1, 3, 4, 23, 10, 5, 3, 1},    // stride 5, kernel 2s
    {1, 2, 3, 9, 3, 3, 0, 2},      // stride and dilation together
    {2, 37, 70, 61, 5, 1, 2, 1},   // several K blocks and channel tiles
    {1, 300, 9, 53, 1, 1, 0, 1},   // k1 projection with K > one reduction block
    {1, 4, 35, 200, 3, 1, 1, 1},   // time tail inside a task tile and several tiles
};

}  // namespace

TEST(AudioVaeOps, Conv1dMatchesFloat64Definition) {
  auto be = make_cpu_backend();
  std::mt19937 g(11);
  for (ConvPath path : kConvPaths) {
    ScopedEnv fast("H3_DISABLE_FAST_CONV", path.disable_fast), avx2("H3_DISABLE_CONV_AVX2", path.disable_avx2);
    for (const ConvCase& c : kConvCases) {
      Tensor x = randn({c.B, c.Cin, c.T}, g), w = randn({c.Cout, c.Cin, c.k}, g), b = randn({c.Cout}, g);
      const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
      for (bool with_bias : {true, false}) {
        Tensor y = be->empty({c.B, c.Cout, To}, DType::F32);
        be->conv1d(x, w, with_bias ? &b : nullptr, c.s, c.p, c.d, y);
        expect_close(y, ref_conv1d(x, w, with_bias ? &b : nullptr, c.s, c.p, c.d), double(c.Cin * c.k),
                     name(c) + " " + path.name);
      }
    }
  }
}

TEST(AudioVaeOps, FastConvAgreesWithItsSlowTwin) {
  auto be = make_cpu_backend();
  std::mt19937 g(12);
  const ConvCase c{2, 64, 48, 300, 7, 1, 9, 3};
  Tensor x = randn({c.B, c.Cin, c.T}, g), w = randn({c.Cout, c.Cin, c.k}, g), b = randn({c.Cout}, g);
  const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
  Tensor fast = be->empty({c.B, c.Cout, To}, DType::F32), slow = be->empty({c.B, c.Cout, To}, DType::F32);
  be->conv1d(x, w, &b, c.s, c.p, c.d, fast);
  {
    ScopedEnv env("H3_DISABLE_FAST_CONV", "1");
    be->conv1d(x, w, &b, c.s, c.p, c.d, slow);
  }
  // Same products, different summation order: agreement at f32 rounding level.
  EXPECT_LT(rel_l2(fast, slow), 1e-6);
}

TEST(AudioVaeOps, ConvTranspose1dMatchesFloat64Definition) {
  auto be = make_cpu_backend();
  std::mt19937 g(13);
  const ConvCase cases[] = {
      {1, 1, 1, 1, 1, 1, 0, 1},     {2, 6, 5, 13, 9, 5, 2, 1},    // release stage 0 shape (k9 s5 p2)
      {2, 7, 3, 11, 4, 2, 1, 1},    // release stage 2+ shape (k4 s2 p1)
      {1, 3, 4, 7, 3, 4, 0, 1},     // stride > kernel: phases without taps (bias only)
      {1, 5, 2, 9, 6, 3, 4, 1},     // padding crops more than one period
      {3, 2, 9, 5, 8, 2, 0, 1},     // no padding, output longer than (T−1)·s
      {1, 40, 33, 30, 9, 5, 2, 1},  // several channel tiles and K blocks
      {1, 2, 2, 3, 5, 1, 2, 1},     // stride 1
  };
  for (ConvPath path : kConvPaths) {
    ScopedEnv fast("H3_DISABLE_FAST_CONV", path.disable_fast), avx2("H3_DISABLE_CONV_AVX2", path.disable_avx2);
    for (const ConvCase& c : cases) {
      Tensor x = randn({c.B, c.Cin, c.T}, g), w = randn({c.Cin, c.Cout, c.k}, g), b = randn({c.Cout}, g);
      const int64_t To = conv_transpose1d_output_length(c.T, c.k, c.s, c.p);
      ASSERT_GE(To, 1) << name(c);
      for (bool with_bias : {true, false}) {
        Tensor y = be->empty({c.B, c.Cout, To}, DType::F32);
        be->conv_transpose1d(x, w, with_bias ? &b : nullptr, c.s, c.p, y);
        expect_close(y, ref_conv_transpose1d(x, w, with_bias ? &b : nullptr, c.s, c.p), double(c.Cin * c.k),
                     name(c) + " " + path.name);
      }
    }
  }
}

TEST(AudioVaeOps, ConvOutputLengths) {
  EXPECT_EQ(conv1d_output_length(10, 3, 1, 1, 1), 10);
  EXPECT_EQ(conv1d_output_length(10, 7, 1, 9, 3), 10);
  EXPECT_EQ(conv1d_output_length(40, 10, 5, 3, 1), 8);  // encoder block: L/s
  EXPECT_EQ(conv1d_output_length(2, 7, 1, 0, 1), 0);
  EXPECT_EQ(conv_transpose1d_output_length(7, 9, 5, 2), 35);  // 5L
  EXPECT_EQ(conv_transpose1d_output_length(7, 4, 2, 1), 14);  // 2L
}

TEST(AudioVaeOps, ConvRejectsBadShapes) {
  auto be = make_cpu_backend();
  Tensor x = Tensor::zeros({1, 3, 8}, DType::F32), w = Tensor::zeros({4, 3, 3}, DType::F32);
  Tensor y = be->empty({1, 4, 8}, DType::F32), bad_y = be->empty({1, 4, 7}, DType::F32);
  Tensor bad_w = Tensor::zeros({4, 2, 3}, DType::F32), bias5 = Tensor::zeros({5}, DType::F32);
  EXPECT_NO_THROW(be->conv1d(x, w, nullptr, 1, 1, 1, y));
  EXPECT_THROW(be->conv1d(x, w, nullptr, 1, 1, 1, bad_y), Error);
  EXPECT_THROW(be->conv1d(x, bad_w, nullptr, 1, 1, 1, y), Error);
  EXPECT_THROW(be->conv1d(x, w, &bias5, 1, 1, 1, y), Error);
  EXPECT_THROW(be->conv1d(x, w, nullptr, 0, 1, 1, y), Error);
  EXPECT_THROW(be->conv1d(x.to(DType::BF16), w, nullptr, 1, 1, 1, y), Error);
  Tensor short_x = Tensor::zeros({1, 3, 1}, DType::F32), y0 = be->empty({1, 4, 0}, DType::F32);
  EXPECT_THROW(be->conv1d(short_x, w, nullptr, 1, 0, 1, y0), Error);
  Tensor wt = Tensor::zeros({3, 4, 4}, DType::F32), yt = be->empty({1, 4, 16}, DType::F32);
  EXPECT_NO_THROW(be->conv_transpose1d(x, wt, nullptr, 2, 1, yt));
  EXPECT_THROW(be->conv_transpose1d(x, wt, nullptr, 2, 0, yt), Error);
}

TEST(AudioVaeOps, SnakeBetaAaMatchesFloat64Definition) {
  auto be = make_cpu_backend();
  std::mt19937 g(14);
  // (B, C, T, up taps, down taps): the release filter length 12, and other even and odd lengths.
  const int64_t cases[][5] = {{1, 1, 1, 12, 12}, {2, 3, 17, 12, 12}, {1, 5, 2, 12, 12}, {2, 4, 33, 8, 8},
                              {1, 3, 20, 7, 9},  {1, 2, 9, 2, 3},    {1, 2, 64, 12, 12}};
  for (const auto& cs : cases) {
    const int64_t B = cs[0], C = cs[1], T = cs[2];
    Tensor x = randn({B, C, T}, g), la = randn({C}, g, 0.5f), lb = randn({C}, g, 0.5f);
    Tensor up = randn({cs[3]}, g, 0.3f), down = randn({1, 1, cs[4]}, g, 0.3f);
    Tensor y = be->empty({B, C, T}, DType::F32);
    be->snake_beta_aa(x, la, lb, up, down, y);
    expect_close(y,
                 f64::snake_beta_aa(f64::signal(x), f64::values(la), f64::values(lb), f64::values(up),
                                    f64::values(down)).v,
                 24.0,
                 cat("snake_beta_aa B", B, " C", C, " T", T, " K", cs[3], "/", cs[4]));
  }
}

TEST(AudioVaeOps, SnakeBetaAaRejectsBadParameters) {
  auto be = make_cpu_backend();
  Tensor x = Tensor::zeros({1, 3, 8}, DType::F32), y = be->empty({1, 3, 8}, DType::F32);
  Tensor p3 = Tensor::zeros({3}, DType::F32), p2 = Tensor::zeros({2}, DType::F32), f = Tensor::zeros({12}, DType::F32);
  Tensor f1 = Tensor::zeros({1}, DType::F32), y2 = be->empty({1, 3, 16}, DType::F32);
  EXPECT_NO_THROW(be->snake_beta_aa(x, p3, p3, f, f, y));
  EXPECT_THROW(be->snake_beta_aa(x, p2, p3, f, f, y), Error);
  EXPECT_THROW(be->snake_beta_aa(x, p3, p3, f1, f, y), Error);
  EXPECT_THROW(be->snake_beta_aa(x, p3, p3, f, f, y2), Error);
}

TEST(AudioVaeOps, DivideIsTrueDivision) {
  auto be = make_cpu_backend();
  std::mt19937 g(15);
  Tensor x = randn({3, 7, 101}, g), x0 = x.clone();
  be->divide(x, 3.f);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.ptr<float>()[i], x0.ptr<float>()[i] / 3.f);
}

TEST(AudioVaeOps, BackendDefaultsRoundTripThroughTheCpuBackend) {
  DefaultSignalOpsBackend be;
  auto cpu = make_cpu_backend();
  std::mt19937 g(16);
  Tensor x = randn({2, 5, 19}, g), w = randn({6, 5, 3}, g), b = randn({6}, g), wt = randn({5, 4, 9}, g);
  Tensor y1 = be.empty({2, 6, 19}, DType::F32), y2 = cpu->empty({2, 6, 19}, DType::F32);
  be.conv1d(x, w, &b, 1, 3, 3, y1);
  cpu->conv1d(x, w, &b, 1, 3, 3, y2);
  EXPECT_EQ(max_abs_diff(y1, y2), 0.0);
  Tensor t1 = be.empty({2, 4, 95}, DType::F32), t2 = cpu->empty({2, 4, 95}, DType::F32);
  be.conv_transpose1d(x, wt, nullptr, 5, 2, t1);
  cpu->conv_transpose1d(x, wt, nullptr, 5, 2, t2);
  EXPECT_EQ(max_abs_diff(t1, t2), 0.0);
  Tensor la = randn({5}, g), lb = randn({5}, g), f = randn({12}, g, 0.3f);
  Tensor s1 = be.empty({2, 5, 19}, DType::F32), s2 = cpu->empty({2, 5, 19}, DType::F32);
  be.snake_beta_aa(x, la, lb, f, f, s1);
  cpu->snake_beta_aa(x, la, lb, f, f, s2);
  EXPECT_EQ(max_abs_diff(s1, s2), 0.0);
  Tensor d1 = x.clone(), d2 = x.clone();
  be.divide(d1, 3.f);
  cpu->divide(d2, 3.f);
  EXPECT_EQ(max_abs_diff(d1, d2), 0.0);
  EXPECT_GT(be.downloads, 0);  // the defaults really went through download/upload
  EXPECT_GT(be.uploads, 0);
}
