// FastH3 checkpoints and the student's sampling (models/dit/dit_fasth3.h; FastVideo's minimax_h3.py and
// examples/inference/basic/basic_fasth3.py): gate detection, the request plan, and the student's grid (5 grid
// points = 4 forwards on the base schedulers with the base Euler step, i.e. our --steps 4 (passes)) against
// FastVideo's MiniMaxH3Scheduler: tests/fixtures/fasth3/schedule/ (tools/reference/fx_fasth3.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/dit/dit_fasth3.h"
#include "pipeline/request_json.h"
#include "pipeline/schedule.h"
#include "temp_dir.h"

namespace h3 {
namespace {

std::vector<float> floats(const Tensor& t) {
  const Tensor f = t.to_f32();
  return std::vector<float>(f.ptr<float>(), f.ptr<float>() + f.numel());
}

TEST(FastH3Student, ScheduleAndStepsEqualFastVideos) {
  const std::string dir = std::string(H3_SOURCE_DIR) + "/tests/fixtures/fasth3/schedule";
  if (!std::filesystem::exists(dir + "/case.safetensors"))
    GTEST_SKIP() << "FastH3 fixture " << dir << " is missing: run tools/reference/FASTH3_RUN.txt's command";
  std::ifstream in(dir + "/case.json");
  const nlohmann::json c = nlohmann::json::parse(in);
  const auto f = SafetensorsFile::open(dir + "/case.safetensors");
  const int64_t passes = c.at("forwards").get<int64_t>();
  ASSERT_EQ(passes + 1, c.at("grid_points").get<int64_t>());
  for (const char* modality : {"video", "audio"}) {
    const std::string m = modality;
    const FlowSchedule s = FlowSchedule::shifted(c.at("shifts").at(m).get<double>(), passes + 1);
    EXPECT_EQ(s.sigmas(), floats(f->tensor(m + "_sigmas"))) << m;
    EXPECT_EQ(s.timesteps(), floats(f->tensor(m + "_timesteps"))) << m;
    // Each Euler step from sample0 with the constant velocity: the same float32 roundings, so bit-equal.
    std::vector<float> x = floats(f->tensor("sample0"));
    const std::vector<float> v = floats(f->tensor("velocity"));
    const std::vector<float> expected = floats(f->tensor(m + "_samples"));
    for (int64_t i = 0; i < s.passes(); ++i) {
      s.step(i, v.data(), x.data(), static_cast<int64_t>(x.size()));
      EXPECT_EQ(x, std::vector<float>(expected.begin() + static_cast<int64_t>(i * x.size()),
                                      expected.begin() + static_cast<int64_t>((i + 1) * x.size())))
          << m << " pass " << i;
    }
  }
}

DitConfig tiny_config() {
  DitConfig c;
  c.num_layers = 3;
  c.num_attention_heads = 2;
  c.attention_head_dim = 8;
  c.hidden_size = 24;
  return c;
}

// A checkpoint holding proj_in and the gates of `blocks`, shaped [inner, hidden] unless `bad_shape`.
Checkpoint gates_checkpoint(const TempDir& dir, const DitConfig& c, const std::vector<int64_t>& blocks,
                            bool bad_shape = false) {
  std::vector<NamedTensor> tensors = {{"proj_in.weight", Tensor::zeros({4, 4}, DType::F32)}};
  for (const int64_t b : blocks)
    tensors.push_back({dit_gate_name(b), Tensor::zeros({c.inner_dim(), c.hidden_size + (bad_shape ? 1 : 0)},
                                                       DType::BF16)});
  write_safetensors(dir / "model.safetensors", tensors);
  return Checkpoint::open(dir / "model.safetensors");
}

TEST(FastH3Checkpoint, GatesInEveryBlockOrNone) {
  const TempDir dir("fasth3");
  const DitConfig c = tiny_config();
  EXPECT_TRUE(dit_has_gates(gates_checkpoint(dir, c, {0, 1, 2}), c, Layout::Diffusers));
  EXPECT_FALSE(dit_has_gates(gates_checkpoint(dir, c, {}), c, Layout::Diffusers));
  EXPECT_THROW(dit_has_gates(gates_checkpoint(dir, c, {0, 2}), c, Layout::Diffusers), Error);
  EXPECT_THROW(dit_has_gates(gates_checkpoint(dir, c, {0, 1, 2}, true), c, Layout::Diffusers), Error);
  EXPECT_THROW(dit_has_gates(gates_checkpoint(dir, c, {0, 1, 2}), c, Layout::Original), Error);
}

TEST(FastH3Checkpoint, ZeroGateMeansEveryElementIsSignedZero) {
  Tensor g = Tensor::zeros({2, 3}, DType::BF16);
  EXPECT_TRUE(dit_gate_is_zero(g));
  g.u16()[4] = 0x8000;  // -0.0: still zero, as FastVideo's weight != 0
  EXPECT_TRUE(dit_gate_is_zero(g));
  g.u16()[5] = 0x0001;  // the smallest subnormal
  EXPECT_FALSE(dit_gate_is_zero(g));
  Tensor f = Tensor::zeros({3}, DType::F32);
  f.ptr<float>()[1] = std::numeric_limits<float>::quiet_NaN();  // NaN != 0
  EXPECT_FALSE(dit_gate_is_zero(f));
}

TEST(FastH3Plan, StudentDefaultsAndOverrides) {
  const FastH3Plan student = resolve_fasth3_plan(true, {}, 20);
  EXPECT_EQ(student.kind, DitAttentionKind::kSparseGated);
  EXPECT_EQ(student.tile_elems, 64);
  EXPECT_EQ(student.vsa.sparsity, 0.0);
  EXPECT_EQ(student.vsa.mode, VsaMode::kExempt);
  EXPECT_EQ(student.passes, 4);
  EXPECT_EQ(describe_fasth3_plan(student),
            "attention: VSA-H3 with gates (FastH3 student), tile 64 (4x4x4), sparsity 0, exempt; 4 passes");
  const FastH3Plan fast = resolve_fasth3_plan(true, {std::nullopt, 0.9, 256, 6}, 20);
  EXPECT_EQ(fast.tile_elems, 256);
  EXPECT_EQ(fast.vsa.sparsity, 0.9);
  EXPECT_EQ(fast.passes, 6);  // --steps stays passes

  const FastH3Plan pure = resolve_fasth3_plan(false, {AttentionChoice::Sparse, 0.75, std::nullopt, std::nullopt}, 20);
  EXPECT_EQ(pure.kind, DitAttentionKind::kSparsePure);
  EXPECT_EQ(pure.tile_elems, 256);
  EXPECT_EQ(pure.passes, 20);
  EXPECT_EQ(describe_fasth3_plan(pure),
            "attention: VSA-H3 without gates (pure sparse, gate GEMM skipped), tile 256 (4x8x8), sparsity 0.75, "
            "exempt; 20 passes");

  const FastH3Plan dense = resolve_fasth3_plan(false, {}, 20);
  EXPECT_EQ(dense.kind, DitAttentionKind::kDense);
  EXPECT_EQ(describe_fasth3_plan(dense), "attention: dense; 20 passes");

  // --attention dense on the student: its gates unused, its grid kept (the weights were distilled for 4 passes).
  const FastH3Plan student_dense =
      resolve_fasth3_plan(true, {AttentionChoice::Dense, std::nullopt, std::nullopt, std::nullopt}, 20);
  EXPECT_EQ(student_dense.kind, DitAttentionKind::kDense);
  EXPECT_EQ(student_dense.passes, 4);
  EXPECT_THROW(resolve_fasth3_plan(true, {AttentionChoice::Dense, 0.5, std::nullopt, std::nullopt}, 20), Error);
  EXPECT_EQ(checkpoint_default_passes(true, 20), 4);
  EXPECT_EQ(checkpoint_default_passes(false, 20), 20);
}

TEST(FastH3Plan, BadChoicesAreRefusedWithTheRange) {
  EXPECT_THROW(resolve_fasth3_plan(true, {std::nullopt, 1.0, std::nullopt, std::nullopt}, 20), Error);
  EXPECT_THROW(resolve_fasth3_plan(true, {std::nullopt, -0.5, std::nullopt, std::nullopt}, 20), Error);
  EXPECT_THROW(resolve_fasth3_plan(true, {std::nullopt, std::nullopt, 128, std::nullopt}, 20), Error);
  // dense: no routing
  EXPECT_THROW(resolve_fasth3_plan(false, {std::nullopt, 0.5, std::nullopt, std::nullopt}, 20), Error);
  try {
    resolve_fasth3_plan(true, {std::nullopt, 1.5, std::nullopt, std::nullopt}, 20);
    ADD_FAILURE() << "sparsity 1.5 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[0, 1)"), std::string::npos) << e.what();
  }
}

