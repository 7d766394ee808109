// The block-sparse attention ops' defaults (backend.h; spec/fasth3.md §3–§6): download, the float32 reference of
// models/dit/dit_sparse_attention.h, upload. The CPU backend runs these; the CUDA backend's kernels have them as
// their exact twin (H3_DISABLE_SPARSE_KERNEL=1).
#include <cstring>

#include "backend/backend.h"
#include "models/dit/dit_sparse_attention.h"
#include "util/error.h"

namespace h3 {
namespace {

const VsaTiling& host_tiling(const SparseTiles& tiles) {
  H3_CHECK(tiles.host != nullptr, "sparse attention: the tiles carry no host tiling (make them with make_sparse_tiles)");
  return *tiles.host;
}

// Channels [channel0, channel0 + heads·head_dim) of every row of x (a backend tensor [rows, width]) as host float32
// [rows, heads, head_dim].
Tensor host_heads(Backend& be, const Tensor& x, int64_t channel0, int64_t heads, int64_t head_dim) {
  const int64_t width = x.ndim() ? x.dim(-1) : 0, rows = width ? x.numel() / width : 0, n = heads * head_dim;
  H3_CHECK(channel0 >= 0 && heads > 0 && head_dim > 0 && channel0 + n <= width, "sparse attention: channels [",
           channel0, ", ", channel0 + n, ") are not inside the ", width, " channels of ", x.str());
  const Tensor host = be.download(x).to(DType::F32);
  Tensor out = Tensor::empty({rows, heads, head_dim}, DType::F32);
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(out.ptr<float>() + i * n, host.ptr<float>() + i * width + channel0, static_cast<size_t>(n) * sizeof(float));
  return out;
}

// dst (a backend tensor of host's element count) = host, converted to dst's dtype.
void store(Backend& be, const Tensor& host, Tensor& dst) {
  H3_CHECK(host.numel() == dst.numel(), "sparse attention: the output ", dst.str(), " must have ", host.numel(),
           " elements");
  const Tensor up = be.upload(host, dst.dtype());
  be.convert(up.reshape(dst.shape()), dst);
}

std::vector<int32_t> host_ints(Backend& be, const Tensor& t) {
  const Tensor h = be.download(t);
  H3_CHECK(h.dtype() == DType::I32, "sparse attention: key-tile lists must be I32, got ", h.str());
  return std::vector<int32_t>(h.ptr<int32_t>(), h.ptr<int32_t>() + h.numel());
}

}  // namespace

void Backend::tile_means(const Tensor& x, int64_t channel0, int64_t heads, int64_t head_dim, const SparseTiles& tiles,
                         Tensor& means) {
  store(*this, vsa_tile_means(host_heads(*this, x, channel0, heads, head_dim), host_tiling(tiles)), means);
}

void Backend::tile_scores(const Tensor& q_means, const Tensor& k_means, Tensor& scores) {
  store(*this, vsa_tile_scores(download(q_means).to(DType::F32), download(k_means).to(DType::F32)), scores);
}

void Backend::route_key_tiles(const Tensor& scores, const SparseTiles& tiles, int64_t keep, bool compete,
                              SparseKeyTiles& lists) {
  const Tensor s = download(scores).to(DType::F32);
  const VsaKeyTileLists l =
      vsa_key_tile_lists(vsa_route_mask(s, tiles.prefix_tiles, keep, compete ? VsaMode::kCompete : VsaMode::kExempt),
                         s.dim(0), s.dim(1));
  const auto host = [](const std::vector<int32_t>& v, Shape shape) {
    Tensor t = Tensor::empty(std::move(shape), DType::I32);
    std::memcpy(t.data(), v.data(), v.size() * sizeof(int32_t));
    return t;
  };
  lists.index = upload(host(l.index, {l.heads, l.tiles, l.tiles}), DType::I32);
  lists.count = upload(host(l.count, {l.heads, l.tiles}), DType::I32);
}

void Backend::block_sparse_attention(const Tensor& qkv, int64_t heads, int64_t head_dim, const SparseTiles& tiles,
                                     const SparseKeyTiles* lists, Tensor& out) {
  const VsaTiling& t = host_tiling(tiles);
  const int64_t n = t.num_tiles(), inner = heads * head_dim;
  std::vector<uint8_t> mask(static_cast<size_t>(heads * n * n), 1);
  if (lists != nullptr) {
    const std::vector<int32_t> index = host_ints(*this, lists->index), count = host_ints(*this, lists->count);
    H3_CHECK(static_cast<int64_t>(index.size()) == heads * n * n && static_cast<int64_t>(count.size()) == heads * n,
             "sparse attention: key-tile lists must be [", heads, ", ", n, ", ", n, "] and [", heads, ", ", n, "]");
    std::fill(mask.begin(), mask.end(), uint8_t{0});
    for (int64_t row = 0; row < heads * n; ++row)
      for (int32_t i = 0; i < count[static_cast<size_t>(row)]; ++i) {
        const int32_t j = index[static_cast<size_t>(row * n + i)];
        H3_CHECK(j >= 0 && j < n, "sparse attention: key tile ", j, " is outside [0, ", n, ")");
        mask[static_cast<size_t>(row * n + j)] = 1;
      }
  }
  const Tensor o = vsa_masked_attention(host_heads(*this, qkv, 0, heads, head_dim),
                                        host_heads(*this, qkv, inner, heads, head_dim),
                                        host_heads(*this, qkv, 2 * inner, heads, head_dim), t, mask);
  store(*this, o, out);
}

void Backend::add_pooled_attention(const Tensor& scores, const Tensor& v_means, const Tensor& gate,
                                   const SparseTiles& tiles, Tensor& out) {
  const int64_t heads = v_means.dim(0), head_dim = v_means.dim(2);
  Tensor o = host_heads(*this, out, 0, heads, head_dim);
  vsa_add_pooled(o, download(scores).to(DType::F32), download(v_means).to(DType::F32),
                 host_heads(*this, gate, 0, heads, head_dim), host_tiling(tiles));
  store(*this, o, out);
}

SparseTiles make_sparse_tiles(Backend& be, VsaTiling tiling) {
  H3_CHECK(tiling.rows() < (int64_t{1} << 31), "the sparse attention indexes rows with 32-bit integers: ",
           tiling.rows(), " rows are too many");
  SparseTiles t;
  t.rows = tiling.rows();
  t.tiles = tiling.num_tiles();
  t.prefix_tiles = tiling.num_prefix_tiles;
  t.tile_elems = tiling.tile_elems;
  Tensor order = Tensor::empty({t.rows}, DType::I32), begin = Tensor::empty({t.tiles + 1}, DType::I32);
  const std::vector<int64_t> starts = vsa_tile_begins(tiling);
  for (int64_t i = 0; i < t.rows; ++i) order.ptr<int32_t>()[i] = static_cast<int32_t>(tiling.rows_in_order[i]);
  for (int64_t i = 0; i <= t.tiles; ++i) begin.ptr<int32_t>()[i] = static_cast<int32_t>(starts[i]);
  t.order = be.upload(order, DType::I32);
  t.begin = be.upload(begin, DType::I32);
  t.host = std::make_shared<const VsaTiling>(std::move(tiling));
  return t;
}

}  // namespace h3
