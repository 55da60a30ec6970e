// The C API's non-tensor values (include/strata/strata.h, "non-tensor values"): sequences,
// maps and empty optionals held by a strata_tensor handle, and the ONNX type strings of a
// session's inputs and outputs.
#include <string>
#include <utility>
#include <vector>

#include "capi/capi_internal.h"

namespace strata::capi {

namespace {

// ONNX's name of a tensor element type, as in "tensor(float)".
const char* OnnxTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat:
      return "float";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt16:
      return "uint16";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kString:
      return "string";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kDouble:
      return "double";
    case DataType::kUInt32:
      return "uint32";
    case DataType::kUInt64:
      return "uint64";
    case DataType::kBFloat16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

// "tensor(float)", "seq(map(int64,tensor(float)))", ... in ONNX Runtime's notation.
std::string OnnxTypeString(const TypeInfo& t) {
  if (t.kind == TypeInfo::Kind::kUnknown) return "unknown";
  std::string inner = std::string("tensor(") + OnnxTypeName(t.elem_type) + ")";
  if (t.map_key != DataType::kUndefined) inner = std::string("map(") + OnnxTypeName(t.map_key) + "," + inner + ")";
  switch (t.kind) {
    case TypeInfo::Kind::kSequence:
      return "seq(" + inner + ")";
    case TypeInfo::Kind::kOptional:
      return "optional(" + (t.optional_of_sequence ? "seq(" + inner + ")" : inner) + ")";
    default:
      return inner;
  }
}

strata_status* TypeOf(const std::vector<std::string>& types, size_t index, const char* what, const char** type) {
  STRATA_CHECK_ARG(type, "type is NULL");
  STRATA_CHECK_ARG(index < types.size(), std::string(what) + " index " + std::to_string(index) +
                                             " is out of range (the model has " + std::to_string(types.size()) + ")");
  *type = types[index].c_str();
  return nullptr;
}

}  // namespace

strata_tensor* NewHandle(Value v) {
  auto* h = new strata_tensor();
  if (v.is_tensor()) {
    h->tensor = std::move(v.tensor());
  } else {
    h->value = std::move(v);
  }
  return h;
}

void FillTypeStrings(strata_session* s) {
  for (const auto& vi : s->session->inputs()) s->input_types.push_back(OnnxTypeString(vi.type));
  for (const auto& vi : s->session->outputs()) s->output_types.push_back(OnnxTypeString(vi.type));
}

Result<Value> DeepCopy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor: {
      ASSIGN_OR_RETURN(Tensor t, v.tensor().Clone());
      return Value(std::move(t));
    }
    case Value::Kind::kSequence: {
      std::vector<Tensor> items;
      items.reserve(v.sequence().size());
      for (const Tensor& t : v.sequence()) {
        ASSIGN_OR_RETURN(Tensor c, t.Clone());
        items.push_back(std::move(c));
      }
      return Value::Sequence(std::move(items), v.elem_type());
    }
    case Value::Kind::kMap: {
      ASSIGN_OR_RETURN(Tensor k, v.map_keys().Clone());
      ASSIGN_OR_RETURN(Tensor x, v.map_values().Clone());
      return Value::Map(std::move(k), std::move(x));
    }
    case Value::Kind::kMapSequence: {
      std::vector<Value> maps;
      maps.reserve(v.maps().size());
      for (const Value& m : v.maps()) {
        ASSIGN_OR_RETURN(Value c, DeepCopy(m));
        maps.push_back(std::move(c));
      }
      return Value::MapSequence(std::move(maps), v.key_type(), v.elem_type());
    }
    default:
      return v;  // empty optionals hold no memory
  }
}

}  // namespace strata::capi

using strata::Value;
using strata::capi::Guard;
using strata::capi::MakeError;
using strata::capi::NewHandle;
using strata::capi::ToC;

extern "C" {

strata_value_kind strata_value_kind_of(const strata_tensor* v) {
  if (!v) return STRATA_VALUE_TENSOR;
  switch (v->value.kind()) {
    case Value::Kind::kSequence:
    case Value::Kind::kMapSequence:
      return STRATA_VALUE_SEQUENCE;
    case Value::Kind::kMap:
      return STRATA_VALUE_MAP;
    case Value::Kind::kOptionalNone:
      return STRATA_VALUE_NONE;
    default:
      return STRATA_VALUE_TENSOR;
  }
}

strata_dtype strata_value_elem_dtype(const strata_tensor* v) {
  if (!v) return STRATA_DTYPE_UNDEFINED;
  const strata::DataType dt = v->value.empty() ? v->tensor.dtype() : v->value.elem_type();
  return static_cast<strata_dtype>(dt);
}

strata_status* strata_value_sequence_length(const strata_tensor* v, size_t* length) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(v && length, "value or length is NULL");
    if (v->value.is_sequence()) {
      *length = v->value.sequence().size();
    } else if (v->value.is_map_sequence()) {
      *length = v->value.maps().size();
    } else {
      return MakeError(STRATA_INVALID_ARGUMENT, "strata_value_sequence_length: the value is a " +
                                                    strata::capi::AsValue(*v).Describe() + ", not a sequence");
    }
    return nullptr;
  });
}

