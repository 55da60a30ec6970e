// strata.internal MaskedSoftmax(X, mask?) with attributes scale (float) and divide (int):
//   Y = Softmax(X / scale + mask)  (divide = 1)   or   Softmax(X * scale + mask)  (divide = 0)
// over the last axis, the mask broadcast onto X (it may not enlarge it). Emitted by
// core/transformer_fusion.cc for attention's scale -> Add(mask) -> Softmax chain: one pass
// over the score tensor instead of three, with no intermediate tensors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/kernel.h"
#include "core/layout_pass.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

// Element strides of a mask broadcast onto X (0 along broadcast dimensions), X's rank.
Result<Shape> MaskStrides(const Node& node, const Shape& x, const Shape& m) {
  if (m.size() > x.size())
    return InvalidArgument(node.Describe(), ": mask ", ShapeToString(m), " has more dimensions than the scores ",
                           ShapeToString(x));
  Shape strides(x.size(), 0);
  int64_t s = 1;
  const size_t off = x.size() - m.size();
  for (size_t k = m.size(); k-- > 0;) {
    if (m[k] != 1 && m[k] != x[off + k])
      return InvalidArgument(node.Describe(), ": mask ", ShapeToString(m), " does not broadcast onto the scores ",
                             ShapeToString(x));
    strides[off + k] = m[k] == 1 ? 0 : s;
    s *= m[k];
  }
  return strides;
}

class MaskedSoftmaxKernel final : public OpKernel {
 public:
  MaskedSoftmaxKernel(float scale, bool divide, bool reference) : scale_(scale), divide_(divide), ref_(reference) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* mask = ctx.input(1);
    if (!x) return InvalidArgument(node.Describe(), ": MaskedSoftmax needs input X");
    if (x->dtype() != DataType::kFloat || (mask && mask->dtype() != DataType::kFloat))
      return InvalidArgument(node.Describe(), ": MaskedSoftmax takes float32 X and mask, got ",
                             DataTypeName(x->dtype()), mask ? " and " : "", mask ? DataTypeName(mask->dtype()) : "");
    const Shape& xs = x->shape();
    if (xs.empty()) return InvalidArgument(node.Describe(), ": MaskedSoftmax needs X of rank >= 1");
    Shape mstride;
    if (mask) {
      ASSIGN_OR_RETURN(mstride, MaskStrides(node, xs, mask->shape()));
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, xs));
    const int64_t n = xs.back();
    if (n == 0 || x->num_elements() == 0) return Status::Ok();
    const int64_t rows = x->num_elements() / n;
    const float* xp = x->data<float>();
    const float* mp = mask ? mask->data<float>() : nullptr;
    float* yp = y->mutable_data<float>();
    const int64_t mcol = mask ? mstride.back() : 0;
    const int lead = static_cast<int>(xs.size()) - 1;

    auto run = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = xp + r * n;
        float* yr = yp + r * n;
        // Row r's mask offset: its index over the leading dims, through the mask strides.
        const float* mr = nullptr;
        if (mp) {
          int64_t off = 0, t = r;
          for (int k = lead - 1; k >= 0; --k) {
            off += (t % xs[k]) * mstride[k];
            t /= xs[k];
          }
          mr = mp + off;
        }
        ScaleAndMask(xr, mr, mcol, yr, n);
        if (ref_) {
          ReferenceSoftmax(yr, n);
        } else {
          cpu::SoftmaxRowInPlace(yr, n);
        }
      }
    };
    // Rows of ~4K elements or more are worth a task each (as Softmax).
    if (ctx.pool() && ctx.pool()->num_threads() > 1)
      ctx.pool()->ParallelFor(rows, std::max<int64_t>(1, 4096 / n), run);
    else
      run(0, rows);
    return Status::Ok();
  }

 private:
  void ScaleAndMask(const float* x, const float* m, int64_t mcol, float* y, int64_t n) const {
    // Division stays a division so the result matches the unfused Div bit for bit.
    if (divide_) {
      for (int64_t j = 0; j < n; ++j) y[j] = x[j] / scale_;
    } else {
      for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale_;
    }
    if (!m) return;
    if (mcol == 0) {
      const float v = m[0];
      for (int64_t j = 0; j < n; ++j) y[j] += v;
    } else {
      for (int64_t j = 0; j < n; ++j) y[j] += m[j];
    }
  }

  static void ReferenceSoftmax(float* y, int64_t n) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, y[j]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      y[j] = std::exp(y[j] - mx);
      sum += y[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  }

  float scale_;
  bool divide_;
  bool ref_;
};

Result<std::unique_ptr<OpKernel>> MakeMaskedSoftmax(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  if (node.inputs.empty() || node.inputs.size() > 2 || node.outputs.size() != 1)
    return InvalidModel(node.Describe(), ": MaskedSoftmax takes inputs (X, mask?) and one output");
  const Attribute* scale = node.FindAttr("scale");
  if (!scale || scale->type != Attribute::Type::kFloat || !std::isfinite(scale->f) || scale->f == 0.0f)
    return InvalidModel(node.Describe(), ": MaskedSoftmax needs a finite non-zero float attribute 'scale'");
  const int64_t divide = node.GetInt("divide", 0);
  if (divide != 0 && divide != 1) return InvalidModel(node.Describe(), ": MaskedSoftmax 'divide' must be 0 or 1");
  return std::unique_ptr<OpKernel>(std::make_unique<MaskedSoftmaxKernel>(scale->f, divide == 1, reference));
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& r) {
  r.Register({.domain = kInternalDomain,
              .op_type = "MaskedSoftmax",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeMaskedSoftmax(init, true); }});
  r.Register({.domain = kInternalDomain,
              .op_type = "MaskedSoftmax",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeMaskedSoftmax(init, false); },
              .reference = false,
              .impl = "simd"});
}

}  // namespace strata
