// Which of h3's CUDA code paths a GPU runs, chosen from its compute capability and the architectures the build holds
// (issue 17: every NVIDIA GPU since Ampere). Pure functions, compiled in every build (tests/test_cuda_arch.cpp), so
// the rules are tested without a GPU; src/backend/cuda/device.cpp applies them to the device at hand.
//
// - Compute capability 8.0 (Ampere) or newer is required: the portable kernels use bf16 tensor-core MMA, cp.async
//   and ldmatrix (sm_80 instructions). Activations are bf16 on every supported GPU: all of them have bf16 tensor
//   cores at the fp16 rate; fp16 would be chosen only where bf16 is slow or absent (Turing and Volta, 7.x: fp16
//   tensor cores only), and h3 refuses those.
// - Our Hopper kernels (kernels_attention_sm90.cu: TMA, wgmma; compiled for sm_90a alone) run on compute
//   capability 9.0 only (H100, H200, GH200); every other GPU gets cuDNN's fused attention (cudnn_sdpa.h), with our
//   flash kernel as its fallback, and the portable kernels. H3_FORCE_PORTABLE=1 (or its twin name
//   H3_DISABLE_HOPPER_KERNELS=1) makes a 9.0 GPU take the other GPUs' paths, to test them on Hopper.
#pragma once
#include <string>
#include <vector>

namespace h3 {

inline constexpr int kMinCudaMajor = 8, kMinCudaMinor = 0;

// The environment switches that force the portable paths (either one).
inline constexpr const char* kForcePortableVar = "H3_FORCE_PORTABLE";
inline constexpr const char* kDisableHopperKernelsVar = "H3_DISABLE_HOPPER_KERNELS";

// An architecture a build holds code for, as nvcc names it: "sm_86" (device code that runs on 8.6 up to 8.9),
// "sm_90a" (device code for 9.0 only), "compute_120" (PTX, which the driver compiles for 12.0 and newer).
struct CudaArch {
  bool ptx = false;       // compute_N rather than sm_N
  bool specific = false;  // the "a" suffix: runs on exactly that capability
  int number = 0;         // 10·major + minor: 86, 90, 120
  std::string name;       // as parsed
  bool runs_on(int major, int minor) const;
};

// Parses a comma-separated list ("sm_80,sm_86,sm_90a,compute_120", H3_CUDA_BUILD_ARCHS of
// cmake/cuda_architectures.cmake); throws h3::Error naming a malformed entry.
std::vector<CudaArch> parse_cuda_archs(const std::string& list);

// What a GPU runs.
struct CudaPaths {
  // Non-empty when the GPU cannot run this build: one clause naming the GPU, its compute capability and what is
  // supported, which follows "no usable CUDA device (" (device.h's kNoUsableCudaDevice).
  std::string refusal;
  bool hopper_kernels = false;  // our sm_90a kernels
  std::string why_portable;     // when not: why
  // "h3's Hopper kernels (sm_90a) with the portable ones" or "portable kernels (why)".
  std::string describe() const;
};

// `forced_by`: the name of the environment switch that forces the portable paths, or empty (cuda_portable_switch).
CudaPaths choose_cuda_paths(const std::string& gpu, int major, int minor, const std::vector<CudaArch>& built,
                            const std::string& forced_by);

// The switch set in the environment (kForcePortableVar, else kDisableHopperKernelsVar), or empty.
std::string cuda_portable_switch();

}  // namespace h3
