// The audio VAE encoder (reference audio for ref2va): its backend ops (snake, transpose_last_two, multiply,
// pooled_causal_attention) against float64 evaluations of their definitions; the encoder and the reference rows
// against the reference (diffusers fixtures from tools/reference/fx_audio_vae_encoder.py, float32 and float64); the
// layouts, the input and checkpoint errors, the weight and working-memory figures; and — with a GPU — the CUDA
// kernels and the CUDA encode against the CPU backend.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/backend.h"
#include "unit_audio_vae_config.h"
#include "random_tensor.h"
#include "cpu_forwarding_backend.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/audio_vae/audio_vae_encoder.h"
#include "models/audio_vae/audio_vae_random.h"
#include "test_source_dir.h"
#include "util/mapped_file.h"
#include "util/scoped_env.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

using namespace h3;
namespace fs = std::filesystem;

namespace {

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Odd stride 5 (kernel 10, padding 3), three levels, heads of 10 pooled onto 8 channels (overlapping bins); hop 40.
AudioVaeConfig odd_config() {
  AudioVaeConfig c = unit_audio_vae_config();
  c.encoder_dim = 3;
  c.encoder_rates = {2, 4, 5};
  c.latent_dim = 40;
  c.num_attention_heads = 4;
  c.decoder_rates = {5, 2, 2, 2};
  c.decoder_kernel_sizes = {9, 4, 4, 4};
  c.decoder_dim = 32;
  return c;
}

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name)
      : path((fs::temp_directory_path() / ("h3_test_audio_enc_" + std::to_string(getpid()) + "_" + name)).string()) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A waveform [C, S] of audio-like values (sines plus noise, |x| < 1).
Tensor test_waveform(int64_t C, int64_t S, uint64_t seed) {
  std::mt19937 g(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::normal_distribution<float> n(0.f, 0.05f);
  Tensor w = Tensor::empty({C, S}, DType::F32);
  for (int64_t c = 0; c < C; ++c) {
    const float f = 200.f + 3000.f * u(g), ph = 6.f * u(g);
    for (int64_t t = 0; t < S; ++t)
      w.ptr<float>()[c * S + t] = 0.5f * std::sin(6.2831853f * f * float(t) / 32000.f + ph) + n(g);
  }
  return w;
}

std::unique_ptr<AudioVaeEncoder> random_encoder(Backend& be, const std::string& dir, const AudioVaeConfig& c,
                                                uint64_t seed) {
  write_random_audio_vae(dir, c, seed, /*with_encoder=*/true);
  return AudioVaeEncoder::load(be, audio_vae_component_at(dir));
}

double rel_l2_to(const Tensor& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num += (a.at(i) - ref[i]) * (a.at(i) - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// The definition of pooled_causal_attention (backend.h) in float64.
std::vector<double> ref_pooled_attention(const Tensor& qkv, int64_t batch, int64_t heads, double scale, int64_t P) {
  const int64_t rows = qkv.dim(0), W = qkv.dim(1), T = rows / batch, D = W / 3, Dh = D / heads;
  std::vector<double> y(rows * P);
  auto at = [&](int64_t r, int64_t c) { return qkv.at(r * W + c); };
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t first = r / T * T;
    std::vector<double> m(Dh, 0.0);
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> s;
      double mx = -1e300;
      for (int64_t j = first; j <= r; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += at(r, h * Dh + d) * at(j, D + h * Dh + d);
        s.push_back(scale * dot);
        mx = std::max(mx, s.back());
      }
      double sum = 0;
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (int64_t j = first; j <= r; ++j)
        for (int64_t d = 0; d < Dh; ++d) m[d] += s[j - first] / sum * at(j, 2 * D + h * Dh + d);
    }
    for (int64_t i = 0; i < P; ++i) {
      const int64_t a = (i * Dh) / P, b = ((i + 1) * Dh + P - 1) / P;  // PyTorch's adaptive_avg_pool1d bins
      double acc = 0;
      for (int64_t d = a; d < b; ++d) acc += m[d] / double(heads);
      y[r * P + i] = acc / double(b - a);
    }
  }
  return y;
}

std::vector<double> ref_snake(const Tensor& x, const Tensor& alpha) {
  const int64_t C = x.dim(1), T = x.dim(2);
  std::vector<double> y(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double a = alpha.at((i / T) % C), v = x.at(i), s = std::sin(a * v);
    y[i] = v + s * s / (a + 1e-9);
  }
  return y;
}

struct AttentionCase {
  int64_t batch, T, heads, Dh, P;
};
// Heads pooled evenly (16 → 8, 256 → 32), onto overlapping bins (10 → 8, 7 → 3), onto more bins than features
// (4 → 6); one row; sequences longer than the CUDA kernel's 128-key chunk.
const AttentionCase kAttentionCases[] = {{2, 5, 2, 16, 8},  {1, 1, 3, 10, 8}, {2, 9, 4, 10, 8}, {1, 7, 1, 7, 3},
                                         {2, 4, 2, 4, 6},   {1, 3, 8, 256, 32}, {2, 300, 2, 16, 8}};

// A backend whose tensors count their bytes: live now and the peak since reset (the CPU backend's ops, called
// directly, so that no default implementation adds its staging copies).
class CountingBackend final : public CpuForwardingBackend {
 public:
  std::string name() const override { return "counting"; }
  Tensor empty(const Shape& s, DType dt) override { return counted(CpuForwardingBackend::empty(s, dt)); }
  Tensor upload(const Tensor& h, DType dt) override { return counted(CpuForwardingBackend::upload(h, dt)); }
  void conv1d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t s, int64_t p, int64_t d, Tensor& y) override {
    cpu_->conv1d(x, w, b, s, p, d, y);
  }
  void snake(const Tensor& x, const Tensor& a, Tensor& y) override { cpu_->snake(x, a, y); }
  void transpose_last_two(const Tensor& x, Tensor& y) override { cpu_->transpose_last_two(x, y); }
  void multiply(Tensor& x, const Tensor& y) override { cpu_->multiply(x, y); }
  void pooled_causal_attention(const Tensor& qkv, int64_t b, int64_t h, float s, Tensor& y) override {
    cpu_->pooled_causal_attention(qkv, b, h, s, y);
  }
  uint64_t live() const { return *live_; }
  uint64_t peak() const { return *peak_; }
  void reset_peak() { *peak_ = *live_; }

 private:
  Tensor counted(const Tensor& t) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    *live_ += bytes;
    *peak_ = std::max(*peak_, *live_);
    auto live = live_;
    std::shared_ptr<void> owner(new Tensor(t), [live, bytes](void* p) {
      *live -= bytes;
      delete static_cast<Tensor*>(p);
    });
    return Tensor::view(t.data(), t.shape(), t.dtype(), owner, t.device());
  }
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  std::shared_ptr<uint64_t> live_ = std::make_shared<uint64_t>(0), peak_ = std::make_shared<uint64_t>(0);
};

std::string fixture_root() { return test_source_dir() + "/tests/fixtures/audio_vae_encoder"; }

struct FixtureCase {
  std::string dir, model;
};

// Every fixture case (fails the calling test when there are none).
std::vector<FixtureCase> fixture_cases() {
  std::vector<FixtureCase> cases;
  if (fs::is_directory(fixture_root()))
    for (const auto& e : fs::directory_iterator(fixture_root()))
      if (e.is_directory() && fs::exists(e.path() / "case.json")) {
        const auto j = nlohmann::json::parse(read_text_file(join_path(e.path().string(), "case.json")));
        cases.push_back({e.path().string(), join_path(fixture_root(), j.at("model").get<std::string>())});
      }
  std::sort(cases.begin(), cases.end(), [](const FixtureCase& a, const FixtureCase& b) { return a.dir < b.dir; });
  return cases;
}

