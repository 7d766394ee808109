// The choice of CUDA code paths by compute capability (backend/cuda_arch.h): the GPUs of every generation since
// Volta against a fat build, a Hopper-only build and a build without sm_90a, the forcing switch, and the refusals.
// Pure functions: runs on any machine.
#include <gtest/gtest.h>

#include "backend/cuda_arch.h"
#include "util/error.h"
#include "util/scoped_env.h"

using namespace h3;

namespace {

// What cmake/cuda_architectures.cmake makes by default with nvcc 13.0, and the development builds.
const char* const kFat = "sm_80,sm_86,sm_89,sm_90a,sm_100,sm_120,compute_120";
const char* const kHopperOnly = "sm_90a";
const char* const kNoHopper = "sm_80,sm_86,sm_89,sm_100,sm_120,compute_120";

CudaPaths choose(int major, int minor, const char* built, const std::string& forced_by = "") {
  return choose_cuda_paths("GPU X", major, minor, parse_cuda_archs(built), forced_by);
}

}  // namespace

TEST(CudaArch, ParsesNvccNames) {
  const auto a = parse_cuda_archs(kFat);
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a[0].number, 80);
  EXPECT_FALSE(a[0].ptx || a[0].specific);
  EXPECT_EQ(a[3].number, 90);
  EXPECT_TRUE(a[3].specific);
  EXPECT_EQ(a[5].number, 120);
  EXPECT_TRUE(a[6].ptx);
  EXPECT_EQ(a[6].name, "compute_120");
  for (const char* bad : {"sm_8", "80", "sm_80,", "compute_", "sm_9x", "sm_1000", "sm_90b"})
    EXPECT_THROW(parse_cuda_archs(bad), Error) << bad;
}

TEST(CudaArch, DeviceCodeRunsOnItsMajorAndNewerMinorsPtxOnEveryNewerGpu) {
  const auto a = parse_cuda_archs("sm_86,sm_90a,compute_120");
  EXPECT_TRUE(a[0].runs_on(8, 6));
  EXPECT_TRUE(a[0].runs_on(8, 9));   // an sm_86 cubin on Ada
  EXPECT_FALSE(a[0].runs_on(8, 0));  // not on an older minor
  EXPECT_FALSE(a[0].runs_on(9, 0));  // nor on another major
  EXPECT_TRUE(a[1].runs_on(9, 0));
  EXPECT_FALSE(a[1].runs_on(10, 0));  // arch-specific: 9.0 only
  EXPECT_TRUE(a[2].runs_on(12, 0));
  EXPECT_TRUE(a[2].runs_on(13, 0));  // PTX: compiled by the driver for a newer GPU
  EXPECT_FALSE(a[2].runs_on(11, 0));
}

// Each generation on the fat build: the Hopper kernels on 9.0 alone, the portable paths elsewhere.
TEST(CudaArch, FatBuildRunsEveryGpuSinceAmpereHopperKernelsOnlyOn90) {
  struct Gpu {
    int major, minor;
    bool hopper;
  };
  for (const Gpu g : {Gpu{8, 0, false},    // A100
                      Gpu{8, 6, false},    // RTX 3090, A40
                      Gpu{8, 7, false},    // Jetson Orin (the sm_86 code)
                      Gpu{8, 9, false},    // L40S, RTX 4090
                      Gpu{9, 0, true},     // H100, H200
                      Gpu{10, 0, false},   // B200
                      Gpu{10, 3, false},   // B300 (the sm_100 code)
                      Gpu{12, 0, false},   // RTX 5090, RTX PRO 6000
                      Gpu{12, 1, false},   // DGX Spark (the sm_120 code)
                      Gpu{13, 0, false}})  // a GPU newer than the toolkit: the compute_120 PTX
  {
    const CudaPaths p = choose(g.major, g.minor, kFat);
    SCOPED_TRACE(testing::Message() << g.major << "." << g.minor);
    EXPECT_TRUE(p.refusal.empty()) << p.refusal;
    EXPECT_EQ(p.hopper_kernels, g.hopper);
    if (!g.hopper) {
      EXPECT_NE(p.why_portable.find("our Hopper kernels need 9.0"), std::string::npos) << p.why_portable;
    }
  }
  EXPECT_EQ(choose(9, 0, kFat).describe(), "h3's Hopper kernels (sm_90a) with the portable ones");
  EXPECT_EQ(choose(8, 9, kFat).describe(), "portable kernels (compute capability 8.9: our Hopper kernels need 9.0)");
}

