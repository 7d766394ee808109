// Block streaming (models/block_streamer.h) on the CPU backend, whose copy queue runs synchronously through the same
// ring code: every source and ring size gives the resident transformer's output bit for bit (forward, a multi-step
// request, --layers, a change of blocks between requests, both checkpoint layouts and a checkpoint dtype that is
// converted on the way), only the run blocks are read, the weights held fall to the ring's slots, and the
// conditioner's decoder layers stream to the same hidden states.
#include <gtest/gtest.h>

#include <limits>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "io/config.h"
#include "models/block_streamer.h"
#include "models/dit/dit.h"
#include "models/dit/dit_random.h"
#include "models/qwen3vl/text_model.h"
#include "test_source_dir.h"

using namespace h3;
using namespace h3::dit_test;

namespace {

BlockStreaming streaming(BlockStreaming::Source source, int64_t slots, bool direct_io = false, int64_t threads = 2) {
  BlockStreaming s;
  s.source = source;
  s.slots = slots;
  s.direct_io = direct_io;
  s.reader_threads = threads;
  return s;
}

std::string describe(const BlockStreaming& s) {
  return cat(s.source == BlockStreaming::Source::Disk ? "disk" : "pinned host", ", ", s.slots, " slots",
             s.direct_io ? ", O_DIRECT" : "", ", ", s.reader_threads, " readers");
}

// Every source and ring size the tests run (slots 2 and 3; Disk through the page cache and O_DIRECT, one reader).
std::vector<BlockStreaming> every_streaming() {
  using S = BlockStreaming::Source;
  return {streaming(S::PinnedHost, 2), streaming(S::PinnedHost, 3), streaming(S::Disk, 2), streaming(S::Disk, 3),
          streaming(S::Disk, 2, true), streaming(S::Disk, 3, true, 1)};
}

// The bytes of one block's four streamed matrices in dtype `dt`.
uint64_t block_matrix_bytes(const DitConfig& c, DType dt) {
  const uint64_t D = c.hidden_size, inner = c.inner_dim(), F = c.ffn_dim;
  return (3 * inner * D + D * inner + 2 * F * D + D * F) * dtype_size(dt);
}

// Ten blocks (--layers 7 drops three).
DitConfig blocks_config_for_streaming() {
  DitConfig c = config_b();
  c.num_layers = 10;
  return c;
}

class DitStreamingTest : public DitTest {
 protected:
  // One forward of every streaming configuration against the resident transformer of the folder `dir`.
  void expect_forward_identical(const std::string& dir, const DitConfig& c) {
    auto be = make_cpu_backend();
    const DitForwardArgs args = make_case(c, 5, 6, 12, {0.3f, 0.8f}, 71, true);
    auto resident = Dit::load(*be, dit_component_from_dir(dir));
    const DitOutput want = resident->forward(args);
    const bool direct = direct_io_supported(dir);
    for (BlockStreaming s : every_streaming()) {
      s.direct_io = s.direct_io && direct;
      SCOPED_TRACE(describe(s));
      DitOptions o;
      o.streaming = s;
      auto streamed = Dit::load(*be, dit_component_from_dir(dir), o);
      EXPECT_TRUE(same_output(want, streamed->forward(args)));
      EXPECT_TRUE(streamed->resident_blocks().empty());
      const BlockStreamingStats st = *streamed->streaming_stats();
      EXPECT_EQ(st.passes, 1);
      EXPECT_EQ(st.blocks, c.num_layers);
      EXPECT_EQ(st.device_bytes % static_cast<uint64_t>(s.slots), 0u);
      EXPECT_GE(st.device_bytes, static_cast<uint64_t>(s.slots) * block_matrix_bytes(c, be->activation_dtype()));
      if (s.source == BlockStreaming::Source::Disk) {
        EXPECT_GE(st.read_bytes, st.bytes);
        // The staging ring only: `slots` buffers of one block's checkpoint tensors (at most 6 of them), each
        // region rounded to 4096 bytes (plus 4096 before it under O_DIRECT).
        EXPECT_LE(st.host_bytes, static_cast<uint64_t>(s.slots) * (block_matrix_bytes(c, DType::F32) + 6 * 2 * 4096));
      } else {
        EXPECT_EQ(st.host_bytes, static_cast<uint64_t>(c.num_layers) * block_matrix_bytes(c, DType::F32));
        EXPECT_EQ(st.bytes, st.host_bytes);  // each block's copy, once
      }
    }
  }
};

}  // namespace

