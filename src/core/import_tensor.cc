// TensorProto / TypeProto conversion, external data, and the .pb loaders.
#include <fcntl.h>
#include <onnx/onnx-data_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/import_internal.h"
#include "core/large_pages.h"
#include "core/onnx_import.h"

namespace strata {

std::string OnnxDomainName(const std::string& d) { return d.empty() || d == "ai.onnx" ? "ai.onnx" : d; }

namespace import {

namespace fs = std::filesystem;
static_assert(std::endian::native == std::endian::little, "raw_data copy assumes a little-endian host");

std::string NormalizeDomain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

std::string OneLine(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

Status MemoryBudget::Charge(size_t bytes, const std::string& what) {
  if (cap == 0) {
    used += bytes;
    return Status::Ok();
  }
  if (bytes > cap || used > cap - bytes) {
    return MakeStatus(StatusCode::kOutOfMemory, what, " needs ", bytes, " bytes, which exceeds the memory cap of ", cap,
                      " bytes (", used, " bytes of constants already loaded)");
  }
  used += bytes;
  return Status::Ok();
}

Result<std::string> ReadFileBytes(const std::string& path) {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return NotFound("cannot open '", path, "': file does not exist");
  if (fs::is_directory(st)) return MakeStatus(StatusCode::kIOError, "cannot read '", path, "': it is a directory");
  // Devices and FIFOs could block or never end (/dev/zero).
  if (!fs::is_regular_file(st)) return MakeStatus(StatusCode::kIOError, "cannot read '", path, "': not a regular file");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return MakeStatus(StatusCode::kIOError, "cannot open '", path, "': ", std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
  bool err = std::ferror(f);
  std::fclose(f);
  if (err) return MakeStatus(StatusCode::kIOError, "error reading '", path, "'");
  return bytes;
}

// ---- external data ----

namespace {

bool IsInside(const fs::path& base, const fs::path& p) {
  auto b = base.begin(), pe = p.begin();
  for (; b != base.end(); ++b, ++pe) {
    if (b->empty()) continue;  // trailing separator of base
    if (pe == p.end() || *b != *pe) return false;
  }
  return true;
}

Result<uint64_t> ParseUnsigned(const std::string& s, const std::string& key, const std::string& tensor) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    return InvalidModel("initializer '", tensor, "': external data ", key, " '", s, "' is not a non-negative integer");
  return static_cast<uint64_t>(std::stoull(s));
}

struct ExternalInfo {
  std::string location;
  uint64_t offset = 0;
  bool has_length = false;
  uint64_t length = 0;
};

Result<ExternalInfo> ParseExternal(const onnx::TensorProto& tp) {
  ExternalInfo info;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") {
      info.location = kv.value();
    } else if (kv.key() == "offset") {
      ASSIGN_OR_RETURN(info.offset, ParseUnsigned(kv.value(), "offset", tp.name()));
    } else if (kv.key() == "length") {
      ASSIGN_OR_RETURN(info.length, ParseUnsigned(kv.value(), "length", tp.name()));
      info.has_length = true;
    }
  }
  if (info.location.empty()) return InvalidModel("initializer '", tp.name(), "': external data has no location");
  return info;
}

}  // namespace

Result<std::string> ResolveExternalLocation(const std::string& base_dir, const std::string& location,
                                            const std::string& tensor_name) {
  if (base_dir.empty())
    return InvalidArgument("initializer '", tensor_name, "' uses external data ('", location,
                           "') but no base directory is known (import from a file or set ImportOptions::base_dir)");
  if (location.empty()) return InvalidModel("initializer '", tensor_name, "': external data location is empty");
  fs::path loc(location);
  if (loc.is_absolute() || location.front() == '/' || location.front() == '\\')
    return InvalidModel("initializer '", tensor_name, "': external data location '", location,
                        "' is an absolute path; it must be relative to the model's folder");
  for (const auto& part : loc) {
    if (part == "..")
      return InvalidModel("initializer '", tensor_name, "': external data location '", location,
                          "' contains '..' and could leave the model's folder");
  }
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::absolute(base_dir, ec), ec);
  if (ec) return MakeStatus(StatusCode::kIOError, "cannot resolve model folder '", base_dir, "': ", ec.message());
  fs::path full = fs::weakly_canonical(base / loc, ec);
  if (ec)
    return MakeStatus(StatusCode::kIOError, "initializer '", tensor_name, "': cannot resolve external data '", location,
                      "': ", ec.message());
  if (!IsInside(base, full))
    return InvalidModel("initializer '", tensor_name, "': external data location '", location, "' resolves to '",
                        full.string(), "', outside the model's folder '", base.string(), "' (symlink escape)");
  return full.string();
}

