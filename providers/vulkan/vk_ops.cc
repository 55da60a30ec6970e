// Compiling partitions and running their nodes as Vulkan compute dispatches. Shapes are
// worked out on the host at execute time (from the actual input shapes); all dispatches
// of one execution go into one command buffer.
#include "vk_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <set>

#include "../common/shape_util.h"

namespace strata_vk {

namespace {

using strata_provider_common::Broadcast;
using strata_provider_common::ShapeStr;

constexpr int kMaxCopyRank = 6;
constexpr int64_t kMaxElems = int64_t{1} << 31;  // shaders index with 32-bit integers

VkErr Bad(const CNode& n, const std::string& msg) {
  return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, n.Who() + ": " + msg);
}

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int k = static_cast<int>(shape.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * shape[k + 1];
  return s;
}

// Integer values of a constant (int32 or int64).
bool ConstInts(const DTensor* t, std::vector<int64_t>* out) {
  if (!t || !t->konst) return false;
  const ConstValue& c = *t->konst;
  out->clear();
  if (c.dtype == kInt64) {
    const size_t n = c.host.size() / 8;
    out->resize(n);
    if (n) std::memcpy(out->data(), c.host.data(), n * 8);
  } else if (c.dtype == kInt32) {
    for (size_t k = 0; k + 4 <= c.host.size(); k += 4) {
      int32_t v;
      std::memcpy(&v, c.host.data() + k, 4);
      out->push_back(v);
    }
  } else {
    return false;
  }
  return true;
}

// Execution state of one execute call.
struct Exec {
  explicit Exec(Device* d) : dev(d), rec(d) {}
  Device* dev;
  Recorder rec;
  std::vector<DTensor> vals;
  std::vector<std::pair<std::shared_ptr<Buffer>, std::string>> error_flags;  // flag buffer, what to report

  VkErr NewFloat(const CNode& n, std::vector<int64_t> shape, DTensor* out) {
    DTensor t;
    t.dtype = kFloat;
    t.shape = std::move(shape);
    for (int64_t d : t.shape)
      if (d < 0) return Bad(n, "negative output dimension in " + ShapeStr(t.shape));
    if (t.numel() >= kMaxElems) return Bad(n, "output " + ShapeStr(t.shape) + " has 2^31 or more elements");
    VK_RETURN_IF_ERROR(
        Buffer::Create(dev, static_cast<size_t>(t.numel()) * sizeof(float), Buffer::Kind::kDevice, &t.buf));
    *out = std::move(t);
    return VkErr::Ok();
  }
  // A small host-written parameter buffer (kept alive by the recorder).
  VkErr Params(const std::vector<uint32_t>& words, std::shared_ptr<Buffer>* out) {
    VK_RETURN_IF_ERROR(Buffer::Create(dev, words.size() * 4, Buffer::Kind::kHostVisible, out));
    VK_RETURN_IF_ERROR((*out)->Write(0, words.data(), words.size() * 4));
    rec.Keep(*out);
    return VkErr::Ok();
  }
};

BufRef Ref(const DTensor& t) { return BufRef{t.buf.get(), t.offset}; }

const DTensor* Input(Exec& x, const CNode& n, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) return nullptr;
  const DTensor& t = x.vals[n.inputs[k]];
  return t.valid() ? &t : nullptr;
}

VkErr NeedFloat(const DTensor* t, const CNode& n, const char* what) {
  if (t && t->dtype == kFloat) return VkErr::Ok();
  return Bad(n, std::string(what) + " is missing or not float32");
}

// Strides of `shape` right-aligned to `out`, 0 where broadcast.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0), own = Strides(shape);
  const size_t skip = out.size() - shape.size();
  for (size_t k = 0; k < shape.size(); ++k) s[k + skip] = shape[k] == 1 ? 0 : own[k];
  return s;
}

// Merges adjacent dims that are contiguous in every stride set (fewer dims, same walk).
void MergeDims(std::vector<int64_t>* dims, std::vector<std::vector<int64_t>*> strides) {
  std::vector<int64_t> d;
  std::vector<std::vector<int64_t>> s(strides.size());
  for (size_t k = 0; k < dims->size(); ++k) {
    if ((*dims)[k] == 1 && dims->size() > 1) continue;  // size-1 dims do not move the index
    bool merge = !d.empty();
    for (size_t j = 0; merge && j < strides.size(); ++j) merge = s[j].back() == (*strides[j])[k] * (*dims)[k];
    if (merge) {
      d.back() *= (*dims)[k];
      for (size_t j = 0; j < strides.size(); ++j) s[j].back() = (*strides[j])[k];
    } else {
      d.push_back((*dims)[k]);
      for (size_t j = 0; j < strides.size(); ++j) s[j].push_back((*strides[j])[k]);
    }
  }
  if (d.empty()) {
    d.push_back(1);
    for (auto& v : s) v.push_back(0);
  }
  *dims = d;
  for (size_t j = 0; j < strides.size(); ++j) *strides[j] = s[j];
}

// Strided copy (copy.comp) from src (element offset/strides) into dst.
VkErr StridedCopy(Exec& x, const CNode& n, const DTensor& src, int64_t src_off, std::vector<int64_t> src_strides,
                  const DTensor& dst, int64_t dst_off, std::vector<int64_t> dst_strides, std::vector<int64_t> dims) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total == 0) return VkErr::Ok();
  MergeDims(&dims, {&src_strides, &dst_strides});
  if (dims.size() > kMaxCopyRank)
    return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED,
                   n.Who() + ": the copy needs " + std::to_string(dims.size()) + " dimensions; at most 6 are handled");
  struct {
    uint32_t total, rank, src_off, dst_off;
    uint32_t dims[6];
    int32_t ss[6];
    uint32_t ds[6];
  } pc{};
  pc.total = static_cast<uint32_t>(total);
  pc.rank = static_cast<uint32_t>(dims.size());
  pc.src_off = static_cast<uint32_t>(src_off);
  pc.dst_off = static_cast<uint32_t>(dst_off);
  for (size_t k = 0; k < dims.size(); ++k) {
    pc.dims[k] = static_cast<uint32_t>(dims[k]);
    pc.ss[k] = static_cast<int32_t>(src_strides[k]);
    pc.ds[k] = static_cast<uint32_t>(dst_strides[k]);
  }
  return x.rec.Dispatch1D(Shader::kCopy, {Ref(src), Ref(dst)}, &pc, sizeof(pc), static_cast<uint64_t>(total));
}

// ------------------------------------------------------------------ GEMM core

struct GemmArgs {
  uint32_t M, N, K, sAm, sAk, sBk, sBn, ldc, sBiasM, sBiasN;
  bool has_bias = false, act = false;
  float alpha = 1, beta = 1, lo = -INFINITY, hi = INFINITY;
  std::vector<uint32_t> offsets;  // 4 per batch: A, B, C, bias (elements)
};

