// How a model's repeated blocks (the transformer's main blocks, the conditioner's decoder layers) live on the device
// when they are not all resident (issue 17's residency plans): a ring of `slots` device block buffers, each block
// copied in on a copy stream while the block before it computes, from one pinned host copy of every block or from
// the checkpoint file itself. Absent (std::nullopt where a model takes it): every block resident, today's path.
#pragma once
#include <cstdint>
#include <memory>

namespace h3 {

// What a streamed model reports (the residency plan's --profile line, pipeline/residency_plan.h): the model adds to
// it as it streams, on its own thread of control (read it after the pass's work has synchronized).
struct BlockStreamingCounters {
  uint64_t bytes_copied = 0;   // host -> device bytes of the blocks copied in
  double copy_seconds = 0;     // time the copies took on their stream
  double stall_seconds = 0;    // time the compute waited for a copy (copy time not hidden behind the block before)
};

struct BlockStreaming {
  enum class Source {
    PinnedHost,  // one pinned host copy of every streamed block, made at load
    Disk,        // the checkpoint's bytes read again every pass (--ssd-streaming): host memory holds only the ring
  };
  Source source = Source::PinnedHost;
  int64_t slots = 2;           // device block buffers (>= 2: one computing while the next fills)
  int64_t reader_threads = 4;  // Disk: threads reading the file into pinned staging buffers
  bool direct_io = false;      // Disk: O_DIRECT reads rather than the page cache
  std::shared_ptr<BlockStreamingCounters> counters;  // the reporting hook (may be null: nothing reported)
};

}  // namespace h3
