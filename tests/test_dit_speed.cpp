// The DiT's speed controls (issue 16, h3.c's --layers, --token-reduction, --core-reuse) on the CPU backend, by
// their definitions: the defaults are the exact forward bit for bit; each control against the independent float64
// evaluation of the reference forward with the control's definition (dit_test_models.h: a subset of blocks, pooled
// and restored row pairs, the core's held residual), within float32 rounding (1e-5, the bound of the exact forward's
// own test); and the kept set, the resident weights and the blocks never read for gates the test controls.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "models/dit/dit.h"
#include "models/dit/dit_layers.h"
#include "models/dit/dit_random.h"
#include "models/dit/dit_token_reduction.h"
#include "pipeline/dit_velocity.h"
#include "pipeline/layout.h"
#include "pipeline/memory_plan.h"
#include "pipeline/request.h"
#include "pipeline/sampler.h"
#include "util/scoped_env.h"

using namespace h3;
using namespace h3::dit_test;

namespace {

// f32 CPU forward against the float64 reference: float32 rounding only (as DitTest.MatchesFloat64Reference...).
constexpr double kF32Tol = 1e-5;

DitConfig blocks_config(int64_t blocks) {
  DitConfig c = config_b();
  c.num_layers = blocks;
  return c;
}

double rel_to(const DitOutput& o, const std::pair<Mat, Mat>& ref) {
  return std::max(rel_l2(o.sample, mat_tensor(ref.first)), rel_l2(o.audio_sample, mat_tensor(ref.second)));
}

// The sequence rows of a make_case layout's video rows: a grid of Nv/6 frames of 2 patch rows of 3 columns, in
// video_indices order; the pairs token reduction makes of them (columns 0 and 1 of each patch row; column 2 alone),
// and every other row alone.
std::vector<std::pair<int64_t, int64_t>> make_case_pairs(const DitForwardArgs& a) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t r : a.text_indices) pairs.push_back({r, r});
  for (int64_t r : a.audio_indices) pairs.push_back({r, r});
  for (size_t v = 0; v < a.video_indices.size(); ++v) {
    if (v % 3 == 0) pairs.push_back({a.video_indices[v], a.video_indices[v + 1]});
    if (v % 3 == 2) pairs.push_back({a.video_indices[v], a.video_indices[v]});
  }
  return pairs;
}

class DitSpeedTest : public DitTest {};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// --layers

TEST(DitLayers, TheRangeIsSevenTenthsRoundedUpToAll) {
  EXPECT_EQ(min_dit_layers(50), 35);  // h3.c's [35, 50]
  EXPECT_EQ(min_dit_layers(10), 7);
  EXPECT_EQ(min_dit_layers(7), 5);
  EXPECT_EQ(min_dit_layers(4), 3);
  EXPECT_EQ(min_dit_layers(3), 3);
  EXPECT_EQ(min_dit_layers(2), 2);
  EXPECT_EQ(min_dit_layers(1), 1);
  for (int64_t b = 1; b <= 64; ++b) {  // every minimum keeps the protected blocks (the first two and the last)
    int64_t protected_blocks = 0;
    for (int64_t i = 0; i < b; ++i) protected_blocks += dit_block_protected(i, b);
    EXPECT_GE(min_dit_layers(b), protected_blocks) << b;
  }
}

TEST(DitLayers, ThinningDropsTheLowestUnprotectedGatesInH3cOrder) {
  // Blocks 0, 1 and 9 are protected however small their gates.
  const std::vector<double> scores = {0.001, 0.002, 0.5, 0.05, 0.7, 0.02, 0.6, 0.3, 0.08, 0.003};
  EXPECT_EQ(thin_by_gate_scores(scores, 7), (std::vector<int64_t>{0, 1, 2, 4, 6, 7, 9}));
  EXPECT_EQ(thin_by_gate_scores(scores, 9), (std::vector<int64_t>{0, 1, 2, 3, 4, 6, 7, 8, 9}));
  EXPECT_EQ(thin_by_gate_scores(scores, 10).size(), 10u);
  // Ties fall as h3.c's selection sort makes them fall: picking block 4 (the lowest) swaps block 2 behind block 3,
  // so of the tied blocks 2 and 3, block 3 is dropped next (a sort stable in block order would drop block 2).
  EXPECT_EQ(thin_by_gate_scores({9, 9, 1, 1, 0, 2, 9}, 5), (std::vector<int64_t>{0, 1, 2, 5, 6}));
  EXPECT_THROW(thin_by_gate_scores(scores, 6), Error);
}

