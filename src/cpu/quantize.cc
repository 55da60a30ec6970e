// Quantization ops: QuantizeLinear, DequantizeLinear (opsets 10, 13), DynamicQuantizeLinear,
// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.
//
// Integer products accumulate in int32 after subtracting zero points (exact). Requantization
// (QLinear*) multiplies the accumulator by a float multiplier x_scale * w_scale / y_scale and
// rounds half to even, like ONNX Runtime's reference path.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/kernel.h"
#include "cpu/fn_kernel_def.h"
#include "cpu/register.h"
#include "cpu/target_clones.h"

namespace strata {
namespace {

bool IsQuant8(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// Reads element i of an 8-bit or int32 integer tensor.
int32_t LoadQ(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kUInt8:
      return t.data<uint8_t>()[i];
    case DataType::kInt8:
      return t.data<int8_t>()[i];
    case DataType::kInt32:
      return t.data<int32_t>()[i];
    default:
      return 0;
  }
}

float LoadScale(const Tensor& t, int64_t i) {
  if (t.dtype() == DataType::kFloat16) return static_cast<float>(t.data<Float16>()[i]);
  if (t.dtype() == DataType::kDouble) return static_cast<float>(t.data<double>()[i]);
  return t.data<float>()[i];
}

Status CheckScale(const Tensor* t, const Node& node, const char* what) {
  if (!t) return InvalidArgument(node.Describe(), ": input '", what, "' is missing");
  if (t->dtype() != DataType::kFloat && t->dtype() != DataType::kFloat16 && t->dtype() != DataType::kDouble)
    return InvalidArgument(node.Describe(), ": '", what, "' must be float, got ", DataTypeName(t->dtype()));
  return Status::Ok();
}

// Rounds half to even and saturates to the range of `dt` (uint8 or int8).
int32_t Saturate(float v, DataType dt) {
  float r = std::nearbyint(v);
  if (std::isnan(r)) r = 0;  // NaN quantizes to 0: keeps the integer conversion defined
  const float lo = dt == DataType::kUInt8 ? 0.0f : -128.0f, hi = dt == DataType::kUInt8 ? 255.0f : 127.0f;
  return static_cast<int32_t>(std::clamp(r, lo, hi));
}

void StoreQ(Tensor& t, int64_t i, int32_t v) {
  if (t.dtype() == DataType::kUInt8) {
    t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v);
  } else {
    t.mutable_data<int8_t>()[i] = static_cast<int8_t>(v);
  }
}

// Per-tensor or per-axis parameters: scale/zero point tensors must be scalars or 1-D
// of length x.shape[axis]. Returns the stride structure for indexing.
struct AxisParams {
  int64_t count = 1;  // 1: per tensor
  int64_t inner = 1;  // elements after the axis
};

Result<AxisParams> ResolveAxis(const Tensor& x, const Tensor& scale, const Tensor* zp, const Node& node) {
  AxisParams p;
  if (scale.num_elements() == 1 && scale.rank() <= 1) {
    if (zp && zp->num_elements() != 1)
      return InvalidArgument(node.Describe(), ": zero point must be a scalar when the scale is a scalar");
    return p;
  }
  if (scale.rank() != 1) return InvalidArgument(node.Describe(), ": scale must be a scalar or 1-D");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 1), static_cast<int64_t>(x.rank()), node));
  if (scale.dim(0) != x.dim(axis))
    return InvalidArgument(node.Describe(), ": scale has ", scale.dim(0), " values but axis ", axis, " has size ",
                           x.dim(axis));
  if (zp && zp->shape() != scale.shape())
    return InvalidArgument(node.Describe(), ": zero point shape ", ShapeToString(zp->shape()),
                           " differs from scale shape ", ShapeToString(scale.shape()));
  p.count = scale.dim(0);
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
  return p;
}

