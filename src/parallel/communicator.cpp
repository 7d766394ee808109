#include "parallel/communicator.h"

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "util/error.h"

namespace h3 {

std::vector<int64_t> chunk_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (size_t j = 0; j < counts.size(); ++j) offsets[j + 1] = offsets[j] + counts[j];
  return offsets;
}

namespace {

void check_counts(const char* op, const char* what, const Communicator& c, const std::vector<int64_t>& counts,
                  const Tensor& t) {
  H3_CHECK(static_cast<int>(counts.size()) == c.size(), op, ": ", counts.size(), " ", what, " counts for a group of ",
           c.size(), " ranks");
  for (int64_t n : counts) H3_CHECK(n >= 0, op, ": negative ", what, " count ", n);
  H3_CHECK(chunk_offsets(counts).back() <= t.numel(), op, ": the ", what, " chunks hold ",
           chunk_offsets(counts).back(), " elements but the buffer ", t.str(), " only ", t.numel());
}

}  // namespace

void check_all_to_all(const Communicator& c, const Tensor& send, const std::vector<int64_t>& send_counts,
                      const Tensor& recv, const std::vector<int64_t>& recv_counts) {
  H3_CHECK(send.dtype() == recv.dtype(), "all_to_all: send ", send.str(), " and receive ", recv.str(),
           " buffers differ in dtype");
  check_counts("all_to_all", "send", c, send_counts, send);
  check_counts("all_to_all", "receive", c, recv_counts, recv);
}

void check_all_gather(const Communicator& c, const Tensor& part, const std::vector<int64_t>& counts,
                      const Tensor& out) {
  H3_CHECK(part.dtype() == out.dtype(), "all_gather: part ", part.str(), " and output ", out.str(),
           " differ in dtype");
  check_counts("all_gather", "part", c, counts, out);
  H3_CHECK(part.numel() >= counts[c.rank()], "all_gather: rank ", c.rank(), "'s part ", part.str(),
           " holds fewer than ", counts[c.rank()], " elements");
}

namespace {

// What the ranks of one in-process group share: each rank's posted buffers, and a barrier that an abort breaks.
struct InProcessGroup {
  explicit InProcessGroup(int n) : posted(n) {}

  struct Posted {
    const Tensor* send = nullptr;
    std::vector<int64_t> send_offsets;
  };

  // Every rank waits here until all have arrived (generation counting); throws once the group is aborted.
  void barrier() {
    std::unique_lock<std::mutex> l(m);
    H3_CHECK(!aborted, kAborted);
    const uint64_t gen = generation;
    if (++arrived == static_cast<int>(posted.size())) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(l, [&] { return aborted || generation != gen; });
    H3_CHECK(!aborted, kAborted);
  }

  void abort() {
    std::lock_guard<std::mutex> l(m);
    aborted = true;
    cv.notify_all();
  }

  static constexpr const char* kAborted = "another rank of the sequence-parallel group failed";
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
  std::vector<Posted> posted;  // written by rank r only between two barriers, read by the others after the first
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->posted.size()); }

  // Each rank posts its send buffer, then copies its chunk of every peer's into its own receive buffer; the second
  // barrier keeps every send buffer alive and unchanged until all have read it.
  void all_to_all(const Tensor& send, const std::vector<int64_t>& send_counts, Tensor& recv,
                  const std::vector<int64_t>& recv_counts) override {
    check_all_to_all(*this, send, send_counts, recv, recv_counts);
    host_only(send, "all_to_all");
    host_only(recv, "all_to_all");
    post(&send, chunk_offsets(send_counts));
    const std::vector<int64_t> recv_offsets = chunk_offsets(recv_counts);
    const size_t elem = dtype_size(recv.dtype());
    for (int j = 0; j < size(); ++j) {
      const InProcessGroup::Posted& peer = group_->posted[j];
      const int64_t n = peer.send_offsets[rank_ + 1] - peer.send_offsets[rank_];
      H3_CHECK(n == recv_counts[j], "all_to_all: rank ", j, " sends ", n, " elements to rank ", rank_,
               ", which expects ", recv_counts[j]);
      copy(static_cast<char*>(recv.data()) + recv_offsets[j] * elem,
           static_cast<const char*>(peer.send->data()) + peer.send_offsets[rank_] * elem, n * elem);
    }
    group_->barrier();
  }

  void all_gather(const Tensor& part, const std::vector<int64_t>& counts, Tensor& out) override {
    check_all_gather(*this, part, counts, out);
    host_only(part, "all_gather");
    host_only(out, "all_gather");
    post(&part, {});
    const std::vector<int64_t> offsets = chunk_offsets(counts);
    const size_t elem = dtype_size(out.dtype());
    for (int j = 0; j < size(); ++j)
      copy(static_cast<char*>(out.data()) + offsets[j] * elem, group_->posted[j].send->data(), counts[j] * elem);
    group_->barrier();
  }

  void barrier() override { group_->barrier(); }
  void abort() override { group_->abort(); }

 private:
  static void host_only(const Tensor& t, const char* op) {
    H3_CHECK(t.device() == Device::CPU, op, ": the in-process communicator exchanges host memory, got ", t.str(),
             " on another device");
  }
  static void copy(void* dst, const void* src, int64_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  // Every collective ends with a barrier after the reads, so no peer still reads this rank's previous post.
  void post(const Tensor* buffer, std::vector<int64_t> offsets) {
    group_->posted[rank_] = {buffer, std::move(offsets)};
    group_->barrier();  // every post is visible
  }

  std::shared_ptr<InProcessGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> in_process_communicators(int ranks) {
  H3_CHECK(ranks >= 1, "a sequence-parallel group needs at least one rank, got ", ranks);
  auto group = std::make_shared<InProcessGroup>(ranks);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return out;
}

}  // namespace h3