TEST(DitLayers, GateScoreIsTheMeanAbsoluteGateOverEveryRowAndModality) {
  Tensor table = Tensor::zeros({6, kAdaLnParams, 4}, DType::F32);  // T = 2 timesteps x 3 modalities
  float* p = table.ptr<float>();
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t d = 0; d < 4; ++d) {
      p[(r * kAdaLnParams + kGateMsa) * 4 + d] = (d % 2 ? -1.f : 1.f) * static_cast<float>(r);
      p[(r * kAdaLnParams + kGateMlp) * 4 + d] = 2.f;
      p[(r * kAdaLnParams + kShiftMsa) * 4 + d] = 100.f;  // not a gate: not counted
    }
  EXPECT_DOUBLE_EQ(dit_gate_score(table), ((0 + 1 + 2 + 3 + 4 + 5) / 6.0 + 2.0) / 2.0);
}

TEST_F(DitSpeedTest, LayersRunTheBlocksTheGatesRankAndHoldOnlyThem) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(10);
  write_diffusers_model(path("m"), c, 61, DType::F32);
  const std::vector<float> gates = {0.001f, 0.002f, 0.5f, 0.05f, 0.7f, 0.02f, 0.6f, 0.3f, 0.08f, 0.003f};
  control_gates(path("m"), c, gates);
  const std::vector<int64_t> kept = {0, 1, 2, 4, 6, 7, 9};
  const DitForwardArgs args = make_case(c, 5, 6, 12, {0.2f, 0.7f}, 62, true);
  const DitLayout layout = layout_of(args);
  DitRequestOptions seven;
  seven.layers = 7;

  // Defaults and an explicit "all": the exact forward, bit for bit.
  auto dit = Dit::load(*be, dit_component_from_dir(path("m")));
  const DitOutput exact = dit->forward(args);
  DitRequestOptions all;
  all.layers = 10;
  dit->begin_request(layout, args.encoder_hidden_states, args.timestep, all);
  EXPECT_TRUE(same_output(exact, dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices)));
  const uint64_t full_bytes = dit->resident_weight_bytes();
  EXPECT_EQ(full_bytes, dit_resident_bytes(c, DType::F32, false));

  // Thinned: the blocks with the lowest gates over the request's timesteps are dropped and freed.
  dit->begin_request(layout, args.encoder_hidden_states, args.timestep, seven);
  EXPECT_EQ(dit->resident_blocks(), kept);
  EXPECT_EQ(dit->resident_weight_bytes(), dit_resident_bytes(c, DType::F32, false, 7));
  EXPECT_LT(dit->resident_weight_bytes(), full_bytes);
  const DitOutput thinned = dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices);
  Reference64 ref(path("m"), c);
  const double d = rel_to(thinned, ref.forward(args, {kept}));
  std::printf("  layers 7 of 10 vs the f64 reference over the kept blocks: rel L2 %.3e\n", d);
  EXPECT_LE(d, kF32Tol);
  EXPECT_GT(rel_l2(thinned.sample, exact.sample), 1e-3);  // the dropped blocks did something

  // Back to all blocks: the dropped ones are loaded again, and the forward is the exact one again.
  EXPECT_EQ(dit->select_blocks(args.timestep, std::nullopt).size(), 10u);
  EXPECT_EQ(dit->resident_weight_bytes(), full_bytes);
  EXPECT_TRUE(same_output(exact, dit->forward(args)));
  EXPECT_EQ(dit->adaln_table_builds(), 1);  // one timestep list: its tables were computed once
}