// The request's FastH3 fields: JSON keys both ways, and the rules request validation owns (the checkpoint-dependent
// ones are Engine::validate's, tested through the CLI).
TEST(FastH3Request, JsonKeysAndValidation) {
  GenerationRequest r = parse_request_json(R"({"prompt": "x", "attention": "sparse", "sparsity": 0.5})", "/tmp");
  ASSERT_TRUE(r.attention && r.sparsity);
  EXPECT_EQ(*r.attention, AttentionChoice::Sparse);
  EXPECT_EQ(*r.sparsity, 0.5);
  const GenerationRequest back = parse_request_json(request_to_json(r, "/tmp"), "/tmp");
  EXPECT_EQ(back.attention, r.attention);
  EXPECT_EQ(back.sparsity, r.sparsity);
  EXPECT_FALSE(parse_request_json(R"({"prompt": "x"})", "/tmp").attention);
  EXPECT_THROW(parse_request_json(R"({"prompt": "x", "attention": "fast"})", "/tmp"), Error);
  EXPECT_THROW(parse_request_json(R"({"prompt": "x", "sparsity": "high"})", "/tmp"), Error);
  EXPECT_TRUE(request_problems(r).empty());
  const auto has = [](const std::vector<std::string>& problems, const std::string& what) {
    for (const std::string& p : problems)
      if (p.find(what) != std::string::npos) return true;
    return false;
  };
  r.sparsity = 1.0;
  EXPECT_TRUE(has(request_problems(r), "--sparsity must be in [0, 1)"));
  r.sparsity = 0.25;
  r.attention = AttentionChoice::Dense;
  EXPECT_TRUE(has(request_problems(r), "--sparsity needs the sparse attention"));
  r.sparsity.reset();
  EXPECT_TRUE(request_problems(r).empty());
  r.attention = AttentionChoice::Sparse;
  r.token_reduction = true;
  EXPECT_TRUE(has(request_problems(r), "--token-reduction and --attention sparse cannot be combined"));
}

}  // namespace
}  // namespace h3