Status QuantizeLinear(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  if (!x) return InvalidArgument(node.Describe(), ": input x is missing");
  RETURN_IF_ERROR(CheckScale(scale, node, "y_scale"));
  if (x->dtype() != DataType::kFloat && x->dtype() != DataType::kInt32 && x->dtype() != DataType::kFloat16 &&
      x->dtype() != DataType::kDouble)
    return InvalidArgument(node.Describe(), ": x must be float or int32, got ", DataTypeName(x->dtype()));
  const DataType out_t = zp ? zp->dtype() : DataType::kUInt8;
  if (!IsQuant8(out_t))
    return InvalidArgument(node.Describe(), ": y_zero_point must be uint8 or int8, got ", DataTypeName(out_t));
  ASSIGN_OR_RETURN(AxisParams ap, ResolveAxis(*x, *scale, zp, node));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, out_t, x->shape()));
  const int64_t n = x->num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = ap.count == 1 ? 0 : (i / ap.inner) % ap.count;
    const float s = LoadScale(*scale, c);
    float v = 0;
    if (x->dtype() == DataType::kInt32) {
      v = static_cast<float>(x->data<int32_t>()[i]);
    } else {
      v = LoadScale(*x, i);
    }
    const int32_t z = zp ? LoadQ(*zp, c) : 0;
    StoreQ(*y, i, Saturate(std::nearbyint(v / s) + static_cast<float>(z), out_t));
  }
  return Status::Ok();
}

Status DequantizeLinear(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  if (!x) return InvalidArgument(node.Describe(), ": input x is missing");
  RETURN_IF_ERROR(CheckScale(scale, node, "x_scale"));
  if (!IsQuant8(x->dtype()) && x->dtype() != DataType::kInt32)
    return InvalidArgument(node.Describe(), ": x must be uint8, int8 or int32, got ", DataTypeName(x->dtype()));
  if (zp && zp->dtype() != x->dtype())
    return InvalidArgument(node.Describe(), ": x_zero_point dtype ", DataTypeName(zp->dtype()),
                           " differs from x dtype ", DataTypeName(x->dtype()));
  ASSIGN_OR_RETURN(AxisParams ap, ResolveAxis(*x, *scale, zp, node));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, x->shape()));
  float* out = y->mutable_data<float>();
  const int64_t n = x->num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = ap.count == 1 ? 0 : (i / ap.inner) % ap.count;
    const int32_t z = zp ? LoadQ(*zp, c) : 0;
    out[i] = static_cast<float>(static_cast<int64_t>(LoadQ(*x, i)) - z) * LoadScale(*scale, c);
  }
  return Status::Ok();
}

Status DynamicQuantizeLinear(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x || x->dtype() != DataType::kFloat) return InvalidArgument(node.Describe(), ": x must be a float tensor");
  const int64_t n = x->num_elements();
  const float* in = x->data<float>();
  float mn = 0, mx = 0;  // the range always includes 0
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(in[i])) return InvalidArgument(node.Describe(), ": x contains NaN");
    mn = std::min(mn, in[i]);
    mx = std::max(mx, in[i]);
  }
  const float scale = (mx - mn) / 255.0f;
  const int32_t zp = scale == 0 ? 0 : Saturate(std::nearbyint(0.0f - mn / scale), DataType::kUInt8);
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kUInt8, x->shape()));
  uint8_t* q = y->mutable_data<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    q[i] =
        scale == 0
            ? static_cast<uint8_t>(zp)
            : static_cast<uint8_t>(Saturate(std::nearbyint(in[i] / scale) + static_cast<float>(zp), DataType::kUInt8));
  ASSIGN_OR_RETURN(Tensor * ys, ctx.AllocateOutput(1, DataType::kFloat, {}));
  ys->mutable_data<float>()[0] = scale;
  ASSIGN_OR_RETURN(Tensor * yz, ctx.AllocateOutput(2, DataType::kUInt8, {}));
  yz->mutable_data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return Status::Ok();
}

// ---- integer matmul ----

// Batched [.., M, K] x [.., K, N] with numpy broadcasting of the batch dims; zero points
// are per tensor, per row of A ([M]) or per column of B ([N]). Produces int32.
struct MatMulShape {
  Shape out;
  int64_t M = 0, K = 0, N = 0, batch = 1;
  std::vector<int64_t> a_off, b_off;  // per output batch: element offsets into A and B
};