VkErr RunGemmCore(Exec& x, const CNode& n, const DTensor& a, const DTensor& b, const DTensor* bias, const DTensor& c,
                  const GemmArgs& g) {
  const size_t batches = g.offsets.size() / 4;
  if (batches == 0 || g.M == 0 || g.N == 0) return VkErr::Ok();
  if (batches > x.dev->props().limits.maxComputeWorkGroupCount[2])
    return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED,
                   n.Who() + ": " + std::to_string(batches) + " batches exceed the device's dispatch limit");
  std::shared_ptr<Buffer> off;
  VK_RETURN_IF_ERROR(x.Params(g.offsets, &off));
  struct {
    uint32_t M, N, K, sAm, sAk, sBk, sBn, ldc, sBiasM, sBiasN, hasBias, act;
    float alpha, beta, lo, hi;
  } pc{g.M,
       g.N,
       g.K,
       g.sAm,
       g.sAk,
       g.sBk,
       g.sBn,
       g.ldc,
       g.sBiasM,
       g.sBiasN,
       g.has_bias ? 1u : 0u,
       g.act ? 1u : 0u,
       g.alpha,
       g.beta,
       g.lo,
       g.hi};
  const DTensor& bt = bias ? *bias : a;  // bound but unread without a bias
  return x.rec.Dispatch(Shader::kGemm, {Ref(a), Ref(b), Ref(c), Ref(bt), BufRef{off.get(), 0}}, &pc, sizeof(pc),
                        (g.N + 63) / 64, (g.M + 63) / 64, static_cast<uint32_t>(batches));
}

// Fused activation attributes written by the optimizer (Relu / Clip folded into Conv/Gemm).
void FusedActivation(const CNode& n, GemmArgs* g) {
  const std::string act = n.Str("activation", "");
  if (act.empty()) return;
  g->act = true;
  g->lo = n.Float("activation_min", act == "Relu" ? 0.0f : -INFINITY);
  g->hi = n.Float("activation_max", INFINITY);
}

VkErr RunMatMul(Exec& x, const CNode& n, DTensor* out) {
  const DTensor *a = Input(x, n, 0), *b = Input(x, n, 1);
  VK_RETURN_IF_ERROR(NeedFloat(a, n, "input A"));
  VK_RETURN_IF_ERROR(NeedFloat(b, n, "input B"));
  std::vector<int64_t> as = a->shape, bs = b->shape;
  if (as.empty() || bs.empty()) return Bad(n, "MatMul inputs must have rank >= 1");
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) return Bad(n, "cannot multiply " + ShapeStr(a->shape) + " by " + ShapeStr(b->shape));
  std::vector<int64_t> abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2), batch;
  if (!Broadcast(abatch, bbatch, &batch))
    return Bad(n, "batch dimensions of " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape) + " do not broadcast");
  std::vector<int64_t> oshape = batch;
  if (!a1) oshape.push_back(M);
  if (!b1) oshape.push_back(N);
  VK_RETURN_IF_ERROR(x.NewFloat(n, oshape, out));
  int64_t nb = 1;
  for (int64_t d : batch) nb *= d;
  if (nb == 0 || M == 0 || N == 0) return VkErr::Ok();
  // Per-batch offsets: broadcast batch strides in units of whole matrices.
  std::vector<int64_t> sa = BroadcastStrides(abatch, batch), sb = BroadcastStrides(bbatch, batch);
  GemmArgs g;
  g.M = static_cast<uint32_t>(M), g.N = static_cast<uint32_t>(N), g.K = static_cast<uint32_t>(K);
  g.sAm = static_cast<uint32_t>(K), g.sAk = 1, g.sBk = static_cast<uint32_t>(N), g.sBn = 1;
  g.ldc = static_cast<uint32_t>(N), g.sBiasM = g.sBiasN = 0;
  g.offsets.reserve(static_cast<size_t>(nb) * 4);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t k = 0; k < nb; ++k) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < batch.size(); ++d) oa += idx[d] * sa[d], ob += idx[d] * sb[d];
    g.offsets.insert(g.offsets.end(), {static_cast<uint32_t>(oa * M * K), static_cast<uint32_t>(ob * K * N),
                                       static_cast<uint32_t>(k * M * N), 0u});
    for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return RunGemmCore(x, n, *a, *b, nullptr, *out, g);
}

VkErr RunGemm(Exec& x, const CNode& n, DTensor* out) {
  const DTensor *a = Input(x, n, 0), *b = Input(x, n, 1), *c = Input(x, n, 2);
  VK_RETURN_IF_ERROR(NeedFloat(a, n, "input A"));
  VK_RETURN_IF_ERROR(NeedFloat(b, n, "input B"));
  if (a->shape.size() != 2 || b->shape.size() != 2)
    return Bad(n, "A and B must be 2-D, got " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape));
  const bool ta = n.Int("transA", 0) != 0, tb = n.Int("transB", 0) != 0;
  const int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  const int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  if (K != Kb) return Bad(n, "inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) + ")");
  GemmArgs g;
  g.M = static_cast<uint32_t>(M), g.N = static_cast<uint32_t>(N), g.K = static_cast<uint32_t>(K);
  g.sAm = ta ? 1 : static_cast<uint32_t>(K), g.sAk = ta ? static_cast<uint32_t>(M) : 1;
  g.sBk = tb ? 1 : static_cast<uint32_t>(N), g.sBn = tb ? static_cast<uint32_t>(K) : 1;
  g.ldc = static_cast<uint32_t>(N);
  g.alpha = n.Float("alpha", 1.0f), g.beta = n.Float("beta", 1.0f);
  g.sBiasM = g.sBiasN = 0;
  if (c) {
    VK_RETURN_IF_ERROR(NeedFloat(c, n, "input C"));
    std::vector<int64_t> bs;
    if (c->shape.size() > 2 || !Broadcast(c->shape, {M, N}, &bs) || bs != std::vector<int64_t>{M, N})
      return Bad(n, "C of shape " + ShapeStr(c->shape) + " does not broadcast to [" + std::to_string(M) + "," +
                        std::to_string(N) + "]");
    std::vector<int64_t> s = BroadcastStrides(c->shape, {M, N});
    g.sBiasM = static_cast<uint32_t>(s[0]), g.sBiasN = static_cast<uint32_t>(s[1]);
    g.has_bias = true;
  }
  FusedActivation(n, &g);
  g.offsets = {0, 0, 0, 0};
  VK_RETURN_IF_ERROR(x.NewFloat(n, {M, N}, out));
  return RunGemmCore(x, n, *a, *b, c, *out, g);
}

