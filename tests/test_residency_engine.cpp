// Residency plans end to end on the CPU (pipeline/residency_plan.h, backend/memory_budget.h): a tiny snapshot of 200
// transformer blocks generates under device budgets that force each plan — the tightest budget each plan accepts,
// found from the engine's own plan — and every plan gives the resident run's video and audio bit for bit, with the
// CPU backend's counted device memory never past the budget; a budget below the smallest plan is refused with one
// sentence before anything loads; a session keeps what its plan allows between videos.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "backend/backend.h"
#include "backend/memory_budget.h"
#include "h3/h3.h"
#include "temp_dir.h"
#include "tools/tiny_model.h"
#include "util/scoped_env.h"

using namespace h3;

namespace {

// Enough blocks for the transformer to outweigh the other models' phases (the audio decode's planned working memory
// is 1 MiB per latent), so that streaming it lowers the smallest plan.
constexpr int64_t kBlocks = 200;
// The plans' descriptions begin with these, cheapest first (pipeline/residency_plan.cpp's describe).
const char* const kPlanOrder[] = {"resident:", "phase-resident (the transformer kept",
                                  "phase-resident (the transformer loaded", "streamed from pinned host memory",
                                  "streamed from disk"};

class ResidencyEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("residency");
    make_tiny_model(model_dir(), 11, kBlocks);
    auto engine = open_engine(std::nullopt);
    resident_ = new GenerationResult(engine->generate(request()));
  }
  static void TearDownTestSuite() {
    delete resident_;
    delete dir_;
  }
  static std::string model_dir() { return dir_->path() + "/model"; }

  static GenerationRequest request() {
    GenerationRequest r;
    r.prompt = "a red fox walks through fresh snow";
    r.width = 64;
    r.height = 32;
    r.frames = 5;  // few audio latents: the audio decode's planned working memory stays below the transformer's
    r.steps = 3;
    r.seed = 5;
    return r;
  }

  static std::unique_ptr<Engine> open_engine(std::optional<uint64_t> budget) {
    EngineOptions o;
    o.model_dir = model_dir();
    o.device = "cpu";
    o.memory_budget_bytes = budget;
    return Engine::open(o);
  }

  // The plan (or refusal) the engine chooses for request() under `budget` bytes (configs only: nothing loads).
  static std::string plan_at(uint64_t budget) { return open_engine(budget)->residency_plan(request()); }

  // The smallest budget whose plan starts with `kind` (the plans are ordered: a larger budget never gets a later
  // plan), by bisection between a budget that gets a later plan or a refusal and one that gets `kind` or earlier.
  static uint64_t tightest_budget(const std::string& kind) {
    static std::map<std::string, uint64_t> found;  // the snapshot and request are the suite's: one search per kind
    if (const auto it = found.find(kind); it != found.end()) return it->second;
    uint64_t lo = 1, hi = uint64_t(1) << 34;  // 1 B refuses, 17 GB is resident
    EXPECT_EQ(plan_at(hi).rfind("resident:", 0), 0u) << plan_at(hi);
    const auto at_least = [&](uint64_t b) {  // `kind` or an earlier plan
      const std::string p = plan_at(b);
      for (const char* k : kPlanOrder) {
        if (p.rfind(k, 0) == 0) return true;
        if (kind.rfind(k, 0) == 0) return false;
      }
      return false;
    };
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      (at_least(mid) ? hi : lo) = mid;
    }
    EXPECT_EQ(plan_at(hi).rfind(kind, 0), 0u) << "the tightest budget for " << kind << " gets " << plan_at(hi);
    return found[kind] = hi;
  }

  // Generates under `budget` and checks the plan, the outputs against the resident run's and the peak.
  static void expect_plan_matches_resident(const std::string& kind, uint64_t budget) {
    auto engine = open_engine(budget);
    const GenerationResult out = engine->generate(request());
    EXPECT_EQ(out.residency.description.rfind(kind, 0), 0u) << out.residency.description;
    EXPECT_EQ(out.residency.budget_bytes, budget);
    ASSERT_EQ(out.video.shape(), resident_->video.shape());
    ASSERT_EQ(out.audio.shape(), resident_->audio.shape());
    EXPECT_EQ(std::memcmp(out.video.data(), resident_->video.data(), out.video.nbytes()), 0) << kind;
    EXPECT_EQ(std::memcmp(out.audio.data(), resident_->audio.data(), out.audio.nbytes()), 0) << kind;
    for (const PhaseTiming& t : out.timings) {
      EXPECT_GT(t.peak_device_bytes, 0u) << phase_name(t.phase) << ": the budgeted CPU backend counts its tensors";
      EXPECT_LE(t.peak_device_bytes, budget) << phase_name(t.phase);
    }
  }

  static TempDir* dir_;
  static GenerationResult* resident_;
};
TempDir* ResidencyEngine::dir_ = nullptr;
GenerationResult* ResidencyEngine::resident_ = nullptr;

}  // namespace

TEST_F(ResidencyEngine, WithoutABudgetEverythingIsResidentAndNothingIsCounted) {
  EXPECT_EQ(resident_->residency.description, "resident (no budget)");
  EXPECT_EQ(resident_->residency.budget_bytes, 0u);
  for (const PhaseTiming& t : resident_->timings) EXPECT_EQ(t.peak_device_bytes, 0u) << phase_name(t.phase);
}

