#include "backend/cuda/cudnn_conv.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "util/log.h"

// The convolution API cuDNN 9 marks deprecated (see the header); this file is its only user.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace h3::cuda {

namespace {

constexpr int kAlgos = 16;  // legacy heuristic results asked for
// An autotuned candidate replaces the heuristic's first configuration only when it is faster by more than this
// fraction: engines that time alike keep the heuristic's order, so that the choice (and the bits) rarely differ
// between processes.
constexpr float kAutotuneMargin = 0.05f;
constexpr int kAutotuneReps = 2;  // timed runs per candidate after its warm-up

// A refusal while describing or planning a graph: caught in build_graph() and kept as the shape's reason.
struct GraphRefused {
  std::string why;
};

void graph_ok(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw GraphRefused{cat(what, ": ", cudnn_status_text(s))};
}

class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    graph_ok(cudnnBackendCreateDescriptor(type, &d_), "create descriptor");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};
using DescPtr = std::shared_ptr<Desc>;

void set_attr(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
              int64_t n, const void* v, const char* what) {
  graph_ok(cudnnBackendSetAttribute(d, name, type, n, v), what);
}

// Unique ids of the convolution's tensors in the variant pack.
enum ConvUid : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

// dims [n, c, 1, w] with NCHW strides, or the same dims with NHWC strides (c fastest).
std::vector<int64_t> strides_4d(int64_t c, int64_t w, bool nhwc) {
  return nhwc ? std::vector<int64_t>{c * w, 1, c * w, c} : std::vector<int64_t>{c * w, w, w, 1};
}

const char* fwd_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

std::string mib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return b;
}

}  // namespace

std::string shape_text(const Conv1dShape& s) {
  return cat(s.B, "x", s.Cin, "x", s.T, " -> ", s.Cout, "x", s.Tout, " k", s.k, " s", s.stride, " p", s.padding, " d",
             s.dilation, s.transposed ? ", transposed" : "", s.nhwc ? ", channels-last" : "");
}

double conv_flops(const Conv1dShape& s) {
  const double out_len = static_cast<double>(s.transposed ? s.T : s.Tout);
  return 2.0 * static_cast<double>(s.B) * static_cast<double>(s.Cin) * static_cast<double>(s.Cout) *
         static_cast<double>(s.k) * out_len;
}

struct CudnnConv::Plan {
  cudnnTensorDescriptor_t in = nullptr, out = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // The legacy API's choice (legacy: one was found; else legacy_why says why not).
  bool legacy = false;
  std::string legacy_why;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd{};
  size_t workspace = 0;
  bool tensor_cores = false;
  // What served the last run: 0 nothing yet, 1 the graph, 2 the legacy API, 3 refused.
  int served = 0;