// Output size of one spatial dim and its begin/end pads (auto_pad resolved).
bool SpatialOut(const std::string& auto_pad, int64_t in, int64_t k, int64_t s, int64_t d, bool ceil_mode, int64_t* pb,
                int64_t* pe, int64_t* out) {
  const int64_t ek = d * (k - 1) + 1;
  if (auto_pad == "VALID") {
    *pb = *pe = 0;
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t o = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>(0, (o - 1) * s + ek - in);
    *pb = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    *pe = total - *pb;
    *out = o;
    return o > 0;
  }
  const int64_t span = in + *pb + *pe - ek;
  if (span < 0) return false;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // With ceil_mode the last window must start inside the input or the begin pad.
  if (ceil_mode && (o - 1) * s >= in + *pb) --o;
  *out = o;
  return o > 0;
}

struct Spatial {
  int64_t kh, kw, sh, sw, dh, dw, ph, pw, phe, pwe, oh, ow;
};

VkErr ResolveSpatial(const CNode& n, int64_t H, int64_t W, int64_t kh, int64_t kw, bool ceil_mode, Spatial* sp) {
  std::vector<int64_t> st = n.Ints("strides"), dl = n.Ints("dilations"), pads = n.Ints("pads");
  if (st.empty()) st = {1, 1};
  if (dl.empty()) dl = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (st.size() != 2 || dl.size() != 2 || pads.size() != 4 || st[0] <= 0 || st[1] <= 0 || dl[0] <= 0 || dl[1] <= 0 ||
      kh <= 0 || kw <= 0)
    return Bad(n, "kernel, strides and dilations must be positive with 2 entries each, pads 4 entries");
  for (int64_t p : pads)
    if (p < 0) return Bad(n, "negative pads are not allowed");
  const std::string ap = n.Str("auto_pad", "NOTSET");
  *sp = Spatial{kh, kw, st[0], st[1], dl[0], dl[1], pads[0], pads[1], pads[2], pads[3], 0, 0};
  if (!SpatialOut(ap, H, kh, st[0], dl[0], ceil_mode, &sp->ph, &sp->phe, &sp->oh) ||
      !SpatialOut(ap, W, kw, st[1], dl[1], ceil_mode, &sp->pw, &sp->pwe, &sp->ow))
    return Bad(n, "the kernel is larger than the padded input");
  return VkErr::Ok();
}

VkErr RunConv(Exec& x, const CNode& n, DTensor* out) {
  const DTensor *xt = Input(x, n, 0), *w = Input(x, n, 1), *bias = Input(x, n, 2);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input X"));
  VK_RETURN_IF_ERROR(NeedFloat(w, n, "weight W"));
  if (xt->shape.size() != 4 || w->shape.size() != 4)
    return Bad(n, "only 2-D convolution is handled (X " + ShapeStr(xt->shape) + ", W " + ShapeStr(w->shape) + ")");
  const int64_t N = xt->shape[0], C = xt->shape[1], H = xt->shape[2], W = xt->shape[3];
  const int64_t M = w->shape[0], CG = w->shape[1], KH = w->shape[2], KW = w->shape[3];
  const int64_t group = n.Int("group", 1);
  if (group <= 0 || C != CG * group || M % group != 0)
    return Bad(n, "X has " + std::to_string(C) + " channels but W expects " + std::to_string(CG) + " x group " +
                      std::to_string(group));
  std::vector<int64_t> ks = n.Ints("kernel_shape");
  if (!ks.empty() && (ks.size() != 2 || ks[0] != KH || ks[1] != KW))
    return Bad(n, "kernel_shape " + ShapeStr(ks) + " does not match W " + ShapeStr(w->shape));
  if (bias) {
    VK_RETURN_IF_ERROR(NeedFloat(bias, n, "bias B"));
    if (bias->numel() != M) return Bad(n, "bias must have " + std::to_string(M) + " elements");
  }
  Spatial sp;
  VK_RETURN_IF_ERROR(ResolveSpatial(n, H, W, KH, KW, false, &sp));
  VK_RETURN_IF_ERROR(x.NewFloat(n, {N, M, sp.oh, sp.ow}, out));
  const int64_t OHW = sp.oh * sp.ow, MG = M / group;
  if (out->numel() == 0) return VkErr::Ok();
  const bool pointwise =
      KH == 1 && KW == 1 && sp.sh == 1 && sp.sw == 1 && sp.ph == 0 && sp.pw == 0 && sp.phe == 0 && sp.pwe == 0;
  DTensor col;
  const DTensor* bmat = xt;
  if (!pointwise) {
    // im2col over every image and channel at once: col[n][c][kh][kw][oh*OW+ow].
    const int64_t total = N * C * KH * KW * OHW;
    if (total >= kMaxElems) return Bad(n, "the im2col buffer would have 2^31 or more elements");
    VK_RETURN_IF_ERROR(x.NewFloat(n, {total}, &col));
    x.rec.Keep(col.buf);  // the GPU uses it after this function returns
    struct {
      uint32_t total, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
    } pc{static_cast<uint32_t>(total), static_cast<uint32_t>(C),     static_cast<uint32_t>(H),
         static_cast<uint32_t>(W),     static_cast<uint32_t>(sp.oh), static_cast<uint32_t>(sp.ow),
         static_cast<uint32_t>(KH),    static_cast<uint32_t>(KW),    static_cast<uint32_t>(sp.sh),
         static_cast<uint32_t>(sp.sw), static_cast<uint32_t>(sp.ph), static_cast<uint32_t>(sp.pw),
         static_cast<uint32_t>(sp.dh), static_cast<uint32_t>(sp.dw)};
    VK_RETURN_IF_ERROR(x.rec.Dispatch1D(Shader::kIm2col, {Ref(*xt), Ref(col)}, &pc, sizeof(pc), total));
    bmat = &col;
  }
  const int64_t K = CG * KH * KW;
  GemmArgs g;
  g.M = static_cast<uint32_t>(MG), g.N = static_cast<uint32_t>(OHW), g.K = static_cast<uint32_t>(K);
  g.sAm = static_cast<uint32_t>(K), g.sAk = 1, g.sBk = static_cast<uint32_t>(OHW), g.sBn = 1;
  g.ldc = static_cast<uint32_t>(OHW), g.sBiasM = 1, g.sBiasN = 0;
  g.has_bias = bias != nullptr;
  FusedActivation(n, &g);
  for (int64_t img = 0; img < N; ++img)
    for (int64_t gr = 0; gr < group; ++gr)
      g.offsets.insert(g.offsets.end(),
                       {static_cast<uint32_t>(gr * MG * K),
                        static_cast<uint32_t>((img * C + gr * CG) * (pointwise ? H * W : KH * KW * OHW)),
                        static_cast<uint32_t>((img * M + gr * MG) * OHW), static_cast<uint32_t>(gr * MG)});
  return RunGemmCore(x, n, *w, *bmat, bias, *out, g);
}

