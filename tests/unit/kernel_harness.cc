#include "kernel_harness.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>

#include "core/threadpool.h"

namespace strata::testing {

namespace {

template <typename T>
double AsDouble(const T& v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

ThreadPool* SharedPool(int threads) {
  if (threads <= 1) return nullptr;
  static std::mutex mu;
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return p.get();
}

TypeInfo TypeOf(const Value& v) {
  TypeInfo t;
  if (v.is_tensor()) {
    t.kind = TypeInfo::Kind::kTensor;
    t.elem_type = v.tensor().dtype();
    t.has_shape = true;
    for (int64_t d : v.tensor().shape()) t.dims.push_back(Dim{d, ""});
  } else if (v.is_sequence()) {
    t.kind = TypeInfo::Kind::kSequence;
    t.elem_type = v.elem_type();
  } else if (v.is_none()) {
    t.kind = TypeInfo::Kind::kOptional;
    t.elem_type = v.elem_type();
    t.optional_of_sequence = v.none_is_sequence();
  } else if (v.is_map() || v.is_map_sequence()) {
    t.kind = v.is_map() ? TypeInfo::Kind::kMap : TypeInfo::Kind::kSequence;
    t.elem_type = v.elem_type();
    t.map_key = v.key_type();
  }
  return t;
}

DataType DispatchType(const std::vector<Value>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i].elem_type() : DataType::kUndefined;
}

}  // namespace

OpSpec& OpSpec::Attr(const std::string& name, int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  attrs[name] = std::move(a);
  return *this;
}
OpSpec& OpSpec::Attr(const std::string& name, float v) {
  Attribute a;
  a.type = Attribute::Type::kFloat;
  a.f = v;
  attrs[name] = std::move(a);
  return *this;
}
OpSpec& OpSpec::Attr(const std::string& name, const std::string& v) {
  Attribute a;
  a.type = Attribute::Type::kString;
  a.s = v;
  attrs[name] = std::move(a);
  return *this;
}
OpSpec& OpSpec::Attr(const std::string& name, const std::vector<int64_t>& v) {
  Attribute a;
  a.type = Attribute::Type::kInts;
  a.ints = v;
  attrs[name] = std::move(a);
  return *this;
}
OpSpec& OpSpec::Attr(const std::string& name, const std::vector<float>& v) {
  Attribute a;
  a.type = Attribute::Type::kFloats;
  a.floats = v;
  attrs[name] = std::move(a);
  return *this;
}
OpSpec& OpSpec::Attr(const std::string& name, const std::vector<std::string>& v) {
  Attribute a;
  a.type = Attribute::Type::kStrings;
  a.strings = v;
  attrs[name] = std::move(a);
  return *this;
}
OpSpec& OpSpec::Attr(const std::string& name, const Tensor& v) {
  Attribute a;
  a.type = Attribute::Type::kTensor;
  a.t = v;
  attrs[name] = std::move(a);
  return *this;
}

const KernelDef* FindKernel(const OpSpec& spec, const std::vector<Value>& inputs, bool want_reference) {
  const KernelRegistry& reg = CpuKernels();
  const KernelDef* def = reg.Find(spec.domain, spec.op_type, spec.opset, DispatchType(inputs, 0), want_reference);
  // The registry keys on the def's type_input; redo the lookup if that is not input 0.
  if (def && def->type_input != 0)
    def = reg.Find(spec.domain, spec.op_type, spec.opset, DispatchType(inputs, def->type_input), want_reference);
  return def;
}

bool HasOptimizedKernel(const OpSpec& spec, DataType dtype) {
  const KernelDef* def = CpuKernels().Find(spec.domain, spec.op_type, spec.opset, dtype, false);
  return def && !def->reference;
}

Status BuildSingleNodeGraph(const OpSpec& spec, const std::vector<Value>& inputs, const RunOptions& opts, Graph* g,
                            Node* n) {
  Graph& graph = *g;
  Node& node = *n;
  graph.name = "kernel_harness";
  node.name = "test_" + spec.op_type;
  node.op_type = spec.op_type;
  node.domain = spec.domain;
  node.opset = spec.opset;
  node.attrs = spec.attrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) {
      node.inputs.push_back(-1);
      continue;
    }
    const int v = graph.AddValue("input" + std::to_string(i));
    graph.values[v].type = TypeOf(inputs[i]);
    node.inputs.push_back(v);
    graph.inputs.push_back(v);
    if (std::find(opts.constant_inputs.begin(), opts.constant_inputs.end(), i) != opts.constant_inputs.end()) {
      if (!inputs[i].is_tensor()) return InvalidArgument("kernel harness: constant input ", i, " is not a tensor");
      graph.initializers[v] = inputs[i].tensor();
    }
  }
  for (int o = 0; o < spec.num_outputs; ++o) {
    const int v = graph.AddValue("output" + std::to_string(o));
    node.outputs.push_back(v);
    graph.outputs.push_back(v);
  }
  return Status::Ok();
}

