// VSA-H3 CPU reference (spec/fasth3.md; FastVideo's fastvideo/attention/backends/video_sparse_attn_h3.py). Written
// by hand: masked dense attention over a handful of tiles has no library form, and the ranking rule is ours.
#include "models/dit/dit_sparse_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/error.h"

namespace h3 {

std::vector<int64_t> vsa_tile_begins(const VsaTiling& t) {
  std::vector<int64_t> begin(t.tile_sizes.size() + 1, 0);
  std::partial_sum(t.tile_sizes.begin(), t.tile_sizes.end(), begin.begin() + 1);
  return begin;
}
namespace {

struct Dims {
  int64_t rows, heads, dim;
};

Dims check_rows(const Tensor& x, const char* name, int64_t rows) {
  H3_CHECK(x.defined() && x.device() == Device::CPU && x.dtype() == DType::F32 && x.ndim() == 3,
           "VSA-H3 ", name, " must be a host float32 tensor [rows, heads, head_dim], got ", x.str());
  H3_CHECK(x.dim(0) == rows, "VSA-H3 ", name, " has ", x.dim(0), " rows but the tiling covers ", rows);
  return {x.dim(0), x.dim(1), x.dim(2)};
}

void check_same(const Tensor& x, const char* name, const Dims& d) {
  H3_CHECK(x.dim(1) == d.heads && x.dim(2) == d.dim, "VSA-H3 ", name, " is ", x.str(), " but q is [", d.rows, ", ",
           d.heads, ", ", d.dim, "]");
}


// The routing order key: a NaN ranks as −inf (spec/fasth3.md §4 leaves NaN to torch.topk, which puts it first).
float rank_key(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }

// Marks the `keep` best of the key tiles [first, last) of one mask row: larger key first, ties to the lower tile.
void mark_top(const float* row_scores, int64_t first, int64_t last, int64_t keep, uint8_t* mask_row) {
  std::vector<int64_t> tiles(static_cast<size_t>(last - first));
  std::iota(tiles.begin(), tiles.end(), first);
  const auto better = [row_scores](int64_t a, int64_t b) {
    const float ka = rank_key(row_scores[a]), kb = rank_key(row_scores[b]);
    return ka > kb || (ka == kb && a < b);
  };
  std::partial_sort(tiles.begin(), tiles.begin() + keep, tiles.end(), better);
  for (int64_t i = 0; i < keep; ++i) mask_row[tiles[static_cast<size_t>(i)]] = 1;
}

}  // namespace

std::array<int64_t, 3> vsa_tile_shape(int64_t tile_elems) {
  if (tile_elems == 64) return {4, 4, 4};
  if (tile_elems == 256) return {4, 8, 8};
  fail("the VSA-H3 tile size must be 64 (4x4x4 tiles) or 256 (4x8x8 tiles), got ", tile_elems);
}

VsaTiling vsa_tiling(const std::vector<int64_t>& prefix_segments, const std::array<int64_t, 3>& video_grid,
                     int64_t tile_elems) {
  const std::array<int64_t, 3> shape = vsa_tile_shape(tile_elems);
  const auto [gt, gh, gw] = video_grid;
  H3_CHECK(gt > 0 && gh > 0 && gw > 0, "the VSA-H3 video grid must have at least one row in each dimension, got (",
           gt, ", ", gh, ", ", gw, ")");
  VsaTiling t;
  t.tile_elems = tile_elems;
  int64_t prefix_rows = 0;
  for (const int64_t segment : prefix_segments) {
    H3_CHECK(segment >= 0, "a VSA-H3 prefix segment cannot be negative, got ", segment);
    for (int64_t start = 0; start < segment; start += tile_elems) {
      t.tile_sizes.push_back(std::min(tile_elems, segment - start));
      for (int64_t r = start; r < std::min(segment, start + tile_elems); ++r) t.rows_in_order.push_back(prefix_rows + r);
    }
    prefix_rows += segment;
  }
  t.num_prefix_tiles = t.num_tiles();
  for (int64_t f0 = 0; f0 < gt; f0 += shape[0])
    for (int64_t i0 = 0; i0 < gh; i0 += shape[1])
      for (int64_t j0 = 0; j0 < gw; j0 += shape[2]) {
        const int64_t f1 = std::min(gt, f0 + shape[0]), i1 = std::min(gh, i0 + shape[1]), j1 = std::min(gw, j0 + shape[2]);
        t.tile_sizes.push_back((f1 - f0) * (i1 - i0) * (j1 - j0));
        for (int64_t f = f0; f < f1; ++f)
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = j0; j < j1; ++j) t.rows_in_order.push_back(prefix_rows + (f * gh + i) * gw + j);
      }
  t.num_video_tiles = t.num_tiles() - t.num_prefix_tiles;
  t.slot_of_row.assign(t.rows_in_order.size(), 0);
  t.tile_of_row.assign(t.rows_in_order.size(), 0);
  const std::vector<int64_t> begin = vsa_tile_begins(t);
  for (int64_t n = 0; n < t.num_tiles(); ++n)
    for (int64_t p = begin[n]; p < begin[n + 1]; ++p) {
      const int64_t row = t.rows_in_order[static_cast<size_t>(p)];
      t.slot_of_row[static_cast<size_t>(row)] = n * tile_elems + (p - begin[n]);
      t.tile_of_row[static_cast<size_t>(row)] = n;
    }
  return t;
}

