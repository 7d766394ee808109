// The DiT's speed controls on the CUDA backend against the CPU backend (the f32 oracle): a tiny forward with each
// control — --layers (the same kept blocks: the gates the test sets are far apart, so bf16 tables rank them as f32
// ones do), --token-reduction, --core-reuse over refresh and held steps — and the defaults given explicitly, which
// must be the default forward's bits. Skips cleanly where the build has no CUDA backend or the machine no GPU.
//
// Tolerance: that of DitCuda.EveryFixtureMatchesTheCpuBackend (bf16 storage of activations, weights and the residual
// stream): relative L2 3e-2 and cosine 0.999.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "models/dit/dit.h"

using namespace h3;
using namespace h3::dit_test;

namespace {

class DitSpeedCudaTest : public DitTest {
 protected:
  void SetUp() override {
    if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device (or a build without the CUDA backend)";
    DitTest::SetUp();
  }
};

void expect_close(const DitOutput& gpu, const DitOutput& cpu, const std::string& what) {
  for (auto [name, g, c] : {std::tuple{"video", &gpu.sample, &cpu.sample}, {"audio", &gpu.audio_sample, &cpu.audio_sample}}) {
    const double d = rel_l2(*g, *c), cs = cosine(*g, *c);
    std::printf("[ dit speed cuda ] %s %s: rel L2 %.3g, cosine %.6f\n", what.c_str(), name, d, cs);
    EXPECT_LE(d, 3e-2) << what << " " << name;
    EXPECT_GE(cs, 0.999) << what << " " << name;
  }
}

}  // namespace

TEST_F(DitSpeedCudaTest, EveryControlMatchesTheCpuBackend) {
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  DitConfig c = config_b();
  c.num_layers = 6;
  write_diffusers_model(path("m"), c, 101, DType::BF16);
  control_gates(path("m"), c, {0.2f, 0.2f, 0.02f, 0.3f, 0.4f, 0.2f});  // --layers 5 drops block 2
  const Component comp = dit_component_from_dir(path("m"));
  auto dit_cpu = Dit::load(*cpu, comp);
  auto dit_gpu = Dit::load(*gpu, comp);
  const DitForwardArgs args = make_case(c, 5, 6, 12, {0.3f, 0.8f}, 102, true);
  DitLayout layout{args.token_tags, args.position_ids, args.video_indices, args.audio_indices, args.text_indices};
  layout.target_video_grid = {2, 2, 3};

  const DitOutput exact_gpu = dit_gpu->forward(args);
  DitRequestOptions defaults;
  defaults.layers = 6;
  defaults.core_reuse = 1;
  dit_gpu->begin_request(layout, args.encoder_hidden_states, args.timestep, defaults);
  const DitOutput explicit_gpu = dit_gpu->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices);
  EXPECT_TRUE(bit_equal(exact_gpu.sample, explicit_gpu.sample) &&
              bit_equal(exact_gpu.audio_sample, explicit_gpu.audio_sample));

  DitRequestOptions layers, reduce, reuse;
  layers.layers = 5;
  reduce.token_reduction = true;
  reuse.core_reuse = 2;
  reuse.passes = 3;
  const std::vector<int64_t> all{0, 1, 2, 3, 4, 5}, thinned{0, 1, 3, 4, 5};
  for (const auto& [what, o, resident] : {std::tuple{"layers 5", layers, thinned}, {"token reduction", reduce, all},
                                          {"core reuse 2", reuse, all}}) {
    dit_cpu->begin_request(layout, args.encoder_hidden_states, args.timestep, o);
    dit_gpu->begin_request(layout, args.encoder_hidden_states, args.timestep, o);
    EXPECT_EQ(dit_gpu->resident_blocks(), resident) << what;
    EXPECT_EQ(dit_cpu->resident_blocks(), resident) << what;
    // Three steps: for core reuse a refresh, a held step, and the last pass's refresh.
    for (int64_t pass = 0; pass < 3; ++pass) {
      DitForwardArgs a = args;
      for (int64_t& t : a.timestep_indices) t = (t + pass) % 2;
      expect_close(dit_gpu->step(a.hidden_states, a.audio_hidden_states, a.timestep_indices),
                   dit_cpu->step(a.hidden_states, a.audio_hidden_states, a.timestep_indices),
                   std::string(what) + ", step " + std::to_string(pass));
    }
  }
}
