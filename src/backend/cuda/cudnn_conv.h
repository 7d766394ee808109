// PyTorch's Conv1d and ConvTranspose1d on f32 [B, C, T] tensors, and its Conv3d without padding on f32 [C, T, H, W]
// tensors (the video VAE encoder's, whose padding the backend applies first), through cuDNN with TF32 tensor-core
// math allowed — how the reference runs the VAEs: PyTorch sends f32 convolutions to cuDNN with
// torch.backends.cudnn.allow_tf32 = True by default (cuDNN's default math on Ampere and later), so its decode is a
// TF32 decode. A 1-D convolution is cuDNN's 2-D one with height 1 (input [B, C, 1, T], filter [Cout, Cin, 1, k],
// stride/padding/dilation along the width: ATen's view of a conv1d); the transposed one is cuDNN's backward-data
// convolution of the forward convolution it inverts; the 3-D one is cuDNN's N-d convolution of one batch item.
//
// How an algorithm is chosen (ConvChoice; per shape, made once and cached):
//   - 1-D forward convolutions (the audio VAE encoder's trunk, the decoder's forward convolutions) go through
//     cuDNN's graph API, as PyTorch's (cuDNN v8+ API, ATen/native/cudnn/Conv_v8.cpp) do: one convolution-forward
//     operation; the engine configurations of the heuristic (mode INSTANT, then the fallback list), less those
//     marked non-deterministic (a seed must reproduce its audio), down-converting their inputs (PyTorch drops them
//     too) or compiled at run time, that finalize within kGraphWorkspaceBudget. By default the legacy API's
//     algorithm (below) and the first kAutotuneCandidates of them are timed once on the shape's first operands and
//     the fastest serves (the first timed unless another beats it by over 5%) — PyTorch's cudnn.benchmark = True
//     among deterministic engines, a one-time cost of a few runs per shape. The choice can differ between processes
//     where two candidates time alike (each is deterministic: the same engine gives the same bits).
//     H3_DISABLE_CONV_AUTOTUNE=1: the first of the list, no timing runs — PyTorch's choice with cudnn.benchmark off.
//     H3_DISABLE_CUDNN_CONV_GRAPH=1: the legacy API below, for every shape (the choice before the graph API; for
//     the 3-D convolutions too).
//   - 3-D convolutions (the video VAE encoder's; a single window folded to 2-D as the constructor says) choose the
//     same way, through the same graph API machinery with 4-D (folded) or 5-D descriptors, the legacy 3-D / folded
//     algorithm among the autotune's candidates; channels-last (NHWC) folded shapes by the graph API alone.
//   - transposed convolutions, and any 1-D or 3-D one the graph API refuses: the legacy API's heuristic
//     (cudnnGetConvolutionForwardAlgorithm_v7 / BackwardData_v7), its first deterministic algorithm within
//     kLegacyWorkspaceBudget.
//
// cuDNN 9 marks the legacy convolution API deprecated but ships it (libcudnn_cnn); where neither API has an
// algorithm for a shape, run() returns Refused and the caller uses its own f32 kernels.
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
#include <vector>

namespace h3::cuda {

struct Conv1dShape {
  int64_t B = 0, Cin = 0, T = 0;     // input [B, Cin, T]
  int64_t Cout = 0, Tout = 0;        // output [B, Cout, Tout]
  int64_t k = 1, stride = 1, padding = 0, dilation = 1;
  bool transposed = false;           // ConvTranspose1d (weight [Cin, Cout, k]) instead of Conv1d ([Cout, Cin, k])
  // Channels-last (forward only): x [B, T, Cin], w [Cout, k, Cin], y [B, Tout, Cout] — cuDNN's NHWC with H = 1.
  // Served by the graph API alone, without a bias (the caller adds it).
  bool nhwc = false;
  auto operator<=>(const Conv1dShape&) const = default;
};

// "2x64x480000 -> 64x480000 k7 s1 p9 d3" (", transposed" for a ConvTranspose1d, ", channels-last" for NHWC; the
// dims always B x C x T).
std::string shape_text(const Conv1dShape& s);
// Multiply-adds × 2 of the shape (the transposed one's as its forward convolution's).
double conv_flops(const Conv1dShape& s);

struct Conv3dShape {
  int64_t Cin = 0, T = 0, H = 0, W = 0;     // input [Cin, T, H, W] (already padded)
  int64_t Cout = 0, To = 0, Ho = 0, Wo = 0;  // output [Cout, To, Ho, Wo]
  int64_t kt = 1, kh = 1, kw = 1, st = 1, sh = 1, sw = 1;
  // Channels-last (a single window folded to 2-D only, T = kt = 1): x [H, W, Cin], w [Cout, kh, kw, Cin],
  // y [Ho, Wo, Cout] — cuDNN's NHWC. Served by the graph API alone, without a bias (the caller adds it).
  bool nhwc = false;
};

// "128x1x258x258 -> 128x1x256x256 k1x3x3 s1x1x1" (", 2-D", ", channels-last").
std::string shape_text(const Conv3dShape& s, bool folded);

// How a 1-D forward convolution's cuDNN algorithm is chosen (see the file comment).
enum class ConvChoice { Legacy, Heuristic, Autotune };

// One way of running a shape, timed (CudnnConv::compare): the strategy, what ran, its device time.
struct ConvTiming {
  std::string strategy;  // "legacy", "heuristic", "autotune", "autotune-other-layout"
  std::string what;      // the algorithm or engine configuration, its math and workspace; or why there is none
  double ms = -1;        // the fastest of the timed runs; < 0: nothing ran
};

class CudnnConv {
 public:
  static constexpr size_t kLegacyWorkspaceBudget = size_t(64) << 20;
  static constexpr size_t kGraphWorkspaceBudget = size_t(256) << 20;
  static constexpr int kAutotuneCandidates = 8;

