#include "backend/cuda/cudnn_conv.h"

#include <cstring>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "util/log.h"

// The convolution API cuDNN 9 marks deprecated (see the header); this file is its only user.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace h3::cuda {

namespace {

constexpr size_t kWorkspaceBudget = size_t(64) << 20;  // the most workspace an algorithm may ask for
constexpr int kAlgos = 16;                               // heuristic results asked for

}  // namespace

struct CudnnConv1d::Plan {
  cudnnTensorDescriptor_t in = nullptr, out = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd{};
  size_t workspace = 0;
  bool tensor_cores = false;

  ~Plan() {
    if (in) cudnnDestroyTensorDescriptor(in);
    if (out) cudnnDestroyTensorDescriptor(out);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (filter) cudnnDestroyFilterDescriptor(filter);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

CudnnConv1d::CudnnConv1d(cudaStream_t stream) : stream_(stream) {}

CudnnConv1d::~CudnnConv1d() {
  plans_.clear();  // descriptors before the handle
  if (handle_) cudnnDestroy(handle_);
}

// The first of cuDNN's heuristic results (best first) that is deterministic (the same output for the same input on
// every run: no atomics; a seed must reproduce its audio) and fits the workspace budget: its algorithm, workspace and
// math type (TF32 tensor cores unless it is an FMA algorithm) go into the plan.
template <typename Perf, typename Algo>
bool CudnnConv1d::choose(const Perf* perf, int n, Algo& algo, Plan& p, std::string& why) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kWorkspaceBudget ||
        perf[i].determinism != CUDNN_DETERMINISTIC)
      continue;
    algo = perf[i].algo;
    p.workspace = perf[i].memory;
    p.tensor_cores = perf[i].mathType != CUDNN_FMA_MATH;
    const cudnnStatus_t st = cudnnSetConvolutionMathType(p.conv, perf[i].mathType);
    if (st != CUDNN_STATUS_SUCCESS) why = cat("algorithm math type: ", cudnn_status_text(st));
    return st == CUDNN_STATUS_SUCCESS;
  }
  why = "no deterministic algorithm within the workspace budget";
  return false;
}

CudnnConv1d::Key CudnnConv1d::key_of(const Conv1dShape& s) {
  return Key{s.B, s.Cin, s.T, s.Cout, s.Tout, s.k, s.stride, s.padding, s.dilation, s.transposed};
}

// Describes the shape and picks cuDNN's first heuristic choice that fits the budget; null (and a debug line) when
// cuDNN refuses anything on the way.
CudnnConv1d::Plan* CudnnConv1d::plan_for(const Conv1dShape& s) {
  const Key key = key_of(s);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  std::string why;
  auto ok = [&why](cudnnStatus_t st, const char* what) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    why = cat(what, ": ", cudnn_status_text(st));
    return false;
  };
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  // The transposed convolution is the backward data pass of the forward convolution from y (Cout channels) to x
  // (Cin channels), whose filter [Cin, Cout, 1, k] is the transposed layer's weight as stored.
  const int64_t fwd_in_c = s.transposed ? s.Cout : s.Cin, fwd_out_c = s.transposed ? s.Cin : s.Cout;
  const int64_t fwd_out_t = s.transposed ? s.T : s.Tout;
  if (!handle_) {  // made with the first plan; it works on our one stream or not at all
    cudnnHandle_t h = nullptr;
    if (ok(cudnnCreate(&h), "create handle")) {
      if (ok(cudnnSetStream(h, stream_), "set stream"))
        handle_ = h;
      else
        cudnnDestroy(h);
    }
  }
  bool good = handle_ &&
              ok(cudnnCreateTensorDescriptor(&p->in), "input descriptor") &&
              ok(cudnnSetTensor4dDescriptor(p->in, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(s.B), i32(s.Cin), 1,
                                            i32(s.T)),
                 "input shape") &&
              ok(cudnnCreateTensorDescriptor(&p->out), "output descriptor") &&
              ok(cudnnSetTensor4dDescriptor(p->out, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(s.B), i32(s.Cout), 1,
                                            i32(s.Tout)),
                 "output shape") &&
              ok(cudnnCreateTensorDescriptor(&p->bias), "bias descriptor") &&
              ok(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, i32(s.Cout), 1, 1),
                 "bias shape") &&
              ok(cudnnCreateFilterDescriptor(&p->filter), "filter descriptor") &&
              ok(cudnnSetFilter4dDescriptor(p->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i32(fwd_out_c),
                                            i32(fwd_in_c), 1, i32(s.k)),
                 "filter shape") &&
              ok(cudnnCreateConvolutionDescriptor(&p->conv), "convolution descriptor") &&
              ok(cudnnSetConvolution2dDescriptor(p->conv, 0, i32(s.padding), 1, i32(s.stride), 1, i32(s.dilation),
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                 "convolution geometry") &&
              ok(cudnnSetConvolutionMathType(p->conv, CUDNN_DEFAULT_MATH), "math type");
  if (good) {  // the forward convolution's output length must be the one the caller expects
    int n = 0, c = 0, h = 0, w = 0;
    good = ok(cudnnGetConvolution2dForwardOutputDim(p->conv, s.transposed ? p->out : p->in, p->filter, &n, &c, &h, &w),
              "output length") &&
           (w == fwd_out_t || (why = cat("cuDNN's output length ", w, " is not ", fwd_out_t), false));
  }
  if (good && !s.transposed) {
    cudnnConvolutionFwdAlgoPerf_t perf[kAlgos];
    int n = 0;
    good = ok(cudnnGetConvolutionForwardAlgorithm_v7(handle_, p->in, p->filter, p->conv, p->out, kAlgos, &n, perf),
              "forward heuristic") &&
           choose(perf, n, p->fwd, *p, why);
  } else if (good) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kAlgos];
    int n = 0;
    good = ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p->filter, p->in, p->conv, p->out, kAlgos, &n,
                                                          perf),
              "backward-data heuristic") &&
           choose(perf, n, p->bwd, *p, why);
  }
  if (!good) {
    log_debug("cuDNN convolution refused (B ", s.B, ", ", s.Cin, " -> ", s.Cout, " channels, T ", s.T, ", k ", s.k,
              s.transposed ? ", transposed" : "", "): ", why, "; using h3's f32 kernels");
    p.reset();
  }
  return (plans_[key] = std::move(p)).get();
}

CudnnConv1d::Served CudnnConv1d::run(const Conv1dShape& s, const float* x, const float* w, const float* bias, float* y,
                                     const std::function<void*(size_t)>& workspace) {
  Plan* p = plan_for(s);
  if (!p) return Served::Refused;
  void* ws = p->workspace ? workspace(p->workspace) : nullptr;
  const float one = 1.f, zero = 0.f;
  if (s.transposed)
    H3_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, p->filter, w, p->in, x, p->conv, p->bwd, ws,
                                                p->workspace, &zero, p->out, y),
                   "conv_transpose1d");
  else
    H3_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, p->in, x, p->filter, w, p->conv, p->fwd, ws, p->workspace,
                                           &zero, p->out, y),
                   "conv1d");
  if (bias) H3_CUDNN_CHECK(cudnnAddTensor(handle_, &one, p->bias, bias, &one, p->out, y), "conv1d bias");
  return p->tensor_cores ? Served::TensorCores : Served::Fma;
}

}  // namespace h3::cuda

#pragma GCC diagnostic pop
