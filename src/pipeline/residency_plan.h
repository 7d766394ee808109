// Which weights live on the device when (issue 17): a residency plan, chosen from the device memory a generation may
// use (the device's free memory, or --memory-budget / H3_DEVICE_MEMORY_LIMIT) and the host memory that may hold
// pinned copies (H3_HOST_MEMORY_LIMIT, or what the host has available), over the sizes of memory_plan.h. The first
// plan that fits, cheapest first:
//   Resident       every component resident, as before (and between videos);
//   PhaseResident  every component but the transformer resident only in the phase that computes with it (the
//                  conditioner and vision tower for the prompt, the VAE encoders for their encodes, each VAE decoder
//                  for its decode), loaded again from the checkpoint (the page cache) for the next video; the
//                  transformer kept between videos, or, when that does not fit, loaded for the denoise only;
//   StreamedFromHost  as PhaseResident, but the transformer's blocks stream through a ring of device block buffers
//                  from one pinned host copy (models/block_streaming.h), as many slots as the budget allows (2..4);
//   StreamedFromDisk  the same, the blocks read from the checkpoint every pass (--ssd-streaming), when the host
//                  cannot hold a pinned copy of them.
// Where the conditioner (48.8 GB at the released size) does not fit its phase, its layers stream through a ring too
// (it copies its weights once per prompt either way); a build whose conditioner cannot stream refuses that plan
// with one sentence. A budget below the smallest plan is refused with one sentence naming what that plan needs.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "models/block_streaming.h"
#include "pipeline/memory_plan.h"

namespace h3 {

enum class ResidencyKind { Resident, PhaseResident, StreamedFromHost, StreamedFromDisk };
const char* residency_kind_name(ResidencyKind k);  // "resident", "phase-resident", ...

// The most ring slots a plan gives a streamed model: each block's copy overlaps the compute of the block before, so
// two slots hide the copies whenever a copy is shorter than a block's compute; more only absorb jitter.
constexpr int64_t kMaxStreamSlots = 4;

struct ResidencyBudget {
  uint64_t device_bytes = 0;  // what the generation may hold on the device (free + already held, or the budget)
  uint64_t host_bytes = 0;    // what pinned host copies may take
  bool disk_streaming = false;            // --ssd-streaming: stream the transformer's blocks from the disk anyway
  bool conditioner_can_stream = false;    // whether this build's conditioner takes BlockStreaming
  bool disk_source = true;  // whether the weights can be read from a checkpoint (not for models made in memory)
};

struct ResidencyPlan {
  ResidencyKind kind = ResidencyKind::Resident;
  // PhaseResident: whether the transformer stays resident between phases and videos (else it is loaded for the
  // denoise only). The streamed plans keep their ring.
  bool keep_transformer = true;
  std::optional<BlockStreaming> transformer_streaming;  // StreamedFrom*: the transformer's ring
  std::optional<BlockStreaming> conditioner_streaming;  // when the conditioner's layers stream too
  uint64_t budget_bytes = 0;
  uint64_t peak_bytes = 0;  // the plan's device peak (estimated as memory_plan.h estimates), <= budget_bytes
  std::string peak_phase;
  uint64_t pinned_host_bytes = 0;   // one pinned copy of every streamed block (StreamedFromHost)
  uint64_t streamed_bytes_per_pass = 0;  // host -> device bytes of one transformer pass (streamed blocks)
  // Whether `c` stays resident between phases and between videos.
  bool keeps_resident(PlanComponent c) const;
};

// Sizes of the streamable models of `in` (the transformer's running blocks, the conditioner's layers): the bytes
// of one block or layer, and how many stream.
struct StreamableSizes {
  uint64_t transformer_block_bytes = 0;
  int64_t transformer_blocks = 0;
  uint64_t conditioner_layer_bytes = 0;
  int64_t conditioner_layers = 0;
};
StreamableSizes streamable_sizes(const MemoryPlanInputs& in);

// The first plan of the order above that fits `budget`; throws h3::Error (one sentence: what the smallest plan
// needs, the budget, the remedy) when none does. `canvas` names the request ("1344x768x124") in that sentence.
ResidencyPlan choose_residency_plan(const MemoryPlanInputs& in, const ResidencyBudget& budget,
                                    const std::string& canvas);

// One line: "phase-resident (peak 61.2 GB in the denoise phase of a 80.0 GB budget)", with the ring and the bytes
// streamed per pass for a streamed plan.
std::string describe(const ResidencyPlan& p);

// The host memory pinned copies may take: H3_HOST_MEMORY_LIMIT (decimal GB, to simulate a smaller host; it caps
// every pinned copy h3 holds, those already made included) when set, else what the host has available now
// (MemAvailable) plus `held`, the pinned copies h3 holds now (a plan chosen again for the next video may keep them).
uint64_t host_memory_budget(uint64_t held);
// The same from its parts (what host_memory_budget reads: the limit, MemAvailable), for the tests.
uint64_t host_memory_budget(std::optional<uint64_t> limit, uint64_t mem_available, uint64_t held);

}  // namespace h3
