// The MiniMax-H3 transformer on the CPU backend: against the reference fixtures (float64 reference outputs of the
// diffusers forward), against an independent float64 evaluation of the reference forward on small random models,
// original layout = diffusers layout bit for bit, forward() = begin_request + step bit for bit, the AdaLN table
// cache, every argument validation rule and the `h3 tool dit` command.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "random_tensor.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/dit/dit.h"
#include "models/dit/dit_embed.h"
#include "models/dit/dit_weights.h"
#include "tools/dit_tool.h"
#include "util/mapped_file.h"

using namespace h3;
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace h3::dit_test;

// ---------------------------------------------------------------------------------------------------------------
// Encodings.

TEST(DitEmbed, RopeInverseFrequenciesAreTheSpecValues) {
  const DitConfig c;  // the released config: rope_freq_dim 16, theta 10000
  const std::vector<float> inv = dit_rope_inv_freq(c);
  const float spec[16] = {1.f,          0.562341332f,  0.316227764f,  0.177827939f,  0.100000001f,   0.0562341288f,
                          0.0316227786f, 0.0177827943f, 0.00999999978f, 0.00562341325f, 0.00316227786f, 0.00177827943f,
                          0.00100000005f, 0.000562341302f, 0.000316227786f, 0.00017782794f};
  ASSERT_EQ(inv.size(), 16u);
  // The spec lists the f32 values to 9 significant digits; pow() may differ from PyTorch's by one ulp.
  for (int k = 0; k < 16; ++k) EXPECT_NEAR(inv[k], spec[k], 2e-7 * spec[k]) << k;
}

TEST(DitEmbed, RopeTablesDuplicateTheThreeAxes) {
  DitConfig c = config_a();  // F = 2: angles [t0 t1 h0 h1 w0 w1] twice
  Tensor pos = Tensor::empty({1, 3}, DType::F64);
  pos.ptr<double>()[0] = 3.0, pos.ptr<double>()[1] = 5.0, pos.ptr<double>()[2] = 7.0;
  Tensor cos, sin;
  dit_rope_tables(c, pos, cos, sin);
  ASSERT_EQ(cos.shape(), (Shape{1, 12}));
  const std::vector<float> inv = dit_rope_inv_freq(c);
  const float axis[3] = {3.f, 5.f, 7.f};
  for (int j = 0; j < 12; ++j) {
    const float angle = axis[(j % 6) / 2] * inv[j % 2];
    EXPECT_EQ(cos.ptr<float>()[j], std::cos(angle)) << j;
    EXPECT_EQ(sin.ptr<float>()[j], std::sin(angle)) << j;
  }
}

TEST(DitEmbed, TimestepSinusoidIsCosineFirstAndUnscaled) {
  const DitConfig c;  // freq_dim 256
  const Tensor e = dit_timestep_sinusoid(c, {0.f, 1.f});
  ASSERT_EQ(e.shape(), (Shape{2, 256}));
  for (int k = 0; k < 128; ++k) {  // t = 0: 128 ones, then 128 zeros
    EXPECT_EQ(e.ptr<float>()[k], 1.f);
    EXPECT_EQ(e.ptr<float>()[128 + k], 0.f);
  }
  // t = 1: arg = freq[k]; freq[64] = 0.01, freq[127] ≈ 1.07461e-4 (spec §6.2).
  EXPECT_NEAR(e.ptr<float>()[256 + 64], std::cos(0.01), 1e-7);
  EXPECT_NEAR(e.ptr<float>()[256 + 128 + 64], std::sin(0.01), 1e-7);
  EXPECT_NEAR(e.ptr<float>()[256 + 128 + 127], 1.07461e-4, 1e-9);
}