VkErr RunPool(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input X"));
  if (xt->shape.size() != 4) return Bad(n, "only 2-D pooling is handled, got X " + ShapeStr(xt->shape));
  const int64_t N = xt->shape[0], C = xt->shape[1], H = xt->shape[2], W = xt->shape[3];
  std::vector<int64_t> k = n.Ints("kernel_shape");
  if (k.size() != 2) return Bad(n, "kernel_shape must have 2 entries");
  Spatial sp;
  VK_RETURN_IF_ERROR(ResolveSpatial(n, H, W, k[0], k[1], n.Int("ceil_mode", 0) != 0, &sp));
  VK_RETURN_IF_ERROR(x.NewFloat(n, {N, C, sp.oh, sp.ow}, out));
  const uint32_t avg = n.op == "AveragePool" ? 1u : 0u;
  struct {
    uint32_t total, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, type, countPad, phEnd, pwEnd;
  } pc{static_cast<uint32_t>(out->numel()),
       static_cast<uint32_t>(H),
       static_cast<uint32_t>(W),
       static_cast<uint32_t>(sp.oh),
       static_cast<uint32_t>(sp.ow),
       static_cast<uint32_t>(sp.kh),
       static_cast<uint32_t>(sp.kw),
       static_cast<uint32_t>(sp.sh),
       static_cast<uint32_t>(sp.sw),
       static_cast<uint32_t>(sp.ph),
       static_cast<uint32_t>(sp.pw),
       static_cast<uint32_t>(sp.dh),
       static_cast<uint32_t>(sp.dw),
       avg,
       static_cast<uint32_t>(n.Int("count_include_pad", 0) != 0),
       static_cast<uint32_t>(sp.phe),
       static_cast<uint32_t>(sp.pwe)};
  return x.rec.Dispatch1D(Shader::kPool, {Ref(*xt), Ref(*out)}, &pc, sizeof(pc), static_cast<uint64_t>(out->numel()));
}

// Sum or mean over contiguous rows of `len`.
VkErr RowReduce(Exec& x, const DTensor& in, int64_t rows, int64_t len, bool mean, const DTensor& out) {
  if (rows == 0) return VkErr::Ok();
  struct {
    uint32_t rows, len, op;
  } pc{static_cast<uint32_t>(rows), static_cast<uint32_t>(len), mean ? 1u : 0u};
  return x.rec.DispatchRows(Shader::kReduce, {Ref(in), Ref(out)}, &pc, sizeof(pc), static_cast<uint64_t>(rows));
}

VkErr RunGlobalAveragePool(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input X"));
  if (xt->shape.size() < 3) return Bad(n, "input must have rank >= 3, got " + ShapeStr(xt->shape));
  std::vector<int64_t> os = {xt->shape[0], xt->shape[1]};
  int64_t len = 1;
  for (size_t d = 2; d < xt->shape.size(); ++d) len *= xt->shape[d], os.push_back(1);
  VK_RETURN_IF_ERROR(x.NewFloat(n, os, out));
  if (len == 0) return Bad(n, "spatial size is 0");
  return RowReduce(x, *xt, os[0] * os[1], len, true, *out);
}

VkErr NormAxis(const CNode& n, int64_t axis, size_t rank, bool allow_rank, int64_t* out) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis > (allow_rank ? r : r - 1))
    return Bad(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  *out = axis < 0 ? axis + r : axis;
  return VkErr::Ok();
}

VkErr RunReduce(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input data"));
  std::vector<int64_t> axes;
  const bool axes_input = (n.op == "ReduceSum" && n.opset >= 13) || (n.op == "ReduceMean" && n.opset >= 18);
  if (axes_input) {
    const DTensor* at = Input(x, n, 1);
    if (at && !ConstInts(at, &axes)) return Bad(n, "axes must be a constant int64 tensor");
  } else {
    axes = n.Ints("axes");
  }
  const size_t r = xt->shape.size();
  std::set<int64_t> ax;
  for (int64_t a : axes) {
    int64_t v;
    VK_RETURN_IF_ERROR(NormAxis(n, a, r, false, &v));
    ax.insert(v);
  }
  if (axes.empty())
    for (size_t d = 0; d < r; ++d) ax.insert(static_cast<int64_t>(d));
  // Only a trailing block of axes maps onto contiguous rows.
  const int64_t first = ax.empty() ? static_cast<int64_t>(r) : *ax.begin();
  if (!ax.empty() && (*ax.rbegin() != static_cast<int64_t>(r) - 1 || static_cast<int64_t>(ax.size()) != r - first))
    return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED, n.Who() + ": only reductions over trailing axes are handled");
  const bool keep = n.Int("keepdims", 1) != 0;
  int64_t rows = 1, len = 1;
  std::vector<int64_t> os;
  for (size_t d = 0; d < r; ++d) {
    if (static_cast<int64_t>(d) < first) {
      rows *= xt->shape[d];
      os.push_back(xt->shape[d]);
    } else {
      len *= xt->shape[d];
      if (keep) os.push_back(1);
    }
  }
  VK_RETURN_IF_ERROR(x.NewFloat(n, os, out));
  if (len == 0) {
    if (n.op == "ReduceMean") return Bad(n, "mean over an empty axis");
    // Sum over nothing is 0: reduce a zero-length row (the shader writes 0).
  }
  return RowReduce(x, *xt, rows, len, n.op == "ReduceMean", *out);
}

VkErr RunSoftmax(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input"));
  const size_t r = xt->shape.size();
  if (r == 0) return Bad(n, "input must have rank >= 1");
  int64_t axis;
  VK_RETURN_IF_ERROR(NormAxis(n, n.Int("axis", n.opset >= 13 ? -1 : 1), r, false, &axis));
  int64_t outer = 1, len = 1, inner = 1;
  for (size_t d = 0; d < r; ++d) {
    const int64_t v = xt->shape[d];
    if (static_cast<int64_t>(d) < axis)
      outer *= v;
    else if (static_cast<int64_t>(d) == axis || n.opset < 13)  // opset < 13: coerced to 2-D
      len *= v;
    else
      inner *= v;
  }
  VK_RETURN_IF_ERROR(x.NewFloat(n, xt->shape, out));
  if (out->numel() == 0) return VkErr::Ok();
  struct {
    uint32_t rows, len, inner;
  } pc{static_cast<uint32_t>(outer * inner), static_cast<uint32_t>(len), static_cast<uint32_t>(inner)};
  return x.rec.DispatchRows(Shader::kSoftmax, {Ref(*xt), Ref(*out)}, &pc, sizeof(pc),
                            static_cast<uint64_t>(outer * inner));
}

