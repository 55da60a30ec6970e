// NhwcBatchNormalization: an inference BatchNormalization the layout pass kept inside an
// NHWC region (DenseNet's pre-activation BNs, which no conv before them can absorb).
// Inputs as the ONNX op (X NHWC; scale, B, mean, var constant float [C]). Per element
// y = (x - mean[c]) * a[c] + B[c] with a = scale / sqrt(var + eps) computed once here in
// double, as the reference kernel (norm.cc) computes it: the mean is not folded into the
// bias, which would cancel badly when var is tiny. Rows of C channels are contiguous, so
// the loop vectorises over channels; rows are split over the session pool. A Relu after it
// (DenseNet's BN -> Relu -> conv) joins as activation = Relu (FuseNhwcBatchNormRelu): the
// clamp compares, so a NaN stays NaN as in the unfused Relu.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/layout_pass.h"
#include "cpu/bit_select.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/target_clones.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

// Rows [r0, r1) of C channels: y = (x - mean) * a + b, then with `clamp` min(hi, max(lo, y))
// by comparisons through bit-blend Selects, which vectorise (a NaN stays NaN). Cloned per
// ISA: the file is built for baseline x86-64.
STRATA_TARGET_CLONES("avx512f", "avx2", "default")
void BatchNormRows(const float* xp, float* yp, int64_t r0, int64_t r1, int64_t c, const float* mean, const float* a,
                   const float* b, bool clamp, float lo, float hi) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = xp + r * c;
    float* yr = yp + r * c;
    if (clamp) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const float v = (xr[ch] - mean[ch]) * a[ch] + b[ch];
        const float u = Select(v < lo, lo, v);
        yr[ch] = Select(hi < u, hi, u);
      }
    } else {
      for (int64_t ch = 0; ch < c; ++ch) yr[ch] = (xr[ch] - mean[ch]) * a[ch] + b[ch];
    }
  }
}

class NhwcBatchNormKernel final : public OpKernel {
 public:
  const char* ImplName() const override { return "nhwc"; }
  NhwcBatchNormKernel(std::vector<float> mean, std::vector<float> a, std::vector<float> b, FusedActivation act)
      : mean_(std::move(mean)), a_(std::move(a)), b_(std::move(b)), act_(act) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat || x->rank() != 4)
      return InvalidArgument(node.Describe(), ": input X must be a float32 NHWC tensor of rank 4");
    const int64_t c = static_cast<int64_t>(a_.size());
    if (x->dim(3) != c)
      return InvalidArgument(node.Describe(), ": X has ", x->dim(3), " channels (NHWC shape ",
                             ShapeToString(x->shape()), ") but the parameters have ", c);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
    const int64_t rows = x->dim(0) * x->dim(1) * x->dim(2);
    if (rows == 0 || c == 0) return Status::Ok();
    const float* xp = x->data<float>();
    float* yp = y->mutable_data<float>();
    const float *mean = mean_.data(), *a = a_.data(), *b = b_.data();
    const bool clamp = act_.active();
    const float lo = act_.min, hi = act_.max;
    auto body = [&](int64_t r0, int64_t r1) { BatchNormRows(xp, yp, r0, r1, c, mean, a, b, clamp, lo, hi); };
    // ~16K floats per chunk: enough work to amortise a pool wake-up.
    const int64_t grain = std::max<int64_t>(1, 16384 / c);
    if (ctx.pool() && rows > grain) {
      ctx.pool()->ParallelFor(rows, grain, body);
    } else {
      body(0, rows);
    }
    return Status::Ok();
  }

 private:
  std::vector<float> mean_, a_, b_;
  FusedActivation act_;  // Relu or Clip (never SiLU / HardSwish: ParseFusedActivation)
};

Result<std::unique_ptr<OpKernel>> MakeNhwcBatchNorm(const KernelInit& init) {
  const Node& node = init.node;
  const char* names[] = {"scale", "B", "mean", "var"};
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = init.has_input(i + 1) ? init.constant_input(i + 1) : nullptr;
    if (!p[i] || p[i]->dtype() != DataType::kFloat || p[i]->rank() != 1 || p[i]->dim(0) != p[0]->dim(0))
      return InvalidModel(node.Describe(), ": ", names[i], " must be a constant float32 [C] like scale");
  }
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(node));
  const int64_t c = p[0]->dim(0);
  const double eps = node.GetFloat("epsilon", 1e-5f);
  std::vector<float> mean(c), a(c), b(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    mean[ch] = p[2]->data<float>()[ch];
    a[ch] = static_cast<float>(p[0]->data<float>()[ch] / std::sqrt(static_cast<double>(p[3]->data<float>()[ch]) + eps));
    b[ch] = p[1]->data<float>()[ch];
  }
  return std::unique_ptr<OpKernel>(
      std::make_unique<NhwcBatchNormKernel>(std::move(mean), std::move(a), std::move(b), act));
}

}  // namespace

void RegisterNhwcNormKernels(KernelRegistry& r) {
  r.Register({.domain = kInternalDomain,
              .op_type = "NhwcBatchNormalization",
              .types = {DataType::kFloat},
              .factory = MakeNhwcBatchNorm,
              .reference = false,
              .impl = "nhwc"});
}

}  // namespace strata