Result<MatMulShape> MatMulShapes(const Tensor& a, const Tensor& b, const Node& node) {
  if (a.rank() < 1 || b.rank() < 1) return InvalidArgument(node.Describe(), ": inputs must have rank >= 1");
  Shape as = a.shape(), bs = b.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  MatMulShape r;
  r.M = as[as.size() - 2];
  r.K = as.back();
  r.N = bs.back();
  if (bs[bs.size() - 2] != r.K)
    return InvalidArgument(node.Describe(), ": inner dimensions differ: A ", ShapeToString(a.shape()), " and B ",
                           ShapeToString(b.shape()));
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(ab, bb, node));
  r.batch = NumElements(batch);
  // Offsets of each broadcast batch index into A and B.
  const size_t br = batch.size();
  r.a_off.resize(static_cast<size_t>(r.batch));
  r.b_off.resize(static_cast<size_t>(r.batch));
  for (int64_t i = 0; i < r.batch; ++i) {
    int64_t rem = i, ao = 0, bo = 0, astr = r.M * r.K, bstr = r.K * r.N;
    for (size_t d = br; d-- > 0;) {
      const int64_t idx = rem % batch[d];
      rem /= batch[d];
      const int64_t ad = static_cast<int64_t>(d) - static_cast<int64_t>(br - ab.size());
      const int64_t bd = static_cast<int64_t>(d) - static_cast<int64_t>(br - bb.size());
      if (ad >= 0) {
        if (ab[ad] != 1) ao += idx * astr;
        astr *= ab[ad];
      }
      if (bd >= 0) {
        if (bb[bd] != 1) bo += idx * bstr;
        bstr *= bb[bd];
      }
    }
    r.a_off[i] = ao;
    r.b_off[i] = bo;
  }
  r.out = batch;
  if (!a1) r.out.push_back(r.M);
  if (!b1) r.out.push_back(r.N);
  return r;
}

// Zero point lookup: scalar, or a vector indexed by row (A) / column (B).
Result<std::vector<int32_t>> ZeroPoints(const Tensor* zp, const Tensor& x, int64_t len, const Node& node,
                                        const char* what) {
  if (!zp || zp->num_elements() == 0) return std::vector<int32_t>(1, 0);
  if (zp->dtype() != x.dtype())
    return InvalidArgument(node.Describe(), ": ", what, " dtype ", DataTypeName(zp->dtype()),
                           " differs from its input's ", DataTypeName(x.dtype()));
  if (zp->num_elements() != 1 && zp->num_elements() != len)
    return InvalidArgument(node.Describe(), ": ", what, " must be a scalar or have ", len, " values, got shape ",
                           ShapeToString(zp->shape()));
  std::vector<int32_t> v(static_cast<size_t>(zp->num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = LoadQ(*zp, static_cast<int64_t>(i));
  return v;
}

void IntMatMul(const Tensor& a, const Tensor& b, const MatMulShape& s, const std::vector<int32_t>& azp,
               const std::vector<int32_t>& bzp, int32_t* out) {
  std::vector<int32_t> bt(static_cast<size_t>(s.K * s.N));
  std::vector<int32_t> arow(static_cast<size_t>(s.K));
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    // Transposed, zero-point-adjusted B for contiguous inner products.
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t j = 0; j < s.N; ++j)
        bt[j * s.K + k] = LoadQ(b, s.b_off[bi] + k * s.N + j) - bzp[bzp.size() == 1 ? 0 : j];
    for (int64_t i = 0; i < s.M; ++i) {
      const int32_t za = azp[azp.size() == 1 ? 0 : i];
      for (int64_t k = 0; k < s.K; ++k) arow[k] = LoadQ(a, s.a_off[bi] + i * s.K + k) - za;
      for (int64_t j = 0; j < s.N; ++j) {
        const int32_t* bc = &bt[j * s.K];
        uint32_t acc = 0;  // unsigned: overflow wraps (defined) like int32 hardware accumulators
        for (int64_t k = 0; k < s.K; ++k) acc += static_cast<uint32_t>(arow[k]) * static_cast<uint32_t>(bc[k]);
        out[(bi * s.M + i) * s.N + j] = static_cast<int32_t>(acc);
      }
    }
  }
}

