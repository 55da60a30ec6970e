// bf16 fast-math MatMul/Gemm with a constant B (transformer weights): B is packed to
// bf16 once here, A is converted per cache block inside GemmBf16. The entries decline
// (KernelDef::covers) whenever bf16 does not apply, so registering these ahead of the
// fp32 ones changes nothing for sessions without precision=bf16; called directly, the
// factories still delegate to the fp32 kernels.
#include <climits>
#include <string>
#include <vector>

#include "core/constant_release.h"
#include "core/layout_pass.h"
#include "cpu/gemm_bf16.h"
#include "cpu/gemm_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {

namespace {

bool Bf16Applies(const KernelInit& init) {
  return init.config.bf16_fast_math && !init.config.prefer_reference && Bf16GemmAvailable() &&
         Bf16NodeSelected(init.node);
}

class Bf16MatMulKernel final : public bf16_internal::Bf16KernelBase {
 public:
  Bf16MatMulKernel(PackedBf16B b, const FusedActivation& act) : b_(std::move(b)) {
    ep_.min = act.min;
    ep_.max = act.max;
  }
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    if (!a) return InvalidArgument(node.Describe(), ": MatMul needs input A");
    if (a->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": A dtype ", DataTypeName(a->dtype()), " differs from B's float32");
    ASSIGN_OR_RETURN(MatMulDims d, ComputeMatMulDims(a->shape(), {b_.K, b_.N}, node));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, d.out));
    // With a 2-D B every output matrix reads its own A matrix: all rows are one [batch*M, K] A.
    return GemmBf16(node, d.batch * d.M, a->data<float>(), b_.K, false, b_, y->mutable_data<float>(), b_.N, ep_,
                    ctx.pool());
  }

 private:
  PackedBf16B b_;
  Bf16Epilogue ep_;
};

class Bf16GemmKernel final : public bf16_internal::Bf16KernelBase {
 public:
  Bf16GemmKernel(PackedBf16B b, std::vector<float> bias, bool trans_a, const FusedActivation& act)
      : b_(std::move(b)), bias_(std::move(bias)), trans_a_(trans_a) {
    ep_.bias = bias_.empty() ? nullptr : bias_.data();
    ep_.min = act.min;
    ep_.max = act.max;
  }
  // A transposed A packs into tiles AMX does not read (gemm_bf16.cc, AmxItems).
  const char* ImplName() const override { return trans_a_ ? "avx512_bf16" : Bf16KernelBase::ImplName(); }
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    if (!a) return InvalidArgument(node.Describe(), ": Gemm needs input A");
    if (a->dtype() != DataType::kFloat)
      return InvalidArgument(node.Describe(), ": A dtype ", DataTypeName(a->dtype()), " differs from B's float32");
    if (a->rank() != 2) return InvalidArgument(node.Describe(), ": Gemm needs 2-D A, got ", ShapeToString(a->shape()));
    const int64_t ak = trans_a_ ? a->dim(0) : a->dim(1), M = trans_a_ ? a->dim(1) : a->dim(0);
    if (ak != b_.K)
      return InvalidArgument(node.Describe(), ": Gemm inner dimensions differ: A ", ShapeToString(a->shape()),
                             (trans_a_ ? " (transA)" : ""), " has K=", ak, " but B has K=", b_.K);
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {M, b_.N}));
    return GemmBf16(node, M, a->data<float>(), trans_a_ ? M : b_.K, trans_a_, b_, y->mutable_data<float>(), b_.N, ep_,
                    ctx.pool());
  }

 private:
  PackedBf16B b_;
  std::vector<float> bias_;
  bool trans_a_;
  Bf16Epilogue ep_;
};

// strata.internal FusedMatMul(A, W, bias, R?): the bias, residual and GELU ride in the
// bf16 GEMM's epilogue (the fp32 kernel's semantics, fused_matmul.cc).
class Bf16FusedMatMulKernel final : public bf16_internal::Bf16KernelBase, public PacksConstantInputs {
 public:
  Bf16FusedMatMulKernel(PackedBf16B b, std::vector<float> bias, Bf16Epilogue::Gelu gelu)
      : b_(std::move(b)), bias_(std::move(bias)), gelu_(gelu) {}
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }
  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(FusedMatMulCall call, BeginFusedMatMul(ctx, b_.K, b_.N));
    Bf16Epilogue ep;
    ep.bias = bias_.data();
    ep.gelu = gelu_;
    if (call.residual) {
      ep.residual = call.residual;
      ep.ldr = b_.N;
    }
    return GemmBf16(node, call.d.batch * call.d.M, call.a, b_.K, false, b_, call.y, b_.N, ep, ctx.pool());
  }

 private:
  PackedBf16B b_;
  std::vector<float> bias_;
  Bf16Epilogue::Gelu gelu_;
};

}  // namespace