VkErr RunLayerNorm(Exec& x, const CNode& n, DTensor* out) {
  const DTensor *xt = Input(x, n, 0), *scale = Input(x, n, 1), *bias = Input(x, n, 2);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input X"));
  VK_RETURN_IF_ERROR(NeedFloat(scale, n, "Scale"));
  int64_t axis;
  VK_RETURN_IF_ERROR(NormAxis(n, n.Int("axis", -1), xt->shape.size(), false, &axis));
  int64_t rows = 1, len = 1;
  for (size_t d = 0; d < xt->shape.size(); ++d) (static_cast<int64_t>(d) < axis ? rows : len) *= xt->shape[d];
  if (scale->numel() != len)
    return Bad(n, "Scale " + ShapeStr(scale->shape) + " must have the normalized size " + std::to_string(len));
  if (bias) {
    VK_RETURN_IF_ERROR(NeedFloat(bias, n, "B"));
    if (bias->numel() != len)
      return Bad(n, "B " + ShapeStr(bias->shape) + " must have the normalized size " + std::to_string(len));
  }
  VK_RETURN_IF_ERROR(x.NewFloat(n, xt->shape, out));
  if (out->numel() == 0) return VkErr::Ok();
  struct {
    uint32_t rows, len, hasScale, hasBias;
    float eps;
  } pc{static_cast<uint32_t>(rows), static_cast<uint32_t>(len), 1u, bias ? 1u : 0u, n.Float("epsilon", 1e-5f)};
  return x.rec.DispatchRows(Shader::kLayerNorm, {Ref(*xt), Ref(*scale), Ref(bias ? *bias : *scale), Ref(*out)}, &pc,
                            sizeof(pc), static_cast<uint64_t>(rows));
}

VkErr RunUnary(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input"));
  static const std::pair<const char*, uint32_t> kOps[] = {
      {"Relu", 0}, {"Sigmoid", 1},   {"Tanh", 2}, {"Erf", 3},  {"Exp", 4},         {"Sqrt", 5}, {"Neg", 6},
      {"Clip", 7}, {"LeakyRelu", 8}, {"Gelu", 9}, {"Abs", 11}, {"Reciprocal", 13}, {"Log", 14}};
  uint32_t op = 12;
  for (const auto& [name, code] : kOps)
    if (n.op == name) op = code;
  float alpha = 0, beta = 0;
  if (n.op == "LeakyRelu") alpha = n.Float("alpha", 0.01f);
  if (n.op == "Gelu" && n.Str("approximate", "none") == "tanh") op = 10;
  if (n.op == "Clip") {
    alpha = -INFINITY, beta = INFINITY;
    if (n.opset < 11) {
      alpha = n.Float("min", alpha), beta = n.Float("max", beta);
    } else {
      for (size_t k = 1; k < 3; ++k) {
        const DTensor* t = Input(x, n, k);
        if (!t) continue;
        if (!t->konst || t->konst->dtype != kFloat || t->konst->host.size() != sizeof(float))
          return Bad(n, "min/max must be constant float32 scalars");
        std::memcpy(k == 1 ? &alpha : &beta, t->konst->host.data(), sizeof(float));
      }
    }
  }
  VK_RETURN_IF_ERROR(x.NewFloat(n, xt->shape, out));
  if (out->numel() == 0) return VkErr::Ok();
  struct {
    uint32_t total, op;
    float alpha, beta;
  } pc{static_cast<uint32_t>(out->numel()), op, alpha, beta};
  return x.rec.Dispatch1D(Shader::kUnary, {Ref(*xt), Ref(*out)}, &pc, sizeof(pc), static_cast<uint64_t>(out->numel()));
}

VkErr RunBinary(Exec& x, const CNode& n, DTensor* out) {
  const DTensor *a = Input(x, n, 0), *b = Input(x, n, 1);
  VK_RETURN_IF_ERROR(NeedFloat(a, n, "input A"));
  VK_RETURN_IF_ERROR(NeedFloat(b, n, "input B"));
  std::vector<int64_t> shape;
  if (!Broadcast(a->shape, b->shape, &shape))
    return Bad(n, "shapes " + ShapeStr(a->shape) + " and " + ShapeStr(b->shape) + " do not broadcast");
  VK_RETURN_IF_ERROR(x.NewFloat(n, shape, out));
  if (out->numel() == 0) return VkErr::Ok();
  std::vector<int64_t> dims = shape, sa = BroadcastStrides(a->shape, shape), sb = BroadcastStrides(b->shape, shape);
  MergeDims(&dims, {&sa, &sb});
  if (dims.size() > 6)
    return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED, n.Who() + ": broadcasting needs " + std::to_string(dims.size()) +
                                                           " dimensions; at most 6 are handled");
  const uint32_t op = n.op == "Add" ? 0 : n.op == "Sub" ? 1 : n.op == "Mul" ? 2 : n.op == "Div" ? 3 : 4;
  struct {
    uint32_t total, rank, op, pad;
    uint32_t dims[6], sa[6], sb[6];
  } pc{};
  pc.total = static_cast<uint32_t>(out->numel());
  pc.rank = static_cast<uint32_t>(dims.size());
  pc.op = op;
  for (size_t k = 0; k < dims.size(); ++k) {
    pc.dims[k] = static_cast<uint32_t>(dims[k]);
    pc.sa[k] = static_cast<uint32_t>(sa[k]);
    pc.sb[k] = static_cast<uint32_t>(sb[k]);
  }
  return x.rec.Dispatch1D(Shader::kBinary, {Ref(*a), Ref(*b), Ref(*out)}, &pc, sizeof(pc),
                          static_cast<uint64_t>(out->numel()));
}

VkErr RunTranspose(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input"));
  const size_t r = xt->shape.size();
  std::vector<int64_t> perm = n.Ints("perm");
  if (perm.empty())
    for (size_t d = 0; d < r; ++d) perm.push_back(static_cast<int64_t>(r - 1 - d));
  std::vector<bool> seen(r, false);
  if (perm.size() != r) return Bad(n, "perm " + ShapeStr(perm) + " does not match rank " + std::to_string(r));
  for (int64_t& p : perm) {
    if (p < 0) p += static_cast<int64_t>(r);
    if (p < 0 || p >= static_cast<int64_t>(r) || seen[p]) return Bad(n, "perm is not a permutation");
    seen[p] = true;
  }
  std::vector<int64_t> os(r), ss(r), in_strides = Strides(xt->shape);
  for (size_t d = 0; d < r; ++d) os[d] = xt->shape[perm[d]], ss[d] = in_strides[perm[d]];
  VK_RETURN_IF_ERROR(x.NewFloat(n, os, out));
  return StridedCopy(x, n, *xt, 0, ss, *out, 0, Strides(os), os);
}

