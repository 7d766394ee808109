// cuDNN's fused scaled-dot-product attention through the backend (graph) API, reading Q, K and V straight out of
// the packed [rows, (Hq + 2·Hkv)·Dh] buffer through strides (BSHD, no transposes) and writing O as [rows, Hq·Dh].
//
// Two graph forms are described, per shape, once:
//  1. "unified": cuDNN's native SDPA operation (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, cuDNN >= 9.13.1);
//     on cuDNN < 9.21 it takes no mask, so it is used for non-causal attention only.
//  2. "composite": the classic operation graph that cuDNN's fused flash-attention engine recognizes: matmul Q·Kᵀ,
//     scale, (causal mask), softmax as max/sub/exp/sum/div, matmul P·V.
// For each form up to two engine configurations (by cuDNN's heuristic order) are finalized; the first call of a
// shape times every finalized plan on the real operands and keeps the fastest. H3_CUDNN_SDPA=unified|composite
// restricts the choice to one form (for comparisons).
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace h3::cuda {

struct SdpaShape {
  int batch = 1, heads_q = 0, heads_kv = 0, seq = 0, head_dim = 0;
  // Strides in elements, in the order (batch, head, row, channel).
  int64_t q_stride[4] = {}, k_stride[4] = {}, v_stride[4] = {}, o_stride[4] = {};
  bool causal = false;
  cudnnDataType_t dtype = CUDNN_DATA_BFLOAT16;
};

class CudnnSdpa {
 public:
  explicit CudnnSdpa(cudaStream_t stream);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Runs attention, or returns false (nothing launched) with the reason in *why when cuDNN has no plan for this
  // shape. `workspace(bytes)` returns device memory of at least that size.
  bool run(const SdpaShape& shape, const void* q, const void* k, const void* v, void* o, float scale,
           const std::function<void*(size_t)>& workspace, std::string* why);

  // "unified" or "composite" for the plan that served `shape`, "" when none did.
  std::string form_of(const SdpaShape& shape) const;
  static int version() { return static_cast<int>(cudnnGetVersion()); }

 private:
  struct Plan;
  struct Entry {
    std::vector<std::shared_ptr<Plan>> candidates;  // fastest first once timed; empty: refused
    bool timed = false;
    std::string refusal;
  };
  using Key = std::tuple<int, int, int, int, int, bool, int, std::vector<int64_t>>;
  static Key key_of(const SdpaShape& s);
  std::vector<std::shared_ptr<Plan>> build(const SdpaShape& s, std::string* why);
  void execute(const Plan& p, const void* q, const void* k, const void* v, void* o, float scale, void* workspace);
  void choose_fastest(Entry& e, const void* q, const void* k, const void* v, void* o, float scale,
                      const std::function<void*(size_t)>& workspace);

  cudaStream_t stream_;
  cudnnHandle_t handle_ = nullptr;
  std::map<Key, Entry> plans_;
};

}  // namespace h3::cuda
