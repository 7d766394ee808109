// The CUDA paths of a GPU other than Hopper (backend/cuda_arch.h), tested on whatever GPU is at hand: forced with
// H3_FORCE_PORTABLE=1 (and its twin name H3_DISABLE_HOPPER_KERNELS=1), or chosen for a faked compute capability
// (cuda_fake_compute_capability). On an H200 the portable kernels run from their sm_90a code; their sm_80, 86, 89,
// 100 and 120 code is only compiled. Skips where the build has no CUDA or the machine no GPU.
//
// Tolerances: attention as tests/test_backend_cuda.cpp's (q, k, P and O rounded to bf16: relative L2 1e-2 and
// cosine 0.9999 against the f32 CPU backend; two bf16 paths agree within 4e-3); the DiT as tests/test_dit_cuda.cpp's
// (3e-2 and 0.999: the bf16 residual stream against the f32 one).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "backend/backend.h"
#include "backend/cuda_arch.h"
#include "backend/device.h"
#include "random_tensor.h"
#include "test_source_dir.h"
#include "util/error.h"
#include "util/scoped_env.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "h3/h3.h"
#include "models/dit/dit.h"
#include "tools/dit_tool.h"
#endif

using namespace h3;
namespace fs = std::filesystem;

#ifndef H3_HAVE_CUDA
TEST(PortableCuda, NeedsACudaBuild) { GTEST_SKIP() << "this build has no CUDA backend"; }
#else

namespace {

// The faked compute capability for one scope (the device's own again after it).
class FakeCapability {
 public:
  FakeCapability(int major, int minor) { cuda_fake_compute_capability(major, minor); }
  ~FakeCapability() { cuda_fake_compute_capability(0, 0); }
  FakeCapability(const FakeCapability&) = delete;
  FakeCapability& operator=(const FakeCapability&) = delete;
};

// Under `var` alone (run.sh --portable-bench runs the whole binary with H3_FORCE_PORTABLE=1 set: the other name is
// unset here, so the backend's line names `var`).
std::unique_ptr<Backend> forced_portable_backend(const char* var = kForcePortableVar) {
  ScopedEnv other(std::string(var) == kForcePortableVar ? kDisableHopperKernelsVar : kForcePortableVar, nullptr);
  ScopedEnv force(var, "1");
  return make_cuda_backend();
}

// One self-attention call: the DiT's shape (56 heads x 128, 96 rotated channels, q/k RMSNorm) or the video VAE's
// (head_dim 64, no rotation, no norm) — the two our Hopper kernel serves on 9.0.
struct Attn {
  int R, H, Dh, rot;
  bool qk_norm;
};

Tensor run_attention(Backend& be, const Attn& c, uint32_t seed) {
  std::mt19937 g(seed);
  const DType dt = be.device() == Device::CPU ? DType::F32 : DType::BF16;
  // Inputs rounded to bf16 first: both backends see the same values.
  auto draw = [&](Shape s, float scale, float mean = 0.f) {
    return randn(std::move(s), g, scale, mean).to(DType::BF16).to(DType::F32);
  };
  Tensor qkv = be.upload(draw({c.R, 3 * c.H * c.Dh}, 1.f), dt);
  Tensor wq = be.upload(draw({c.Dh}, 0.2f, 1.f), dt), wk = be.upload(draw({c.Dh}, 0.2f, 1.f), dt);
  Tensor ang = randn({c.R, std::max(c.rot, 1)}, g, 3.f), cs = ang.clone(), sn = ang.clone();
  for (int64_t i = 0; i < ang.numel(); ++i) {
    cs.ptr<float>()[i] = std::cos(ang.ptr<float>()[i]);
    sn.ptr<float>()[i] = std::sin(ang.ptr<float>()[i]);
  }
  Tensor dcs = be.upload(cs.to(DType::BF16).to(DType::F32), dt), dsn = be.upload(sn.to(DType::BF16).to(DType::F32), dt);
  AttentionSpec s;
  s.heads_q = s.heads_kv = c.H;
  s.head_dim = c.Dh;
  s.scale = 1.f / std::sqrt(static_cast<float>(c.Dh));
  s.qk_norm = c.qk_norm;
  s.qk_norm_eps = 1e-5f;
  s.q_norm_weight = &wq;
  s.k_norm_weight = &wk;
  s.rotary_dim = c.rot;
  s.cos = c.rot ? &dcs : nullptr;
  s.sin = c.rot ? &dsn : nullptr;
  Tensor out = be.empty({c.R, c.H * c.Dh}, dt);
  be.fill(out, NAN);  // an element never written fails the comparison
  be.self_attention(qkv, s, out);
  return be.download(out).to(DType::F32);
}

const Attn kAttentionCases[] = {{1007, 56, 128, 96, true}, {37, 56, 128, 96, true}, {777, 8, 64, 0, false}};

std::string name_of(const Attn& c) { return cat(c.R, " rows, ", c.H, " heads x ", c.Dh); }

class PortableCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no usable CUDA device on this machine";
  }
};

}  // namespace

