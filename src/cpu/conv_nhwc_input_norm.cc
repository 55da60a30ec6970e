#include "cpu/conv_nhwc_input_norm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/constant_release.h"
#include "core/small_vector.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_scale.h"
#include "cpu/sgemm.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

constexpr const char* kNormPrefix = "input_norm_";

// The run's parts of X: pointers, channel counts and channel offsets (off[P] == C).
struct Parts {
  // Inline room for a DenseNet block's concatenations (up to 33 parts in densenet121).
  SmallVector<const float*, 40> x;
  SmallVector<int64_t, 40> c;
  SmallVector<int64_t, 41> off;
  int64_t n = 0, h = 0, w = 0;
};

// X's parts for this run, checked: float32 [N, H, W, C_i] alike but for C_i, summing to C.
Result<Parts> CollectParts(const KernelContext& ctx, const NhwcConvInputTransform& t) {
  const Node& node = ctx.node();
  Parts p;
  p.off.push_back(0);
  for (int64_t i = 0; i < t.parts; ++i) {
    const size_t slot = i == 0 ? 0 : kNhwcConvInputParts + static_cast<size_t>(i) - 1;
    const Tensor* x = ctx.input(slot);
    if (!x || x->dtype() != DataType::kFloat || x->rank() != 4)
      return InvalidArgument(node.Describe(), ": input part ", i, " of X (input ", slot,
                             ") must be a float32 NHWC tensor of rank 4, got ",
                             x ? DataTypeName(x->dtype()) + std::string(" ") + ShapeToString(x->shape()) : "nothing");
    if (i == 0) {
      p.n = x->dim(0), p.h = x->dim(1), p.w = x->dim(2);
    } else if (x->dim(0) != p.n || x->dim(1) != p.h || x->dim(2) != p.w) {
      return InvalidArgument(node.Describe(), ": input part ", i, " of X has shape ", ShapeToString(x->shape()),
                             " but part 0 has [", p.n, ",", p.h, ",", p.w, ",...] (parts may differ only in channels)");
    }
    p.x.push_back(x->data<float>());
    p.c.push_back(x->dim(3));
    p.off.push_back(p.off.back() + x->dim(3));
  }
  if (p.off.back() != t.channels)
    return InvalidArgument(node.Describe(), ": the ", t.parts, " parts of X have ", p.off.back(),
                           " channels in all but W has ", t.channels);
  return p;
}

// dst[j] = act((src[j] - mean[j]) * a[j] + b[j]), j < k (norm parameters already offset to
// the span's first channel); a plain copy without the norm. The clamp compares, so a NaN
// stays NaN as in NhwcBatchNormalization.
__attribute__((target("avx512f"))) void TransformSpanAvx512(const float* src, int64_t k,
                                                            const NhwcConvInputTransform& t, int64_t c0, float* dst) {
  if (!t.norm) {
    std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
    return;
  }
  const float *mean = t.mean.data() + c0, *a = t.a.data() + c0, *b = t.b.data() + c0;
  const __m512 lo = _mm512_set1_ps(t.lo), hi = _mm512_set1_ps(t.hi);
  auto one = [&](__m512 x, __m512 m, __m512 s, __m512 o) __attribute__((target("avx512f"))) {
    __m512 v = _mm512_fmadd_ps(_mm512_sub_ps(x, m), s, o);
    if (t.clamp) {
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), v, lo);
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(hi, v, _CMP_LT_OQ), v, hi);
    }
    return v;
  };
  int64_t j = 0;
  for (; j + 16 <= k; j += 16)
    _mm512_storeu_ps(dst + j, one(_mm512_loadu_ps(src + j), _mm512_loadu_ps(mean + j), _mm512_loadu_ps(a + j),
                                  _mm512_loadu_ps(b + j)));
  if (j < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - j)) - 1);
    _mm512_mask_storeu_ps(dst + j, m,
                          one(_mm512_maskz_loadu_ps(m, src + j), _mm512_maskz_loadu_ps(m, mean + j),
                              _mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j)));
  }
}