  ~Plan() {
    if (in) cudnnDestroyTensorDescriptor(in);
    if (out) cudnnDestroyTensorDescriptor(out);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (filter) cudnnDestroyFilterDescriptor(filter);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
  std::string legacy_text() const {
    return cat("legacy ", fwd_algo_name(fwd), tensor_cores ? " tf32" : " fma", ", workspace ", mib(workspace));
  }
};

// One finalized execution plan of a shape's graph.
struct CudnnConv::GraphConfig {
  std::shared_ptr<std::vector<DescPtr>> keep;  // the graph's descriptors, alive with every plan made from it
  DescPtr plan;
  int64_t workspace = 0;
  bool tensor_cores = false;
  std::string name;  // "engine 12 {k2=3,k14=4}"
  float ms = -1;     // autotune's time
  bool failed = false;  // its execution failed: never chosen again
  std::string text() const {
    return cat("graph ", name, tensor_cores ? " tf32" : " fma", ", workspace ", mib(static_cast<size_t>(workspace)));
  }
};

// A shape's usable configurations in the heuristic's order and the one that serves.
struct CudnnConv::Graph {
  std::vector<std::shared_ptr<GraphConfig>> configs;
  size_t best = 0;
  bool timed = false;
  bool legacy_best = false;  // autotune: the legacy API's algorithm beat every configuration
  float legacy_ms = -1;      // autotune's time of the legacy algorithm
  bool served = false;       // a channels-last shape has run (channels-first ones: Plan::served)
  std::string why;  // configs empty: why
  std::string skipped;  // configurations left out, and why (debug)
};

std::string shape_text(const Conv3dShape& s, bool folded) {
  return cat(s.Cin, "x", s.T, "x", s.H, "x", s.W, " -> ", s.Cout, "x", s.To, "x", s.Ho, "x", s.Wo, " k", s.kt, "x",
             s.kh, "x", s.kw, " s", s.st, "x", s.sh, "x", s.sw, folded ? ", 2-D" : "", s.nhwc ? ", channels-last" : "");
}

// A forward convolution as the graph API describes it: x, w, y dims and strides (4-D, or 5-D for a 3-D
// convolution) and, per spatial dim, the stride, pads and dilation.
struct CudnnConv::GraphSpec {
  std::vector<int64_t> xd, xs, wd, ws, yd, ys;
  std::vector<int64_t> stride, pre, post, dil;
};

namespace {

// Fully packed strides of dims d (the last fastest).
std::vector<int64_t> packed_strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> st(d.size(), 1);
  for (int k = static_cast<int>(d.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * d[k + 1];
  return st;
}

// NHWC strides of 4-D dims [n, c, h, w] (c fastest).
std::vector<int64_t> nhwc_strides(const std::vector<int64_t>& d) {
  return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

}  // namespace

CudnnConv::CudnnConv(cudaStream_t stream, bool fold_single_window, ConvChoice choice)
    : stream_(stream), fold_single_window_(fold_single_window), choice_(choice) {}

CudnnConv::~CudnnConv() {
  plans_.clear();  // descriptors before the handle
  graphs_.clear();
  plans3d_.clear();
  graphs3d_.clear();
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
  if (handle_) cudnnDestroy(handle_);
}

// The first of cuDNN's heuristic results (best first) that is deterministic (the same output for the same input on
// every run: no atomics; a seed must reproduce its audio) and fits the workspace budget: its algorithm, workspace and
// math type (TF32 tensor cores unless it is an FMA algorithm) go into the plan.
template <typename Perf, typename Algo>
bool CudnnConv::choose(const Perf* perf, int n, Algo& algo, Plan& p, std::string& why) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kLegacyWorkspaceBudget ||
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

// Describes the shape (legacy descriptors: the legacy algorithms and every bias addition use them) and picks the
// legacy API's first heuristic choice that fits the budget; null (and a debug line) when the shape cannot even be
// described, a plan without a legacy algorithm when only that is missing.
CudnnConv::Plan* CudnnConv::plan_for(const Conv1dShape& s) {
  auto it = plans_.find(s);
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
  if (!good) {
    log_debug("cuDNN convolution refused (", shape_text(s), "): ", why, "; using h3's f32 kernels");
    p.reset();
    return (plans_[s] = std::move(p)).get();
  }
  if (!s.transposed) {
    p->legacy = choose_forward(*p, why);
  } else {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kAlgos];
    int n = 0;
    p->legacy = ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p->filter, p->in, p->conv, p->out, kAlgos,
                                                               &n, perf),
                   "backward-data heuristic") &&
                choose(perf, n, p->bwd, *p, why);
  }
  if (!p->legacy) p->legacy_why = why;
  return (plans_[s] = std::move(p)).get();
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

// ---------------------------------------------------------------------------------------------------------------
// The graph API (1-D forward convolutions)

// The shape's convolution-forward graph and its usable engine configurations (see the header), at most
// `max_configs` of them, in the heuristic's order (mode INSTANT's list, then the fallback list's). Never null;
// `configs` empty and `why` set when there are none.
std::shared_ptr<CudnnConv::Graph> CudnnConv::build_graph(const Conv1dShape& s, bool nhwc, int max_configs) {
  GraphSpec spec;
  spec.xd = {s.B, s.Cin, 1, s.T};
  spec.xs = strides_4d(s.Cin, s.T, nhwc);
  spec.wd = {s.Cout, s.Cin, 1, s.k};
  spec.ws = strides_4d(s.Cin, s.k, nhwc);
  spec.yd = {s.B, s.Cout, 1, s.Tout};
  spec.ys = strides_4d(s.Cout, s.Tout, nhwc);
  spec.stride = {1, s.stride};
  spec.pre = spec.post = {0, s.padding};
  spec.dil = {1, s.dilation};
  return build_graph(spec, max_configs);
}

std::shared_ptr<CudnnConv::Graph> CudnnConv::build_graph(const GraphSpec& spec, int max_configs) {
  auto g = std::make_shared<Graph>();
  try {
    std::string why;
    if (!ensure_handle(why)) throw GraphRefused{why};
    auto keep = std::make_shared<std::vector<DescPtr>>();
    auto make = [&](cudnnBackendDescriptorType_t t) {
      keep->push_back(std::make_shared<Desc>(t));
      return keep->back()->get();
    };
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    auto tensor = [&](int64_t uid, std::vector<int64_t> dims, std::vector<int64_t> strides) {
      cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
      const int64_t align = 16;
      set_attr(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "tensor data type");
      const int64_t nd = static_cast<int64_t>(dims.size());
      set_attr(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims.data(), "tensor dimensions");
      set_attr(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides.data(), "tensor strides");
      set_attr(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
      set_attr(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
      graph_ok(cudnnBackendFinalize(t), "finalize tensor");
      return t;
    };
    cudnnBackendDescriptor_t x = tensor(kUidX, spec.xd, spec.xs);
    cudnnBackendDescriptor_t w = tensor(kUidW, spec.wd, spec.ws);
    cudnnBackendDescriptor_t y = tensor(kUidY, spec.yd, spec.ys);

    cudnnBackendDescriptor_t conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t dims = static_cast<int64_t>(spec.stride.size());
    const int64_t* dil = spec.dil.data();
    const int64_t* str = spec.stride.data();
    set_attr(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "convolution compute type");
    set_attr(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "convolution mode");
    set_attr(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, "convolution dims");
    set_attr(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dims, dil, "convolution dilations");
    set_attr(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, dims, str, "convolution strides");
    set_attr(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, dims, spec.pre.data(),
             "convolution pre-paddings");
    set_attr(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, dims, spec.post.data(),
             "convolution post-paddings");
    graph_ok(cudnnBackendFinalize(conv), "finalize convolution");

    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    const float alpha = 1.f, beta = 0.f;
    set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "conv x");
    set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w, "conv w");
    set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "conv y");
    set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv,
             "conv descriptor");
    set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, "conv alpha");
    set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, "conv beta");
    graph_ok(cudnnBackendFinalize(op), "finalize convolution op");

    cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set_attr(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op, "graph ops");
    set_attr(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_, "graph handle");
    graph_ok(cudnnBackendFinalize(graph), "finalize operation graph");

    // The heuristic's configurations, then the fallback list's (PyTorch's two sources, in that order).
    std::vector<cudnnBackendDescriptor_t> cfgs;
    std::string sources;
    for (const cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK}) {
      try {
        cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        set_attr(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
                 "heuristics graph");
        set_attr(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, "heuristics mode");
        graph_ok(cudnnBackendFinalize(heur), "finalize heuristics");
        int64_t count = 0;
        graph_ok(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                          &count, nullptr),
                 "count engine configurations");
        std::vector<cudnnBackendDescriptor_t> got_cfgs;
        for (int64_t i = 0; i < count; ++i) got_cfgs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        int64_t got = 0;
        graph_ok(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                          &got, got_cfgs.data()),
                 "get engine configurations");
        cfgs.insert(cfgs.end(), got_cfgs.begin(), got_cfgs.begin() + std::min(got, count));
        sources += cat(hm == CUDNN_HEUR_MODE_INSTANT ? "heuristic " : "fallback ", std::min(got, count), "; ");
      } catch (const GraphRefused& r) {
        sources += cat(hm == CUDNN_HEUR_MODE_INSTANT ? "heuristic: " : "fallback: ", r.why, "; ");
      }
    }
    for (cudnnBackendDescriptor_t cfg : cfgs) {
      if (static_cast<int>(g->configs.size()) >= max_configs) break;
      // The engine's notes and identity (descriptors of this look only: not kept).
      const Desc engine_desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      cudnnBackendDescriptor_t engine = engine_desc.get();
      int64_t n = 0;
      if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) !=
          CUDNN_STATUS_SUCCESS)
        continue;
      int64_t index = -1;
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
      cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
      int64_t n_notes = 0;
      if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n_notes, notes) != CUDNN_STATUS_SUCCESS)
        n_notes = 0;
      cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
      int64_t n_behavior = 0;
      if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                   CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n_behavior, behavior) != CUDNN_STATUS_SUCCESS)
        n_behavior = 0;
      auto has_note = [&](cudnnBackendNumericalNote_t v) { return std::find(notes, notes + n_notes, v) != notes + n_notes; };
      const bool runtime_compiled = std::find(behavior, behavior + n_behavior, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) !=
                                    behavior + n_behavior;
      const char* skip = has_note(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) ? "non-deterministic"
                         : has_note(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ? "down-converts its inputs"
                         : runtime_compiled ? "compiled at run time"
                                            : nullptr;
      if (skip) {
        g->skipped += cat(" [engine ", index, ": ", skip, "]");
        continue;
      }
      // Its knob choices, for the name.
      std::string knobs;
      {
        std::vector<DescPtr> choice_descs;
        std::vector<cudnnBackendDescriptor_t> choices;
        for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
          choice_descs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
          choices.push_back(choice_descs.back()->get());
        }
        int64_t n_choices = 0;
        if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     CUDNN_KNOB_TYPE_COUNTS, &n_choices, choices.data()) == CUDNN_STATUS_SUCCESS)
          for (int64_t i = 0; i < n_choices; ++i) {
            cudnnBackendKnobType_t type{};
            int64_t value = 0, m = 0;
            if (cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &m,
                                         &type) == CUDNN_STATUS_SUCCESS &&
                cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &m,
                                         &value) == CUDNN_STATUS_SUCCESS)
              knobs += cat(knobs.empty() ? "" : ",", "k", static_cast<int>(type), "=", value);
          }
      }
      auto c = std::make_shared<GraphConfig>();
      c->plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      cudnnBackendDescriptor_t pd = c->plan->get();
      set_attr(pd, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_, "plan handle");
      set_attr(pd, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg,
               "plan engine config");
      const cudnnStatus_t st = cudnnBackendFinalize(pd);
      if (st != CUDNN_STATUS_SUCCESS) {
        g->skipped += cat(" [engine ", index, ": ", cudnnGetErrorString(st), "]");
        continue;
      }
      graph_ok(cudnnBackendGetAttribute(pd, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                        &c->workspace),
               "plan workspace size");
      if (c->workspace < 0 || static_cast<size_t>(c->workspace) > kGraphWorkspaceBudget) {
        g->skipped += cat(" [engine ", index, ": workspace ", mib(static_cast<size_t>(c->workspace)), "]");
        continue;
      }
      c->tensor_cores = has_note(CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
      c->name = cat("engine ", index, knobs.empty() ? "" : cat(" {", knobs, "}"));
      c->keep = keep;
      g->configs.push_back(std::move(c));
    }
    if (g->configs.empty())
      throw GraphRefused{cat("no usable engine configuration (", sources, "left out:", g->skipped, ")")};
  } catch (const GraphRefused& r) {
    g->configs.clear();
    g->why = r.why;
  }
  return g;
}

