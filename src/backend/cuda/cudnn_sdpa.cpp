#include "backend/cuda/cudnn_sdpa.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "util/env.h"
#include "util/log.h"

namespace h3::cuda {

namespace {

// A refusal while describing or planning a graph: caught in build() and remembered as the reason for the shape.
struct Refused {
  std::string why;
};

void ok(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw Refused{cat(what, ": ", cudnn_status_text(s))};
}

class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { ok(cudnnBackendCreateDescriptor(type, &d_), "create descriptor"); }
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

// Unique ids of the non-virtual tensors (the variant pack names them).
enum Uid : int64_t { kQ = 1, kK = 2, kV = 3, kO = 4, kScale = 5, kNegInf = 6 };

// Describes one operation graph; every descriptor it creates stays alive in `keep` (and then in the plan).
class GraphBuilder {
 public:
  std::vector<DescPtr> keep;
  std::vector<cudnnBackendDescriptor_t> ops;

  DescPtr make(cudnnBackendDescriptorType_t type) {
    keep.push_back(std::make_shared<Desc>(type));
    return keep.back();
  }
  static void set(const DescPtr& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
                  const void* v, const char* what) {
    ok(cudnnBackendSetAttribute(d->get(), name, type, n, v), what);
  }
  static void set_desc(const DescPtr& d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t v,
                       const char* what) {
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
  }

  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& strides, bool is_virtual, bool by_value = false) {
    DescPtr t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(dims.size()), dims.data(),
        "tensor dimensions");
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(strides.size()), strides.data(),
        "tensor strides");
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor virtual flag");
    if (by_value) set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor by-value flag");
    ok(cudnnBackendFinalize(t->get()), "finalize tensor");
    return t->get();
  }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis = -1) {
    DescPtr pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision");
    if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
    ok(cudnnBackendFinalize(pw->get()), "finalize pointwise");
    DescPtr op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw->get(), "pointwise op");
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise x");
    if (b) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "pointwise b");
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise y");
    if (t) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, "pointwise t");
    const float one = 1.f;
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, "pointwise alpha1");
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, "pointwise alpha2");
    ok(cudnnBackendFinalize(op->get()), "finalize pointwise op");
    ops.push_back(op->get());
  }

  void reduction(cudnnReduceTensorOp_t red, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    DescPtr r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "reduction type");
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red, "reduction operator");
    ok(cudnnBackendFinalize(r->get()), "finalize reduction");
    DescPtr op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r->get(), "reduction op");
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction x");
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction y");
    ok(cudnnBackendFinalize(op->get()), "finalize reduction op");
    ops.push_back(op->get());
  }

  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    DescPtr m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul type");
    ok(cudnnBackendFinalize(m->get()), "finalize matmul");
    DescPtr op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul a");
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, "matmul b");
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul c");
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, m->get(), "matmul op");
    ok(cudnnBackendFinalize(op->get()), "finalize matmul op");
    ops.push_back(op->get());
  }
};

std::vector<int64_t> strides_of(const int64_t (&s)[4]) { return {s[0], s[1], s[2], s[3]}; }

// How a graph form is spelled: the rank of the by-value scalar tensors (cudnn-frontend writes them 1-D, older
// users 4-D) and whether the softmax statistics are described (cudnn-frontend does so even for inference).
struct Spelling {
  int scalar_rank = 4;
  bool with_stats = true;
};

std::vector<int64_t> scalar_dims(int rank) { return std::vector<int64_t>(static_cast<size_t>(rank), 1); }

void describe_unified(GraphBuilder& g, const SdpaShape& s, const Spelling& sp) {
  const int64_t b = s.batch, hq = s.heads_q, hk = s.heads_kv, n = s.seq, d = s.head_dim;
  auto q = g.tensor(kQ, s.dtype, {b, hq, n, d}, strides_of(s.q_stride), false);
  auto k = g.tensor(kK, s.dtype, {b, hk, n, d}, strides_of(s.k_stride), false);
  auto v = g.tensor(kV, s.dtype, {b, hk, n, d}, strides_of(s.v_stride), false);
  auto o = g.tensor(kO, s.dtype, {b, hq, n, d}, strides_of(s.o_stride), false);
  auto scale = g.tensor(kScale, CUDNN_DATA_FLOAT, scalar_dims(sp.scalar_rank), scalar_dims(sp.scalar_rank), false,
                        true);
  DescPtr op = g.make(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
  GraphBuilder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q, "sdpa q");
  GraphBuilder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k, "sdpa k");
  GraphBuilder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v, "sdpa v");
  GraphBuilder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o, "sdpa o");
  GraphBuilder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale, "sdpa scale");
  ok(cudnnBackendFinalize(op->get()), "finalize sdpa op");
  g.ops.push_back(op->get());
}

