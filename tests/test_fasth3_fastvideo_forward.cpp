// The FastH3 student forward against FastVideo's own (tests/fixtures/fasth3_forward/, tools/reference/
// fx_fasth3_forward.py: FastVideo's MiniMax-H3 transformer with its VSA-H3 attention, its checkpoint layouts and its
// loader's rules). Each case's checkpoint is loaded as the engine loads a snapshot's transformer, the attention plan is
// the one the engine resolves for that checkpoint (models/dit/dit_fasth3.h: a student's defaults, or the sparse
// attention selected for a checkpoint without gates), and one forward runs on the CPU in float32:
// - within 1e-5 rel L2 of FastVideo's float64 forward (and of its float32 one, whose distance to the float64 is the
//   self-noise case.json records, ~1e-7); the fixture guarantees every routed choice has a score margin of 1e-5, so
//   our float32 scores route the same tiles;
// - our dense forward of the same checkpoint is far from it (the fixture keeps only cases 1e-3 or more from
//   FastVideo's dense forward), so a sparse plan silently ignored would fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "h3/request.h"
#include "io/safetensors.h"
#include "models/dit/dit.h"
#include "models/dit/dit_fasth3.h"
#include "models/dit/dit_sparse_attention.h"
#include "tools/dit_tool.h"

namespace h3 {
namespace {

namespace fs = std::filesystem;

const std::string kRoot = std::string(H3_SOURCE_DIR) + "/tests/fixtures/fasth3_forward";

std::vector<std::string> case_dirs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kRoot))
    if (fs::exists(e.path() / "case.json")) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::array<int64_t, 3> grid_of(const nlohmann::json& c) {
  const auto g = c.at("grid").get<std::vector<int64_t>>();
  return {g.at(0), g.at(1), g.at(2)};
}

DitOutput run(Dit& dit, const DitForwardArgs& a, const std::array<int64_t, 3>& grid, const FastH3Plan& plan) {
  DitRequestOptions o;
  if (plan.kind != DitAttentionKind::kDense) o.sparse_attention = DitRequestOptions::SparseAttention{plan.tile_elems,
                                                                                                    plan.vsa};
  const DitLayout layout{a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices, grid};
  dit.begin_request(layout, a.encoder_hidden_states, a.timestep, o);
  DitOutput out = dit.step(a.hidden_states, a.audio_hidden_states, a.timestep_indices);
  dit.end_request();
  return out;
}

TEST(FastH3FastVideoForward, StudentAndPureSparseForwardsMatchFastVideo) {
  if (!fs::is_directory(kRoot))
    GTEST_SKIP() << "FastH3 forward fixtures " << kRoot << " are missing: run tools/reference/FASTH3_RUN.txt's "
                 << "command (fx_fasth3_forward.py, FastVideo's transformer, torch on the CPU)";
  const std::vector<std::string> dirs = case_dirs();
  ASSERT_FALSE(dirs.empty()) << kRoot << " holds no case";
  auto be = make_cpu_backend();
  bool student = false, pure = false;
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    const nlohmann::json c = nlohmann::json::parse(std::ifstream(dir + "/case.json"));
    const bool gates = c.at("gates").get<bool>();
    (gates ? student : pure) = true;
    const Component transformer = dit_component_from_dir(dir + "/transformer");
    auto dit = Dit::load(*be, transformer);
    // The checkpoint's kind is read from its tensors (FastVideo's export: diffusers names + to_gate_compress).
    EXPECT_EQ(dit->has_gates(), gates);
    EXPECT_EQ(dit_has_gates(Checkpoint::open(transformer.weights), dit->config(), transformer.layout), gates);

    // The engine's plan for this checkpoint: a student's defaults (tile 64); the sparse attention selected for one
    // without gates (tile 256, FastVideoArgs' default). Only the sparsity is chosen; the fixture's tile must be the
    // default.
    FastH3Choices choices;
    if (!gates) choices.attention = AttentionChoice::Sparse;
    choices.sparsity = c.at("sparsity").get<double>();
    const FastH3Plan plan = resolve_fasth3_plan(gates, choices, kDefaultSteps);
    ASSERT_EQ(plan.tile_elems, c.at("tile_elems").get<int64_t>());
    EXPECT_EQ(plan.vsa.mode, VsaMode::kExempt);
    ASSERT_EQ(c.at("mode").get<std::string>(), "exempt");

    const std::array<int64_t, 3> grid = grid_of(c);
    const VsaTiling tiling = vsa_tiling(c.at("prefix_segments").get<std::vector<int64_t>>(), grid, plan.tile_elems);
    EXPECT_EQ(tiling.num_prefix_tiles, c.at("num_prefix_tiles").get<int64_t>());
    EXPECT_EQ(tiling.num_video_tiles, c.at("num_video_tiles").get<int64_t>());
    EXPECT_EQ(vsa_kept_video_tiles(plan.vsa.sparsity, tiling.num_video_tiles), c.at("k_vid").get<int64_t>());

    const DitForwardArgs a = read_dit_case(dir + "/case.safetensors", dit->config());
    const auto expected = SafetensorsFile::open(dir + "/expected.safetensors");
    const DitOutput ours = run(*dit, a, grid, plan);
    const DitOutput dense = run(*dit, a, grid, FastH3Plan{});
    double dense_gap = 0;
    for (const auto& [head, got, plain] : {std::tuple{"sample", &ours.sample, &dense.sample},
                                           std::tuple{"audio_sample", &ours.audio_sample, &dense.audio_sample}}) {
      const std::string h = head;
      const double vs64 = rel_l2(*got, expected->tensor(h + "_f64"));
      const double vs32 = rel_l2(*got, expected->tensor(h + "_f32"));
      const double dense_vs64 = rel_l2(*plain, expected->tensor(h + "_f64"));
      dense_gap = std::max(dense_gap, dense_vs64);
      std::printf("  %s %s: rel_l2 vs FastVideo f64 %.3e, vs its f32 %.3e (its f32 self-noise %.3e); dense %.3e away\n",
                  fs::path(dir).filename().c_str(), head, vs64, vs32,
                  c.at("f32_self_noise_rel_l2").at(h == "sample" ? "video" : "audio").get<double>(), dense_vs64);
      // CPU float32 against the reference's float64: the acceptance bound (measured ~1e-7, test_dit.cpp's figure).
      EXPECT_LE(vs64, 1e-5) << head;
      EXPECT_LE(vs32, 1e-5) << head;
    }
    // The fixture keeps only cases >= 1e-3 (the larger of video and audio) from FastVideo's dense forward, which ours
    // matches to ~1e-7 (test_dit.cpp): half of that leaves room for both.
    EXPECT_GE(dense_gap, 5e-4) << "the sparse plan made no difference";
  }
  EXPECT_TRUE(student) << "no FastH3 student case (gates) in " << kRoot;
  EXPECT_TRUE(pure) << "no case without gates in " << kRoot;
}

}  // namespace
}  // namespace h3
