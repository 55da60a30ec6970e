#include "cpu/conv_nhwc_scale.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/constant_release.h"

namespace strata {
namespace {

// dst[j] = x[j] * s[j], j < k.
__attribute__((target("avx512f"))) void ScaleRowAvx512(const float* x, const float* s, int64_t k, float* dst) {
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(s + j)));
  if (j < k) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (k - j)) - 1);
    _mm512_mask_storeu_ps(dst + j, tail,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + j), _mm512_maskz_loadu_ps(tail, s + j)));
  }
}

void ScaleRows(const float* x, const float* s, int64_t rows, int64_t c, float* dst) {
  if (sgemm::Available()) {
    for (int64_t r = 0; r < rows; ++r) ScaleRowAvx512(x + r * c, s, c, dst + r * c);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) dst[r * c + j] = x[r * c + j] * s[j];
}

// The SGEMM's gathered A: rows of X scaled by their image's S as they are packed.
struct ScaledRows {
  const float* x;
  const float* s;
  int64_t c, hw;
  bool per_image;
  static void Fill(const void* ctx, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld) {
    const ScaledRows& a = *static_cast<const ScaledRows*>(ctx);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = row0 + r;
      const float* s = a.s + (a.per_image ? row / a.hw * a.c : 0) + k0;
      ScaleRowAvx512(a.x + row * a.c + k0, s, kc, dst + r * ld);
    }
  }
};

// Runs `inner` on X * S (see WrapNhwcScaledInput).
class ScaledInputConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  explicit ScaledInputConvKernel(std::unique_ptr<OpKernel> inner) : inner_(std::move(inner)) {}
  std::vector<size_t> PackedConstantInputs() const override {
    const auto* p = dynamic_cast<const PacksConstantInputs*>(inner_.get());
    return p ? p->PackedConstantInputs() : std::vector<size_t>{};
  }
  int InPlaceInput() const override { return inner_->InPlaceInput(); }
  const char* ImplName() const override { return inner_->ImplName(); }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.input(0);
    // A bad X is the inner kernel's error to report, in its words.
    if (!x || x->dtype() != DataType::kFloat || x->rank() != 4) return inner_->Compute(ctx);
    ASSIGN_OR_RETURN(const Tensor* s, NhwcConvInputScale(ctx, x->dim(0), x->dim(3)));
    if (!s) return inner_->Compute(ctx);
    auto xs = Tensor::Allocate(DataType::kFloat, x->shape(), ctx.allocator());
    if (!xs.ok())
      return MakeStatus(xs.status().code(), ctx.node().Describe(), ": scaled input: ", xs.status().message());
    ScaleNhwcChannels(x->data<float>(), *s, x->dim(0), x->dim(1) * x->dim(2), x->dim(3), xs->mutable_data<float>(),
                      ctx.pool());
    return ComputeOnInput0(*inner_, ctx, Value(std::move(xs).value()));
  }

 private:
  std::unique_ptr<OpKernel> inner_;
};

}  // namespace

Result<const Tensor*> NhwcConvInputScale(const KernelContext& ctx, int64_t n, int64_t c) {
  const Node& node = ctx.node();
  if (node.inputs.size() <= kNhwcConvInputScale || node.inputs[kNhwcConvInputScale] < 0) return nullptr;
  const Tensor* s = ctx.input(kNhwcConvInputScale);
  if (!s) return InvalidArgument(node.Describe(), ": the fused input scale (input 4) is missing");
  if (s->dtype() != DataType::kFloat || s->rank() != 4 || (s->dim(0) != 1 && s->dim(0) != n) || s->dim(1) != 1 ||
      s->dim(2) != 1 || s->dim(3) != c)
    return InvalidArgument(node.Describe(), ": the fused input scale must be float32 [1, 1, 1, ", c, "] or [", n,
                           ", 1, 1, ", c, "] (one per channel of X), got ", DataTypeName(s->dtype()), " ",
                           ShapeToString(s->shape()));
  return s;
}

void ScaleNhwcChannels(const float* x, const Tensor& s, int64_t n, int64_t hw, int64_t c, float* dst,
                       ThreadPool* pool) {
  const int64_t rows = n * hw;
  if (rows == 0 || c == 0) return;
  const float* sp = s.data<float>();
  const bool per_image = s.dim(0) != 1;
  auto body = [&](int64_t r0, int64_t r1) {
    // A chunk may span images; each image's rows take its own scale row.
    for (int64_t r = r0; r < r1;) {
      const int64_t img = r / hw, end = std::min(r1, (img + 1) * hw);
      ScaleRows(x + r * c, sp + (per_image ? img * c : 0), end - r, c, dst + r * c);
      r = end;
    }
  };
  // Chunks of at least ~64 KiB: below that, waking a worker costs more than the pass.
  const int64_t grain = std::max<int64_t>(1, 16384 / c);
  if (pool && pool->num_threads() > 1 && rows > grain) {
    pool->Run(rows, grain, body);
  } else {
    body(0, rows);
  }
}

Status ScaledPointwiseGemm(const float* x, const Tensor& s, int64_t n, int64_t hw, int64_t c, const sgemm::PackedB& b,
                           float* y, int64_t m, const sgemm::Epilogue& ep, ThreadPool* pool, sgemm::PackedB* scratch) {
  const bool per_image = s.dim(0) != 1 && n > 1;
  const float* sp = s.data<float>();
  const int64_t groups = per_image ? n : 1, rows = per_image ? hw : n * hw;
  // diag(S) B costs K x (N rounded up to panels) multiplies per image; scaling A as it is
  // packed costs nothing extra when A is packed anyway, but Gemm reads A in place for few
  // panels (faster than packing it) and the scaled copy of B is then the cheaper pass.
  if (sgemm::ReadsAInPlace(b) && rows >= b.panels() * sgemm::kPanelWidth) {
    for (int64_t i = 0; i < groups; ++i) {
      RETURN_IF_ERROR(sgemm::ScaleRowsInto(b, sp + i * c, scratch));
      sgemm::Epilogue e = ep;
      if (e.residual) e.residual += i * rows * e.ldr;
      RETURN_IF_ERROR(sgemm::Gemm(rows, x + i * rows * c, c, *scratch, y + i * rows * m, m, e, pool));
    }
    return Status::Ok();
  }
  const ScaledRows a{x, sp, c, hw, per_image};
  return sgemm::GemmGathered(n * hw, sgemm::ASource{ScaledRows::Fill, &a}, b, y, m, ep, pool);
}

Status ComputeOnInput0(const OpKernel& inner, KernelContext& ctx, const Value& x) {
  std::vector<const Value*> inputs(ctx.num_inputs(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!ctx.input_value(i).empty()) inputs[i] = &ctx.input_value(i);
  inputs[0] = &x;
  KernelContext sub = ctx.WithInputs(inputs);
  return inner.Compute(sub);
}

std::unique_ptr<OpKernel> WrapNhwcScaledInput(std::unique_ptr<OpKernel> inner) {
  return std::make_unique<ScaledInputConvKernel>(std::move(inner));
}

}  // namespace strata