int64_t vsa_kept_video_tiles(double sparsity, int64_t num_video_tiles) {
  H3_CHECK(sparsity >= 0.0 && sparsity < 1.0, "the VSA-H3 sparsity must be in [0, 1), got ", sparsity);
  const auto kept = static_cast<int64_t>(std::ceil((1.0 - sparsity) * static_cast<double>(num_video_tiles)));
  return std::max<int64_t>(1, std::min(kept, num_video_tiles));
}

Tensor vsa_tile_means(const Tensor& x, const VsaTiling& tiling) {
  const Dims d = check_rows(x, "input", tiling.rows());
  const int64_t n_tiles = tiling.num_tiles();
  Tensor out = Tensor::zeros({d.heads, n_tiles, d.dim}, DType::F32);
  const float* src = x.ptr<float>();
  float* dst = out.ptr<float>();
  const std::vector<int64_t> begin = vsa_tile_begins(tiling);
  for (int64_t n = 0; n < n_tiles; ++n)
    for (int64_t h = 0; h < d.heads; ++h) {
      float* mean = dst + (h * n_tiles + n) * d.dim;
      for (int64_t p = begin[n]; p < begin[n + 1]; ++p) {
        const float* row = src + (tiling.rows_in_order[static_cast<size_t>(p)] * d.heads + h) * d.dim;
        for (int64_t c = 0; c < d.dim; ++c) mean[c] += row[c];
      }
      const auto size = static_cast<float>(tiling.tile_sizes[static_cast<size_t>(n)]);
      for (int64_t c = 0; c < d.dim; ++c) mean[c] /= size;
    }
  return out;
}

Tensor vsa_tile_scores(const Tensor& q_means, const Tensor& k_means) {
  H3_CHECK(q_means.dtype() == DType::F32 && q_means.ndim() == 3 && q_means.shape() == k_means.shape() &&
               k_means.dtype() == DType::F32,
           "VSA-H3 tile means must be two float32 [heads, tiles, head_dim] tensors of one shape, got ", q_means.str(),
           " and ", k_means.str());
  const int64_t heads = q_means.dim(0), n = q_means.dim(1), dim = q_means.dim(2);
  const auto root = static_cast<float>(std::sqrt(static_cast<double>(dim)));
  Tensor out = Tensor::empty({heads, n, n}, DType::F32);
  const float *q = q_means.ptr<float>(), *k = k_means.ptr<float>();
  float* s = out.ptr<float>();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t m = 0; m < n; ++m)
      for (int64_t j = 0; j < n; ++j) {
        float dot = 0.0F;
        for (int64_t c = 0; c < dim; ++c) dot += q[(h * n + m) * dim + c] * k[(h * n + j) * dim + c];
        s[(h * n + m) * n + j] = dot / root;
      }
  return out;
}

std::vector<uint8_t> vsa_block_mask(const Tensor& scores, int64_t num_prefix_tiles, int64_t num_video_tiles,
                                    double sparsity, VsaMode mode) {
  const int64_t n = num_prefix_tiles + num_video_tiles;
  H3_CHECK(scores.dtype() == DType::F32 && scores.ndim() == 3 && scores.dim(1) == n && scores.dim(2) == n,
           "VSA-H3 scores must be float32 [heads, ", n, ", ", n, "], got ", scores.str());
  H3_CHECK(num_video_tiles > 0, "VSA-H3 routing needs at least one video tile");
  return vsa_route_mask(scores, num_prefix_tiles, vsa_kept_video_tiles(sparsity, num_video_tiles), mode);
}