CudnnConv::Graph& CudnnConv::graph_for(const Conv1dShape& s) {
  auto it = graphs_.find(s);
  if (it != graphs_.end()) return *it->second;
  std::shared_ptr<Graph> g = build_graph(s, s.nhwc, choice_ == ConvChoice::Autotune ? kAutotuneCandidates : 1);
  if (g->configs.empty())
    log_debug("cuDNN graph convolution refused (", shape_text(s), "): ", g->why, "; using the legacy API");
  else if (!g->skipped.empty())
    log_debug("cuDNN graph convolution (", shape_text(s), "): left out", g->skipped);
  return *(graphs_[s] = std::move(g));
}

cudnnStatus_t CudnnConv::execute(const GraphConfig& c, const float* x, const float* w, float* y, void* ws) {
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* ptrs[3] = {const_cast<float*>(x), const_cast<float*>(w), y};
  cudnnBackendDescriptor_t pack = nullptr;
  H3_CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), "conv1d");
  std::unique_ptr<void, void (*)(void*)> guard(pack, [](void* d) {
    cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(d));
  });
  H3_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids),
                 "conv1d");
  H3_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs),
                 "conv1d");
  H3_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws),
                 "conv1d");
  H3_CUDNN_CHECK(cudnnBackendFinalize(pack), "conv1d");
  const cudnnStatus_t st = cudnnBackendExecute(handle_, c.plan->get(), pack);
  if (st != CUDNN_STATUS_SUCCESS) cudaGetLastError();  // a failed launch must not be blamed on the next kernel
  return st;
}