TEST(CudaArch, ForcingSwitchGivesHopperTheOtherGpusPaths) {
  const CudaPaths p = choose(9, 0, kFat, kForcePortableVar);
  EXPECT_TRUE(p.refusal.empty());
  EXPECT_FALSE(p.hopper_kernels);
  EXPECT_EQ(p.describe(), "portable kernels (H3_FORCE_PORTABLE=1)");
  EXPECT_FALSE(choose(9, 0, kHopperOnly, kDisableHopperKernelsVar).hopper_kernels);
  EXPECT_FALSE(choose(8, 6, kFat, kForcePortableVar).hopper_kernels);
}

TEST(CudaArch, ForcingSwitchIsReadUnderEitherName) {
  {
    ScopedEnv a(kForcePortableVar, "0");
    ScopedEnv b(kDisableHopperKernelsVar, "");
    EXPECT_EQ(cuda_portable_switch(), "");
  }
  {
    ScopedEnv a(kForcePortableVar, "1");
    EXPECT_EQ(cuda_portable_switch(), kForcePortableVar);
  }
  {
    ScopedEnv b(kDisableHopperKernelsVar, "1");
    EXPECT_EQ(cuda_portable_switch(), kDisableHopperKernelsVar);
  }
}

// -DH3_CUDA_ARCHITECTURES=80 (with its PTX) on a Hopper GPU: the driver compiles the PTX, our sm_90a kernels are
// absent; the fat list less 90a has no code for 9.0 at all (its PTX is compute_120's).
TEST(CudaArch, HopperWithoutSm90aCodeRunsThePortablePathsOrIsRefused) {
  const CudaPaths p = choose(9, 0, "sm_80,compute_80");
  EXPECT_TRUE(p.refusal.empty()) << p.refusal;
  EXPECT_FALSE(p.hopper_kernels);
  EXPECT_EQ(p.why_portable, "this build has no sm_90a code");
  EXPECT_NE(choose(9, 0, kNoHopper).refusal.find("no code"), std::string::npos);
}

// A GPU older than Ampere: one clause naming it, its capability and the supported range (after "no usable CUDA
// device (").
TEST(CudaArch, GpuBelowAmpereIsRefusedInOneSentence) {
  for (auto [major, minor] : {std::pair{7, 5}, {7, 0}, {6, 1}, {3, 5}}) {
    const CudaPaths p = choose_cuda_paths("Tesla T4", major, minor, parse_cuda_archs(kFat), "");
    const std::string cc = std::to_string(major) + "." + std::to_string(minor);
    EXPECT_EQ(p.refusal,
              "Tesla T4 has compute capability " + cc + "; h3 supports 8.0 (Ampere) and newer: bf16 tensor cores");
    EXPECT_FALSE(p.hopper_kernels);
    EXPECT_EQ(p.refusal.find('.', p.refusal.size() - 1), std::string::npos) << "a clause, not a full stop";
  }
}

// A supported capability the build has no code for (a development build for one GPU run on another).
TEST(CudaArch, GpuWithoutCodeInTheBuildIsRefusedNamingWhatTheBuildHolds) {
  const CudaPaths a100 = choose_cuda_paths("NVIDIA A100-SXM4-80GB", 8, 0, parse_cuda_archs(kHopperOnly), "");
  EXPECT_EQ(a100.refusal,
            "NVIDIA A100-SXM4-80GB has compute capability 8.0, for which this build of h3 has no code (it holds "
            "sm_90a; h3 supports 8.0 and newer: rebuild with 80 in -DH3_CUDA_ARCHITECTURES)");
  EXPECT_FALSE(choose(10, 0, kHopperOnly).refusal.empty());   // sm_90a does not run on Blackwell
  EXPECT_FALSE(choose(8, 0, "sm_86,sm_89").refusal.empty());  // nor sm_86 code on 8.0
  EXPECT_FALSE(choose(11, 0, kFat).refusal.empty());          // Thor: neither sm_100 code nor compute_120 PTX
}