TEST(DitWeights, DeinterleaveQkvRegroupsHeads) {
  // 2 heads of 2: original rows [h0q0 h0q1 h0k0 h0k1 h0v0 h0v1 h1q0 ...] → [q: h0 h1 | k: h0 h1 | v: h0 h1]
  EXPECT_EQ(deinterleave_qkv_rows(2, 2), (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
  Tensor t = Tensor::from_f32({3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor p = permute_rows(t, {2, 0, 1});
  EXPECT_EQ(p.ptr<float>()[0], 4.f);
  EXPECT_EQ(p.ptr<float>()[3], 1.f);
  Tensor s = stack_rows({t, Tensor::from_f32({1, 2}, {9, 8}).to(DType::F64)});
  EXPECT_EQ(s.shape(), (Shape{4, 2}));
  EXPECT_EQ(s.ptr<float>()[7], 8.f);
}

// ---------------------------------------------------------------------------------------------------------------
// The model against the float64 reference forward, on random models.

namespace {

std::unique_ptr<Dit> load_dir(Backend& be, const std::string& dir, DitOptions opt = {}) {
  return Dit::load(be, dit_component_from_dir(dir), opt);
}

void expect_close_to_reference(const DitOutput& ours, const std::pair<Mat, Mat>& ref, double tol, const char* what) {
  const double video = rel_l2(ours.sample, mat_tensor(ref.first));
  const double audio = rel_l2(ours.audio_sample, mat_tensor(ref.second));
  EXPECT_LE(video, tol) << what << " (video)";
  EXPECT_LE(audio, tol) << what << " (audio)";
  std::printf("  %s: rel_l2 vs f64 reference: video %.3e, audio %.3e\n", what, video, audio);
}

}  // namespace

// Float32 weights: the only difference from the float64 reference is float32 arithmetic. Through <= 3 blocks of
// width <= 48 its rounding error is ~1e-7 relative; 1e-5 is the acceptance bound of the reference fixtures.
TEST_F(DitTest, MatchesFloat64ReferenceOnRandomModels) {
  auto be = make_cpu_backend();
  struct Case {
    const char* name;
    DitConfig cfg;
    int64_t Nt, Na, Nv;
    std::vector<float> timesteps;
    bool permute;
  };
  const Case cases[] = {
      {"config_a, two timesteps (0.7, 0), contiguous", config_a(), 4, 6, 8, {0.7f, 0.f}, false},
      {"config_b, three timesteps, permuted rows", config_b(), 9, 12, 24, {0.25f, 0.999f, 0.5f}, true},
      {"config_a, one timestep t = 1, permuted rows", config_a(), 3, 5, 12, {1.f}, true},
      {"config_b, no audio rows", config_b(), 4, 0, 12, {0.4f, 1.f}, true},
      {"config_a, no text rows", config_a(), 0, 5, 6, {0.4f}, false},
  };
  uint32_t seed = 10;
  for (const Case& k : cases) {
    const std::string dir = path("model_" + std::to_string(seed));
    write_diffusers_model(dir, k.cfg, seed, DType::F32);
    const DitForwardArgs args = make_case(k.cfg, k.Nt, k.Na, k.Nv, k.timesteps, seed + 1, k.permute);
    auto dit = load_dir(*be, dir);
    EXPECT_EQ(dit->checkpoint_layout(), Layout::Diffusers);
    const DitOutput out = dit->forward(args);
    ASSERT_EQ(out.sample.shape(), (Shape{k.Nv, k.cfg.patch_dim()}));
    ASSERT_EQ(out.audio_sample.shape(), (Shape{k.Na, k.cfg.audio_in_channels}));
    Reference64 ref(dir, k.cfg);
    expect_close_to_reference(out, ref.forward(args), 1e-5, k.name);
    ++seed;
  }
}

// BF16 weights as the release stores them (F32 for the five float32 modules): the CPU path widens them and computes
// in float32, so against the float64 reference of the same bf16-valued weights the distance is again only float32
// rounding (~1e-7 relative); the bound stays 1e-5.
TEST_F(DitTest, Bf16WeightsMatchFloat64ReferenceOfTheSameWeights) {
  auto be = make_cpu_backend();
  const DitConfig c = config_b();
  write_diffusers_model(path("bf16"), c, 21, DType::BF16);
  ASSERT_EQ(Checkpoint::open(path("bf16")).info("transformer_blocks.0.attn.to_q.weight").dtype, DType::BF16);
  ASSERT_EQ(Checkpoint::open(path("bf16")).info("proj_in.weight").dtype, DType::F32);
  const DitForwardArgs args = make_case(c, 5, 7, 18, {0.1f, 0.02702701f, 1.f}, 22, true);
  const DitOutput out = load_dir(*be, path("bf16"))->forward(args);
  Reference64 ref(path("bf16"), c);
  expect_close_to_reference(out, ref.forward(args), 1e-5, "bf16 weights");
}

TEST_F(DitTest, OriginalLayoutLoadsBitIdenticalToDiffusersLayout) {
  auto be = make_cpu_backend();
  const DitConfig c = config_a();  // the converter's constants: rope_theta 10000, epsilons 1e-5
  write_diffusers_model(path("diffusers"), c, 31, DType::BF16);
  write_original_from_diffusers(path("diffusers"), path("original"), c);
  const Component orig = dit_component_from_dir(path("original"));
  EXPECT_EQ(orig.layout, Layout::Original);
  EXPECT_EQ(Checkpoint::open(path("original")).tensor_count(), dit_manifest(c, Layout::Original).size());
  const DitForwardArgs args = make_case(c, 5, 6, 12, {0.3f, 0.999f}, 32, true);
  auto a = load_dir(*be, path("diffusers"));
  auto b = load_dir(*be, path("original"));
  EXPECT_EQ(b->checkpoint_layout(), Layout::Original);
  const DitOutput oa = a->forward(args), ob = b->forward(args);
  EXPECT_TRUE(bit_equal(oa.sample, ob.sample));
  EXPECT_TRUE(bit_equal(oa.audio_sample, ob.audio_sample));
  // Resident AdaLN weights give the same bits as streamed ones.
  const DitOutput oc = load_dir(*be, path("original"), DitOptions{.keep_adaln_weights = true})->forward(args);
  EXPECT_TRUE(bit_equal(oa.sample, oc.sample));
  EXPECT_TRUE(bit_equal(oa.audio_sample, oc.audio_sample));
}

TEST_F(DitTest, LoaderRejectsMismatchedCheckpoints) {
  auto be = make_cpu_backend();
  const DitConfig c = config_a();
  write_diffusers_model(path("m"), c, 41, DType::F32);
  // A config whose hidden size disagrees with the weights: the config's loader names the key and what the weights
  // hold (io/weights_fit.h).
  json j = diffusers_config_json(c);
  j["hidden_size"] = 20;
  write_json(path("m/config.json"), j);
  try {
    load_dir(*be, path("m"));
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size is 20 but the weights hold 24"), std::string::npos) << e.what();
  }
  // An original-layout config over diffusers-layout weights.
  write_json(path("m/config.json"), original_config_json(c));
  try {
    load_dir(*be, path("m"));
    FAIL() << "expected a layout error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("follow the diffusers layout"), std::string::npos) << e.what();
  }
}

TEST_F(DitTest, ForwardEqualsBeginRequestPlusStepAndTablesAreCached) {
  auto be = make_cpu_backend();
  const DitConfig c = config_b();
  write_diffusers_model(path("m"), c, 51, DType::F32);
  auto dit = load_dir(*be, path("m"));
  const DitForwardArgs args = make_case(c, 6, 8, 12, {0.3f, 0.9f}, 52, true);
  const DitLayout layout{args.token_tags, args.position_ids, args.video_indices, args.audio_indices, args.text_indices};

  const DitOutput full = dit->forward(args);
  EXPECT_EQ(dit->adaln_table_builds(), 1);
  EXPECT_THROW(dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices), Error);  // ended

  // Same timestep list: the tables come from the cache.
  dit->begin_request(layout, args.encoder_hidden_states, args.timestep);
  EXPECT_EQ(dit->adaln_table_builds(), 1);
  const DitOutput s1 = dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices);
  const DitOutput s2 = dit->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices);
  EXPECT_TRUE(bit_equal(full.sample, s1.sample));
  EXPECT_TRUE(bit_equal(full.audio_sample, s1.audio_sample));
  EXPECT_TRUE(bit_equal(s1.sample, s2.sample));  // a step leaves the request state as it found it

  // A request's global timestep list: steps index it. {0.1, 0.3, 0.9} with indices shifted by one is the same
  // forward as {0.3, 0.9} (each timestep's table row is computed independently of the others).
  dit->begin_request(layout, args.encoder_hidden_states, {0.1f, 0.3f, 0.9f});
  EXPECT_EQ(dit->adaln_table_builds(), 2);
  std::vector<int64_t> shifted = args.timestep_indices;
  for (int64_t& t : shifted) ++t;
  const DitOutput s3 = dit->step(args.hidden_states, args.audio_hidden_states, shifted);
  EXPECT_TRUE(bit_equal(full.sample, s3.sample));
  EXPECT_TRUE(bit_equal(full.audio_sample, s3.audio_sample));
  // A different row → timestep assignment really changes the result.
  std::vector<int64_t> first(shifted.size(), 0);
  EXPECT_FALSE(bit_equal(full.sample, dit->step(args.hidden_states, args.audio_hidden_states, first).sample));
  // ... and back: the step's cached row indices follow the indices passed.
  EXPECT_TRUE(bit_equal(full.sample, dit->step(args.hidden_states, args.audio_hidden_states, shifted).sample));
  dit->end_request();
  try {
    dit->step(args.hidden_states, args.audio_hidden_states, shifted);
    FAIL() << "step without a request";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no request in progress"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Argument validation: each rule, its message, and no work done before it.

namespace {

struct Mutation {
  const char* what;
  std::function<void(DitForwardArgs&)> apply;
  const char* message;  // a substring of the expected error
};

// config_a, 4 text + 6 audio + 8 video rows (L = 18), two timesteps, contiguous layout.
std::vector<Mutation> mutations() {
  return {
      {"hidden_states width", [](DitForwardArgs& a) { a.hidden_states = Tensor::zeros({8, 12}, DType::F32); },
       "hidden_states must be [8, 16] (one row per entry of video_indices, patch_dim = in_channels x "
       "prod(patch_size)), got F32[8, 12]"},
      {"audio_hidden_states rows", [](DitForwardArgs& a) { a.audio_hidden_states = Tensor::zeros({5, 6}, DType::F32); },
       "audio_hidden_states must be [6, 6]"},
      {"encoder_hidden_states width",
       [](DitForwardArgs& a) { a.encoder_hidden_states = Tensor::zeros({4, 9}, DType::F32); },
       "encoder_hidden_states must be [4, 8] (one row per entry of text_indices, text_dim)"},
      {"integer hidden_states", [](DitForwardArgs& a) { a.hidden_states = Tensor::zeros({8, 16}, DType::I32); },
       "hidden_states must be a float tensor"},
      {"no timestep", [](DitForwardArgs& a) { a.timestep.clear(); }, "timestep must hold at least one value"},
      {"nan timestep", [](DitForwardArgs& a) { a.timestep[1] = NAN; }, "timestep[1] = nan is not finite"},
      {"timestep_indices length", [](DitForwardArgs& a) { a.timestep_indices.pop_back(); },
       "timestep_indices must have one entry per row of the sequence (L = 18)"},
      {"timestep_indices range", [](DitForwardArgs& a) { a.timestep_indices[3] = 2; },
       "timestep_indices[3] = 2 is out of range [0, 2) (timestep holds 2 values)"},
      {"token_tags value", [](DitForwardArgs& a) { a.token_tags[1] = 3; },
       "token_tags[1] = 3 is not a modality tag (0 video, 1 text, 2 audio)"},
      {"token_tags length", [](DitForwardArgs& a) { a.token_tags.push_back(0); },
       "token_tags must have one entry per row of the sequence (L = 18 from position_ids), got 19"},
      {"position_ids shape", [](DitForwardArgs& a) { a.position_ids = Tensor::zeros({18, 2}, DType::F64); },
       "position_ids must be an [L, 3] tensor"},
      {"position_ids dtype", [](DitForwardArgs& a) { a.position_ids = Tensor::zeros({18, 3}, DType::I64); },
       "position_ids must be a float tensor"},
      {"position_ids inf", [](DitForwardArgs& a) { a.position_ids.ptr<double>()[7] = INFINITY; },
       "position_ids[2, 1] = inf is not finite"},
      {"video index past the end", [](DitForwardArgs& a) { a.video_indices[0] = 18; },
       "video_indices[0] = 18 is out of range [0, 18)"},
      {"negative text index", [](DitForwardArgs& a) { a.text_indices[0] = -1; },
       "text_indices[0] = -1 is out of range [0, 18)"},
      {"overlapping index sets", [](DitForwardArgs& a) { a.audio_indices[2] = a.text_indices[1]; },
       "audio_indices[2] and text_indices[1] both name row 1; video_indices, audio_indices and text_indices must "
       "partition [0, 18)"},
      {"repeated video index", [](DitForwardArgs& a) { a.video_indices[5] = a.video_indices[4]; },
       "video_indices[4] and video_indices[5] both name row 14"},
      {"a row in no index set",
       [](DitForwardArgs& a) {
         a.video_indices.pop_back();
         a.hidden_states = Tensor::zeros({7, 16}, DType::F32);
       },
       "row 17 of the sequence is in none of video_indices, audio_indices, text_indices"},
  };
}

}  // namespace

TEST_F(DitTest, ValidationNamesTheTensorAndTheRuleBeforeAnyWork) {
  auto be = make_cpu_backend();
  const DitConfig c = config_a();
  write_diffusers_model(path("m"), c, 61, DType::F32);
  auto dit = load_dir(*be, path("m"));
  const DitForwardArgs good = make_case(c, 4, 6, 8, {0.5f, 0.f}, 62, false);
  EXPECT_NO_THROW(validate_dit_forward_args(c, good));
  for (const Mutation& m : mutations()) {
    DitForwardArgs bad = good;
    bad.position_ids = good.position_ids.clone();
    m.apply(bad);
    try {
      dit->forward(bad);
      ADD_FAILURE() << m.what << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(m.message), std::string::npos) << m.what << ": " << e.what();
    }
  }
  EXPECT_EQ(dit->adaln_table_builds(), 0);  // nothing was computed for any of them
}

// ---------------------------------------------------------------------------------------------------------------
// `h3 tool dit`.

namespace {

// The case file of the tool contract: the reference forward's argument names, batch axis 1, i64 indices.
std::vector<NamedTensor> case_tensors(const DitForwardArgs& a) {
  auto batch = [](const Tensor& t) { return t.reshape({1, t.dim(0), t.dim(1)}); };
  auto i64 = [](const std::vector<int64_t>& v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I64);
    std::copy(v.begin(), v.end(), t.ptr<int64_t>());
    return t;
  };
  return {{"hidden_states", batch(a.hidden_states)},
          {"audio_hidden_states", batch(a.audio_hidden_states)},
          {"encoder_hidden_states", batch(a.encoder_hidden_states)},
          {"timestep", Tensor::from_f32({static_cast<int64_t>(a.timestep.size())}, a.timestep)},
          {"timestep_indices", i64(a.timestep_indices)},
          {"token_tags", i64(a.token_tags)},
          {"position_ids", a.position_ids},
          {"video_indices", i64(a.video_indices)},
          {"audio_indices", i64(a.audio_indices)},
          {"text_indices", i64(a.text_indices)}};
}

void replace(std::vector<NamedTensor>& tensors, const std::string& name, const Tensor& t) {
  for (NamedTensor& nt : tensors)
    if (nt.name == name) nt.tensor = t;
}

struct ToolRun {
  int rc;
  std::string err;
};

ToolRun run_tool(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"dit"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : all) argv.push_back(s.data());
  ::testing::internal::CaptureStderr();
  const int rc = tool_dit(static_cast<int>(argv.size()), argv.data());
  return {rc, ::testing::internal::GetCapturedStderr()};
}

}  // namespace

