#include "models/dit/dit_token_reduction.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include "util/error.h"

namespace h3 {

namespace {

// h3.c's window for its 50 blocks, scaled to `blocks`: round(blocks · numerator / 50).
int64_t scaled(int64_t blocks, int64_t numerator) { return (numerator * blocks + 25) / 50; }

// "A:B" as two integers, or nothing when the text is not of that form.
std::optional<std::pair<int64_t, int64_t>> integer_pair(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  int64_t a = 0, b = 0;
  const char* s = text.data();
  const auto ra = std::from_chars(s, s + colon, a);
  const auto rb = std::from_chars(s + colon + 1, s + text.size(), b);
  if (colon == 0 || ra.ec != std::errc() || ra.ptr != s + colon || colon + 1 == text.size() || rb.ec != std::errc() ||
      rb.ptr != s + text.size())
    return std::nullopt;
  return std::pair{a, b};
}

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

TokenReductionWindow token_reduction_window(int64_t blocks) {
  TokenReductionWindow w;
  w.begin = std::max<int64_t>(1, scaled(blocks, 4));
  w.end = scaled(blocks, 30);
  const int64_t early_end = scaled(blocks, 40);
  if (const std::string range = env_text("H3_TOKEN_REDUCTION_BLOCKS"); !range.empty()) {
    const auto p = integer_pair(range);
    if (!p || p->first < 0 || p->first >= p->second || p->second > blocks)
      fail("H3_TOKEN_REDUCTION_BLOCKS must be BEGIN:END with 0 <= BEGIN < END <= ", blocks,
           " (the transformer's blocks), got '", range, "'.");
    w.begin = p->first;
    w.end = p->second;
  }
  w.early_passes = w.end < early_end ? kTokenReductionEarlyPasses : 0;
  w.early_end = w.end < early_end ? early_end : w.end;
  if (const std::string early = env_text("H3_TOKEN_REDUCTION_EARLY"); !early.empty()) {
    if (early == "0") {
      w.early_passes = 0;
      w.early_end = w.end;
    } else {
      const auto p = integer_pair(early);
      if (!p || p->first < 1 || p->first > 1000 || p->second <= w.end || p->second > blocks)
        fail("H3_TOKEN_REDUCTION_EARLY must be 0 or PASSES:END with 1 <= PASSES <= 1000 and ", w.end,
             " < END <= ", blocks, " (after the later window's end, within the transformer's blocks), got '", early,
             "'.");
      w.early_passes = p->first;
      w.early_end = p->second;
    }
  }
  return w;
}

TokenPairs token_pairs(const DitLayout& layout) {
  const auto [frames, rows, cols] = layout.target_video_grid;
  const int64_t target = frames * rows * cols, L = layout.position_ids.dim(0);
  const int64_t first = static_cast<int64_t>(layout.video_indices.size()) - target;
  H3_CHECK(frames > 0 && rows > 0 && cols > 0 && first >= 0,
           "token reduction needs the target video's patch grid (DitLayout::target_video_grid), got ", frames, "x",
           rows, "x", cols, " for ", layout.video_indices.size(), " video rows");
  // Every row's partner (itself when alone), and whether it is the second of a pair (it then makes no reduced row).
  std::vector<int64_t> partner(static_cast<size_t>(L));
  std::vector<bool> second(static_cast<size_t>(L), false);
  for (int64_t r = 0; r < L; ++r) partner[r] = r;
  for (int64_t k = 0; k + 1 < target; ++k) {
    if (k % cols % 2 != 0 || k % cols + 1 == cols) continue;
    const int64_t a = layout.video_indices[first + k], b = layout.video_indices[first + k + 1];
    partner[a] = b;
    second[b] = true;
  }
  const Tensor pos = layout.position_ids.to(DType::F64);
  const double* P = pos.ptr<double>();
  std::vector<int32_t> pairs;
  std::vector<double> positions;
  for (int64_t r = 0; r < L; ++r) {
    if (second[r]) continue;
    const int64_t b = partner[r];
    pairs.insert(pairs.end(), {static_cast<int32_t>(r), static_cast<int32_t>(b)});
    for (int64_t axis = 0; axis < 3; ++axis)
      positions.push_back(b == r ? P[r * 3 + axis] : (P[r * 3 + axis] + P[b * 3 + axis]) * 0.5);
  }
  const int64_t R = static_cast<int64_t>(pairs.size() / 2);
  TokenPairs out;
  out.pairs = Tensor::empty({R, 2}, DType::I32);
  std::copy(pairs.begin(), pairs.end(), out.pairs.ptr<int32_t>());
  out.positions = Tensor::empty({R, 3}, DType::F64);
  std::copy(positions.begin(), positions.end(), out.positions.ptr<double>());
  return out;
}

}  // namespace h3
