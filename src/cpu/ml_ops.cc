// ai.onnx.ml ops other than the tree ensembles: Normalizer, Scaler, Binarizer, Imputer,
// ArrayFeatureExtractor, OneHotEncoder, LabelEncoder (v1 and v2), CategoryMapper and
// FeatureVectorizer here; the linear models and SVMs in cpu/ml_linear.cc; the map ops (ZipMap,
// DictVectorizer, CastMap) in cpu/ml_map.cc.
//
// Where the ONNX-ML spec is open, semantics follow ONNX Runtime's CPU kernels, quirks included
// (noted at each kernel), since converted models are validated against it: input dtypes are the
// ones it registers, and attribute defaults are the schema's, which it fills in. Malformed
// attributes or inputs that it would read out of bounds are errors here.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kernel.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/ml_kernels.h"
#include "cpu/register.h"

namespace strata {
namespace {

using ml::RequireInput;
using ml::RowsAndCols;
using ml::RowsCols;

// Calls fn.template operator()<T>() for float, double, int32 and int64; false otherwise.
template <typename Fn>
bool DispatchMlNumeric(DataType dt, Fn&& fn) {
  switch (dt) {
    case DataType::kFloat:
      fn.template operator()<float>();
      return true;
    case DataType::kDouble:
      fn.template operator()<double>();
      return true;
    case DataType::kInt32:
      fn.template operator()<int32_t>();
      return true;
    case DataType::kInt64:
      fn.template operator()<int64_t>();
      return true;
    default:
      return false;
  }
}

Status BadDtype(const Node& node, const Tensor& x, const char* allowed) {
  return InvalidArgument(node.Describe(), ": input dtype ", DataTypeName(x.dtype()), " is not one of ", allowed);
}

// |v| and v * v with two's-complement wrap for integers (ONNX Runtime computes them in the
// input type; wrapping keeps the overflow cases defined).
template <typename T>
T WrapAbs(T v) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return v < 0 ? static_cast<T>(U{0} - static_cast<U>(v)) : v;
  } else {
    return std::abs(v);
  }
}
template <typename T>
T WrapSquare(T v) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(v) * static_cast<U>(v));
  } else {
    return v * v;
  }
}

// The per-feature stride of Scaler and Imputer: the last dim of a [C] input, else dim 1 (even for
// rank > 2, as ONNX Runtime reads it).
Result<int64_t> FeatureStride(const Node& node, const Tensor& x) {
  if (x.rank() == 0) return InvalidArgument(node.Describe(), ": input is a scalar; it needs at least one dimension");
  return x.rank() == 1 ? x.dim(0) : x.dim(1);
}

// ---------------------------------------------------------------------------------------------
// Normalizer: each row divided by its max (MAX), sum of |x| (L1) or sqrt of sum of x^2 (L2); a
// zero divisor copies the row. As ONNX Runtime: MAX divides by a negative max too, and the
// sums are float.

enum class NormKind { kMax, kL1, kL2 };

class NormalizerKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    const std::string n = node.GetString("norm", "MAX");
    if (n == "MAX") {
      kind_ = NormKind::kMax;
    } else if (n == "L1") {
      kind_ = NormKind::kL1;
    } else if (n == "L2") {
      kind_ = NormKind::kL2;
    } else {
      return InvalidArgument(node.Describe(), ": norm '", n, "' is not one of MAX, L1, L2");
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    ASSIGN_OR_RETURN(RowsCols rc, RowsAndCols(node, *x));
    if (!ml::IsMlNumeric(x->dtype())) return BadDtype(node, *x, "float32, float64, int32, int64");
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
    float* out = y->mutable_data<float>();
    DispatchMlNumeric(x->dtype(), [&]<typename T>() {
      const T* in = x->data<T>();
      for (int64_t r = 0; r < rc.rows; ++r) Row(in + r * rc.cols, out + r * rc.cols, rc.cols);
    });
    return Status::Ok();
  }

 private:
  template <typename T>
  void Row(const T* in, float* out, int64_t n) const {
    float d = 0;
    if (kind_ == NormKind::kMax) {
      d = std::numeric_limits<float>::lowest();
      for (int64_t i = 0; i < n; ++i) d = std::max(d, static_cast<float>(in[i]));
    } else if (kind_ == NormKind::kL1) {
      for (int64_t i = 0; i < n; ++i) d += static_cast<float>(WrapAbs(in[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) d += static_cast<float>(WrapSquare(in[i]));
    }
    if (d == 0.0f || n == 0) {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (kind_ == NormKind::kL2) {
        const float v = std::sqrt(static_cast<float>(WrapSquare(in[i])) / d);
        out[i] = in[i] < 0 ? -v : v;
      } else {
        out[i] = static_cast<float>(in[i]) / d;
      }
    }
  }

  NormKind kind_ = NormKind::kMax;
};

// ---------------------------------------------------------------------------------------------
// Scaler: Y = (X - offset) * scale, offset and scale either one value or one per feature. The
// arithmetic is in the promoted type of (T - float), as ONNX Runtime computes it.

class ScalerKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    scale_ = node.GetFloats("scale");
    offset_ = node.GetFloats("offset");
    if (scale_.empty()) return InvalidArgument(node.Describe(), ": scale is empty");
    if (scale_.size() != offset_.size())
      return InvalidArgument(node.Describe(), ": scale has ", scale_.size(), " values but offset has ", offset_.size());
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    if (!ml::IsMlNumeric(x->dtype())) return BadDtype(node, *x, "float32, float64, int32, int64");
    ASSIGN_OR_RETURN(int64_t stride, FeatureStride(node, *x));
    const bool per_feature = static_cast<int64_t>(scale_.size()) == stride;
    if (!per_feature && scale_.size() != 1)
      return InvalidArgument(node.Describe(), ": scale and offset have ", scale_.size(),
                             " values; they need 1 or one per feature (", stride, ")");
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
    float* out = y->mutable_data<float>();
    const int64_t n = x->num_elements();
    DispatchMlNumeric(x->dtype(), [&]<typename T>() {
      const T* in = x->data<T>();
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = per_feature ? static_cast<size_t>(i % stride) : 0;
        out[i] = static_cast<float>((in[i] - offset_[k]) * scale_[k]);
      }
    });
    return Status::Ok();
  }

 private:
  std::vector<float> scale_, offset_;
};

// ---------------------------------------------------------------------------------------------
// Binarizer: 1 where x > threshold, else 0. ONNX Runtime registers float only and fails on NaN.

class BinarizerKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    threshold_ = node.GetFloat("threshold", 0.0f);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    if (x->dtype() != DataType::kFloat) return BadDtype(node, *x, "float32");
    const float* in = x->data<float>();
    const int64_t n = x->num_elements();
    for (int64_t i = 0; i < n; ++i)
      if (std::isnan(in[i])) return InvalidArgument(node.Describe(), ": input element ", i, " is NaN");
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
    float* out = y->mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] > threshold_ ? 1.0f : 0.0f;
    return Status::Ok();
  }

 private:
  float threshold_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Imputer: elements equal to the replaced value (or NaN when it is NaN) become the imputed value
// of their feature. As ONNX Runtime: float and int64 inputs only; an imputed list whose length
// is not the feature count uses its first value for every feature.

class ImputerKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    floats_ = node.GetFloats("imputed_value_floats");
    ints_ = node.GetInts("imputed_value_int64s");
    if (floats_.empty() == ints_.empty())
      return InvalidArgument(node.Describe(), ": exactly one of imputed_value_floats, imputed_value_int64s must be ",
                             "non-empty");
    replaced_float_ = node.GetFloat("replaced_value_float", 0.0f);
    replaced_int_ = node.GetInt("replaced_value_int64", 0);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    if (x->dtype() == DataType::kFloat) {
      if (floats_.empty()) return InvalidArgument(node.Describe(), ": float32 input but imputed_value_floats is empty");
      return Run<float>(ctx, *x, replaced_float_, floats_);
    }
    if (x->dtype() == DataType::kInt64) {
      if (ints_.empty()) return InvalidArgument(node.Describe(), ": int64 input but imputed_value_int64s is empty");
      return Run<int64_t>(ctx, *x, replaced_int_, ints_);
    }
    return BadDtype(node, *x, "float32, int64");
  }

 private:
  template <typename T>
  Status Run(KernelContext& ctx, const Tensor& x, T replaced, const std::vector<T>& imputed) const {
    ASSIGN_OR_RETURN(int64_t stride, FeatureStride(ctx.node(), x));
    const bool per_feature = static_cast<int64_t>(imputed.size()) == stride;
    bool replaced_nan = false;
    if constexpr (std::is_floating_point_v<T>) replaced_nan = std::isnan(replaced);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
    const T* in = x.data<T>();
    T* out = y->mutable_data<T>();
    const int64_t n = x.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      bool hit = in[i] == replaced;
      if constexpr (std::is_floating_point_v<T>) hit = hit || (replaced_nan && std::isnan(in[i]));
      out[i] = hit ? imputed[per_feature ? static_cast<size_t>(i % stride) : 0] : in[i];
    }
    return Status::Ok();
  }

  std::vector<float> floats_;
  std::vector<int64_t> ints_;
  float replaced_float_ = 0;
  int64_t replaced_int_ = 0;
};

// ---------------------------------------------------------------------------------------------
// ArrayFeatureExtractor: Z[..., k] = X[..., Y[k]] over the last axis (Y flattened). As ONNX
// Runtime: a [C] input gives [1, K], and an empty Y is an error.

