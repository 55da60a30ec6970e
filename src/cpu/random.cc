// Random ops: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike (opset 1),
// Bernoulli (opset 15) and Multinomial (opset 7).
//
// PRNG: each kernel owns a std::mt19937 seeded with the seed truncated modulo 2^32 when the
// `seed` attribute is given, otherwise from std::random_device. The engine advances from
// run to run (like ONNX Runtime), guarded by a mutex because one kernel serves concurrent
// runs. Values follow the libstdc++ distributions, so they cannot match ONNX Runtime's
// streams even for equal seeds; conformance cases for these ops only check what is
// deterministic (shape and dtype) or are non-deterministic in ORT too.
#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "cpu/register.h"

namespace strata {
namespace {

enum class Dist { kNormal, kUniform, kBernoulli, kMultinomial };

// The seed truncated toward zero, modulo 2^32. For seeds within int64 this equals
// static_cast<uint32_t>(static_cast<int64_t>(seed)); fmod keeps huge finite seeds (a float
// reaches 3.4e38) away from the undefined float-to-integer conversion. The factory rejects
// NaN and infinite seeds before this runs.
uint32_t SeedWord(float seed) {
  const double wrapped = std::fmod(static_cast<double>(seed), 4294967296.0);  // exact, |wrapped| < 2^32
  return static_cast<uint32_t>(static_cast<int64_t>(wrapped));
}

class RandomKernel final : public OpKernel {
 public:
  RandomKernel(Dist dist, bool like, DataType dtype, Shape shape, float a, float b, int64_t samples, const Node& node)
      : dist_(dist), like_(like), dtype_(dtype), shape_(std::move(shape)), a_(a), b_(b), samples_(samples) {
    if (node.HasAttr("seed")) {
      engine_.seed(SeedWord(node.GetFloat("seed", 0.0f)));
    } else {
      engine_.seed(std::random_device{}());
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* in = ctx.input(0);
    if ((like_ || dist_ == Dist::kBernoulli || dist_ == Dist::kMultinomial) && !in)
      return InvalidArgument(node.Describe(), ": input is missing");
    DataType dt = dtype_;
    if (dt == DataType::kUndefined) dt = in ? in->dtype() : DataType::kFloat;
    Shape shape = in && dist_ != Dist::kMultinomial ? in->shape() : shape_;
    if (!like_ && (dist_ == Dist::kNormal || dist_ == Dist::kUniform)) shape = shape_;
    if ((dist_ == Dist::kNormal || dist_ == Dist::kUniform) && !IsFloatType(dt))
      return InvalidArgument(node.Describe(), ": output dtype must be a float type, got ", DataTypeName(dt));
    std::vector<double> probs;
    if (dist_ == Dist::kBernoulli || dist_ == Dist::kMultinomial) {
      if (in->dtype() != DataType::kFloat && in->dtype() != DataType::kDouble)
        return InvalidArgument(node.Describe(), ": input must be float or double, got ", DataTypeName(in->dtype()));
      probs.resize(static_cast<size_t>(in->num_elements()));
      for (size_t i = 0; i < probs.size(); ++i)
        probs[i] = in->dtype() == DataType::kFloat ? in->data<float>()[i] : in->data<double>()[i];
    }
    if (dist_ == Dist::kMultinomial) {
      if (in->rank() != 2) return InvalidArgument(node.Describe(), ": input must be [batch, classes]");
      if (dt != DataType::kInt32 && dt != DataType::kInt64)
        return InvalidArgument(node.Describe(), ": dtype must be int32 or int64");
      shape = {in->dim(0), samples_};
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, dt, shape));
    const int64_t n = y->num_elements();
    std::vector<double> vals(static_cast<size_t>(n));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (dist_ == Dist::kNormal) {
        std::normal_distribution<double> d(a_, b_);
        for (auto& v : vals) v = d(engine_);
      } else if (dist_ == Dist::kUniform) {
        std::uniform_real_distribution<double> d(a_, b_);
        for (auto& v : vals) v = d(engine_);
      } else if (dist_ == Dist::kBernoulli) {
        std::uniform_real_distribution<double> d(0.0, 1.0);
        for (int64_t i = 0; i < n; ++i) {
          if (!(probs[i] >= 0 && probs[i] <= 1))
            return InvalidArgument(node.Describe(), ": probability ", probs[i], " is outside [0, 1]");
          vals[i] = d(engine_) < probs[i] ? 1.0 : 0.0;
        }
      } else {
        const int64_t classes = in->dim(1);
        std::vector<double> w(static_cast<size_t>(classes));
        for (int64_t b = 0; b < in->dim(0); ++b) {
          // Inputs are unnormalized log-probabilities.
          double mx = -INFINITY;
          for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, probs[b * classes + c]);
          for (int64_t c = 0; c < classes; ++c) w[c] = std::exp(probs[b * classes + c] - mx);
          std::discrete_distribution<int64_t> d(w.begin(), w.end());
          for (int64_t s = 0; s < samples_; ++s) vals[b * samples_ + s] = static_cast<double>(d(engine_));
        }
      }
    }
    bool ok = DispatchNumeric(dt, [&]<typename T>() {
      T* p = y->mutable_data<T>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          p[i] = T(static_cast<float>(vals[i]));
        } else {
          p[i] = static_cast<T>(vals[i]);
        }
      }
    });
    if (!ok) return InvalidArgument(node.Describe(), ": unsupported output dtype ", DataTypeName(dt));
    return Status::Ok();
  }

 private:
  Dist dist_;
  bool like_;
  DataType dtype_;
  Shape shape_;
  double a_, b_;
  int64_t samples_;
  mutable std::mutex mu_;
  mutable std::mt19937 engine_;
};