namespace {

Status ValidateTensorExternal(const onnx::TensorProto& tp, const std::string& base_dir) {
  if (tp.data_location() != onnx::TensorProto::EXTERNAL) return Status::Ok();
  ASSIGN_OR_RETURN(ExternalInfo info, ParseExternal(tp));
  return ResolveExternalLocation(base_dir, info.location, tp.name()).status();
}

Status ValidateAttrExternal(const onnx::AttributeProto& a, const std::string& base_dir) {
  if (a.has_t()) RETURN_IF_ERROR(ValidateTensorExternal(a.t(), base_dir));
  for (const auto& t : a.tensors()) RETURN_IF_ERROR(ValidateTensorExternal(t, base_dir));
  if (a.has_g()) RETURN_IF_ERROR(ValidateExternalData(a.g(), base_dir));
  for (const auto& g : a.graphs()) RETURN_IF_ERROR(ValidateExternalData(g, base_dir));
  return Status::Ok();
}

}  // namespace

Status ValidateExternalData(const onnx::GraphProto& g, const std::string& base_dir) {
  for (const auto& t : g.initializer()) RETURN_IF_ERROR(ValidateTensorExternal(t, base_dir));
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) RETURN_IF_ERROR(ValidateAttrExternal(a, base_dir));
  return Status::Ok();
}

namespace {

// Validates the external range and loads it: mapped when large and aligned, else read.
Result<std::shared_ptr<Buffer>> LoadExternal(const onnx::TensorProto& tp, const std::string& base_dir, size_t expected,
                                             size_t elem_align, bool allow_map) {
  ASSIGN_OR_RETURN(ExternalInfo info, ParseExternal(tp));
  ASSIGN_OR_RETURN(std::string path, ResolveExternalLocation(base_dir, info.location, tp.name()));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT)
      return NotFound("initializer '", tp.name(), "': external data file '", path, "' does not exist");
    return MakeStatus(StatusCode::kIOError, "initializer '", tp.name(), "': cannot open '", path,
                      "': ", std::strerror(errno));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return MakeStatus(StatusCode::kIOError, "initializer '", tp.name(), "': cannot stat '", path,
                      "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return InvalidModel("initializer '", tp.name(), "': external data '", path, "' is not a regular file");
  uint64_t fsize = static_cast<uint64_t>(st.st_size);
  if (info.offset > fsize)
    return InvalidModel("initializer '", tp.name(), "': external data offset ", info.offset, " is past the end of '",
                        path, "' (", fsize, " bytes)");
  uint64_t length = info.has_length ? info.length : fsize - info.offset;
  if (length > fsize - info.offset)
    return InvalidModel("initializer '", tp.name(), "': external data offset ", info.offset, " + length ", length,
                        " exceeds the size of '", path, "' (", fsize, " bytes)");
  if (length != expected)
    return InvalidModel("initializer '", tp.name(), "': external data holds ", length,
                        " bytes but its shape and type need ", expected, " bytes");
  return LoadFileRange(fd, info.offset, expected, elem_align, allow_map, path, "initializer '" + tp.name() + "'");
}

// Loads a payload that StripLargeRawData kept out of the proto.
Result<std::shared_ptr<Buffer>> LoadInline(const InlineSource& src, const InlineRange& range, size_t bytes,
                                           size_t elem_align, bool allow_map, bool may_defer, const std::string& what) {
  // Read on first use: large payloads that would otherwise be read into memory of their own.
  if (src.fd >= 0 && src.deferred && may_defer && !allow_map && bytes >= kLargePagesMinBytes)
    return src.deferred->Make(range.offset, bytes, what);
  if (src.fd >= 0) return LoadFileRange(src.fd, range.offset, bytes, elem_align, allow_map, src.path, what);
  if (!src.bytes || range.offset > src.size || bytes > src.size - range.offset)
    return InternalError(what, ": stripped raw_data range is outside the model bytes");
  ASSIGN_OR_RETURN(auto buf, AllocateWeightBuffer(bytes));
  std::memcpy(buf->data(), src.bytes + range.offset, bytes);
  return buf;
}

// Copies `count` values of a repeated field into T storage, checking the count.
template <typename T, typename Field>
Status CopyField(const Field& field, int64_t count, const std::string& field_name, const onnx::TensorProto& tp,
                 T* dst) {
  if (static_cast<int64_t>(field.size()) != count)
    return InvalidModel("initializer '", tp.name(), "' has ", field.size(), " values in ", field_name,
                        " but its shape ", "needs ", count);
  for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<T>(field.Get(static_cast<int>(i)));
  return Status::Ok();
}

// Any non-zero byte is true; a bool holding 2 would be UB.
void NormalizeBools(Tensor* t) {
  auto* p = static_cast<uint8_t*>(t->raw_mutable_data());
  for (int64_t i = 0, n_elems = t->num_elements(); i < n_elems; ++i) p[i] = p[i] != 0;
}

}  // namespace

