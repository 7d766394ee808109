// Token reduction (h3.c's --token-reduction, its README's "Token-reduction internals"): inside a window of middle
// blocks, each pair of horizontally adjacent target-video rows — patch columns 2k and 2k + 1 of one patch row of one
// frame — runs as one row, their mean, at the mean of their rotary positions; an odd width's last column runs
// alone, and so does every other row (text, audio, keyframe and reference conditions), unchanged. Before the first
// block past the window, every row comes back as its value on entering plus the update of the row it ran as
// (Backend::pool_row_pairs / unpool_row_pairs): within-pair detail is kept, the reduced blocks contribute their
// update. H3_DISABLE_TOKEN_REDUCTION=1 is the exact twin (the full forward).
#pragma once
#include <cstdint>

#include "models/dit/dit.h"
#include "tensor/tensor.h"

namespace h3 {

// Which checkpoint blocks run reduced at pass p: begin <= block < end_at(p), the window being wider during the first
// early_passes passes of a request (coarse structure tolerates a deeper reduced stack while the first noisy samples
// form; h3.c restores earlier once detail resolves). A block --layers skipped changes nothing: the rows are pooled
// before the first block run inside the window and restored before the first one run past it.
struct TokenReductionWindow {
  int64_t begin = 0, end = 0, early_passes = 0, early_end = 0;
  int64_t end_at(int64_t pass) const { return pass < early_passes ? early_end : end; }
  bool reduces(int64_t block, int64_t pass) const { return block >= begin && block < end_at(pass); }
};

// Passes of the early phase (h3.c's 10: a pass count, the same for every block count).
constexpr int64_t kTokenReductionEarlyPasses = 10;

// The window for a transformer of `blocks` blocks. h3.c's, for 50 blocks, reduces from block 4, restores before
// block 40 during the first 10 passes and before block 30 after them; here those three are the same fractions of
// `blocks` (2/25, 3/5, 4/5, rounded to nearest), with begin at least 1 so that the first block always runs on every
// row (an interval whose end does not pass its begin reduces nothing). The environment overrides it as h3.c's does:
// H3_TOKEN_REDUCTION_BLOCKS=BEGIN:END the later window (0 <= BEGIN < END <= blocks; the early phase then applies only
// while END is before its default end), H3_TOKEN_REDUCTION_EARLY=PASSES:END the early phase (PASSES 1..1000, END
// after the later END and at most `blocks`), or 0 for none. Throws h3::Error naming the variable and its rule.
TokenReductionWindow token_reduction_window(int64_t blocks);

// The pairs of one layout: Backend::pool_row_pairs' table (host I32 [R, 2], in sequence order — a row that starts a
// pair or stays alone makes one reduced row) and the rotary positions of the reduced rows (host F64 [R, 3]: a pair's
// mean, a lone row's own). The target video is layout.target_video_grid (throws when it is not given).
struct TokenPairs {
  Tensor pairs;
  Tensor positions;
};
TokenPairs token_pairs(const DitLayout& layout);

}  // namespace h3
