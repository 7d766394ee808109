// The FP8 activations' producers (issue 18; backend.h's rms_norm_modulate_fp8, gated_residual_modulate_fp8,
// swiglu_fp8, self_attention_fp8 of the bf16 attention and of the attention computed in FP8) and the product of a
// pre-quantized activation on the CPU backend, suite Fp8Fused: each producer gives the codes and scales of its op
// followed by the emulation's quantization (backend/cpu/cpu_fp8.h) bit for bit — with row counts on both sides of
// the block layout's multiple of 4 — and linear_fp8 equals quantize_activation_fp8 then linear_fp8_quantized.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_fp8.h"
#include "cpu_forwarding_backend.h"
#include "dit_test_models.h"
#include "models/dit/dit_random.h"
#include "fp8_producers.h"
#include "random_tensor.h"

namespace h3 {
namespace {

using fp8_test::Producer;

// The bf16 op of producer p on the CPU backend, then the emulation's quantization (written out here, not through
// the Backend default the CPU backend inherits).
Fp8Activation op_then_quantize(Backend& be, Producer p, const fp8_test::ProducerCase& c, Fp8Scaling s,
                               Tensor* x_after) {
  Tensor x = c.x.clone(), h = Tensor::empty({c.rows, c.D}, DType::F32);
  switch (p) {
    case Producer::Modulate:
      be.rms_norm_modulate(x, c.w, 1e-6f, c.table, fp8_test::kShift, fp8_test::kScale, c.idx, h);
      break;
    case Producer::GatedModulate:
      be.gated_residual_modulate(x, c.y, c.table, fp8_test::kGate, c.idx, c.w, 1e-6f, c.table, fp8_test::kShift,
                                 fp8_test::kScale, c.idx, h);
      *x_after = x;
      break;
    case Producer::Swiglu:
      be.swiglu(c.u, true, h);
      break;
    case Producer::Attention:
    case Producer::AttentionInFp8: {
      Tensor qkv = c.qkv.clone();
      AttentionSpec spec;
      spec.heads_q = spec.heads_kv = fp8_test::kHeads;
      spec.head_dim = static_cast<int>(c.D / fp8_test::kHeads);
      spec.scale = 1.f / std::sqrt(static_cast<float>(spec.head_dim));
      if (p == Producer::AttentionInFp8)
        be.self_attention_in_fp8(qkv, spec, h);
      else
        be.self_attention(qkv, spec, h);
      break;
    }
  }
  return cpu::quantize_activation_fp8(h, s);
}

TEST(Fp8Fused, ProducersEqualTheOpThenTheQuantization) {
  auto be = make_cpu_backend();
  // 37 rows: a block layout's main part of 36 and a tail of 1 + 3 padding rows; 2: the tail alone; 264 columns:
  // two full 128-column groups and a partial one.
  for (const int64_t rows : {37, 2, 40}) {
    const fp8_test::ProducerCase c = fp8_test::make_case(rows, 264, static_cast<uint32_t>(rows));
    for (Producer p : {Producer::Modulate, Producer::GatedModulate, Producer::Swiglu, Producer::Attention,
                       Producer::AttentionInFp8})
      for (Fp8Scaling s : {Fp8Scaling::Channel, Fp8Scaling::Block}) {
        const std::string what = cat(fp8_test::name_of(p), " ", fp8_test::name_of(s), ", ", rows, " rows");
        Tensor x_want, x_got;
        const Fp8Activation want = op_then_quantize(*be, p, c, s, &x_want);
        const Fp8Activation got = fp8_test::run_producer(*be, p, c, s, false, &x_got);
        fp8_test::expect_same(got, want, what);
        if (p == Producer::GatedModulate) {
          EXPECT_TRUE(dit_test::bit_equal(x_got, x_want)) << what << ": the residual";
        }
      }
  }
}

TEST(Fp8Fused, LinearOfAQuantizedActivationIsLinearFp8) {
  auto be = make_cpu_backend();
  std::mt19937 g(5);
  const int64_t K = 256, N = 48;
  const Tensor w = randn({N, K}, g, 0.1f), bias = randn({N}, g);
  for (const int64_t M : {7, 8, 3})
    for (Fp8Scaling s : {Fp8Scaling::Channel, Fp8Scaling::Block}) {
      const Tensor x = randn({M, K}, g);
      const Fp8Weight q = be->quantize_weight_fp8(w, s);
      Tensor y = Tensor::empty({M, N}, DType::F32), yq = Tensor::empty({M, N}, DType::F32);
      be->linear_fp8(x, q, &bias, y);
      Fp8Activation xq;
      be->quantize_activation_fp8(x, s, xq);
      EXPECT_EQ(xq.rows, M);
      be->linear_fp8_quantized(xq, q, &bias, yq);
      EXPECT_TRUE(dit_test::bit_equal(y, yq)) << fp8_test::name_of(s) << " " << M;
      // An activation quantized the other way is refused, not misread.
      Fp8Activation other;
      be->quantize_activation_fp8(x, s == Fp8Scaling::Channel ? Fp8Scaling::Block : Fp8Scaling::Channel, other);
      EXPECT_THROW(be->linear_fp8_quantized(other, q, &bias, yq), Error);
    }
}

// The CPU backend's arithmetic with the FP8 entry points counted: the products of pre-quantized activations, the
// separate-pass entry (linear_fp8) and each producer.
class Fp8CountingBackend : public CpuForwardingBackend {
 public:
  std::string name() const override { return "fp8-counting"; }
  Fp8Weight quantize_weight_fp8(const Tensor& w, Fp8Scaling s) override { return fp8_->quantize_weight_fp8(w, s); }
  void quantize_activation_fp8(const Tensor& x, Fp8Scaling s, Fp8Activation& q) override {
    fp8_->quantize_activation_fp8(x, s, q);
  }
  void linear_fp8_quantized(const Fp8Activation& x, const Fp8Weight& w, const Tensor* b, Tensor& y) override {
    ++products;
    fp8_->linear_fp8_quantized(x, w, b, y);
  }
  void linear_fp8(const Tensor& x, const Fp8Weight& w, const Tensor* b, Tensor& y) override {
    ++separate;
    Backend::linear_fp8(x, w, b, y);
  }
  void rms_norm_modulate_fp8(const Tensor& x, const Tensor& w, float e, const Tensor& t, int sh, int sc,
                             const Tensor& i, Fp8Scaling s, Fp8Activation& q) override {
    ++modulations;
    Backend::rms_norm_modulate_fp8(x, w, e, t, sh, sc, i, s, q);
  }
  void gated_residual_modulate_fp8(Tensor& x, const Tensor& y, const Tensor& gt, int g, const Tensor& gi,
                                   const Tensor& w, float e, const Tensor& t, int sh, int sc, const Tensor& i,
                                   Fp8Scaling s, Fp8Activation& q) override {
    ++modulations;
    Backend::gated_residual_modulate_fp8(x, y, gt, g, gi, w, e, t, sh, sc, i, s, q);
  }
  void swiglu_fp8(const Tensor& u, bool v, Fp8Scaling s, Fp8Activation& q) override {
    ++swiglus;
    Backend::swiglu_fp8(u, v, s, q);
  }
  void self_attention_fp8(Tensor& qkv, const AttentionSpec& spec, bool in_fp8, Fp8Scaling s,
                          Fp8Activation& q) override {
    ++attentions;
    Backend::self_attention_fp8(qkv, spec, in_fp8, s, q);
  }
  void self_attention_in_fp8(Tensor& qkv, const AttentionSpec& spec, Tensor& out) override {
    ++attentions_in_fp8;
    fp8_->self_attention_in_fp8(qkv, spec, out);
  }
  int products = 0, separate = 0, modulations = 0, swiglus = 0, attentions = 0, attentions_in_fp8 = 0;

