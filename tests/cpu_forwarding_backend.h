// Test helper: a backend that forwards every op the Backend interface requires to the CPU backend and keeps Backend's
// default implementations of everything else. Tests derive from it to count calls or to report a different device.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace h3 {

class CpuForwardingBackend : public Backend {
 public:
  Device device() const override { return cpu_->device(); }
  DType activation_dtype() const override { return DType::F32; }
  Tensor empty(const Shape& s, DType dt) override { return cpu_->empty(s, dt); }
  Tensor upload(const Tensor& h, DType dt) override { return cpu_->upload(h, dt); }
  Tensor download(const Tensor& t) override { return cpu_->download(t); }
  void convert(const Tensor& s, Tensor& d) override { cpu_->convert(s, d); }
  void fill(Tensor& t, float v) override { cpu_->fill(t, v); }
  void synchronize() override {}
  void linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) override { cpu_->linear(x, w, b, y); }
  void rms_norm(const Tensor& x, const Tensor* w, float e, Tensor& y) override { cpu_->rms_norm(x, w, e, y); }
  void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float e, Tensor& y) override {
    cpu_->layer_norm(x, w, b, e, y);
  }
  void rms_norm_modulate(const Tensor& x, const Tensor& w, float e, const Tensor& t, int sh, int sc, const Tensor& i,
                         Tensor& y) override {
    cpu_->rms_norm_modulate(x, w, e, t, sh, sc, i, y);
  }
  void gated_residual(Tensor& x, const Tensor& y, const Tensor& t, int g, const Tensor& i) override {
    cpu_->gated_residual(x, y, t, g, i);
  }
  void residual_add(Tensor& x, const Tensor& y, const Tensor* s) override { cpu_->residual_add(x, y, s); }
  void swiglu(const Tensor& u, bool v, Tensor& a) override { cpu_->swiglu(u, v, a); }
  void silu(const Tensor& x, Tensor& y) override { cpu_->silu(x, y); }
  void gelu(const Tensor& x, bool t, Tensor& y) override { cpu_->gelu(x, t, y); }
  void self_attention(Tensor& qkv, const AttentionSpec& s, Tensor& o) override { cpu_->self_attention(qkv, s, o); }
  void scatter_rows(const Tensor& s, const Tensor& i, Tensor& d) override { cpu_->scatter_rows(s, i, d); }
  void gather_rows(const Tensor& s, const Tensor& i, Tensor& d) override { cpu_->gather_rows(s, i, d); }

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
};

}  // namespace h3
