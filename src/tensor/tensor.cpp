#include "tensor/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace h3 {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor Tensor::empty(Shape shape, DType dt) {
  for (int64_t d : shape) H3_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dt;
  size_t bytes = t.nbytes();
  size_t alloc = (bytes + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  H3_CHECK(p != nullptr, "out of host memory allocating ", bytes, " bytes");
  t.data_ = p;
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dt) {
  Tensor t = empty(std::move(shape), dt);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::from_f32(Shape shape, const std::vector<float>& values) {
  Tensor t = empty(std::move(shape), DType::F32);
  H3_CHECK(static_cast<size_t>(t.numel()) == values.size(), "from_f32: ", values.size(),
           " values for shape ", shape_str(t.shape_));
  std::memcpy(t.data_, values.data(), values.size() * 4);
  return t;
}

Tensor Tensor::view(void* data, Shape shape, DType dt, std::shared_ptr<void> owner, Device dev) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dt;
  t.owner_ = std::move(owner);
  t.device_ = dev;
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  int j = i < 0 ? i + n : i;
  H3_CHECK(j >= 0 && j < n, "dimension ", i, " out of range for tensor ", str());
  return shape_[j];
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      H3_CHECK(infer < 0, "reshape: more than one -1 in ", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    H3_CHECK(known > 0 && numel() % known == 0, "reshape: cannot infer ", shape_str(shape), " from ", str());
    shape[infer] = numel() / known;
  }
  H3_CHECK(shape_numel(shape) == numel(), "reshape: ", str(), " cannot become ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  H3_CHECK(ndim() >= 1, "slice of a 0-d tensor");
  H3_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice [", begin, ", ", end, ") out of range for ",
           str());
  int64_t row = numel() / (shape_[0] ? shape_[0] : 1);
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

double Tensor::at(int64_t i) const {
  H3_CHECK(device_ == Device::CPU, "at() on a device tensor");
  switch (dtype_) {
    case DType::F64: return static_cast<const double*>(data_)[i];
    case DType::F32: return static_cast<const float*>(data_)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data_)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data_)[i]);
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(data_)[i]);
    case DType::I32: return static_cast<const int32_t*>(data_)[i];
    case DType::I16: return static_cast<const int16_t*>(data_)[i];
    case DType::I8: return static_cast<const int8_t*>(data_)[i];
    case DType::U8: return static_cast<const uint8_t*>(data_)[i];
    case DType::Bool: return static_cast<const uint8_t*>(data_)[i] ? 1.0 : 0.0;
  }
  return 0.0;
}

Tensor Tensor::to(DType dt) const {
  H3_CHECK(device_ == Device::CPU, "to(): tensor is not on the CPU");
  if (dt == dtype_) return clone();
  Tensor out = empty(shape_, dt);
  int64_t n = numel();
  if (dtype_ == DType::BF16 && dt == DType::F32) {  // the hot conversion: widen weights
    const uint16_t* s = u16();
    float* d = out.ptr<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
    return out;
  }
  if (dtype_ == DType::F32 && dt == DType::BF16) {
    const float* s = ptr<float>();
    uint16_t* d = out.u16();
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
    return out;
  }
  for (int64_t i = 0; i < n; ++i) {
    double v = at(i);
    switch (dt) {
      case DType::F64: out.ptr<double>()[i] = v; break;
      case DType::F32: out.ptr<float>()[i] = static_cast<float>(v); break;
      case DType::F16: out.u16()[i] = f32_to_f16(static_cast<float>(v)); break;
      case DType::BF16: out.u16()[i] = f32_to_bf16(static_cast<float>(v)); break;
      case DType::I64: out.ptr<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DType::I32: out.ptr<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DType::I16: out.ptr<int16_t>()[i] = static_cast<int16_t>(v); break;
      case DType::I8: out.ptr<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::U8: out.ptr<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::Bool: static_cast<uint8_t*>(out.data())[i] = v != 0.0; break;
    }
  }
  return out;
}

Tensor Tensor::clone() const {
  H3_CHECK(device_ == Device::CPU, "clone(): tensor is not on the CPU");
  Tensor out = empty(shape_, dtype_);
  if (nbytes()) std::memcpy(out.data_, data_, nbytes());
  return out;
}

std::string Tensor::str() const { return cat(dtype_name(dtype_), shape_str(shape_)); }

void Tensor::fail_access(const char* as) const { fail("tensor of dtype ", dtype_name(dtype_), " accessed as ", as); }

double rel_l2(const Tensor& a, const Tensor& ref) {
  H3_CHECK(a.numel() == ref.numel(), "rel_l2: ", a.str(), " vs ", ref.str());
  long double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    long double d = a.at(i) - ref.at(i);
    num += d * d;
    den += static_cast<long double>(ref.at(i)) * ref.at(i);
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return static_cast<double>(std::sqrt(num / den));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  H3_CHECK(a.numel() == b.numel(), "max_abs_diff: ", a.str(), " vs ", b.str());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double d = std::fabs(a.at(i) - b.at(i));
    if (std::isnan(d)) return NAN;
    if (d > m) m = d;
  }
  return m;
}

double cosine(const Tensor& a, const Tensor& b) {
  H3_CHECK(a.numel() == b.numel(), "cosine: ", a.str(), " vs ", b.str());
  long double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    long double x = a.at(i), y = b.at(i);
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  if (aa == 0 || bb == 0) return aa == bb ? 1.0 : 0.0;
  return static_cast<double>(ab / std::sqrt(aa * bb));
}

}  // namespace h3
