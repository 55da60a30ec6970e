#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

namespace strata {

Result<int64_t> CheckedNumElements(const Shape& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(what, " has a negative dimension in shape ", ShapeToString(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return InvalidArgument(what, " element count overflows for shape ", ShapeToString(shape));
    n *= d;
  }
  return n;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

class HeapBuffer final : public Buffer {
 public:
  HeapBuffer(void* p, size_t n) : p_(p), n_(n) {}
  ~HeapBuffer() override { std::free(p_); }
  void* data() override { return p_; }
  size_t size() const override { return n_; }
  bool ReleaseStorage() override {
    std::free(p_);
    p_ = nullptr;
    n_ = 0;
    return true;
  }

 private:
  void* p_;
  size_t n_;
};

class StringBuffer final : public Buffer {
 public:
  explicit StringBuffer(size_t count) : v_(count) {}
  void* data() override { return v_.data(); }
  size_t size() const override { return v_.size() * sizeof(std::string); }

 private:
  std::vector<std::string> v_;
};

class WrappedBuffer final : public Buffer {
 public:
  WrappedBuffer(void* p, size_t n) : p_(p), n_(n) {}
  void* data() override { return p_; }
  size_t size() const override { return n_; }

 private:
  void* p_;
  size_t n_;
};

class HeapAllocator final : public Allocator {
 public:
  Result<std::shared_ptr<Buffer>> Allocate(size_t bytes) override {
    size_t rounded = (bytes + 63) & ~static_cast<size_t>(63);
    if (rounded < bytes) return MakeStatus(StatusCode::kOutOfMemory, "allocation size overflows: ", bytes);
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) return MakeStatus(StatusCode::kOutOfMemory, "out of memory allocating ", bytes, " bytes");
    return std::shared_ptr<Buffer>(std::make_shared<HeapBuffer>(p, bytes));
  }
};

}  // namespace

Allocator* DefaultAllocator() {
  static HeapAllocator alloc;
  return &alloc;
}

std::shared_ptr<Buffer> WrapBuffer(void* data, size_t size) { return std::make_shared<WrappedBuffer>(data, size); }

Tensor::Tensor(DataType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t byte_offset)
    : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(byte_offset) {}

Result<Tensor> Tensor::Allocate(DataType dtype, Shape shape, Allocator* alloc) {
  ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  size_t esize = DataTypeSize(dtype);
  if (esize == 0) return InvalidArgument("cannot allocate a tensor of type ", DataTypeName(dtype));
  if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / esize)
    return MakeStatus(StatusCode::kOutOfMemory, "tensor byte size overflows for shape ", ShapeToString(shape));
  if (dtype == DataType::kString) {
    return Tensor(dtype, std::move(shape), std::make_shared<StringBuffer>(static_cast<size_t>(n)));
  }
  if (!alloc) alloc = DefaultAllocator();
  ASSIGN_OR_RETURN(auto buf, alloc->Allocate(static_cast<size_t>(n) * esize));
  return Tensor(dtype, std::move(shape), std::move(buf));
}

Result<Tensor> Tensor::Zeros(DataType dtype, Shape shape, Allocator* alloc) {
  ASSIGN_OR_RETURN(Tensor t, Allocate(dtype, std::move(shape), alloc));
  if (dtype != DataType::kString && t.byte_size() > 0) std::memset(t.raw_mutable_data(), 0, t.byte_size());
  return t;
}

Tensor Tensor::Wrap(DataType dtype, Shape shape, void* data) {
  size_t bytes = static_cast<size_t>(NumElements(shape)) * DataTypeSize(dtype);
  return Tensor(dtype, std::move(shape), WrapBuffer(data, bytes));
}

const void* Tensor::raw_data() const {
  if (!buffer_) return nullptr;
  return static_cast<const char*>(buffer_->data()) + offset_;
}

void* Tensor::raw_mutable_data() {
  if (!buffer_) return nullptr;
  return static_cast<char*>(buffer_->data()) + offset_;
}

Status Buffer::ReadBytes(size_t offset, size_t length, void* dst) {
  if (offset > size() || length > size() - offset)
    return InvalidArgument("buffer read of ", length, " bytes at ", offset, " is outside its ", size(), " bytes");
  if (length) std::memcpy(dst, static_cast<const char*>(data()) + offset, length);
  return Status::Ok();
}

Status Tensor::ReadBytes(size_t offset, size_t length, void* dst) const {
  if (!buffer_) return InvalidArgument("read from a tensor without data");
  if (offset > byte_size() || length > byte_size() - offset)
    return InvalidArgument("read of ", length, " bytes at ", offset, " is outside the tensor's ", byte_size(),
                           " bytes");
  return buffer_->ReadBytes(offset_ + offset, length, dst);
}