VkErr RunConcat(Exec& x, const CNode& n, DTensor* out) {
  std::vector<const DTensor*> ins;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const DTensor* t = Input(x, n, k);
    VK_RETURN_IF_ERROR(NeedFloat(t, n, ("input " + std::to_string(k)).c_str()));
    ins.push_back(t);
  }
  if (ins.empty()) return Bad(n, "needs at least one input");
  const size_t r = ins[0]->shape.size();
  if (r == 0) return Bad(n, "inputs must have rank >= 1");
  int64_t axis;
  VK_RETURN_IF_ERROR(NormAxis(n, n.Int("axis", 0), r, false, &axis));
  std::vector<int64_t> os = ins[0]->shape;
  os[axis] = 0;
  for (const DTensor* t : ins) {
    bool ok = t->shape.size() == r;
    for (size_t d = 0; ok && d < r; ++d) ok = static_cast<int64_t>(d) == axis || t->shape[d] == os[d];
    if (!ok)
      return Bad(n, "input " + ShapeStr(t->shape) + " does not match " + ShapeStr(ins[0]->shape) + " outside axis " +
                        std::to_string(axis));
    os[axis] += t->shape[axis];
  }
  VK_RETURN_IF_ERROR(x.NewFloat(n, os, out));
  const std::vector<int64_t> ostr = Strides(os);
  int64_t at = 0;
  for (const DTensor* t : ins) {
    VK_RETURN_IF_ERROR(StridedCopy(x, n, *t, 0, Strides(t->shape), *out, at * ostr[axis], ostr, t->shape));
    at += t->shape[axis];
  }
  return VkErr::Ok();
}

VkErr RunSlice(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input data"));
  const size_t r = xt->shape.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset < 10) {
    starts = n.Ints("starts"), ends = n.Ints("ends"), axes = n.Ints("axes");
  } else {
    if (!ConstInts(Input(x, n, 1), &starts) || !ConstInts(Input(x, n, 2), &ends))
      return Bad(n, "starts and ends must be constant integer tensors");
    if (Input(x, n, 3) && !ConstInts(Input(x, n, 3), &axes)) return Bad(n, "axes must be a constant");
    if (Input(x, n, 4) && !ConstInts(Input(x, n, 4), &steps)) return Bad(n, "steps must be a constant");
  }
  if (axes.empty())
    for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return Bad(n, "starts, ends, axes and steps must have the same length");
  std::vector<int64_t> st(r, 0), step(r, 1), os = xt->shape;
  std::vector<bool> seen(r, false);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a;
    VK_RETURN_IF_ERROR(NormAxis(n, axes[k], r, false, &a));
    if (seen[a]) return Bad(n, "axis " + std::to_string(a) + " appears twice");
    seen[a] = true;
    const int64_t dim = xt->shape[a], s = steps[k];
    if (s == 0) return Bad(n, "steps must not be 0");
    int64_t b = starts[k], e = ends[k];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // ends given as INT_MAX/INT_MIN style sentinels are covered by the clamps above.
    const int64_t len = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e + (-s) - 1) / (-s) : 0);
    st[a] = b, step[a] = s, os[a] = len;
  }
  VK_RETURN_IF_ERROR(x.NewFloat(n, os, out));
  const std::vector<int64_t> is = Strides(xt->shape);
  int64_t off = 0;
  std::vector<int64_t> ss(r);
  for (size_t d = 0; d < r; ++d) {
    if (os[d] > 0) off += st[d] * is[d];
    ss[d] = step[d] * is[d];
  }
  return StridedCopy(x, n, *xt, off, ss, *out, 0, Strides(os), os);
}

VkErr RunGather(Exec& x, const CNode& n, DTensor* out) {
  const DTensor *data = Input(x, n, 0), *idx = Input(x, n, 1);
  VK_RETURN_IF_ERROR(NeedFloat(data, n, "input data"));
  if (!idx || (idx->dtype != kInt64 && idx->dtype != kInt32)) return Bad(n, "indices must be int32 or int64");
  const size_t r = data->shape.size();
  if (r == 0) return Bad(n, "data must have rank >= 1");
  int64_t axis;
  VK_RETURN_IF_ERROR(NormAxis(n, n.Int("axis", 0), r, false, &axis));
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> os;
  for (int64_t d = 0; d < axis; ++d) outer *= data->shape[d], os.push_back(data->shape[d]);
  for (int64_t d : idx->shape) os.push_back(d);
  for (size_t d = axis + 1; d < r; ++d) inner *= data->shape[d], os.push_back(data->shape[d]);
  VK_RETURN_IF_ERROR(x.NewFloat(n, os, out));
  if (out->numel() == 0) return VkErr::Ok();
  std::shared_ptr<Buffer> flag;
  VK_RETURN_IF_ERROR(x.Params({0u}, &flag));
  x.error_flags.emplace_back(flag, n.Who() + ": an index is out of range for axis " + std::to_string(axis) +
                                       " of size " + std::to_string(data->shape[axis]));
  struct {
    uint32_t total, axisLen, inner, nidx, idx64;
  } pc{static_cast<uint32_t>(out->numel()), static_cast<uint32_t>(data->shape[axis]), static_cast<uint32_t>(inner),
       static_cast<uint32_t>(idx->numel()), idx->dtype == kInt64 ? 1u : 0u};
  return x.rec.Dispatch1D(Shader::kGather, {Ref(*data), Ref(*idx), Ref(*out), BufRef{flag.get(), 0}}, &pc, sizeof(pc),
                          static_cast<uint64_t>(out->numel()));
}

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: a new shape over the same buffer.
VkErr RunMeta(Exec& x, const CNode& n, DTensor* out) {
  const DTensor* xt = Input(x, n, 0);
  VK_RETURN_IF_ERROR(NeedFloat(xt, n, "input data"));
  const size_t r = xt->shape.size();
  std::vector<int64_t> shape;
  if (n.op == "Identity") {
    shape = xt->shape;
  } else if (n.op == "Reshape") {
    if (!ConstInts(Input(x, n, 1), &shape)) return Bad(n, "shape must be a constant int64 tensor");
    const bool allowzero = n.Int("allowzero", 0) != 0;
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] == 0 && !allowzero) {
        if (k >= r) return Bad(n, "shape entry 0 at " + std::to_string(k) + " has no input dimension to copy");
        shape[k] = xt->shape[k];
      }
      if (shape[k] == -1) {
        if (infer >= 0) return Bad(n, "more than one -1 in shape");
        infer = static_cast<int64_t>(k);
      } else if (shape[k] < 0) {
        return Bad(n, "negative dimension in shape " + ShapeStr(shape));
      } else {
        known *= shape[k];
      }
    }
    if (infer >= 0) {
      if (known == 0 || xt->numel() % known != 0)
        return Bad(n, "cannot reshape " + ShapeStr(xt->shape) + " to " + ShapeStr(shape));
      shape[infer] = xt->numel() / known;
    }
  } else if (n.op == "Flatten") {
    int64_t axis;
    VK_RETURN_IF_ERROR(NormAxis(n, n.Int("axis", 1), r, true, &axis));
    int64_t a = 1, b = 1;
    for (size_t d = 0; d < r; ++d) (static_cast<int64_t>(d) < axis ? a : b) *= xt->shape[d];
    shape = {a, b};
  } else {  // Squeeze / Unsqueeze
    std::vector<int64_t> axes;
    if (n.opset >= 13) {
      if (Input(x, n, 1) && !ConstInts(Input(x, n, 1), &axes)) return Bad(n, "axes must be a constant");
    } else {
      axes = n.Ints("axes");
    }
    if (n.op == "Squeeze") {
      std::set<int64_t> drop;
      for (int64_t a : axes) {
        int64_t v;
        VK_RETURN_IF_ERROR(NormAxis(n, a, r, false, &v));
        if (xt->shape[v] != 1) return Bad(n, "cannot squeeze axis " + std::to_string(v) + " of " + ShapeStr(xt->shape));
        drop.insert(v);
      }
      for (size_t d = 0; d < r; ++d)
        if (axes.empty() ? xt->shape[d] != 1 : !drop.count(static_cast<int64_t>(d))) shape.push_back(xt->shape[d]);
    } else {
      const size_t orank = r + axes.size();
      std::set<int64_t> add;
      for (int64_t a : axes) {
        int64_t v;
        VK_RETURN_IF_ERROR(NormAxis(n, a, orank, false, &v));
        if (!add.insert(v).second) return Bad(n, "axis " + std::to_string(v) + " appears twice");
      }
      size_t src = 0;
      for (size_t d = 0; d < orank; ++d) shape.push_back(add.count(static_cast<int64_t>(d)) ? 1 : xt->shape[src++]);
    }
  }
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total != xt->numel()) return Bad(n, "cannot reshape " + ShapeStr(xt->shape) + " to " + ShapeStr(shape));
  if (shape.size() > STRATA_PROVIDER_MAX_RANK) return Bad(n, "result rank exceeds 8");
  *out = *xt;
  out->shape = std::move(shape);
  out->konst = nullptr;
  return VkErr::Ok();
}