 private:
  std::unique_ptr<Backend> fp8_ = make_cpu_backend();
};

// Every block product of an FP8 DiT reads an activation its producer quantized: per block, the q|k|v and fc1 inputs
// from the modulations (norm1, norm2), out's from the attention, fc2's from SwiGLU; none through the separate pass.
// With fp8_attention the attention itself is computed in FP8 (self_attention_in_fp8, once per block) and its output
// still reaches the out product through the producer: the forward moves (the attention really is FP8). Either way
// the forward is the CPU backend's bit for bit.
TEST(Fp8Fused, DitProductsReadProducerQuantizedActivations) {
  DitConfig c = dit_test::config_a();
  c.hidden_size = 32;  // every block product a multiple of 16: qkv [96, 32], out [32, 32], fc1 [96, 32], fc2 [32, 48]
  c.ffn_dim = 48;
  c.num_layers = 3;
  const DitForwardArgs args = dit_test::make_case(c, 5, 6, 12, {0.3f, 0.8f}, 11, true);
  for (Fp8Scaling s : {Fp8Scaling::Channel, Fp8Scaling::Block}) {
    DitOutput bf16_attention;
    for (bool in_fp8 : {false, true}) {
      const std::string what = std::string(fp8_test::name_of(s)) + (in_fp8 ? " +attention in fp8" : "");
      RandomDitOptions o;
      o.precision = {true, s, in_fp8};
      Fp8CountingBackend counting;
      auto cpu = make_cpu_backend();
      const DitOutput got = random_dit(counting, c, o)->forward(args);
      const DitOutput want = random_dit(*cpu, c, o)->forward(args);
      const int blocks = static_cast<int>(c.num_layers);
      EXPECT_EQ(counting.separate, 0) << what;
      EXPECT_EQ(counting.products, 4 * blocks) << what;
      EXPECT_EQ(counting.modulations, 2 * blocks) << what;
      EXPECT_EQ(counting.swiglus, blocks) << what;
      EXPECT_EQ(counting.attentions, blocks) << what;
      EXPECT_EQ(counting.attentions_in_fp8, in_fp8 ? blocks : 0) << what;
      EXPECT_TRUE(dit_test::same_output(got, want)) << what;
      if (in_fp8)
        EXPECT_FALSE(dit_test::same_output(got, bf16_attention)) << what;
      else
        bf16_attention = got;
    }
  }
}

}  // namespace
}  // namespace h3
