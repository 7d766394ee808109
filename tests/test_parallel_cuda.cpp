// The DiT's Ulysses sequence parallelism (issue 21) on CUDA ranks over NCCL (parallel/rank_group.h): one rank on
// GPU 0 through the whole sharded path (the q|k|v gathers, NCCL's collectives, the attention on the shard's heads),
// and two ranks on two GPUs where the machine has them. Skips without a GPU, without NCCL in the build, or (the
// two-GPU case) with one GPU. Two ranks on one GPU are not possible: NCCL refuses a communicator with a device
// twice, and RankGroup::cuda refuses it first with a sentence (tested in test_parallel.cpp).
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "models/dit/dit_random.h"
#include "parallel/dit_group.h"
#include "parallel/nccl_communicator.h"
#include "parallel/rank_group.h"
#include "util/scoped_env.h"

using namespace h3;
using namespace h3::dit_test;

namespace {

// Four heads of 64 channels (the Hopper attention kernel's head_dim), hidden 96, three blocks.
DitConfig four_heads() {
  DitConfig c = config_a();
  c.num_attention_heads = 4;
  c.attention_head_dim = 64;
  c.hidden_size = 96;
  c.ffn_dim = 128;
  c.num_layers = 3;
  return c;
}

std::unique_ptr<Dit> same_weights(Backend& be, const DitConfig& c) {
  RandomDitOptions o;
  o.seed = 77;
  return random_dit(be, c, o);
}

bool skip_reason(std::string& why) {
  if (!cuda_backend_available()) why = "no CUDA device (or a build without the CUDA backend)";
  else if (!nccl_available())
    why = "NCCL not found (nccl.h at build time, libnccl.so.2 at run time: run.sh puts its folder on LD_LIBRARY_PATH)";
  return !why.empty();
}

}  // namespace

TEST(ParallelCuda, OneRankThroughNcclEqualsTheUnshardedForwardBitForBit) {
  std::string why;
  if (skip_reason(why)) GTEST_SKIP() << why;
  // With one rank the sharded path runs the same kernels on the same shapes as the unsharded one, plus exact copies
  // (row gathers of bf16 rows, NCCL's self-exchange and broadcast): bit-equal outputs, once the GEMMs of both
  // backends use the same algorithm (the autotune times candidates, so two backends may choose differently).
  const ScopedEnv no_autotune("H3_GEMM_AUTOTUNE", "0");
  const DitConfig c = four_heads();
  const DitForwardArgs args = make_case(c, 7, 10, 48, {0.9f, 0.5f, 0.25f}, 3, true);
  std::unique_ptr<Backend> be = make_cuda_backend();
  const DitOutput want = same_weights(*be, c)->forward(args);
  std::unique_ptr<RankGroup> group = RankGroup::cuda({0});
  ParallelDit dit(*group, [&](Backend& b, int) { return same_weights(b, c); });
  const DitOutput got = dit.forward(args);
  std::printf("[ parallel cuda ] 1 rank on %s: rel L2 video %.3g, audio %.3g\n", group->description().c_str(),
              rel_l2(got.sample, want.sample), rel_l2(got.audio_sample, want.audio_sample));
  EXPECT_TRUE(same_output(got, want));
}

TEST(ParallelCuda, TwoGpusMatchOneWithinBf16Rounding) {
  std::string why;
  if (skip_reason(why)) GTEST_SKIP() << why;
  if (cuda_device_count() < 2) GTEST_SKIP() << "one GPU: two ranks need two (NCCL runs one rank per GPU)";
  // The ranks' GEMMs have half the rows, for which cuBLASLt may choose another algorithm: each product may round
  // differently to bf16 (2^-9 relative per element), through three blocks; rows and heads are otherwise computed
  // alike. 1e-2 relative L2 and a cosine above 0.9999 hold that, while a misrouted head or row is of order 1.
  const DitConfig c = four_heads();
  const DitForwardArgs args = make_case(c, 7, 10, 48, {0.9f, 0.5f, 0.25f}, 3, true);
  std::unique_ptr<Backend> be = make_cuda_backend();
  const DitOutput want = same_weights(*be, c)->forward(args);
  std::unique_ptr<RankGroup> group = RankGroup::cuda({0, 1});
  ParallelDit dit(*group, [&](Backend& b, int) { return same_weights(b, c); });
  const DitOutput got = dit.forward(args);
  for (auto [name, x, y] :
       {std::tuple{"video", &got.sample, &want.sample}, {"audio", &got.audio_sample, &want.audio_sample}}) {
    const double d = rel_l2(*x, *y), cs = cosine(*x, *y);
    std::printf("[ parallel cuda ] 2 ranks on %s, %s: rel L2 %.3g, cosine %.6f\n", group->description().c_str(), name,
                d, cs);
    EXPECT_LE(d, 1e-2) << name;
    EXPECT_GE(cs, 0.9999) << name;
  }
}