// The graph cuDNN's flash-attention fprop engine matches (the same one cudnn-frontend describes for inference).
void describe_composite(GraphBuilder& g, const SdpaShape& s, const Spelling& sp) {
  const int64_t b = s.batch, hq = s.heads_q, hk = s.heads_kv, n = s.seq, d = s.head_dim;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  auto q = g.tensor(kQ, s.dtype, {b, hq, n, d}, strides_of(s.q_stride), false);
  // K enters the first product transposed: dims (b, h, d, n), the channel and row strides swapped.
  auto kt = g.tensor(kK, s.dtype, {b, hk, d, n}, {s.k_stride[0], s.k_stride[1], s.k_stride[3], s.k_stride[2]}, false);
  auto v = g.tensor(kV, s.dtype, {b, hk, n, d}, strides_of(s.v_stride), false);
  auto o = g.tensor(kO, s.dtype, {b, hq, n, d}, strides_of(s.o_stride), false);
  const std::vector<int64_t> one = scalar_dims(sp.scalar_rank);
  auto scale = g.tensor(kScale, f32, one, one, false, true);
  const std::vector<int64_t> sdims{b, hq, n, n}, sstr{hq * n * n, n * n, n, 1};
  const std::vector<int64_t> rdims{b, hq, n, 1}, rstr{hq * n, n, 1, 1};
  int64_t uid = 100;
  auto virt = [&](cudnnDataType_t dt, const std::vector<int64_t>& dims, const std::vector<int64_t>& str) {
    return g.tensor(uid++, dt, dims, str, true);
  };
  auto s1 = virt(f32, sdims, sstr);
  g.matmul(q, kt, s1);
  auto s2 = virt(f32, sdims, sstr);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, s1, scale, nullptr, s2);
  auto logits = s2;
  if (s.causal) {
    auto row = virt(CUDNN_DATA_INT32, sdims, sstr);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s2, nullptr, nullptr, row, 2);
    auto col = virt(CUDNN_DATA_INT32, sdims, sstr);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s2, nullptr, nullptr, col, 3);
    auto keep = virt(CUDNN_DATA_BOOLEAN, sdims, sstr);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    auto neg_inf = g.tensor(kNegInf, f32, one, one, false, true);
    auto masked = virt(f32, sdims, sstr);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s2, neg_inf, keep, masked);
    logits = masked;
  }
  auto mx = virt(f32, rdims, rstr);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, logits, mx);
  auto shifted = virt(f32, sdims, sstr);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, logits, mx, nullptr, shifted);
  auto ex = virt(f32, sdims, sstr);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, shifted, nullptr, nullptr, ex);
  auto sum = virt(f32, rdims, rstr);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
  if (sp.with_stats) {  // the softmax statistics (max + log sum), virtual
    auto log_sum = virt(f32, rdims, rstr);
    g.pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, log_sum);
    auto stats = virt(f32, rdims, rstr);
    g.pointwise(CUDNN_POINTWISE_ADD, f32, mx, log_sum, nullptr, stats);
  }
  auto p = virt(s.dtype, sdims, sstr);  // P in the input type: bf16 P·V with f32 accumulation
  g.pointwise(CUDNN_POINTWISE_DIV, f32, ex, sum, nullptr, p);
  g.matmul(p, v, o);
}

std::string env_form() { return env_word("H3_CUDNN_SDPA", "", {"unified", "composite"}); }

}  // namespace

struct CudnnSdpa::Plan {
  std::shared_ptr<std::vector<DescPtr>> keep;
  DescPtr plan;
  int64_t workspace = 0;
  bool needs_neg_inf = false;
  std::string form;
};

