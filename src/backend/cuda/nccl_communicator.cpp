// The NCCL implementation of parallel/communicator.h, and the device count the GPU groups check against.
#include "parallel/nccl_communicator.h"

#include <cuda_runtime.h>

#include <atomic>

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

bool nccl_available() { return true; }

namespace {

void nccl_check(ncclResult_t r, const char* what) {
  H3_CHECK(r == ncclSuccess, "NCCL ", what, " failed: ", ncclGetErrorString(r));
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
    if (!aborted_) ncclCommDestroy(comm_);
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
    nccl_check(ncclGroupStart(), "group start");
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      if (send_counts[j]) nccl_check(ncclSend(s + so[j] * elem, send_counts[j], type, j, comm_, stream_), "send");
      if (recv_counts[j]) nccl_check(ncclRecv(d + ro[j] * elem, recv_counts[j], type, j, comm_, stream_), "receive");
    }
    nccl_check(ncclGroupEnd(), "all-to-all");
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
    nccl_check(ncclGroupStart(), "group start");
    for (int j = 0; j < size_; ++j)
      if (counts[j])
        nccl_check(ncclBroadcast(j == rank_ ? part.data() : d + o[j] * elem, d + o[j] * elem, counts[j], type, j,
                                 comm_, stream_),
                   "broadcast");
    nccl_check(ncclGroupEnd(), "all-gather");
  }

  // A one-element all-reduce on the stream, waited for: every rank has reached it.
  void barrier() override {
    H3_CHECK(!aborted_, "barrier: another rank of the sequence-parallel group failed");
    if (!token_) H3_CUDA_CHECK(cudaMalloc(&token_, sizeof(float)), "barrier");
    nccl_check(ncclAllReduce(token_, token_, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier");
    H3_CUDA_CHECK(cudaStreamSynchronize(stream_), "barrier");
  }

  // From the thread of the rank that failed: the kernels of this communicator stop waiting for it.
  void abort() override {
    if (!aborted_.exchange(true)) ncclCommAbort(comm_);
  }

 private:
  ncclComm_t comm_;
  int rank_, size_;
  cudaStream_t stream_;
  void* token_ = nullptr;  // the barrier's operand (its value is never read)
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> nccl_communicators(const std::vector<int>& devices,
                                                              const std::vector<Backend*>& backends) {
  const int n = static_cast<int>(devices.size());
  H3_CHECK(static_cast<int>(backends.size()) == n, "nccl_communicators: ", backends.size(), " backends for ", n,
           " devices");
  std::vector<ncclComm_t> comms(n);
  nccl_check(ncclCommInitAll(comms.data(), n, devices.data()), "initialization");
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<NcclCommunicator>(comms[r], r, n, cuda_stream(*backends[r])));
  return out;
}

#endif  // H3_HAVE_NCCL

}  // namespace h3