// The switch, under either name, takes our Hopper kernels out of the paths and says so in the backend's line.
TEST_F(PortableCuda, SwitchRemovesTheHopperKernelsUnderEitherName) {
  for (const char* var : {kForcePortableVar, kDisableHopperKernelsVar}) {
    auto be = forced_portable_backend(var);
    const std::string summary = cuda_backend_summary(*be);
    EXPECT_NE(summary.find(cat("kernels: portable kernels (", var, "=1)")), std::string::npos) << summary;
    EXPECT_EQ(summary.find("h3 Hopper kernel"), std::string::npos) << summary;
    for (const Attn& c : kAttentionCases) {
      run_attention(*be, c, 1);
      EXPECT_NE(cuda_last_attention_path(*be), "h3-hopper") << var << ", " << name_of(c);
    }
  }
  {
    ScopedEnv force(kForcePortableVar, "1");
    ComputeDevice d;
    ASSERT_TRUE(cuda_detect_device(d));
    EXPECT_FALSE(d.hopper_kernels);
    EXPECT_NE(describe(d).find("kernels: portable kernels (H3_FORCE_PORTABLE=1); compiled for sm_"), std::string::npos)
        << describe(d);
  }
}

// The portable attention (cuDNN's fused SDPA, or the flash kernel) against the f32 CPU backend and against the
// default backend's (on 9.0 our Hopper kernel's).
TEST_F(PortableCuda, AttentionMatchesCpuAndTheDefaultPath) {
  auto portable = forced_portable_backend();
  auto standard = make_cuda_backend();
  auto cpu = make_cpu_backend();
  for (const Attn& c : kAttentionCases) {
    SCOPED_TRACE(name_of(c));
    const Tensor got = run_attention(*portable, c, 7);
    const std::string path = cuda_last_attention_path(*portable);
    EXPECT_TRUE(path.rfind("cudnn-", 0) == 0 || path == "flash") << path;
    const Tensor want = run_attention(*cpu, c, 7);
    EXPECT_LE(rel_l2(got, want), 1e-2) << "via " << path;
    EXPECT_GE(cosine(got, want), 0.9999) << "via " << path;
    const Tensor other = run_attention(*standard, c, 7);
    EXPECT_LE(rel_l2(got, other), 4e-3) << path << " vs " << cuda_last_attention_path(*standard);
  }
}