Result<Tensor> ConvertTensor(const onnx::TensorProto& tp, const TensorContext& ctx, const InlineRange* range) {
  const std::string what = "initializer '" + tp.name() + "'";
  if (tp.has_segment()) return Unsupported(what, " uses segmented storage, which is not supported");
  if (!KnownDataType(tp.data_type())) return Unsupported(what, " has unsupported data type ", tp.data_type());
  DataType dt = static_cast<DataType>(tp.data_type());
  Shape shape(tp.dims().begin(), tp.dims().end());
  for (int64_t d : shape)
    if (d < 0) return InvalidModel(what, " has a negative dimension in shape ", ShapeToString(shape));
  auto n_or = CheckedNumElements(shape, what);
  if (!n_or.ok()) return InvalidModel(n_or.status().message());
  int64_t n = n_or.value();
  size_t esize = DataTypeSize(dt);
  if (dt != DataType::kString && static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / esize)
    return InvalidModel(what, " byte size overflows for shape ", ShapeToString(shape));
  size_t bytes = dt == DataType::kString ? 0 : static_cast<size_t>(n) * esize;
  if (ctx.budget) {
    size_t charge = bytes;
    if (dt == DataType::kString)
      for (const auto& s : tp.string_data()) charge += s.size();
    RETURN_IF_ERROR(ctx.budget->Charge(charge, what));
  }
  // Bool bytes are normalised in place below, so they are never mapped.
  const bool allow_map = dt != DataType::kBool && MapWeightPayloads();
  // Complex types are pairs of float/double: their component size is what loads assume.
  const size_t elem_align = dt == DataType::kComplex64 ? 4 : dt == DataType::kComplex128 ? 8 : esize;
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    if (dt == DataType::kString) return Unsupported(what, " stores strings as external data, which is not supported");
    ASSIGN_OR_RETURN(auto buf, LoadExternal(tp, ctx.base_dir, bytes, elem_align, allow_map));
    Tensor t(dt, std::move(shape), std::move(buf));
    if (dt == DataType::kBool) NormalizeBools(&t);
    return t;
  }
  if (range && range->stripped) {
    if (!ctx.inline_source) return InternalError(what, ": raw_data was stripped but no source is known");
    if (dt == DataType::kString) return InvalidModel(what, " is a string tensor but uses raw_data");
    if (range->length != bytes)
      return InvalidModel(what, " has ", range->length, " bytes of raw_data but its shape ", ShapeToString(shape),
                          " and type ", DataTypeName(dt), " need ", bytes, " bytes");
    // Bools are normalised just below, so they are read now.
    ASSIGN_OR_RETURN(auto buf, LoadInline(*ctx.inline_source, *range, bytes, elem_align, allow_map,
                                          /*may_defer=*/dt != DataType::kBool, what));
    Tensor t(dt, std::move(shape), std::move(buf));
    if (dt == DataType::kBool) NormalizeBools(&t);
    return t;
  }
  auto alloc = Tensor::Allocate(dt, shape);
  if (!alloc.ok()) return MakeStatus(alloc.status().code(), what, ": ", alloc.status().message());
  Tensor t = std::move(alloc).value();
  if (dt == DataType::kString) {
    if (tp.has_raw_data()) return InvalidModel(what, " is a string tensor but uses raw_data");
    RETURN_IF_ERROR(CopyField(tp.string_data(), n, "string_data", tp, t.mutable_data<std::string>()));
    return t;
  }
  if (tp.has_raw_data()) {
    if (tp.raw_data().size() != bytes)
      return InvalidModel(what, " has ", tp.raw_data().size(), " bytes of raw_data but its shape ",
                          ShapeToString(shape), " and type ", DataTypeName(dt), " need ", bytes, " bytes");
    if (bytes) std::memcpy(t.raw_mutable_data(), tp.raw_data().data(), bytes);
    if (dt == DataType::kBool) NormalizeBools(&t);
    return t;
  }
  Status st;
  switch (dt) {
    case DataType::kFloat:
      st = CopyField(tp.float_data(), n, "float_data", tp, t.mutable_data<float>());
      break;
    case DataType::kComplex64:
      st = CopyField(tp.float_data(), 2 * n, "float_data", tp, static_cast<float*>(t.raw_mutable_data()));
      break;
    case DataType::kDouble:
      st = CopyField(tp.double_data(), n, "double_data", tp, t.mutable_data<double>());
      break;
    case DataType::kComplex128:
      st = CopyField(tp.double_data(), 2 * n, "double_data", tp, static_cast<double*>(t.raw_mutable_data()));
      break;
    case DataType::kInt64:
      st = CopyField(tp.int64_data(), n, "int64_data", tp, t.mutable_data<int64_t>());
      break;
    case DataType::kUInt64:
      st = CopyField(tp.uint64_data(), n, "uint64_data", tp, t.mutable_data<uint64_t>());
      break;
    case DataType::kUInt32:
      st = CopyField(tp.uint64_data(), n, "uint64_data", tp, t.mutable_data<uint32_t>());
      break;
    case DataType::kInt32:
      st = CopyField(tp.int32_data(), n, "int32_data", tp, t.mutable_data<int32_t>());
      break;
    case DataType::kInt16:
      st = CopyField(tp.int32_data(), n, "int32_data", tp, t.mutable_data<int16_t>());
      break;
    case DataType::kUInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:  // 16-bit patterns stored in int32_data
      st = CopyField(tp.int32_data(), n, "int32_data", tp, static_cast<uint16_t*>(t.raw_mutable_data()));
      break;
    case DataType::kInt8:
      st = CopyField(tp.int32_data(), n, "int32_data", tp, t.mutable_data<int8_t>());
      break;
    case DataType::kUInt8:
      st = CopyField(tp.int32_data(), n, "int32_data", tp, t.mutable_data<uint8_t>());
      break;
    case DataType::kBool: {
      const auto& f = tp.int32_data();
      if (f.size() != n) return InvalidModel(what, " has ", f.size(), " values in int32_data but its shape needs ", n);
      bool* p = t.mutable_data<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = f.Get(static_cast<int>(i)) != 0;
      break;
    }
    default:
      return Unsupported(what, " has unsupported data type ", DataTypeName(dt));
  }
  RETURN_IF_ERROR(st);
  return t;
}

