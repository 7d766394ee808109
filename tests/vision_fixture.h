// Test helpers over the vision fixture family (tests/fixtures/vision, tools/reference/fx_vision.py): its tiny
// Qwen3-VL conditioner as a component, and the comparisons the vision and video tests share.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/snapshot.h"
#include "models/qwen3vl/vision_grid.h"
#include "tensor/tensor.h"
#include "test_source_dir.h"

namespace h3 {

inline std::string vision_fixture(const std::string& name) {
  return test_source_dir() + "/tests/fixtures/vision/" + name;
}

// The vision family's text_encoder/ folder (conditioner + vision tower) as a snapshot component.
inline Component vision_fixture_text_encoder() {
  Component c;
  c.name = "text_encoder";
  c.present = true;
  c.dir = c.weights = vision_fixture("text_encoder");
  c.config_files = {c.dir + "/config.json"};
  return c;
}

// image_grid_thw-style I64 [n, 3] (or [3]) as grids.
inline std::vector<ImageGrid> grids_of(const Tensor& t) {
  const Tensor g = t.to(DType::I64);
  std::vector<ImageGrid> out;
  for (int64_t i = 0; i + 2 < g.numel(); i += 3)
    out.push_back({g.ptr<int64_t>()[i], g.ptr<int64_t>()[i + 1], g.ptr<int64_t>()[i + 2]});
  return out;
}

inline bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// rel L2 of `got` against `want` (any float dtype, same element count) under `tol`, printed with `what`.
inline void expect_rel(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const double e = rel_l2(got, want.to(DType::F32).reshape(got.shape()));
  EXPECT_LT(e, tol) << what;
  std::printf("  %-40s rel_l2 %.2e\n", what.c_str(), e);
}

}  // namespace h3