CudnnSdpa::CudnnSdpa(cudaStream_t stream) : stream_(stream) {
  H3_CUDNN_CHECK(cudnnCreate(&handle_), "attention");
  H3_CUDNN_CHECK(cudnnSetStream(handle_, stream_), "attention");
}

CudnnSdpa::~CudnnSdpa() {
  plans_.clear();
  if (handle_) cudnnDestroy(handle_);
}

CudnnSdpa::Key CudnnSdpa::key_of(const SdpaShape& s) {
  std::vector<int64_t> strides;
  for (const auto* a : {&s.q_stride, &s.k_stride, &s.v_stride, &s.o_stride}) strides.insert(strides.end(), *a, *a + 4);
  return Key{s.batch, s.heads_q, s.heads_kv, s.seq, s.head_dim, s.causal, int(s.dtype), strides};
}

std::vector<std::shared_ptr<CudnnSdpa::Plan>> CudnnSdpa::build(const SdpaShape& s, std::string* why) {
  constexpr int kPlansPerForm = 2;
  const std::string only = env_form();
  std::string reasons;
  std::vector<std::shared_ptr<Plan>> plans;
  struct Variant {
    const char* form;
    Spelling spelling;
  };
  // Alternative spellings of a form are tried only while the form has produced no plan.
  const Variant variants[] = {{"unified", {4, true}}, {"unified", {1, true}}, {"composite", {4, true}},
                              {"composite", {1, true}}, {"composite", {4, false}}};
  for (const Variant& var : variants) {
    const char* form = var.form;
    const bool unified = std::strcmp(form, "unified") == 0;
    if (!only.empty() && only != form) continue;
    if (std::any_of(plans.begin(), plans.end(), [&](const auto& p) { return p->form == form; })) continue;
    if (unified && (s.causal || version() < 91301)) {
      if (var.spelling.scalar_rank == 4) reasons += cat(form, ": needs cuDNN >= 9.13.1, and >= 9.21 for a causal mask; ");
      continue;
    }
    try {
      GraphBuilder g;
      if (unified)
        describe_unified(g, s, var.spelling);
      else
        describe_composite(g, s, var.spelling);
      DescPtr graph = g.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
      GraphBuilder::set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        static_cast<int64_t>(g.ops.size()), g.ops.data(), "graph ops");
      GraphBuilder::set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_, "graph handle");
      ok(cudnnBackendFinalize(graph->get()), "finalize operation graph");

      DescPtr heur = g.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      cudnnBackendDescriptor_t gd = graph->get();
      const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
      GraphBuilder::set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gd,
                        "heuristics graph");
      GraphBuilder::set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
      ok(cudnnBackendFinalize(heur->get()), "finalize heuristics");
      int64_t count = 0;
      ok(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                  nullptr),
         "count engine configs");
      if (count == 0) throw Refused{"no engine configuration"};
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) raw.push_back(g.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)->get());
      int64_t got = 0;
      ok(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                  raw.data()),
         "get engine configs");
      std::string plan_errors;
      int made = 0;
      // The descriptors of the graph stay alive with every plan made from it.
      auto keep = std::make_shared<std::vector<DescPtr>>(std::move(g.keep));
      for (int64_t i = 0; i < got && made < kPlansPerForm; ++i) {
        auto plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        cudnnBackendDescriptor_t cfg = raw[i];
        ok(cudnnBackendSetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_),
           "plan handle");
        ok(cudnnBackendSetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg),
           "plan engine config");
        const cudnnStatus_t st = cudnnBackendFinalize(plan->get());
        if (st != CUDNN_STATUS_SUCCESS) {
          plan_errors += cat(" [engine config ", i, ": ", cudnnGetErrorString(st), "]");
          continue;
        }
        auto out = std::make_shared<Plan>();
        ok(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                    nullptr, &out->workspace),
           "plan workspace size");
        out->keep = keep;
        out->plan = plan;
        out->needs_neg_inf = !unified && s.causal;
        out->form = form;
        plans.push_back(out);
        ++made;
      }
      if (made == 0) throw Refused{cat("no engine configuration finalized:", plan_errors)};
    } catch (const Refused& r) {
      reasons += cat(form, " (", var.spelling.scalar_rank, "-d scalars", var.spelling.with_stats ? "" : ", no stats",
                     "): ", r.why, "; ");
    }
  }
  if (plans.empty())
    *why = reasons.empty() ? "H3_CUDNN_SDPA names no known graph form (unified, composite)" : reasons;
  return plans;
}

