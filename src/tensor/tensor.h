// Tensor (include/h3/tensor.h) and the numerical comparisons the tests and tools make.
#pragma once
#include "h3/tensor.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace h3 {

// Numerical comparison helpers (CPU tensors of any float dtype).
double rel_l2(const Tensor& a, const Tensor& ref);   // ||a - ref|| / ||ref||
double max_abs_diff(const Tensor& a, const Tensor& b);
double cosine(const Tensor& a, const Tensor& b);

}  // namespace h3