TEST_F(DitTest, ToolWritesTheForwardOutputs) {
  auto be = make_cpu_backend();
  const DitConfig c = config_a();
  write_diffusers_model(path("m"), c, 71, DType::F32);
  const DitForwardArgs args = make_case(c, 4, 6, 8, {0.5f, 0.f}, 72, true);
  write_safetensors(path("case.safetensors"), case_tensors(args));
  const ToolRun r = run_tool({"--transformer", path("m"), "--case", path("case.safetensors"), "--out",
                              path("out.safetensors"), "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("forward"), std::string::npos) << r.err;
  const auto out = SafetensorsFile::open(path("out.safetensors"));
  const Tensor sample = out->tensor("sample"), audio = out->tensor("audio_sample");
  EXPECT_EQ(sample.str(), "F32[1, 8, 16]");
  EXPECT_EQ(audio.str(), "F32[1, 6, 6]");
  const DitOutput ref = load_dir(*be, path("m"))->forward(args);
  EXPECT_TRUE(bit_equal(sample.reshape({8, 16}), ref.sample));
  EXPECT_TRUE(bit_equal(audio.reshape({6, 6}), ref.audio_sample));

  // BF16 / F64 float inputs and I32 index tensors are accepted; the model sees the same values.
  DitForwardArgs conv = args;
  conv.hidden_states = args.hidden_states.to(DType::BF16);
  conv.encoder_hidden_states = args.encoder_hidden_states.to(DType::F64);
  std::vector<NamedTensor> tensors = case_tensors(conv);
  replace(tensors, "video_indices", Tensor(tensors[7].tensor.to(DType::I32)));
  write_safetensors(path("case2.safetensors"), tensors);
  const ToolRun r2 = run_tool({"--transformer", path("m"), "--case", path("case2.safetensors"), "--out",
                               path("out2.safetensors"), "--device", "cpu"});
  ASSERT_EQ(r2.rc, 0) << r2.err;
  const DitOutput ref2 = load_dir(*be, path("m"))->forward(conv);
  EXPECT_TRUE(bit_equal(SafetensorsFile::open(path("out2.safetensors"))->tensor("sample").reshape({8, 16}),
                        ref2.sample));
}

TEST_F(DitTest, ToolRejectsMalformedCasesWithoutWritingOutput) {
  const DitConfig c = config_a();
  write_diffusers_model(path("m"), c, 81, DType::F32);
  const DitForwardArgs args = make_case(c, 4, 6, 8, {0.5f, 0.f}, 82, false);
  struct Bad {
    const char* what;
    std::function<void(std::vector<NamedTensor>&)> edit;
    const char* message;
  };
  auto i64 = [](std::vector<int64_t> v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I64);
    std::copy(v.begin(), v.end(), t.ptr<int64_t>());
    return t;
  };
  std::vector<int64_t> overlapping = args.audio_indices;
  overlapping[0] = args.text_indices[2];
  std::vector<int64_t> bad_tags = args.token_tags;
  bad_tags[5] = 7;
  std::vector<int64_t> far_video = args.video_indices;
  far_video[3] = 100;
  const Bad cases[] = {
      {"missing tensor", [](auto& t) { t.erase(t.begin() + 5); }, "tensor 'token_tags' is missing"},
      {"wrong shape", [](auto& t) { replace(t, "hidden_states", Tensor::zeros({1, 8, 15}, DType::F32)); },
       "hidden_states must be [8, 16]"},
      {"no batch axis", [](auto& t) { replace(t, "audio_hidden_states", Tensor::zeros({6, 6}, DType::F32)); },
       "tensor 'audio_hidden_states' must be (1, rows, channels) (batch 1), got F32[6, 6]"},
      {"wrong dtype", [](auto& t) { replace(t, "timestep_indices", Tensor::zeros({18}, DType::F32)); },
       "tensor 'timestep_indices' must be I64 or I32, got F32[18]"},
      {"float16 input", [](auto& t) { replace(t, "hidden_states", Tensor::zeros({1, 8, 16}, DType::F16)); },
       "tensor 'hidden_states' must be F32, F64 or BF16"},
      {"out-of-range index", [&](auto& t) { replace(t, "video_indices", i64(far_video)); },
       "video_indices[3] = 100 is out of range [0, 18)"},
      {"overlapping index sets", [&](auto& t) { replace(t, "audio_indices", i64(overlapping)); },
       "audio_indices[0] and text_indices[2] both name row 2"},
      {"bad tag", [&](auto& t) { replace(t, "token_tags", i64(bad_tags)); }, "token_tags[5] = 7 is not a modality tag"},
  };
  for (const Bad& b : cases) {
    std::vector<NamedTensor> tensors = case_tensors(args);
    b.edit(tensors);
    write_safetensors(path("bad.safetensors"), tensors);
    const ToolRun r = run_tool({"--transformer", path("m"), "--case", path("bad.safetensors"), "--out",
                                path("out.safetensors"), "--device", "cpu"});
    EXPECT_EQ(r.rc, 1) << b.what;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << b.what << ": " << r.err;
    EXPECT_NE(r.err.find("bad.safetensors"), std::string::npos) << b.what << ": " << r.err;
    EXPECT_FALSE(fs::exists(path("out.safetensors"))) << b.what;
  }
  // Usage errors: exit 2.
  EXPECT_EQ(run_tool({"--transformer", path("m"), "--out", path("out.safetensors")}).rc, 2);
  EXPECT_EQ(run_tool({"--transformer", path("m"), "--case", path("bad.safetensors"), "--out", path("o"), "--device",
                      "tpu"})
                .rc,
            2);
  // --precision: an unknown word is a usage error naming the values; fp8 on the CPU backend is refused with the
  // reason before the forward, and nothing is written.
  const ToolRun word = run_tool({"--transformer", path("m"), "--case", path("bad.safetensors"), "--out", path("o"),
                                 "--precision", "fp16"});
  EXPECT_EQ(word.rc, 2);
  EXPECT_NE(word.err.find("--precision must be bf16 or fp8, got 'fp16'"), std::string::npos) << word.err;
  write_safetensors(path("good.safetensors"), case_tensors(args));
  const ToolRun cpu_fp8 = run_tool({"--transformer", path("m"), "--case", path("good.safetensors"), "--out",
                                    path("out.safetensors"), "--device", "cpu", "--precision", "fp8"});
  EXPECT_EQ(cpu_fp8.rc, 1);
  EXPECT_NE(cpu_fp8.err.find("--precision fp8 needs the CUDA backend"), std::string::npos) << cpu_fp8.err;
  EXPECT_EQ(cpu_fp8.err.find("forward"), std::string::npos) << cpu_fp8.err;  // refused before it
  EXPECT_FALSE(fs::exists(path("out.safetensors")));
  // A folder that is not a transformer.
  const ToolRun r = run_tool({"--transformer", path("nothing"), "--case", path("bad.safetensors"), "--out",
                              path("out.safetensors")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no config.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out.safetensors")));
}

// ---------------------------------------------------------------------------------------------------------------
// The reference fixtures (tools/reference/fx_dit.py: the diffusers forward of small random models, in float64,
// float32 and, for the bf16 case, bfloat16 with the release's mixed precision), run through `h3 tool dit`.

namespace {
const std::string kFixtureRoot = std::string(H3_SOURCE_DIR) + "/tests/fixtures/dit/";
}  // namespace

TEST_F(DitTest, FixturesMatchTheFloat64Reference) {
  const char* cases[] = {"unit_test", "one_timestep", "three_timesteps_permuted", "bf16"};
  for (const char* name : cases) {
    const std::string dir = kFixtureRoot + name;
    ASSERT_TRUE(fs::exists(dir + "/expected.safetensors"))
        << "missing fixture " << dir << " (made by tools/reference/fx_dit.py, branch ref-fixtures)";
    const std::string out = path(std::string(name) + ".safetensors");
    const ToolRun r = run_tool({"--transformer", dir + "/transformer", "--case", dir + "/case.safetensors", "--out",
                                out, "--device", "cpu"});
    ASSERT_EQ(r.rc, 0) << name << ": " << r.err;
    const auto ours = SafetensorsFile::open(out);
    const auto expected = SafetensorsFile::open(dir + "/expected.safetensors");
    for (const char* head : {"sample", "audio_sample"}) {
      const Tensor got = ours->tensor(head);
      // Float32 weights: our float32 arithmetic vs float64, 1e-5 (the acceptance bound; measured ~1e-7).
      // bf16 case: the reference's f64 output is of the same bf16-valued weights (upcast exactly), and the CPU
      // path computes in float32 on those same values, so the distance is again only float32 rounding: 1e-5.
      const double vs64 = rel_l2(got, expected->tensor(std::string(head) + "_f64"));
      EXPECT_LE(vs64, 1e-5) << name << " " << head;
      // The reference's own float32 forward: both are float32 evaluations of the same formula, differing only in
      // summation order (~1e-7).
      const double vs32 = rel_l2(got, expected->tensor(std::string(head) + "_f32"));
      EXPECT_LE(vs32, 1e-5) << name << " " << head;
      std::printf("  %s %s: rel_l2 vs reference f64 %.3e, vs reference f32 %.3e", name, head, vs64, vs32);
      if (expected->find(std::string(head) + "_bf16")) {
        // The release-precision reference rounds activations to bf16 (unit roundoff 2^-9 ≈ 2e-3) at every op of
        // the blocks; the f32 path sits a few 1e-3 away from it (measured 5.0e-3 video, 3.3e-3 audio, the same as
        // the reference's own f64-vs-bf16 distance). 5e-2 only guards against a gross mismatch (wrong weights,
        // wrong tables), which would be O(1).
        const double vs16 = rel_l2(got, expected->tensor(std::string(head) + "_bf16"));
        EXPECT_LE(vs16, 5e-2) << name << " " << head;
        std::printf(", vs reference bf16 %.3e", vs16);
      }
      std::printf("\n");
    }
  }
}
