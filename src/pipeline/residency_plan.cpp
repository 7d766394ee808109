#include "pipeline/residency_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "backend/memory_budget.h"
#include "models/qwen3vl/text_model.h"
#include "util/error.h"

namespace h3 {

namespace {

uint64_t weight_of(const MemoryPlan& mp, PlanComponent c) {
  for (const MemoryPlan::Part& w : mp.weights)
    if (w.component == c) return w.bytes;
  return 0;
}

// The device peak of a plan that holds every component only in the phases that use it — the transformer
// (`transformer` bytes: its weights, or its ring) throughout when `keep_transformer` — with the conditioner as
// `conditioner` bytes (its weights, or its ring).
struct Peak {
  uint64_t bytes = 0;
  std::string phase;
};
Peak phase_peak(const MemoryPlan& mp, uint64_t transformer, uint64_t conditioner, bool keep_transformer) {
  Peak peak;
  for (const MemoryPlan::Part& ph : mp.phases) {
    uint64_t bytes = ph.bytes + (keep_transformer ? transformer : 0);
    for (PlanComponent c : ph.uses) {
      if (c == PlanComponent::Transformer) {
        if (!keep_transformer) bytes += transformer;
        continue;
      }
      bytes += c == PlanComponent::TextEncoder ? conditioner : weight_of(mp, c);
    }
    if (bytes > peak.bytes) peak = {bytes, ph.what};
  }
  return peak;
}

// format_gb, or MB below a gigabyte (a tiny model's plan).
std::string size_text(uint64_t bytes) {
  if (bytes >= 1'000'000'000) return format_gb(bytes);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// A ring over `units` blocks of `unit_bytes` each, from a model whose other weights take `fixed` bytes.
uint64_t ring_bytes(uint64_t fixed, uint64_t unit_bytes, int64_t slots) { return fixed + unit_bytes * slots; }

}  // namespace

const char* residency_kind_name(ResidencyKind k) {
  switch (k) {
    case ResidencyKind::Resident: return "resident";
    case ResidencyKind::PhaseResident: return "phase-resident";
    case ResidencyKind::StreamedFromHost: return "streamed from pinned host memory";
    case ResidencyKind::StreamedFromDisk: return "streamed from disk";
  }
  return "?";
}

bool ResidencyPlan::keeps_resident(PlanComponent c) const {
  return kind == ResidencyKind::Resident || (c == PlanComponent::Transformer && keep_transformer);
}

StreamableSizes streamable_sizes(const MemoryPlanInputs& in) {
  StreamableSizes s;
  const DType act = in.activation_dtype;
  s.transformer_blocks = in.dit_layers.value_or(in.dit.num_layers);
  s.transformer_block_bytes = dit_resident_bytes(in.dit, act, in.keep_adaln_weights, 1) -
                              dit_resident_bytes(in.dit, act, in.keep_adaln_weights, 0);
  s.conditioner_layers = kConditionerLayers;
  s.conditioner_layer_bytes =
      QwenTextModel::resident_bytes(in.text, act, 1) - QwenTextModel::resident_bytes(in.text, act, 0);
  return s;
}

ResidencyPlan choose_residency_plan(const MemoryPlanInputs& in, const ResidencyBudget& budget,
                                    const std::string& canvas) {
  const MemoryPlan mp = plan_generation_memory(in);
  const StreamableSizes sz = streamable_sizes(in);
  const uint64_t transformer = weight_of(mp, PlanComponent::Transformer);
  const uint64_t conditioner = weight_of(mp, PlanComponent::TextEncoder);
  const uint64_t transformer_fixed = transformer - sz.transformer_block_bytes * sz.transformer_blocks;
  const uint64_t conditioner_fixed = conditioner - sz.conditioner_layer_bytes * sz.conditioner_layers;
  // A ring needs 2 slots and fewer slots than blocks.
  const int64_t max_slots = std::min<int64_t>(kMaxStreamSlots, sz.transformer_blocks - 1);
  const int64_t max_conditioner_slots = std::min<int64_t>(kMaxStreamSlots, sz.conditioner_layers - 1);
  const auto fits = [&](uint64_t bytes) { return bytes <= budget.device_bytes; };

  ResidencyPlan plan;
  plan.budget_bytes = budget.device_bytes;
  if (!budget.disk_streaming && fits(mp.peak_bytes())) {
    plan.peak_bytes = mp.peak_bytes();
    plan.peak_phase = mp.peak_phase;
    return plan;
  }

  // The conditioner as a plan holds it: loaded for the prompt (0 slots), or streamed through the most slots that fit
  // (the first count k in max..2 for which `peak(k)` fits); its bytes on the device, or nothing when no count fits.
  struct Held {
    int64_t slots = 0;
    Peak peak;
  };
  const auto conditioner_held = [&](auto&& peak_with) -> std::optional<Held> {
    const Peak loaded = peak_with(conditioner);
    if (fits(loaded.bytes)) return Held{0, loaded};
    for (int64_t k = max_conditioner_slots; k >= 2; --k) {
      const Peak p = peak_with(ring_bytes(conditioner_fixed, sz.conditioner_layer_bytes, k));
      if (fits(p.bytes)) return Held{k, p};
    }
    return std::nullopt;
  };
  // The plans after the resident one, cheapest first: the transformer kept between phases (and videos), then loaded
  // for the denoise only (its weights copied again each video), then streamed every pass (the most slots that fit);
  // each with the conditioner loaded for the prompt or, where that does not fit, streamed through a ring — a
  // conditioner that loads for its phase copies its weights once per prompt, as streaming it does.
  bool needs_conditioner_streaming = false;
  const auto settle = [&](ResidencyKind kind, bool keep_transformer, int64_t slots, const Held& c) {
    if (c.slots > 0 && !budget.conditioner_can_stream) {
      needs_conditioner_streaming = true;
      return false;
    }
    plan.kind = kind;
    plan.keep_transformer = keep_transformer;
    plan.peak_bytes = c.peak.bytes;
    plan.peak_phase = c.peak.phase;
    BlockStreaming ring;
    if (slots > 0) {
      ring.slots = slots;
      plan.transformer_streaming = ring;
      plan.streamed_bytes_per_pass = sz.transformer_block_bytes * sz.transformer_blocks;
    }
    if (c.slots > 0) {
      ring.slots = c.slots;
      plan.conditioner_streaming = ring;
    }
    return true;
  };
  if (!budget.disk_streaming) {
    const auto kept = conditioner_held([&](uint64_t c) { return phase_peak(mp, transformer, c, true); });
    if (kept && settle(ResidencyKind::PhaseResident, true, 0, *kept)) return plan;
    const auto phased = conditioner_held([&](uint64_t c) { return phase_peak(mp, transformer, c, false); });
    if (phased && settle(ResidencyKind::PhaseResident, false, 0, *phased)) return plan;
  }
  bool streamed = false;
  for (int64_t k = max_slots; k >= 2 && !streamed; --k) {
    const uint64_t ring = ring_bytes(transformer_fixed, sz.transformer_block_bytes, k);
    const auto held = conditioner_held([&](uint64_t c) { return phase_peak(mp, ring, c, true); });
    streamed = held && settle(ResidencyKind::StreamedFromHost, true, k, *held);
  }
  if (!streamed) {
    if (needs_conditioner_streaming)
      fail("a ", canvas, " generation fits ", size_text(budget.device_bytes), " of device memory only with the "
           "conditioner's layers streamed, which this build of h3 cannot do yet: raise the budget to ",
           size_text(phase_peak(mp, transformer, conditioner, false).bytes), ", or use a smaller canvas or fewer frames");
    // The smallest plan: both models through two slots (where they can stream at all).
    const uint64_t t = max_slots >= 2 ? ring_bytes(transformer_fixed, sz.transformer_block_bytes, 2) : transformer;
    const uint64_t c =
        max_conditioner_slots >= 2 ? ring_bytes(conditioner_fixed, sz.conditioner_layer_bytes, 2) : conditioner;
    const Peak least = phase_peak(mp, t, c, true);
    fail("a ", canvas, " generation needs ~", size_text(least.bytes), " of device memory even with its smallest plan "
         "(the transformer's blocks and the conditioner's layers streamed through two slots each, every other model "
         "loaded only for its phase; peak in the ", least.phase, " phase), but h3 may use ", size_text(budget.device_bytes),
         " (the device's free memory or --memory-budget): use a smaller canvas or fewer frames, raise the budget, or "
         "free the GPU from other processes");
  }
  // One pinned host copy of what streams; without the host memory for it (or with --ssd-streaming), the blocks are
  // read from the checkpoint every pass and only the ring's staging is pinned.
  const uint64_t pinned = sz.transformer_block_bytes * sz.transformer_blocks +
                          (plan.conditioner_streaming ? sz.conditioner_layer_bytes * sz.conditioner_layers : 0);
  const bool from_host = !budget.disk_streaming && pinned <= budget.host_bytes;
  if (!from_host && !budget.disk_source)
    fail("a ", canvas, " generation in ", size_text(budget.device_bytes), " of device memory streams ",
         size_text(pinned), " of weights every pass; these weights were made in memory, so they stream from pinned "
         "host copies only, ", budget.disk_streaming ? cat("not from the disk (--ssd-streaming)")
                                                   : cat("and the host has ", size_text(budget.host_bytes), " for them"),
         ": raise the device budget, free host memory, or load the model from its checkpoint");
  const BlockStreaming::Source source = from_host ? BlockStreaming::Source::PinnedHost : BlockStreaming::Source::Disk;
  plan.kind = from_host ? ResidencyKind::StreamedFromHost : ResidencyKind::StreamedFromDisk;
  plan.transformer_streaming->source = source;
  if (plan.conditioner_streaming) plan.conditioner_streaming->source = source;
  plan.pinned_host_bytes =
      from_host ? pinned
                : sz.transformer_block_bytes * plan.transformer_streaming->slots +
                      (plan.conditioner_streaming ? sz.conditioner_layer_bytes * plan.conditioner_streaming->slots : 0);
  return plan;
}

std::string describe(const ResidencyPlan& p) {
  std::string out = residency_kind_name(p.kind);
  if (p.kind == ResidencyKind::PhaseResident)
    out += p.keep_transformer ? " (the transformer kept between videos" : " (the transformer loaded for the denoise";
  if (p.kind == ResidencyKind::PhaseResident)
    out += p.conditioner_streaming ? cat(", conditioner layers streamed through ", p.conditioner_streaming->slots,
                                         " slots)")
                                   : std::string(")");
  if (p.transformer_streaming)
    out += cat(" (transformer blocks through ", p.transformer_streaming->slots, " slots",
               p.conditioner_streaming ? cat(", conditioner layers through ", p.conditioner_streaming->slots, " slots")
                                       : std::string(),
               "; ", size_text(p.streamed_bytes_per_pass), " copied per pass, ", size_text(p.pinned_host_bytes),
               " pinned on the host)");
  out += cat(": peak ", size_text(p.peak_bytes), " in the ", p.peak_phase, " phase, of ", size_text(p.budget_bytes),
             " available");
  return out;
}

uint64_t host_memory_budget(std::optional<uint64_t> limit, uint64_t mem_available, uint64_t held) {
  return limit ? *limit : mem_available + held;
}

uint64_t host_memory_budget(uint64_t held) {
  const std::optional<uint64_t> limit = env_memory_limit("H3_HOST_MEMORY_LIMIT", "host memory");
  if (limit) return host_memory_budget(limit, 0, held);
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return host_memory_budget(std::nullopt, kib * 1024, held);
  return host_memory_budget(std::nullopt,
                            static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)),
                            held);
}

}  // namespace h3
