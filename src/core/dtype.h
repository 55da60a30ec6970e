// Element types. Numeric values equal ONNX TensorProto.DataType and the public
// strata_dtype enum, so conversion at every boundary is a cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace strata {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
};

// Size of one element in bytes; sizeof(std::string) for kString; 0 for undefined.
size_t DataTypeSize(DataType t);
// "float32", "int64", "bool", ... (numpy-style names, used by the CLI and errors).
const char* DataTypeName(DataType t);
// Parses the names above and ONNX's ("float", "FLOAT", "tensor(float)"). kUndefined if unknown.
DataType DataTypeFromName(const std::string& name);
bool IsFloatType(DataType t);    // float16, bfloat16, float, double
bool IsIntegerType(DataType t);  // signed and unsigned integers (not bool)
bool IsSignedType(DataType t);

// IEEE half and bfloat16 storage types. Arithmetic is done in float.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f);
  operator float() const;  // NOLINT: implicit widening is intended
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  // Round to nearest even; NaN stays NaN.
  explicit BFloat16(float f);
  operator float() const;  // NOLINT
};
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

// Maps C++ types to DataType.
template <typename T>
struct TypeToDataType;
#define STRATA_TYPE_MAP(T, E) \
  template <>                 \
  struct TypeToDataType<T> {  \
    static constexpr DataType value = DataType::E; \
  };
STRATA_TYPE_MAP(float, kFloat)
STRATA_TYPE_MAP(double, kDouble)
STRATA_TYPE_MAP(int8_t, kInt8)
STRATA_TYPE_MAP(uint8_t, kUInt8)
STRATA_TYPE_MAP(int16_t, kInt16)
STRATA_TYPE_MAP(uint16_t, kUInt16)
STRATA_TYPE_MAP(int32_t, kInt32)
STRATA_TYPE_MAP(uint32_t, kUInt32)
STRATA_TYPE_MAP(int64_t, kInt64)
STRATA_TYPE_MAP(uint64_t, kUInt64)
STRATA_TYPE_MAP(bool, kBool)
STRATA_TYPE_MAP(Float16, kFloat16)
STRATA_TYPE_MAP(BFloat16, kBFloat16)
STRATA_TYPE_MAP(std::string, kString)
#undef STRATA_TYPE_MAP

// Calls fn.template operator()<T>() for the C++ type of dt. Returns false if dt is not
// among the numeric/bool types (string and complex are excluded).
// Usage: DispatchNumeric(dt, [&]<typename T>() { ... });
template <typename Fn>
bool DispatchNumeric(DataType dt, Fn&& fn) {
  switch (dt) {
    case DataType::kFloat: fn.template operator()<float>(); return true;
    case DataType::kDouble: fn.template operator()<double>(); return true;
    case DataType::kInt8: fn.template operator()<int8_t>(); return true;
    case DataType::kUInt8: fn.template operator()<uint8_t>(); return true;
    case DataType::kInt16: fn.template operator()<int16_t>(); return true;
    case DataType::kUInt16: fn.template operator()<uint16_t>(); return true;
    case DataType::kInt32: fn.template operator()<int32_t>(); return true;
    case DataType::kUInt32: fn.template operator()<uint32_t>(); return true;
    case DataType::kInt64: fn.template operator()<int64_t>(); return true;
    case DataType::kUInt64: fn.template operator()<uint64_t>(); return true;
    case DataType::kBool: fn.template operator()<bool>(); return true;
    case DataType::kFloat16: fn.template operator()<Float16>(); return true;
    case DataType::kBFloat16: fn.template operator()<BFloat16>(); return true;
    default: return false;
  }
}

// Calls fn.template operator()<T>() for the floating types (float, double, Float16,
// BFloat16). Returns false for any other dtype.
template <typename Fn>
bool DispatchFloat(DataType dt, Fn&& fn) {
  switch (dt) {
    case DataType::kFloat: fn.template operator()<float>(); return true;
    case DataType::kDouble: fn.template operator()<double>(); return true;
    case DataType::kFloat16: fn.template operator()<Float16>(); return true;
    case DataType::kBFloat16: fn.template operator()<BFloat16>(); return true;
    default: return false;
  }
}

// Like DispatchNumeric but also covers std::string (for copy/gather-like ops).
template <typename Fn>
bool DispatchAny(DataType dt, Fn&& fn) {
  if (dt == DataType::kString) {
    fn.template operator()<std::string>();
    return true;
  }
  return DispatchNumeric(dt, std::forward<Fn>(fn));
}

}  // namespace strata
