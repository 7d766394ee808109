// --layers (h3.c's layer thinning, its README's "Layer thinning ranks the checkpoint's actual AdaLN gates"): which
// of the checkpoint's blocks a request runs. The others are skipped: the residual stream goes from the block before
// to the block after unchanged.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace h3 {

// The fewest blocks --layers accepts for a transformer of `blocks` blocks: seven tenths of them, rounded up (h3.c's
// 35 of the release's 50). It always keeps the protected blocks.
int64_t min_dit_layers(int64_t blocks);

// The blocks never dropped: the first two and the last (h3.c: they establish and close the residual stream; block 1
// has a small gate but proved structurally essential in its A/B renders).
bool dit_block_protected(int64_t block, int64_t blocks);

// The score h3.c ranks a block by (h3_dit_schedule_gate_score), from its AdaLN table [3·T, 6, D] (host, any float
// dtype; rows 3·t + modality): the mean of |gate_msa| and |gate_mlp| over every row — every timestep of the request,
// all three modalities — and every channel, summed in double.
double dit_gate_score(const Tensor& table);

// The `keep` blocks that run (ascending) for one gate score per checkpoint block: the protected blocks, and of the
// others all but the blocks − keep with the lowest scores. They are picked in h3.c's order, a selection sort over
// the unprotected blocks in block order (position by position, the first lowest score of the rest in the current
// order, strict less-than, swapped into place), so exact ties fall as h3.c's fall. keep in
// [min_dit_layers(blocks), blocks].
std::vector<int64_t> thin_by_gate_scores(const std::vector<double>& scores, int64_t keep);

}  // namespace h3