std::vector<uint8_t> vsa_route_mask(const Tensor& scores, int64_t num_prefix_tiles, int64_t k_vid, VsaMode mode) {
  H3_CHECK(scores.dtype() == DType::F32 && scores.ndim() == 3 && scores.dim(1) == scores.dim(2),
           "VSA-H3 scores must be float32 [heads, tiles, tiles], got ", scores.str());
  const int64_t heads = scores.dim(0), n = scores.dim(1), num_video_tiles = n - num_prefix_tiles;
  H3_CHECK(num_prefix_tiles >= 0 && k_vid >= 1 && k_vid <= num_video_tiles, "VSA-H3 routing keeps 1 to ",
           num_video_tiles, " video tiles of ", n, " tiles (", num_prefix_tiles, " prefix), got ", k_vid);
  if (k_vid == num_video_tiles) return std::vector<uint8_t>(static_cast<size_t>(heads * n * n), 1);
  std::vector<uint8_t> mask(static_cast<size_t>(heads * n * n), 0);
  const float* s = scores.ptr<float>();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t m = 0; m < n; ++m) {
      uint8_t* row = mask.data() + (h * n + m) * n;
      const float* row_scores = s + (h * n + m) * n;
      if (m < num_prefix_tiles) {
        std::fill(row, row + n, uint8_t{1});  // prefix queries are dense
      } else if (mode == VsaMode::kExempt || num_prefix_tiles == 0) {
        std::fill(row, row + num_prefix_tiles, uint8_t{1});
        mark_top(row_scores, num_prefix_tiles, n, k_vid, row);
      } else {
        mark_top(row_scores, 0, n, std::min(k_vid + num_prefix_tiles, n), row);
      }
    }
  return mask;
}

VsaKeyTileLists vsa_key_tile_lists(const std::vector<uint8_t>& mask, int64_t heads, int64_t tiles) {
  H3_CHECK(static_cast<int64_t>(mask.size()) == heads * tiles * tiles, "the VSA-H3 block mask has ", mask.size(),
           " entries, expected heads·tiles² = ", heads * tiles * tiles);
  VsaKeyTileLists lists{heads, tiles, std::vector<int32_t>(mask.size(), -1),
                        std::vector<int32_t>(static_cast<size_t>(heads * tiles), 0)};
  for (int64_t row = 0; row < heads * tiles; ++row) {
    int32_t& count = lists.count[static_cast<size_t>(row)];
    for (int64_t j = 0; j < tiles; ++j)
      if (mask[static_cast<size_t>(row * tiles + j)] != 0)
        lists.index[static_cast<size_t>(row * tiles + count++)] = static_cast<int32_t>(j);
  }
  return lists;
}

Tensor vsa_masked_attention(const Tensor& q, const Tensor& k, const Tensor& v, const VsaTiling& tiling,
                            const std::vector<uint8_t>& mask) {
  const Dims d = check_rows(q, "q", tiling.rows());
  check_rows(k, "k", tiling.rows());
  check_rows(v, "v", tiling.rows());
  check_same(k, "k", d);
  check_same(v, "v", d);
  const int64_t n = tiling.num_tiles();
  const VsaKeyTileLists lists = vsa_key_tile_lists(mask, d.heads, n);
  const std::vector<int64_t> begin = vsa_tile_begins(tiling);
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dim)));
  const float *qp = q.ptr<float>(), *kp = k.ptr<float>(), *vp = v.ptr<float>();
  Tensor out = Tensor::zeros({d.rows, d.heads, d.dim}, DType::F32);
  float* op = out.ptr<float>();
  std::vector<int64_t> keys;
  std::vector<float> logits;
  for (int64_t h = 0; h < d.heads; ++h)
    for (int64_t m = 0; m < n; ++m) {
      keys.clear();
      for (int32_t i = 0; i < lists.count[static_cast<size_t>(h * n + m)]; ++i) {
        const int32_t j = lists.index[static_cast<size_t>((h * n + m) * n + i)];
        keys.insert(keys.end(), tiling.rows_in_order.begin() + begin[j], tiling.rows_in_order.begin() + begin[j + 1]);
      }
      logits.resize(keys.size());
      for (int64_t p = begin[m]; p < begin[m + 1]; ++p) {
        const int64_t r = tiling.rows_in_order[static_cast<size_t>(p)];
        const float* qr = qp + (r * d.heads + h) * d.dim;
        float peak = -std::numeric_limits<float>::infinity();
        for (size_t i = 0; i < keys.size(); ++i) {
          const float* kr = kp + (keys[i] * d.heads + h) * d.dim;
          float dot = 0.0F;
          for (int64_t c = 0; c < d.dim; ++c) dot += qr[c] * kr[c];
          logits[i] = dot * scale;
          peak = std::max(peak, logits[i]);
        }
        float total = 0.0F;
        float* o = op + (r * d.heads + h) * d.dim;
        for (size_t i = 0; i < keys.size(); ++i) {
          const float w = std::exp(logits[i] - peak);
          total += w;
          const float* vr = vp + (keys[i] * d.heads + h) * d.dim;
          for (int64_t c = 0; c < d.dim; ++c) o[c] += w * vr[c];
        }
        for (int64_t c = 0; c < d.dim; ++c) o[c] /= total;
      }
    }
  return out;
}