VkErr RunNode(Exec& x, const CNode& n) {
  if (n.outputs.empty() || n.outputs[0] < 0) return VkErr::Ok();
  DTensor out;
  VkErr e;
  const std::string& op = n.op;
  if (op == "MatMul")
    e = RunMatMul(x, n, &out);
  else if (op == "Gemm")
    e = RunGemm(x, n, &out);
  else if (op == "Conv")
    e = RunConv(x, n, &out);
  else if (op == "MaxPool" || op == "AveragePool")
    e = RunPool(x, n, &out);
  else if (op == "GlobalAveragePool")
    e = RunGlobalAveragePool(x, n, &out);
  else if (op == "ReduceMean" || op == "ReduceSum")
    e = RunReduce(x, n, &out);
  else if (op == "Softmax")
    e = RunSoftmax(x, n, &out);
  else if (op == "LayerNormalization")
    e = RunLayerNorm(x, n, &out);
  else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow")
    e = RunBinary(x, n, &out);
  else if (op == "Transpose")
    e = RunTranspose(x, n, &out);
  else if (op == "Concat")
    e = RunConcat(x, n, &out);
  else if (op == "Slice")
    e = RunSlice(x, n, &out);
  else if (op == "Gather")
    e = RunGather(x, n, &out);
  else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity")
    e = RunMeta(x, n, &out);
  else
    e = RunUnary(x, n, &out);
  if (!e.ok()) {
    if (e.msg.rfind(n.Who(), 0) != 0) e.msg = n.Who() + ": " + e.msg;
    return e;
  }
  x.vals[n.outputs[0]] = std::move(out);
  return VkErr::Ok();
}

// The shaders a node's kernels use (built at compile time so failures name the op).
std::vector<Shader> ShadersFor(const CNode& n) {
  const std::string& op = n.op;
  if (op == "MatMul" || op == "Gemm") return {Shader::kGemm};
  if (op == "Conv") return {Shader::kIm2col, Shader::kGemm};
  if (op == "MaxPool" || op == "AveragePool") return {Shader::kPool};
  if (op == "GlobalAveragePool" || op == "ReduceMean" || op == "ReduceSum") return {Shader::kReduce};
  if (op == "Softmax") return {Shader::kSoftmax};
  if (op == "LayerNormalization") return {Shader::kLayerNorm};
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") return {Shader::kBinary};
  if (op == "Transpose" || op == "Concat" || op == "Slice") return {Shader::kCopy};
  if (op == "Gather") return {Shader::kGather};
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity") return {};
  return {Shader::kUnary};
}

size_t DtypeSize(int32_t dt) { return dt == kFloat || dt == kInt32 ? 4 : dt == kInt64 ? 8 : 0; }

}  // namespace

VkErr CompilePartition(Device* d, const strata_partition_desc* p, std::unique_ptr<strata_compiled_partition>* out) {
  if (!p || (p->value_count && !p->values) || (p->node_count && !p->nodes))
    return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "malformed partition description");
  auto cp = std::make_unique<strata_compiled_partition>();
  cp->device = d;
  cp->name = p->name ? p->name : "";
  cp->constants.resize(p->value_count);
  cp->value_names.resize(p->value_count);
  VK_RETURN_IF_ERROR(d->EnsureReady());
  auto check_index = [&](int32_t v) { return v < static_cast<int32_t>(p->value_count); };
  for (size_t k = 0; k < p->node_count; ++k) {
    const strata_node_desc& nd = p->nodes[k];
    const std::string who = std::string(nd.op_type ? nd.op_type : "?") + " '" + (nd.name ? nd.name : "") + "'";
    std::string why = WhyUnsupported(&nd);
    if (!why.empty()) return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED, who + ": " + why);
    CNode c;
    const std::string bad = strata_provider_common::CopyNode(nd, p->value_count, &c);
    if (!bad.empty()) return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, who + ": " + bad);
    for (Shader s : ShadersFor(c)) {
      const Pipeline* pl;
      VkErr e = d->GetPipeline(s, &pl);
      if (!e.ok()) return MakeErr(e.code, who + ": " + e.msg);
    }
    cp->nodes.push_back(std::move(c));
  }
  for (size_t v = 0; v < p->value_count; ++v) {
    const strata_value_desc& vd = p->values[v];
    cp->value_names[v] = vd.name ? vd.name : "";
    if (!vd.const_data) continue;
    auto c = std::make_unique<ConstValue>();
    c->dtype = vd.dtype;
    if (vd.rank < 0)
      return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "constant '" + cp->value_names[v] + "' has no shape");
    c->shape.assign(vd.dims, vd.dims + vd.rank);
    int64_t n = 1;
    for (int64_t dd : c->shape) n *= dd;
    const size_t es = DtypeSize(vd.dtype);
    if (es == 0 || n < 0 || vd.const_bytes != static_cast<size_t>(n) * es)
      return MakeErr(
          STRATA_PROVIDER_RESULT_UNSUPPORTED,
          "constant '" + cp->value_names[v] + "' has an unsupported dtype or a size that does not match its shape");
    c->host.assign(static_cast<const uint8_t*>(vd.const_data),
                   static_cast<const uint8_t*>(vd.const_data) + vd.const_bytes);
    VK_RETURN_IF_ERROR(Buffer::Create(d, vd.const_bytes, Buffer::Kind::kDevice, &c->buf));
    VK_RETURN_IF_ERROR(c->buf->Write(0, vd.const_data, vd.const_bytes));
    c->buf->is_constant = true;
    cp->constants[v] = std::move(c);
  }
  for (size_t k = 0; k < p->input_count; ++k)
    if (!check_index(p->inputs[k]) || p->inputs[k] < 0)
      return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "bad partition input index");
  for (size_t k = 0; k < p->output_count; ++k)
    if (!check_index(p->outputs[k]) || p->outputs[k] < 0)
      return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, "bad partition output index");
  cp->inputs.assign(p->inputs, p->inputs + p->input_count);
  cp->outputs.assign(p->outputs, p->outputs + p->output_count);
  *out = std::move(cp);
  return VkErr::Ok();
}

