// FastH3's sparse attention inside the DiT forward (models/dit/dit.h DitRequestOptions::sparse_attention,
// spec/fasth3.md): on tiny random models in the diffusers layout, with FastVideo's to_gate_compress weights added,
// - the sparse forward against the float64 reference forward (tests/dit_test_models.h) whose main blocks' attention
//   is an independent float64 VSA-H3: tile means, scores, the exempt top-k (ties to the lower tile), masked softmax
//   over the selected tiles' rows, and the gated pooled branch (§3–§6);
// - at sparsity 0 without gates, the sparse forward equals the dense one up to float32 summation order (FastVideo's
//   _build_block_mask returns an all-true mask when k_vid == V, and skips the scores without a gate);
// - an all-zero gate is FastVideo's "absent" (the branch skipped): bit-identical to no gate;
// - the dense path ignores the gates: bit-identical to the same checkpoint without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "models/dit/dit_fasth3.h"
#include "models/dit/dit_sparse_attention.h"

namespace h3 {
namespace {

using dit_test::add_gates;
using dit_test::DitTest;
using dit_test::Mat;
using dit_test::Vec;

// The generated video grid of the cases: 5 frames of 4 x 6 patches = 120 rows, 2·1·2 = 4 video tiles of 64 (4x4x4).
constexpr std::array<int64_t, 3> kGrid = {5, 4, 6};
constexpr int64_t kText = 5, kAudio = 70;  // prefix tiles: 1 text, 2 audio (64 + 6)

DitForwardArgs sparse_case(const DitConfig& c) {
  return dit_test::make_case(c, kText, kAudio, kGrid[0] * kGrid[1] * kGrid[2], {0.9f, 0.35f}, 11, false);
}

DitOutput run(Dit& dit, const DitForwardArgs& a, const std::optional<DitRequestOptions::SparseAttention>& sparse) {
  DitRequestOptions o;
  o.sparse_attention = sparse;
  const DitLayout layout{a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices, kGrid};
  dit.begin_request(layout, a.encoder_hidden_states, a.timestep, o);
  DitOutput out = dit.step(a.hidden_states, a.audio_hidden_states, a.timestep_indices);
  dit.end_request();
  return out;
}

DitRequestOptions::SparseAttention vsa(double sparsity) {
  DitRequestOptions::SparseAttention s;
  s.tile_elems = 64;
  s.vsa.sparsity = sparsity;
  return s;
}

// Independent float64 VSA-H3, exempt mode (spec/fasth3.md §3–§6), over rows in packed order; only the tiling's row
// → tile map comes from the engine (its geometry is checked against FastVideo's fixtures in
// test_dit_sparse_attention.cpp).
Mat vsa64(const Mat& q, const Mat& k, const Mat& v, const Mat* gate, const VsaTiling& t, int64_t H, int64_t Hd,
          double sparsity) {
  const int64_t R = q.rows, N = t.num_tiles(), P = t.num_prefix_tiles, V = t.num_video_tiles;
  const int64_t kept = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((1.0 - sparsity) * V)), 1, V);
  auto means = [&](const Mat& x) {
    Vec m(H * N * Hd, 0.0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < Hd; ++e) m[(h * N + t.tile_of_row[r]) * Hd + e] += x.row(r)[h * Hd + e];
    for (int64_t h = 0; h < H; ++h)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t e = 0; e < Hd; ++e) m[(h * N + n) * Hd + e] /= static_cast<double>(t.tile_sizes[n]);
    return m;
  };
  const Vec qm = means(q), km = means(k), vm = means(v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(Hd));
  Vec S(H * N * N);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t m = 0; m < N; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double d = 0;
        for (int64_t e = 0; e < Hd; ++e) d += qm[(h * N + m) * Hd + e] * km[(h * N + n) * Hd + e];
        S[(h * N + m) * N + n] = d * scale;
      }
  std::vector<uint8_t> mask(H * N * N, 1);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t m = P; m < N && kept < V; ++m) {
      const double* s = &S[(h * N + m) * N];
      std::vector<int64_t> video(V);
      std::iota(video.begin(), video.end(), P);
      std::stable_sort(video.begin(), video.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
      for (int64_t i = kept; i < V; ++i) mask[(h * N + m) * N + video[i]] = 0;
    }
  Mat o{R, H * Hd, Vec(R * H * Hd, 0.0)};
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < R; ++i) {
      const uint8_t* keep = &mask[(h * N + t.tile_of_row[i]) * N];
      Vec p(R, 0.0);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < R; ++j) {
        if (!keep[t.tile_of_row[j]]) continue;
        double d = 0;
        for (int64_t e = 0; e < Hd; ++e) d += q.row(i)[h * Hd + e] * k.row(j)[h * Hd + e];
        p[j] = d * scale;
        mx = std::max(mx, p[j]);
      }
      for (int64_t j = 0; j < R; ++j)
        if (keep[t.tile_of_row[j]]) sum += (p[j] = std::exp(p[j] - mx));
      for (int64_t j = 0; j < R; ++j)
        if (keep[t.tile_of_row[j]])
          for (int64_t e = 0; e < Hd; ++e) o.row(i)[h * Hd + e] += p[j] / sum * v.row(j)[h * Hd + e];
    }
  if (!gate) return o;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t m = 0; m < N; ++m) {
      const double* s = &S[(h * N + m) * N];
      const double mx = *std::max_element(s, s + N);
      double sum = 0;
      for (int64_t n = 0; n < N; ++n) sum += std::exp(s[n] - mx);
      Vec pooled(Hd, 0.0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t e = 0; e < Hd; ++e) pooled[e] += std::exp(s[n] - mx) / sum * vm[(h * N + n) * Hd + e];
      for (int64_t r = 0; r < R; ++r)
        if (t.tile_of_row[r] == m)
          for (int64_t e = 0; e < Hd; ++e) o.row(r)[h * Hd + e] += pooled[e] * gate->row(r)[h * Hd + e];
    }
  return o;
}

