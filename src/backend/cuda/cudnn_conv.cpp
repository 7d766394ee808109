#include "backend/cuda/cudnn_conv.h"

#include <algorithm>
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

struct CudnnConv::Plan {
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

CudnnConv::CudnnConv(cudaStream_t stream, bool fold_single_window)
    : stream_(stream), fold_single_window_(fold_single_window) {}

CudnnConv::~CudnnConv() {
  plans_.clear();  // descriptors before the handle
  plans3d_.clear();
  if (handle_) cudnnDestroy(handle_);
}

// The first of cuDNN's heuristic results (best first) that is deterministic (the same output for the same input on
// every run: no atomics; a seed must reproduce its audio) and fits the workspace budget: its algorithm, workspace and
// math type (TF32 tensor cores unless it is an FMA algorithm) go into the plan.
template <typename Perf, typename Algo>
bool CudnnConv::choose(const Perf* perf, int n, Algo& algo, Plan& p, std::string& why) {
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

CudnnConv::Key CudnnConv::key_of(const Conv1dShape& s) {
  return Key{s.B, s.Cin, s.T, s.Cout, s.Tout, s.k, s.stride, s.padding, s.dilation, s.transposed};
}

// Describes the shape and picks cuDNN's first heuristic choice that fits the budget; null (and a debug line) when
// cuDNN refuses anything on the way.
CudnnConv::Plan* CudnnConv::plan_for(const Conv1dShape& s) {
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
  bool good = ensure_handle(why) &&
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
    good = choose_forward(*p, why);
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

// The handle is made with the first plan; it works on our one stream or not at all.
bool CudnnConv::ensure_handle(std::string& why) {
  if (handle_) return true;
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = cudnnCreate(&h);
  if (st == CUDNN_STATUS_SUCCESS) {
    st = cudnnSetStream(h, stream_);
    if (st == CUDNN_STATUS_SUCCESS) {
      handle_ = h;
      return true;
    }
    cudnnDestroy(h);
    why = cat("set stream: ", cudnn_status_text(st));
    return false;
  }
  why = cat("create handle: ", cudnn_status_text(st));
  return false;
}

// cuDNN's heuristic choice of a forward algorithm for the plan's descriptors (see choose).
bool CudnnConv::choose_forward(Plan& p, std::string& why) {
  cudnnConvolutionFwdAlgoPerf_t perf[kAlgos];
  int n = 0;
  const cudnnStatus_t st =
      cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.in, p.filter, p.conv, p.out, kAlgos, &n, perf);
  if (st != CUDNN_STATUS_SUCCESS) {
    why = cat("forward heuristic: ", cudnn_status_text(st));
    return false;
  }
  return choose(perf, n, p.fwd, p, why);
}

// The 3-D convolution of one [Cin, T, H, W] item: 5-D NCDHW descriptors with N = 1, no padding, no dilation.
CudnnConv::Plan* CudnnConv::plan_for(const Conv3dShape& s) {
  const Key3d key{s.Cin, s.T, s.H, s.W, s.Cout, s.To, s.Ho, s.Wo, s.kt, s.kh, s.kw, s.st, s.sh, s.sw};
  auto it = plans3d_.find(key);
  if (it != plans3d_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  std::string why;
  auto ok = [&why](cudnnStatus_t st, const char* what) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    why = cat(what, ": ", cudnn_status_text(st));
    return false;
  };
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  // Fully packed strides of an n-d tensor of dims d.
  auto packed = [](const int* d, int n, int* st) {
    st[n - 1] = 1;
    for (int k = n - 2; k >= 0; --k) st[k] = st[k + 1] * d[k + 1];
  };
  // One window over the whole time axis: cuDNN's 2-D convolution over (channel, frame) pairs (see the constructor),
  // with 4-D descriptors; otherwise the 5-D NCDHW ones.
  const bool fold = fold_single_window_ && s.kt == s.T && s.To == 1;
  const int nb = fold ? 4 : 5;
  int in_dims[5], out_dims[5], bias_dims[5], filter_dims[5];
  if (fold) {
    const int in[4] = {1, i32(s.Cin * s.T), i32(s.H), i32(s.W)}, out[4] = {1, i32(s.Cout), i32(s.Ho), i32(s.Wo)};
    const int bias[4] = {1, i32(s.Cout), 1, 1}, filter[4] = {i32(s.Cout), i32(s.Cin * s.kt), i32(s.kh), i32(s.kw)};
    std::copy_n(in, 4, in_dims);
    std::copy_n(out, 4, out_dims);
    std::copy_n(bias, 4, bias_dims);
    std::copy_n(filter, 4, filter_dims);
  } else {
    const int in[5] = {1, i32(s.Cin), i32(s.T), i32(s.H), i32(s.W)};
    const int out[5] = {1, i32(s.Cout), i32(s.To), i32(s.Ho), i32(s.Wo)};
    const int bias[5] = {1, i32(s.Cout), 1, 1, 1}, filter[5] = {i32(s.Cout), i32(s.Cin), i32(s.kt), i32(s.kh), i32(s.kw)};
    std::copy_n(in, 5, in_dims);
    std::copy_n(out, 5, out_dims);
    std::copy_n(bias, 5, bias_dims);
    std::copy_n(filter, 5, filter_dims);
  }
  int in_strides[5], out_strides[5], bias_strides[5];
  packed(in_dims, nb, in_strides);
  packed(out_dims, nb, out_strides);
  packed(bias_dims, nb, bias_strides);
  const int zeros[3] = {0, 0, 0}, ones[3] = {1, 1, 1};
  const int strides3[3] = {i32(s.st), i32(s.sh), i32(s.sw)}, strides2[2] = {i32(s.sh), i32(s.sw)};
  bool good = ensure_handle(why) &&
              ok(cudnnCreateTensorDescriptor(&p->in), "input descriptor") &&
              ok(cudnnSetTensorNdDescriptor(p->in, CUDNN_DATA_FLOAT, nb, in_dims, in_strides), "input shape") &&
              ok(cudnnCreateTensorDescriptor(&p->out), "output descriptor") &&
              ok(cudnnSetTensorNdDescriptor(p->out, CUDNN_DATA_FLOAT, nb, out_dims, out_strides), "output shape") &&
              ok(cudnnCreateTensorDescriptor(&p->bias), "bias descriptor") &&
              ok(cudnnSetTensorNdDescriptor(p->bias, CUDNN_DATA_FLOAT, nb, bias_dims, bias_strides), "bias shape") &&
              ok(cudnnCreateFilterDescriptor(&p->filter), "filter descriptor") &&
              ok(cudnnSetFilterNdDescriptor(p->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nb, filter_dims),
                 "filter shape") &&
              ok(cudnnCreateConvolutionDescriptor(&p->conv), "convolution descriptor") &&
              ok(cudnnSetConvolutionNdDescriptor(p->conv, nb - 2, zeros, fold ? strides2 : strides3, ones,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                 "convolution geometry") &&
              ok(cudnnSetConvolutionMathType(p->conv, CUDNN_DEFAULT_MATH), "math type");
  if (good) {  // the output shape must be the one the caller expects
    int dims[5] = {};
    good = ok(cudnnGetConvolutionNdForwardOutputDim(p->conv, p->in, p->filter, nb, dims), "output shape") &&
           ((dims[nb - 2] == s.Ho && dims[nb - 1] == s.Wo && (fold || dims[2] == s.To)) ||
            (why = cat("cuDNN's output ", dims[nb - 2], "x", dims[nb - 1], " is not ", s.Ho, "x", s.Wo), false));
  }
  good = good && choose_forward(*p, why);
  if (!good) {
    log_debug("cuDNN 3-D convolution refused (", s.Cin, " -> ", s.Cout, " channels, ", s.T, "x", s.H, "x", s.W,
              ", kernel ", s.kt, "x", s.kh, "x", s.kw, "): ", why, "; using h3's f32 kernel");
    p.reset();
  }
  return (plans3d_[key] = std::move(p)).get();
}

CudnnConv::Served CudnnConv::run(const Conv3dShape& s, const float* x, const float* w, const float* bias, float* y,
                                 const std::function<void*(size_t)>& workspace) {
  Plan* p = plan_for(s);
  if (!p) return Served::Refused;
  void* ws = p->workspace ? workspace(p->workspace) : nullptr;
  const float one = 1.f, zero = 0.f;
  H3_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, p->in, x, p->filter, w, p->conv, p->fwd, ws, p->workspace,
                                         &zero, p->out, y),
                 "conv3d");
  if (bias) H3_CUDNN_CHECK(cudnnAddTensor(handle_, &one, p->bias, bias, &one, p->out, y), "conv3d bias");
  return p->tensor_cores ? Served::TensorCores : Served::Fma;
}

CudnnConv::Served CudnnConv::run(const Conv1dShape& s, const float* x, const float* w, const float* bias, float* y,
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
