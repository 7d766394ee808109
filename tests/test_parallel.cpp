// The DiT's Ulysses sequence parallelism (issue 21) on CPU ranks: the in-process collectives by their definitions,
// the shard and degree rules, and the transformer on 2 and 4 ranks against the one-rank forward. The CPU backend
// computes every output row from the same operands in the same order whatever rows share its GEMM (the dot products
// run over K in a fixed order per element) and every attention row of a head from the same keys, so a shard changes
// no arithmetic: the outputs are asserted equal bit for bit.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <stdexcept>

#include "dit_test_models.h"
#include "models/dit/dit_random.h"
#include "parallel/communicator.h"
#include "parallel/dit_group.h"
#include "parallel/rank_group.h"
#include "parallel/sequence_parallel.h"
#include "pipeline/dit_velocity.h"
#include "pipeline/layout.h"
#include "pipeline/sampler.h"

using namespace h3;
using namespace h3::dit_test;

namespace {

// Four heads (so that 2 and 4 ranks split them), 4 × 16 = 64 ≠ hidden 24, 12 of 16 channels rotated, three blocks.
DitConfig four_heads() {
  DitConfig c = config_a();
  c.num_attention_heads = 4;
  c.num_layers = 3;
  return c;
}

std::unique_ptr<Dit> same_weights(Backend& be, const DitConfig& c) {
  RandomDitOptions o;
  o.seed = 77;
  return random_dit(be, c, o);
}

// 5 text + 4 audio + 12 video rows, permuted, three timesteps: 21 rows, so neither 2 nor 4 ranks split it evenly.
DitForwardArgs odd_case(const DitConfig& c, uint32_t seed = 3) {
  return make_case(c, 5, 4, 12, {0.9f, 0.5f, 0.25f}, seed, true);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Tensor iota(int64_t n, float base) {
  Tensor t = Tensor::empty({n}, DType::F32);
  for (int64_t i = 0; i < n; ++i) t.ptr<float>()[i] = base + static_cast<float>(i);
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The rules

TEST(ParallelRules, ShardsAreContiguousAndDifferByAtMostOne) {
  EXPECT_EQ(shard_rows(21, 4), (std::vector<int64_t>{6, 5, 5, 5}));
  EXPECT_EQ(shard_rows(21, 2), (std::vector<int64_t>{11, 10}));
  EXPECT_EQ(shard_rows(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(shard_rows(3, 1), (std::vector<int64_t>{3}));
  EXPECT_EQ(chunk_offsets({6, 5, 5}), (std::vector<int64_t>{0, 6, 11, 16}));
}

TEST(ParallelRules, TheDegreeMustDivideTheHeads) {
  EXPECT_FALSE(sequence_parallel_problem("--gpus 8", 56, 8));
  EXPECT_FALSE(sequence_parallel_problem("--gpus 1", 56, 1));
  const auto problem = sequence_parallel_problem("--gpus 3", 56, 3);
  ASSERT_TRUE(problem);
  EXPECT_EQ(*problem, "--gpus 3: the transformer's 56 attention heads are split evenly across the GPUs, so the number "
                      "of GPUs must divide them and be at most 16: one of 1, 2, 4, 7, 8, 14");
  EXPECT_TRUE(sequence_parallel_problem("--gpus 0", 56, 0));
  EXPECT_TRUE(sequence_parallel_problem("--gpus 28", 56, 28));  // divides, but beyond the range
}

// ---------------------------------------------------------------------------------------------------------------
// The in-process collectives

TEST(ParallelCommunicator, AllToAllDeliversEveryChunkToItsRank) {
  // Rank r sends (r + 1)·(j + 1) elements to rank j, valued 100·r + 10·j + k.
  const int N = 3;
  std::unique_ptr<RankGroup> group = RankGroup::cpu(N);
  std::vector<Tensor> received(N);
  group->run([&](int r) {
    std::vector<int64_t> send_counts(N), recv_counts(N);
    for (int j = 0; j < N; ++j) {
      send_counts[j] = (r + 1) * (j + 1);
      recv_counts[j] = (j + 1) * (r + 1);
    }
    Tensor send = Tensor::empty({chunk_offsets(send_counts).back()}, DType::F32);
    const std::vector<int64_t> so = chunk_offsets(send_counts);
    for (int j = 0; j < N; ++j)
      for (int64_t k = 0; k < send_counts[j]; ++k) send.ptr<float>()[so[j] + k] = 100.f * r + 10.f * j + k;
    received[r] = Tensor::zeros({chunk_offsets(recv_counts).back()}, DType::F32);
    group->communicator(r).all_to_all(send, send_counts, received[r], recv_counts);
  });
  for (int r = 0; r < N; ++r) {
    int64_t at = 0;
    for (int j = 0; j < N; ++j)
      for (int64_t k = 0; k < (j + 1) * (r + 1); ++k, ++at)
        EXPECT_EQ(received[r].ptr<float>()[at], 100.f * j + 10.f * r + k) << r << " from " << j;
  }
}

TEST(ParallelCommunicator, AllGatherConcatenatesUnevenPartsInRankOrder) {
  const int N = 4;
  const std::vector<int64_t> counts = {3, 1, 0, 2};
  std::unique_ptr<RankGroup> group = RankGroup::cpu(N);
  std::vector<Tensor> out(N);
  group->run([&](int r) {
    out[r] = Tensor::zeros({6}, DType::F32);
    group->communicator(r).all_gather(iota(counts[r], 10.f * r), counts, out[r]);
  });
  const std::vector<float> want = {0, 1, 2, 10, 30, 31};
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out[r].ptr<float>()[i], want[i]) << r;
}

TEST(ParallelCommunicator, CountsThatDisagreeAreRefused) {
  std::unique_ptr<RankGroup> group = RankGroup::cpu(2);
  const std::string e = error_of([&] {
    group->run([&](int r) {
      Tensor send = iota(4, 0), recv = Tensor::zeros({4}, DType::F32);
      // Rank 0 sends 2 to rank 1, which expects 3.
      const std::vector<int64_t> sc = r == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 3};
      const std::vector<int64_t> rc = r == 0 ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{3, 1};
      group->communicator(r).all_to_all(send, sc, recv, rc);
    });
  });
  EXPECT_NE(e.find("sends 2 elements to rank 1, which expects 3"), std::string::npos) << e;
}

TEST(ParallelCommunicator, AFailedRankReleasesThePeersWaitingInACollective) {
  // Rank 1 fails before the barrier rank 0 waits in: run returns (it does not hang) with rank 1's error, and the
  // aborted group refuses later collectives.
  std::unique_ptr<RankGroup> group = RankGroup::cpu(2);
  const std::string e = error_of([&] {
    group->run([&](int r) {
      if (r == 1) fail("rank 1 broke");
      group->communicator(r).barrier();
    });
  });
  EXPECT_EQ(e, "rank 1 broke");
  EXPECT_EQ(error_of([&] { group->run([&](int r) { group->communicator(r).barrier(); }); }),
            "another rank of the sequence-parallel group failed");
}

// ---------------------------------------------------------------------------------------------------------------
// The DiT on several ranks

class ParallelDitTest : public ::testing::TestWithParam<int> {};

TEST_P(ParallelDitTest, ForwardEqualsOneRankBitForBit) {
  const DitConfig c = four_heads();
  const DitForwardArgs args = odd_case(c);
  std::unique_ptr<Backend> be = make_cpu_backend();
  const DitOutput want = same_weights(*be, c)->forward(args);

  std::unique_ptr<RankGroup> group = RankGroup::cpu(GetParam());
  ParallelDit dit(*group, [&](Backend& b, int) { return same_weights(b, c); });
  EXPECT_EQ(dit.ranks(), GetParam());
  const DitOutput got = dit.forward(args);
  ASSERT_EQ(got.sample.shape(), want.sample.shape());
  EXPECT_TRUE(same_output(got, want)) << "rel L2 video " << rel_l2(got.sample, want.sample) << ", audio "
                                      << rel_l2(got.audio_sample, want.audio_sample);
}

TEST_P(ParallelDitTest, StepsOfARequestEqualOneRankBitForBit) {
  // A request of three passes with core reuse every 2 (pass 1 adds the held residual of each rank's rows; pass 2,
  // the last, runs the core again), each pass its own per-row timesteps.
  const DitConfig c = four_heads();
  const DitForwardArgs args = odd_case(c, 9);
  DitRequestOptions options;
  options.core_reuse = 2;
  options.passes = 3;
  std::mt19937 g(4);
  std::vector<std::vector<int64_t>> indices(3, args.timestep_indices);
  for (auto& pass : indices) std::shuffle(pass.begin(), pass.end(), g);

  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<Dit> one = same_weights(*be, c);
  std::unique_ptr<RankGroup> group = RankGroup::cpu(GetParam());
  ParallelDit dit(*group, [&](Backend& b, int) { return same_weights(b, c); });
  one->begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, options);
  dit.begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, options);
  for (int64_t p = 0; p < 3; ++p) {
    const DitOutput want = one->step(args.hidden_states, args.audio_hidden_states, indices[p]);
    const DitOutput got = dit.step(args.hidden_states, args.audio_hidden_states, indices[p]);
    EXPECT_TRUE(same_output(got, want)) << "pass " << p;
  }
  dit.end_request();
}

TEST_P(ParallelDitTest, Fp8ForwardEqualsOneRankBitForBit) {
  // FP8 block products (the CPU's emulation; hidden 32 and ffn 48 so that they qualify): one rank's q|k|v product
  // reads the FP8 rows its modulation writes, a shard's quantizes its bf16 rows itself (qkv_reader) — the same bits.
  DitConfig c = four_heads();
  c.hidden_size = 32;
  c.ffn_dim = 48;
  const DitForwardArgs args = odd_case(c, 5);
  std::unique_ptr<Backend> be = make_cpu_backend();
  const DitOutput exact = same_weights(*be, c)->forward(args);
  for (const Fp8Scaling scaling : {Fp8Scaling::Channel, Fp8Scaling::Block}) {
    const auto fp8_weights = [&](Backend& b) {
      RandomDitOptions o;
      o.seed = 77;
      o.precision = {true, scaling};
      return random_dit(b, c, o);
    };
    const DitOutput want = fp8_weights(*be)->forward(args);
    EXPECT_FALSE(same_output(want, exact));  // the products really ran in FP8

    std::unique_ptr<RankGroup> group = RankGroup::cpu(GetParam());
    ParallelDit dit(*group, [&](Backend& b, int) { return fp8_weights(b); });
    const DitOutput got = dit.forward(args);
    EXPECT_TRUE(same_output(got, want)) << (scaling == Fp8Scaling::Channel ? "channel" : "block") << " scaling: rel L2 "
                                        << "video " << rel_l2(got.sample, want.sample) << ", audio "
                                        << rel_l2(got.audio_sample, want.audio_sample);
  }
}

INSTANTIATE_TEST_SUITE_P(ParallelRanks, ParallelDitTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "Ranks"; });