// Runs the configuration that serves the graph — the autotune's choice, or the heuristic's first — and, should its
// execution fail (PyTorch's try_plans: a plan may finalize and still not run), the next usable one, in the
// heuristic's order; false when none runs.
bool CudnnConv::serve(Graph& g, const std::function<std::string()>& label, const float* x, const float* w, float* y,
                      const std::function<void*(size_t)>& workspace, bool& tensor_cores) {
  while (true) {
    // g.best (the autotune's choice; else 0, or the last that ran), else the first usable after it, else before it.
    size_t i = g.best;
    while (i < g.configs.size() && g.configs[i]->failed) ++i;
    if (i == g.configs.size()) i = 0;
    while (i < g.configs.size() && g.configs[i]->failed) ++i;
    if (i == g.configs.size()) return false;
    GraphConfig& c = *g.configs[i];
    const cudnnStatus_t st =
        execute(c, x, w, y, c.workspace > 0 ? workspace(static_cast<size_t>(c.workspace)) : nullptr);
    if (st == CUDNN_STATUS_SUCCESS) {
      g.best = i;
      tensor_cores = c.tensor_cores;
      return true;
    }
    c.failed = true;
    log_debug("cuDNN convolution (", label(), "): ", c.name, " failed to run (", cudnn_status_text(st),
              "); trying the next configuration");
  }
}

