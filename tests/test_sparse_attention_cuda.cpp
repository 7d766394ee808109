// FastH3's VSA-H3 on the CUDA backend (backend.h's block-sparse ops, backend/cuda/kernels_sparse_attention.cu)
// against the CPU reference (models/dit/dit_sparse_attention.h: the oracle, whose parity with FastVideo
// test_dit_sparse_attention.cpp checks on tests/fixtures/fasth3). Skips cleanly without a GPU.
//
// - Tile means and scores repeat the reference's float32 operations in its order, so given the same q and k they
//   are the CPU's bit for bit, and the routed key tiles are the CPU's exactly (on random inputs, on FastVideo's
//   fixtures, and on hand-made scores full of ties, NaNs, infinities and signed zeros).
// - The block-sparse attention: q/k/v are bf16 on both sides (the CPU computes on the same values in float32), P is
//   rounded to bf16 before P·V and the output to bf16: 1e-2 relative L2 and a cosine above 0.9999, the bound of
//   test_backend_cuda.cpp's dense attention. Outputs are poisoned with NaN first, so a row left unwritten fails.
// - The pooled branch onto a zero output: pooled term ⊙ gate in f32, rounded once to bf16 (2^-9 per element) plus
//   float32 summation order and expf: 2^-8 relative L2.
// - H3_DISABLE_SPARSE_KERNEL=1 (the exact twin): the reference's own float32 result, rounded once to bf16.
// - A DiT forward with --attention sparse on a tiny model, CUDA against CPU: test_dit_cuda.cpp's bound (3e-2,
//   cosine 0.999) for bf16 storage of everything. Routing there reads each backend's own activations (bf16 vs
//   f32); the cases keep 2 of 4 video tiles, whose scores are far apart compared with that rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/backend.h"
#include "dit_test_models.h"
#include "io/safetensors.h"
#include "models/dit/dit_sparse_attention.h"
#include "random_tensor.h"
#include "util/error.h"
#include "util/scoped_env.h"

namespace h3 {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device (or a build without the CUDA backend)"

constexpr double kAttentionTol = 1e-2;
constexpr double kPooledTol = 1.0 / 256;

// Host [rows, width] float32 values that are bf16 values (what a bf16 device tensor holds exactly).
Tensor bf16_values(const Tensor& t) { return t.to(DType::BF16).to(DType::F32); }

// Channels [channel0, channel0 + heads·dim) of the host [rows, width] x as [rows, heads, dim].
Tensor heads_of(const Tensor& x, int64_t channel0, int64_t heads, int64_t dim) {
  const int64_t rows = x.dim(0), width = x.dim(1), n = heads * dim;
  Tensor out = Tensor::empty({rows, heads, dim}, DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.ptr<float>() + r * n, x.ptr<float>() + r * width + channel0, static_cast<size_t>(n) * 4);
  return out;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

struct Case {
  std::vector<int64_t> segments;
  std::array<int64_t, 3> grid;
  int64_t tile_elems, heads, dim;
};

std::string describe(const Case& c) {
  return cat("tile ", c.tile_elems, ", grid ", c.grid[0], "x", c.grid[1], "x", c.grid[2], ", ", c.heads, " heads x ",
             c.dim);
}

// Partial prefix tiles, an empty segment, partial video edge tiles; head_dim 128 (the model's), 24 and 8 (the
// kernel's padded channels), tile 256 (4 query and key blocks of 64 per tile, some empty in edge tiles).
std::vector<Case> cases() {
  return {{{70, 0, 5, 30}, {5, 6, 9}, 64, 2, 128},
          {{36, 414}, {9, 7, 10}, 64, 3, 24},
          {{70, 0, 5, 30}, {5, 6, 9}, 64, 2, 8},
          {{36, 300}, {6, 10, 13}, 256, 2, 128}};
}

class SparseAttentionCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_CUDA();
    cpu = make_cpu_backend();
    gpu = make_cuda_backend();
  }
  // The routed key tiles of the CPU reference (the oracle) and of the GPU, for the scores `host_scores` (and the
  // same scores on the GPU).
  void expect_same_lists(const Tensor& host_scores, const Tensor& gpu_scores, const SparseTiles& gpu_tiles,
                         int64_t keep, bool compete, const std::string& what) {
    const int64_t heads = host_scores.dim(0), n = host_scores.dim(1);
    const VsaKeyTileLists want = vsa_key_tile_lists(
        vsa_route_mask(host_scores, gpu_tiles.prefix_tiles, keep, compete ? VsaMode::kCompete : VsaMode::kExempt),
        heads, n);
    SparseKeyTiles got;
    gpu->route_key_tiles(gpu_scores, gpu_tiles, keep, compete, got);
    const Tensor index = gpu->download(got.index), count = gpu->download(got.count);
    int64_t wrong = 0;
    for (int64_t row = 0; row < heads * n; ++row) {
      const int32_t c = count.ptr<int32_t>()[row];
      if (c != want.count[static_cast<size_t>(row)] ||
          !std::equal(index.ptr<int32_t>() + row * n, index.ptr<int32_t>() + row * n + c,
                      want.index.begin() + row * n)) {
        if (++wrong <= 3)
          ADD_FAILURE() << what << ": keep " << keep << (compete ? " compete" : " exempt") << ": head " << row / n
                        << " query tile " << row % n << " routes differently from the CPU";
      }
    }
    EXPECT_EQ(wrong, 0) << what;
  }
  std::unique_ptr<Backend> cpu, gpu;
  std::mt19937 rng{23};
};

