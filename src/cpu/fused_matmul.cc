// strata.internal FusedMatMul(A, W[K,N], bias[N], R?) with attribute activation "" | "Gelu" |
// "FastGelu": Y = act(A x W + bias), or A x W + bias + R (a skip connection). Emitted by
// core/transformer_fusion.cc for a MatMul with constant weights and its bias Add (+ GELU).
//
// W is packed once and the bias rides in the SGEMM epilogue; the GELU then runs over the
// output (vectorised, split over the pool). The pass only fuses where a fast kernel covers
// the node: this one (AVX-512), or in bf16 fast-math sessions the bf16 GEMM's
// (gemm_bf16_ops.cc, registered ahead of this one); plain loops are the reference kernel.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/constant_release.h"
#include "core/kernel.h"
#include "core/layout_pass.h"
#include "core/status.h"
#include "cpu/gemm_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata {

Result<FusedMatMulCall> BeginFusedMatMul(KernelContext& ctx, int64_t k, int64_t n) {
  const Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  if (!a) return InvalidArgument(node.Describe(), ": FusedMatMul needs input A");
  if (a->dtype() != DataType::kFloat)
    return InvalidArgument(node.Describe(), ": A dtype ", DataTypeName(a->dtype()), " differs from W's float32");
  FusedMatMulCall call;
  ASSIGN_OR_RETURN(call.d, ComputeMatMulDims(a->shape(), {k, n}, node));
  const Tensor* res = ctx.input(3);
  if (res && (res->dtype() != DataType::kFloat || res->shape() != call.d.out))
    return InvalidArgument(node.Describe(), ": residual ", DataTypeName(res->dtype()), " ", ShapeToString(res->shape()),
                           " must be float32 of the output shape ", ShapeToString(call.d.out));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, call.d.out));
  call.a = a->data<float>();
  call.residual = res ? res->data<float>() : nullptr;
  call.y = y->mutable_data<float>();
  return call;
}
namespace {

enum class Act { kNone, kGelu, kFastGelu };

// Output rows per parallel task of the GELU pass (~16K elements).
int64_t RowGrain(int64_t n) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1)); }

float RefGelu(float x, Act act) {
  if (act == Act::kGelu) return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2)));
  return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

class FusedMatMulKernel final : public OpKernel, public PacksConstantInputs {
 public:
  FusedMatMulKernel(std::vector<float> bias, Act act, bool reference)
      : bias_(std::move(bias)), act_(act), reference_(reference) {}

  // W packed for the SGEMM, or kept as a plain copy for the reference loops.
  Status Init(const Node& node, const Tensor& w, ThreadPool* pool) {
    k_ = w.dim(0);
    if (reference_) {
      w_.assign(w.data<float>(), w.data<float>() + w.num_elements());
      return Status::Ok();
    }
    // WeightRows: a payload still on disk is read a block of rows at a time, never loaded whole.
    auto packed = sgemm::PackB(sgemm::WeightRows::Of(w), w.dim(0), w.dim(1), pool);
    if (!packed.ok()) return Status(packed.status().code(), node.Describe() + ": " + packed.status().message());
    packed_ = std::move(packed).value();
    return Status::Ok();
  }

  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const int64_t n = static_cast<int64_t>(bias_.size());
    ASSIGN_OR_RETURN(FusedMatMulCall call, BeginFusedMatMul(ctx, k_, n));
    const int64_t rows = call.d.batch * call.d.M;
    if (rows == 0 || n == 0) return Status::Ok();
    const float* ap = call.a;
    const float* res = call.residual;
    float* yp = call.y;
    if (reference_) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) {
          float acc = 0.0f;
          for (int64_t k = 0; k < k_; ++k) acc += ap[r * k_ + k] * w_[k * n + j];
          acc += bias_[j];
          if (res) acc += res[r * n + j];
          yp[r * n + j] = act_ == Act::kNone ? acc : RefGelu(acc, act_);
        }
      return Status::Ok();
    }
    sgemm::Epilogue ep;
    ep.bias = bias_.data();
    if (res) {
      ep.residual = res;
      ep.ldr = n;
    }
    // With a 2-D W every A matrix meets the same W: all batches are one tall product.
    Status st = sgemm::Gemm(rows, ap, k_, packed_, yp, n, ep, ctx.pool());
    if (!st.ok()) return Status(st.code(), node.Describe() + ": " + st.message());
    if (act_ == Act::kNone) return Status::Ok();
    const bool tanh_form = act_ == Act::kFastGelu;
    auto gelu = [&](int64_t r0, int64_t r1) { cpu::GeluInPlace(yp + r0 * n, (r1 - r0) * n, tanh_form); };
    if (ctx.pool() && ctx.pool()->num_threads() > 1)
      ctx.pool()->ParallelFor(rows, RowGrain(n), gelu);
    else
      gelu(0, rows);
    return Status::Ok();
  }

 private:
  std::vector<float> bias_;
  Act act_;
  bool reference_;
  sgemm::PackedB packed_;
  std::vector<float> w_;  // reference kernel only
  int64_t k_ = 0;
};

Result<std::unique_ptr<OpKernel>> MakeFusedMatMul(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  // The fusion pass only emits this form; anything else is a malformed graph.
  if (node.inputs.size() < 3 || node.inputs.size() > 4 || node.outputs.size() != 1 || !init.has_input(0))
    return InvalidModel(node.Describe(), ": FusedMatMul takes inputs (A, W, bias, residual?) and one output");
  if (init.has_input(3) && node.HasAttr("activation"))
    return InvalidModel(node.Describe(), ": FusedMatMul takes a residual or an activation, not both");
  const Tensor* w = init.constant_input(1);
  const Tensor* b = init.constant_input(2);
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 2)
    return InvalidModel(node.Describe(), ": FusedMatMul needs a constant float32 2-D W");
  if (!b || b->dtype() != DataType::kFloat || b->rank() != 1 || b->dim(0) != w->dim(1))
    return InvalidModel(node.Describe(), ": FusedMatMul bias must be a constant float32 [", w->dim(1), "]");
  const std::string act_name = node.GetString("activation", "");
  Act act = Act::kNone;
  if (act_name == "Gelu") {
    act = Act::kGelu;
  } else if (act_name == "FastGelu") {
    act = Act::kFastGelu;
  } else if (!act_name.empty()) {
    return InvalidModel(node.Describe(), ": unknown FusedMatMul activation '", act_name, "'");
  }
  std::vector<float> bias(b->data<float>(), b->data<float>() + b->num_elements());
  // The pass emits FusedMatMul only where the SGEMM runs it; the reference loops serve the
  // test oracle and hand-written graphs elsewhere.
  reference = reference || !sgemm::Available();
  auto k = std::make_unique<FusedMatMulKernel>(std::move(bias), act, reference);
  RETURN_IF_ERROR(k->Init(node, *w, init.pool));
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace

void RegisterFusedMatMulKernels(KernelRegistry& r) {
  r.Register({.domain = kInternalDomain,
              .op_type = "FusedMatMul",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeFusedMatMul(init, true); }});
  r.Register({.domain = kInternalDomain,
              .op_type = "FusedMatMul",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeFusedMatMul(init, false); },
              // Without AVX-512 the reference entry runs it (the transformer fusion asks this).
              .covers = [](const KernelInit&) { return sgemm::Available(); },
              .reference = false,
              .impl = "avx512"});
}

}  // namespace strata