void CudnnSdpa::execute(const Plan& p, const void* q, const void* k, const void* v, void* o, float scale,
                        void* ws) {
  float scale_v = scale, neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<int64_t> uids{kQ, kK, kV, kO, kScale};
  std::vector<void*> ptrs{const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o, &scale_v};
  if (p.needs_neg_inf) {
    uids.push_back(kNegInf);
    ptrs.push_back(&neg_inf);
  }
  cudnnBackendDescriptor_t pack = nullptr;
  H3_CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), "attention");
  std::unique_ptr<void, void (*)(void*)> guard(pack, [](void* d) {
    cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(d));
  });
  H3_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                          static_cast<int64_t>(uids.size()), uids.data()),
                 "attention");
  H3_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                          static_cast<int64_t>(ptrs.size()), ptrs.data()),
                 "attention");
  H3_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws),
                 "attention");
  H3_CUDNN_CHECK(cudnnBackendFinalize(pack), "attention");
  H3_CUDNN_CHECK(cudnnBackendExecute(handle_, p.plan->get(), pack), "attention");
}

// Times each candidate plan once after a warm-up run on the real operands and moves the fastest to the front.
void CudnnSdpa::choose_fastest(Entry& e, const void* q, const void* k, const void* v, void* o, float scale,
                               const std::function<void*(size_t)>& workspace) {
  e.timed = true;
  if (e.candidates.size() < 2) return;
  cudaEvent_t start = nullptr, stop = nullptr;
  H3_CUDA_CHECK(cudaEventCreate(&start), "attention autotune");
  H3_CUDA_CHECK(cudaEventCreate(&stop), "attention autotune");
  std::vector<float> times;
  for (const auto& p : e.candidates) {
    void* ws = p->workspace > 0 ? workspace(static_cast<size_t>(p->workspace)) : nullptr;
    execute(*p, q, k, v, o, scale, ws);
    H3_CUDA_CHECK(cudaEventRecord(start, stream_), "attention autotune");
    execute(*p, q, k, v, o, scale, ws);
    H3_CUDA_CHECK(cudaEventRecord(stop, stream_), "attention autotune");
    H3_CUDA_CHECK(cudaEventSynchronize(stop), "attention autotune");
    float t = 0.f;
    H3_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop), "attention autotune");
    times.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const size_t best = static_cast<size_t>(std::min_element(times.begin(), times.end()) - times.begin());
  std::string report;
  for (size_t i = 0; i < times.size(); ++i) report += cat(" ", e.candidates[i]->form, "#", i, "=", times[i], "ms");
  log_debug("cuDNN SDPA plans timed:", report);
  std::swap(e.candidates[0], e.candidates[best]);
}

bool CudnnSdpa::run(const SdpaShape& s, const void* q, const void* k, const void* v, void* o, float scale,
                    const std::function<void*(size_t)>& workspace, std::string* why) {
  const Key key = key_of(s);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    Entry e;
    e.candidates = build(s, &e.refusal);
    it = plans_.emplace(key, std::move(e)).first;
  }
  Entry& e = it->second;
  if (e.candidates.empty()) {
    *why = e.refusal;
    return false;
  }
  if (!e.timed) choose_fastest(e, q, k, v, o, scale, workspace);
  const Plan& p = *e.candidates.front();
  execute(p, q, k, v, o, scale, p.workspace > 0 ? workspace(static_cast<size_t>(p.workspace)) : nullptr);
  return true;
}

std::string CudnnSdpa::form_of(const SdpaShape& s) const {
  auto it = plans_.find(key_of(s));
  return it != plans_.end() && !it->second.candidates.empty() ? it->second.candidates.front()->form : std::string();
}

}  // namespace h3::cuda
