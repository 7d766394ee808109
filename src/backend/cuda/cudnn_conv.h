// PyTorch's Conv1d and ConvTranspose1d on f32 [B, C, T] tensors, and its Conv3d without padding on f32 [C, T, H, W]
// tensors (the video VAE encoder's, whose padding the backend applies first), through cuDNN's convolution API with
// TF32 tensor-core math allowed — how the reference runs the VAEs: PyTorch sends f32 convolutions to cuDNN with
// torch.backends.cudnn.allow_tf32 = True by default (cuDNN's default math on Ampere and later), so its decode is a
// TF32 decode. A 1-D convolution is cuDNN's 2-D one with height 1 (filter [Cout, Cin, 1, k], stride/padding/dilation
// along the width); the transposed one is cuDNN's backward-data convolution of the forward convolution it inverts;
// the 3-D one is cuDNN's N-d convolution of one batch item.
// Per shape: the descriptors and cuDNN's heuristic first choice among the deterministic algorithms that fit the
// workspace budget (as PyTorch does with cudnn.benchmark off and cudnn.deterministic on: no timing runs, the same
// bits on every run), made once and cached.
//
// cuDNN 9 marks this (legacy) convolution API deprecated but ships it (libcudnn_cnn); where it is missing, or has no
// algorithm for a shape, run() returns false and the caller uses its own f32 kernels.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace h3::cuda {

struct Conv1dShape {
  int64_t B = 0, Cin = 0, T = 0;     // input [B, Cin, T]
  int64_t Cout = 0, Tout = 0;        // output [B, Cout, Tout]
  int64_t k = 1, stride = 1, padding = 0, dilation = 1;
  bool transposed = false;           // ConvTranspose1d (weight [Cin, Cout, k]) instead of Conv1d ([Cout, Cin, k])
};

struct Conv3dShape {
  int64_t Cin = 0, T = 0, H = 0, W = 0;     // input [Cin, T, H, W] (already padded)
  int64_t Cout = 0, To = 0, Ho = 0, Wo = 0;  // output [Cout, To, Ho, Wo]
  int64_t kt = 1, kh = 1, kw = 1, st = 1, sh = 1, sw = 1;
};

class CudnnConv {
 public:
  // `fold_single_window`: a 3-D convolution whose kernel spans the whole (padded) input in time and gives one output
  // frame — a single frame through a causal convolution, the video VAE encoder's keyframes — runs as cuDNN's 2-D
  // convolution over (channel, frame) pairs: the same sums (the packed [Cin, kt, H, W] input is a [Cin·kt, H, W] one
  // and the packed filter a [Cout, Cin·kt, kh, kw] one), for which cuDNN has far faster kernels than for its 3-D
  // one. false: the 3-D plan (the twin, H3_DISABLE_CONV3D_AS_2D=1).
  CudnnConv(cudaStream_t stream, bool fold_single_window);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // What served a run: nothing (cuDNN has no algorithm for the shape; the reason is logged once per shape at debug
  // level), a tensor-core (TF32) algorithm, or an FMA one.
  enum class Served { Refused, TensorCores, Fma };
  // y = conv(x, w) (+ bias[Cout]); launches nothing when Refused. `workspace(bytes)` returns device memory of at
  // least that size.
  Served run(const Conv1dShape& s, const float* x, const float* w, const float* bias, float* y,
             const std::function<void*(size_t)>& workspace);
  Served run(const Conv3dShape& s, const float* x, const float* w, const float* bias, float* y,
             const std::function<void*(size_t)>& workspace);

 private:
  struct Plan;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;
  using Key3d = std::array<int64_t, 14>;
  static Key key_of(const Conv1dShape& s);
  Plan* plan_for(const Conv1dShape& s);
  Plan* plan_for(const Conv3dShape& s);
  bool ensure_handle(std::string& why);
  bool choose_forward(Plan& p, std::string& why);
  template <typename Perf, typename Algo>
  static bool choose(const Perf* perf, int n, Algo& algo, Plan& p, std::string& why);

  cudaStream_t stream_;
  bool fold_single_window_;
  cudnnHandle_t handle_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;      // null: refused
  std::map<Key3d, std::unique_ptr<Plan>> plans3d_;  // null: refused
};

}  // namespace h3::cuda