Tensor fixture_tensor(const std::string& dir, const std::string& file, const std::string& name) {
  return SafetensorsFile::open(join_path(dir, file))->tensor(name);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The encoder's backend ops on the CPU.

TEST(AudioVaeEncoderOps, SnakeMatchesFloat64Definition) {
  auto be = make_cpu_backend();
  std::mt19937 g(1);
  for (Shape s : {Shape{1, 1, 1}, Shape{2, 3, 17}, Shape{2, 64, 300}}) {
    const Tensor x = randn(s, g, 2.f), alpha = randn({s[1]}, g, 0.3f);
    for (int64_t i = 0; i < alpha.numel(); ++i) alpha.ptr<float>()[i] += 1.f;  // raw alphas around 1
    Tensor y = Tensor::empty(s, DType::F32);
    be->snake(x, alpha, y);
    const std::vector<double> ref = ref_snake(x, alpha);
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.ptr<float>()[i], ref[i], 2e-6 * (1 + std::fabs(ref[i])));
    Tensor inplace = x.clone();
    be->snake(inplace, alpha, inplace);  // y may be x
    EXPECT_TRUE(bit_equal(inplace, y));
  }
  Tensor x = Tensor::zeros({1, 2, 4}, DType::F32), y = Tensor::empty({1, 2, 4}, DType::F32);
  EXPECT_THROW(be->snake(x, Tensor::zeros({3}, DType::F32), y), Error);  // one alpha per channel
  Tensor y2 = Tensor::empty({1, 2, 5}, DType::F32);
  EXPECT_THROW(be->snake(x, Tensor::zeros({2}, DType::F32), y2), Error);  // shape
}

TEST(AudioVaeEncoderOps, TransposeAndMultiplyAreExact) {
  auto be = make_cpu_backend();
  std::mt19937 g(2);
  const Tensor x = randn({2, 5, 7}, g);
  Tensor y = Tensor::empty({2, 7, 5}, DType::F32);
  be->transpose_last_two(x, y);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t m = 0; m < 5; ++m)
      for (int64_t n = 0; n < 7; ++n) ASSERT_EQ(y.ptr<float>()[(b * 7 + n) * 5 + m], x.ptr<float>()[(b * 5 + m) * 7 + n]);
  Tensor wrong = Tensor::empty({2, 5, 7}, DType::F32);
  EXPECT_THROW(be->transpose_last_two(x, wrong), Error);
  Tensor self = x.clone();
  EXPECT_THROW(be->transpose_last_two(self, self), Error);  // not in place (and the shapes differ)

  Tensor a = randn({3, 11}, g), b = randn({33}, g), prod = a.clone();
  be->multiply(prod, b);
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(prod.ptr<float>()[i], a.ptr<float>()[i] * b.ptr<float>()[i]);
  EXPECT_THROW(be->multiply(prod, Tensor::zeros({32}, DType::F32)), Error);
}

TEST(AudioVaeEncoderOps, PooledCausalAttentionMatchesFloat64Definition) {
  auto be = make_cpu_backend();
  std::mt19937 g(3);
  for (const AttentionCase& c : kAttentionCases) {
    const Tensor qkv = randn({c.batch * c.T, 3 * c.heads * c.Dh}, g);
    const float scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
    Tensor y = Tensor::empty({c.batch * c.T, c.P}, DType::F32);
    be->pooled_causal_attention(qkv, c.batch, c.heads, scale, y);
    EXPECT_LE(rel_l2_to(y, ref_pooled_attention(qkv, c.batch, c.heads, scale, c.P)), 1e-6)
        << "batch " << c.batch << " T " << c.T << " heads " << c.heads << " x " << c.Dh << " -> " << c.P;
  }
  // Causality and independent sequences: changing the last row of sequence 0 moves only that row's output.
  const Tensor qkv = randn({8, 3 * 2 * 4}, g);
  Tensor y0 = Tensor::empty({8, 3}, DType::F32), y1 = Tensor::empty({8, 3}, DType::F32);
  be->pooled_causal_attention(qkv, 2, 2, 0.5f, y0);
  Tensor moved = qkv.clone();
  for (int64_t c = 0; c < moved.dim(1); ++c) moved.ptr<float>()[3 * moved.dim(1) + c] += 1.f;
  be->pooled_causal_attention(moved, 2, 2, 0.5f, y1);
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t i = 0; i < 3; ++i) {
      const bool same = y0.ptr<float>()[r * 3 + i] == y1.ptr<float>()[r * 3 + i];
      EXPECT_EQ(same, r != 3) << "row " << r;
    }
  EXPECT_THROW(be->pooled_causal_attention(qkv, 3, 2, 0.5f, y0), Error);  // 8 rows do not split into 3
  EXPECT_THROW(be->pooled_causal_attention(qkv, 2, 5, 0.5f, y0), Error);  // 24 channels are not 3 x 5 heads
  Tensor short_y = Tensor::empty({7, 3}, DType::F32);
  EXPECT_THROW(be->pooled_causal_attention(qkv, 2, 2, 0.5f, short_y), Error);
}

TEST(AudioVaeEncoderOps, BackendDefaultsRoundTripThroughTheCpuBackend) {
  // A backend without its own kernels for these ops (the Backend defaults) gives the CPU backend's results.
  class Defaults final : public CpuForwardingBackend {
   public:
    std::string name() const override { return "defaults"; }
  } be;
  auto cpu = make_cpu_backend();
  std::mt19937 g(4);
  const Tensor x = randn({2, 3, 9}, g), alpha = randn({3}, g);
  Tensor a = Tensor::empty(x.shape(), DType::F32), b = Tensor::empty(x.shape(), DType::F32);
  be.snake(x, alpha, a);
  cpu->snake(x, alpha, b);
  EXPECT_TRUE(bit_equal(a, b));
  Tensor ta = Tensor::empty({2, 9, 3}, DType::F32), tb = Tensor::empty({2, 9, 3}, DType::F32);
  be.transpose_last_two(x, ta);
  cpu->transpose_last_two(x, tb);
  EXPECT_TRUE(bit_equal(ta, tb));
  Tensor ma = x.clone(), mb = x.clone();
  be.multiply(ma, a);
  cpu->multiply(mb, a);
  EXPECT_TRUE(bit_equal(ma, mb));
  const Tensor qkv = randn({6, 12}, g);
  Tensor pa = Tensor::empty({6, 2}, DType::F32), pb = Tensor::empty({6, 2}, DType::F32);
  be.pooled_causal_attention(qkv, 2, 2, 0.7f, pa);
  cpu->pooled_causal_attention(qkv, 2, 2, 0.7f, pb);
  EXPECT_TRUE(bit_equal(pa, pb));
}