TEST(ParallelDitRules, ADegreeThatDoesNotDivideTheHeadsIsRefused) {
  const DitConfig c = four_heads();
  std::unique_ptr<RankGroup> group = RankGroup::cpu(3);
  EXPECT_EQ(error_of([&] { ParallelDit dit(*group, [&](Backend& b, int) { return same_weights(b, c); }); }),
            "3 GPUs: the transformer's 4 attention heads are split evenly across the GPUs, so the number of GPUs must "
            "divide them and be at most 16: one of 1, 2, 4");
}

TEST(ParallelDitRules, ControlsNotSplitYetAreRefusedBeforeTheRanksStartAndTheGroupStaysUsable) {
  const DitConfig c = four_heads();
  const DitForwardArgs args = odd_case(c);
  std::unique_ptr<RankGroup> group = RankGroup::cpu(2);
  ParallelDit dit(*group, [&](Backend& b, int) { return same_weights(b, c); });
  DitRequestOptions reduce;
  reduce.token_reduction = true;
  DitLayout layout = layout_of(args);
  layout.target_video_grid = {2, 2, 3};
  EXPECT_EQ(error_of([&] { dit.begin_request(layout, args.encoder_hidden_states, args.timestep, reduce); }),
            "the transformer on 2 GPUs does not support --token-reduction (its row pairs cross the shards) yet: run "
            "it on one GPU, or without it");
  std::unique_ptr<Backend> be = make_cpu_backend();
  EXPECT_TRUE(same_output(dit.forward(args), same_weights(*be, c)->forward(args)));
}