TEST_F(ResidencyEngine, ResidentPlanAtItsTightestBudgetMatchesBitForBit) {
  expect_plan_matches_resident("resident:", tightest_budget("resident:"));
}

TEST_F(ResidencyEngine, PhasePlanKeepingTheTransformerAtItsTightestBudgetMatchesBitForBit) {
  const uint64_t kept = tightest_budget("phase-resident (the transformer kept");
  EXPECT_LT(kept, tightest_budget("resident:"));
  expect_plan_matches_resident("phase-resident (the transformer kept", kept);
}

TEST_F(ResidencyEngine, PhasePlanAtItsTightestBudgetMatchesBitForBit) {
  const uint64_t phase = tightest_budget("phase-resident (the transformer loaded");
  EXPECT_LT(phase, tightest_budget("resident:"));
  expect_plan_matches_resident("phase-resident (the transformer loaded", phase);
}

TEST_F(ResidencyEngine, PlansAreOrderedAndTheStreamedOnesNeedLessThanThePhasePlan) {
  const uint64_t resident = tightest_budget("resident:"), phase = tightest_budget("phase-resident (the transformer loaded");
  const uint64_t streamed = tightest_budget("streamed from pinned host memory");
  EXPECT_LT(phase, resident);
  EXPECT_LT(streamed, phase);
  EXPECT_NE(plan_at(streamed).find("transformer blocks through 2 slots"), std::string::npos) << plan_at(streamed);
  // Without the host memory for a pinned copy of the blocks, the same budget streams them from the disk.
  const ScopedEnv host("H3_HOST_MEMORY_LIMIT", "0.001");
  EXPECT_EQ(plan_at(streamed).rfind("streamed from disk", 0), 0u) << plan_at(streamed);
}

TEST_F(ResidencyEngine, ABudgetBelowTheSmallestPlanIsRefusedBeforeLoading) {
  const uint64_t smallest = tightest_budget("streamed from pinned host memory");
  auto engine = open_engine(smallest - 1);
  try {
    engine->generate(request());
    FAIL() << "a budget below the smallest plan was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("64x32x5 generation needs ~"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  // Only the tokenizer, which the prompt's rules read before the plan.
  EXPECT_EQ(engine->stats().component_loads, 1) << "the refusal must come before any model loads";
}

TEST_F(ResidencyEngine, TheAllocationPastTheBudgetIsRefusedNamingIt) {
  std::unique_ptr<Backend> be = make_backend("cpu");
  set_device_memory_limit(*be, 1000);
  const Tensor held = be->empty({200}, DType::F32);  // 800 bytes
  try {
    be->empty({100}, DType::F32);
    FAIL() << "400 bytes past a 1000-byte budget holding 800 were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("memory budget of 1e-06 GB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(be->memory_stats().in_use, 800u);
  EXPECT_EQ(be->memory_stats().device_total, 1000u);
  { const Tensor t = be->upload(Tensor::zeros({50}, DType::F32), DType::F32); }
  EXPECT_EQ(be->memory_stats().in_use, 800u) << "a tensor's bytes come back when it goes";
  EXPECT_EQ(be->memory_stats().peak, 1000u);
}

TEST_F(ResidencyEngine, TheEnvironmentSetsTheBudgetAndABadValueIsRefused) {
  {
    const ScopedEnv env("H3_DEVICE_MEMORY_LIMIT", "0.5");
    EXPECT_EQ(device_memory_limit(*make_backend("cpu")), std::optional<uint64_t>(500'000'000));
  }
  const ScopedEnv env("H3_DEVICE_MEMORY_LIMIT", "-3");
  try {
    make_backend("cpu");
    FAIL() << "H3_DEVICE_MEMORY_LIMIT=-3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("H3_DEVICE_MEMORY_LIMIT must be a device memory budget in GB"),
              std::string::npos) << e.what();
  }
}

TEST_F(ResidencyEngine, ASessionKeepsWhatItsPlanAllowsBetweenVideos) {
  auto resident = open_engine(tightest_budget("resident:"));
  GenerationRequest second = request();
  second.prompt = "a grey wolf";  // a new prompt: the conditioner runs again
  resident->generate(request());
  const int64_t loads = resident->stats().component_loads;
  resident->generate(second);
  EXPECT_EQ(resident->stats().component_loads, loads) << "the resident plan loads nothing for the second video";

  // The conditioner and both VAE decoders load again for their phases; the transformer stays, or loads again for
  // the denoise.
  for (const auto& [plan, loads_per_video] : {std::pair{"phase-resident (the transformer kept", 3},
                                              std::pair{"phase-resident (the transformer loaded", 4}}) {
    auto phased = open_engine(tightest_budget(plan));
    phased->generate(request());
    const int64_t phase_loads = phased->stats().component_loads;
    phased->generate(second);
    EXPECT_EQ(phased->stats().component_loads, phase_loads + loads_per_video) << plan;
  }
}

TEST_F(ResidencyEngine, StreamedPlansAtTheirTightestBudgetsMatchBitForBit) {
  expect_plan_matches_resident("streamed from pinned host memory", tightest_budget("streamed from pinned host memory"));
  const ScopedEnv host("H3_HOST_MEMORY_LIMIT", "0.001");
  expect_plan_matches_resident("streamed from disk", tightest_budget("streamed from disk"));
}
