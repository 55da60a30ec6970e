// The ai.onnx.ml ops on map values: ZipMap (class scores -> one {label: score} map per row,
// the default last step of scikit-learn classifiers converted by skl2onnx), CastMap and
// DictVectorizer (a map -> a dense row). A map is a Value of sorted unique keys and parallel
// values (core/tensor.h). Semantics follow ONNX Runtime 1.30 where the spec is silent; the
// differences (errors where it throws or casts undefined values) are in docs/onnx-ml.md.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu/ml_kernels.h"

namespace strata {
namespace {

// ZipMap: X [C] or [N, C] float -> N maps {classlabels[j]: X[n, j]}. Keys are sorted and
// unique once at creation; a label listed twice keeps its last column, as ONNX Runtime's
// std::map assignment does.
class ZipMapKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    const std::vector<std::string> s = node.GetStrings("classlabels_strings");
    const std::vector<int64_t> i = node.GetInts("classlabels_int64s");
    if (s.empty() == i.empty())
      return InvalidModel(node.Describe(), ": exactly one of classlabels_strings and classlabels_int64s must be given");
    labels_ = static_cast<int64_t>(s.empty() ? i.size() : s.size());
    if (!s.empty()) return BuildKeys(s, DataType::kString);
    return BuildKeys(i, DataType::kInt64);
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, ml::RequireInput(ctx));
    if (x->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": input must be float32, got ", DataTypeName(x->dtype()));
    ASSIGN_OR_RETURN(ml::RowsCols rc, ml::RowsAndCols(node, *x));
    if (rc.cols != labels_)
      return InvalidArgument(node.Describe(), ": input has ", rc.cols, " columns but there are ", labels_,
                             " class labels");
    const int64_t k = keys_.num_elements();
    // One buffer holds every row's values; each map's values tensor is a view of its row.
    ASSIGN_OR_RETURN(Tensor all, Tensor::Allocate(DataType::kFloat, Shape{rc.rows, k}, ctx.allocator()));
    const float* src = x->data<float>();
    float* dst = all.mutable_data<float>();
    std::vector<Value> maps;
    maps.reserve(static_cast<size_t>(rc.rows));
    for (int64_t r = 0; r < rc.rows; ++r) {
      for (int64_t j = 0; j < k; ++j) dst[r * k + j] = src[r * rc.cols + columns_[static_cast<size_t>(j)]];
      Tensor row(DataType::kFloat, Shape{k}, all.buffer(),
                 all.byte_offset() + static_cast<size_t>(r * k) * sizeof(float));
      maps.push_back(Value::Map(keys_, std::move(row)));
    }
    ctx.SetOutput(0, Value::MapSequence(std::move(maps), keys_.dtype(), DataType::kFloat));
    return Status::Ok();
  }

 private:
  template <typename K>
  Status BuildKeys(const std::vector<K>& labels, DataType dt) {
    std::vector<size_t> order(labels.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    // Stable, so among equal labels the last column comes last and is the one kept.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return labels[a] < labels[b]; });
    std::vector<K> keys;
    for (size_t j = 0; j < order.size(); ++j) {
      const bool repeat = j + 1 < order.size() && !(labels[order[j]] < labels[order[j + 1]]);
      if (repeat) continue;
      keys.push_back(labels[order[j]]);
      columns_.push_back(static_cast<int64_t>(order[j]));
    }
    ASSIGN_OR_RETURN(keys_, Tensor::Allocate(dt, Shape{static_cast<int64_t>(keys.size())}));
    std::copy(keys.begin(), keys.end(), keys_.mutable_data<K>());
    return Status::Ok();
  }

  int64_t labels_ = 0;
  Tensor keys_;                   // sorted unique labels, shared by every output map
  std::vector<int64_t> columns_;  // the input column of each key
};

// The map input of CastMap/DictVectorizer, or an error naming the node and what it got.
Result<const Value*> RequireMap(const KernelContext& ctx) {
  const Value& v = ctx.input_value(0);
  if (!v.is_map()) return InvalidArgument(ctx.node().Describe(), ": input must be a map, got ", v.Describe());
  return &v;
}

// CastMap: a map int64 -> (string | float) to a [1, n] tensor of float, int64 or string.
// DENSE: the values in key order. SPARSE: max_map slots, slot i holding key i's value and the
// pad (0, or ONNX Runtime's "0.f" for strings) where the key is absent; keys >= max_map are
// dropped, a negative key is an error.
class CastMapKernel final : public OpKernel {
 public:
  enum class To { kFloat, kString, kInt64 };