TEST_F(SparseAttentionCuda, MeansScoresAndRoutingAreTheCpusBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const VsaTiling t = vsa_tiling(c.segments, c.grid, c.tile_elems);
    const int64_t inner = c.heads * c.dim, n = t.num_tiles();
    const Tensor qkv = bf16_values(randn({t.rows(), 3 * inner}, rng));
    const Tensor qm = vsa_tile_means(heads_of(qkv, 0, c.heads, c.dim), t);
    const Tensor km = vsa_tile_means(heads_of(qkv, inner, c.heads, c.dim), t);
    const Tensor scores = vsa_tile_scores(qm, km);

    const SparseTiles tiles = make_sparse_tiles(*gpu, t);
    const Tensor dev = gpu->upload(qkv, DType::BF16);
    Tensor gqm = gpu->empty({c.heads, n, c.dim}, DType::F32), gkm = gpu->empty({c.heads, n, c.dim}, DType::F32);
    gpu->tile_means(dev, 0, c.heads, c.dim, tiles, gqm);
    gpu->tile_means(dev, inner, c.heads, c.dim, tiles, gkm);
    Tensor gs = gpu->empty({c.heads, n, n}, DType::F32);
    gpu->tile_scores(gqm, gkm, gs);
    EXPECT_TRUE(bit_equal(gpu->download(gqm), qm)) << "q tile means differ from the CPU's";
    EXPECT_TRUE(bit_equal(gpu->download(gkm), km)) << "k tile means differ from the CPU's";
    EXPECT_TRUE(bit_equal(gpu->download(gs), scores)) << "tile scores differ from the CPU's";
    // The device's routing from its own scores: the CPU's from q and k.
    for (const double s : {0.3, 0.5, 0.9})
      for (const bool compete : {false, true})
        expect_same_lists(scores, gs, tiles, vsa_kept_video_tiles(s, t.num_video_tiles), compete, describe(c));
  }
}

TEST_F(SparseAttentionCuda, RoutingOfTiesNansInfinitiesAndSignedZerosIsTheCpus) {
  const VsaTiling t = vsa_tiling({70, 5}, {8, 8, 8}, 64);  // 3 prefix tiles, 8 video tiles
  const int64_t heads = 3, n = t.num_tiles();
  const SparseTiles tiles = make_sparse_tiles(*gpu, t);
  // Scores drawn from a handful of values, so that most rows have many equal scores across the top-k boundary.
  const float values[] = {1.f, 1.f, 0.5f, 0.f, -0.f, -1.f, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), 1e-30f, -1e-30f};
  std::uniform_int_distribution<int> pick(0, static_cast<int>(std::size(values)) - 1);
  Tensor s = Tensor::empty({heads, n, n}, DType::F32);
  for (int64_t i = 0; i < s.numel(); ++i) s.ptr<float>()[i] = values[pick(rng)];
  // One row all NaN, one all equal.
  for (int64_t j = 0; j < n; ++j) {
    s.ptr<float>()[(0 * n + 5) * n + j] = std::numeric_limits<float>::quiet_NaN();
    s.ptr<float>()[(1 * n + 6) * n + j] = 0.25f;
  }
  const Tensor gs = gpu->upload(s, DType::F32);
  for (int64_t keep = 1; keep <= t.num_video_tiles; ++keep)
    for (const bool compete : {false, true}) expect_same_lists(s, gs, tiles, keep, compete, "hand-made scores");
}