Status MatMulInteger(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (!a || !b) return InvalidArgument(node.Describe(), ": inputs A and B are required");
  if (!IsQuant8(a->dtype()) || !IsQuant8(b->dtype()))
    return InvalidArgument(node.Describe(), ": A and B must be uint8 or int8");
  ASSIGN_OR_RETURN(MatMulShape s, MatMulShapes(*a, *b, node));
  ASSIGN_OR_RETURN(auto azp, ZeroPoints(ctx.input(2), *a, s.M, node, "a_zero_point"));
  ASSIGN_OR_RETURN(auto bzp, ZeroPoints(ctx.input(3), *b, s.N, node, "b_zero_point"));
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt32, s.out));
  IntMatMul(*a, *b, s, azp, bzp, y->mutable_data<int32_t>());
  return Status::Ok();
}

Status QLinearMatMul(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  if (!a || !b) return InvalidArgument(node.Describe(), ": inputs a and b are required");
  if (!IsQuant8(a->dtype()) || !IsQuant8(b->dtype()))
    return InvalidArgument(node.Describe(), ": a and b must be uint8 or int8");
  RETURN_IF_ERROR(CheckScale(ctx.input(1), node, "a_scale"));
  RETURN_IF_ERROR(CheckScale(ctx.input(4), node, "b_scale"));
  RETURN_IF_ERROR(CheckScale(ctx.input(6), node, "y_scale"));
  const Tensor* yzp = ctx.input(7);
  if (!yzp || !IsQuant8(yzp->dtype()) || yzp->num_elements() != 1)
    return InvalidArgument(node.Describe(), ": y_zero_point must be a uint8/int8 scalar");
  ASSIGN_OR_RETURN(MatMulShape s, MatMulShapes(*a, *b, node));
  ASSIGN_OR_RETURN(auto azp, ZeroPoints(ctx.input(2), *a, s.M, node, "a_zero_point"));
  ASSIGN_OR_RETURN(auto bzp, ZeroPoints(ctx.input(5), *b, s.N, node, "b_zero_point"));
  const Tensor& as = *ctx.input(1);
  const Tensor& bs = *ctx.input(4);
  if ((as.num_elements() != 1 && as.num_elements() != s.M) || (bs.num_elements() != 1 && bs.num_elements() != s.N))
    return InvalidArgument(node.Describe(), ": a_scale must be scalar or [M], b_scale scalar or [N]");
  std::vector<int32_t> acc(static_cast<size_t>(s.batch * s.M * s.N));
  IntMatMul(*a, *b, s, azp, bzp, acc.data());
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, yzp->dtype(), s.out));
  const float ys = LoadScale(*ctx.input(6), 0);
  const int32_t z = LoadQ(*yzp, 0);
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) {
        const float mult =
            LoadScale(as, as.num_elements() == 1 ? 0 : i) * LoadScale(bs, bs.num_elements() == 1 ? 0 : j) / ys;
        const int64_t o = (bi * s.M + i) * s.N + j;
        StoreQ(*y, o,
               Saturate(std::nearbyint(static_cast<float>(acc[o]) * mult) + static_cast<float>(z), yzp->dtype()));
      }
  return Status::Ok();
}

// ---- integer convolution ----

struct ConvGeom {
  int64_t N = 0, C = 0, M = 0, group = 1;
  Shape in_sp, k_sp, out_sp;
  std::vector<int64_t> strides, dilations, pads_begin;
};