Tensor Tensor::Reshaped(Shape shape) const { return Tensor(dtype_, std::move(shape), buffer_, offset_); }

Result<Tensor> Tensor::Clone(Allocator* alloc) const {
  ASSIGN_OR_RETURN(Tensor t, Allocate(dtype_, shape_, alloc));
  if (dtype_ == DataType::kString) {
    const auto* src = data<std::string>();
    auto* dst = t.mutable_data<std::string>();
    for (int64_t i = 0; i < num_elements(); ++i) dst[i] = src[i];
  } else if (byte_size() > 0) {
    std::memcpy(t.raw_mutable_data(), raw_data(), byte_size());
  }
  return t;
}

std::string Value::Describe() const {
  switch (kind_) {
    case Kind::kEmpty:
      return "nothing";
    case Kind::kTensor:
      return std::string("tensor ") + DataTypeName(tensor_.dtype()) + ShapeToString(tensor_.shape());
    case Kind::kSequence:
      return "sequence of " + std::to_string(seq_->size()) + " " + DataTypeName(elem_type_) + " tensors";
    case Kind::kOptionalNone:
      return "an empty optional";
    case Kind::kMap:
      return std::string("map ") + DataTypeName(key_type_) + "->" + DataTypeName(elem_type_) + " (" +
             std::to_string(tensor_.num_elements()) + " entries)";
    case Kind::kMapSequence:
      return "sequence of " + std::to_string(maps_->size()) + " maps " + DataTypeName(key_type_) + "->" +
             DataTypeName(elem_type_);
  }
  return "unknown value";
}

namespace {

// Copies element src_index of `src` to element dst_index of `dst` (same dtype).
void CopyElement(const Tensor& src, int64_t src_index, Tensor* dst, int64_t dst_index) {
  if (src.dtype() == DataType::kString) {
    dst->mutable_data<std::string>()[dst_index] = src.data<std::string>()[src_index];
    return;
  }
  const size_t es = DataTypeSize(src.dtype());
  std::memcpy(static_cast<char*>(dst->raw_mutable_data()) + static_cast<size_t>(dst_index) * es,
              static_cast<const char*>(src.raw_data()) + static_cast<size_t>(src_index) * es, es);
}

template <typename K>
Result<Value> SortedMap(const Tensor& keys, const Tensor& values, const std::string& what) {
  const int64_t n = keys.num_elements();
  const K* k = keys.data<K>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  bool sorted = true;
  for (int64_t i = 1; i < n && sorted; ++i) sorted = k[i - 1] < k[i];
  if (!sorted) std::stable_sort(order.begin(), order.end(), [k](int64_t a, int64_t b) { return k[a] < k[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (!(k[order[i - 1]] < k[order[i]])) {
      if constexpr (std::is_same_v<K, std::string>) {
        return InvalidArgument(what, ": key '", k[order[i]], "' appears more than once");
      } else {
        return InvalidArgument(what, ": key ", k[order[i]], " appears more than once");
      }
    }
  }
  const Shape shape{n};
  if (sorted) return Value::Map(keys.Reshaped(shape), values.Reshaped(shape));
  ASSIGN_OR_RETURN(Tensor sk, Tensor::Allocate(keys.dtype(), shape));
  ASSIGN_OR_RETURN(Tensor sv, Tensor::Allocate(values.dtype(), shape));
  for (int64_t i = 0; i < n; ++i) {
    CopyElement(keys, order[static_cast<size_t>(i)], &sk, i);
    CopyElement(values, order[static_cast<size_t>(i)], &sv, i);
  }
  return Value::Map(std::move(sk), std::move(sv));
}

}  // namespace

Result<Value> MakeMap(const Tensor& keys, const Tensor& values, const std::string& what) {
  if (!keys.valid() || !values.valid()) return InvalidArgument(what, ": a map needs both keys and values");
  if (keys.dtype() != DataType::kInt64 && keys.dtype() != DataType::kString)
    return InvalidArgument(what, ": map keys must be int64 or string, not ", DataTypeName(keys.dtype()));
  if (keys.rank() != 1 || values.rank() != 1)
    return InvalidArgument(what, ": map keys and values must be 1-D, got ", ShapeToString(keys.shape()), " and ",
                           ShapeToString(values.shape()));
  if (keys.num_elements() != values.num_elements())
    return InvalidArgument(what, ": ", keys.num_elements(), " map keys but ", values.num_elements(), " values");
  if (keys.dtype() == DataType::kString) return SortedMap<std::string>(keys, values, what);
  return SortedMap<int64_t>(keys, values, what);
}

}  // namespace strata
