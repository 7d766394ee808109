// The residency plan (pipeline/residency_plan.h) on the released sizes: which plan each budget gets at the largest
// canvas, the ring it streams through, the bytes it copies per pass, and the one-sentence refusals.
#include <gtest/gtest.h>

#include <string>

#include "backend/memory_budget.h"
#include "pipeline/memory_plan.h"
#include "pipeline/residency_plan.h"

using namespace h3;

namespace {

MemoryPlanInputs released_inputs(int64_t w, int64_t h, int64_t frames) {
  MemoryPlanInputs in;
  in.vae.latents_mean.assign(24, 0.0);
  in.vae.latents_std.assign(24, 1.0);
  in.audio.latents_mean.assign(32, 0.0);
  in.audio.latents_std.assign(32, 1.0);
  in.tiles.max_batch_tokens = 65536;
  in.geometry = LatentGeometry::make(w, h, frames);
  in.passes = 20;
  return in;
}

ResidencyBudget budget_gb(double device_gb, double host_gb = 1000) {
  ResidencyBudget b;
  b.device_bytes = gigabytes_to_bytes(device_gb);
  b.host_bytes = gigabytes_to_bytes(host_gb);
  return b;
}

ResidencyPlan plan_at(double device_gb, bool conditioner_can_stream, double host_gb = 1000) {
  ResidencyBudget b = budget_gb(device_gb, host_gb);
  b.conditioner_can_stream = conditioner_can_stream;
  return choose_residency_plan(released_inputs(1344, 768, 124), b, "1344x768x124");
}

std::string refusal_at(double device_gb, bool conditioner_can_stream) {
  try {
    plan_at(device_gb, conditioner_can_stream);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

double gb(uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

}  // namespace

// The released sizes as memory_plan.h estimates them at 1344x768x124 with 20 passes: the transformer 40.27 GB (50
// blocks of 0.771 GB), the conditioner's layers 48.76 GB (50 of 0.975 GB), the video VAE decoder 4.85 GB; working
// memory 5.97 GB in the denoise, 4.43 GB in the video decode, 0.67 GB in the prompt (each with its margin).
TEST(ResidencyPlan, ReleasedSizesAt1344x768x124) {
  const StreamableSizes s = streamable_sizes(released_inputs(1344, 768, 124));
  EXPECT_EQ(s.transformer_blocks, 50);
  EXPECT_NEAR(gb(s.transformer_block_bytes), 0.771, 0.001);
  EXPECT_EQ(s.conditioner_layers, 50);
  EXPECT_NEAR(gb(s.conditioner_layer_bytes), 0.975, 0.001);
}

TEST(ResidencyPlan, An141GbDeviceHoldsEverything) {
  const ResidencyPlan p = plan_at(141, false);
  EXPECT_EQ(p.kind, ResidencyKind::Resident);
  EXPECT_NEAR(gb(p.peak_bytes), 100.1, 0.05);  // every component at once, peak in the denoise
  EXPECT_EQ(p.peak_phase, "denoise");
  EXPECT_FALSE(p.transformer_streaming);
  EXPECT_TRUE(p.keeps_resident(PlanComponent::TextEncoder));
}

TEST(ResidencyPlan, An80GbBudgetLoadsEachModelForItsPhase) {
  // The transformer (40.3 GB) and the conditioner (48.8 GB) do not fit together: without a conditioner that
  // streams, the transformer is loaded for the denoise only; peak 49.4 GB, the conditioner's prompt phase.
  ResidencyPlan p = plan_at(80, false);
  EXPECT_EQ(p.kind, ResidencyKind::PhaseResident);
  EXPECT_FALSE(p.keep_transformer);
  EXPECT_FALSE(p.keeps_resident(PlanComponent::Transformer));
  EXPECT_FALSE(p.conditioner_streaming);
  EXPECT_NEAR(gb(p.peak_bytes), 49.4, 0.05);
  EXPECT_EQ(p.peak_phase, "prompt");
  // With one, the transformer stays between videos and the conditioner streams through 4 slots: peak 49.5 GB
  // (the transformer beside the video decoder and its decode).
  p = plan_at(80, true);
  EXPECT_EQ(p.kind, ResidencyKind::PhaseResident);
  EXPECT_TRUE(p.keep_transformer);
  ASSERT_TRUE(p.conditioner_streaming);
  EXPECT_EQ(p.conditioner_streaming->slots, kMaxStreamSlots);
  EXPECT_NEAR(gb(p.peak_bytes), 49.5, 0.05);
  EXPECT_FALSE(p.transformer_streaming);
  EXPECT_EQ(p.streamed_bytes_per_pass, 0u);
}

TEST(ResidencyPlan, A48GbBudgetNeedsTheConditionerStreamed) {
  // The conditioner alone (48.8 GB) passes 48 GB: its layers stream, the transformer loads for the denoise (peak
  // 46.2 GB there: 40.3 GB of weights + 6.0 GB of working memory) and streams nothing.
  const ResidencyPlan p = plan_at(48, true);
  EXPECT_EQ(p.kind, ResidencyKind::PhaseResident);
  EXPECT_FALSE(p.keep_transformer);
  ASSERT_TRUE(p.conditioner_streaming);
  EXPECT_NEAR(gb(p.peak_bytes), 46.2, 0.05);
  EXPECT_EQ(p.peak_phase, "denoise");
  EXPECT_EQ(p.streamed_bytes_per_pass, 0u);
  // A build whose conditioner cannot stream refuses it with one sentence naming the budget that would do.
  const std::string m = refusal_at(48, false);
  EXPECT_NE(m.find("fits 48.0 GB of device memory only with the conditioner's layers streamed"), std::string::npos)
      << m;
  EXPECT_NE(m.find("raise the budget to 49.4 GB"), std::string::npos) << m;
}

TEST(ResidencyPlan, A24GbBudgetStreamsTheTransformerFromPinnedHostMemory) {
  const ResidencyPlan p = plan_at(24, true);
  EXPECT_EQ(p.kind, ResidencyKind::StreamedFromHost);
  ASSERT_TRUE(p.transformer_streaming);
  EXPECT_EQ(p.transformer_streaming->source, BlockStreaming::Source::PinnedHost);
  EXPECT_EQ(p.transformer_streaming->slots, kMaxStreamSlots);
  ASSERT_TRUE(p.conditioner_streaming);
  EXPECT_TRUE(p.keeps_resident(PlanComponent::Transformer));  // its ring
  // Every pass copies the 50 blocks (38.5 GB); one pinned copy of the blocks and the layers (87.3 GB).
  EXPECT_NEAR(gb(p.streamed_bytes_per_pass), 38.5, 0.05);
  EXPECT_NEAR(gb(p.pinned_host_bytes), 87.3, 0.05);
  EXPECT_NEAR(gb(p.peak_bytes), 14.1, 0.05);  // the ring beside the video decoder and its decode
  EXPECT_EQ(p.peak_phase, "video decode");
  EXPECT_NE(refusal_at(24, false).find("only with the conditioner's layers streamed"), std::string::npos);
}

TEST(ResidencyPlan, WithoutHostMemoryForThePinnedCopyTheBlocksStreamFromDisk) {
  const ResidencyPlan p = plan_at(24, true, 64);
  EXPECT_EQ(p.kind, ResidencyKind::StreamedFromDisk);
  ASSERT_TRUE(p.transformer_streaming && p.conditioner_streaming);
  EXPECT_EQ(p.transformer_streaming->source, BlockStreaming::Source::Disk);
  EXPECT_EQ(p.conditioner_streaming->source, BlockStreaming::Source::Disk);
  // Only the rings' staging is pinned: 4 blocks and 4 layers.
  EXPECT_NEAR(gb(p.pinned_host_bytes), 4 * 0.771 + 4 * 0.975, 0.01);
  // --ssd-streaming asks for it whatever fits.
  ResidencyBudget b = budget_gb(141);
  b.disk_streaming = true;
  EXPECT_EQ(choose_residency_plan(released_inputs(1344, 768, 124), b, "1344x768x124").kind,
            ResidencyKind::StreamedFromDisk);
}

// Weights made in memory (the random model of the benchmarks) have no checkpoint to read every pass: the streamed
// plan takes their pinned host copies, and without the host memory for them it is refused, never sent to the disk.
TEST(ResidencyPlan, WeightsMadeInMemoryStreamFromTheHostOrAreRefused) {
  ResidencyBudget b = budget_gb(24, 90);
  b.conditioner_can_stream = true;
  b.disk_source = false;
  EXPECT_EQ(choose_residency_plan(released_inputs(1344, 768, 124), b, "1344x768x124").kind,
            ResidencyKind::StreamedFromHost);
  for (const bool ssd : {false, true}) {
    b.host_bytes = gigabytes_to_bytes(ssd ? 1000 : 64);
    b.disk_streaming = ssd;
    std::string m = "accepted";
    try {
      choose_residency_plan(released_inputs(1344, 768, 124), b, "1344x768x124");
    } catch (const Error& e) {
      m = e.what();
    }
    EXPECT_NE(m.find("streams 87.3 GB of weights every pass; these weights were made in memory"), std::string::npos)
        << m;
    EXPECT_NE(m.find(ssd ? "not from the disk (--ssd-streaming)" : "the host has 64.0 GB for them"), std::string::npos)
        << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// The host budget counts the pinned copies h3 holds now as available (MemAvailable no longer does once they are
// made: the second video of a streamed plan must see what the first pinned), except under H3_HOST_MEMORY_LIMIT,
// which caps them all.
TEST(ResidencyPlan, TheHostBudgetCountsThePinnedCopiesHeldNow) {
  const uint64_t held = gigabytes_to_bytes(87.3), available = gigabytes_to_bytes(37);
  EXPECT_EQ(host_memory_budget(std::nullopt, available, held), available + held);
  EXPECT_EQ(host_memory_budget(std::nullopt, available, 0), available);
  EXPECT_EQ(host_memory_budget(gigabytes_to_bytes(100), available, held), gigabytes_to_bytes(100));
}

TEST(ResidencyPlan, ABudgetBelowTheSmallestPlanIsRefusedWithOneSentence) {
  // Both models through two slots and the video decoder with its decode: 12.6 GB.
  const std::string m = refusal_at(12, true);
  EXPECT_NE(m.find("a 1344x768x124 generation needs ~12.6 GB of device memory even with its smallest plan"),
            std::string::npos) << m;
  EXPECT_NE(m.find("h3 may use 12.0 GB"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(ResidencyPlan, EveryPlanFitsItsBudgetAndALargerBudgetNeverGetsACostlierPlan) {
  for (const bool can_stream : {false, true}) {
    int last = -1;
    for (double device = 141; device >= 13; device -= 1) {
      ResidencyPlan p;
      try {
        p = plan_at(device, can_stream);
      } catch (const Error&) {
        EXPECT_FALSE(can_stream) << device << " GB refused";
        last = 99;
        continue;
      }
      EXPECT_LE(p.peak_bytes, p.budget_bytes) << device;
      // Cost order: resident, phase (transformer kept), phase (transformer per denoise), streamed.
      const int rank = p.kind == ResidencyKind::Resident          ? 0
                       : p.kind == ResidencyKind::PhaseResident ? (p.keep_transformer ? 1 : 2)
                                                                : 3;
      EXPECT_GE(rank, last == 99 ? 0 : last) << device << " GB: " << describe(p);
      EXPECT_NE(last, 99) << device << " GB accepted below a refused budget";
      last = rank;
    }
  }
}