Result<ConvGeom> ConvGeometry(const Node& node, const Tensor& x, const Tensor& w) {
  if (x.rank() < 3 || w.rank() != x.rank())
    return InvalidArgument(node.Describe(), ": x ", ShapeToString(x.shape()), " and w ", ShapeToString(w.shape()),
                           " must be [N, C, spatial...] and [M, C/group, kernel...] of equal rank >= 3");
  ConvGeom g;
  const size_t sp = x.rank() - 2;
  g.N = x.dim(0);
  g.C = x.dim(1);
  g.M = w.dim(0);
  g.group = node.GetInt("group", 1);
  if (g.group <= 0 || g.C % g.group != 0 || g.M % g.group != 0 || w.dim(1) != g.C / g.group)
    return InvalidArgument(node.Describe(), ": channels do not match: x has ", g.C, ", w ", ShapeToString(w.shape()),
                           ", group ", g.group);
  g.in_sp.assign(x.shape().begin() + 2, x.shape().end());
  g.k_sp.assign(w.shape().begin() + 2, w.shape().end());
  const std::vector<int64_t> ks = node.GetInts("kernel_shape");
  if (!ks.empty() && ks != g.k_sp)
    return InvalidArgument(node.Describe(), ": kernel_shape ", ShapeToString(ks), " differs from w ",
                           ShapeToString(g.k_sp));
  g.strides = node.GetInts("strides", std::vector<int64_t>(sp, 1));
  g.dilations = node.GetInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = node.GetInts("pads", std::vector<int64_t>(2 * sp, 0));
  if (g.strides.size() != sp || g.dilations.size() != sp || pads.size() != 2 * sp)
    return InvalidModel(node.Describe(), ": strides/dilations/pads do not match ", sp, " spatial dims");
  const std::string ap = node.GetString("auto_pad", "NOTSET");
  g.out_sp.resize(sp);
  g.pads_begin.resize(sp);
  for (size_t d = 0; d < sp; ++d) {
    if (g.strides[d] <= 0 || g.dilations[d] <= 0)
      return InvalidModel(node.Describe(), ": strides and dilations must be positive");
    const int64_t ek = (g.k_sp[d] - 1) * g.dilations[d] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const int64_t out = (g.in_sp[d] + g.strides[d] - 1) / g.strides[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[d] + ek - g.in_sp[d]);
      pads[d] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + sp] = total - pads[d];
    } else if (ap == "VALID") {
      pads[d] = pads[d + sp] = 0;
    } else if (ap != "NOTSET") {
      return InvalidModel(node.Describe(), ": unknown auto_pad '", ap, "'");
    }
    const int64_t span = g.in_sp[d] + pads[d] + pads[d + sp] - ek;
    if (span < 0)
      return InvalidArgument(node.Describe(), ": kernel ", ShapeToString(g.k_sp), " is larger than the padded input");
    g.out_sp[d] = span / g.strides[d] + 1;
    g.pads_begin[d] = pads[d];
  }
  return g;
}

// acc[i] += w * c[i] (mod 2^32). Cloned for AVX2 (vpmulld) with run-time dispatch: baseline
// x86-64 has no packed 32-bit multiply, so the default clone is scalar.
STRATA_TARGET_CLONES("avx2", "default") void AxpyU32(uint32_t* acc, uint32_t w, const int32_t* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += w * static_cast<uint32_t>(c[i]);
}