  Status Init(const Node& node) {
    const std::string cast = node.GetString("cast_to", "TO_FLOAT");
    if (cast == "TO_FLOAT") {
      to_ = To::kFloat;
    } else if (cast == "TO_STRING") {
      to_ = To::kString;
    } else if (cast == "TO_INT64") {
      to_ = To::kInt64;
    } else {
      return InvalidModel(node.Describe(), ": cast_to '", cast, "' is not TO_FLOAT, TO_STRING or TO_INT64");
    }
    const std::string form = node.GetString("map_form", "DENSE");
    if (form != "DENSE" && form != "SPARSE")
      return InvalidModel(node.Describe(), ": map_form '", form, "' is not DENSE or SPARSE");
    sparse_ = form == "SPARSE";
    max_map_ = node.GetInt("max_map", 1);
    if (sparse_ && max_map_ <= 0)
      return InvalidModel(node.Describe(), ": max_map must be positive for map_form SPARSE, got ", max_map_);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Value* in, RequireMap(ctx));
    if (in->key_type() != DataType::kInt64 ||
        (in->elem_type() != DataType::kFloat && in->elem_type() != DataType::kString))
      return InvalidArgument(node.Describe(), ": input must be a map int64->float32 or int64->string, got ",
                             in->Describe());
    const Tensor& keys = in->map_keys();
    const int64_t n = keys.num_elements();
    const int64_t width = sparse_ ? max_map_ : n;
    const DataType out_type =
        to_ == To::kFloat ? DataType::kFloat : (to_ == To::kInt64 ? DataType::kInt64 : DataType::kString);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, out_type, Shape{1, width}));
    const int64_t* k = keys.data<int64_t>();
    if (sparse_ && n > 0 && k[0] < 0)
      return InvalidArgument(node.Describe(), ": map_form SPARSE needs keys >= 0, got key ", k[0]);
    int64_t next = 0;  // next map entry (SPARSE)
    for (int64_t slot = 0; slot < width; ++slot) {
      int64_t entry = slot;
      if (sparse_) {
        entry = next < n && k[next] == slot ? next++ : -1;
      }
      RETURN_IF_ERROR(Write(node, *in, entry, y, slot));
    }
    return Status::Ok();
  }

 private:
  // Writes entry `e` of the map (-1: the pad) converted to slot `s` of y.
  Status Write(const Node& node, const Value& in, int64_t e, Tensor* y, int64_t s) const {
    const bool from_string = in.elem_type() == DataType::kString;
    const int64_t key = e >= 0 ? in.map_keys().data<int64_t>()[e] : 0;
    switch (to_) {
      case To::kFloat: {
        float v = 0.f;
        if (e >= 0 && from_string) {
          ASSIGN_OR_RETURN(v, ParseFloat(node, in.map_values().data<std::string>()[e], key));
        } else if (e >= 0) {
          v = in.map_values().data<float>()[e];
        }
        y->mutable_data<float>()[s] = v;
        return Status::Ok();
      }
      case To::kInt64: {
        int64_t v = 0;
        if (e >= 0 && from_string) {
          ASSIGN_OR_RETURN(v, ParseInt(node, in.map_values().data<std::string>()[e], key));
        } else if (e >= 0) {
          const float f = in.map_values().data<float>()[e];
          // static_cast of NaN or of a float outside int64 is undefined; refuse it instead.
          if (!(f >= -9.2233720368547758e18f && f < 9.2233720368547758e18f))
            return InvalidArgument(node.Describe(), ": value ", f, " at key ", key, " does not fit in int64");
          v = static_cast<int64_t>(f);
        }
        y->mutable_data<int64_t>()[s] = v;
        return Status::Ok();
      }
      case To::kString: {
        std::string v = "0.f";
        if (e >= 0 && from_string) {
          v = in.map_values().data<std::string>()[e];
        } else if (e >= 0) {
          char buf[64];  // std::to_string(float)'s "%f", as ONNX Runtime writes it
          std::snprintf(buf, sizeof(buf), "%f", static_cast<double>(in.map_values().data<float>()[e]));
          v = buf;
        }
        y->mutable_data<std::string>()[s] = std::move(v);
        return Status::Ok();
      }
    }
    return Status::Ok();
  }

  // std::stof's rules (leading space, then the longest number prefix) without its exceptions.
  static Result<float> ParseFloat(const Node& node, const std::string& s, int64_t key) {
    errno = 0;
    char* end = nullptr;
    const float v = std::strtof(s.c_str(), &end);
    if (end == s.c_str() || errno == ERANGE)
      return InvalidArgument(node.Describe(), ": value '", s, "' at key ", key, " is not a float32 number");
    return v;
  }
  static Result<int64_t> ParseInt(const Node& node, const std::string& s, int64_t key) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() || errno == ERANGE)
      return InvalidArgument(node.Describe(), ": value '", s, "' at key ", key, " is not an int64 number");
    return static_cast<int64_t>(v);
  }

  To to_ = To::kFloat;
  bool sparse_ = false;
  int64_t max_map_ = 1;
};