Status ArrayFeatureExtractorCompute(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0));
  ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1));
  if (x->rank() == 0) return InvalidArgument(node.Describe(), ": X is a scalar; it needs at least one dimension");
  if (idx->dtype() != DataType::kInt64)
    return InvalidArgument(node.Describe(), ": Y (the indices) must be int64, got ", DataTypeName(idx->dtype()));
  const int64_t stride = x->dim(x->rank() - 1);
  const int64_t k = idx->num_elements();
  if (k == 0) return InvalidArgument(node.Describe(), ": Y (the indices) is empty");
  const int64_t* ind = idx->data<int64_t>();
  for (int64_t j = 0; j < k; ++j)
    if (ind[j] < 0 || ind[j] >= stride)
      return InvalidArgument(node.Describe(), ": index Y[", j, "] = ", ind[j], " is out of range for the last dim (",
                             stride, ")");
  Shape out_shape = x->shape();
  if (x->rank() == 1) {
    out_shape = Shape{1, k};
  } else {
    out_shape[x->rank() - 1] = k;
  }
  ASSIGN_OR_RETURN(Tensor * z, ctx.AllocateOutput(0, x->dtype(), out_shape));
  const int64_t outer = stride == 0 ? 0 : x->num_elements() / stride;
  auto gather = [&]<typename T>() {
    const T* in = x->data<T>();
    T* out = z->mutable_data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j) out[o * k + j] = in[o * stride + ind[j]];
  };
  switch (x->dtype()) {
    case DataType::kString:
      gather.operator()<std::string>();
      break;
    default:
      if (!DispatchMlNumeric(x->dtype(), gather)) return BadDtype(node, *x, "float32, float64, int32, int64, string");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// OneHotEncoder: appends a dim of size #categories with a 1 at the element's category (any input
// rank). Numbers are truncated to int64 as ONNX Runtime's cast does on x86 (NaN and out-of-range
// values become INT64_MIN). An unknown category gives zeros, or an error when zeros = 0.

int64_t TruncToInt64(double v) {
  if (std::isnan(v) || v >= 9223372036854775808.0 || v < -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

class OneHotEncoderKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    const std::vector<int64_t> ints = node.GetInts("cats_int64s");
    const std::vector<std::string> strs = node.GetStrings("cats_strings");
    if (!ints.empty() && !strs.empty())
      return InvalidArgument(node.Describe(), ": only one of cats_int64s, cats_strings may be given");
    count_ = static_cast<int64_t>(ints.empty() ? strs.size() : ints.size());
    if (count_ == 0) return InvalidArgument(node.Describe(), ": one of cats_int64s, cats_strings must be non-empty");
    // A repeated category maps to its last position (ONNX Runtime's map assignment).
    for (size_t i = 0; i < ints.size(); ++i) ints_[ints[i]] = static_cast<int64_t>(i);
    for (size_t i = 0; i < strs.size(); ++i) strs_[strs[i]] = static_cast<int64_t>(i);
    zeros_ = node.GetInt("zeros", 1) != 0;
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    Shape out_shape = x->shape();
    out_shape.push_back(count_);
    const int64_t n = x->num_elements();
    std::vector<int64_t> hit(static_cast<size_t>(n), -1);
    if (x->dtype() == DataType::kString) {
      const std::string* in = x->data<std::string>();
      for (int64_t i = 0; i < n; ++i) {
        auto it = strs_.find(in[i]);
        if (it != strs_.end()) hit[i] = it->second;
      }
    } else {
      const auto lookup = [&](int64_t i, int64_t key) {
        auto it = ints_.find(key);
        if (it != ints_.end()) hit[i] = it->second;
      };
      if (x->dtype() == DataType::kInt64) {
        for (int64_t i = 0; i < n; ++i) lookup(i, x->data<int64_t>()[i]);
      } else if (x->dtype() == DataType::kFloat) {
        for (int64_t i = 0; i < n; ++i) lookup(i, TruncToInt64(x->data<float>()[i]));
      } else if (x->dtype() == DataType::kDouble) {
        for (int64_t i = 0; i < n; ++i) lookup(i, TruncToInt64(x->data<double>()[i]));
      } else {
        return BadDtype(node, *x, "int64, float32, float64, string");
      }
    }
    if (!zeros_) {
      for (int64_t i = 0; i < n; ++i)
        if (hit[i] < 0)
          return InvalidArgument(node.Describe(), ": input element ", i, " is not a known category and zeros is 0");
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    float* out = y->mutable_data<float>();
    std::fill(out, out + y->num_elements(), 0.0f);
    for (int64_t i = 0; i < n; ++i)
      if (hit[i] >= 0) out[i * count_ + hit[i]] = 1.0f;
    return Status::Ok();
  }

 private:
  int64_t count_ = 0;
  std::unordered_map<int64_t, int64_t> ints_;
  std::unordered_map<std::string, int64_t> strs_;
  bool zeros_ = true;
};

// ---------------------------------------------------------------------------------------------
// String <-> int64 maps shared by LabelEncoder v1 (index <-> classes_strings) and CategoryMapper
// (cats_int64s <-> cats_strings): a string input gives int64 (default_int64 when unknown), an
// int64 input gives strings (default_string). Repeated entries map to the last one, as ONNX
// Runtime's map assignment does.

class StringIntMapKernel final : public OpKernel {
 public:
  StringIntMapKernel(const std::vector<std::string>& strs, const std::vector<int64_t>& ints, std::string default_str,
                     int64_t default_int)
      : default_str_(std::move(default_str)), default_int_(default_int) {
    for (size_t i = 0; i < strs.size(); ++i) {
      to_int_[strs[i]] = ints[i];
      to_str_[ints[i]] = strs[i];
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    const int64_t n = x->num_elements();
    if (x->dtype() == DataType::kString) {
      ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt64, x->shape()));
      const std::string* in = x->data<std::string>();
      int64_t* out = y->mutable_data<int64_t>();
      for (int64_t i = 0; i < n; ++i) {
        auto it = to_int_.find(in[i]);
        out[i] = it == to_int_.end() ? default_int_ : it->second;
      }
      return Status::Ok();
    }
    if (x->dtype() == DataType::kInt64) {
      ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kString, x->shape()));
      const int64_t* in = x->data<int64_t>();
      std::string* out = y->mutable_data<std::string>();
      for (int64_t i = 0; i < n; ++i) {
        auto it = to_str_.find(in[i]);
        out[i] = it == to_str_.end() ? default_str_ : it->second;
      }
      return Status::Ok();
    }
    return BadDtype(node, *x, "string, int64");
  }

 private:
  std::unordered_map<std::string, int64_t> to_int_;
  std::unordered_map<int64_t, std::string> to_str_;
  std::string default_str_;
  int64_t default_int_;
};