Tensor vsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* gate, const VsaTiling& tiling,
                     const VsaOptions& options) {
  const Dims d = check_rows(q, "q", tiling.rows());
  if (gate != nullptr) {
    check_rows(*gate, "gate", tiling.rows());
    check_same(*gate, "gate", d);
  }
  const int64_t n = tiling.num_tiles();
  // FastVideo computes the scores only when they route or feed the pooled branch; otherwise the mask is all-true.
  const bool need_scores = options.sparsity > 0.0 || gate != nullptr;
  Tensor scores;
  std::vector<uint8_t> mask;
  if (need_scores) {
    scores = vsa_tile_scores(vsa_tile_means(q, tiling), vsa_tile_means(k, tiling));
    mask = vsa_block_mask(scores, tiling.num_prefix_tiles, tiling.num_video_tiles, options.sparsity, options.mode);
  } else {
    vsa_kept_video_tiles(options.sparsity, tiling.num_video_tiles);  // validates the sparsity
    mask.assign(static_cast<size_t>(d.heads * n * n), 1);
  }
  Tensor out = vsa_masked_attention(q, k, v, tiling, mask);
  if (gate != nullptr) vsa_add_pooled(out, scores, vsa_tile_means(v, tiling), *gate, tiling);
  return out;
}

void vsa_add_pooled(Tensor& out, const Tensor& scores, const Tensor& v_means, const Tensor& gate,
                    const VsaTiling& tiling) {
  const Dims d = check_rows(out, "output", tiling.rows());
  check_rows(gate, "gate", tiling.rows());
  check_same(gate, "gate", d);
  const int64_t n = tiling.num_tiles();
  H3_CHECK(scores.dtype() == DType::F32 && scores.shape() == (Shape{d.heads, n, n}) &&
               v_means.dtype() == DType::F32 && v_means.shape() == (Shape{d.heads, n, d.dim}),
           "the VSA-H3 pooled branch needs float32 scores [", d.heads, ", ", n, ", ", n, "] and v means [", d.heads,
           ", ", n, ", ", d.dim, "], got ", scores.str(), " and ", v_means.str());
  // spec/fasth3.md §6: softmax over all tiles of S, times the tile means of v, broadcast to the tile's rows.
  const float *s = scores.ptr<float>(), *vm = v_means.ptr<float>(), *g = gate.ptr<float>();
  float* op = out.ptr<float>();
  std::vector<float> pooled(static_cast<size_t>(d.dim));
  std::vector<float> weight(static_cast<size_t>(n));
  const std::vector<int64_t> begin = vsa_tile_begins(tiling);
  for (int64_t h = 0; h < d.heads; ++h)
    for (int64_t m = 0; m < n; ++m) {
      const float* row = s + (h * n + m) * n;
      const float peak = *std::max_element(row, row + n);
      float total = 0.0F;
      for (int64_t j = 0; j < n; ++j) total += weight[static_cast<size_t>(j)] = std::exp(row[j] - peak);
      std::fill(pooled.begin(), pooled.end(), 0.0F);
      for (int64_t j = 0; j < n; ++j) {
        const float p = weight[static_cast<size_t>(j)] / total;
        for (int64_t c = 0; c < d.dim; ++c) pooled[static_cast<size_t>(c)] += p * vm[(h * n + j) * d.dim + c];
      }
      for (int64_t p = begin[m]; p < begin[m + 1]; ++p) {
        const int64_t r = tiling.rows_in_order[static_cast<size_t>(p)];
        float* o = op + (r * d.heads + h) * d.dim;
        const float* gr = g + (r * d.heads + h) * d.dim;
        for (int64_t c = 0; c < d.dim; ++c) o[c] += pooled[static_cast<size_t>(c)] * gr[c];
      }
    }
}


}  // namespace h3