// A transformer loaded without blocks loads only those a request runs: a dropped block's attention and FFN weights
// are never read (NaN there changes nothing) and never held.
TEST_F(DitSpeedTest, DroppedBlocksAreNeverLoaded) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(10);
  write_diffusers_model(path("m"), c, 63, DType::F32);
  control_gates(path("m"), c, {0.9f, 0.9f, 0.01f, 0.5f, 0.5f, 0.02f, 0.5f, 0.5f, 0.03f, 0.9f});
  const std::vector<int64_t> kept = {0, 1, 3, 4, 6, 7, 9};
  write_diffusers_model(path("nan"), c, 63, DType::F32);
  control_gates(path("nan"), c, {0.9f, 0.9f, 0.01f, 0.5f, 0.5f, 0.02f, 0.5f, 0.5f, 0.03f, 0.9f});
  rewrite_checkpoint(path("nan"), [&](const std::string& name, Tensor& t) {
    for (int64_t b : {2, 5, 8})
      if (name.rfind("transformer_blocks." + std::to_string(b) + ".", 0) == 0 && name.find("adaln") == std::string::npos)
        std::fill_n(t.ptr<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
  });
  const DitForwardArgs args = make_case(c, 4, 6, 12, {0.4f, 0.9f}, 64, false);
  DitRequestOptions seven;
  seven.layers = 7;
  DitOptions deferred;
  deferred.blocks = std::vector<int64_t>{};
  auto clean = Dit::load(*be, dit_component_from_dir(path("m")));
  auto poisoned = Dit::load(*be, dit_component_from_dir(path("nan")), deferred);
  EXPECT_TRUE(poisoned->resident_blocks().empty());
  EXPECT_EQ(poisoned->resident_weight_bytes(), dit_resident_bytes(c, DType::F32, false, 0));
  DitOutput outs[2];
  int i = 0;
  for (Dit* d : {clean.get(), poisoned.get()}) {
    d->begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, seven);
    outs[i++] = d->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices);
  }
  EXPECT_EQ(poisoned->resident_blocks(), kept);
  EXPECT_TRUE(same_output(outs[0], outs[1]));
  // A block a later request needs is loaded then (here: a poisoned one, so the output is no longer finite).
  poisoned->begin_request(layout_of(args), args.encoder_hidden_states, args.timestep);
  EXPECT_EQ(poisoned->resident_blocks().size(), 10u);
  EXPECT_FALSE(std::isfinite(poisoned->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices)
                                 .sample.at(0)));
}

