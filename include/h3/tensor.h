// Tensor: a contiguous, row-major block of elements of one dtype on one device, with shared ownership.
// A tensor is either owning (allocated by empty()/zeros() or by a backend) or a view into storage owned by
// someone else (a memory-mapped safetensors file, a larger tensor). Copies of a Tensor share the storage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace h3 {

// Element types (bf16 and f16 are stored as raw uint16_t).
enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

size_t dtype_size(DType dt);
const char* dtype_name(DType dt);                              // safetensors spelling: "F32", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view name);  // inverse of dtype_name
bool dtype_is_float(DType dt);

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

  // Typed access; throws h3::Error when T is not the tensor's dtype.
  template <typename T>
  T* ptr() const {
    if (dtype_of<T>::value != dtype_) fail_access(dtype_name(dtype_of<T>::value));
    return static_cast<T*>(data_);
  }
  uint16_t* u16() const {  // raw access for bf16 / f16 storage
    if (dtype_ != DType::BF16 && dtype_ != DType::F16) fail_access("16-bit float");
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
  // Throws h3::Error: "tensor of dtype X accessed as `as`".
  [[noreturn]] void fail_access(const char* as) const;

  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  std::shared_ptr<void> owner_;
};

}  // namespace h3