bool KnownDataType(int32_t t) { return t >= 1 && t <= 16; }

namespace {

void FillTensorType(const onnx::TypeProto_Tensor& tt, TypeInfo* ti) {
  ti->elem_type = KnownDataType(tt.elem_type()) ? static_cast<DataType>(tt.elem_type()) : DataType::kUndefined;
  ti->has_shape = tt.has_shape();
  ti->dims.clear();
  if (!tt.has_shape()) return;
  for (const auto& d : tt.shape().dim()) {
    Dim dim;
    if (d.has_dim_value()) dim.value = d.dim_value();
    if (d.has_dim_param()) dim.param = d.dim_param();
    ti->dims.push_back(dim);
  }
}

// Fills elem type and shape from the innermost tensor type of a sequence/optional chain.
void FillInner(const onnx::TypeProto& tp, TypeInfo* ti) {
  if (tp.has_tensor_type()) {
    FillTensorType(tp.tensor_type(), ti);
  } else if (tp.has_sequence_type()) {
    FillInner(tp.sequence_type().elem_type(), ti);
  } else if (tp.has_optional_type()) {
    FillInner(tp.optional_type().elem_type(), ti);
  } else if (tp.has_map_type()) {
    // A map's key dtype; its value type fills elem_type (ML maps hold tensor(float) etc.).
    const int32_t k = tp.map_type().key_type();
    ti->map_key = KnownDataType(k) ? static_cast<DataType>(k) : DataType::kUndefined;
    FillInner(tp.map_type().value_type(), ti);
    ti->has_shape = false;
    ti->dims.clear();
  }
}

}  // namespace

TypeInfo ConvertType(const onnx::TypeProto& tp) {
  TypeInfo ti;
  if (tp.has_tensor_type()) {
    ti.kind = TypeInfo::Kind::kTensor;
    FillTensorType(tp.tensor_type(), &ti);
  } else if (tp.has_sequence_type()) {
    ti.kind = TypeInfo::Kind::kSequence;
    FillInner(tp.sequence_type().elem_type(), &ti);
  } else if (tp.has_optional_type()) {
    ti.kind = TypeInfo::Kind::kOptional;
    ti.optional_of_sequence = tp.optional_type().elem_type().has_sequence_type();
    FillInner(tp.optional_type().elem_type(), &ti);
  } else if (tp.has_map_type()) {
    ti.kind = TypeInfo::Kind::kMap;
    FillInner(tp, &ti);
  }
  return ti;
}