void TransformSpanScalar(const float* src, int64_t k, const NhwcConvInputTransform& t, int64_t c0, float* dst) {
  if (!t.norm) {
    std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
    return;
  }
  for (int64_t j = 0; j < k; ++j) {
    float v = std::fma(src[j] - t.mean[c0 + j], t.a[c0 + j], t.b[c0 + j]);
    if (t.clamp) {
      v = v < t.lo ? t.lo : v;
      v = t.hi < v ? t.hi : v;
    }
    dst[j] = v;
  }
}

// Channels [k0, k0 + kc) of X's pixel row `row`, transformed, into dst.
template <bool kAvx512>
void TransformRowRange(const Parts& p, const NhwcConvInputTransform& t, int64_t row, int64_t k0, int64_t kc,
                       float* dst) {
  if (kc <= 0) return;
  size_t i = 0;
  while (p.off[i + 1] <= k0) ++i;  // the part holding channel k0
  for (int64_t k = k0, end = k0 + kc; k < end; ++i) {
    const int64_t len = std::min(p.off[i + 1], end) - k;
    if (len == 0) continue;  // a part of no channels (its data may be null)
    const float* src = p.x[i] + row * p.c[i] + (k - p.off[i]);
    if constexpr (kAvx512) {
      TransformSpanAvx512(src, len, t, k, dst + (k - k0));
    } else {
      TransformSpanScalar(src, len, t, k, dst + (k - k0));
    }
    k += len;
  }
}

// The SGEMM's gathered A (sgemm::ASource): X's rows transformed as they are gathered.
struct TransformedRows {
  const Parts* parts;
  const NhwcConvInputTransform* t;
  static void Fill(const void* ctx, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst, int64_t ld) {
    const TransformedRows& a = *static_cast<const TransformedRows*>(ctx);
    for (int64_t r = 0; r < rows; ++r) TransformRowRange<true>(*a.parts, *a.t, row0 + r, k0, kc, dst + r * ld);
  }
};

bool IsPointwiseConv(const Node& node, const Tensor& w) {
  auto all = [](const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
  };
  const std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  if (node.HasAttr("kernel_shape") && node.GetInts("kernel_shape") != std::vector<int64_t>{1, 1}) return false;
  return w.rank() == 4 && w.dim(2) == 1 && w.dim(3) == 1 && node.GetInt("group", 1) == 1 &&
         (auto_pad == "NOTSET" || auto_pad == "VALID") && all(node.GetInts("strides", {1, 1}), 1) &&
         all(node.GetInts("pads", {0, 0, 0, 0}), 0);
}

// The norm's input slots (and the conv's own W and B) are copied at creation.
std::vector<size_t> NormSlots(const NhwcConvInputTransform& t) {
  if (!t.norm) return {};
  return {kNhwcConvInputNorm, kNhwcConvInputNorm + 1, kNhwcConvInputNorm + 2, kNhwcConvInputNorm + 3};
}

class InputNormGemmConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  std::vector<size_t> PackedConstantInputs() const override {
    std::vector<size_t> v = NormSlots(t_);
    v.push_back(1);
    v.push_back(2);
    return v;
  }
  // The sum may overwrite the residual: the SGEMM then accumulates into it.
  int InPlaceInput() const override { return has_residual_ ? 3 : -1; }
  const char* ImplName() const override { return "nhwc-sgemm"; }
  InputNormGemmConvKernel(const KernelInit& init, const Tensor& w, const Tensor* b, FusedActivation act,
                          NhwcConvInputTransform t, sgemm::PackedB packed)
      : m_(w.dim(0)), act_(act), t_(std::move(t)), packed_(std::move(packed)), has_residual_(init.has_input(3)) {
    if (b) bias_.assign(b->data<float>(), b->data<float>() + m_);
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(Parts p, CollectParts(ctx, t_));
    const Shape out_shape = {p.n, p.h, p.w, m_};
    ASSIGN_OR_RETURN(const Tensor* res, NhwcConvResidual(ctx, has_residual_, out_shape));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    if (y->num_elements() == 0) return Status::Ok();
    const auto ep = NhwcConvEpilogue<sgemm::Epilogue>(bias_.empty() ? nullptr : bias_.data(), act_.min, act_.max,
                                                      act_.kind, res, y, m_);
    const TransformedRows a{&p, &t_};
    const Status st = sgemm::GemmGathered(p.n * p.h * p.w, sgemm::ASource{TransformedRows::Fill, &a}, packed_,
                                          y->mutable_data<float>(), m_, ep, ctx.pool());
    if (!st.ok()) return MakeStatus(st.code(), node.Describe(), ": ", st.message());
    return Status::Ok();
  }

 private:
  int64_t m_;
  FusedActivation act_;
  NhwcConvInputTransform t_;
  sgemm::PackedB packed_;
  bool has_residual_;
  std::vector<float> bias_;
};

// Runs `inner` on the transformed X (see WrapNhwcTransformedInput).
class TransformedInputConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  TransformedInputConvKernel(std::unique_ptr<OpKernel> inner, NhwcConvInputTransform t)
      : inner_(std::move(inner)), t_(std::move(t)) {}
  std::vector<size_t> PackedConstantInputs() const override {
    const auto* p = dynamic_cast<const PacksConstantInputs*>(inner_.get());
    std::vector<size_t> v = p ? p->PackedConstantInputs() : std::vector<size_t>{};
    for (size_t s : NormSlots(t_)) v.push_back(s);
    return v;
  }
  int InPlaceInput() const override { return inner_->InPlaceInput(); }
  const char* ImplName() const override { return inner_->ImplName(); }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(Parts p, CollectParts(ctx, t_));
    auto xt = Tensor::Allocate(DataType::kFloat, Shape{p.n, p.h, p.w, t_.channels}, ctx.allocator());
    if (!xt.ok())
      return MakeStatus(xt.status().code(), node.Describe(), ": transformed input: ", xt.status().message());
    float* dst = xt->mutable_data<float>();
    const int64_t rows = p.n * p.h * p.w, c = t_.channels;
    const bool avx512 = sgemm::Available();
    auto body = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        if (avx512) {
          TransformRowRange<true>(p, t_, r, 0, c, dst + r * c);
        } else {
          TransformRowRange<false>(p, t_, r, 0, c, dst + r * c);
        }
      }
    };
    // ~16K floats per chunk: enough work to amortise a pool wake-up.
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(c, 1));
    if (c > 0 && ctx.pool() && ctx.pool()->num_threads() > 1 && rows > grain) {
      ctx.pool()->ParallelFor(rows, grain, body);
    } else if (c > 0) {
      body(0, rows);
    }
    return ComputeOnInput0(*inner_, ctx, Value(std::move(xt).value()));
  }

 private:
  std::unique_ptr<OpKernel> inner_;
  NhwcConvInputTransform t_;
};

}  // namespace

bool HasNhwcConvInputTransform(const Node& node) {
  return (node.inputs.size() > kNhwcConvInputNorm && node.inputs[kNhwcConvInputNorm] >= 0) ||
         node.HasAttr("input_parts");
}