TEST_F(DitStreamingTest, ForwardIsTheResidentForwardInEveryConfiguration) {
  const DitConfig c = config_b();
  write_diffusers_model(path("m"), c, 70, DType::F32);
  expect_forward_identical(path("m"), c);
}

// A bf16 checkpoint on the f32 CPU backend: the Disk source converts what it reads as upload() converts.
TEST_F(DitStreamingTest, AConvertedCheckpointDtypeStreamsTheResidentBits) {
  const DitConfig c = config_b();
  write_diffusers_model(path("m"), c, 72, DType::BF16);
  expect_forward_identical(path("m"), c);
}

// The original layout: per-head interleaved qkv_proj (de-interleaved as row pieces) over two shards.
TEST_F(DitStreamingTest, TheOriginalLayoutStreamsItsDeinterleavedQkv) {
  DitConfig c = config_a();
  c.num_layers = 4;
  write_diffusers_model(path("d"), c, 73, DType::F32);
  write_original_from_diffusers(path("d"), path("o"), c);
  expect_forward_identical(path("o"), c);
}

// A request of several steps (each its own per-row timesteps), then requests with --layers and back: every step the
// resident transformer's, the ring carried from pass to pass and restarted when the blocks change.
TEST_F(DitStreamingTest, MultiStepRequestsWithLayersMatchTheResidentOnes) {
  auto be = make_cpu_backend();
  DitConfig c = config_b();
  c.num_layers = 7;
  write_diffusers_model(path("m"), c, 74, DType::F32);
  const DitForwardArgs args = make_case(c, 4, 6, 12, {0.9f, 0.6f, 0.3f}, 75, true);
  std::vector<std::vector<int64_t>> per_step;
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<int64_t> idx = args.timestep_indices;
    for (int64_t& i : idx) i = (i + s) % 3;
    per_step.push_back(idx);
  }
  DitRequestOptions five;
  five.layers = 5;
  const std::vector<std::optional<DitRequestOptions>> requests = {std::nullopt, five, std::nullopt, five};

  auto run = [&](Dit& dit) {
    std::vector<DitOutput> outs;
    for (const auto& r : requests) {
      dit.begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, r.value_or(DitRequestOptions{}));
      for (const auto& idx : per_step) outs.push_back(dit.step(args.hidden_states, args.audio_hidden_states, idx));
      dit.end_request();
    }
    return outs;
  };
  auto resident = Dit::load(*be, dit_component_from_dir(path("m")));
  const std::vector<DitOutput> want = run(*resident);
  EXPECT_GT(rel_l2(want[3].sample, want[0].sample), 1e-4);  // --layers changed the output
  const bool direct = direct_io_supported(path("m"));
  for (BlockStreaming s : every_streaming()) {
    s.direct_io = s.direct_io && direct;
    SCOPED_TRACE(describe(s));
    DitOptions o;
    o.streaming = s;
    auto streamed = Dit::load(*be, dit_component_from_dir(path("m")), o);
    const std::vector<DitOutput> got = run(*streamed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_output(want[i], got[i])) << "step " << i;
    const BlockStreamingStats st = *streamed->streaming_stats();
    EXPECT_EQ(st.passes, 12);
    EXPECT_EQ(st.blocks, 5);  // the last request's --layers 5
  }
}

// The weights held on the device: the non-block weights, the blocks' norms and the ring's `slots` block buffers —
// `slots` blocks' matrices (with each tensor's 256-byte alignment) instead of all of them.
TEST_F(DitStreamingTest, TheDeviceHoldsSlotsBlocks) {
  auto be = make_cpu_backend();
  DitConfig c = config_b();
  c.num_layers = 8;
  write_diffusers_model(path("m"), c, 76, DType::F32);
  const uint64_t all = Dit::load(*be, dit_component_from_dir(path("m")))->resident_weight_bytes();
  const uint64_t block = block_matrix_bytes(c, DType::F32);
  for (int64_t slots : {2, 3}) {
    DitOptions o;
    o.streaming = streaming(BlockStreaming::Source::Disk, slots);
    const uint64_t held = Dit::load(*be, dit_component_from_dir(path("m")), o)->resident_weight_bytes();
    const uint64_t without_blocks = all - c.num_layers * block;
    EXPECT_GE(held, without_blocks + slots * block);
    EXPECT_LE(held, without_blocks + slots * (block + 4 * 256));
    std::printf("  %lld slots: %llu of %llu weight bytes held\n", static_cast<long long>(slots),
                static_cast<unsigned long long>(held), static_cast<unsigned long long>(all));
  }
}

