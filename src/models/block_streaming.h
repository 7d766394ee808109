// How a model's repeated blocks (the transformer's main blocks, the conditioner's decoder layers) live on the device
// when they are not all resident (issue 17's residency plans): a ring of `slots` device block buffers, each block
// copied in on a copy stream while the block before it computes, from one pinned host copy of every block or from
// the checkpoint file itself. Absent (std::nullopt where a model takes it): every block resident, today's path.
#pragma once
#include <cstdint>

namespace h3 {

struct BlockStreaming {
  enum class Source {
    PinnedHost,  // one pinned host copy of every streamed block, made at load
    Disk,        // the checkpoint's bytes read again every pass (--ssd-streaming): host memory holds only the ring
  };
  Source source = Source::PinnedHost;
  int64_t slots = 2;           // device block buffers (>= 2: one computing while the next fills)
  int64_t reader_threads = 4;  // Disk: threads reading the file into pinned staging buffers
  bool direct_io = false;      // Disk: O_DIRECT reads rather than the page cache
};

}  // namespace h3