// FastVideo's fixtures (tests/fixtures/fasth3, tools/reference/fx_fasth3.py): routing from their q and k on the
// device equals the CPU's (which test_dit_sparse_attention.cpp shows equal to FastVideo's mask), and the NaN/tie
// case's scores route as on the CPU.
std::string fixture_dir(const std::string& name) {
  return std::string(H3_SOURCE_DIR) + "/tests/fixtures/fasth3/" + name;
}
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST_F(SparseAttentionCuda, FastVideoFixturesRouteAsOnTheCpu) {
  int checked = 0;
  for (const char* name : {"attn_t64_s075_exempt_gate", "attn_t64_s075_exempt", "attn_t64_s05_compete",
                           "attn_t256_s05_exempt_gate"}) {
    const std::string dir = fixture_dir(name);
    if (!std::filesystem::exists(dir + "/case.safetensors")) continue;
    SCOPED_TRACE(name);
    const nlohmann::json c = read_json(dir + "/case.json");
    const auto f = SafetensorsFile::open(dir + "/case.safetensors");
    const auto grid = c.at("grid").get<std::vector<int64_t>>();
    const VsaTiling t = vsa_tiling(c.at("prefix_segments").get<std::vector<int64_t>>(), {grid[0], grid[1], grid[2]},
                                   c.at("tile_elems").get<int64_t>());
    const Tensor q = f->tensor("q").to_f32(), k = f->tensor("k").to_f32();  // [1, L, H, D]
    const int64_t L = q.dim(1), H = q.dim(2), D = q.dim(3), n = t.num_tiles();
    // Packed [L, 2·H·D] float32 (q | k): the means kernel reads any float dtype, so the values stay FastVideo's.
    Tensor qk = Tensor::empty({L, 2 * H * D}, DType::F32);
    for (int64_t r = 0; r < L; ++r) {
      std::memcpy(qk.ptr<float>() + r * 2 * H * D, q.ptr<float>() + r * H * D, static_cast<size_t>(H * D) * 4);
      std::memcpy(qk.ptr<float>() + r * 2 * H * D + H * D, k.ptr<float>() + r * H * D, static_cast<size_t>(H * D) * 4);
    }
    const Tensor scores = vsa_tile_scores(vsa_tile_means(heads_of(qk, 0, H, D), t),
                                          vsa_tile_means(heads_of(qk, H * D, H, D), t));
    const SparseTiles tiles = make_sparse_tiles(*gpu, t);
    const Tensor dev = gpu->upload(qk, DType::F32);
    Tensor gqm = gpu->empty({H, n, D}, DType::F32), gkm = gpu->empty({H, n, D}, DType::F32);
    gpu->tile_means(dev, 0, H, D, tiles, gqm);
    gpu->tile_means(dev, H * D, H, D, tiles, gkm);
    Tensor gs = gpu->empty({H, n, n}, DType::F32);
    gpu->tile_scores(gqm, gkm, gs);
    EXPECT_TRUE(bit_equal(gpu->download(gs), scores));
    const int64_t keep = vsa_kept_video_tiles(c.at("layer_sparsity").get<double>(), t.num_video_tiles);
    if (keep < t.num_video_tiles) expect_same_lists(scores, gs, tiles, keep, !c.at("exempt").get<bool>(), name);
    ++checked;
  }
  const std::string dir = fixture_dir("routing_nan_tie");
  if (std::filesystem::exists(dir + "/case.safetensors")) {
    const nlohmann::json c = read_json(dir + "/case.json");
    const auto f = SafetensorsFile::open(dir + "/case.safetensors");
    const Tensor s4 = f->tensor("scores").to_f32();
    const Tensor s = s4.reshape({s4.dim(1), s4.dim(2), s4.dim(3)});
    const int64_t p = c.at("num_prefix_tiles").get<int64_t>(), vt = c.at("num_video_tiles").get<int64_t>();
    // A tiling of the fixture's tile counts (routing reads only the counts).
    std::vector<int64_t> segments(static_cast<size_t>(p), 64);
    const VsaTiling t = vsa_tiling(segments, {4, 4, 4 * vt}, 64);
    ASSERT_EQ(t.num_tiles(), s.dim(1));
    const SparseTiles tiles = make_sparse_tiles(*gpu, t);
    const Tensor gs = gpu->upload(s, DType::F32);
    const int64_t keep = vsa_kept_video_tiles(c.at("sparsity").get<double>(), vt);
    for (const bool compete : {false, true}) expect_same_lists(s, gs, tiles, keep, compete, "routing_nan_tie");
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "tests/fixtures/fasth3 is missing (tools/reference/fx_fasth3.py makes it)";
}

// The block-sparse attention (routed and dense) and the pooled branch against the CPU reference on the same bf16
// values.
TEST_F(SparseAttentionCuda, AttentionAndPooledBranchMatchTheCpu) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const VsaTiling t = vsa_tiling(c.segments, c.grid, c.tile_elems);
    const int64_t inner = c.heads * c.dim, n = t.num_tiles(), rows = t.rows();
    const Tensor qkv = bf16_values(randn({rows, 3 * inner}, rng));
    const Tensor gate = bf16_values(randn({rows, inner}, rng));
    const Tensor q = heads_of(qkv, 0, c.heads, c.dim), k = heads_of(qkv, inner, c.heads, c.dim),
                 v = heads_of(qkv, 2 * inner, c.heads, c.dim);
    const Tensor scores = vsa_tile_scores(vsa_tile_means(q, t), vsa_tile_means(k, t));
    const SparseTiles tiles = make_sparse_tiles(*gpu, t);
    const Tensor dev = gpu->upload(qkv, DType::BF16);
    const Tensor gscores = gpu->upload(scores, DType::F32);
    for (const double s : {0.0, 0.5, 0.9}) {
      const int64_t keep = vsa_kept_video_tiles(s, t.num_video_tiles);
      const bool route = keep < t.num_video_tiles;
      const std::vector<uint8_t> mask = vsa_route_mask(scores, t.num_prefix_tiles, keep, VsaMode::kExempt);
      const Tensor want = vsa_masked_attention(q, k, v, t, mask).reshape({rows, inner});
      SparseKeyTiles lists;
      if (route) gpu->route_key_tiles(gscores, tiles, keep, false, lists);
      Tensor out = gpu->empty({rows, inner}, DType::BF16);
      gpu->fill(out, std::numeric_limits<float>::quiet_NaN());
      gpu->block_sparse_attention(dev, c.heads, c.dim, tiles, route ? &lists : nullptr, out);
      const Tensor got = gpu->download(out).to_f32();
      int64_t non_finite = 0;
      for (int64_t i = 0; i < got.numel(); ++i) non_finite += std::isfinite(got.ptr<float>()[i]) ? 0 : 1;
      ASSERT_EQ(non_finite, 0) << "sparsity " << s << ": elements left unwritten";
      EXPECT_LE(rel_l2(got, want), kAttentionTol) << "sparsity " << s;
      EXPECT_GE(cosine(got, want), 0.9999) << "sparsity " << s;
    }
    // The pooled branch alone, onto a zero output.
    Tensor pooled_want = Tensor::zeros({rows, c.heads, c.dim}, DType::F32);
    vsa_add_pooled(pooled_want, scores, vsa_tile_means(v, t), heads_of(gate, 0, c.heads, c.dim), t);
    Tensor gvm = gpu->empty({c.heads, n, c.dim}, DType::F32);
    gpu->tile_means(dev, 2 * inner, c.heads, c.dim, tiles, gvm);
    Tensor out = gpu->zeros({rows, inner}, DType::BF16);
    gpu->add_pooled_attention(gscores, gvm, gpu->upload(gate, DType::BF16), tiles, out);
    const Tensor got = gpu->download(out).to_f32();
    EXPECT_LE(rel_l2(got, pooled_want.reshape({rows, inner})), kPooledTol);
  }
}