KernelDef Def(const char* op, int since, Dist dist, bool like) {
  KernelDef d;
  d.op_type = op;
  d.since_version = since;
  d.type_input = -1;
  d.factory = [dist, like](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    const Node& node = init.node;
    DataType dt = DataType::kUndefined;
    if (node.HasAttr("dtype")) {
      dt = static_cast<DataType>(node.GetInt("dtype", 1));
    } else if (dist == Dist::kMultinomial) {
      dt = DataType::kInt32;
    } else if (!like && dist != Dist::kBernoulli) {
      dt = DataType::kFloat;
    }
    Shape shape;
    if (!like && (dist == Dist::kNormal || dist == Dist::kUniform)) {
      if (!node.HasAttr("shape")) return InvalidModel(node.Describe(), ": the 'shape' attribute is required");
      shape = node.GetInts("shape");
      RETURN_IF_ERROR(CheckedNumElements(shape, node.Describe() + " shape").status());
    }
    float a = 0, b = 1;
    if (dist == Dist::kNormal) {
      a = node.GetFloat("mean", 0.0f);
      b = node.GetFloat("scale", 1.0f);
      if (b < 0) return InvalidModel(node.Describe(), ": scale must be non-negative");
    } else if (dist == Dist::kUniform) {
      a = node.GetFloat("low", 0.0f);
      b = node.GetFloat("high", 1.0f);
      if (!(a < b)) return InvalidModel(node.Describe(), ": low must be less than high");
    }
    if (node.HasAttr("seed") && !std::isfinite(node.GetFloat("seed", 0.0f)))
      return InvalidModel(node.Describe(), ": seed must be finite, got ", node.GetFloat("seed", 0.0f));
    const int64_t samples = node.GetInt("sample_size", 1);
    if (samples < 1) return InvalidModel(node.Describe(), ": sample_size must be >= 1");
    return std::unique_ptr<OpKernel>(std::make_unique<RandomKernel>(dist, like, dt, shape, a, b, samples, node));
  };
  return d;
}

}  // namespace

void RegisterRandomKernels(KernelRegistry& r) {
  r.Register(Def("RandomNormal", 1, Dist::kNormal, false));
  r.Register(Def("RandomUniform", 1, Dist::kUniform, false));
  r.Register(Def("RandomNormalLike", 1, Dist::kNormal, true));
  r.Register(Def("RandomUniformLike", 1, Dist::kUniform, true));
  r.Register(Def("Bernoulli", 15, Dist::kBernoulli, false));
  r.Register(Def("Multinomial", 7, Dist::kMultinomial, false));
}

}  // namespace strata