// conv1d_snake's default (every backend without its own: the CPU's): conv1d, residual_add and snake in turn, their
// bits, for every aliasing the encoder's trunk uses (act separate, act = y, act = x).
struct ConvSnakeCase {
  int64_t B, Cin, Cout, T, k, s, p, d;
  bool residual;
  int act;  // 0: a tensor of its own, 1: y, 2: x (Cin = Cout, same length)
};
// The trunk's kinds: a dilated k7 unit conv (act in place), the pointwise conv with its shortcut (act over x, or in
// place after a block's last unit), a strided down conv (kernel 2s, padding ⌈s/2⌉; act separate or in place),
// block.0 (one input channel); odd lengths and lengths of a multiple of 4 (the CUDA epilogue's vector path).
const ConvSnakeCase kConvSnakeCases[] = {
    {2, 6, 6, 1001, 7, 1, 9, 3, false, 1},  {2, 6, 6, 1001, 1, 1, 0, 1, true, 2}, {2, 6, 6, 1000, 1, 1, 0, 1, true, 1},
    {2, 6, 12, 1000, 8, 4, 2, 1, false, 0}, {2, 1, 6, 4001, 7, 1, 3, 1, false, 0}, {1, 8, 16, 1003, 10, 5, 3, 1, false, 1},
    {2, 6, 6, 64, 7, 1, 27, 9, false, 1},   {1, 4, 4, 1, 7, 1, 3, 1, true, 0}};

std::string conv_snake_name(const ConvSnakeCase& c) {
  return cat("B", c.B, " Cin", c.Cin, " Cout", c.Cout, " T", c.T, " k", c.k, " s", c.s, " p", c.p, " d", c.d,
             c.residual ? " +shortcut" : "", c.act == 0 ? " act separate" : c.act == 1 ? " act = y" : " act = x");
}

TEST(AudioVaeEncoderOps, Conv1dSnakeIsConvThenShortcutThenSnake) {
  auto be = make_cpu_backend();
  std::mt19937 g(7);
  for (const ConvSnakeCase& c : kConvSnakeCases) {
    const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
    const Tensor x = randn({c.B, c.Cin, c.T}, g), w = randn({c.Cout, c.Cin, c.k}, g, 0.3f), b = randn({c.Cout}, g);
    const Tensor alpha = randn({c.Cout}, g, 0.3f, 1.f), res = randn({c.B, c.Cout, To}, g);
    Tensor y_ref = Tensor::empty({c.B, c.Cout, To}, DType::F32), act_ref = Tensor::empty(y_ref.shape(), DType::F32);
    be->conv1d(x, w, &b, c.s, c.p, c.d, y_ref);
    if (c.residual) be->residual_add(y_ref, res, nullptr);
    be->snake(y_ref, alpha, act_ref);
    Tensor xin = x.clone(), y = Tensor::empty(y_ref.shape(), DType::F32), own = Tensor::empty(y_ref.shape(), DType::F32);
    Tensor& act = c.act == 0 ? own : c.act == 1 ? y : xin;
    be->conv1d_snake(xin, w, &b, c.s, c.p, c.d, c.residual ? &res : nullptr, alpha, y, act);
    EXPECT_TRUE(bit_equal(act, act_ref)) << conv_snake_name(c);
    if (c.act != 1) {
      EXPECT_TRUE(bit_equal(y, y_ref)) << conv_snake_name(c);
    }
  }
  std::mt19937 g2(8);
  const Tensor x = randn({1, 2, 10}, g2), w = randn({2, 2, 3}, g2), b = randn({2}, g2), alpha = randn({2}, g2);
  Tensor y = Tensor::empty({1, 2, 10}, DType::F32), act = Tensor::empty({1, 2, 10}, DType::F32);
  const Tensor short_res = Tensor::zeros({1, 2, 9}, DType::F32);
  EXPECT_THROW(be->conv1d_snake(x, w, &b, 1, 1, 1, &short_res, alpha, y, act), Error);  // the shortcut's shape
  Tensor short_act = Tensor::empty({1, 2, 9}, DType::F32);
  EXPECT_THROW(be->conv1d_snake(x, w, &b, 1, 1, 1, nullptr, alpha, y, short_act), Error);  // act's shape
  EXPECT_THROW(be->conv1d_snake(x, w, &b, 1, 1, 1, nullptr, Tensor::zeros({3}, DType::F32), y, act), Error);
}

// [B, M, N] → [B, N, M] on the host.
Tensor host_transposed(const Tensor& t) {
  auto cpu = make_cpu_backend();
  Tensor y = Tensor::empty({t.dim(0), t.dim(2), t.dim(1)}, t.dtype());
  cpu->transpose_last_two(t, y);
  return y;
}

TEST(AudioVaeEncoderOps, ChannelsLastFormsAreTheChannelsFirstOpsTransposed) {
  // The Backend defaults of conv1d_nlc / conv1d_snake_nlc (the CPU's): the channels-first ops' bits, transposed.
  auto be = make_cpu_backend();
  EXPECT_FALSE(be->prefers_channels_last_conv1d());
  std::mt19937 g(9);
  for (const ConvSnakeCase& c : kConvSnakeCases) {
    const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
    const Tensor x = randn({c.B, c.Cin, c.T}, g), w = randn({c.Cout, c.Cin, c.k}, g, 0.3f), b = randn({c.Cout}, g);
    const Tensor alpha = randn({c.Cout}, g, 0.3f, 1.f), res = randn({c.B, c.Cout, To}, g);
    Tensor y_ref = Tensor::empty({c.B, c.Cout, To}, DType::F32), act_ref = Tensor::empty(y_ref.shape(), DType::F32);
    be->conv1d_snake(x, w, &b, c.s, c.p, c.d, c.residual ? &res : nullptr, alpha, y_ref, act_ref);
    const Tensor res_t = host_transposed(res);
    Tensor xin = host_transposed(x), y = Tensor::empty({c.B, To, c.Cout}, DType::F32);
    Tensor own = Tensor::empty(y.shape(), DType::F32);
    Tensor& act = c.act == 0 ? own : c.act == 1 ? y : xin;
    be->conv1d_snake_nlc(xin, host_transposed(w), &b, c.s, c.p, c.d, c.residual ? &res_t : nullptr, alpha, y, act);
    EXPECT_TRUE(bit_equal(act, host_transposed(act_ref))) << conv_snake_name(c);
    if (c.act != 1) {
      EXPECT_TRUE(bit_equal(y, host_transposed(y_ref))) << conv_snake_name(c);
    }
    Tensor plain = Tensor::empty(y.shape(), DType::F32), plain_ref = Tensor::empty(y_ref.shape(), DType::F32);
    be->conv1d(x, w, &b, c.s, c.p, c.d, plain_ref);
    be->conv1d_nlc(host_transposed(x), host_transposed(w), &b, c.s, c.p, c.d, plain);
    EXPECT_TRUE(bit_equal(plain, host_transposed(plain_ref))) << conv_snake_name(c);
  }
  const Tensor x = Tensor::zeros({1, 10, 2}, DType::F32), w = Tensor::zeros({2, 3, 2}, DType::F32);
  Tensor wrong = Tensor::empty({1, 2, 10}, DType::F32);  // channels-first output
  EXPECT_THROW(be->conv1d_nlc(x, w, nullptr, 1, 1, 1, wrong), Error);
}

// ---------------------------------------------------------------------------------------------------------------
// Parity with the reference (diffusers on tiny random models).

TEST(AudioVaeEncoderFixtures, PosteriorMeanMatchesReferenceFloat64) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE encoder fixtures under " << fixture_root()
                              << " (tools/reference/make_fixtures.py --only audio_vae_encoder makes them)";
  auto be = make_cpu_backend();
  for (const FixtureCase& fc : cases) {
    auto enc = AudioVaeEncoder::load(*be, audio_vae_component_at(fc.model));
    const Tensor waveform = fixture_tensor(fc.dir, "case.safetensors", "waveform");
    const Tensor mean = enc->encode(waveform);
    const Tensor ref64 = fixture_tensor(fc.dir, "expected.safetensors", "mean_f64");
    const Tensor ref32 = fixture_tensor(fc.dir, "expected.safetensors", "mean_f32");
    ASSERT_EQ(mean.shape(), ref64.shape()) << fc.dir;
    EXPECT_EQ(mean.dim(2), enc->latents_for(waveform.dim(1))) << fc.dir;
    // Acceptance: within 1e-5 of the reference's float64 (float32 rounding through the trunk is ~1e-6).
    const double r64 = rel_l2(mean, ref64), r32 = rel_l2(mean, ref32);
    std::printf("[ audio enc ] %s: rel L2 vs f64 %.3g, vs the reference's f32 %.3g\n",
                fs::path(fc.dir).filename().c_str(), r64, r32);
    EXPECT_LE(r64, 1e-5) << fc.dir;
    EXPECT_LE(r32, 1e-5) << fc.dir;  // two float32 implementations differing in summation order
  }
}