// H3_DISABLE_SPARSE_KERNEL=1: every op is the CPU reference on the device's values, the result rounded once.
TEST_F(SparseAttentionCuda, DisabledKernelsAreTheCpuReference) {
  ScopedEnv off("H3_DISABLE_SPARSE_KERNEL", "1");
  auto twin = make_cuda_backend();
  const Case c = cases()[0];
  const VsaTiling t = vsa_tiling(c.segments, c.grid, c.tile_elems);
  const int64_t inner = c.heads * c.dim, rows = t.rows();
  const Tensor qkv = bf16_values(randn({rows, 3 * inner}, rng));
  const Tensor q = heads_of(qkv, 0, c.heads, c.dim), k = heads_of(qkv, inner, c.heads, c.dim),
               v = heads_of(qkv, 2 * inner, c.heads, c.dim);
  const Tensor scores = vsa_tile_scores(vsa_tile_means(q, t), vsa_tile_means(k, t));
  const int64_t keep = vsa_kept_video_tiles(0.5, t.num_video_tiles);
  const Tensor want = vsa_masked_attention(q, k, v, t, vsa_route_mask(scores, t.num_prefix_tiles, keep,
                                                                      VsaMode::kExempt));
  const SparseTiles tiles = make_sparse_tiles(*twin, t);
  const Tensor dev = twin->upload(qkv, DType::BF16);
  Tensor gs = twin->empty(scores.shape(), DType::F32), qm = twin->empty({c.heads, t.num_tiles(), c.dim}, DType::F32);
  Tensor km = twin->empty(qm.shape(), DType::F32);
  twin->tile_means(dev, 0, c.heads, c.dim, tiles, qm);
  twin->tile_means(dev, inner, c.heads, c.dim, tiles, km);
  twin->tile_scores(qm, km, gs);
  EXPECT_TRUE(bit_equal(twin->download(gs), scores));
  SparseKeyTiles lists;
  twin->route_key_tiles(gs, tiles, keep, false, lists);
  Tensor out = twin->empty({rows, inner}, DType::BF16);
  twin->block_sparse_attention(dev, c.heads, c.dim, tiles, &lists, out);
  EXPECT_TRUE(bit_equal(twin->download(out), want.reshape({rows, inner}).to(DType::BF16)));
}