// Device milliseconds of fn: a warm-up run (timed too), then `reps` timed runs; the fastest. A warm-up slower than
// give_up_after_ms (when > 0) is the answer without further runs.
float CudnnConv::time_ms(const std::function<void()>& fn, int reps, float give_up_after_ms) {
  if (!start_) {
    H3_CUDA_CHECK(cudaEventCreate(&start_), "convolution timing");
    H3_CUDA_CHECK(cudaEventCreate(&stop_), "convolution timing");
  }
  float best = -1;
  for (int i = 0; i <= reps; ++i) {
    H3_CUDA_CHECK(cudaEventRecord(start_, stream_), "convolution timing");
    fn();
    H3_CUDA_CHECK(cudaEventRecord(stop_, stream_), "convolution timing");
    H3_CUDA_CHECK(cudaEventSynchronize(stop_), "convolution timing");
    float t = 0;
    H3_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_), "convolution timing");
    if (i == 0) {
      if (give_up_after_ms > 0 && t > give_up_after_ms) return t;
      if (reps > 0) continue;  // the warm-up's time counts only when it is all there is
    }
    best = best < 0 ? t : std::min(best, t);
  }
  return best;
}

// Times the legacy API's algorithm (when the shape has one: the choice before the graph API, so that autotuning
// never loses to it) and the graph's configurations on the first call's operands. The first timed is the incumbent;
// another replaces it only when faster by more than kAutotuneMargin. A candidate whose warm-up takes over twice the
// best time so far is not timed further.
void CudnnConv::autotune(Graph& g, Plan* legacy, const std::string& label, const float* x, const float* w, float* y,
                         const std::function<void*(size_t)>& workspace) {
  g.timed = true;
  g.best = 0;
  g.legacy_best = false;
  float best_ms = -1;
  std::string report;
  if (legacy && legacy->legacy) {
    Plan& p = *legacy;
    const float one = 1.f, zero = 0.f;
    void* ws = p.workspace ? workspace(p.workspace) : nullptr;
    g.legacy_ms = time_ms(
        [&] {
          H3_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, p.in, x, p.filter, w, p.conv, p.fwd, ws, p.workspace,
                                                 &zero, p.out, y),
                         "conv1d autotune");
        },
        kAutotuneReps);
    best_ms = g.legacy_ms;
    g.legacy_best = true;
    report += cat(" legacy ", fwd_algo_name(p.fwd), "=", g.legacy_ms, "ms");
  }
  for (size_t i = 0; i < g.configs.size(); ++i) {
    GraphConfig& c = *g.configs[i];
    void* ws = c.workspace > 0 ? workspace(static_cast<size_t>(c.workspace)) : nullptr;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    c.ms = time_ms(
        [&] {
          if (st == CUDNN_STATUS_SUCCESS) st = execute(c, x, w, y, ws);
        },
        kAutotuneReps, best_ms > 0 ? 2 * best_ms : -1);
    if (st != CUDNN_STATUS_SUCCESS) {
      c.failed = true;
      c.ms = -1;
      report += cat(" ", c.name, "=failed (", cudnn_status_text(st), ")");
      continue;
    }
    report += cat(" ", c.name, "=", c.ms, "ms");
    if (best_ms < 0 || c.ms < best_ms * (1 - kAutotuneMargin)) {
      best_ms = c.ms;
      g.best = i;
      g.legacy_best = false;
    }
  }
  log_debug("cuDNN convolution autotune (", label, "):", report, "; serving ",
            g.legacy_best ? std::string("legacy") : g.configs[g.best]->name);
  // The autotune's own runs leave y written by its last candidate; run() then runs the choice.
}