TEST(AudioVaeEncoderFixtures, ReferenceRowsMatchThePipelineBlock) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE encoder fixtures under " << fixture_root();
  auto be = make_cpu_backend();
  int pipeline_cases = 0;
  for (const FixtureCase& fc : cases) {
    auto enc = AudioVaeEncoder::load(*be, audio_vae_component_at(fc.model));
    // The source as the reference's setup step got it (mono for the *_mono_* cases): encode_reference upmixes.
    const Tensor source = fixture_tensor(fc.dir, "case.safetensors", "source");
    const Tensor rows = enc->encode_reference(source);
    const Tensor ref64 = fixture_tensor(fc.dir, "expected.safetensors", "rows_f64");
    ASSERT_EQ(rows.shape(), ref64.shape()) << fc.dir;
    EXPECT_EQ(rows.dim(0), 2 * enc->latents_for(source.dim(1))) << fc.dir;
    EXPECT_LE(rel_l2(rows, ref64), 1e-5) << fc.dir;
    auto expected = SafetensorsFile::open(join_path(fc.dir, "expected.safetensors"));
    if (expected->find("rows_pipeline")) {
      EXPECT_LE(rel_l2(rows, expected->tensor("rows_pipeline")), 1e-5) << fc.dir;
      ++pipeline_cases;
    }
    if (source.dim(0) == 1) {  // the two channel blocks of an upmixed mono source are the same rows
      const int64_t half = rows.numel() / 2;
      EXPECT_TRUE(std::equal(rows.ptr<float>(), rows.ptr<float>() + half, rows.ptr<float>() + half)) << fc.dir;
    }
  }
  EXPECT_GT(pipeline_cases, 0) << "no fixture holds the reference pipeline block's rows";
}

TEST(AudioVaeEncoderFixtures, ManifestCoversTheReferenceStateDict) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE encoder fixtures under " << fixture_root();
  std::set<std::string> models;
  for (const FixtureCase& fc : cases) models.insert(fc.model);
  for (const std::string& model : models) {
    const Component comp = audio_vae_component_at(model);
    const Checkpoint ck = Checkpoint::open(comp.weights);
    std::map<std::string, Shape> manifest;
    for (const TensorSpec& s : audio_vae_manifest(load_audio_vae_config(comp), /*with_encoder=*/true))
      manifest[s.name] = s.shape;
    for (const std::string& n : ck.names()) {
      ASSERT_TRUE(manifest.count(n)) << model << ": the reference stores '" << n << "', the manifest lacks it";
      EXPECT_EQ(shape_str(manifest[n]), shape_str(ck.info(n).shape)) << model << ": " << n;
    }
    EXPECT_EQ(manifest.size(), ck.names().size()) << model;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The encoder on random checkpoints (no fixture needed).

TEST(AudioVaeEncoder, ShapesPaddingAndChannelLayout) {
  auto be = make_cpu_backend();
  TempDir tmp("shapes");
  const AudioVaeConfig c = odd_config();
  auto enc = random_encoder(*be, tmp.path, c, 11);
  EXPECT_EQ(enc->config().hop_length(), 40);
  for (int64_t S : {1, 39, 40, 41, 400, 1234}) EXPECT_EQ(enc->latents_for(S), (S + 39) / 40) << S;
  const Tensor stereo = test_waveform(2, 1234, 12);
  const Tensor mean = enc->encode(stereo);
  ASSERT_EQ(mean.shape(), (Shape{2, 8, 31}));
  // Zero padding: the waveform with its pad written out encodes identically.
  Tensor padded = Tensor::zeros({2, 1240}, DType::F32);
  for (int64_t ch = 0; ch < 2; ++ch)
    std::copy_n(stereo.ptr<float>() + ch * 1234, 1234, padded.ptr<float>() + ch * 1240);
  EXPECT_TRUE(bit_equal(enc->encode(padded), mean));
  // Channels are independent batch items: channel 1 alone gives batch item 1.
  Tensor right = Tensor::empty({1, 1234}, DType::F32);
  std::copy_n(stereo.ptr<float>() + 1234, 1234, right.ptr<float>());
  const Tensor alone = enc->encode(right);
  ASSERT_EQ(alone.shape(), (Shape{1, 8, 31}));
  EXPECT_LE(max_abs_diff(alone, Tensor::from_f32({1, 8, 31}, std::vector<float>(mean.ptr<float>() + 8 * 31,
                                                                               mean.ptr<float>() + 16 * 31))),
            1e-6);
  // Rows: channel-major, normalized per latent channel.
  const Tensor rows = enc->encode_reference(stereo);
  ASSERT_EQ(rows.shape(), (Shape{62, 8}));
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t t = 0; t < 31; ++t)
      for (int64_t k = 0; k < 8; ++k) {
        const float m = mean.ptr<float>()[(ch * 8 + k) * 31 + t];
        const float want = (m - float(c.latents_mean[k])) / float(c.latents_std[k]);
        ASSERT_EQ(rows.ptr<float>()[(ch * 31 + t) * 8 + k], want) << ch << " " << t << " " << k;
      }
  // Mono is duplicated onto both channels: a mono reference gives channel 1's rows twice.
  const Tensor mono_rows = enc->encode_reference(right);
  ASSERT_EQ(mono_rows.shape(), (Shape{62, 8}));
  EXPECT_TRUE(std::equal(mono_rows.ptr<float>(), mono_rows.ptr<float>() + 31 * 8, mono_rows.ptr<float>() + 31 * 8));
  EXPECT_LE(max_abs_diff(mono_rows.slice(31, 62), rows.slice(31, 62)), 1e-5);
}

// The random encoder of the benchmarks (AudioVaeEncoder::random): the loaded encoder's shapes, finite and varied
// latents, one model per seed.
TEST(AudioVaeEncoder, RandomEncoderIsDeterministicAndFinite) {
  auto be = make_cpu_backend();
  AudioVaeConfig c = odd_config();
  c.latents_mean.clear();  // become 0 / 1
  c.latents_std.clear();
  auto a = AudioVaeEncoder::random(*be, c, 5);
  EXPECT_EQ(a->config().latents_mean, std::vector<double>(8, 0.0));
  EXPECT_EQ(a->config().latents_std, std::vector<double>(8, 1.0));
  EXPECT_EQ(a->latents_for(1234), 31);
  const Tensor w = test_waveform(2, 1234, 13);
  const Tensor rows = a->encode_reference(w);
  ASSERT_EQ(rows.shape(), (Shape{62, 8}));
  double lo = rows.at(0), hi = rows.at(0);
  for (int64_t i = 0; i < rows.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(rows.at(i))) << i;
    lo = std::min(lo, rows.at(i));
    hi = std::max(hi, rows.at(i));
  }
  EXPECT_LT(lo, hi);
  EXPECT_TRUE(bit_equal(AudioVaeEncoder::random(*be, c, 5)->encode_reference(w), rows));
  EXPECT_FALSE(bit_equal(AudioVaeEncoder::random(*be, c, 6)->encode_reference(w), rows));
}

