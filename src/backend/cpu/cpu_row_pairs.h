// The CPU backend's row-pair ops (definitions in backend/backend.h): direct transcriptions, float32 arithmetic on
// host tensors of any float dtype (the Backend defaults hand them device dtypes), each value rounded once to the
// dtype it is stored in.
#pragma once
#include "tensor/tensor.h"

namespace h3::cpu {

void pool_row_pairs(const Tensor& full, const Tensor& pairs, Tensor& reduced);
void unpool_row_pairs(const Tensor& reduced, const Tensor& pairs, Tensor& full);

}  // namespace h3::cpu
