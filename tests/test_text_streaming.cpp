// The conditioner's decoder layers streamed (QwenTextModel::load's BlockStreaming) on the CPU backend: the reference
// fixture's text encoder gives the resident model's hidden states bit for bit from every source and ring size, and
// holds only the ring's layers on the device.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "io/config.h"
#include "models/qwen3vl/text_model.h"
#include "util/mapped_file.h"

using namespace h3;
using h3::dit_test::direct_io_supported;

namespace {

Component fixture_text_encoder() {
  const std::string dir = std::string(H3_SOURCE_DIR) + "/tests/fixtures/text_encoder/text_encoder";
  Component c;
  c.name = "text_encoder";
  c.present = true;
  c.dir = dir;
  c.weights = dir;
  c.config_files = {join_path(dir, "config.json")};
  return c;
}

}  // namespace

TEST(TextStreaming, StreamedLayersGiveTheResidentHiddenStates) {
  auto be = make_cpu_backend();
  const Component comp = fixture_text_encoder();
  auto resident = QwenTextModel::load(*be, comp);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 23; ++i) ids.push_back((i * 37 + 5) % static_cast<int32_t>(resident->config().text.vocab_size));
  const Tensor want = resident->encode(ids);
  using S = BlockStreaming::Source;
  for (auto [source, slots, direct] : {std::tuple{S::PinnedHost, 2, false}, std::tuple{S::PinnedHost, 3, false},
                                       std::tuple{S::Disk, 2, false}, std::tuple{S::Disk, 3, true}}) {
    SCOPED_TRACE(cat(source == S::Disk ? "disk" : "pinned host", ", ", slots, " slots", direct ? ", O_DIRECT" : ""));
    BlockStreaming s;
    s.source = source;
    s.slots = slots;
    s.direct_io = direct && direct_io_supported(comp.dir);
    auto streamed = QwenTextModel::load(*be, comp, s);
    for (int pass = 0; pass < 2; ++pass) {  // the second encode continues the ring the first one left
      const Tensor got = streamed->encode(ids);
      ASSERT_EQ(got.shape(), want.shape());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0) << "encode " << pass;
    }
    const BlockStreamingStats st = *streamed->streaming_stats();
    EXPECT_EQ(st.passes, 2);
    EXPECT_EQ(st.blocks, kConditionerLayers);
    const uint64_t per_layer = QwenTextModel::resident_bytes(resident->config(), DType::F32, 1);
    EXPECT_LT(streamed->device_weight_bytes(), resident->device_weight_bytes());
    EXPECT_LE(streamed->device_weight_bytes(), static_cast<uint64_t>(slots + 1) * per_layer + kConditionerLayers * 1024);
  }
}