// An Ampere-class capability faked on this GPU: the device is usable, its paths are the portable ones — in a build
// with code that runs on 8.6. A build without (scripts/gpu/bundle.sh builds sm_90a alone) refuses it instead, in the
// sentence that names what to rebuild with: that is what is checked there.
TEST_F(PortableCuda, FakedAmpereCapabilityChoosesThePortablePaths) {
  FakeCapability ampere(8, 6);
  ComputeDevice d;
  if (!cuda_detect_device(d)) {
    EXPECT_NE(d.note.find("compute capability 8.6, for which this build of h3 has no code"), std::string::npos)
        << d.note;
    EXPECT_NE(d.note.find("rebuild with 86 in -DH3_CUDA_ARCHITECTURES"), std::string::npos) << d.note;
    return;
  }
  EXPECT_EQ(d.cc_major, 8);
  EXPECT_FALSE(d.hopper_kernels);
  auto be = make_cuda_backend();
  const std::string summary = cuda_backend_summary(*be);
  EXPECT_NE(summary.find("compute capability 8.6; kernels: portable kernels (compute capability 8.6: our Hopper "
                         "kernels need 9.0)"),
            std::string::npos)
      << summary;
  run_attention(*be, kAttentionCases[0], 3);
  EXPECT_NE(cuda_last_attention_path(*be), "h3-hopper");
}

// A GPU below 8.0 (faked): one sentence naming the GPU, its capability and the supported range, from the backend
// and from the engine before any weights load; --device auto computes on the CPU instead.
TEST_F(PortableCuda, FakedTuringIsRefusedInOneSentenceBeforeAnyModelLoads) {
  ComputeDevice real;
  ASSERT_TRUE(cuda_detect_device(real));
  FakeCapability turing(7, 5);
  const std::string want = cat("no usable CUDA device (", real.name,
                               " has compute capability 7.5; h3 supports 8.0 "
                               "(Ampere) and newer: bf16 tensor cores); --device cpu or auto computes on the CPU");
  EXPECT_FALSE(cuda_backend_available());
  try {
    make_cuda_backend();
    ADD_FAILURE() << "a 7.5 device was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
  EXPECT_EQ(make_backend("auto")->device(), Device::CPU);
  EngineOptions o;
  o.model_dir = test_source_dir() + "/tests/fixtures/e2e/model";
  o.device = "cuda";
  try {
    Engine::open(o);
    ADD_FAILURE() << "the engine opened on a 7.5 device";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
  ComputeDevice d = detect_compute_device();
  EXPECT_FALSE(d.cuda);
  EXPECT_NE(describe(d).find("has compute capability 7.5; h3 supports 8.0"), std::string::npos) << describe(d);
}

// The full DiT on every parity fixture with the portable paths forced, against the CPU backend.
TEST_F(PortableCuda, DitFixturesMatchTheCpuBackend) {
  auto cpu = make_cpu_backend();
  auto gpu = forced_portable_backend();
  const fs::path root = fs::path(test_source_dir()) / "tests/fixtures/dit";
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::exists(entry.path() / "case.safetensors")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const Component comp = dit_component_from_dir((entry.path() / "transformer").string());
    auto dit_cpu = Dit::load(*cpu, comp);
    auto dit_gpu = Dit::load(*gpu, comp);
    const DitForwardArgs args = read_dit_case((entry.path() / "case.safetensors").string(), dit_cpu->config());
    DitOutput a = dit_cpu->forward(args);
    DitOutput b = dit_gpu->forward(args);
    EXPECT_NE(cuda_last_attention_path(*gpu), "h3-hopper");
    for (auto [name, x, y] :
         {std::tuple{"sample", &a.sample, &b.sample}, {"audio_sample", &a.audio_sample, &b.audio_sample}}) {
      if (x->numel() == 0) continue;
      const double d = rel_l2(*y, *x), c = cosine(*y, *x);
      std::printf("[ portable dit ] %s %s: rel L2 %.3g, cosine %.6f via %s\n", entry.path().filename().c_str(), name, d,
                  c, cuda_last_attention_path(*gpu).c_str());
      EXPECT_LE(d, 3e-2) << name;
      EXPECT_GE(c, 0.999) << name;
    }
    ++cases;
  }
  EXPECT_GE(cases, 4);
}

#endif