TEST_F(DitSpeedTest, LayersRulesAndTransformersWithoutACheckpoint) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(10);
  const DitForwardArgs args = make_case(c, 3, 4, 6, {0.5f}, 65, false);
  auto dit = random_dit(*be, c);
  DitRequestOptions o;
  o.layers = 6;
  try {
    dit->begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, o);
    FAIL() << "6 of 10 blocks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers must be between 7 and 10"), std::string::npos) << e.what();
  }
  // Dropping is free. A random transformer makes a dropped block again from its tensors' streams: the output of
  // every block is the first request's again.
  const DitOutput exact = dit->forward(args);
  EXPECT_EQ(dit->select_blocks(args.timestep, 8).size(), 8u);
  EXPECT_EQ(dit->select_blocks(args.timestep, std::nullopt).size(), 10u);
  EXPECT_TRUE(same_output(exact, dit->forward(args)));
  // One made from weights in memory without a loader cannot load a block it dropped.
  auto bare = Dit::from_weights(*be, c, Layout::Diffusers, random_dit_weights(*be, c));
  EXPECT_EQ(bare->select_blocks(args.timestep, 8).size(), 8u);
  try {
    bare->select_blocks(args.timestep, std::nullopt);
    FAIL() << "a freed block came back from nowhere";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be loaded again"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// --token-reduction

TEST(DitTokenReduction, TheWindowScalesH3cs50BlocksAndTheEnvironmentOverridesIt) {
  const auto window = [](int64_t blocks) {
    const TokenReductionWindow w = token_reduction_window(blocks);
    return std::vector<int64_t>{w.begin, w.end, w.early_passes, w.early_end};
  };
  EXPECT_EQ(window(50), (std::vector<int64_t>{4, 30, 10, 40}));  // h3.c's numbers
  EXPECT_EQ(window(10), (std::vector<int64_t>{1, 6, 10, 8}));
  EXPECT_EQ(window(6), (std::vector<int64_t>{1, 4, 10, 5}));
  EXPECT_EQ(window(2), (std::vector<int64_t>{1, 1, 10, 2}));  // the first block always runs on every row
  const TokenReductionWindow w = token_reduction_window(50);
  EXPECT_TRUE(w.reduces(4, 9) && w.reduces(39, 9) && !w.reduces(40, 9) && !w.reduces(3, 0));
  EXPECT_TRUE(w.reduces(29, 10) && !w.reduces(30, 10));
  {
    ScopedEnv blocks("H3_TOKEN_REDUCTION_BLOCKS", "6:45");  // ends past the early end: no early phase (as h3.c)
    EXPECT_EQ(window(50), (std::vector<int64_t>{6, 45, 0, 45}));
    ScopedEnv early("H3_TOKEN_REDUCTION_EARLY", "3:48");
    EXPECT_EQ(window(50), (std::vector<int64_t>{6, 45, 3, 48}));
  }
  {
    ScopedEnv early("H3_TOKEN_REDUCTION_EARLY", "0");
    EXPECT_EQ(window(50), (std::vector<int64_t>{4, 30, 0, 30}));
  }
  const std::pair<const char*, const char*> bad[] = {{"H3_TOKEN_REDUCTION_BLOCKS", "30:4"},
                                                     {"H3_TOKEN_REDUCTION_BLOCKS", "4:51"},
                                                     {"H3_TOKEN_REDUCTION_BLOCKS", "4-30"},
                                                     {"H3_TOKEN_REDUCTION_EARLY", "10:20"},
                                                     {"H3_TOKEN_REDUCTION_EARLY", "0:40"},
                                                     {"H3_TOKEN_REDUCTION_EARLY", "ten"}};
  for (const auto& [name, value] : bad) {
    ScopedEnv env(name, value);
    try {
      token_reduction_window(50);
      ADD_FAILURE() << name << "=" << value << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) + " must be"), std::string::npos) << e.what();
    }
  }
}

TEST(DitTokenReduction, PairsAreHorizontalNeighboursOfTheTargetVideoOnly) {
  // 2 text rows, 2 conditioning video rows, then a target grid of 2 frames x 1 row x 3 columns (odd width).
  DitLayout l;
  l.token_tags = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  l.position_ids = Tensor::zeros({10, 3}, DType::F64);
  for (int64_t r = 0; r < 10; ++r) l.position_ids.ptr<double>()[r * 3 + 2] = static_cast<double>(r);
  l.text_indices = {0, 1};
  l.video_indices = {2, 3, 4, 5, 6, 7, 8, 9};
  l.target_video_grid = {2, 1, 3};
  const TokenPairs p = token_pairs(l);
  const std::vector<int32_t> want = {0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9};
  ASSERT_EQ(p.pairs.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p.pairs.ptr<int32_t>()[i], want[i]) << i;
  EXPECT_EQ(p.positions.at(4 * 3 + 2), 4.5);  // a pair sits at its members' mean position
  EXPECT_EQ(p.positions.at(5 * 3 + 2), 6.0);  // a row alone at its own
  l.target_video_grid = {};
  EXPECT_THROW(token_pairs(l), Error);
}

