// Cast and CastLike between every pair of numeric types, bool and string. Halves round
// to nearest even; float->int conversions are defined for every input (NaN -> 0, out of
// range wraps through int64 like numpy, or saturates); numbers format as the shortest
// string that round-trips, and strings parse "NaN"/"INF"/"-INF" too.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "cpu/float_to_int.h"
#include "cpu/tensor_kernels.h"

namespace strata::tensorops {
namespace {

template <typename T>
constexpr bool kHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Widest faithful representation of a numeric value: double for floats, else the integer itself.
template <typename S>
auto Widen(const S& v) {
  if constexpr (kHalf<S>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return v;
  }
}

template <typename D, typename S>
inline D ConvertNumber(const S& s) {
  const auto w = Widen(s);
  using W = decltype(w);
  if constexpr (std::is_same_v<D, bool>) {
    return w != W{0};
  } else if constexpr (kHalf<D>) {
    if constexpr (std::is_same_v<S, D>) return s;
    return D(static_cast<float>(w));
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(w);
  } else if constexpr (std::is_floating_point_v<W>) {
    return FloatToInt<D>(static_cast<double>(w));
  } else {
    return static_cast<D>(w);  // integer -> integer wraps (well-defined in C++20)
  }
}

template <typename S>
std::string FormatNumber(const S& s) {
  if constexpr (std::is_same_v<S, bool>) {
    return s ? "1" : "0";
  } else if constexpr (std::is_integral_v<S>) {
    return std::to_string(s);
  } else {
    using F = std::conditional_t<std::is_same_v<S, double>, double, float>;
    const F v = static_cast<F>(s);
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v < 0 ? "-INF" : "INF";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
    return std::string(buf, r.ptr);
  }
}

template <typename D>
Status ParseNumber(const std::string& str, D* out, const Node& node) {
  const char* b = str.c_str();
  char* end = nullptr;
  errno = 0;
  auto bad = [&]() {
    return InvalidArgument(node.Describe(), ": cannot convert string \"", str, "\" to ",
                           DataTypeName(TypeToDataType<D>::value));
  };
  if (str.empty()) return bad();
  if constexpr (std::is_floating_point_v<D> || kHalf<D> || std::is_same_v<D, bool>) {
    const double v = std::strtod(b, &end);  // accepts NaN, INF, +INF, -INF, exponents
    if (end == b || *end != '\0') return bad();
    if constexpr (std::is_same_v<D, bool>) {
      *out = v != 0;
    } else if constexpr (kHalf<D>) {
      *out = D(static_cast<float>(v));
    } else {
      *out = static_cast<D>(v);
    }
  } else if constexpr (std::is_signed_v<D>) {
    const long long v = std::strtoll(b, &end, 10);
    if (end == b || *end != '\0') {
      // Allow float text such as "3.0" or "1e3" for integer targets.
      const double d = std::strtod(b, &end);
      if (end == b || *end != '\0') return bad();
      *out = FloatToInt<D>(d);
      return Status::Ok();
    }
    if (errno == ERANGE || v < std::numeric_limits<D>::min() || v > std::numeric_limits<D>::max()) return bad();
    *out = static_cast<D>(v);
  } else {
    if (str.find('-') != std::string::npos) return bad();
    const unsigned long long v = std::strtoull(b, &end, 10);
    if (end == b || *end != '\0') {
      const double d = std::strtod(b, &end);
      if (end == b || *end != '\0') return bad();
      *out = FloatToInt<D>(d);
      return Status::Ok();
    }
    if (errno == ERANGE || v > std::numeric_limits<D>::max()) return bad();
    *out = static_cast<D>(v);
  }
  return Status::Ok();
}

Status CastTensor(KernelContext& ctx, const Tensor& x, DataType to) {
  const Node& node = ctx.node();
  if (to == DataType::kUndefined || to == DataType::kComplex64 || to == DataType::kComplex128 || DataTypeSize(to) == 0)
    return Unsupported(node.Describe(), ": cannot cast to ", DataTypeName(to), " (", static_cast<int>(to), ")");
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, to, x.shape()));
  const int64_t n = x.num_elements();
  if (n == 0) return Status::Ok();
  if (x.dtype() == to) {
    CopyPlan plan{x.shape(), ContiguousStrides(x.shape()), ContiguousStrides(x.shape()), 0, 0};
    return StridedCopy(x, y, plan, ctx.pool(), node);
  }
  Status st;
  bool ok = DispatchAny(x.dtype(), [&]<typename S>() {
    DispatchAny(to, [&]<typename D>() {
      const S* s = x.data<S>();
      D* d = y->mutable_data<D>();
      if constexpr (std::is_same_v<S, std::string>) {
        if constexpr (!std::is_same_v<D, std::string>) {
          for (int64_t i = 0; i < n && st.ok(); ++i) st = ParseNumber<D>(s[i], &d[i], node);
        }
      } else if constexpr (std::is_same_v<D, std::string>) {
        for (int64_t i = 0; i < n; ++i) d[i] = FormatNumber(s[i]);
      } else {
        ParallelRange(ctx.pool(), n, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) d[i] = ConvertNumber<D>(s[i]);
        });
      }
    });
  });
  if (!ok) return UnsupportedType(node, x.dtype());
  return st;
}

Status Cast(KernelContext& ctx) {
  const Node& node = ctx.node();
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  const Attribute* a = node.FindAttr("to");
  if (!a) return InvalidModel(node.Describe(), ": missing the 'to' attribute");
  DataType to = DataType::kUndefined;
  if (a->type == Attribute::Type::kString) {
    to = DataTypeFromName(a->s);  // Cast-1 names the type ("FLOAT")
  } else if (a->type == Attribute::Type::kInt) {
    to = static_cast<DataType>(a->i);
  }
  if (to == DataType::kUndefined || DataTypeName(to) == std::string("undefined"))
    return InvalidModel(node.Describe(), ": invalid 'to' type");
  return CastTensor(ctx, *x, to);
}

Status CastLike(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
  ASSIGN_OR_RETURN(const Tensor* like, RequireInput(ctx, 1, "target_type"));
  return CastTensor(ctx, *x, like->dtype());
}

}  // namespace

void RegisterCastKernels(KernelRegistry& r) {
  RegisterVersions(r, "Cast", {1, 6, 9, 13, 19}, StatelessFactory(Cast));
  RegisterVersions(r, "CastLike", {15, 19}, StatelessFactory(CastLike));
}

}  // namespace strata::tensorops