VkErr ExecutePartition(strata_compiled_partition* p, const strata_device_tensor* inputs, size_t input_count,
                       strata_device_tensor* outputs, size_t output_count) {
  if (input_count != p->inputs.size() || output_count != p->outputs.size())
    return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                   "expected " + std::to_string(p->inputs.size()) + " inputs and " + std::to_string(p->outputs.size()) +
                       " outputs, got " + std::to_string(input_count) + " and " + std::to_string(output_count));
  Device* d = p->device;
  Exec x(d);
  VK_RETURN_IF_ERROR(x.rec.Begin());
  x.vals.resize(p->constants.size());
  for (size_t v = 0; v < p->constants.size(); ++v) {
    if (!p->constants[v]) continue;
    const ConstValue& c = *p->constants[v];
    x.vals[v] = DTensor{c.dtype, c.shape, c.buf, 0, &c};
  }
  const size_t align = std::max<size_t>(4, d->props().limits.minStorageBufferOffsetAlignment);
  for (size_t k = 0; k < input_count; ++k) {
    const strata_device_tensor& t = inputs[k];
    const std::string what = "input " + std::to_string(k) + " ('" + p->value_names[p->inputs[k]] + "')";
    const size_t es = DtypeSize(t.dtype);
    if (es == 0)
      return MakeErr(STRATA_PROVIDER_RESULT_UNSUPPORTED,
                     what + " has dtype " + std::to_string(t.dtype) + "; float32, int32 and int64 are handled");
    if (t.rank > STRATA_PROVIDER_MAX_RANK)
      return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, what + " has rank > 8");
    DTensor dt;
    dt.dtype = t.dtype;
    dt.shape.assign(t.dims, t.dims + t.rank);
    for (int64_t dd : dt.shape)
      if (dd < 0) return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, what + " has a negative dimension");
    const size_t bytes = static_cast<size_t>(dt.numel()) * es;
    if (!t.buffer || !t.buffer->buf || t.byte_offset > t.buffer->buf->size() ||
        bytes > t.buffer->buf->size() - t.byte_offset)
      return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT,
                     what + " " + ShapeStr(dt.shape) + " does not fit its buffer");
    if (t.buffer->buf->device() != d)
      return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, what + " lives on another device");
    dt.buf = t.buffer->buf;
    dt.offset = t.byte_offset;
    if (dt.offset % align != 0) {  // descriptor offsets must be aligned: realign by copy
      std::shared_ptr<Buffer> nb;
      VK_RETURN_IF_ERROR(Buffer::Create(d, bytes, Buffer::Kind::kDevice, &nb));
      x.rec.CopyBuffer(*dt.buf, dt.offset, *nb, 0, bytes);
      dt.buf = nb, dt.offset = 0;
    }
    x.vals[p->inputs[k]] = std::move(dt);
  }
  for (const CNode& n : p->nodes) VK_RETURN_IF_ERROR(RunNode(x, n));
  // Outputs: fresh handles on the result buffers; constants are copied so the host never
  // holds the partition's own storage.
  std::vector<DTensor> outs(output_count);
  for (size_t k = 0; k < output_count; ++k) {
    DTensor t = x.vals[p->outputs[k]];
    if (!t.valid() || t.shape.size() > STRATA_PROVIDER_MAX_RANK)
      return MakeErr(STRATA_PROVIDER_RESULT_ERROR,
                     "output " + std::to_string(k) + " ('" + p->value_names[p->outputs[k]] + "') was not computed");
    if (t.buf->is_constant) {
      const size_t bytes = static_cast<size_t>(t.numel()) * DtypeSize(t.dtype);
      std::shared_ptr<Buffer> nb;
      VK_RETURN_IF_ERROR(Buffer::Create(d, bytes, Buffer::Kind::kDevice, &nb));
      x.rec.CopyBuffer(*t.buf, t.offset, *nb, 0, bytes);
      t.buf = nb, t.offset = 0;
    }
    outs[k] = std::move(t);
  }
  VK_RETURN_IF_ERROR(x.rec.Submit());
  for (auto& [flag, msg] : x.error_flags) {
    uint32_t v = 0;
    VK_RETURN_IF_ERROR(flag->Read(0, &v, sizeof(v)));
    if (v != 0) return MakeErr(STRATA_PROVIDER_RESULT_INVALID_ARGUMENT, msg);
  }
  size_t made = 0;
  for (; made < output_count; ++made) {
    auto* b = new (std::nothrow) strata_device_buffer{outs[made].buf};
    if (!b) break;
    strata_device_tensor& o = outputs[made];
    o.dtype = outs[made].dtype;
    o.rank = static_cast<uint32_t>(outs[made].shape.size());
    for (size_t dd = 0; dd < outs[made].shape.size(); ++dd) o.dims[dd] = outs[made].shape[dd];
    o.buffer = b;
    o.byte_offset = outs[made].offset;
  }
  if (made != output_count) {
    for (size_t k = 0; k < made; ++k) {
      delete outputs[k].buffer;
      outputs[k].buffer = nullptr;
    }
    return MakeErr(STRATA_PROVIDER_RESULT_OUT_OF_MEMORY, "out of host memory");
  }
  return VkErr::Ok();
}

}  // namespace strata_vk