// Token reduction against its definition on a 6-block model: pooled rows enter block 1 (the window's begin), and
// are restored before block 5 during the first 10 passes, before block 4 after them.
TEST_F(DitSpeedTest, TokenReductionMatchesItsDefinition) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(6);
  write_diffusers_model(path("m"), c, 71, DType::F32);
  auto dit = Dit::load(*be, dit_component_from_dir(path("m")));
  const DitForwardArgs args = make_case(c, 4, 6, 12, {0.3f, 0.8f}, 72, true);
  DitLayout layout = layout_of(args);
  layout.target_video_grid = {2, 2, 3};
  const DitOutput exact = dit->forward(args);
  Reference64 ref(path("m"), c);
  DitRequestOptions reduce;
  reduce.token_reduction = true;
  const auto pairs = make_case_pairs(args);
  for (const auto& [pass, end] : {std::pair<int64_t, int64_t>{0, 5}, {12, 4}}) {
    dit->begin_request(layout, args.encoder_hidden_states, args.timestep, reduce);
    const DitOutput out = dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices, pass);
    const double d = rel_to(out, ref.forward(args, {{}, pairs, 1, end}));
    std::printf("  token reduction, pass %lld (blocks 1..%lld reduced) vs the f64 definition: rel L2 %.3e\n",
                static_cast<long long>(pass), static_cast<long long>(end - 1), d);
    EXPECT_LE(d, kF32Tol);
    EXPECT_GT(rel_l2(out.sample, exact.sample), 1e-3);  // the reduction changed something
  }
  // Overridden window, and the exact twin.
  {
    ScopedEnv blocks("H3_TOKEN_REDUCTION_BLOCKS", "2:4");
    ScopedEnv early("H3_TOKEN_REDUCTION_EARLY", "0");
    dit->begin_request(layout, args.encoder_hidden_states, args.timestep, reduce);
    EXPECT_LE(rel_to(dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices),
                     ref.forward(args, {{}, pairs, 2, 4})),
              kF32Tol);
  }
  {
    ScopedEnv off("H3_DISABLE_TOKEN_REDUCTION", "1");
    dit->begin_request(layout, args.encoder_hidden_states, args.timestep, reduce);
    EXPECT_TRUE(same_output(exact, dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices)));
  }
}

// Rows alone cross the window bit for bit: with a target video one column wide every row is alone, and the reduced
// path (pool, the blocks over the same rows in the same order at the same positions, restore) is the exact forward.
TEST_F(DitSpeedTest, RowsAloneAreExactThroughTheWindow) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(6);
  write_diffusers_model(path("m"), c, 73, DType::F32);
  auto dit = Dit::load(*be, dit_component_from_dir(path("m")));
  const DitForwardArgs args = make_case(c, 4, 6, 12, {0.3f, 0.8f}, 74, true);
  DitLayout layout = layout_of(args);
  layout.target_video_grid = {12, 1, 1};
  DitRequestOptions reduce;
  reduce.token_reduction = true;
  const DitOutput exact = dit->forward(args);
  dit->begin_request(layout, args.encoder_hidden_states, args.timestep, reduce);
  EXPECT_TRUE(same_output(exact, dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices)));
}

// With --layers the window stays in checkpoint block numbers: the rows are pooled before the first block run inside
// it and restored before the first run past it (10 blocks: reduced from 1, restored before 8 early, 6 later).
TEST_F(DitSpeedTest, TokenReductionWithLayersKeepsTheCheckpointsBlockNumbers) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(10);
  write_diffusers_model(path("m"), c, 75, DType::F32);
  control_gates(path("m"), c, {0.1f, 0.1f, 0.5f, 0.05f, 0.7f, 0.02f, 0.6f, 0.3f, 0.08f, 0.1f});
  const std::vector<int64_t> kept = {0, 1, 2, 4, 6, 7, 9};  // 6 and 7 run inside the early window only
  auto dit = Dit::load(*be, dit_component_from_dir(path("m")));
  const DitForwardArgs args = make_case(c, 3, 4, 18, {0.25f, 0.6f}, 76, true);
  DitLayout layout = layout_of(args);
  layout.target_video_grid = {3, 2, 3};
  DitRequestOptions o;
  o.layers = 7;
  o.token_reduction = true;
  Reference64 ref(path("m"), c);
  for (const auto& [pass, end] : {std::pair<int64_t, int64_t>{3, 8}, {10, 6}}) {
    dit->begin_request(layout, args.encoder_hidden_states, args.timestep, o);
    ASSERT_EQ(dit->resident_blocks(), kept);
    const DitOutput out = dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices, pass);
    EXPECT_LE(rel_to(out, ref.forward(args, {kept, make_case_pairs(args), 1, end})), kF32Tol) << pass;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// --core-reuse