CudnnConv::Served CudnnConv::run(const Conv1dShape& s, const float* x, const float* w, const float* bias, float* y,
                                 const std::function<void*(size_t)>& workspace) {
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (s.nhwc) {  // the graph API alone, no bias
    if (choice_ == ConvChoice::Legacy || s.transposed || bias || !aligned(x) || !aligned(w) || !aligned(y))
      return Served::Refused;
    Graph& g = graph_for(s);
    if (g.configs.empty()) return Served::Refused;
    if (choice_ == ConvChoice::Autotune && !g.timed) autotune(g, nullptr, shape_text(s), x, w, y, workspace);
    bool tensor_cores = false;
    if (!serve(g, [&] { return shape_text(s); }, x, w, y, workspace, tensor_cores)) return Served::Refused;
    g.served = true;
    return tensor_cores ? Served::TensorCores : Served::Fma;
  }
  Plan* p = plan_for(s);
  if (!p) return Served::Refused;
  const float one = 1.f, zero = 0.f;
  if (choice_ != ConvChoice::Legacy && !s.transposed && aligned(x) && aligned(w) && aligned(y)) {
    Graph& g = graph_for(s);
    if (!g.configs.empty() && choice_ == ConvChoice::Autotune && !g.timed)
      autotune(g, p, shape_text(s), x, w, y, workspace);
    bool tensor_cores = false;
    if (!g.configs.empty() && !(choice_ == ConvChoice::Autotune && g.legacy_best) &&
        serve(g, [&] { return shape_text(s); }, x, w, y, workspace, tensor_cores)) {
      if (bias) H3_CUDNN_CHECK(cudnnAddTensor(handle_, &one, p->bias, bias, &one, p->out, y), "conv1d bias");
      p->served = 1;
      return tensor_cores ? Served::TensorCores : Served::Fma;
    }
  }
  if (!p->legacy) {
    if (p->served != 3)
      log_debug("cuDNN convolution refused (", shape_text(s), "): ", p->legacy_why, "; using h3's f32 kernels");
    p->served = 3;
    return Served::Refused;
  }
  void* ws = p->workspace ? workspace(p->workspace) : nullptr;
  if (s.transposed)
    H3_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, p->filter, w, p->in, x, p->conv, p->bwd, ws,
                                                p->workspace, &zero, p->out, y),
                   "conv_transpose1d");
  else
    H3_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, p->in, x, p->filter, w, p->conv, p->fwd, ws, p->workspace,
                                           &zero, p->out, y),
                   "conv1d");
  if (bias) H3_CUDNN_CHECK(cudnnAddTensor(handle_, &one, p->bias, bias, &one, p->out, y), "conv1d bias");
  p->served = 2;
  return p->tensor_cores ? Served::TensorCores : Served::Fma;
}

std::string CudnnConv::describe(const Conv1dShape& s, bool verbose) const {
  // The autotune's times: the legacy algorithm's, then each configuration's.
  auto timings = [&](const Graph& g) {
    std::string t = cat(" (autotuned:", g.legacy_ms >= 0 ? cat(" legacy ", g.legacy_ms, "ms") : std::string());
    for (size_t i = 0; i < g.configs.size(); ++i) t += cat(" #", i + 1, " ", g.configs[i]->ms, "ms");
    return t + ")";
  };
  const auto git = graphs_.find(s);
  const Graph* g = git == graphs_.end() ? nullptr : git->second.get();
  if (s.nhwc) {
    if (!g) return "";
    if (g->configs.empty()) return cat("refused: ", g->why);
    if (!g->served) return "";
    const GraphConfig& c = *g->configs[g->best];
    std::string out = c.text();
    if (verbose) out += g->timed ? cat(timings(*g), ", serving #", g->best + 1) : " (the heuristic's first)";
    return out;
  }
  auto it = plans_.find(s);
  if (it == plans_.end()) return "";
  const Plan* p = it->second.get();
  if (!p) return "refused: cuDNN cannot describe the shape";
  if (p->served == 1) {
    const GraphConfig& c = *g->configs[g->best];
    std::string out = c.text();
    if (verbose) {
      if (g->timed)
        out += cat(timings(*g), ", serving #", g->best + 1);
      else
        out += " (the heuristic's first)";
    }
    return out;
  }
  if (p->served == 2) {
    std::string out = p->legacy_text();
    if (verbose && g && g->timed) out += cat(timings(*g), ", serving legacy");
    return out;
  }
  if (p->served == 3) return cat("refused: ", p->legacy_why);
  return "";
}