bool IsBf16Kernel(const OpKernel& k) { return dynamic_cast<const bf16_internal::Bf16KernelBase*>(&k) != nullptr; }

namespace {

// A constant float 2-D B with no empty dimension: what the bf16 kernels pack once.
bool ConstantMatrixB(const KernelInit& init) {
  const Tensor* b = init.constant_input(1);
  return b && b->dtype() == DataType::kFloat && b->rank() == 2 && b->dim(0) > 0 && b->dim(1) > 0;
}

// Run-time or batched B (attention scores) stays fp32.
bool Bf16MatMulCovers(const KernelInit& init) { return Bf16Applies(init) && ConstantMatrixB(init); }

// beta*C folds into the bias when C is a constant broadcast row ([N], [1, N], a scalar);
// a run-time or full-matrix C goes to the fp32 kernel.
bool Bf16GemmCovers(const KernelInit& init) {
  if (!Bf16Applies(init) || !ConstantMatrixB(init)) return false;
  const Node& node = init.node;
  // Before opset 11 C is required: the fp32 kernel reports its absence.
  if (!init.has_input(2)) return node.opset >= 11;
  if (node.GetFloat("beta", 1.0f) == 0.0f) return true;
  const Tensor* b = init.constant_input(1);
  const Tensor* c = init.constant_input(2);
  if (!c || c->dtype() != DataType::kFloat || c->rank() > 2) return false;
  const int64_t N = node.GetInt("transB", 0) != 0 ? b->dim(0) : b->dim(1);
  const Shape& cs = c->shape();
  const int64_t last = cs.empty() ? 1 : cs.back();
  return !(cs.size() == 2 && cs[0] != 1) && (last == 1 || last == N);
}

}  // namespace

bool Bf16FusedMatMulCovers(const KernelInit& init) {
  const Node& node = init.node;
  if (!Bf16Applies(init) || !ConstantMatrixB(init) || node.inputs.size() < 3 || node.inputs.size() > 4 ||
      node.outputs.size() != 1 || !init.has_input(0))
    return false;
  if (init.has_input(3) && node.HasAttr("activation")) return false;  // malformed: the fp32 kernel reports it
  const std::string act = node.GetString("activation", "");
  if (!act.empty() && act != "Gelu" && act != "FastGelu") return false;
  const Tensor* w = init.constant_input(1);
  const Tensor* b = init.constant_input(2);
  return b && b->dtype() == DataType::kFloat && b->rank() == 1 && b->dim(0) == w->dim(1);
}

Result<std::unique_ptr<OpKernel>> MakeBf16FusedMatMul(const KernelInit& init) {
  const Node& node = init.node;
  // Select hands every other FusedMatMul (and its error report) to the fp32 entry; a caller
  // that skips `covers` (Find) gets the same kernel from here.
  if (!Bf16FusedMatMulCovers(init)) {
    for (const KernelDef* d : CpuKernels().FindAll(kInternalDomain, "FusedMatMul"))
      if (!d->reference && d->impl != "avx512_bf16") return d->factory(init);
    return Unsupported(node.Describe(), ": no fp32 FusedMatMul kernel is registered");
  }
  const Tensor* w = init.constant_input(1);
  const Tensor* b = init.constant_input(2);
  const std::string act = node.GetString("activation", "");
  const Bf16Epilogue::Gelu gelu = act == "Gelu"       ? Bf16Epilogue::Gelu::kErf
                                  : act == "FastGelu" ? Bf16Epilogue::Gelu::kTanh
                                                      : Bf16Epilogue::Gelu::kNone;
  ASSIGN_OR_RETURN(PackedBf16B packed,
                   PackBf16(sgemm::WeightRows::Of(*w), w->dim(0), w->dim(1), /*trans=*/false, 1.0f, init.pool));
  std::vector<float> bias(b->data<float>(), b->data<float>() + b->num_elements());
  return std::unique_ptr<OpKernel>(std::make_unique<Bf16FusedMatMulKernel>(std::move(packed), std::move(bias), gelu));
}

