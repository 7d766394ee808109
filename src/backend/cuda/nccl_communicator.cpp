// The NCCL implementation of parallel/communicator.h, and the device count the GPU groups check against.
//
// NCCL is opened at run time (dlopen of libnccl.so.2, its functions resolved once) rather than linked: a binary
// built with NCCL's header then runs everything else on a machine without the library, where nccl_available() is
// false and a GPU group is refused with a sentence (the GPU bundle of scripts/gpu/bundle.sh relies on it).
#include "parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "parallel/rank_group.h"
#include "util/error.h"

#ifdef H3_HAVE_NCCL
#include <nccl.h>
#endif

namespace h3 {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  return n;
}

#ifdef H3_HAVE_NCCL

namespace {

// The NCCL functions used here, from the library opened at run time (null: none could be opened).
struct NcclApi {
  decltype(&ncclCommInitAll) comm_init_all;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclGetErrorString) error_string;
};

const NcclApi* nccl() {
  static const NcclApi* api = []() -> const NcclApi* {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    static NcclApi a;
    bool all = true;
    const auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      all = all && fn != nullptr;
    };
    get(a.comm_init_all, "ncclCommInitAll");
    get(a.comm_destroy, "ncclCommDestroy");
    get(a.comm_abort, "ncclCommAbort");
    get(a.group_start, "ncclGroupStart");
    get(a.group_end, "ncclGroupEnd");
    get(a.send, "ncclSend");
    get(a.recv, "ncclRecv");
    get(a.broadcast, "ncclBroadcast");
    get(a.all_reduce, "ncclAllReduce");
    get(a.error_string, "ncclGetErrorString");
    return all ? &a : nullptr;
  }();
  return api;
}

void nccl_check(ncclResult_t r, const char* what) {
  H3_CHECK(r == ncclSuccess, "NCCL ", what, " failed: ", nccl()->error_string(r));
}

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    default: fail("NCCL collectives take F32, BF16, F16 or I32 tensors, got ", dtype_name(dt));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, cudaStream_t stream)
      : comm_(comm), rank_(rank), size_(size), stream_(stream) {}
  ~NcclCommunicator() override {
    if (!aborted_) nccl()->comm_destroy(comm_);
    if (token_) cudaFree(token_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // Peers by ncclSend/ncclRecv in one group; this rank's own chunk by a device copy on the same stream.
  void all_to_all(const Tensor& send, const std::vector<int64_t>& send_counts, Tensor& recv,
                  const std::vector<int64_t>& recv_counts) override {
    check_all_to_all(*this, send, send_counts, recv, recv_counts);
    H3_CHECK(!aborted_, "all_to_all: another rank of the sequence-parallel group failed");
    const ncclDataType_t type = nccl_type(send.dtype());
    const size_t elem = dtype_size(send.dtype());
    const std::vector<int64_t> so = chunk_offsets(send_counts), ro = chunk_offsets(recv_counts);
    const char* s = static_cast<const char*>(send.data());
    char* d = static_cast<char*>(recv.data());
    nccl_check(nccl()->group_start(), "group start");
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      if (send_counts[j]) nccl_check(nccl()->send(s + so[j] * elem, send_counts[j], type, j, comm_, stream_), "send");
      if (recv_counts[j])
        nccl_check(nccl()->recv(d + ro[j] * elem, recv_counts[j], type, j, comm_, stream_), "receive");
    }
    nccl_check(nccl()->group_end(), "all-to-all");
    H3_CHECK(send_counts[rank_] == recv_counts[rank_], "all_to_all: rank ", rank_, " sends itself ",
             send_counts[rank_], " elements but expects ", recv_counts[rank_]);
    if (send_counts[rank_])
      H3_CUDA_CHECK(cudaMemcpyAsync(d + ro[rank_] * elem, s + so[rank_] * elem, send_counts[rank_] * elem,
                                    cudaMemcpyDeviceToDevice, stream_),
                    "all_to_all");
  }

  // One broadcast per rank into its chunk of `out` (the chunks may differ in size, which ncclAllGather does not
  // allow), in one group.
  void all_gather(const Tensor& part, const std::vector<int64_t>& counts, Tensor& out) override {
    check_all_gather(*this, part, counts, out);
    H3_CHECK(!aborted_, "all_gather: another rank of the sequence-parallel group failed");
    const ncclDataType_t type = nccl_type(out.dtype());
    const size_t elem = dtype_size(out.dtype());
    const std::vector<int64_t> o = chunk_offsets(counts);
    char* d = static_cast<char*>(out.data());
    nccl_check(nccl()->group_start(), "group start");
    for (int j = 0; j < size_; ++j)
      if (counts[j])
        nccl_check(nccl()->broadcast(j == rank_ ? part.data() : d + o[j] * elem, d + o[j] * elem, counts[j], type, j,
                                 comm_, stream_),
                   "broadcast");
    nccl_check(nccl()->group_end(), "all-gather");
  }

  // A one-element all-reduce on the stream, waited for: every rank has reached it.
  void barrier() override {
    H3_CHECK(!aborted_, "barrier: another rank of the sequence-parallel group failed");
    if (!token_) H3_CUDA_CHECK(cudaMalloc(&token_, sizeof(float)), "barrier");
    nccl_check(nccl()->all_reduce(token_, token_, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier");
    H3_CUDA_CHECK(cudaStreamSynchronize(stream_), "barrier");
  }

  // From the thread of the rank that failed: the kernels of this communicator stop waiting for it.
  void abort() override {
    if (!aborted_.exchange(true)) nccl()->comm_abort(comm_);
  }

 private:
  ncclComm_t comm_;
  int rank_, size_;
  cudaStream_t stream_;
  void* token_ = nullptr;  // the barrier's operand (its value is never read)
  std::atomic<bool> aborted_{false};
};

}  // namespace

bool nccl_available() { return nccl() != nullptr; }

std::vector<std::unique_ptr<Communicator>> nccl_communicators(const std::vector<int>& devices,
                                                              const std::vector<Backend*>& backends) {
  const int n = static_cast<int>(devices.size());
  H3_CHECK(nccl_available(), "NCCL's library (libnccl.so.2) could not be opened");
  H3_CHECK(static_cast<int>(backends.size()) == n, "nccl_communicators: ", backends.size(), " backends for ", n,
           " devices");
  std::vector<ncclComm_t> comms(n);
  nccl_check(nccl()->comm_init_all(comms.data(), n, devices.data()), "initialization");
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r)
    out.push_back(std::make_unique<NcclCommunicator>(comms[r], r, n, cuda_stream(*backends[r])));
  return out;
}

#endif  // H3_HAVE_NCCL

}  // namespace h3