std::vector<ConvTiming> CudnnConv::compare(const Conv1dShape& s, const float* x, const float* w, float* y,
                                           const std::function<void*(size_t)>& workspace, int reps) {
  std::vector<ConvTiming> out;
  const float one = 1.f, zero = 0.f;
  // The legacy API's choice (the descriptors are the shape's own, shared with run(): nothing in them changes).
  {
    ConvTiming t{"legacy", "", -1};
    Plan* p = s.transposed || s.nhwc ? nullptr : plan_for(s);
    if (!p) {
      t.what = s.transposed ? "transposed: not compared"
               : s.nhwc     ? "channels-last: the graph API only"
                            : "refused: cuDNN cannot describe the shape";
    } else if (!p->legacy) {
      t.what = cat("refused: ", p->legacy_why);
    } else {
      void* ws = p->workspace ? workspace(p->workspace) : nullptr;
      t.what = p->legacy_text();
      t.ms = time_ms(
          [&] {
            H3_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, p->in, x, p->filter, w, p->conv, p->fwd, ws,
                                                   p->workspace, &zero, p->out, y),
                           "conv1d compare");
          },
          reps);
    }
    out.push_back(t);
  }
  if (s.transposed) return out;
  for (bool other : {false, true}) {
    const bool nhwc = s.nhwc != other;
    const char* label = other ? "autotune-other-layout" : "autotune";
    std::shared_ptr<Graph> g = build_graph(s, nhwc, kAutotuneCandidates);
    if (g->configs.empty()) {
      if (!other) out.push_back({"heuristic", cat("refused: ", g->why), -1});
      out.push_back({label, cat(nhwc ? "NHWC" : "NCHW", " refused: ", g->why), -1});
      continue;
    }
    size_t best = 0;
    std::string all;
    for (size_t i = 0; i < g->configs.size(); ++i) {
      GraphConfig& c = *g->configs[i];
      void* ws = c.workspace > 0 ? workspace(static_cast<size_t>(c.workspace)) : nullptr;
      cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
      c.ms = time_ms(
          [&] {
            if (st == CUDNN_STATUS_SUCCESS) st = execute(c, x, w, y, ws);
          },
          reps);
      if (st != CUDNN_STATUS_SUCCESS) c.ms = 1e30f;  // failed: never the best
      all += cat(i ? " " : "", st == CUDNN_STATUS_SUCCESS ? cat(c.ms) : std::string("failed"));
      if (c.ms < g->configs[best]->ms) best = i;
    }
    auto ms_of = [](const GraphConfig& c) { return c.ms >= 1e29f ? -1.0 : static_cast<double>(c.ms); };
    if (!other) out.push_back({"heuristic", g->configs[0]->text(), ms_of(*g->configs[0])});
    out.push_back({label,
                   cat(nhwc ? "NHWC " : "NCHW ", g->configs[best]->text(), " (", best + 1, " of ", g->configs.size(),
                       ": ", all, " ms)"),
                   ms_of(*g->configs[best])});
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// 3-D (legacy API)

CudnnConv::Key3d CudnnConv::key_of(const Conv3dShape& s) {
  return {s.Cin, s.T, s.H, s.W, s.Cout, s.To, s.Ho, s.Wo, s.kt, s.kh, s.kw, s.st, s.sh, s.sw, s.nhwc ? 1 : 0};
}

// The 3-D convolution of one [Cin, T, H, W] item: 5-D NCDHW descriptors with N = 1, no padding, no dilation.
// Channels-first shapes only (the legacy descriptors: its algorithm and the bias addition use them); a plan without
// a legacy algorithm (legacy_why says why) when only that is missing.
CudnnConv::Plan* CudnnConv::plan_for(const Conv3dShape& s) {
  const Key3d key = key_of(s);
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
  const bool fold = folds(s);
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
  if (!good) {
    log_debug("cuDNN 3-D convolution refused (", shape_text(s, fold), "): ", why, "; using h3's f32 kernel");
    p.reset();
    return (plans3d_[key] = std::move(p)).get();
  }
  p->legacy = choose_forward(*p, why);
  if (!p->legacy) p->legacy_why = why;
  return (plans3d_[key] = std::move(p)).get();
}

// The graph of a 3-D shape: the folded 2-D convolution's 4-D descriptors (NCHW, or NHWC for a channels-last shape)
// or the 5-D NCDHW ones.
CudnnConv::Graph& CudnnConv::graph_for(const Conv3dShape& s) {
  const Key3d key = key_of(s);
  auto it = graphs3d_.find(key);
  if (it != graphs3d_.end()) return *it->second;
  const bool fold = folds(s);
  GraphSpec spec;
  if (fold) {
    spec.xd = {1, s.Cin * s.T, s.H, s.W};
    spec.wd = {s.Cout, s.Cin * s.kt, s.kh, s.kw};
    spec.yd = {1, s.Cout, s.Ho, s.Wo};
    spec.stride = {s.sh, s.sw};
  } else {
    spec.xd = {1, s.Cin, s.T, s.H, s.W};
    spec.wd = {s.Cout, s.Cin, s.kt, s.kh, s.kw};
    spec.yd = {1, s.Cout, s.To, s.Ho, s.Wo};
    spec.stride = {s.st, s.sh, s.sw};
  }
  const bool nhwc = s.nhwc && fold;
  spec.xs = nhwc ? nhwc_strides(spec.xd) : packed_strides(spec.xd);
  spec.ws = nhwc ? nhwc_strides(spec.wd) : packed_strides(spec.wd);
  spec.ys = nhwc ? nhwc_strides(spec.yd) : packed_strides(spec.yd);
  spec.pre = spec.post = std::vector<int64_t>(spec.stride.size(), 0);
  spec.dil = std::vector<int64_t>(spec.stride.size(), 1);
  std::shared_ptr<Graph> g;
  if (s.nhwc && !fold) {
    g = std::make_shared<Graph>();
    g->why = "channels-last operands need a single window folded to 2-D";
  } else {
    g = build_graph(spec, choice_ == ConvChoice::Autotune ? kAutotuneCandidates : 1);
  }
  if (g->configs.empty())
    log_debug("cuDNN graph convolution refused (", shape_text(s, fold), "): ", g->why, "; using the legacy API");
  else if (!g->skipped.empty())
    log_debug("cuDNN graph convolution (", shape_text(s, fold), "): left out", g->skipped);
  return *(graphs3d_[key] = std::move(g));
}

CudnnConv::Served CudnnConv::run(const Conv3dShape& s, const float* x, const float* w, const float* bias, float* y,
                                 const std::function<void*(size_t)>& workspace) {
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  auto label = [&] { return shape_text(s, folds(s)); };
  if (s.nhwc) {  // the graph API alone, no bias
    if (choice_ == ConvChoice::Legacy || !folds(s) || bias || !aligned(x) || !aligned(w) || !aligned(y))
      return Served::Refused;
    Graph& g = graph_for(s);
    if (g.configs.empty()) return Served::Refused;
    if (choice_ == ConvChoice::Autotune && !g.timed) autotune(g, nullptr, label(), x, w, y, workspace);
    bool tensor_cores = false;
    if (!serve(g, label, x, w, y, workspace, tensor_cores)) return Served::Refused;
    g.served = true;
    return tensor_cores ? Served::TensorCores : Served::Fma;
  }
  Plan* p = plan_for(s);
  if (!p) return Served::Refused;
  const float one = 1.f, zero = 0.f;
  if (choice_ != ConvChoice::Legacy && aligned(x) && aligned(w) && aligned(y)) {
    Graph& g = graph_for(s);
    if (!g.configs.empty() && choice_ == ConvChoice::Autotune && !g.timed) autotune(g, p, label(), x, w, y, workspace);
    bool tensor_cores = false;
    if (!g.configs.empty() && !(choice_ == ConvChoice::Autotune && g.legacy_best) &&
        serve(g, label, x, w, y, workspace, tensor_cores)) {
      if (bias) H3_CUDNN_CHECK(cudnnAddTensor(handle_, &one, p->bias, bias, &one, p->out, y), "conv3d bias");
      p->served = 1;
      return tensor_cores ? Served::TensorCores : Served::Fma;
    }
  }
  if (!p->legacy) {
    if (p->served != 3)
      log_debug("cuDNN convolution refused (", label(), "): ", p->legacy_why, "; using h3's f32 kernel");
    p->served = 3;
    return Served::Refused;
  }
  p->served = 2;
  void* ws = p->workspace ? workspace(p->workspace) : nullptr;
  H3_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, p->in, x, p->filter, w, p->conv, p->fwd, ws, p->workspace,
                                         &zero, p->out, y),
                 "conv3d");
  if (bias) H3_CUDNN_CHECK(cudnnAddTensor(handle_, &one, p->bias, bias, &one, p->out, y), "conv3d bias");
  return p->tensor_cores ? Served::TensorCores : Served::Fma;
}

}  // namespace h3::cuda

#pragma GCC diagnostic pop
