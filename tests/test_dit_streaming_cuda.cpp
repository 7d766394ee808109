// Block streaming on the CUDA backend (copies on the copy stream, events between the streams): a random-weight DiT
// streamed from pinned host copies and from its checkpoint file (page cache and O_DIRECT, bf16 as released and an
// f32 checkpoint converted on the device) gives the resident DiT's output bit for bit over a multi-step request with
// --layers, and prints what one pass copied, its H2D bandwidth and the share of the copy time hidden under compute.
// Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "models/block_streamer.h"
#include "models/dit/dit.h"
#include "models/dit/dit_random.h"

using namespace h3;
using namespace h3::dit_test;

namespace {

// Wide enough that a block's copy and compute take measurable time (a few MB per block), small enough for a test.
DitConfig streaming_config() {
  DitConfig c = config_b();
  c.num_attention_heads = 8;
  c.attention_head_dim = 64;
  c.hidden_size = 512;
  c.ffn_dim = 1536;
  c.num_layers = 10;
  return c;
}

void print_stats(const char* what, const BlockStreamingStats& s) {
  std::printf("[ streaming cuda ] %s: %lld blocks, %.1f MB copied in %.3f ms (%.1f GB/s), compute waited %.3f ms "
              "(overlap %.0f%%), pass %.3f ms, ring %.1f MB, host %.1f MB\n",
              what, static_cast<long long>(s.blocks), s.bytes / 1e6, s.copy_seconds * 1e3, s.copy_bandwidth() / 1e9,
              s.wait_seconds * 1e3, 100.0 * s.overlap(), s.pass_seconds * 1e3, s.device_bytes / 1e6,
              s.host_bytes / 1e6);
}

class DitStreamingCuda : public DitTest {};

}  // namespace

TEST_F(DitStreamingCuda, StreamedIsResidentBitForBit) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device (or a build without the CUDA backend)";
  auto be = make_cuda_backend();
  const DitConfig c = streaming_config();
  const DitForwardArgs args = make_case(c, 16, 24, 96, {0.9f, 0.5f, 0.2f}, 91, true);
  DitRequestOptions eight;
  eight.layers = 8;
  auto run = [&](Dit& dit) {
    std::vector<DitOutput> outs;
    for (const DitRequestOptions& o : {DitRequestOptions{}, eight}) {
      dit.begin_request(layout_of(args), args.encoder_hidden_states, args.timestep, o);
      for (int s = 0; s < 3; ++s) outs.push_back(dit.step(args.hidden_states, args.audio_hidden_states, args.timestep_indices));
      dit.end_request();
    }
    return outs;
  };
  using S = BlockStreaming::Source;
  for (DType dt : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::string dir = path(std::string("m_") + dtype_name(dt));
    write_diffusers_model(dir, c, 90, dt);
    const std::vector<DitOutput> want = run(*Dit::load(*be, dit_component_from_dir(dir)));
    const bool direct_ok = direct_io_supported(dir);
    for (auto [source, slots, direct] : {std::tuple{S::PinnedHost, 2, false}, std::tuple{S::PinnedHost, 3, false},
                                         std::tuple{S::Disk, 2, false}, std::tuple{S::Disk, 3, true}}) {
      const std::string what = cat(dtype_name(dt), " ", source == S::Disk ? "disk" : "pinned host", ", ", slots,
                                   " slots", direct ? ", O_DIRECT" : "");
      SCOPED_TRACE(what);
      DitOptions o;
      o.streaming = BlockStreaming{source, slots, 4, direct && direct_ok, nullptr};
      auto dit = Dit::load(*be, dit_component_from_dir(dir), o);
      const std::vector<DitOutput> got = run(*dit);
      for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_output(want[i], got[i])) << "step " << i;
      const BlockStreamingStats st = *dit->streaming_stats();
      EXPECT_EQ(st.blocks, 8);
      EXPECT_GT(st.bytes, 0u);
      EXPECT_GT(st.copy_seconds, 0.0);
      print_stats(what.c_str(), st);
    }
  }
}

// The benchmarks' transformer: random weights made on the device, moved to pinned host copies.
TEST_F(DitStreamingCuda, RandomWeightsStreamFromPinnedHost) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device (or a build without the CUDA backend)";
  auto be = make_cuda_backend();
  const DitConfig c = streaming_config();
  const DitForwardArgs args = make_case(c, 16, 24, 96, {0.5f, 0.1f}, 92, false);
  const DitOutput want = random_dit(*be, c)->forward(args);
  auto dit = Dit::from_weights(*be, c, Layout::Diffusers, random_dit_weights(*be, c), {},
                               BlockStreaming{BlockStreaming::Source::PinnedHost, 2, 1, false, nullptr});
  EXPECT_TRUE(same_output(want, dit->forward(args)));
  EXPECT_TRUE(same_output(want, dit->forward(args)));
  print_stats("random weights, pinned host, 2 slots", *dit->streaming_stats());
}