  // `fold_single_window`: a 3-D convolution whose kernel spans the whole (padded) input in time and gives one output
  // frame — a single frame through a causal convolution, the video VAE encoder's keyframes — runs as cuDNN's 2-D
  // convolution over (channel, frame) pairs: the same sums (the packed [Cin, kt, H, W] input is a [Cin·kt, H, W] one
  // and the packed filter a [Cout, Cin·kt, kh, kw] one), for which cuDNN has far faster kernels than for its 3-D
  // one. false: the 3-D plan (the twin, H3_DISABLE_CONV3D_AS_2D=1). `choice`: how 1-D forward convolutions choose.
  CudnnConv(cudaStream_t stream, bool fold_single_window, ConvChoice choice = ConvChoice::Autotune);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // What served a run: nothing (cuDNN has no algorithm for the shape; the reason is logged once per shape at debug
  // level), a tensor-core (TF32) algorithm, or an FMA one.
  enum class Served { Refused, TensorCores, Fma };
  // y = conv(x, w) (+ bias[Cout]); launches nothing when Refused. `workspace(bytes)` returns device memory of at
  // least that size. The first run of a shape under ConvChoice::Autotune also times its candidates on these
  // operands (y is written by each; x and w are only read).
  Served run(const Conv1dShape& s, const float* x, const float* w, const float* bias, float* y,
             const std::function<void*(size_t)>& workspace);
  Served run(const Conv3dShape& s, const float* x, const float* w, const float* bias, float* y,
             const std::function<void*(size_t)>& workspace);

  // What serves a 1-D shape now: "graph engine 12 {..} tf32, workspace 0.0 MiB" (verbose: with the autotune's
  // timings), "legacy IMPLICIT_PRECOMP_GEMM tf32, ...", "refused: <why>"; "" while the shape has not run.
  std::string describe(const Conv1dShape& s, bool verbose = false) const;

  // Every strategy on one 1-D forward shape, timed on the given operands (x, w, y of the shape's sizes, any finite
  // contents; y is overwritten): the legacy API's choice (channels-first shapes only), the graph heuristic's first
  // configuration, the fastest of its first kAutotuneCandidates, and the same fastest with the tensors described
  // in the other layout (NHWC for a channels-first shape and the reverse; the same buffers read that way). Each
  // time: the fastest of `reps` runs after a warm-up. For bench_ref2va --conv-report; touches none of the plans
  // run() uses.
  std::vector<ConvTiming> compare(const Conv1dShape& s, const float* x, const float* w, float* y,
                                  const std::function<void*(size_t)>& workspace, int reps);

  ConvChoice choice() const { return choice_; }

 private:
  struct Plan;
  struct Graph;
  struct GraphConfig;
  struct GraphSpec;
  using Key3d = std::array<int64_t, 15>;
  static Key3d key_of(const Conv3dShape& s);
  bool folds(const Conv3dShape& s) const { return fold_single_window_ && s.kt == s.T && s.To == 1; }
  Plan* plan_for(const Conv1dShape& s);
  Plan* plan_for(const Conv3dShape& s);
  Graph& graph_for(const Conv1dShape& s);
  Graph& graph_for(const Conv3dShape& s);
  std::shared_ptr<Graph> build_graph(const Conv1dShape& s, bool nhwc, int max_configs);
  std::shared_ptr<Graph> build_graph(const GraphSpec& spec, int max_configs);
  cudnnStatus_t execute(const GraphConfig& c, const float* x, const float* w, float* y, void* ws);
  // `label`: the shape in log lines (called only to log).
  bool serve(Graph& g, const std::function<std::string()>& label, const float* x, const float* w, float* y,
             const std::function<void*(size_t)>& workspace, bool& tensor_cores);
  void autotune(Graph& g, Plan* legacy, const std::string& label, const float* x, const float* w, float* y,
                const std::function<void*(size_t)>& workspace);
  float time_ms(const std::function<void()>& fn, int reps, float give_up_after_ms = -1);
  bool ensure_handle(std::string& why);
  bool choose_forward(Plan& p, std::string& why);
  template <typename Perf, typename Algo>
  static bool choose(const Perf* perf, int n, Algo& algo, Plan& p, std::string& why);

  cudaStream_t stream_;
  bool fold_single_window_;
  ConvChoice choice_;
  cudnnHandle_t handle_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;   // timing (autotune, compare)
  std::map<Conv1dShape, std::unique_ptr<Plan>> plans_;   // null: refused
  std::map<Conv1dShape, std::shared_ptr<Graph>> graphs_;
  std::map<Key3d, std::unique_ptr<Plan>> plans3d_;  // null: refused
  std::map<Key3d, std::shared_ptr<Graph>> graphs3d_;
};

}  // namespace h3::cuda