// --layers streams only the blocks a request runs: with NaN in the dropped blocks' matrices, Disk streaming never
// reads them and PinnedHost (its copies made only for DitOptions::blocks) never copies them; a later request that
// runs them gets them (a host copy made then), and its output shows it.
TEST_F(DitStreamingTest, OnlyTheRunBlocksAreStreamed) {
  auto be = make_cpu_backend();
  const DitConfig c = blocks_config_for_streaming();
  const std::vector<float> gates = {0.9f, 0.9f, 0.01f, 0.5f, 0.5f, 0.02f, 0.5f, 0.5f, 0.03f, 0.9f};
  write_diffusers_model(path("m"), c, 77, DType::F32);
  control_gates(path("m"), c, gates);
  write_diffusers_model(path("nan"), c, 77, DType::F32);
  control_gates(path("nan"), c, gates);
  rewrite_checkpoint(path("nan"), [&](const std::string& name, Tensor& t) {
    for (int64_t b : {2, 5, 8})
      if (name.rfind("transformer_blocks." + std::to_string(b) + ".", 0) == 0 && name.find("adaln") == std::string::npos &&
          name.find("norm") == std::string::npos)
        std::fill_n(t.ptr<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
  });
  const DitForwardArgs args = make_case(c, 4, 6, 12, {0.4f, 0.9f}, 78, false);
  DitRequestOptions seven;
  seven.layers = 7;
  auto clean = Dit::load(*be, dit_component_from_dir(path("m")));
  clean->begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, seven);
  const DitOutput want = clean->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices);
  for (BlockStreaming s : {streaming(BlockStreaming::Source::Disk, 2), streaming(BlockStreaming::Source::PinnedHost, 2)}) {
    SCOPED_TRACE(describe(s));
    DitOptions o;
    o.streaming = s;
    o.blocks = std::vector<int64_t>{0, 1, 3, 4, 6, 7, 9};
    auto poisoned = Dit::load(*be, dit_component_from_dir(path("nan")), o);
    if (s.source == BlockStreaming::Source::PinnedHost) {
      EXPECT_EQ(poisoned->streaming_stats()->host_bytes, 7 * block_matrix_bytes(c, DType::F32));
    }
    poisoned->begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, seven);
    EXPECT_TRUE(same_output(want, poisoned->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices)));
    poisoned->begin_request(layout_of(args), args.encoder_hidden_states, args.timestep);
    EXPECT_FALSE(std::isfinite(
        poisoned->step(args.hidden_states, args.audio_hidden_states, args.timestep_indices).sample.at(0)));
    if (s.source == BlockStreaming::Source::PinnedHost) {
      EXPECT_EQ(poisoned->streaming_stats()->host_bytes, 10 * block_matrix_bytes(c, DType::F32));
    }
  }
}

// A transformer made from weights in memory (the benchmarks' random one) streams from pinned host copies of them.
TEST_F(DitStreamingTest, WeightsInMemoryStreamFromPinnedHostCopies) {
  auto be = make_cpu_backend();
  DitConfig c = config_b();
  c.num_layers = 5;
  const DitForwardArgs args = make_case(c, 3, 4, 6, {0.5f, 0.1f}, 79, false);
  const DitOutput want = random_dit(*be, c)->forward(args);
  for (int64_t slots : {2, 3}) {
    auto dit = Dit::from_weights(*be, c, Layout::Diffusers, random_dit_weights(*be, c), {},
                                 streaming(BlockStreaming::Source::PinnedHost, slots));
    EXPECT_TRUE(same_output(want, dit->forward(args)));
    EXPECT_EQ(dit->streaming_stats()->blocks, 5);
  }
  try {
    Dit::from_weights(*be, c, Layout::Diffusers, random_dit_weights(*be, c), {},
                      streaming(BlockStreaming::Source::Disk, 2));
    FAIL() << "disk streaming without a checkpoint accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs the checkpoint file"), std::string::npos) << e.what();
  }
}

TEST_F(DitStreamingTest, OptionsOutsideTheirRangesAreRefusedBeforeLoading) {
  auto be = make_cpu_backend();
  write_diffusers_model(path("m"), config_a(), 80, DType::F32);
  for (auto [slots, threads, word] : {std::tuple{int64_t{1}, int64_t{2}, "at least 2 slots"},
                                      std::tuple{int64_t{2}, int64_t{0}, "reader threads must be 1 to 64"}}) {
    DitOptions o;
    o.streaming = streaming(BlockStreaming::Source::Disk, slots, false, threads);
    try {
      Dit::load(*be, dit_component_from_dir(path("m")), o);
      FAIL() << "accepted " << slots << " slots, " << threads << " threads";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  }
}