Result<std::unique_ptr<OpKernel>> MakeLabelEncoderV1(const KernelInit& init) {
  const Node& node = init.node;
  // Required by ONNX Runtime (the schema marks it optional).
  if (!node.FindAttr("classes_strings")) return InvalidArgument(node.Describe(), ": classes_strings is required");
  const std::vector<std::string> classes = node.GetStrings("classes_strings");
  std::vector<int64_t> index(classes.size());
  for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int64_t>(i);
  return std::unique_ptr<OpKernel>(std::make_unique<StringIntMapKernel>(
      classes, index, node.GetString("default_string", "_Unused"), node.GetInt("default_int64", -1)));
}

Result<std::unique_ptr<OpKernel>> MakeCategoryMapper(const KernelInit& init) {
  const Node& node = init.node;
  // Both are required, as ONNX Runtime's type inference demands.
  if (!node.FindAttr("cats_strings") || !node.FindAttr("cats_int64s"))
    return InvalidArgument(node.Describe(), ": cats_strings and cats_int64s are both required");
  const std::vector<std::string> strs = node.GetStrings("cats_strings");
  const std::vector<int64_t> ints = node.GetInts("cats_int64s");
  if (strs.size() != ints.size())
    return InvalidArgument(node.Describe(), ": cats_strings has ", strs.size(), " values but cats_int64s has ",
                           ints.size());
  return std::unique_ptr<OpKernel>(std::make_unique<StringIntMapKernel>(
      strs, ints, node.GetString("default_string", "_Unused"), node.GetInt("default_int64", -1)));
}

// ---------------------------------------------------------------------------------------------
// LabelEncoder v2: keys_{floats,int64s,strings} map to values_{floats,int64s,strings}, unknown
// keys to default_{float,int64,string}. As ONNX Runtime's v2 kernel (a plain hash map): a
// repeated key keeps its first value, and a NaN key never matches (only v4 matches NaN to NaN);
// 0.0 and -0.0 are the same key.

struct FloatKeyHash {
  size_t operator()(float f) const { return std::hash<float>{}(f == 0.0f ? 0.0f : f); }
};