double worst_rel_l2(const DitOutput& a, const DitOutput& b) {
  return std::max(rel_l2(a.sample, b.sample), rel_l2(a.audio_sample, b.audio_sample));
}

bool bit_equal(const DitOutput& a, const DitOutput& b) {
  return dit_test::bit_equal(a.sample, b.sample) && dit_test::bit_equal(a.audio_sample, b.audio_sample);
}

// Float32 weights and activations against float64 (the bound of test_dit.cpp's dense comparison: its rounding is
// ~1e-7 relative through <= 3 blocks of width <= 48; 1e-5 is the reference fixtures' acceptance bound). The routed
// case keeps 2 of 4 video tiles (sparsity 0.5), so a wrong selection, a missing prefix exemption or a wrong pooled
// branch moves the outputs by far more.
TEST_F(DitTest, FastH3SparseForwardMatchesFloat64VsaReference) {
  const DitConfig c = dit_test::config_b();
  dit_test::write_diffusers_model(dir_, c, 3, DType::F32);
  add_gates(dir_, c, false);
  auto be = make_cpu_backend();
  auto dit = Dit::load(*be, dit_component_from_dir(dir_));
  ASSERT_TRUE(dit->has_gates());
  const DitForwardArgs a = sparse_case(c);
  const VsaTiling tiling = vsa_tiling({kText, 0, kAudio}, kGrid, 64);
  ASSERT_EQ(tiling.num_video_tiles, 4);
  ASSERT_EQ(tiling.num_prefix_tiles, 3);
  for (const double sparsity : {0.0, 0.5}) {
    const DitOutput ours = run(*dit, a, vsa(sparsity));
    dit_test::Reference64 ref(dir_, c);
    ref.main_attention = [&](const Mat& q, const Mat& k, const Mat& v, const Mat* gate) {
      EXPECT_NE(gate, nullptr);
      return vsa64(q, k, v, gate, tiling, c.num_attention_heads, c.attention_head_dim, sparsity);
    };
    const auto [video, audio] = ref.forward(a);
    const double ev = rel_l2(ours.sample, dit_test::mat_tensor(video));
    const double ea = rel_l2(ours.audio_sample, dit_test::mat_tensor(audio));
    std::printf("  sparsity %.1f with gates: rel_l2 vs f64 VSA-H3 reference: video %.3e, audio %.3e\n", sparsity, ev,
                ea);
    EXPECT_LE(ev, 1e-5);
    EXPECT_LE(ea, 1e-5);
    // The gated pooled term is there: the dense forward differs.
    EXPECT_GT(worst_rel_l2(ours, run(*dit, a, std::nullopt)), 1e-3);
  }
}

