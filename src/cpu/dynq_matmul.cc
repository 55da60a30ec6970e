// strata.internal DynQuantMatMul(X, W_q, W_scale, W_zero_point?, bias?): what ONNX Runtime's
// dynamic quantization makes of a MatMul (transformer_fusion.cc fuses it back into one node),
//
//   X_q, X_scale, X_zp = DynamicQuantizeLinear(X)
//   Y = Cast(MatMulInteger(X_q, W_q, X_zp, W_zp), float) * (X_scale * W_scale) [+ bias]
//
// in one kernel: X quantized into scratch, the VNNI GEMM against W_q packed once, and the float
// epilogue in the GEMM's store. The same bits as the nodes it replaces (int8_gemm.h's
// FloatOut). W_q is a constant [K, N] of int8 or uint8; W_scale a float scalar or [N];
// W_zero_point absent, a scalar or [N] of W_q's type; bias float [N]. X is float [..., K].
#include <algorithm>
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

class DynQuantMatMulKernel final : public OpKernel, public PacksConstantInputs {
 public:
  static Result<std::unique_ptr<OpKernel>> Make(const KernelInit& init) {
    const Node& node = init.node;
    const Tensor* w = init.constant_input(1);
    const Tensor* ws = init.constant_input(2);
    const Tensor* wzp = init.has_input(3) ? init.constant_input(3) : nullptr;
    const Tensor* bias = init.has_input(4) ? init.constant_input(4) : nullptr;
    if (!w || !IsQuant8(w->dtype()) || w->rank() != 2)
      return InvalidArgument(node.Describe(), ": W must be a constant 2-D uint8/int8 tensor");
    const int64_t k = w->dim(0), n = w->dim(1);
    if (!ws || ws->dtype() != DataType::kFloat || (ws->num_elements() != 1 && ws->num_elements() != n))
      return InvalidArgument(node.Describe(), ": W_scale must be a constant float scalar or [", n, "]");
    if (init.has_input(3) && !wzp) return InvalidArgument(node.Describe(), ": W_zero_point must be a constant");
    RETURN_IF_ERROR(CheckZeroPoint(wzp, w->dtype(), n, node, "W_zero_point"));
    if (init.has_input(4) && (!bias || bias->dtype() != DataType::kFloat || bias->num_elements() != n))
      return InvalidArgument(node.Describe(), ": bias must be a constant float [", n, "]");
    const int64_t zn = wzp ? wzp->num_elements() : 0;
    auto packed = int8gemm::Pack(w->raw_data(), w->dtype() == DataType::kInt8, k, n, zn ? wzp->raw_data() : nullptr, zn,
                                 init.pool);
    if (!packed.ok()) return MakeStatus(packed.status().code(), node.Describe(), ": ", packed.status().message());
    auto kern = std::unique_ptr<DynQuantMatMulKernel>(new DynQuantMatMulKernel());
    kern->packed_ = std::move(packed).value();
    kern->w_scale_.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) kern->w_scale_[j] = ws->data<float>()[ws->num_elements() == 1 ? 0 : j];
    if (bias) kern->bias_.assign(bias->data<float>(), bias->data<float>() + n);
    return std::unique_ptr<OpKernel>(std::move(kern));
  }

  std::vector<size_t> PackedConstantInputs() const override { return {1}; }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const int64_t k = packed_.k(), n = packed_.n();
    if (!x || x->dtype() != DataType::kFloat || x->rank() < 1 || x->shape().back() != k)
      return InvalidArgument(node.Describe(), ": X must be float [..., ", k, "], got ",
                             x ? DataTypeName(x->dtype()) : "nothing", " ", x ? ShapeToString(x->shape()) : "");
    Shape out_shape = x->shape();
    out_shape.back() = n;
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    if (y->num_elements() == 0) return Status::Ok();
    const int64_t rows = y->num_elements() / n;  // X's leading dims (also when K = 0)
    ASSIGN_OR_RETURN(Tensor xq, AllocateIntScratch(DataType::kUInt8, x->num_elements(), ctx.allocator(), node));
    float xs = 0;
    int32_t xzp = 0;
    RETURN_IF_ERROR(DynamicQuantizeU8(node, x->data<float>(), x->num_elements(), xq.mutable_data<uint8_t>(), &xs, &xzp,
                                      ctx.pool()));
    // The Mul(X_scale, W_scale) node's values, once per run.
    ASSIGN_OR_RETURN(Tensor scale, Tensor::Allocate(DataType::kFloat, {n}, ctx.allocator()));
    float* sc = scale.mutable_data<float>();
    for (int64_t j = 0; j < n; ++j) sc[j] = xs * w_scale_[static_cast<size_t>(j)];
    int8gemm::AMatrix am;
    am.a = xq.data<uint8_t>();
    am.rows = rows;
    am.lda = k;
    am.za = xzp;
    ASSIGN_OR_RETURN(int64_t bytes, int8gemm::ScratchBytes(am, packed_));
    ASSIGN_OR_RETURN(Tensor scratch, AllocateIntScratch(DataType::kUInt8, bytes, ctx.allocator(), node));
    int8gemm::FloatOut fo;
    fo.y = y->mutable_data<float>();
    fo.ldy = n;
    fo.scale = sc;
    fo.bias = bias_.empty() ? nullptr : bias_.data();
    int8gemm::Gemm(am, packed_, nullptr, 0, scratch.mutable_data<uint8_t>(), ctx.pool(), &fo);
    return Status::Ok();
  }

 private:
  DynQuantMatMulKernel() = default;
  int8gemm::PackedB packed_;
  std::vector<float> w_scale_;  // [N]
  std::vector<float> bias_;     // [N] or empty
};

}  // namespace

void RegisterDynQuantMatMulKernels(KernelRegistry& r) {
  // The only entry: the fusion creates the node only where it covers (AVX512-VNNI).
  r.Register({.domain = kInternalDomain,
              .op_type = "DynQuantMatMul",
              .since_version = 1,
              .type_input = -1,
              .factory = DynQuantMatMulKernel::Make,
              .covers = [](const KernelInit&) { return int8gemm::Available(); },
              .reference = false,
              .impl = "avx512_vnni"});
}

}  // namespace strata
