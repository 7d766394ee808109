// The FP8 activation producers' test cases (Backend::rms_norm_modulate_fp8, gated_residual_modulate_fp8,
// swiglu_fp8, self_attention_fp8): inputs made on the host, each producer run on a backend either as the backend
// implements it or as backend.h defines it (the bf16 op into a tensor of the activation dtype, then
// quantize_activation_fp8: the Backend defaults, called non-virtually). Shared by test_fp8_fused.cpp (CPU) and
// test_fp8_fused_cuda.cpp.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "backend/backend.h"
#include "random_tensor.h"

namespace h3::fp8_test {

// Attention: self_attention_fp8 of the bf16 attention; AttentionInFp8: of the attention computed in FP8.
enum class Producer { Modulate, GatedModulate, Swiglu, Attention, AttentionInFp8 };
inline const char* name_of(Producer p) {
  switch (p) {
    case Producer::Modulate: return "rms_norm_modulate_fp8";
    case Producer::GatedModulate: return "gated_residual_modulate_fp8";
    case Producer::Swiglu: return "swiglu_fp8";
    case Producer::Attention: return "self_attention_fp8";
    default: return "self_attention_fp8 (attention in fp8)";
  }
}
inline const char* name_of(Fp8Scaling s) { return s == Fp8Scaling::Channel ? "channel" : "block"; }

constexpr int kTableRows = 3, kParams = 6, kShift = 0, kScale = 1, kGate = 2;
constexpr int kHeads = 2;

// Host inputs for `rows` rows of width D (D = kHeads · head_dim for the attention; its head_dim = D / kHeads), every
// value a bf16 number (so a bf16 backend and the CPU's f32 start from the same inputs).
struct ProducerCase {
  int64_t rows = 0, D = 0;
  Tensor x, y, w, table, idx, u, qkv;
};

inline ProducerCase make_case(int64_t rows, int64_t D, uint32_t seed) {
  std::mt19937 g(seed);
  const auto randn_bf16 = [&](Shape shape, float stddev) { return randn(shape, g, stddev).to(DType::BF16).to_f32(); };
  ProducerCase c;
  c.rows = rows;
  c.D = D;
  c.x = randn_bf16({rows, D}, 2.f);
  c.y = randn_bf16({rows, D}, 1.f);
  c.w = randn_bf16({D}, 0.3f);
  c.table = randn_bf16({kTableRows, kParams, D}, 0.5f);
  c.idx = Tensor::empty({rows}, DType::I32);
  for (int64_t r = 0; r < rows; ++r) c.idx.ptr<int32_t>()[r] = static_cast<int32_t>((r * 7) % kTableRows);
  c.u = randn_bf16({rows, 2 * D}, 1.5f);
  c.u.ptr<float>()[5] = 40.f;  // one dominant value: its row's (or block's) scale follows it
  c.qkv = randn_bf16({rows, 3 * D}, 1.f);
  return c;
}

// The producer's output on `be`, its inputs uploaded in `dt` (default: the backend's activation dtype).
// defining: backend.h's definition (the Backend default) instead of the backend's own implementation. x_after: the
// residual after a gated producer.
inline Fp8Activation run_producer(Backend& be, Producer p, const ProducerCase& c, Fp8Scaling s, bool defining,
                                  Tensor* x_after = nullptr, std::optional<DType> upload = std::nullopt) {
  const DType dt = upload.value_or(be.activation_dtype());
  Tensor x = be.upload(c.x, dt), w = be.upload(c.w, dt), table = be.upload(c.table, dt);
  const Tensor idx = be.upload(c.idx, DType::I32);
  Fp8Activation q;
  switch (p) {
    case Producer::Modulate:
      if (defining)
        be.Backend::rms_norm_modulate_fp8(x, w, 1e-6f, table, kShift, kScale, idx, s, q);
      else
        be.rms_norm_modulate_fp8(x, w, 1e-6f, table, kShift, kScale, idx, s, q);
      break;
    case Producer::GatedModulate: {
      const Tensor y = be.upload(c.y, dt);
      if (defining)
        be.Backend::gated_residual_modulate_fp8(x, y, table, kGate, idx, w, 1e-6f, table, kShift, kScale, idx, s, q);
      else
        be.gated_residual_modulate_fp8(x, y, table, kGate, idx, w, 1e-6f, table, kShift, kScale, idx, s, q);
      if (x_after) *x_after = be.download(x);
      break;
    }
    case Producer::Swiglu: {
      const Tensor u = be.upload(c.u, dt);
      if (defining)
        be.Backend::swiglu_fp8(u, true, s, q);
      else
        be.swiglu_fp8(u, true, s, q);
      break;
    }
    case Producer::Attention:
    case Producer::AttentionInFp8: {
      const bool in_fp8 = p == Producer::AttentionInFp8;
      Tensor qkv = be.upload(c.qkv, dt);
      AttentionSpec spec;
      spec.heads_q = spec.heads_kv = kHeads;
      spec.head_dim = static_cast<int>(c.D / kHeads);
      spec.scale = 1.f / std::sqrt(static_cast<float>(spec.head_dim));
      if (defining)
        be.Backend::self_attention_fp8(qkv, spec, in_fp8, s, q);
      else
        be.self_attention_fp8(qkv, spec, in_fp8, s, q);
      break;
    }
  }
  Fp8Activation host{be.download(q.codes), be.download(q.scale), q.rows, q.scaling};
  return host;
}

// a and b (host) hold the same codes and scales, bit for bit.
inline void expect_same(const Fp8Activation& a, const Fp8Activation& b, const std::string& what) {
  ASSERT_EQ(a.rows, b.rows) << what;
  ASSERT_EQ(a.scaling, b.scaling) << what;
  ASSERT_EQ(a.codes.shape(), b.codes.shape()) << what;
  ASSERT_EQ(a.scale.shape(), b.scale.shape()) << what;
  int64_t codes = 0, scales = 0;
  for (int64_t i = 0; i < a.codes.numel(); ++i) codes += a.codes.ptr<uint8_t>()[i] != b.codes.ptr<uint8_t>()[i];
  for (int64_t i = 0; i < a.scale.numel(); ++i)
    scales += std::memcmp(a.scale.ptr<float>() + i, b.scale.ptr<float>() + i, sizeof(float)) != 0;
  std::printf("[ fp8 fused ] %s: %lld of %lld codes, %lld of %lld scales differ\n", what.c_str(),
              static_cast<long long>(codes), static_cast<long long>(a.codes.numel()), static_cast<long long>(scales),
              static_cast<long long>(a.scale.numel()));
  EXPECT_EQ(codes, 0) << what;
  EXPECT_EQ(scales, 0) << what;
}

}  // namespace h3::fp8_test