TEST_F(DitTest, FastH3PureSparseAtSparsityZeroIsDenseAndZeroGatesAreAbsent) {
  const DitConfig c = dit_test::config_b();
  const std::string plain = path("plain"), zero = path("zero_gates"), gated = path("gates");
  for (const std::string& d : {plain, zero, gated}) dit_test::write_diffusers_model(d, c, 4, DType::F32);
  add_gates(zero, c, true);
  add_gates(gated, c, false);
  auto be = make_cpu_backend();
  auto plain_dit = Dit::load(*be, dit_component_from_dir(plain));
  auto zero_dit = Dit::load(*be, dit_component_from_dir(zero));
  auto gated_dit = Dit::load(*be, dit_component_from_dir(gated));
  EXPECT_FALSE(plain_dit->has_gates());
  EXPECT_TRUE(zero_dit->has_gates());  // the checkpoint's layout is FastH3's; its branch is skipped
  const DitForwardArgs a = sparse_case(c);

  const DitOutput dense = run(*plain_dit, a, std::nullopt);
  // The default stays the exact dense forward, and the dense path never reads a gate.
  EXPECT_TRUE(bit_equal(dense, plain_dit->forward(a)));
  EXPECT_TRUE(bit_equal(dense, run(*gated_dit, a, std::nullopt)));

  const DitOutput pure = run(*plain_dit, a, vsa(0.0));
  const double e = worst_rel_l2(pure, dense);
  std::printf("  pure sparse at sparsity 0 vs dense: rel_l2 %.3e\n", e);
  EXPECT_LE(e, 1e-6);  // float32 summation order only (the dense CPU attention sums its softmax in double)
  EXPECT_TRUE(bit_equal(run(*zero_dit, a, vsa(0.0)), pure));
  EXPECT_TRUE(bit_equal(run(*zero_dit, a, vsa(0.5)), run(*plain_dit, a, vsa(0.5))));
  EXPECT_GT(worst_rel_l2(run(*plain_dit, a, vsa(0.5)), dense), 1e-4);  // routing drops keys
}

// Blocks loaded later (DitOptions::blocks, the loader hook --layers uses) bring their gates with them.
TEST_F(DitTest, FastH3GatesLoadWithTheirBlocks) {
  const DitConfig c = dit_test::config_b();
  dit_test::write_diffusers_model(dir_, c, 6, DType::F32);
  add_gates(dir_, c, false);
  auto be = make_cpu_backend();
  auto whole = Dit::load(*be, dit_component_from_dir(dir_));
  DitOptions first_only;
  first_only.blocks = std::vector<int64_t>{0};
  auto later = Dit::load(*be, dit_component_from_dir(dir_), first_only);
  EXPECT_EQ(later->resident_blocks(), std::vector<int64_t>{0});
  const DitForwardArgs a = sparse_case(c);
  EXPECT_TRUE(bit_equal(run(*later, a, vsa(0.5)), run(*whole, a, vsa(0.5))));
}

TEST_F(DitTest, FastH3SparseRequestsAreRefusedWhereTheyCannotRun) {
  const DitConfig c = dit_test::config_b();
  dit_test::write_diffusers_model(dir_, c, 5, DType::F32);
  auto be = make_cpu_backend();
  auto dit = Dit::load(*be, dit_component_from_dir(dir_));
  const DitForwardArgs a = sparse_case(c);
  DitRequestOptions o;
  o.sparse_attention = vsa(0.5);
  // No grid: the generated video cannot be tiled.
  const DitLayout no_grid{a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices, {}};
  EXPECT_THROW(dit->begin_request(no_grid, a.encoder_hidden_states, a.timestep, o), Error);
  // The generated video not at the packed tail.
  const DitForwardArgs shuffled = dit_test::make_case(c, kText, kAudio, 120, {0.9f}, 11, true);
  const DitLayout moved{shuffled.token_tags, shuffled.position_ids, shuffled.video_indices, shuffled.audio_indices,
                        shuffled.text_indices, kGrid};
  EXPECT_THROW(dit->begin_request(moved, shuffled.encoder_hidden_states, shuffled.timestep, o), Error);
  const DitLayout layout{a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices, kGrid};
  o.sparse_attention->vsa.sparsity = 1.0;
  EXPECT_THROW(dit->begin_request(layout, a.encoder_hidden_states, a.timestep, o), Error);
  o.sparse_attention = vsa(0.5);
  o.sparse_attention->tile_elems = 128;
  EXPECT_THROW(dit->begin_request(layout, a.encoder_hidden_states, a.timestep, o), Error);
  o.sparse_attention = vsa(0.5);
  o.token_reduction = true;
  EXPECT_THROW(dit->begin_request(layout, a.encoder_hidden_states, a.timestep, o), Error);
}

}  // namespace
}  // namespace h3