TypeInfo TensorTypeInfo(const onnx::TensorProto& tp) {
  TypeInfo ti;
  ti.kind = TypeInfo::Kind::kTensor;
  ti.elem_type = KnownDataType(tp.data_type()) ? static_cast<DataType>(tp.data_type()) : DataType::kUndefined;
  ti.has_shape = true;
  for (int64_t d : tp.dims()) ti.dims.push_back(Dim{d, ""});
  return ti;
}

}  // namespace import

// ---- .pb loaders ----

namespace {

using import::TensorContext;

std::string ParentDir(const std::string& path) {
  std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

template <typename Proto>
Result<Proto> ParseProtoFile(const std::string& path, const char* kind) {
  ASSIGN_OR_RETURN(std::string bytes, import::ReadFileBytes(path));
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return InvalidArgument("'", path, "' is larger than 2 GiB, which protobuf cannot parse");
  Proto p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return InvalidArgument("'", path, "' is not a valid ", kind, " (truncated or not a protobuf file)");
  return p;
}

Result<Value> ConvertSequence(const onnx::SequenceProto& sp, DataType declared_elem, const TensorContext& ctx) {
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && sp.elem_type() != onnx::SequenceProto::UNDEFINED)
    return Unsupported("sequence '", sp.name(), "' holds non-tensor elements (elem_type ", sp.elem_type(),
                       "); only sequences of tensors are supported");
  std::vector<Tensor> items;
  DataType elem = declared_elem;
  for (const auto& tp : sp.tensor_values()) {
    ASSIGN_OR_RETURN(Tensor t, import::ConvertTensor(tp, ctx));
    if (elem == DataType::kUndefined) elem = t.dtype();
    items.push_back(std::move(t));
  }
  return Value::Sequence(std::move(items), elem);
}

}  // namespace

Result<Tensor> LoadTensorProtoFile(const std::string& path) {
  ASSIGN_OR_RETURN(auto tp, ParseProtoFile<onnx::TensorProto>(path, "TensorProto"));
  TensorContext ctx{ParentDir(path), nullptr};
  auto t = import::ConvertTensor(tp, ctx);
  if (!t.ok()) return Status(t.status().code(), path + ": " + t.status().message());
  return t;
}

Result<Value> LoadValueProtoFile(const std::string& path, const TypeInfo& declared) {
  TensorContext ctx{ParentDir(path), nullptr};
  auto prefix = [&](const Status& st) { return Status(st.code(), path + ": " + st.message()); };
  switch (declared.kind) {
    case TypeInfo::Kind::kSequence: {
      ASSIGN_OR_RETURN(auto sp, ParseProtoFile<onnx::SequenceProto>(path, "SequenceProto"));
      auto v = ConvertSequence(sp, declared.elem_type, ctx);
      return v.ok() ? v : prefix(v.status());
    }
    case TypeInfo::Kind::kOptional: {
      ASSIGN_OR_RETURN(auto op, ParseProtoFile<onnx::OptionalProto>(path, "OptionalProto"));
      if (op.has_tensor_value()) {
        auto t = import::ConvertTensor(op.tensor_value(), ctx);
        if (!t.ok()) return prefix(t.status());
        return Value(std::move(t).value());
      }
      if (op.has_sequence_value()) {
        auto v = ConvertSequence(op.sequence_value(), declared.elem_type, ctx);
        return v.ok() ? v : prefix(v.status());
      }
      if (op.elem_type() != onnx::OptionalProto::UNDEFINED && op.elem_type() != onnx::OptionalProto::TENSOR &&
          op.elem_type() != onnx::OptionalProto::SEQUENCE)
        return Unsupported(path, ": optional holds an unsupported element kind (", op.elem_type(), ")");
      bool is_seq = op.elem_type() == onnx::OptionalProto::SEQUENCE ||
                    (op.elem_type() == onnx::OptionalProto::UNDEFINED && declared.optional_of_sequence);
      return Value::OptionalNone(declared.elem_type, is_seq);
    }
    default: {
      auto t = LoadTensorProtoFile(path);
      if (!t.ok()) return t.status();
      return Value(std::move(t).value());
    }
  }
}

}  // namespace strata
