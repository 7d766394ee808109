#include "models/qwen3vl/rope.h"

#include <sleef.h>

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace h3 {

std::vector<float> torch_rope_inv_freq(double theta, int64_t dim) {
  H3_CHECK(dim > 0 && dim % 2 == 0, "rotary dimension must be positive and even, got ", dim);
  H3_CHECK(theta > 0, "rope theta must be positive, got ", theta);
  const float base = static_cast<float>(theta);
  std::vector<float> inv(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[i] = 1.0f / Sleef_powf_u10(base, exponent);
  }
  return inv;
}

void MropePositions::append_text(int64_t start, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    t.push_back(start + i);
    h.push_back(start + i);
    w.push_back(start + i);
  }
}

void MropePositions::append_image(int64_t start, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      t.push_back(start);
      h.push_back(start + r);
      w.push_back(start + c);
    }
}

namespace {

// One modality's grids handed out run by run: an image's grid, or one temporal block (1, h, w) of a video's.
class GridCursor {
 public:
  GridCursor(const std::vector<ImageGrid>& grids, bool video) : grids_(grids), video_(video) {}
  const char* name() const { return video_ ? "video" : "image"; }
  size_t item() const { return item_; }  // the grid the last run took

  ImageGrid next(int64_t merge_size) {
    if (started_ && ++block_ == grids_[item_].t) {
      ++item_;
      block_ = 0;
    }
    started_ = true;
    H3_CHECK(item_ < grids_.size(), "the presentation has more ", name(), "-pad runs than ",
             video_ ? "the blocks of the " : "the ", grids_.size(), " ", name(), "(s) given");
    const ImageGrid& g = grids_[item_];
    H3_CHECK(g.t >= 1 && g.h % merge_size == 0 && g.w % merge_size == 0 && g.h > 0 && g.w > 0, name(), " ",
             item_ + 1, " has grid (", g.t, ", ", g.h, ", ", g.w, "); a grid must have t >= 1 and h and w positive "
             "multiples of the merge size ", merge_size);
    ++runs_;
    return {1, g.h, g.w};
  }

  // Throws unless every block of every grid had its run.
  void check_used_up() const {
    int64_t blocks = 0;
    for (const ImageGrid& g : grids_) blocks += g.t;
    H3_CHECK(runs_ == blocks, "the presentation has ", runs_, " ", name(), "-pad run(s) for ", blocks, " ", name(),
             video_ ? " block(s)" : "(s)");
  }

 private:
  const std::vector<ImageGrid>& grids_;
  bool video_;
  bool started_ = false;
  size_t item_ = 0;
  int64_t block_ = 0, runs_ = 0;
};

}  // namespace

MropePositions multimodal_positions(const std::vector<int32_t>& ids, int32_t image_token_id,
                                    const std::vector<ImageGrid>& image_grids, int32_t video_token_id,
                                    const std::vector<ImageGrid>& video_grids, int64_t merge_size) {
  H3_CHECK(merge_size > 0, "the spatial merge size must be positive, got ", merge_size);
  for (size_t k = 0; k < image_grids.size(); ++k)  // only videos are split into temporal blocks
    H3_CHECK(image_grids[k].t == 1, "image ", k + 1, " has grid (", image_grids[k].t, ", ", image_grids[k].h, ", ",
             image_grids[k].w, "); an image grid must be (1, h, w)");
  const int64_t n = static_cast<int64_t>(ids.size());
  // Token types as the processor's create_mm_token_type_ids gives them: 0 text, 1 image pad, 2 video pad.
  auto type = [&](int64_t i) { return ids[i] == image_token_id ? 1 : ids[i] == video_token_id ? 2 : 0; };
  GridCursor images(image_grids, false), videos(video_grids, true);
  MropePositions pos;
  int64_t cursor = 0;
  for (int64_t i = 0; i < n;) {
    const int kind = type(i);
    int64_t end = i;
    while (end < n && type(end) == kind) ++end;
    const int64_t run = end - i;
    if (kind == 0) {
      pos.append_text(cursor, run);
      cursor += run;
    } else {
      GridCursor& grids = kind == 1 ? images : videos;
      const ImageGrid g = grids.next(merge_size);
      H3_CHECK(run == g.tokens(merge_size), grids.name(), " ", grids.item() + 1, " has ", g.tokens(merge_size),
               kind == 1 ? " tokens" : " tokens per block", " but its run of ", grids.name(),
               " pads in the presentation has ", run);
      pos.append_image(cursor, g.h / merge_size, g.w / merge_size);
      cursor += std::max(g.h, g.w) / merge_size;
    }
    i = end;
  }
  images.check_used_up();
  videos.check_used_up();
  return pos;
}