TEST(ParallelDitRules, FewerRowsThanRanksAreRefused) {
  const DitConfig c = four_heads();
  const DitForwardArgs args = make_case(c, 1, 1, 1, {0.5f}, 1, false);
  std::unique_ptr<RankGroup> group = RankGroup::cpu(4);
  ParallelDit dit(*group, [&](Backend& b, int) { return same_weights(b, c); });
  EXPECT_EQ(error_of([&] { dit.forward(args); }),
            "the transformer on 4 GPUs needs at least one packed row per GPU, got 3 rows");
}

TEST(ParallelDitRules, AGpuGroupNamesWhatIsMissing) {
  // Without CUDA devices (or NCCL) in the build or on the machine, a GPU group is one sentence, before anything
  // is made; a device listed twice is refused first.
  EXPECT_EQ(error_of([] { RankGroup::cuda({0, 0}); }),
            "--devices lists GPU 0 twice: each rank needs a GPU of its own (NCCL does not run two ranks on one GPU)");
  if (cuda_device_count() == 0) {
    EXPECT_EQ(error_of([] { RankGroup::cuda({0, 1}); }),
              "GPU 0 was asked for but this machine has 0 CUDA devices");
  }
  const std::string e = error_of([] { RankGroup::cuda({99}); });
  EXPECT_NE(e.find("GPU 99 was asked for but this machine has"), std::string::npos) << e;
}