Result<NhwcConvInputTransform> ParseNhwcConvInputTransform(const KernelInit& init, int64_t channels) {
  const Node& node = init.node;
  NhwcConvInputTransform t;
  t.channels = channels;
  if (init.has_input(4))
    return InvalidModel(node.Describe(),
                        ": a fused input scale (input 4) does not combine with a fused input norm "
                        "or input parts");
  if (node.HasAttr("input_parts")) {
    t.parts = node.GetInt("input_parts", 0);
    if (t.parts < 2 || t.parts > 4096 || node.inputs.size() != kNhwcConvInputParts + static_cast<size_t>(t.parts) - 1)
      return InvalidModel(node.Describe(), ": input_parts ", t.parts, " needs inputs 9 .. ", kNhwcConvInputParts,
                          " + P - 2 (", node.inputs.size(), " inputs given)");
    for (int64_t i = 0; i < t.parts; ++i) {
      const size_t slot = i == 0 ? 0 : kNhwcConvInputParts + static_cast<size_t>(i) - 1;
      if (!init.has_input(slot))
        return InvalidModel(node.Describe(), ": input part ", i, " (input ", slot, ") is absent");
    }
  } else if (node.inputs.size() > kNhwcConvInputParts) {
    return InvalidModel(node.Describe(), ": ", node.inputs.size(), " inputs but no input_parts attribute");
  }
  t.norm = init.has_input(kNhwcConvInputNorm);
  if (!t.norm) return t;
  const char* names[] = {"scale", "B", "mean", "var"};
  const Tensor* p[4];
  for (size_t i = 0; i < 4; ++i) {
    p[i] = init.constant_input(kNhwcConvInputNorm + i);
    if (!p[i] || p[i]->dtype() != DataType::kFloat || p[i]->rank() != 1 || p[i]->dim(0) != channels)
      return InvalidModel(node.Describe(), ": the fused input norm's ", names[i], " (input ", kNhwcConvInputNorm + i,
                          ") must be a constant float32 [", channels, "]");
  }
  // The activation as NhwcBatchNormalization's, under the input_norm_ prefix.
  Node act_node;
  act_node.name = node.name;
  act_node.op_type = node.op_type;
  const size_t len = std::strlen(kNormPrefix);
  for (const auto& [k, a] : node.attrs)
    if (k.compare(0, len, kNormPrefix) == 0) act_node.attrs[k.substr(len)] = a;
  ASSIGN_OR_RETURN(FusedActivation act, ParseFusedActivation(act_node));
  t.clamp = act.active();
  t.lo = act.min;
  t.hi = act.max;
  const double eps = node.GetFloat("input_norm_epsilon", 1e-5f);
  t.mean.resize(channels);
  t.a.resize(channels);
  t.b.resize(channels);
  for (int64_t ch = 0; ch < channels; ++ch) {
    t.mean[ch] = p[2]->data<float>()[ch];
    t.a[ch] =
        static_cast<float>(p[0]->data<float>()[ch] / std::sqrt(static_cast<double>(p[3]->data<float>()[ch]) + eps));
    t.b[ch] = p[1]->data<float>()[ch];
  }
  return t;
}

Result<std::unique_ptr<OpKernel>> MakeNhwcInputNormGemmConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                            NhwcConvInputTransform t) {
  const Node& node = init.node;
  if (!sgemm::Available() || !IsPointwiseConv(node, w))
    return Unsupported(node.Describe(), ": the transformed-input SGEMM conv needs a pointwise conv and AVX-512F");
  ASSIGN_OR_RETURN(FusedActivation act, ParseNhwcConvActivation(node));
  auto packed = sgemm::PackConvWeights(sgemm::WeightRows::Of(w), w.dim(0), w.dim(1), 1, init.pool);
  if (!packed.ok()) return MakeStatus(packed.status().code(), node.Describe(), ": ", packed.status().message());
  return std::unique_ptr<OpKernel>(
      std::make_unique<InputNormGemmConvKernel>(init, w, b, act, std::move(t), std::move(packed).value()));
}

std::unique_ptr<OpKernel> WrapNhwcTransformedInput(std::unique_ptr<OpKernel> inner, NhwcConvInputTransform t) {
  return std::make_unique<TransformedInputConvKernel>(std::move(inner), std::move(t));
}

}  // namespace strata
