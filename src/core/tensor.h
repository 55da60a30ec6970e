// Tensor: a typed, shaped view of a reference-counted buffer. Copies are cheap
// (they share the buffer), which lets Reshape/Identity/Squeeze alias their input
// and lets subgraphs see outer-scope values without copying.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/small_vector.h"
#include "core/status.h"

namespace strata {

// Up to 8 dims inline: shapes are built and copied on every run, and must not allocate.
using Shape = SmallVector<int64_t, 8>;

// Product of dims, with overflow and negative-dim checks. Errors name `what`.
Result<int64_t> CheckedNumElements(const Shape& shape, const std::string& what = "tensor");
// Product of dims without checks (shape must already be validated).
int64_t NumElements(const Shape& shape);
// "[1,3,224,224]"
std::string ShapeToString(const Shape& shape);

// Raw memory owned by someone. data() is 64-byte aligned for buffers made by Allocator.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
  // Frees the memory now, for every tensor sharing this buffer; afterwards data() is null and
  // size() is 0. Returns false (and keeps the memory) when this kind of buffer cannot.
  // Used at session creation to drop constants whose kernels keep a packed copy
  // (core/constant_release.h); never call it while another thread may read the buffer.
  virtual bool ReleaseStorage() { return false; }
  // Whether data() would first read the bytes from the model file (a deferred weight
  // payload, core/deferred_payload.h): a packer can then read it block by block with
  // ReadBytes instead, and the payload never becomes resident.
  virtual bool OnDisk() const { return false; }
  // Copies bytes [offset, offset + length) into dst: from the file when OnDisk(), without
  // loading the rest; otherwise from data(). kIOError naming the tensor and the file when
  // the read fails, kInvalidArgument when the range is outside the buffer.
  virtual Status ReadBytes(size_t offset, size_t length, void* dst);
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least `bytes` bytes, 64-byte aligned. Never returns null on success.
  virtual Result<std::shared_ptr<Buffer>> Allocate(size_t bytes) = 0;
};

// Process-wide aligned heap allocator (thread-safe).
Allocator* DefaultAllocator();

// Wraps memory the caller owns; the buffer never frees it.
std::shared_ptr<Buffer> WrapBuffer(void* data, size_t size);

class Tensor {
 public:
  Tensor() = default;  // invalid ("absent") tensor
  Tensor(DataType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t byte_offset = 0);

  // Allocates an uninitialised tensor (strings are default-constructed). Checks the
  // element count and byte size for overflow.
  static Result<Tensor> Allocate(DataType dtype, Shape shape, Allocator* alloc = nullptr);
  // Allocates and zero-fills (empty strings for kString).
  static Result<Tensor> Zeros(DataType dtype, Shape shape, Allocator* alloc = nullptr);
  // Non-owning view of caller memory. The caller keeps it alive.
  static Tensor Wrap(DataType dtype, Shape shape, void* data);
  // Convenience for tests and constant building.
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, Shape shape);
  template <typename T>
  static Tensor Scalar(T value) {
    return FromVector<T>({value}, {});
  }

  bool valid() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t dim(size_t i) const { return shape_[i]; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t byte_size() const { return static_cast<size_t>(num_elements()) * DataTypeSize(dtype_); }

  const void* raw_data() const;
  void* raw_mutable_data();
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }
  template <typename T>
  T* mutable_data() {
    return static_cast<T*>(raw_mutable_data());
  }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  // Buffer::OnDisk / Buffer::ReadBytes for this tensor's bytes (offset relative to them).
  bool on_disk() const { return buffer_ && buffer_->OnDisk(); }
  Status ReadBytes(size_t offset, size_t length, void* dst) const;
  size_t byte_offset() const { return offset_; }

  // Same buffer, new shape (element count must match; checked by the caller).
  Tensor Reshaped(Shape shape) const;
  // Deep copy into a new buffer.
  Result<Tensor> Clone(Allocator* alloc = nullptr) const;

 private:
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, Shape shape) {
  auto r = Allocate(TypeToDataType<T>::value, std::move(shape));
  Tensor t = std::move(r).value();
  T* p = t.mutable_data<T>();
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.num_elements()); ++i) p[i] = values[i];
  return t;
}

// A runtime value: a tensor, a sequence of tensors, or an empty optional.
// kEmpty marks an absent optional input/output slot ("" in ONNX).
class Value {
 public:
  enum class Kind { kEmpty, kTensor, kSequence, kOptionalNone };

  Value() = default;
  Value(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT: implicit by design
  static Value Sequence(std::vector<Tensor> items, DataType elem_type) {
    Value v;
    v.kind_ = Kind::kSequence;
    v.seq_ = std::make_shared<std::vector<Tensor>>(std::move(items));
    v.elem_type_ = elem_type;
    return v;
  }
  // An optional without an element. `elem_type` is the element dtype if known; is_seq
  // says whether the optional's type is a sequence.
  static Value OptionalNone(DataType elem_type = DataType::kUndefined, bool is_seq = false) {
    Value v;
    v.kind_ = Kind::kOptionalNone;
    v.elem_type_ = elem_type;
    v.none_is_seq_ = is_seq;
    return v;
  }

  Kind kind() const { return kind_; }
  bool empty() const { return kind_ == Kind::kEmpty; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_none() const { return kind_ == Kind::kOptionalNone; }
  const Tensor& tensor() const { return tensor_; }
  Tensor& tensor() { return tensor_; }
  const std::vector<Tensor>& sequence() const { return *seq_; }
  DataType elem_type() const { return is_tensor() ? tensor_.dtype() : elem_type_; }
  bool none_is_sequence() const { return none_is_seq_; }

 private:
  Kind kind_ = Kind::kEmpty;
  Tensor tensor_;
  std::shared_ptr<const std::vector<Tensor>> seq_;
  DataType elem_type_ = DataType::kUndefined;
  bool none_is_seq_ = false;
};

}  // namespace strata