// The sampler's adapter (pipeline/dit_velocity.h) over the group: a t2va layout as the pipeline packs it, three
// passes of the schedule, each pass's velocity bit for bit the one-rank transformer's through the same adapter.
TEST(ParallelDitSampler, TheVelocityModelOverTwoRanksEqualsOneRank) {
  const DitConfig c = four_heads();
  const LatentGeometry g = LatentGeometry::make(96, 32, 5, c.patch_size, c.in_channels, c.audio_in_channels);
  LayoutSpec spec;
  spec.text_tags = {1, 1, 0, 1};
  spec.target = g;
  const PackedLayout layout = build_layout(spec);
  auto [video, audio] = make_schedules(3);
  const TimestepPlan plan = TimestepPlan::make(layout, video, audio);
  std::mt19937 gen(91);
  const Tensor text = randn({4, c.text_dim}, gen);
  const Tensor video_rows = randn({g.video_rows(), c.patch_dim()}, gen);
  const Tensor audio_rows = randn({g.audio_rows(), c.audio_in_channels}, gen);
  DitRequestSettings settings;
  settings.video_timesteps = video.timesteps();

  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<Dit> one = same_weights(*be, c);
  std::unique_ptr<RankGroup> group = RankGroup::cpu(2);
  ParallelDit two(*group, [&](Backend& b, int) { return same_weights(b, c); });
  DitVelocityModel want(*one, settings), got(two, settings);
  want.begin_request(layout, text, plan.timesteps());
  got.begin_request(layout, text, plan.timesteps());
  for (int64_t pass = 0; pass < 3; ++pass) {
    const std::vector<int64_t> rows = plan.row_indices(layout, pass);
    const Velocity w = want.step(video_rows, audio_rows, rows), v = got.step(video_rows, audio_rows, rows);
    EXPECT_TRUE(bit_equal(v.video, w.video) && bit_equal(v.audio, w.audio)) << pass;
  }
  got.end_request();
  want.end_request();
}
