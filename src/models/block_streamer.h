// Block streaming (issue 17; the option is models/block_streaming.h): a model's repeated blocks live off the device
// and are copied, one block's weight matrices at a time, into a ring of S = `slots` device block buffers while the
// blocks before them compute. The Dit (its main blocks) and QwenTextModel (its decoder layers) stream through it.
//
// The ring. The blocks of a pass, in order and repeated pass after pass, are numbered as loads j = 0, 1, 2, ...;
// load j fills slot j % S. Two kinds of marks order the two queues of the backend (Backend's copy queue):
//   - compute of load j waits (compute_wait) for the copy mark made after load j's copies;
//   - the copies of load j wait (copy_wait) for the compute mark made when load j − S was released (the last
//     compute that read the slot).
// Releasing load j enqueues load j + S, so while block j computes, blocks j+1 … j+S−1 are being copied (or are in);
// the copy of a block overlaps the compute of the S−1 blocks before it. The last S releases of a pass enqueue the
// next pass's first blocks (a request's passes run the same blocks), so a pass does not start by waiting. A pass over
// other blocks (a new --layers set) or after an interrupted one (a cancel) starts the ring afresh.
//
// Sources. PinnedHost: one host copy per block in the device layout, made at load by downloading the tensors the
// resident load makes (so the bytes are the resident load's), in page-locked memory (download_async's on CUDA): a
// load is host → device copies only. Disk: host memory holds S staging buffers (pinned_host_buffer); `reader_threads`
// threads pread a block's checkpoint tensors into staging buffer j % S as soon as the copies out of it for load
// j − S have passed (O_DIRECT into 4096-aligned ranges when direct_io, else through the page cache), and the copies
// convert on the copy queue as upload() does, so the slot holds the resident load's bits. Every backend call is made
// on the caller's thread; the reader threads only read files (and wait for copy marks).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/block_streaming.h"

namespace h3 {

// Rows [src_row, src_row + rows) of checkpoint tensor `name` (rows 0: all of it; 1-D tensors whole), written at
// row dst_row of a streamed tensor, converted first on the host to host_dtype when that differs from the stored
// dtype (stack_rows' rule for fused tensors of mixed dtypes), then to the device dtype as upload() converts.
struct StreamedPiece {
  std::string name;
  int64_t src_row = 0, rows = 0, dst_row = 0;
  std::optional<DType> host_dtype = std::nullopt;
};

// One tensor of a streamed block as the model uses it on the device (in the backend's activation dtype), and where
// its rows are in the checkpoint (the Disk source; may be empty for the PinnedHost source).
struct StreamedTensor {
  Shape shape;
  std::vector<StreamedPiece> pieces;
};

// One pass of streamed blocks (the last one whose blocks were all released), and what the streamer holds.
struct BlockStreamingStats {
  int64_t passes = 0;         // passes streamed so far
  int64_t blocks = 0;         // blocks of the last pass
  uint64_t bytes = 0;         // host → device bytes copied for them
  double copy_seconds = 0;    // device time of those copies (the copy queue's busy time)
  double wait_seconds = 0;    // time the compute queue waited for them (0: the copies were hidden)
  double pass_seconds = 0;    // the pass's blocks on the compute queue, first acquire to last release
  uint64_t read_bytes = 0;    // Disk: bytes read from the checkpoint for them
  double read_seconds = 0;    // Disk: wall time of those reads, summed over blocks
  uint64_t host_bytes = 0;    // host memory held: the blocks' copies (PinnedHost) or the staging ring (Disk)
  uint64_t device_bytes = 0;  // the ring's device buffers
  double copy_bandwidth() const { return copy_seconds > 0 ? static_cast<double>(bytes) / copy_seconds : 0.0; }
  // The share of the copy time compute did not wait for.
  double overlap() const { return copy_seconds > 0 ? 1.0 - wait_seconds / copy_seconds : 1.0; }
};

class BlockStreamer {
 public:
  // Block b's streamed tensors (the same shapes for every block).
  using Describe = std::function<std::vector<StreamedTensor>(int64_t block)>;
  // Block b's streamed tensors made on the backend exactly as the resident load makes them (PinnedHost copies are
  // their downloads).
  using LoadResident = std::function<std::vector<Tensor>(int64_t block)>;

  // `checkpoint`: the file the Disk source reads (required for it). `preload`: the blocks whose PinnedHost copies
  // are made now (others when a pass first runs them). Checks the options (one sentence naming the rule).
  BlockStreamer(Backend& be, const BlockStreaming& options, int64_t num_blocks, Describe describe,
                LoadResident resident, std::shared_ptr<const Checkpoint> checkpoint,
                const std::vector<int64_t>& preload);
  ~BlockStreamer();
  BlockStreamer(const BlockStreamer&) = delete;
  BlockStreamer& operator=(const BlockStreamer&) = delete;

  // The blocks the next pass runs, in order.
  void begin_pass(const std::vector<int64_t>& blocks);
  // The pass's k-th block's tensors on the device (views of its slot; compute enqueued after this call waits for
  // their copies), valid until release(k). Blocks are acquired and released in pass order.
  const std::vector<Tensor>& acquire(size_t k);
  // Every op reading acquire(k)'s tensors has been enqueued: the slot may be refilled after them.
  void release(size_t k);

  BlockStreamingStats stats();  // waits for the last pass's marks
  uint64_t device_bytes() const;
  uint64_t host_bytes() const;
  const BlockStreaming& options() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// One sentence for options outside their ranges (slots >= 2, reader_threads 1..64); `what` names the model.
void validate_block_streaming(const BlockStreaming& o, const char* what);

}  // namespace h3