// The routed attention's Hopper kernel (kernels_sparse_attention_sm90.cu: 128-dim heads, on a compute capability 9.0
// device; elsewhere both backends run the portable kernel) against the CPU reference and against the portable kernel
// (H3_DISABLE_SPARSE_HOPPER=1), on hand-made lists: prefix query tiles list every tile (dense), the others lists of
// different lengths in shuffled order, every fifth a single key tile; tile 64 and 256, partial prefix and video edge
// tiles (short key blocks masked, short query blocks' rows not written past the tile). Both kernels round P and the
// output to bf16 and sum in different orders, so each is held to the CPU with the bound above and to each other
// with the same bound.
TEST_F(SparseAttentionCuda, HopperRoutedKernelMatchesTheCpuAndThePortableKernel) {
  ScopedEnv portable_only("H3_DISABLE_SPARSE_HOPPER", "1");
  auto portable = make_cuda_backend();
  const std::vector<Case> hopper_cases = {{{70, 0, 5, 30}, {5, 6, 9}, 64, 2, 128},
                                          {{100}, {8, 12, 16}, 64, 3, 128},
                                          {{36, 300}, {6, 10, 13}, 256, 2, 128},
                                          {{0}, {9, 9, 9}, 256, 1, 128}};
  for (const Case& c : hopper_cases) {
    SCOPED_TRACE(describe(c));
    const VsaTiling t = vsa_tiling(c.segments, c.grid, c.tile_elems);
    const int64_t inner = c.heads * c.dim, n = t.num_tiles(), rows = t.rows();
    const Tensor qkv = bf16_values(randn({rows, 3 * inner}, rng));
    const Tensor q = heads_of(qkv, 0, c.heads, c.dim), k = heads_of(qkv, inner, c.heads, c.dim),
                 v = heads_of(qkv, 2 * inner, c.heads, c.dim);
    std::vector<uint8_t> mask(static_cast<size_t>(c.heads * n * n), 0);
    Tensor index = Tensor::empty({c.heads, n, n}, DType::I32), count = Tensor::empty({c.heads, n}, DType::I32);
    std::vector<int32_t> all(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) all[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    int64_t single = 0;
    for (int64_t row = 0; row < c.heads * n; ++row) {
      const int64_t m = row % n;
      std::vector<int32_t> list = all;
      if (m >= t.num_prefix_tiles) {
        std::shuffle(list.begin(), list.end(), rng);
        list.resize(m % 5 == 0 ? 1 : static_cast<size_t>(1 + (m * 7 + row / n * 3) % n));
      }
      single += list.size() == 1 ? 1 : 0;
      count.ptr<int32_t>()[row] = static_cast<int32_t>(list.size());
      for (int64_t i = 0; i < n; ++i)
        index.ptr<int32_t>()[row * n + i] = i < static_cast<int64_t>(list.size()) ? list[static_cast<size_t>(i)] : -1;
      for (const int32_t j : list) mask[static_cast<size_t>(row * n + j)] = 1;
    }
    ASSERT_GT(single, 0);
    const Tensor want = vsa_masked_attention(q, k, v, t, mask).reshape({rows, inner});
    const auto run = [&](Backend& be) {
      const SparseTiles tiles = make_sparse_tiles(be, t);
      SparseKeyTiles lists{be.upload(index, DType::I32), be.upload(count, DType::I32)};
      Tensor out = be.empty({rows, inner}, DType::BF16);
      be.fill(out, std::numeric_limits<float>::quiet_NaN());
      be.block_sparse_attention(be.upload(qkv, DType::BF16), c.heads, c.dim, tiles, &lists, out);
      return be.download(out).to_f32();
    };
    const Tensor got = run(*gpu), twin = run(*portable);
    int64_t non_finite = 0;
    for (int64_t i = 0; i < got.numel(); ++i) non_finite += std::isfinite(got.ptr<float>()[i]) ? 0 : 1;
    ASSERT_EQ(non_finite, 0) << "elements left unwritten";
    std::printf("[ vsa cuda ] %s: rel L2 to the CPU %.3g (portable kernel %.3g), to the portable kernel %.3g\n",
                describe(c).c_str(), rel_l2(got, want), rel_l2(twin, want), rel_l2(got, twin));
    EXPECT_LE(rel_l2(got, want), kAttentionTol);
    EXPECT_GE(cosine(got, want), 0.9999);
    EXPECT_LE(rel_l2(twin, want), kAttentionTol);
    EXPECT_LE(rel_l2(got, twin), kAttentionTol);
    EXPECT_GE(cosine(got, twin), 0.9999);
  }
}

// The DiT forward with the sparse attention on a tiny model (3 blocks, 2 heads x 24, 4 video tiles of 64 and 3
// prefix tiles), CUDA against CPU: gated at sparsity 0 and 0.5, and pure sparse at 0.5.
class SparseAttentionCudaDit : public dit_test::DitTest {};

// One step of the model in `dir` on `be` with VSA-H3 at tile 64 and `sparsity`, for the case `a` and its layout.
DitOutput sparse_forward(Backend& be, const std::string& dir, const DitLayout& layout, const DitForwardArgs& a,
                         double sparsity) {
  auto dit = Dit::load(be, dit_component_from_dir(dir));
  DitRequestOptions o;
  o.sparse_attention = DitRequestOptions::SparseAttention{};
  o.sparse_attention->tile_elems = 64;
  o.sparse_attention->vsa.sparsity = sparsity;
  dit->begin_request(layout, a.encoder_hidden_states, a.timestep, o);
  DitOutput out = dit->step(a.hidden_states, a.audio_hidden_states, a.timestep_indices);
  dit->end_request();
  return out;
}

TEST_F(SparseAttentionCudaDit, SparseForwardMatchesTheCpuBackend) {
  SKIP_WITHOUT_CUDA();
  const DitConfig c = dit_test::config_b();
  const std::string plain = path("plain"), gated = path("gated");
  for (const std::string& d : {plain, gated}) dit_test::write_diffusers_model(d, c, 3, DType::F32);
  dit_test::add_gates(gated, c, false);
  constexpr std::array<int64_t, 3> kGrid = {5, 4, 6};
  const DitForwardArgs a = dit_test::make_case(c, 5, 70, kGrid[0] * kGrid[1] * kGrid[2], {0.9f, 0.35f}, 11, false);
  const DitLayout layout{a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices, kGrid};
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const auto run = [&](Backend& be, const std::string& dir, double sparsity) {
    return sparse_forward(be, dir, layout, a, sparsity);
  };
  for (const auto& [dir, sparsity] : {std::pair{gated, 0.0}, std::pair{gated, 0.5}, std::pair{plain, 0.5}}) {
    const std::string what = cat(dir == gated ? "gated" : "pure", " sparse at sparsity ", sparsity);
    const DitOutput want = run(*cpu, dir, sparsity), got = run(*gpu, dir, sparsity);
    for (const auto& [name, x, y] : {std::tuple{"video", &want.sample, &got.sample},
                                     std::tuple{"audio", &want.audio_sample, &got.audio_sample}}) {
      const double d = rel_l2(*y, *x), cs = cosine(*y, *x);
      std::printf("[ vsa cuda ] %s, %s: rel L2 %.3g, cosine %.6f\n", what.c_str(), name, d, cs);
      EXPECT_LE(d, 3e-2) << what << " " << name;
      EXPECT_GE(cs, 0.999) << what << " " << name;
    }
  }
}

// The DiT forward at sparsity 0.9 with the model's 128-dim heads (3 blocks, 2 heads x 128; 12 video tiles of 64,
// 2 kept, and 3 prefix tiles), where the routed attention runs on the Hopper kernel (on a compute capability 9.0
// device): against the CPU backend with the bound above, and against the portable kernel's forward
// (H3_DISABLE_SPARSE_HOPPER=1) with the same bound. If the CPU comparison alone fails, the routing of the two
// backends' activations (bf16 vs f32) differs, not the kernel.
TEST_F(SparseAttentionCudaDit, HopperSparseForwardAtSparsity09MatchesTheCpuAndThePortableKernel) {
  SKIP_WITHOUT_CUDA();
  DitConfig c = dit_test::config_b();
  c.attention_head_dim = 128;
  const std::string plain = path("plain"), gated = path("gated");
  for (const std::string& d : {plain, gated}) dit_test::write_diffusers_model(d, c, 3, DType::F32);
  dit_test::add_gates(gated, c, false);
  constexpr std::array<int64_t, 3> kGrid = {5, 8, 10};
  const DitForwardArgs a = dit_test::make_case(c, 5, 70, kGrid[0] * kGrid[1] * kGrid[2], {0.9f, 0.35f}, 13, false);
  const DitLayout layout{a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices, kGrid};
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  std::unique_ptr<Backend> portable;
  {
    ScopedEnv portable_only("H3_DISABLE_SPARSE_HOPPER", "1");
    portable = make_cuda_backend();
  }
  const auto run = [&](Backend& be, const std::string& dir) { return sparse_forward(be, dir, layout, a, 0.9); };
  for (const std::string& dir : {gated, plain}) {
    const std::string what = cat(dir == gated ? "gated" : "pure", " sparse at sparsity 0.9, 128-dim heads");
    const DitOutput want = run(*cpu, dir), got = run(*gpu, dir), twin = run(*portable, dir);
    for (const auto& [name, x, y, z] : {std::tuple{"video", &want.sample, &got.sample, &twin.sample},
                                        std::tuple{"audio", &want.audio_sample, &got.audio_sample, &twin.audio_sample}}) {
      const double d = rel_l2(*y, *x), cs = cosine(*y, *x), dt = rel_l2(*y, *z), ct = cosine(*y, *z);
      std::printf("[ vsa cuda ] %s, %s: rel L2 %.3g, cosine %.6f; to the portable kernel %.3g, %.6f\n", what.c_str(),
                  name, d, cs, dt, ct);
      EXPECT_LE(d, 3e-2) << what << " " << name;
      EXPECT_GE(cs, 0.999) << what << " " << name;
      EXPECT_LE(dt, 3e-2) << what << " " << name;
      EXPECT_GE(ct, 0.999) << what << " " << name;
    }
  }
}

}  // namespace
}  // namespace h3
