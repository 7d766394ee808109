#include "backend/backend.h"

#include "util/error.h"

namespace h3 {

Tensor Backend::zeros(const Shape& shape, DType dt) {
  Tensor t = empty(shape, dt);
  fill(t, 0.f);
  return t;
}

// ---- 1-D signal ops: shape rules ----

int64_t conv1d_output_length(int64_t length, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  const int64_t span = length + 2 * padding - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

int64_t conv_transpose1d_output_length(int64_t length, int64_t kernel, int64_t stride, int64_t padding) {
  return (length - 1) * stride - 2 * padding + kernel;
}

namespace {

void check_signal(const Tensor& t, const char* op, const char* what) {
  H3_CHECK(t.dtype() == DType::F32, op, ": ", what, " must be F32, got ", t.str());
  H3_CHECK(t.ndim() == 3, op, ": ", what, " must be [batch, channels, length], got ", t.str());
}

void check_f32(const Tensor& t, const char* op, const char* what) {
  H3_CHECK(t.dtype() == DType::F32, op, ": ", what, " must be F32, got ", t.str());
}

void check_stride_padding(const char* op, int64_t stride, int64_t padding) {
  H3_CHECK(stride >= 1 && padding >= 0, op, ": stride must be >= 1 and padding >= 0, got ", stride, " and ", padding);
}

void check_conv_common(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, int64_t cin,
                       int64_t cout, int64_t stride, int64_t padding, const Tensor& y, int64_t out_length) {
  H3_CHECK(x.dim(1) == cin, op, ": input ", x.str(), " has ", x.dim(1), " channels, the weight ", w.str(), " takes ",
           cin);
  if (bias) {
    check_f32(*bias, op, "bias");
    H3_CHECK(bias->numel() == cout, op, ": bias ", bias->str(), " does not match ", cout, " output channels");
  }
  H3_CHECK(out_length >= 1, op, ": input length ", x.dim(2), " is too short for kernel ", w.dim(2), ", stride ",
           stride, ", padding ", padding);
  H3_CHECK(y.dim(0) == x.dim(0) && y.dim(1) == cout && y.dim(2) == out_length, op, ": output ", y.str(),
           " should be [", x.dim(0), ", ", cout, ", ", out_length, "]");
}

}  // namespace

void check_conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                  int64_t dilation, const Tensor& y) {
  check_signal(x, "conv1d", "input");
  check_signal(w, "conv1d", "weight");
  check_signal(y, "conv1d", "output");
  check_stride_padding("conv1d", stride, padding);
  H3_CHECK(dilation >= 1, "conv1d: dilation must be >= 1, got ", dilation);
  check_conv_common("conv1d", x, w, bias, w.dim(1), w.dim(0), stride, padding, y,
                    conv1d_output_length(x.dim(2), w.dim(2), stride, padding, dilation));
}

void check_conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                            const Tensor& y) {
  check_signal(x, "conv_transpose1d", "input");
  check_signal(w, "conv_transpose1d", "weight");
  check_signal(y, "conv_transpose1d", "output");
  check_stride_padding("conv_transpose1d", stride, padding);
  check_conv_common("conv_transpose1d", x, w, bias, w.dim(0), w.dim(1), stride, padding, y,
                    conv_transpose1d_output_length(x.dim(2), w.dim(2), stride, padding));
}

void check_snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                         const Tensor& down_filter, const Tensor& y) {
  const char* op = "snake_beta_aa";
  check_signal(x, op, "input");
  check_signal(y, op, "output");
  H3_CHECK(y.shape() == x.shape(), op, ": output ", y.str(), " must have the input's shape ", x.str());
  for (const Tensor* p : {&log_alpha, &log_beta}) {
    check_f32(*p, op, "SnakeBeta parameter");
    H3_CHECK(p->numel() == x.dim(1), op, ": SnakeBeta parameter ", p->str(), " must have one value per channel (",
             x.dim(1), ")");
  }
  for (const Tensor* f : {&up_filter, &down_filter}) {
    check_f32(*f, op, "filter");
    H3_CHECK(f->numel() >= kSnakeAaRatio, op, ": filter ", f->str(), " needs at least ", kSnakeAaRatio, " taps");
  }
}

// ---- 1-D signal ops: defaults through the CPU backend ----

namespace {

Backend& cpu_reference() {
  static const std::unique_ptr<Backend> cpu = make_cpu_backend();
  return *cpu;
}

// A CPU copy of an optional device tensor (null stays null).
struct HostCopy {
  Tensor t;
  const Tensor* ptr = nullptr;
  HostCopy(Backend& be, const Tensor* dev) {
    if (dev) {
      t = be.download(*dev);
      ptr = &t;
    }
  }
};

// Writes the CPU result `host` into the device tensor `dst`.
void store(Backend& be, const Tensor& host, Tensor& dst) {
  Tensor up = be.upload(host, dst.dtype());
  be.convert(up, dst);
}

}  // namespace

void Backend::conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                     int64_t dilation, Tensor& y) {
  check_conv1d(x, w, bias, stride, padding, dilation, y);
  HostCopy hb(*this, bias);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().conv1d(download(x), download(w), hb.ptr, stride, padding, dilation, hy);
  store(*this, hy, y);
}

void Backend::conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                               Tensor& y) {
  check_conv_transpose1d(x, w, bias, stride, padding, y);
  HostCopy hb(*this, bias);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().conv_transpose1d(download(x), download(w), hb.ptr, stride, padding, hy);
  store(*this, hy, y);
}

void Backend::snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                            const Tensor& down_filter, Tensor& y) {
  check_snake_beta_aa(x, log_alpha, log_beta, up_filter, down_filter, y);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().snake_beta_aa(download(x), download(log_alpha), download(log_beta), download(up_filter),
                                download(down_filter), hy);
  store(*this, hy, y);
}

void Backend::divide(Tensor& x, float divisor) {
  check_f32(x, "divide", "input");
  Tensor hx = download(x);
  cpu_reference().divide(hx, divisor);
  store(*this, hx, x);
}

#ifndef H3_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend() { fail("this build of h3 has no CUDA backend (rebuild with nvcc available)"); }
bool cuda_backend_available() { return false; }
#endif

std::unique_ptr<Backend> make_backend(const std::string& which) {
  if (which == "cpu") return make_cpu_backend();
  if (which == "cuda") return make_cuda_backend();
  H3_CHECK(which == "auto", "--device must be cpu, cuda or auto, got '", which, "'");
  return cuda_backend_available() ? make_cuda_backend() : make_cpu_backend();
}

}  // namespace h3