// 8 passes, core reuse 3: the core runs on steps 0, 3, 6 and 7 (the last pass) — exactly the exact forward's bits —
// and the steps between add the residual the last refresh held to their own input projection.
TEST_F(DitSpeedTest, CoreReuseRefreshesExactlyAndHoldsTheResidualBetween) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(3);
  write_diffusers_model(path("m"), c, 81, DType::F32);
  auto exact = Dit::load(*be, dit_component_from_dir(path("m")));
  auto reuse = Dit::load(*be, dit_component_from_dir(path("m")));
  Reference64 ref(path("m"), c);
  const std::vector<float> timesteps = {0.1f, 0.4f, 0.7f};
  const DitForwardArgs first = make_case(c, 4, 6, 12, timesteps, 82, true);
  const DitLayout layout = layout_of(first);
  DitRequestOptions o;
  o.core_reuse = 3;
  o.passes = 8;
  exact->begin_request(layout, first.encoder_hidden_states, timesteps);
  reuse->begin_request(layout, first.encoder_hidden_states, timesteps, o);
  std::mt19937 g(83);
  std::uniform_int_distribution<int64_t> pick(0, 2);
  Mat held;  // the f64 definition's residual: the core's output minus its input at the last refresh
  for (int64_t pass = 0; pass < 8; ++pass) {
    DitForwardArgs a = first;  // the same layout and text, fresh rows and timesteps each pass
    a.hidden_states = randn(first.hidden_states.shape(), g);
    a.audio_hidden_states = randn(first.audio_hidden_states.shape(), g);
    for (int64_t& t : a.timestep_indices) t = pick(g);
    const DitOutput e = exact->step(a.hidden_states, a.audio_hidden_states, a.timestep_indices);
    const DitOutput r = reuse->step(a.hidden_states, a.audio_hidden_states, a.timestep_indices);
    const bool refresh = pass % 3 == 0 || pass == 7;
    Mat x = ref.embed(a);
    if (refresh) {
      EXPECT_TRUE(same_output(e, r)) << "refresh pass " << pass;
      held = x;
      ref.core(a, held, {});
      for (size_t i = 0; i < held.v.size(); ++i) held.v[i] -= x.v[i];
      continue;
    }
    for (size_t i = 0; i < x.v.size(); ++i) x.v[i] += held.v[i];
    const double d = rel_to(r, ref.heads(a, x));
    std::printf("  core reuse, held pass %lld vs the f64 definition: rel L2 %.3e\n", static_cast<long long>(pass), d);
    EXPECT_LE(d, kF32Tol) << pass;
    EXPECT_GT(rel_l2(r.sample, e.sample), 1e-3) << pass;  // the core was not run again
  }
}