// DictVectorizer: a map -> [1, V] row of its values at the vocabulary's keys, in vocabulary
// order; a key the map lacks gives 0 ("" for strings). The map's key type must match the
// vocabulary's (string_vocabulary or int64_vocabulary), and its value type be one the schema
// pairs with that key type; repeated vocabulary entries repeat.
class DictVectorizerKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    strings_ = node.GetStrings("string_vocabulary");
    ints_ = node.GetInts("int64_vocabulary");
    if (strings_.empty() == ints_.empty())
      return InvalidModel(node.Describe(), ": exactly one of string_vocabulary and int64_vocabulary must be given");
    key_type_ = strings_.empty() ? DataType::kInt64 : DataType::kString;
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Value* in, RequireMap(ctx));
    if (in->key_type() != key_type_)
      return InvalidArgument(node.Describe(), ": the vocabulary has ", DataTypeName(key_type_),
                             " keys but the input is a ", in->Describe());
    // The schema's types: string keys with int64, float or double values; int64 keys with
    // string, float or double values.
    const DataType vt = in->elem_type();
    const DataType other = key_type_ == DataType::kString ? DataType::kInt64 : DataType::kString;
    if (vt != DataType::kFloat && vt != DataType::kDouble && vt != other)
      return InvalidArgument(node.Describe(), ": a map with ", DataTypeName(key_type_), " keys must have ",
                             DataTypeName(other), ", float32 or float64 values, got ", in->Describe());
    const int64_t v =
        key_type_ == DataType::kString ? static_cast<int64_t>(strings_.size()) : static_cast<int64_t>(ints_.size());
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, vt, Shape{1, v}));
    switch (vt) {
      case DataType::kFloat:
        Fill<float>(*in, y);
        break;
      case DataType::kDouble:
        Fill<double>(*in, y);
        break;
      case DataType::kInt64:
        Fill<int64_t>(*in, y);
        break;
      default:
        Fill<std::string>(*in, y);
        break;
    }
    return Status::Ok();
  }

 private:
  template <typename V>
  void Fill(const Value& in, Tensor* y) const {
    if (key_type_ == DataType::kString) {
      FillKeys<std::string, V>(strings_, in, y);
    } else {
      FillKeys<int64_t, V>(ints_, in, y);
    }
  }
  template <typename K, typename V>
  static void FillKeys(const std::vector<K>& vocab, const Value& in, Tensor* y) {
    const K* keys = in.map_keys().data<K>();
    const K* keys_end = keys + in.map_keys().num_elements();
    const V* vals = in.map_values().data<V>();
    V* out = y->mutable_data<V>();
    for (size_t i = 0; i < vocab.size(); ++i) {
      const K* it = std::lower_bound(keys, keys_end, vocab[i]);  // map keys are sorted
      out[i] = (it != keys_end && *it == vocab[i]) ? vals[it - keys] : V();
    }
  }

  DataType key_type_ = DataType::kUndefined;
  std::vector<std::string> strings_;
  std::vector<int64_t> ints_;
};

}  // namespace

void RegisterMlMapKernels(KernelRegistry& r) {
  using ml::InitFactory;
  using ml::RegisterMl;
  RegisterMl(r, "ZipMap", 1, INT_MAX, {DataType::kFloat}, InitFactory<ZipMapKernel>());
  // Map inputs: no dtype key (the kernels check the key and value types themselves).
  RegisterMl(r, "CastMap", 1, INT_MAX, {}, InitFactory<CastMapKernel>());
  RegisterMl(r, "DictVectorizer", 1, INT_MAX, {}, InitFactory<DictVectorizerKernel>());
}

}  // namespace strata