Result<std::vector<Value>> RunKernelValues(const OpSpec& spec, const std::vector<Value>& inputs,
                                           const RunOptions& opts) {
  Graph graph;
  Node node;
  RETURN_IF_ERROR(BuildSingleNodeGraph(spec, inputs, opts, &graph, &node));

  const KernelDef* def = opts.force_kernel ? opts.force_kernel : FindKernel(spec, inputs, opts.want_reference);
  if (!def) {
    return Unsupported(node.Describe(), ": no ", opts.want_reference ? "reference " : "", "CPU kernel for dtype ",
                       DataTypeName(DispatchType(inputs, 0)));
  }
  ThreadPool* pool = SharedPool(opts.threads);
  KernelInit init{node, graph, pool, opts.config};
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, def->factory(init));
  if (!kernel) return InternalError(node.Describe(), ": kernel factory returned null");

  std::vector<const Value*> in_ptrs;
  for (const Value& v : inputs) in_ptrs.push_back(v.empty() ? nullptr : &v);
  std::vector<Value> outputs(spec.num_outputs);
  KernelContext ctx(node, in_ptrs, &outputs, pool, DefaultAllocator(), nullptr);
  RETURN_IF_ERROR(kernel->Compute(ctx));
  return outputs;
}

Result<std::vector<Tensor>> RunKernel(const OpSpec& spec, const std::vector<Tensor>& inputs, const RunOptions& opts) {
  std::vector<Value> values;
  for (const Tensor& t : inputs) values.push_back(t.valid() ? Value(t) : Value());
  ASSIGN_OR_RETURN(std::vector<Value> outs, RunKernelValues(spec, values, opts));
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor()) {
      if (outs[i].empty()) {
        tensors.emplace_back();  // output not produced (e.g. not requested)
        continue;
      }
      return InvalidArgument("kernel harness: output ", i, " is not a tensor");
    }
    tensors.push_back(outs[i].tensor());
  }
  return tensors;
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> out;
  if (!t.valid()) return out;
  out.reserve(t.num_elements());
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(AsDouble(p[i]));
  });
  return out;
}

Tensor MakeTensor(DataType dt, const Shape& shape, const std::vector<double>& values) {
  Tensor t = Tensor::Allocate(dt, shape).value();
  DispatchNumeric(dt, [&]<typename T>() {
    T* p = t.mutable_data<T>();
    for (int64_t i = 0; i < t.num_elements() && i < static_cast<int64_t>(values.size()); ++i) {
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        p[i] = T(static_cast<float>(values[i]));
      } else {
        p[i] = static_cast<T>(values[i]);
      }
    }
  });
  return t;
}