Result<std::unique_ptr<OpKernel>> MakeBf16MatMul(const KernelInit& init) {
  if (!Bf16MatMulCovers(init)) return MakeFastMatMul(init);
  const Tensor* b = init.constant_input(1);
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(init.node));
  ASSIGN_OR_RETURN(PackedBf16B packed,
                   PackBf16(sgemm::WeightRows::Of(*b), b->dim(0), b->dim(1), /*trans=*/false, 1.0f, init.pool));
  return std::unique_ptr<OpKernel>(std::make_unique<Bf16MatMulKernel>(std::move(packed), act));
}

Result<std::unique_ptr<OpKernel>> MakeBf16Gemm(const KernelInit& init) {
  if (!Bf16GemmCovers(init)) return MakeFastGemm(init);
  const Node& node = init.node;
  const Tensor* b = init.constant_input(1);
  const bool trans_a = node.GetInt("transA", 0) != 0, trans_b = node.GetInt("transB", 0) != 0;
  const float alpha = node.GetFloat("alpha", 1.0f), beta = node.GetFloat("beta", 1.0f);
  const int64_t K = trans_b ? b->dim(1) : b->dim(0), N = trans_b ? b->dim(0) : b->dim(1);
  std::vector<float> bias;
  if (init.has_input(2) && beta != 0.0f) {
    const Tensor* c = init.constant_input(2);
    const int64_t last = c->shape().empty() ? 1 : c->shape().back();
    bias.resize(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) bias[n] = beta * c->data<float>()[last == 1 ? 0 : n];
  }
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(node));
  ASSIGN_OR_RETURN(PackedBf16B packed, PackBf16(sgemm::WeightRows::Of(*b), K, N, trans_b, alpha, init.pool));
  return std::unique_ptr<OpKernel>(std::make_unique<Bf16GemmKernel>(std::move(packed), std::move(bias), trans_a, act));
}

void RegisterBf16Kernels(KernelRegistry& r) {
  // On CPUs without avx512_bf16 (or with it disabled by environment) the fp32 kernels
  // keep their names in --verbose output: nothing is registered.
  if (!Bf16GemmAvailable()) return;
  // Registered before the fp32 kernels with the same since_version, which wins ties in
  // KernelRegistry::Find; the later since_versions make it win outright on newer opsets.
  // `covers` hands the nodes bf16 does not apply to (option off, shapes it does not take)
  // to the fp32 entries, so --verbose names the kernel that runs.
  for (int since : {1, 9, 13}) {
    int end = since == 1 ? 8 : since == 9 ? 12 : INT_MAX;
    r.Register({.domain = "",
                .op_type = "MatMul",
                .since_version = since,
                .end_version = end,
                .types = {DataType::kFloat},
                .factory = MakeBf16MatMul,
                .covers = Bf16MatMulCovers,
                .reference = false,
                .impl = "avx512_bf16"});
  }
  for (int since : {1, 11, 13}) {
    int end = since == 1 ? 10 : since == 11 ? 12 : INT_MAX;
    r.Register({.domain = "",
                .op_type = "Gemm",
                .since_version = since,
                .end_version = end,
                .types = {DataType::kFloat},
                .factory = MakeBf16Gemm,
                .covers = Bf16GemmCovers,
                .reference = false,
                .impl = "avx512_bf16"});
  }
  // Ahead of fused_matmul.cc's entries (registered later with the same since_version).
  r.Register({.domain = kInternalDomain,
              .op_type = "FusedMatMul",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = MakeBf16FusedMatMul,
              .covers = Bf16FusedMatMulCovers,
              .reference = false,
              .impl = "avx512_bf16"});
  for (int since : {1, 11}) {
    int end = since == 1 ? 10 : INT_MAX;
    r.Register({.domain = "",
                .op_type = "Conv",
                .since_version = since,
                .end_version = end,
                .types = {DataType::kFloat},
                .factory = MakeBf16Conv,
                .covers = Bf16ConvCovers,
                .reference = false,
                .impl = "avx512_bf16"});
  }
}

}  // namespace strata