TEST(AudioVaeEncoder, OriginalLayoutEncodesLikeDiffusers) {
  auto be = make_cpu_backend();
  const AudioVaeConfig c = unit_audio_vae_config();
  const auto weights = random_audio_vae_weights(c, 21, /*with_encoder=*/true);
  TempDir diff("layout_diffusers"), orig("layout_original");
  write_file_atomic(join_path(diff.path, "config.json"), audio_vae_config_json(c));
  write_safetensors(join_path(diff.path, "model.safetensors"), weights);
  nlohmann::json kwargs = nlohmann::json::parse(audio_vae_config_json(c));
  kwargs.erase("latent_channels");
  kwargs["vae_latent_channels"] = c.latent_channels;
  write_file_atomic(join_path(orig.path, "metadata.json"), nlohmann::json{{"metadata", {{"kwargs", kwargs}}}}.dump());
  write_file_atomic(join_path(orig.path, "config.json"),
                    nlohmann::json{{"latent_channels", c.latent_channels},
                                   {"sample_rate", c.sampling_rate},
                                   {"latents_mean", c.latents_mean},
                                   {"latents_std", c.latents_std}}
                        .dump());
  write_safetensors(join_path(orig.path, "model.safetensors"), weights);
  ASSERT_EQ(audio_vae_component_at(orig.path).layout, Layout::Original);
  const Tensor w = test_waveform(2, 50, 22);
  const Tensor a = AudioVaeEncoder::load(*be, audio_vae_component_at(diff.path))->encode_reference(w);
  const Tensor b = AudioVaeEncoder::load(*be, audio_vae_component_at(orig.path))->encode_reference(w);
  EXPECT_TRUE(bit_equal(a, b));
}

