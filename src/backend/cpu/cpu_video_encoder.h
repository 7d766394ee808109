// The CPU backend's video VAE encoder ops (definitions in backend/backend.h): conv3d as its definition reads — the
// padded input built once, then a direct correlation accumulated in float32 tap by tap over output rows — and the
// per-frame group norm with its statistics summed in float64. Threaded over (output channel, frame) and (group,
// frame) pairs.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace h3::cpu {

void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, Tensor& y);
void frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, float eps, bool silu,
                      Tensor& y);

}  // namespace h3::cpu