MropePositions multimodal_positions(const std::vector<int32_t>& ids, int32_t image_token_id,
                                    const std::vector<ImageGrid>& grids, int64_t merge_size) {
  return multimodal_positions(ids, image_token_id, grids, /*video_token_id=*/-1, {}, merge_size);
}

int mrope_axis(int64_t slot, const std::vector<int64_t>& section) {
  H3_CHECK(section.size() == 3, "mrope_section must have 3 entries, got ", section.size());
  if (slot % 3 == 1 && slot < 3 * section[1]) return 1;
  if (slot % 3 == 2 && slot < 3 * section[2]) return 2;
  return 0;
}

RopeTables mrope_tables(const MropePositions& pos, const std::vector<float>& inv_freq,
                        const std::vector<int64_t>& section) {
  const int64_t n = pos.size(), half = static_cast<int64_t>(inv_freq.size()), dim = 2 * half;
  H3_CHECK(static_cast<int64_t>(pos.h.size()) == n && static_cast<int64_t>(pos.w.size()) == n,
           "M-RoPE positions: the three axes must have the same length");
  std::vector<int> axis(half);
  for (int64_t i = 0; i < half; ++i) axis[i] = mrope_axis(i, section);
  RopeTables r{Tensor::empty({n, dim}, DType::F32), Tensor::empty({n, dim}, DType::F32)};
  float* C = r.cos.ptr<float>();
  float* S = r.sin.ptr<float>();
  const std::vector<int64_t>* axes[3] = {&pos.t, &pos.h, &pos.w};
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>((*axes[axis[i]])[p]) * inv_freq[i];
      const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
      const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
      C[p * dim + i] = C[p * dim + half + i] = c;
      S[p * dim + i] = S[p * dim + half + i] = s;
    }
  return r;
}

RopeTables vision_rope_tables(const std::vector<ImageGrid>& grids, int64_t merge_size,
                              const std::vector<float>& inv_freq) {
  H3_CHECK(merge_size > 0, "the spatial merge size must be positive, got ", merge_size);
  const int64_t q = static_cast<int64_t>(inv_freq.size()), half = 2 * q, dim = 2 * half;
  int64_t rows = 0;
  for (const ImageGrid& g : grids) rows += g.patches();
  RopeTables r{Tensor::empty({rows, dim}, DType::F32), Tensor::empty({rows, dim}, DType::F32)};
  float* C = r.cos.ptr<float>();
  float* S = r.sin.ptr<float>();
  int64_t row = 0;
  auto put = [&](int64_t y, int64_t x) {
    for (int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(j < q ? y : x) * inv_freq[j % q];
      C[row * dim + j] = C[row * dim + half + j] = static_cast<float>(std::cos(static_cast<double>(angle)));
      S[row * dim + j] = S[row * dim + half + j] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    ++row;
  };
  for (const ImageGrid& g : grids)
    for (int64_t t = 0; t < g.t; ++t)
      for (int64_t bh = 0; bh < g.h / merge_size; ++bh)
        for (int64_t bw = 0; bw < g.w / merge_size; ++bw)
          for (int64_t mh = 0; mh < merge_size; ++mh)
            for (int64_t mw = 0; mw < merge_size; ++mw) put(bh * merge_size + mh, bw * merge_size + mw);
  H3_CHECK(row == rows, "vision rotary: grid sides must be multiples of the merge size ", merge_size);
  return r;
}

}  // namespace h3