namespace {
::testing::AssertionResult Compare(const Tensor& e, const Tensor& a, double rtol, double atol, bool exact) {
  if (e.valid() != a.valid())
    return ::testing::AssertionFailure() << "one tensor is absent (expected valid=" << e.valid()
                                         << ", actual valid=" << a.valid() << ")";
  if (e.dtype() != a.dtype())
    return ::testing::AssertionFailure() << "dtype mismatch: expected " << DataTypeName(e.dtype()) << ", got "
                                         << DataTypeName(a.dtype());
  if (e.shape() != a.shape())
    return ::testing::AssertionFailure() << "shape mismatch: expected " << ShapeToString(e.shape()) << ", got "
                                         << ShapeToString(a.shape());
  const std::vector<double> ev = ToDoubles(e), av = ToDoubles(a);
  int64_t bad = 0;
  double worst = 0;
  std::ostringstream os;
  for (size_t i = 0; i < ev.size(); ++i) {
    const double x = ev[i], y = av[i];
    bool ok;
    if (std::isnan(x) || std::isnan(y)) {
      ok = std::isnan(x) && std::isnan(y);
    } else if (std::isinf(x) || std::isinf(y) || exact) {
      ok = x == y;
    } else {
      ok = std::fabs(x - y) <= atol + rtol * std::fabs(x);
    }
    if (!ok) {
      if (bad < 8) os << "\n  [" << i << "] expected " << x << ", got " << y;
      if (!std::isnan(x) && !std::isnan(y)) worst = std::max(worst, std::fabs(x - y));
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << ev.size() << " elements differ (shape "
                                       << ShapeToString(e.shape()) << ", " << DataTypeName(e.dtype())
                                       << ", rtol=" << rtol << ", atol=" << atol << ", max abs diff " << worst
                                       << "):" << os.str();
}
}  // namespace

::testing::AssertionResult TensorsNear(const Tensor& expected, const Tensor& actual, double rtol, double atol) {
  return Compare(expected, actual, rtol, atol, false);
}
::testing::AssertionResult TensorsEqual(const Tensor& expected, const Tensor& actual) {
  return Compare(expected, actual, 0, 0, true);
}

::testing::AssertionResult OptimizedMatchesReference(const OpSpec& spec, const std::vector<Tensor>& inputs, double rtol,
                                                     double atol, int threads) {
  const DataType dt = inputs.empty() ? DataType::kUndefined : inputs[0].dtype();
  if (!HasOptimizedKernel(spec, dt))
    return ::testing::AssertionFailure() << spec.op_type << " opset " << spec.opset << " has no optimized kernel for "
                                         << DataTypeName(dt);
  RunOptions ref_opts;
  ref_opts.want_reference = true;
  RunOptions opt_opts;
  opt_opts.threads = threads;
  auto ref = RunKernel(spec, inputs, ref_opts);
  auto opt = RunKernel(spec, inputs, opt_opts);
  if (ref.ok() != opt.ok())
    return ::testing::AssertionFailure() << "reference " << (ref.ok() ? "succeeded" : ref.status().ToString())
                                         << " but optimized " << (opt.ok() ? "succeeded" : opt.status().ToString());
  if (!ref.ok()) {
    if (ref.status().code() != opt.status().code())
      return ::testing::AssertionFailure() << "error codes differ: reference " << ref.status().ToString()
                                           << ", optimized " << opt.status().ToString();
    return ::testing::AssertionSuccess();
  }
  for (size_t i = 0; i < ref->size(); ++i) {
    auto r = TensorsNear((*ref)[i], (*opt)[i], rtol, atol);
    if (!r) return ::testing::AssertionFailure() << spec.op_type << " output " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

Tensor RandomTensor(DataType dtype, const Shape& shape, uint64_t seed, double lo, double hi) {
  Tensor t = Tensor::Allocate(dtype, shape).value();
  std::mt19937_64 rng(seed);
  DispatchNumeric(dtype, [&]<typename T>() {
    T* p = t.mutable_data<T>();
    const int64_t n = t.num_elements();
    if constexpr (std::is_same_v<T, bool>) {
      std::bernoulli_distribution d(0.5);
      for (int64_t i = 0; i < n; ++i) p[i] = d(rng);
    } else if constexpr (std::is_integral_v<T>) {
      const double tlo = static_cast<double>(std::numeric_limits<T>::lowest());
      const double thi = static_cast<double>(std::numeric_limits<T>::max());
      const auto l = static_cast<int64_t>(std::clamp(std::ceil(lo), std::max(tlo, -9.0e18), std::min(thi, 9.0e18)));
      const auto h = static_cast<int64_t>(std::clamp(std::floor(hi), std::max(tlo, -9.0e18), std::min(thi, 9.0e18)));
      std::uniform_int_distribution<int64_t> d(std::min(l, h), std::max(l, h));
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d(rng));
    } else {
      std::uniform_real_distribution<double> d(lo, hi);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_floating_point_v<T>) {
          p[i] = static_cast<T>(d(rng));
        } else {
          p[i] = T(static_cast<float>(d(rng)));
        }
      }
    }
  });
  return t;
}

Shape RandomShape(size_t rank, uint64_t seed, int64_t min_dim, int64_t max_dim) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> d(min_dim, max_dim);
  Shape s(rank);
  for (auto& x : s) x = d(rng);
  return s;
}

}  // namespace strata::testing