TEST(AudioVaeEncoder, RejectsBadWaveformsWithOneSentence) {
  auto be = make_cpu_backend();
  TempDir tmp("bad_input");
  auto enc = random_encoder(*be, tmp.path, unit_audio_vae_config(), 3);
  auto message = [&](const Tensor& w) -> std::string {
    try {
      enc->encode_reference(w);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NO_THROW(enc->encode(Tensor::zeros({2, 5}, DType::F32)));
  EXPECT_NO_THROW(enc->encode(Tensor::zeros({1, 5}, DType::F64)));
  EXPECT_NE(message(Tensor::zeros({3, 8}, DType::F32)).find("1 (mono) or 2 (stereo) channels, got 3"),
            std::string::npos);
  EXPECT_NE(message(Tensor::zeros({2, 0}, DType::F32)).find("is empty"), std::string::npos);
  EXPECT_NE(message(Tensor::zeros({8}, DType::F32)).find("[channels (1 or 2), samples]"), std::string::npos);
  EXPECT_NE(message(Tensor::zeros({2, 8}, DType::I32)).find("float tensor"), std::string::npos);
  Tensor nan = Tensor::zeros({2, 8}, DType::F32);
  nan.ptr<float>()[8 + 5] = NAN;
  EXPECT_NE(message(nan).find("sample 5 of channel 1 is nan"), std::string::npos) << message(nan);
  // At most 15 s at the VAE's rate: exactly 15 s passes the check (encoded on the tiny model), one sample more fails
  // before any work.
  const int64_t limit = kMaxReferenceAudioSeconds * enc->config().sampling_rate;
  EXPECT_NE(message(Tensor::zeros({1, limit + 1}, DType::F32)).find("at most 15 s long (480000 samples at 32000 Hz)"),
            std::string::npos)
      << message(Tensor::zeros({1, limit + 1}, DType::F32));
  EXPECT_NO_THROW(check_audio_waveform(enc->config(), Tensor::zeros({2, limit}, DType::F32)));
  for (const Tensor& bad : {Tensor::zeros({3, 8}, DType::F32), Tensor::zeros({2, limit + 1}, DType::F32)})
    EXPECT_THROW(enc->encode(bad), Error);
}

TEST(AudioVaeEncoder, LoadNamesMissingTensorsAndBadGeometry) {
  auto be = make_cpu_backend();
  const AudioVaeConfig c = unit_audio_vae_config();
  auto weights = random_audio_vae_weights(c, 4, /*with_encoder=*/true);
  auto write = [&](const std::string& dir, const AudioVaeConfig& cfg, const std::vector<NamedTensor>& w) {
    write_file_atomic(join_path(dir, "config.json"), audio_vae_config_json(cfg));
    write_safetensors(join_path(dir, "model.safetensors"), w);
  };
  {
    TempDir tmp("missing");
    auto fewer = weights;
    fewer.erase(std::find_if(fewer.begin(), fewer.end(), [](const NamedTensor& t) {
      return t.name == "encoder.block.2.block.1.block.1.weight_v";
    }));
    write(tmp.path, c, fewer);
    try {
      AudioVaeEncoder::load(*be, audio_vae_component_at(tmp.path));
      FAIL() << "a missing tensor was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("encoder.block.2.block.1.block.1.weight_v"), std::string::npos) << e.what();
    }
  }
  {
    TempDir tmp("decoder_only");  // a decoder checkpoint serves decode, not encode
    write(tmp.path, c, random_audio_vae_weights(c, 4, /*with_encoder=*/false));
    EXPECT_NO_THROW(AudioVaeDecoder::load(*be, audio_vae_component_at(tmp.path)));
    EXPECT_THROW(AudioVaeEncoder::load(*be, audio_vae_component_at(tmp.path)), Error);
  }
  {
    TempDir tmp("misshapen");
    auto bad = weights;
    for (NamedTensor& t : bad)
      if (t.name == "pre_block.attn.qkv.weight") t.tensor = Tensor::zeros({3 * 32, 31}, DType::F32);
    write(tmp.path, c, bad);
    EXPECT_THROW(AudioVaeEncoder::load(*be, audio_vae_component_at(tmp.path)), Error);
  }
  {
    TempDir tmp("heads");
    AudioVaeConfig odd = c;
    odd.num_attention_heads = 3;  // 32 features do not split into 3 heads
    write(tmp.path, odd, weights);
    try {
      AudioVaeEncoder::load(*be, audio_vae_component_at(tmp.path));
      FAIL() << "latent_dim 32 with 3 heads was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("multiple of 'num_attention_heads' (3)"), std::string::npos) << e.what();
    }
  }
}

TEST(AudioVaeEncoder, WeightBytesAtTheReleaseConfig) {
  // spec/audio_vae.md §7: encoder 73,714,816 + pre_block 12,668,256 + mean_proj 1,056 parameters, plus the 2,048
  // zero key biases (a buffer, part of the fused qkv bias here); weight norm folded drops one weight_g value per
  // output channel of the 37 WN convs (64 + Σ_b 8·C_b + 2048 = 17,984); logs_proj is never evaluated.
  AudioVaeConfig release;
  const uint64_t floats =
      73714816ull + 12668256ull + 1056ull + 2048ull - (64 + 8 * (64 + 128 + 256 + 512 + 1024) + 2048);
  EXPECT_EQ(AudioVaeEncoder::weight_bytes(release), floats * 4);
  EXPECT_EQ(AudioVaeEncoder::weight_bytes(release), 345472768ull);  // 329.5 MiB
  // Working memory at the release's rates: the first levels' residual units, 3 · 64 · padded samples floats per
  // channel — 15 s of stereo: 3 · 64 · 480,000 · 2 · 4 B = 737.3 MB.
  EXPECT_EQ(AudioVaeEncoder::working_bytes(release, 2, 480000), 3ull * 64 * 480000 * 2 * 4);
  EXPECT_EQ(AudioVaeEncoder::working_bytes(release, 1, 479201), 3ull * 64 * 480000 * 4);  // padded to 600 hops
}

TEST(AudioVaeEncoder, WeightAndWorkingBytesAreWhatEncodeHolds) {
  // Counted on a backend whose tensors report their bytes: the loaded weights are weight_bytes, and the peak of live
  // activations during an encode is working_bytes.
  for (const AudioVaeConfig& c : {unit_audio_vae_config(), odd_config()}) {
    CountingBackend be;
    TempDir tmp("counting" + std::to_string(c.hop_length()));
    auto enc = random_encoder(be, tmp.path, c, 31);
    EXPECT_EQ(be.live(), AudioVaeEncoder::weight_bytes(c)) << "hop " << c.hop_length();
    for (auto [C, S] : {std::pair<int64_t, int64_t>{2, 250}, {1, 37}, {2, 1}}) {
      const uint64_t weights = be.live();
      be.reset_peak();
      enc->encode(test_waveform(C, S, 32));
      EXPECT_EQ(be.live(), weights) << "an activation outlived encode";
      EXPECT_EQ(be.peak() - weights, AudioVaeEncoder::working_bytes(c, C, S))
          << "hop " << c.hop_length() << " C " << C << " S " << S;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// CUDA against the CPU backend

#ifndef H3_HAVE_CUDA
TEST(AudioVaeEncoderCuda, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

namespace {

// Tolerances (rel L2) of a CUDA encode: the f32 twin (H3_DISABLE_TF32_CONV=1) differs from the CPU backend and the
// reference's float64 in float32 rounding only; the TF32 default as EncodeMatchesCpu explains.
constexpr double kF32Tol = 1e-5;
constexpr double kTf32Tol = 5e-3;

class AudioVaeEncoderCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device on this machine";
    gpu = make_cuda_backend();
    cpu = make_cpu_backend();
    ScopedEnv off("H3_DISABLE_TF32_CONV", "1");
    f32 = make_cuda_backend();
  }
  Tensor up(const Tensor& h) { return gpu->upload(h, DType::F32); }
  Tensor poisoned(const Shape& s) {
    Tensor t = gpu->empty(s, DType::F32);
    gpu->fill(t, NAN);
    return t;
  }
  static void expect_close(const Tensor& got, const Tensor& ref, double tol, const std::string& what) {
    ASSERT_EQ(got.shape(), ref.shape()) << what;
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_TRUE(std::isfinite(got.ptr<float>()[i])) << what << ": element " << i << " unwritten or non-finite";
    const double r = rel_l2(got, ref);
    std::printf("[ cuda vs cpu ] %s: rel L2 %.3g (tolerance %.3g)\n", what.c_str(), r, tol);
    EXPECT_LE(r, tol) << what;
  }
  std::unique_ptr<Backend> gpu, cpu, f32;
  std::mt19937 rng{20260101};
};

}  // namespace

TEST_F(AudioVaeEncoderCuda, ElementwiseOpsMatchCpu) {
  for (Shape s : {Shape{1, 1, 1}, Shape{2, 5, 1001}, Shape{2, 64, 4096}}) {
    const Tensor x = randn(s, rng, 2.f), alpha = randn({s[1]}, rng, 0.3f);
    Tensor ref = Tensor::empty(s, DType::F32);
    cpu->snake(x, alpha, ref);
    Tensor y = poisoned(s);
    gpu->snake(up(x), up(alpha), y);
    // sinf on the GPU and std::sin on the host agree to an ulp or two: float32 rounding only.
    expect_close(gpu->download(y), ref, 1e-6, cat("snake ", shape_str(s)));
    Tensor inplace = up(x);
    gpu->snake(inplace, up(alpha), inplace);
    EXPECT_TRUE(bit_equal(gpu->download(inplace), gpu->download(y)));
  }
  for (Shape s : {Shape{1, 1, 1}, Shape{2, 33, 65}, Shape{2, 2048, 37}, Shape{1, 31, 600}}) {
    const Tensor x = randn(s, rng);
    Tensor ref = Tensor::empty({s[0], s[2], s[1]}, DType::F32);
    cpu->transpose_last_two(x, ref);
    Tensor y = poisoned({s[0], s[2], s[1]});
    gpu->transpose_last_two(up(x), y);
    EXPECT_TRUE(bit_equal(gpu->download(y), ref)) << shape_str(s);  // a permutation
  }
  const Tensor a = randn({3, 1001}, rng), b = randn({3, 1001}, rng);
  Tensor ref = a.clone();
  cpu->multiply(ref, b);
  Tensor d = up(a);
  gpu->multiply(d, up(b));
  EXPECT_TRUE(bit_equal(gpu->download(d), ref));  // one IEEE product on both sides
}

TEST_F(AudioVaeEncoderCuda, PooledCausalAttentionMatchesCpu) {
  for (const AttentionCase& c : kAttentionCases) {
    const Tensor qkv = randn({c.batch * c.T, 3 * c.heads * c.Dh}, rng);
    const float scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
    Tensor ref = Tensor::empty({c.batch * c.T, c.P}, DType::F32);
    cpu->pooled_causal_attention(qkv, c.batch, c.heads, scale, ref);
    Tensor y = poisoned({c.batch * c.T, c.P});
    gpu->pooled_causal_attention(up(qkv), c.batch, c.heads, scale, y);
    // float32 on both sides; the online softmax and the summation order differ: 1e-6.
    expect_close(gpu->download(y), ref, 1e-6,
                 cat("pooled attention ", c.batch, "x", c.T, " rows, ", c.heads, " heads x ", c.Dh, " -> ", c.P));
  }
}

TEST_F(AudioVaeEncoderCuda, PooledCausalAttentionTiledMatchesTheRowKernel) {
  // The tiled kernel (the default) against its twin and the CPU, at the release's size (600 latents × 2, 8 heads of
  // 256 pooled onto 32) and at the unit cases.
  std::unique_ptr<Backend> rows;
  {
    ScopedEnv off("H3_DISABLE_TILED_POOLED_ATTENTION", "1");
    rows = make_cuda_backend();
  }
  std::vector<AttentionCase> cases(std::begin(kAttentionCases), std::end(kAttentionCases));
  cases.push_back({2, 600, 8, 256, 32});
  cases.push_back({1, 37, 3, 300, 7});  // head_dim over the tiled kernel's 256: the row kernel serves
  for (const AttentionCase& c : cases) {
    const Tensor qkv = randn({c.batch * c.T, 3 * c.heads * c.Dh}, rng);
    const float scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
    const std::string what =
        cat("pooled attention ", c.batch, "x", c.T, " rows, ", c.heads, " heads x ", c.Dh, " -> ", c.P);
    Tensor ref = Tensor::empty({c.batch * c.T, c.P}, DType::F32);
    cpu->pooled_causal_attention(qkv, c.batch, c.heads, scale, ref);
    Tensor y = poisoned({c.batch * c.T, c.P});
    gpu->pooled_causal_attention(up(qkv), c.batch, c.heads, scale, y);
    const Tensor tiled = gpu->download(y);
    expect_close(tiled, ref, 1e-6, what + " (tiled)");
    Tensor y2 = rows->empty({c.batch * c.T, c.P}, DType::F32);
    rows->fill(y2, NAN);
    rows->pooled_causal_attention(rows->upload(qkv, DType::F32), c.batch, c.heads, scale, y2);
    expect_close(tiled, rows->download(y2), 1e-6, what + " (tiled vs the row kernel)");
  }
}

TEST_F(AudioVaeEncoderCuda, Conv1dSnakeFusedMatchesItsTwinBitForBit) {
  // The fused epilogue against conv1d + residual_add + snake (H3_DISABLE_FUSED_CONV_SNAKE=1) with the same
  // convolution algorithm on both sides — the graph heuristic's first (no autotune), and our f32 kernels — then
  // both against the CPU.
  std::unique_ptr<Backend> fused, twin, fused_f32, twin_f32;
  {
    ScopedEnv first("H3_DISABLE_CONV_AUTOTUNE", "1");
    fused = make_cuda_backend();
    ScopedEnv unfused("H3_DISABLE_FUSED_CONV_SNAKE", "1");
    twin = make_cuda_backend();
  }
  {
    ScopedEnv exact("H3_DISABLE_TF32_CONV", "1");
    fused_f32 = make_cuda_backend();
    ScopedEnv unfused("H3_DISABLE_FUSED_CONV_SNAKE", "1");
    twin_f32 = make_cuda_backend();
  }
  struct Pair {
    Backend *fused, *twin;
    double tol;
    const char* name;
  };
  for (const Pair& pair : {Pair{fused.get(), twin.get(), 3e-3, "TF32"}, Pair{fused_f32.get(), twin_f32.get(), 1e-5, "f32"}})
    for (const ConvSnakeCase& c : kConvSnakeCases) {
      const std::string what = cat(conv_snake_name(c), " (", pair.name, ")");
      const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
      const Tensor x = randn({c.B, c.Cin, c.T}, rng), w = randn({c.Cout, c.Cin, c.k}, rng, 0.3f);
      const Tensor b = randn({c.Cout}, rng), alpha = randn({c.Cout}, rng, 0.3f, 1.f);
      const Tensor res = randn({c.B, c.Cout, To}, rng);
      Tensor y_ref = Tensor::empty({c.B, c.Cout, To}, DType::F32), act_ref = Tensor::empty(y_ref.shape(), DType::F32);
      cpu->conv1d(x, w, &b, c.s, c.p, c.d, y_ref);
      if (c.residual) cpu->residual_add(y_ref, res, nullptr);
      cpu->snake(y_ref, alpha, act_ref);
      Tensor got_y[2], got_act[2];
      for (int side = 0; side < 2; ++side) {
        Backend& be = side == 0 ? *pair.fused : *pair.twin;
        Tensor xd = be.upload(x, DType::F32), y = be.empty(y_ref.shape(), DType::F32);
        Tensor own = be.empty(y_ref.shape(), DType::F32);
        be.fill(y, NAN);
        be.fill(own, NAN);
        const Tensor wd = be.upload(w, DType::F32), bd = be.upload(b, DType::F32), ad = be.upload(alpha, DType::F32);
        const Tensor rd = be.upload(res, DType::F32);
        Tensor& act = c.act == 0 ? own : c.act == 1 ? y : xd;
        be.conv1d_snake(xd, wd, &bd, c.s, c.p, c.d, c.residual ? &rd : nullptr, ad, y, act);
        got_y[side] = be.download(y);
        got_act[side] = be.download(act);
      }
      EXPECT_TRUE(bit_equal(got_act[0], got_act[1])) << what;
      if (c.act != 1) {
        EXPECT_TRUE(bit_equal(got_y[0], got_y[1])) << what;
        expect_close(got_y[0], y_ref, pair.tol, what + ": y");
      }
      expect_close(got_act[0], act_ref, pair.tol, what + ": Snake");
    }
}

TEST_F(AudioVaeEncoderCuda, Conv1dEveryAlgorithmChoiceMatchesCpu) {
  // The graph API autotuned (the default), its heuristic's first configuration (H3_DISABLE_CONV_AUTOTUNE=1) and the
  // legacy API (H3_DISABLE_CUDNN_CONV_GRAPH=1) on the trunk's kinds of convolution: cuDNN serves each, twice with
  // the same bits (deterministic algorithms), within a TF32 convolution's rounding of the CPU (one convolution:
  // up to ~6e-4 relative L2; tolerance 2e-3).
  std::unique_ptr<Backend> first, legacy;
  {
    ScopedEnv off("H3_DISABLE_CONV_AUTOTUNE", "1");
    first = make_cuda_backend();
  }
  {
    ScopedEnv off("H3_DISABLE_CUDNN_CONV_GRAPH", "1");
    legacy = make_cuda_backend();
  }
  struct Case {
    int64_t B, Cin, Cout, T, k, s, p, d;
  };
  const Case cases[] = {{2, 1, 16, 4001, 7, 1, 3, 1},    {2, 16, 16, 4001, 7, 1, 27, 9}, {2, 16, 16, 4001, 1, 1, 0, 1},
                        {2, 16, 32, 4000, 10, 5, 3, 1},  {2, 64, 64, 3000, 7, 1, 9, 3},  {2, 64, 128, 3000, 4, 2, 1, 1},
                        {1, 128, 128, 777, 3, 1, 1, 1},  {2, 32, 32, 60, 1, 1, 0, 1}};
  for (const Case& c : cases)
    for (Backend* be : {gpu.get(), first.get(), legacy.get()}) {
      const std::string what = cat("B", c.B, " Cin", c.Cin, " Cout", c.Cout, " T", c.T, " k", c.k, " s", c.s, " p",
                                   c.p, " d", c.d, be == gpu.get() ? " autotuned" : be == first.get() ? " heuristic" : " legacy");
      const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
      const Tensor x = randn({c.B, c.Cin, c.T}, rng);
      const Tensor w = randn({c.Cout, c.Cin, c.k}, rng, 1.f / std::sqrt(static_cast<float>(c.Cin * c.k)));
      const Tensor b = randn({c.Cout}, rng);
      Tensor ref = Tensor::empty({c.B, c.Cout, To}, DType::F32);
      cpu->conv1d(x, w, &b, c.s, c.p, c.d, ref);
      const Tensor xd = be->upload(x, DType::F32), wd = be->upload(w, DType::F32), bd = be->upload(b, DType::F32);
      Tensor y = be->empty({c.B, c.Cout, To}, DType::F32);
      be->fill(y, NAN);
      be->conv1d(xd, wd, &bd, c.s, c.p, c.d, y);
      const Tensor once = be->download(y);
      EXPECT_TRUE(cuda_last_conv_path(*be).starts_with("cudnn-")) << what << ": " << cuda_last_conv_path(*be);
      be->conv1d(xd, wd, &bd, c.s, c.p, c.d, y);
      EXPECT_TRUE(bit_equal(once, be->download(y))) << what << ": not deterministic";
      expect_close(once, ref, 2e-3, what);
    }
}

TEST_F(AudioVaeEncoderCuda, ChannelsLastConvolutionsMatchCpu) {
  // The default CUDA backend prefers channels-last convolutions (cuDNN's NHWC plans, autotuned): conv1d_snake_nlc
  // and conv1d_nlc against the CPU's channels-first ops, transposed, within a TF32 convolution's rounding; twice
  // with the same bits.
  ASSERT_TRUE(gpu->prefers_channels_last_conv1d());
  EXPECT_FALSE(f32->prefers_channels_last_conv1d());  // TF32 off: the channels-first trunk
  {
    ScopedEnv off("H3_DISABLE_CHANNELS_LAST_CONV", "1");
    EXPECT_FALSE(make_cuda_backend()->prefers_channels_last_conv1d());
  }
  for (const ConvSnakeCase& c : kConvSnakeCases) {
    const std::string what = conv_snake_name(c) + " channels-last";
    const int64_t To = conv1d_output_length(c.T, c.k, c.s, c.p, c.d);
    const Tensor x = randn({c.B, c.Cin, c.T}, rng), w = randn({c.Cout, c.Cin, c.k}, rng, 0.3f);
    const Tensor b = randn({c.Cout}, rng), alpha = randn({c.Cout}, rng, 0.3f, 1.f);
    const Tensor res = randn({c.B, c.Cout, To}, rng);
    Tensor y_ref = Tensor::empty({c.B, c.Cout, To}, DType::F32), act_ref = Tensor::empty(y_ref.shape(), DType::F32);
    cpu->conv1d_snake(x, w, &b, c.s, c.p, c.d, c.residual ? &res : nullptr, alpha, y_ref, act_ref);
    const Tensor wd = up(host_transposed(w)), bd = up(b), ad = up(alpha), rd = up(host_transposed(res));
    Tensor got_act[2];
    for (int run = 0; run < 2; ++run) {
      Tensor xd = up(host_transposed(x)), y = poisoned({c.B, To, c.Cout}), own = poisoned({c.B, To, c.Cout});
      Tensor& act = c.act == 0 ? own : c.act == 1 ? y : xd;
      gpu->conv1d_snake_nlc(xd, wd, &bd, c.s, c.p, c.d, c.residual ? &rd : nullptr, ad, y, act);
      got_act[run] = gpu->download(act);
      if (run == 0 && c.act != 1) expect_close(gpu->download(y), host_transposed(y_ref), 3e-3, what + ": y");
    }
    EXPECT_TRUE(bit_equal(got_act[0], got_act[1])) << what << ": not deterministic";
    expect_close(got_act[0], host_transposed(act_ref), 3e-3, what + ": Snake");
    Tensor plain_ref = Tensor::empty(y_ref.shape(), DType::F32);
    cpu->conv1d(x, w, &b, c.s, c.p, c.d, plain_ref);
    Tensor plain = poisoned({c.B, To, c.Cout});
    gpu->conv1d_nlc(up(host_transposed(x)), wd, &bd, c.s, c.p, c.d, plain);
    expect_close(gpu->download(plain), host_transposed(plain_ref), 3e-3, what + ": conv1d_nlc");
  }
}

TEST_F(AudioVaeEncoderCuda, EncodeMatchesCpu) {
  // A release-shaped stack (rates 2, 4, 5, 5: odd strides; 8 heads of 32 pooled onto 16) on 1.5 s of stereo.
  AudioVaeConfig c = unit_audio_vae_config();
  c.encoder_dim = 16;
  c.encoder_rates = {2, 4, 5, 5};
  c.latent_dim = 256;
  c.latent_channels = 16;
  c.num_attention_heads = 8;
  c.decoder_rates = {5, 5, 2, 2, 2};
  c.decoder_kernel_sizes = {9, 9, 4, 4, 4};
  c.decoder_dim = 64;
  c.latents_mean.assign(16, 0.1);
  c.latents_std.assign(16, 0.9);
  TempDir tmp("cuda_encode");
  write_random_audio_vae(tmp.path, c, 41, /*with_encoder=*/true);
  const Tensor w = test_waveform(2, 48000, 42);
  const Tensor ref = AudioVaeEncoder::load(*cpu, audio_vae_component_at(tmp.path))->encode_reference(w);
  // The default: cuDNN's convolutions with TF32 math, as the reference runs them on a GPU. TF32 keeps 10 mantissa
  // bits of each operand (2^-11 relative rounding per product); this trunk chains 2 + 7·4 = 30 convolutions and
  // mean_proj. The fixtures' TF32 emulation (tools/reference/fx_audio_vae_encoder.py: every conv operand rounded to
  // nearest TF32; case.json stats) puts the reference's own TF32 posterior mean 2.6e-4 .. 6.6e-4 (rel L2) from its
  // float64 one on the 2–3-level fixture models; the rows pass through the pre_block's LayerNorms unamplified. The
  // tolerance, 5e-3, leaves room for this deeper stack and for cuDNN rounding its operands otherwise than to nearest.
  const Tensor got = AudioVaeEncoder::load(*gpu, audio_vae_component_at(tmp.path))->encode_reference(w);
  // cuDNN serves (an FMA engine may win the autotune of the small mean_proj, the last convolution).
  EXPECT_TRUE(cuda_last_conv_path(*gpu).starts_with("cudnn-")) << cuda_last_conv_path(*gpu);
  expect_close(got, ref, kTf32Tol, "audio VAE encode (TF32 convolutions), 1.5 s stereo");
  // Every fast path's twin at once (the legacy API's algorithms, the unfused Snake chains, the row attention
  // kernel): the encode as it ran before them.
  {
    ScopedEnv legacy("H3_DISABLE_CUDNN_CONV_GRAPH", "1");
    ScopedEnv unfused("H3_DISABLE_FUSED_CONV_SNAKE", "1");
    ScopedEnv rows("H3_DISABLE_TILED_POOLED_ATTENTION", "1");
    auto twins = make_cuda_backend();
    EXPECT_FALSE(twins->prefers_channels_last_conv1d());  // the legacy API: channels-first
    const Tensor before = AudioVaeEncoder::load(*twins, audio_vae_component_at(tmp.path))->encode_reference(w);
    expect_close(before, ref, kTf32Tol, "audio VAE encode (every twin), 1.5 s stereo");
  }
  {  // the channels-first trunk on the graph API, autotuned, fused (H3_DISABLE_CHANNELS_LAST_CONV=1)
    ScopedEnv off("H3_DISABLE_CHANNELS_LAST_CONV", "1");
    auto first = make_cuda_backend();
    const Tensor cf = AudioVaeEncoder::load(*first, audio_vae_component_at(tmp.path))->encode_reference(w);
    expect_close(cf, ref, kTf32Tol, "audio VAE encode (channels-first trunk), 1.5 s stereo");
  }
  // The f32 twin: float32 on both sides, differing in summation order only (the CPU path is 1e-7 .. 4e-7 from the
  // reference's float64 on the fixtures).
  const Tensor exact = AudioVaeEncoder::load(*f32, audio_vae_component_at(tmp.path))->encode_reference(w);
  EXPECT_EQ(cuda_last_conv_path(*f32), "h3-f32");
  expect_close(exact, ref, kF32Tol, "audio VAE encode (f32 convolutions), 1.5 s stereo");
}

TEST_F(AudioVaeEncoderCuda, ReferenceRowsMatchTheReferenceFloat64) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE encoder fixtures under " << fixture_root() << " (set H3_SOURCE_DIR)";
  for (const FixtureCase& fc : cases) {
    const Tensor source = fixture_tensor(fc.dir, "case.safetensors", "source");
    const Tensor ref64 = fixture_tensor(fc.dir, "expected.safetensors", "rows_f64");
    const std::string name = fs::path(fc.dir).filename().string();
    const Tensor exact = AudioVaeEncoder::load(*f32, audio_vae_component_at(fc.model))->encode_reference(source);
    expect_close(exact, ref64, kF32Tol, name + " (f32 convolutions) vs the reference's float64");
    const Tensor tf32 = AudioVaeEncoder::load(*gpu, audio_vae_component_at(fc.model))->encode_reference(source);
    expect_close(tf32, ref64, kTf32Tol, name + " (TF32 convolutions) vs the reference's float64");
  }
}

#endif