class LabelEncoderV2Kernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    const char* key_attrs[] = {"keys_floats", "keys_int64s", "keys_strings"};
    const char* value_attrs[] = {"values_floats", "values_int64s", "values_strings"};
    const DataType types[] = {DataType::kFloat, DataType::kInt64, DataType::kString};
    int key = -1, value = -1;
    for (int i = 0; i < 3; ++i) {
      if (node.FindAttr(key_attrs[i])) {
        if (key >= 0) return InvalidArgument(node.Describe(), ": only one of keys_floats, keys_int64s, keys_strings");
        key = i;
      }
      if (node.FindAttr(value_attrs[i])) {
        if (value >= 0)
          return InvalidArgument(node.Describe(), ": only one of values_floats, values_int64s, values_strings");
        value = i;
      }
    }
    if (key < 0) return InvalidArgument(node.Describe(), ": one of keys_floats, keys_int64s, keys_strings is required");
    if (value < 0)
      return InvalidArgument(node.Describe(), ": one of values_floats, values_int64s, values_strings is required");
    key_type_ = types[key];
    value_type_ = types[value];
    key_attr_ = key_attrs[key];
    size_t num_keys = 0, num_values = 0;
    if (key == 0) {
      const std::vector<float> k = node.GetFloats(key_attrs[0]);
      num_keys = k.size();
      for (size_t i = 0; i < k.size(); ++i)
        if (!std::isnan(k[i])) float_keys_.emplace(k[i], static_cast<int64_t>(i));
    } else if (key == 1) {
      const std::vector<int64_t> k = node.GetInts(key_attrs[1]);
      num_keys = k.size();
      for (size_t i = 0; i < k.size(); ++i) int_keys_.emplace(k[i], static_cast<int64_t>(i));
    } else {
      const std::vector<std::string> k = node.GetStrings(key_attrs[2]);
      num_keys = k.size();
      for (size_t i = 0; i < k.size(); ++i) str_keys_.emplace(k[i], static_cast<int64_t>(i));
    }
    if (value == 0) {
      float_values_ = node.GetFloats(value_attrs[0]);
      num_values = float_values_.size();
    } else if (value == 1) {
      int_values_ = node.GetInts(value_attrs[1]);
      num_values = int_values_.size();
    } else {
      str_values_ = node.GetStrings(value_attrs[2]);
      num_values = str_values_.size();
    }
    if (num_keys != num_values)
      return InvalidArgument(node.Describe(), ": ", key_attrs[key], " has ", num_keys, " values but ",
                             value_attrs[value], " has ", num_values);
    default_float_ = node.GetFloat("default_float", -0.0f);
    default_int_ = node.GetInt("default_int64", -1);
    default_str_ = node.GetString("default_string", "_Unused");
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx));
    if (x->dtype() != key_type_)
      return InvalidArgument(node.Describe(), ": input dtype ", DataTypeName(x->dtype()), " does not match ", key_attr_,
                             " (", DataTypeName(key_type_), ")");
    const int64_t n = x->num_elements();
    std::vector<int64_t> pos(static_cast<size_t>(n), -1);
    if (key_type_ == DataType::kFloat) {
      for (int64_t i = 0; i < n; ++i) {
        auto it = float_keys_.find(x->data<float>()[i]);
        if (it != float_keys_.end()) pos[i] = it->second;
      }
    } else if (key_type_ == DataType::kInt64) {
      for (int64_t i = 0; i < n; ++i) {
        auto it = int_keys_.find(x->data<int64_t>()[i]);
        if (it != int_keys_.end()) pos[i] = it->second;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        auto it = str_keys_.find(x->data<std::string>()[i]);
        if (it != str_keys_.end()) pos[i] = it->second;
      }
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, value_type_, x->shape()));
    if (value_type_ == DataType::kFloat) {
      float* out = y->mutable_data<float>();
      for (int64_t i = 0; i < n; ++i) out[i] = pos[i] < 0 ? default_float_ : float_values_[pos[i]];
    } else if (value_type_ == DataType::kInt64) {
      int64_t* out = y->mutable_data<int64_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = pos[i] < 0 ? default_int_ : int_values_[pos[i]];
    } else {
      std::string* out = y->mutable_data<std::string>();
      for (int64_t i = 0; i < n; ++i) out[i] = pos[i] < 0 ? default_str_ : str_values_[pos[i]];
    }
    return Status::Ok();
  }

 private:
  DataType key_type_ = DataType::kUndefined, value_type_ = DataType::kUndefined;
  std::string key_attr_;
  // Key -> position of its value; emplace keeps the first of repeated keys.
  std::unordered_map<float, int64_t, FloatKeyHash> float_keys_;
  std::unordered_map<int64_t, int64_t> int_keys_;
  std::unordered_map<std::string, int64_t> str_keys_;
  std::vector<float> float_values_;
  std::vector<int64_t> int_values_;
  std::vector<std::string> str_values_;
  float default_float_ = -0.0f;
  int64_t default_int_ = -1;
  std::string default_str_;
};

// ---------------------------------------------------------------------------------------------
// FeatureVectorizer: concatenates the inputs' rows (cast to float) into [N, sum(inputdimensions)];
// input i fills inputdimensions[i] columns, truncated when it has more features per row (all dims
// after the first count) and zero-padded when it has fewer. [C] inputs are one row; every input
// needs the same batch size. Inputs of different dtypes are accepted (the schema asks for one).

