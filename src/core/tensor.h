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

// A runtime value: a tensor, a sequence of tensors, an empty optional, a map or a
// sequence of maps (the ai.onnx.ml ZipMap/CastMap/DictVectorizer types).
// kEmpty marks an absent optional input/output slot ("" in ONNX).
class Value {
 public:
  enum class Kind { kEmpty, kTensor, kSequence, kOptionalNone, kMap, kMapSequence };

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
  // A map: 1-D `keys` (int64 or string) and 1-D `values` of the same length, keys strictly
  // ascending (unique). Callers that cannot promise the order use MakeMap (tensor.cc), which
  // sorts and rejects duplicates; the kernels rely on it (CastMap's SPARSE form walks keys
  // in order).
  static Value Map(Tensor keys, Tensor values) {
    Value v;
    v.kind_ = Kind::kMap;
    v.elem_type_ = values.dtype();
    v.key_type_ = keys.dtype();
    v.tensor_ = std::move(keys);
    v.map_values_ = std::move(values);
    return v;
  }
  // A sequence of maps (each a kMap Value) with the given key and value dtypes.
  static Value MapSequence(std::vector<Value> maps, DataType key_type, DataType value_type) {
    Value v;
    v.kind_ = Kind::kMapSequence;
    v.maps_ = std::make_shared<std::vector<Value>>(std::move(maps));
    v.key_type_ = key_type;
    v.elem_type_ = value_type;
    return v;
  }

  Kind kind() const { return kind_; }
  bool empty() const { return kind_ == Kind::kEmpty; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_none() const { return kind_ == Kind::kOptionalNone; }
  bool is_map() const { return kind_ == Kind::kMap; }
  bool is_map_sequence() const { return kind_ == Kind::kMapSequence; }
  const Tensor& tensor() const { return tensor_; }
  Tensor& tensor() { return tensor_; }
  const std::vector<Tensor>& sequence() const { return *seq_; }
  // kMap: the keys and values tensors.
  const Tensor& map_keys() const { return tensor_; }
  const Tensor& map_values() const { return map_values_; }
  // kMapSequence: the maps.
  const std::vector<Value>& maps() const { return *maps_; }
  // Tensor dtype; a sequence's or optional's element dtype; a map's value dtype.
  DataType elem_type() const { return is_tensor() ? tensor_.dtype() : elem_type_; }
  // A map's (or a map sequence's) key dtype; kUndefined otherwise.
  DataType key_type() const { return key_type_; }
  bool none_is_sequence() const { return none_is_seq_; }
  // "tensor float32[2,3]", "sequence of 4 float32 tensors", "map int64->float32 (3 entries)", ...
  std::string Describe() const;

 private:
  Kind kind_ = Kind::kEmpty;
  Tensor tensor_;  // kTensor: the tensor; kMap: the keys
  Tensor map_values_;
  std::shared_ptr<const std::vector<Tensor>> seq_;
  std::shared_ptr<const std::vector<Value>> maps_;
  DataType elem_type_ = DataType::kUndefined;
  DataType key_type_ = DataType::kUndefined;
  bool none_is_seq_ = false;
};

// Builds a map from parallel 1-D keys (int64 or string) and values of equal length, in any
// key order: entries are sorted by key; a repeated key is kInvalidArgument naming `what`
// and the key. The tensors are copied when they must be reordered.
Result<Value> MakeMap(const Tensor& keys, const Tensor& values, const std::string& what);

}  // namespace strata