// The sampler's passes keep their numbers when it evaluates only some of them (as --reuse will): DitVelocityModel
// finds each step's pass from its target video's timestep, so token reduction's early phase (here passes 0 and 1,
// H3_TOKEN_REDUCTION_EARLY=2:5) follows the schedule, not the count of evaluations.
TEST_F(DitSpeedTest, VelocityModelNumbersPassesByTheVideoSchedule) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config(6);
  auto dit = random_dit(*be, c);
  ScopedEnv early("H3_TOKEN_REDUCTION_EARLY", "2:5");
  const LatentGeometry g = LatentGeometry::make(96, 32, 5, c.patch_size, c.in_channels, c.audio_in_channels);
  LayoutSpec spec;
  spec.text_tags = {1, 1, 0, 1};
  spec.target = g;
  const PackedLayout layout = build_layout(spec);
  auto [video, audio] = make_schedules(4);
  const TimestepPlan plan = TimestepPlan::make(layout, video, audio);
  std::mt19937 gen(91);
  const Tensor text = randn({4, c.text_dim}, gen);
  const Tensor video_rows = randn({g.video_rows(), c.patch_dim()}, gen);
  const Tensor audio_rows = randn({g.audio_rows(), c.audio_in_channels}, gen);
  DitRequestSettings settings;
  settings.options.token_reduction = true;
  settings.video_timesteps = video.timesteps();
  settings.target_video_grid = {g.latent_frames, g.patch_rows(), g.patch_cols()};
  DitVelocityModel model(*dit, settings);
  model.begin_request(layout, text, plan.timesteps());
  std::vector<Velocity> sampled;
  for (int64_t pass : {0, 2, 3}) sampled.push_back(model.step(video_rows, audio_rows, plan.row_indices(layout, pass)));
  model.end_request();
  DitLayout dl{layout.token_tags, layout.position_ids, layout.video_indices, layout.audio_indices,
               layout.text_indices, settings.target_video_grid};
  DitRequestOptions o = settings.options;
  o.passes = 4;
  dit->begin_request(dl, text, plan.timesteps(), o);
  int i = 0;
  for (int64_t pass : {0, 2, 3}) {
    const DitOutput d = dit->step(video_rows, audio_rows, plan.row_indices(layout, pass), pass);
    EXPECT_TRUE(bit_equal(d.sample, sampled[i].video) && bit_equal(d.audio_sample, sampled[i].audio)) << pass;
    ++i;
  }
  // The second evaluation is pass 2 (late window), not the second pass (early): the two differ.
  dit->begin_request(dl, text, plan.timesteps(), o);
  EXPECT_FALSE(bit_equal(dit->step(video_rows, audio_rows, plan.row_indices(layout, 2), 1).sample, sampled[1].video));
}

// ---------------------------------------------------------------------------------------------------------------
// The request's rules and the memory plan

TEST(DitSpeedRequest, EveryRuleIsOneSentence) {
  GenerationRequest r;
  r.prompt = "a fox";
  EXPECT_TRUE(request_problems(r).empty());
  r.layers = 35;
  r.core_reuse = 6;
  r.token_reduction = true;
  EXPECT_TRUE(request_problems(r).empty());
  r.layers = 34;
  r.core_reuse = 7;
  const std::vector<std::string> p = request_problems(r);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], "--layers must be between 35 and 50 (seven tenths of the transformer's 50 blocks, rounded up, to "
                  "all of them), got 34.");
  EXPECT_EQ(p[1], "--core-reuse must be between 1 and 6, got 7.");
  r.layers = 51;
  r.core_reuse = 0;
  EXPECT_EQ(request_problems(r).size(), 2u);
  r.layers = 7;  // the range follows the transformer's blocks
  r.core_reuse = 1;
  EXPECT_TRUE(request_problems(r, kCanvasMultiple, RequestCheck::Whole, 10).empty());
  EXPECT_EQ(request_problems(r, kCanvasMultiple, RequestCheck::Whole, 50).size(), 1u);
}

TEST(DitSpeedRequest, TheMemoryPlanCountsTheBlocksARequestRuns) {
  const DitConfig c;  // the release's
  const uint64_t all = dit_resident_bytes(c, DType::BF16, false), forty = dit_resident_bytes(c, DType::BF16, false, 40);
  const uint64_t per_block = (all - forty) / 10;
  EXPECT_EQ(all - forty, 10 * per_block);
  // A block's attention and FFN weights in bf16 (its AdaLN bias stays).
  const uint64_t D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim;
  EXPECT_EQ(per_block, 2 * (2 * D + 3 * I * D + 2 * c.attention_head_dim + D * I + 3 * F * D));
  std::printf("  release transformer: %.2f GB resident, %.2f GB with --layers 40\n", all / 1e9, forty / 1e9);
  MemoryPlanInputs in;
  in.geometry = LatentGeometry::make(864, 480, 124);
  const uint64_t plan_all = plan_generation_memory(in).weights.front().bytes;
  in.dit_layers = 40;
  EXPECT_EQ(plan_all - plan_generation_memory(in).weights.front().bytes, all - forty);
}
