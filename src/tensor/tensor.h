// Tensor: a contiguous, row-major block of elements of one dtype on one device, with shared ownership.
// A tensor is either owning (allocated by empty()/zeros() or by a backend) or a view into storage owned by
// someone else (a memory-mapped safetensors file, a larger tensor). Copies of a Tensor share the storage.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "util/error.h"

namespace h3 {

enum class Device : uint8_t { CPU, CUDA };

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

template <typename T>
struct dtype_of;
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::I16; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::I8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };

class Tensor {
 public:
  Tensor() = default;

  // Owning CPU tensors (64-byte aligned). empty() leaves the contents uninitialized.
  static Tensor empty(Shape shape, DType dt);
  static Tensor zeros(Shape shape, DType dt);
  // A CPU f32 tensor from values (shape must match the count).
  static Tensor from_f32(Shape shape, const std::vector<float>& values);
  // A view on memory kept alive by `owner` (may be null when the caller guarantees the lifetime).
  static Tensor view(void* data, Shape shape, DType dt, std::shared_ptr<void> owner, Device dev = Device::CPU);

  bool defined() const { return data_ != nullptr || (!shape_.empty() && numel() == 0); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  void* data() const { return data_; }
  const std::shared_ptr<void>& owner() const { return owner_; }

  template <typename T>
  T* ptr() const {
    H3_CHECK(dtype_of<T>::value == dtype_, "tensor of dtype ", dtype_name(dtype_), " accessed as ",
             dtype_name(dtype_of<T>::value));
    return static_cast<T*>(data_);
  }
  uint16_t* u16() const {  // raw access for bf16 / f16 storage
    H3_CHECK(dtype_ == DType::BF16 || dtype_ == DType::F16, "tensor of dtype ", dtype_name(dtype_),
             " accessed as 16-bit float");
    return static_cast<uint16_t*>(data_);
  }

  // Views (no copy).
  Tensor reshape(Shape shape) const;
  Tensor slice(int64_t begin, int64_t end) const;  // rows [begin, end) along dim 0

  // CPU conversions (copies). to_f32/to_f64 accept every float and integer dtype.
  Tensor to(DType dt) const;
  Tensor to_f32() const { return to(DType::F32); }
  Tensor clone() const;

  // Element i (flat index) read as double, for CPU tensors of any dtype.
  double at(int64_t i) const;

  std::string str() const;  // "F32[2, 3]"

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  std::shared_ptr<void> owner_;
};

// Numerical comparison helpers (CPU tensors of any float dtype).
double rel_l2(const Tensor& a, const Tensor& ref);   // ||a - ref|| / ||ref||
double max_abs_diff(const Tensor& a, const Tensor& b);
double cosine(const Tensor& a, const Tensor& b);

}  // namespace h3
