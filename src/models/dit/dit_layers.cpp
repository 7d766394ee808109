#include "models/dit/dit_layers.h"

#include <cmath>
#include <utility>

#include "models/dit/dit.h"
#include "util/error.h"

namespace h3 {

int64_t min_dit_layers(int64_t blocks) { return (7 * blocks + 9) / 10; }

bool dit_block_protected(int64_t block, int64_t blocks) { return block <= 1 || block == blocks - 1; }

double dit_gate_score(const Tensor& table) {
  H3_CHECK(table.ndim() == 3 && table.dim(1) == kAdaLnParams, "dit_gate_score: an AdaLN table is [rows, ",
           kAdaLnParams, ", D], got ", table.str());
  const Tensor t = table.to_f32();
  const float* p = t.ptr<float>();
  const int64_t rows = t.dim(0), D = t.dim(2);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    for (int gate : {kGateMsa, kGateMlp}) {
      const float* v = p + (r * kAdaLnParams + gate) * D;
      for (int64_t c = 0; c < D; ++c) total += std::fabs(static_cast<double>(v[c]));
    }
  return total / static_cast<double>(rows * 2 * D);
}

std::vector<int64_t> thin_by_gate_scores(const std::vector<double>& scores, int64_t keep) {
  const int64_t blocks = static_cast<int64_t>(scores.size());
  H3_CHECK(keep >= min_dit_layers(blocks) && keep <= blocks, "thin_by_gate_scores: ", keep, " blocks to keep of ",
           blocks, " (the range is ", min_dit_layers(blocks), "..", blocks, ")");
  std::vector<int64_t> order;
  for (int64_t b = 0; b < blocks; ++b)
    if (!dit_block_protected(b, blocks)) order.push_back(b);
  const int64_t drop = blocks - keep;
  std::vector<bool> dropped(static_cast<size_t>(blocks), false);
  for (int64_t k = 0; k < drop; ++k) {
    size_t least = static_cast<size_t>(k);
    for (size_t j = least + 1; j < order.size(); ++j)
      if (scores[order[j]] < scores[order[least]]) least = j;
    std::swap(order[k], order[least]);
    dropped[order[k]] = true;
  }
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < blocks; ++b)
    if (!dropped[b]) kept.push_back(b);
  return kept;
}

}  // namespace h3
