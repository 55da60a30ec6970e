// Fused 8-bit MatMuls with a float output, on the VNNI GEMM (int8_gemm.h) against W_q packed
// once, the scaling (and bias) in the GEMM's store:
//
// strata.internal DynQuantMatMul(X, W_q, W_scale, W_zero_point?, bias?): what ONNX Runtime's
// dynamic quantization makes of a MatMul (transformer_fusion.cc fuses it back into one node),
//
//   X_q, X_scale, X_zp = DynamicQuantizeLinear(X)
//   Y = Cast(MatMulInteger(X_q, W_q, X_zp, W_zp), float) * (X_scale * W_scale) [+ bias]
//
// X quantized into scratch first. The same bits as the nodes it replaces (int8_gemm.h's
// FloatOut).
//
// strata.internal QdqMatMul(X_q, X_scale, X_zero_point?, W_q, W_scale, W_zero_point?, bias?):
// a static-int8 (QDQ) MatMul, MatMul(DequantizeLinear(X_q), DequantizeLinear(W_q)) [+ bias]
// (qdq_fusion.cc), as ONNX Runtime's MatMulIntegerToFloat: the products summed exactly in
// int32 and scaled once, where the float graph rounds every dequantized value and partial sum
// (outputs differ by float rounding). X_q uint8 or int8 [..., K] with scalar X_scale (float)
// and X_zero_point (X_q's type), read per run.
//
// For both: W_q a constant [K, N] of int8 or uint8; W_scale a float scalar or [N];
// W_zero_point absent, a scalar or [N] of W_q's type; bias float [N].
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/constant_release.h"
#include "core/kernel.h"
#include "core/layout_pass.h"  // kInternalDomain
#include "cpu/int8_gemm.h"
#include "cpu/quantize_common.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

// W_q, its scale and zero point and the bias, checked and packed at session creation; the
// GEMM with the float epilogue per run.
class QuantWeightMatMul : public OpKernel, public PacksConstantInputs {
 public:
  std::vector<size_t> PackedConstantInputs() const override { return {w_input_}; }

 protected:
  // Inputs w, w + 1, w + 2 (optional) are W_q, W_scale and W_zero_point; `bias_input` the bias.
  Status Init(const KernelInit& init, size_t w, size_t bias_input) {
    const Node& node = init.node;
    w_input_ = w;
    const Tensor* wt = init.constant_input(w);
    const Tensor* ws = init.constant_input(w + 1);
    const Tensor* wzp = init.has_input(w + 2) ? init.constant_input(w + 2) : nullptr;
    const Tensor* bias = init.has_input(bias_input) ? init.constant_input(bias_input) : nullptr;
    if (!wt || !IsQuant8(wt->dtype()) || wt->rank() != 2)
      return InvalidArgument(node.Describe(), ": W must be a constant 2-D uint8/int8 tensor");
    const int64_t k = wt->dim(0), n = wt->dim(1);
    if (!ws || ws->dtype() != DataType::kFloat || (ws->num_elements() != 1 && ws->num_elements() != n))
      return InvalidArgument(node.Describe(), ": W_scale must be a constant float scalar or [", n, "]");
    if (init.has_input(w + 2) && !wzp) return InvalidArgument(node.Describe(), ": W_zero_point must be a constant");
    RETURN_IF_ERROR(CheckZeroPoint(wzp, wt->dtype(), n, node, "W_zero_point"));
    if (init.has_input(bias_input) && (!bias || bias->dtype() != DataType::kFloat || bias->num_elements() != n))
      return InvalidArgument(node.Describe(), ": bias must be a constant float [", n, "]");
    const int64_t zn = wzp ? wzp->num_elements() : 0;
    auto packed = int8gemm::Pack(wt->raw_data(), wt->dtype() == DataType::kInt8, k, n, zn ? wzp->raw_data() : nullptr,
                                 zn, init.pool);
    if (!packed.ok()) return MakeStatus(packed.status().code(), node.Describe(), ": ", packed.status().message());
    packed_ = std::move(packed).value();
    w_scale_.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) w_scale_[j] = ws->data<float>()[ws->num_elements() == 1 ? 0 : j];
    if (bias) bias_.assign(bias->data<float>(), bias->data<float>() + n);
    return Status::Ok();
  }

  // The output of X [..., K] (`x_shape`): float [..., N]; nullptr when it is empty.
  Result<Tensor*> AllocateY(KernelContext& ctx, const Shape& x_shape) const {
    Shape out_shape = x_shape;
    out_shape.back() = packed_.n();
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    return y->num_elements() == 0 ? nullptr : y;
  }

  // y [rows, N] = float((X_q - xzp) . (W_q - W_zp)) * (xs * W_scale) [+ bias], then fo's
  // requantization if it asks for one.
  Status Multiply(KernelContext& ctx, const void* xq, bool x_signed, int64_t rows, float xs, int32_t xzp, float* y,
                  int8gemm::FloatOut fo = {}) const {
    const Node& node = ctx.node();
    const int64_t n = packed_.n();
    // The Mul(X_scale, W_scale) node's values, once per run.
    ASSIGN_OR_RETURN(Tensor scale, Tensor::Allocate(DataType::kFloat, {n}, ctx.allocator()));
    float* sc = scale.mutable_data<float>();
    for (int64_t j = 0; j < n; ++j) sc[j] = xs * w_scale_[static_cast<size_t>(j)];
    int8gemm::AMatrix am;
    am.a = xq;
    am.a_signed = x_signed;
    am.rows = rows;
    am.lda = packed_.k();
    am.za = xzp;
    ASSIGN_OR_RETURN(int64_t bytes, int8gemm::ScratchBytes(am, packed_));
    ASSIGN_OR_RETURN(Tensor scratch, AllocateIntScratch(DataType::kUInt8, bytes, ctx.allocator(), node));
    fo.y = y;
    fo.ldy = n;
    fo.scale = sc;
    fo.bias = bias_.empty() ? nullptr : bias_.data();
    return int8gemm::Gemm(am, packed_, nullptr, 0, scratch.mutable_data<uint8_t>(), ctx.pool(), &fo);
  }

  int8gemm::PackedB packed_;
  std::vector<float> w_scale_;  // [N]
  std::vector<float> bias_;     // [N] or empty
  size_t w_input_ = 1;
};