class FeatureVectorizerKernel final : public OpKernel {
 public:
  Status Init(const Node& node) {
    dims_ = node.GetInts("inputdimensions");
    if (dims_.empty()) return InvalidArgument(node.Describe(), ": inputdimensions is required (one size per input)");
    for (int64_t d : dims_) {
      if (d < 0 || d > std::numeric_limits<int64_t>::max() - total_)
        return InvalidArgument(node.Describe(), ": inputdimensions value ", d, " is negative or the sum overflows");
      total_ += d;
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    if (ctx.num_inputs() != dims_.size())
      return InvalidArgument(node.Describe(), ": ", ctx.num_inputs(), " inputs but inputdimensions has ", dims_.size(),
                             " values");
    ASSIGN_OR_RETURN(const Tensor* x0, RequireInput(ctx, 0));
    if (x0->rank() == 0) return InvalidArgument(node.Describe(), ": input 0 is a scalar; it needs a dimension");
    const int64_t rows = x0->rank() == 1 ? 1 : x0->dim(0);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, Shape{rows, total_}));
    float* out = y->mutable_data<float>();
    std::fill(out, out + y->num_elements(), 0.0f);
    int64_t offset = 0;
    for (size_t i = 0; i < dims_.size(); ++i) {
      ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, i));
      if (x->rank() == 0) return InvalidArgument(node.Describe(), ": input ", i, " is a scalar; it needs a dimension");
      const int64_t n = x->rank() == 1 ? 1 : x->dim(0);
      const int64_t size = x->rank() == 1 ? x->dim(0) : (n == 0 ? 0 : x->num_elements() / n);
      if (n != rows)
        return InvalidArgument(node.Describe(), ": input ", i, " has ", n, " rows but input 0 has ", rows,
                               "; all inputs need the same batch size");
      const int64_t copy = std::min(size, dims_[i]);
      const bool ok = DispatchMlNumeric(x->dtype(), [&]<typename T>() {
        const T* in = x->data<T>();
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = 0; c < copy; ++c) out[r * total_ + offset + c] = static_cast<float>(in[r * size + c]);
      });
      if (!ok)
        return InvalidArgument(node.Describe(), ": input ", i, " dtype ", DataTypeName(x->dtype()),
                               " is not one of int32, int64, float32, float64");
      offset += dims_[i];
    }
    return Status::Ok();
  }

 private:
  std::vector<int64_t> dims_;
  int64_t total_ = 0;
};

}  // namespace

void RegisterMlKernels(KernelRegistry& r) {
  using ml::InitFactory;
  using ml::RegisterMl;
  const DataType f32 = DataType::kFloat, f64 = DataType::kDouble, i32 = DataType::kInt32, i64 = DataType::kInt64,
                 str = DataType::kString;
  // Input dtypes as ONNX Runtime registers them (narrower than the schema for some ops).
  RegisterMl(r, "Normalizer", 1, INT_MAX, {f32, f64, i32, i64}, InitFactory<NormalizerKernel>());
  RegisterMl(r, "Scaler", 1, INT_MAX, {f32, f64, i32, i64}, InitFactory<ScalerKernel>());
  RegisterMl(r, "Binarizer", 1, INT_MAX, {f32}, InitFactory<BinarizerKernel>());
  RegisterMl(r, "Imputer", 1, INT_MAX, {f32, i64}, InitFactory<ImputerKernel>());
  RegisterMl(r, "ArrayFeatureExtractor", 1, INT_MAX, {f32, f64, i32, i64, str},
             StatelessFactory(ArrayFeatureExtractorCompute));
  RegisterMl(r, "OneHotEncoder", 1, INT_MAX, {i64, f32, f64, str}, InitFactory<OneHotEncoderKernel>());
  RegisterMl(r, "LabelEncoder", 1, 1, {str, i64}, MakeLabelEncoderV1);
  // v2 serves ai.onnx.ml opsets 2 and 3 (LabelEncoder v4, with tensor keys, is not covered).
  RegisterMl(r, "LabelEncoder", 2, 3, {f32, i64, str}, InitFactory<LabelEncoderV2Kernel>());
  RegisterMl(r, "CategoryMapper", 1, INT_MAX, {str, i64}, MakeCategoryMapper);
  RegisterMl(r, "FeatureVectorizer", 1, INT_MAX, {i32, i64, f32, f64}, InitFactory<FeatureVectorizerKernel>());
  RegisterMlLinearKernels(r);
  RegisterMlMapKernels(r);
}

}  // namespace strata