// N-D convolution of zero-point-adjusted int32 data. out: [N, M, out_sp...].
void IntConv(const ConvGeom& g, const std::vector<int32_t>& x, const std::vector<int32_t>& w, int32_t* out,
             ThreadPool* pool) {
  const size_t sp = g.in_sp.size();
  const int64_t in_size = NumElements(g.in_sp), k_size = NumElements(g.k_sp), out_size = NumElements(g.out_sp);
  const int64_t cg = g.C / g.group, mg = g.M / g.group;
  // Precompute, for each (output position, kernel position), the input offset or -1 (padding).
  std::vector<int64_t> off(static_cast<size_t>(out_size * k_size));
  std::vector<int64_t> oi(sp), ki(sp);
  for (int64_t o = 0; o < out_size; ++o) {
    int64_t rem = o;
    for (size_t d = sp; d-- > 0;) {
      oi[d] = rem % g.out_sp[d];
      rem /= g.out_sp[d];
    }
    for (int64_t k = 0; k < k_size; ++k) {
      int64_t kr = k, pos = 0;
      bool inside = true;
      for (size_t d = sp; d-- > 0;) {
        ki[d] = kr % g.k_sp[d];
        kr /= g.k_sp[d];
      }
      for (size_t d = 0; d < sp; ++d) {
        const int64_t p = oi[d] * g.strides[d] - g.pads_begin[d] + ki[d] * g.dilations[d];
        if (p < 0 || p >= g.in_sp[d]) inside = false;
        pos = pos * g.in_sp[d] + p;
      }
      off[k * out_size + o] = inside ? pos : -1;
    }
  }
  // im2col per (image, group), then a GEMM whose inner loop runs over contiguous output
  // positions (vectorisable). Padding reads 0, i.e. the zero point after adjustment.
  // Accumulation is in uint32 so that overflow wraps (defined) like int32 hardware sums.
  const int64_t rows = cg * k_size;
  std::vector<int32_t> col(static_cast<size_t>(rows * out_size));
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      for (int64_t c = 0; c < cg; ++c) {
        const int32_t* xs = &x[(n * g.C + grp * cg + c) * in_size];
        for (int64_t k = 0; k < k_size; ++k) {
          int32_t* dst = &col[(c * k_size + k) * out_size];
          const int64_t* of = &off[k * out_size];
          for (int64_t o = 0; o < out_size; ++o) dst[o] = of[o] >= 0 ? xs[of[o]] : 0;
        }
      }
      auto body = [&](int64_t b, int64_t e) {
        std::vector<uint32_t> acc(static_cast<size_t>(out_size));
        for (int64_t mm = b; mm < e; ++mm) {
          const int64_t m = grp * mg + mm;
          std::fill(acc.begin(), acc.end(), 0u);
          const int32_t* ws = &w[m * rows];
          for (int64_t r = 0; r < rows; ++r) {
            const uint32_t wr = static_cast<uint32_t>(ws[r]);
            if (wr == 0) continue;
            AxpyU32(acc.data(), wr, &col[r * out_size], out_size);
          }
          int32_t* dst = out + (n * g.M + m) * out_size;
          for (int64_t o = 0; o < out_size; ++o) dst[o] = static_cast<int32_t>(acc[o]);
        }
      };
      if (pool) {
        pool->ParallelFor(mg, 1, body);
      } else {
        body(0, mg);
      }
    }
  }
}

// Zero-point-adjusted copies of x (scalar zp) and w (scalar or per-output-channel zp).
Status PrepareConvInputs(const Node& node, const Tensor& x, const Tensor* xzp, const Tensor& w, const Tensor* wzp,
                         std::vector<int32_t>& xv, std::vector<int32_t>& wv) {
  if (xzp && xzp->num_elements() > 1) return InvalidArgument(node.Describe(), ": x_zero_point must be a scalar");
  if (xzp && xzp->num_elements() == 1 && xzp->dtype() != x.dtype())
    return InvalidArgument(node.Describe(), ": x_zero_point dtype differs from x");
  if (wzp && wzp->num_elements() > 0 && wzp->dtype() != w.dtype())
    return InvalidArgument(node.Describe(), ": w_zero_point dtype differs from w");
  if (wzp && wzp->num_elements() > 1 && wzp->num_elements() != w.dim(0))
    return InvalidArgument(node.Describe(), ": w_zero_point must be a scalar or have ", w.dim(0), " values");
  const int32_t xz = xzp && xzp->num_elements() == 1 ? LoadQ(*xzp, 0) : 0;
  xv.resize(static_cast<size_t>(x.num_elements()));
  for (int64_t i = 0; i < x.num_elements(); ++i) xv[i] = LoadQ(x, i) - xz;
  wv.resize(static_cast<size_t>(w.num_elements()));
  const int64_t per_m = w.dim(0) > 0 ? w.num_elements() / w.dim(0) : 0;
  for (int64_t i = 0; i < w.num_elements(); ++i) {
    const int32_t wz = !wzp || wzp->num_elements() == 0 ? 0 : LoadQ(*wzp, wzp->num_elements() == 1 ? 0 : i / per_m);
    wv[i] = LoadQ(w, i) - wz;
  }
  return Status::Ok();
}

Status ConvInteger(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  if (!x || !w) return InvalidArgument(node.Describe(), ": inputs x and w are required");
  if (!IsQuant8(x->dtype()) || !IsQuant8(w->dtype()))
    return InvalidArgument(node.Describe(), ": x and w must be uint8 or int8");
  ASSIGN_OR_RETURN(ConvGeom g, ConvGeometry(node, *x, *w));
  std::vector<int32_t> xv, wv;
  RETURN_IF_ERROR(PrepareConvInputs(node, *x, ctx.input(2), *w, ctx.input(3), xv, wv));
  Shape os{g.N, g.M};
  os.insert(os.end(), g.out_sp.begin(), g.out_sp.end());
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt32, os));
  IntConv(g, xv, wv, y->mutable_data<int32_t>(), ctx.pool());
  return Status::Ok();
}