class DynQuantMatMulKernel final : public QuantWeightMatMul {
 public:
  static Result<std::unique_ptr<OpKernel>> Make(const KernelInit& init) {
    auto kern = std::unique_ptr<DynQuantMatMulKernel>(new DynQuantMatMulKernel());
    RETURN_IF_ERROR(kern->Init(init, 1, 4));
    return std::unique_ptr<OpKernel>(std::move(kern));
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const int64_t k = packed_.k(), n = packed_.n();
    if (!x || x->dtype() != DataType::kFloat || x->rank() < 1 || x->shape().back() != k)
      return InvalidArgument(node.Describe(), ": X must be float [..., ", k, "], got ",
                             x ? DataTypeName(x->dtype()) : "nothing", " ", x ? ShapeToString(x->shape()) : "");
    ASSIGN_OR_RETURN(Tensor * y, AllocateY(ctx, x->shape()));
    if (!y) return Status::Ok();
    const int64_t rows = y->num_elements() / n;  // X's leading dims (also when K = 0)
    ASSIGN_OR_RETURN(Tensor xq, AllocateIntScratch(DataType::kUInt8, x->num_elements(), ctx.allocator(), node));
    float xs = 0;
    int32_t xzp = 0;
    RETURN_IF_ERROR(DynamicQuantizeU8(node, x->data<float>(), x->num_elements(), xq.mutable_data<uint8_t>(), &xs, &xzp,
                                      ctx.pool()));
    return Multiply(ctx, xq.data<uint8_t>(), false, rows, xs, xzp, y->mutable_data<float>());
  }

 private:
  DynQuantMatMulKernel() = default;
};