strata_status* strata_value_sequence_item(const strata_tensor* v, size_t i, strata_tensor** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(v && out, "value or out is NULL");
    *out = nullptr;
    const Value& s = v->value;
    if (!s.is_sequence() && !s.is_map_sequence())
      return MakeError(STRATA_INVALID_ARGUMENT, "strata_value_sequence_item: the value is a " +
                                                    strata::capi::AsValue(*v).Describe() + ", not a sequence");
    const size_t n = s.is_sequence() ? s.sequence().size() : s.maps().size();
    STRATA_CHECK_ARG(i < n, "sequence item " + std::to_string(i) + " is out of range (the sequence has " +
                                std::to_string(n) + " items)");
    *out = NewHandle(s.is_sequence() ? Value(s.sequence()[i]) : s.maps()[i]);
    return nullptr;
  });
}

strata_status* strata_value_map_entries(const strata_tensor* v, strata_tensor** keys, strata_tensor** values) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(v, "value is NULL");
    if (keys) *keys = nullptr;
    if (values) *values = nullptr;
    if (!v->value.is_map())
      return MakeError(STRATA_INVALID_ARGUMENT, "strata_value_map_entries: the value is a " +
                                                    strata::capi::AsValue(*v).Describe() + ", not a map");
    if (keys) *keys = NewHandle(v->value.map_keys());
    if (values) *values = NewHandle(v->value.map_values());
    return nullptr;
  });
}

strata_status* strata_value_create_sequence(const strata_tensor* const* items, size_t count, strata_dtype elem_dtype,
                                            strata_tensor** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    STRATA_CHECK_ARG(count == 0 || items, "items is NULL");
    STRATA_CHECK_ARG(elem_dtype == STRATA_DTYPE_UNDEFINED || strata::capi::ValidDType(elem_dtype),
                     "unknown dtype " + std::to_string(static_cast<int>(elem_dtype)));
    if (count == 0) {
      STRATA_CHECK_ARG(elem_dtype != STRATA_DTYPE_UNDEFINED, "an empty sequence needs elem_dtype");
      *out = NewHandle(Value::Sequence({}, strata::capi::ToDType(elem_dtype)));
      return nullptr;
    }
    for (size_t i = 0; i < count; ++i) STRATA_CHECK_ARG(items[i], "sequence item " + std::to_string(i) + " is NULL");
    const Value first = strata::capi::AsValue(*items[0]);
    const bool maps = first.is_map();
    STRATA_CHECK_ARG(maps || first.is_tensor(),
                     "sequence items must be tensors or maps; item 0 is a " + first.Describe());
    const strata::DataType want =
        elem_dtype == STRATA_DTYPE_UNDEFINED ? first.elem_type() : strata::capi::ToDType(elem_dtype);
    std::vector<strata::Tensor> tensors;
    std::vector<Value> map_items;
    for (size_t i = 0; i < count; ++i) {
      Value item = strata::capi::AsValue(*items[i]);
      const bool same = maps ? (item.is_map() && item.key_type() == first.key_type() && item.elem_type() == want)
                             : (item.is_tensor() && item.tensor().valid() && item.elem_type() == want);
      if (!same)
        return MakeError(
            STRATA_INVALID_ARGUMENT,
            "sequence item " + std::to_string(i) + " is a " + item.Describe() + " but the sequence holds " +
                (maps
                     ? std::string("maps ") + strata::DataTypeName(first.key_type()) + "->" + strata::DataTypeName(want)
                     : std::string(strata::DataTypeName(want)) + " tensors"));
      if (maps) {
        map_items.push_back(std::move(item));
      } else {
        tensors.push_back(item.tensor());
      }
    }
    *out = NewHandle(maps ? Value::MapSequence(std::move(map_items), first.key_type(), want)
                          : Value::Sequence(std::move(tensors), want));
    return nullptr;
  });
}

strata_status* strata_value_create_map(const strata_tensor* keys, const strata_tensor* values, strata_tensor** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    STRATA_CHECK_ARG(keys && values, "keys or values is NULL");
    STRATA_CHECK_ARG(keys->value.empty() && values->value.empty(), "map keys and values must be tensors");
    auto m = strata::MakeMap(keys->tensor, values->tensor, "strata_value_create_map");
    if (!m.ok()) return ToC(m.status());
    *out = NewHandle(std::move(m).value());
    return nullptr;
  });
}

strata_status* strata_value_create_none(strata_tensor** out) {
  return Guard([&]() -> strata_status* {
    STRATA_CHECK_ARG(out, "out is NULL");
    *out = NewHandle(Value::OptionalNone());
    return nullptr;
  });
}

strata_status* strata_session_input_type(const strata_session* s, size_t index, const char** type) {
  STRATA_CHECK_ARG(s, "session is NULL");
  return strata::capi::TypeOf(s->input_types, index, "input", type);
}

strata_status* strata_session_output_type(const strata_session* s, size_t index, const char** type) {
  STRATA_CHECK_ARG(s, "session is NULL");
  return strata::capi::TypeOf(s->output_types, index, "output", type);
}

}  // extern "C"