Status QLinearConv(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(3);
  if (!x || !w) return InvalidArgument(node.Describe(), ": inputs x and w are required");
  if (!IsQuant8(x->dtype()) || !IsQuant8(w->dtype()))
    return InvalidArgument(node.Describe(), ": x and w must be uint8 or int8");
  RETURN_IF_ERROR(CheckScale(ctx.input(1), node, "x_scale"));
  RETURN_IF_ERROR(CheckScale(ctx.input(4), node, "w_scale"));
  RETURN_IF_ERROR(CheckScale(ctx.input(6), node, "y_scale"));
  const Tensor* yzp = ctx.input(7);
  if (!yzp || !IsQuant8(yzp->dtype()) || yzp->num_elements() != 1)
    return InvalidArgument(node.Describe(), ": y_zero_point must be a uint8/int8 scalar");
  ASSIGN_OR_RETURN(ConvGeom g, ConvGeometry(node, *x, *w));
  const Tensor& ws = *ctx.input(4);
  if (ws.num_elements() != 1 && ws.num_elements() != g.M)
    return InvalidArgument(node.Describe(), ": w_scale must be a scalar or have ", g.M, " values");
  const Tensor* bias = ctx.input(8);
  if (bias && (bias->dtype() != DataType::kInt32 || bias->num_elements() != g.M))
    return InvalidArgument(node.Describe(), ": B must be int32 with ", g.M, " values");
  std::vector<int32_t> xv, wv;
  RETURN_IF_ERROR(PrepareConvInputs(node, *x, ctx.input(2), *w, ctx.input(5), xv, wv));
  Shape os{g.N, g.M};
  os.insert(os.end(), g.out_sp.begin(), g.out_sp.end());
  const int64_t out_size = NumElements(g.out_sp);
  std::vector<int32_t> acc(static_cast<size_t>(g.N * g.M * out_size));
  IntConv(g, xv, wv, acc.data(), ctx.pool());
  ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, yzp->dtype(), os));
  const float xs = LoadScale(*ctx.input(1), 0), ys = LoadScale(*ctx.input(6), 0);
  const float z = static_cast<float>(LoadQ(*yzp, 0));
  for (int64_t nm = 0; nm < g.N * g.M; ++nm) {
    const int64_t m = nm % g.M;
    const float mult = xs * LoadScale(ws, ws.num_elements() == 1 ? 0 : m) / ys;
    const int32_t b = bias ? bias->data<int32_t>()[m] : 0;
    for (int64_t o = 0; o < out_size; ++o) {
      const int64_t i = nm * out_size + o;
      StoreQ(*y, i, Saturate(std::nearbyint(static_cast<float>(acc[i] + b) * mult) + z, yzp->dtype()));
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterQuantizeKernels(KernelRegistry& r) {
  r.Register(UntypedFnDef("QuantizeLinear", 10, QuantizeLinear, 12));
  r.Register(UntypedFnDef("QuantizeLinear", 13, QuantizeLinear, 17));
  r.Register(UntypedFnDef("DequantizeLinear", 10, DequantizeLinear, 12));
  r.Register(UntypedFnDef("DequantizeLinear", 13, DequantizeLinear, 17));
  r.Register(UntypedFnDef("DynamicQuantizeLinear", 11, DynamicQuantizeLinear, INT_MAX));
  r.Register(UntypedFnDef("MatMulInteger", 10, MatMulInteger, INT_MAX));
  r.Register(UntypedFnDef("ConvInteger", 10, ConvInteger, INT_MAX));
  r.Register(UntypedFnDef("QLinearMatMul", 10, QLinearMatMul, INT_MAX));
  r.Register(UntypedFnDef("QLinearConv", 10, QLinearConv, INT_MAX));
}

}  // namespace strata