class QdqMatMulKernel final : public QuantWeightMatMul {
 public:
  static Result<std::unique_ptr<OpKernel>> Make(const KernelInit& init) {
    auto kern = std::unique_ptr<QdqMatMulKernel>(new QdqMatMulKernel());
    RETURN_IF_ERROR(kern->Init(init, 3, 6));
    return std::unique_ptr<OpKernel>(std::move(kern));
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* xs = ctx.input(1);
    const Tensor* xz = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
    const int64_t k = packed_.k(), n = packed_.n();
    if (!x || !IsQuant8(x->dtype()) || x->rank() < 1 || x->shape().back() != k)
      return InvalidArgument(node.Describe(), ": X_q must be uint8/int8 [..., ", k, "], got ",
                             x ? DataTypeName(x->dtype()) : "nothing", " ", x ? ShapeToString(x->shape()) : "");
    if (!xs || xs->dtype() != DataType::kFloat || xs->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": X_scale must be a float scalar");
    RETURN_IF_ERROR(CheckZeroPoint(xz, x->dtype(), 1, node, "X_zero_point"));
    int8gemm::FloatOut fo;
    if (node.inputs.size() > kRequant) RETURN_IF_ERROR(PrepareRequant(ctx, n, &fo));
    ASSIGN_OR_RETURN(Tensor * y, AllocateY(ctx, x->shape()));
    if (!y) return Status::Ok();
    const int64_t rows = y->num_elements() / n;
    return Multiply(ctx, x->raw_data(), x->dtype() == DataType::kInt8, rows, xs->data<float>()[0], ZeroPointAt(xz, 0),
                    y->mutable_data<float>(), fo);
  }

 private:
  QdqMatMulKernel() = default;

  // Inputs 7-10 (qdq_fusion.cc: the Linear's quantized output): the QuantizeLinear's scale and
  // zero point, the DequantizeLinear's; 11, optional: the bias added after them, float [N].
  static constexpr size_t kRequant = 7;
  Status PrepareRequant(KernelContext& ctx, int64_t n, int8gemm::FloatOut* fo) const {
    const Node& node = ctx.node();
    if (node.inputs.size() < kRequant + 4 || node.inputs.size() > kRequant + 5)
      return InvalidArgument(node.Describe(), ": a requantized output takes 4 or 5 inputs after the bias, got ",
                             node.inputs.size() - kRequant);
    static const char* kNames[] = {"output quantization scale", "output quantization zero point",
                                   "output dequantization scale", "output dequantization zero point"};
    for (size_t i = 0; i < 4; ++i) {
      const Tensor* t = ctx.input(kRequant + i);
      const bool scale = i % 2 == 0;
      if (!t || t->num_elements() != 1 || (scale && t->dtype() != DataType::kFloat) ||
          (!scale && !IsQuant8(t->dtype())))
        return InvalidArgument(node.Describe(), ": the ", kNames[i], " must be a ", scale ? "float" : "uint8/int8",
                               " scalar");
    }
    if (ctx.input(kRequant + 1)->dtype() != ctx.input(kRequant + 3)->dtype())
      return InvalidArgument(node.Describe(), ": the output's zero points must have one type");
    const Tensor* pb = node.inputs.size() > kRequant + 4 ? ctx.input(kRequant + 4) : nullptr;
    if (node.inputs.size() > kRequant + 4 && (!pb || pb->dtype() != DataType::kFloat || pb->num_elements() != n))
      return InvalidArgument(node.Describe(), ": the bias after the requantization must be float [", n, "]");
    fo->requant = true;
    fo->q_scale = ctx.input(kRequant)->data<float>()[0];
    fo->q_zero = static_cast<float>(LoadQ(*ctx.input(kRequant + 1), 0));
    fo->q_signed = ctx.input(kRequant + 1)->dtype() == DataType::kInt8;
    fo->dq_scale = ctx.input(kRequant + 2)->data<float>()[0];
    fo->dq_zero = static_cast<float>(LoadQ(*ctx.input(kRequant + 3), 0));
    fo->post_bias = pb ? pb->data<float>() : nullptr;
    return Status::Ok();
  }
};

}  // namespace

void RegisterDynQuantMatMulKernels(KernelRegistry& r) {
  // The only entries: the fusions create the nodes only where they cover (AVX512-VNNI).
  r.Register({.domain = kInternalDomain,
              .op_type = "DynQuantMatMul",
              .since_version = 1,
              .types = {},
              .type_input = -1,
              .factory = DynQuantMatMulKernel::Make,
              .covers = [](const KernelInit&) { return int8gemm::Available(); },
              .reference = false,
              .impl = "avx512_vnni"});
  r.Register({.domain = kInternalDomain,
              .op_type = "QdqMatMul",
              .since_version = 1,
              .types = {},
              .type_input = -1,
              .factory = QdqMatMulKernel::Make,
              .covers = [](const KernelInit&) { return int8gemm::Available(); },
              .reference = false,
              .impl = "avx512_vnni"});
}

}  // namespace strata
