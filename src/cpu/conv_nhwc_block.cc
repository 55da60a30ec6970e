// The fused inverted-residual block (see conv_nhwc_block.h). MobileNetV2's expanded
// tensors (112x112x96 floats = 4.8 MB in block 2) do not fit in the 1 MiB L2, so as three
// convs each pass streamed them through L3. Here the output is produced in strips of R
// rows: the expand 1x1 GEMM writes the input rows that strip needs into a strip buffer
// (~L2 size), the depthwise row kernel reads them and writes R rows of its own output,
// and the project 1x1 GEMM (with bias, residual and clamp in its epilogue) turns those
// into the block's output rows. Consecutive strips keep the expanded rows they share
// (the depthwise kernel's vertical overlap) instead of recomputing them. With more
// threads the output rows are split into parts, each with its own buffers, on the pool;
// each part recomputes only the overlap rows above its first strip.
// In bf16 fast-math sessions (precision=bf16 on an AVX512_BF16 CPU) the two 1x1 GEMMs run
// on vdpbf16ps with fp32 accumulation and the weights packed to bf16 once here: the new
// input rows of a strip are rounded to bf16 pairs before the expand GEMM, and each
// depthwise output row is rounded while it is in L1, so the project GEMM reads its A in
// place (conv_nhwc_block_bf16.cc). The depthwise conv and the expanded rows stay fp32. On
// AMX, mid-width blocks do the same with split rows (kMinSplitExpandWidth).
#include "cpu/conv_nhwc_block.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/constant_release.h"
#include "core/inverted_residual_fusion.h"
#include "core/layout_pass.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_block_bf16.h"
#include "cpu/conv_nhwc_depthwise.h"
#include "cpu/sgemm.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

// Bytes of strip buffers (expanded rows + depthwise rows) a part aims for: about a third
// of the L2, leaving room for the input rows, the output rows and the weights.
constexpr int64_t kStripBytes = 320 * 1024;
// Up to this K the 1x1 GEMMs read A through row pointers (whole-K tiles: a K x 32 panel of
// B must stay in L2). mobilenet_v2, 1 thread, CPU ms per run (5 alternating pairs on the
// loaded VM, medians): packed A for both 6.05, pointers for project only 5.53, for both 5.23.
constexpr int64_t kMaxIndirectK = 2560;
// Parts of the output rows run in parallel (one per thread, up to this many).
constexpr int64_t kMaxParts = 16;
// With more than one thread, an image whose whole expanded map and depthwise output take at
// most this many bytes goes through RunPhased instead of parts of rows where the parts would
// expand a quarter more rows than the input has (2 threads: 7x7 maps at stride 1, 9 rows of
// 7; 4 threads: 14x14 at stride 1, 20 of 14). Phases hand the expanded and depthwise rows
// from one core to the other, which parts do not: on a 14x14 map at 2 threads (8 rows of 14
// per part) the phases were slower (bf16 14x96->576->96 0.083 -> 0.092-0.105 ms), on 7x7
// a little faster (7x160->960->320 0.086-0.096 -> 0.081-0.090 ms, 7x160->960->160 level;
// BM_Bf16InvertedResidual, two sittings of 3 alternations of the two builds).
constexpr int64_t kPhasedMaxBytes = 1024 * 1024;
// In bf16 sessions, blocks whose expanded width (the depthwise channels) is below this do not
// round to plain bf16 (on AMX, from kMinSplitExpandWidth, they take split rows instead).
// They are the early blocks of MobileNet-style nets, where any bf16 rounding is amplified
// by all the layers after it: on mobilenet_v2 (random weights, bf16_compare.py)
// bf16 in any single one of blocks 1-7 (widths 32-192) moves the logits 1.1-4.4e-2
// relative, in all 17 blocks 5.0e-2 (rounding only the 1x1 weights, activations fp32: also
// 5.0e-2), in blocks 12-17 (widths 576 and 960) 5.3e-3, in 8-17 (from width 384) 1.1e-2.
constexpr int64_t kMinBf16ExpandWidth = 512;
// On AMX, narrower blocks from this expanded width on run their 1x1 GEMMs on split rows
// (block_bf16::RoundRowsSplit: three bf16 products per fp32 one, ~2^-16 relative), which
// keeps fp32's accuracy (mobilenet_v2 5.7e-3 -> 6.1e-3 relative) and beats its FMAs. Below
// it the GEMMs' K (16-32 expand inputs, 96-144 project inputs) is too short for the tiles'
// fixed cost. mobilenet_v2, bf16, 1 thread, 3 alternating runs of 300, min / p10 ms:
// from width 192 (blocks 5-11) 3.69-3.71 / 3.81-3.84, none 3.76-3.88 / 3.90-3.98, from
// 144 3.75-4.08, from 96 4.09-6.47.
constexpr int64_t kMinSplitExpandWidth = 192;

// One part of the fused conv: the ONNX Conv behind it, rebuilt from the prefixed attributes.
Node PartNode(const Node& fused, const char* prefix, const char* what) {
  Node n;
  n.name = fused.name + "/" + what;
  n.op_type = "Conv";
  n.opset = 1;
  const size_t len = std::strlen(prefix);
  for (const auto& [k, a] : fused.attrs)
    if (k.compare(0, len, prefix) == 0) n.attrs[k.substr(len)] = a;
  n.opset = static_cast<int>(n.GetInt(kOriginalOpsetAttr, 11));
  n.attrs.erase(kOriginalOpsetAttr);
  return n;
}

// A dense row-major A [m, k] (row stride lda) as an indirect A: one pointer per row.
struct DenseRows {
  const float* a;
  int64_t lda;
};
void DenseRowPointers(const void* ctx, int64_t row0, int64_t rows, const float** dst) {
  const DenseRows& d = *static_cast<const DenseRows*>(ctx);
  for (int64_t r = 0; r < rows; ++r) dst[r] = d.a + (row0 + r) * d.lda;
}

// C = A x B + epilogue on the calling thread. Up to kMaxIndirectK, A is read in place
// through row pointers (sgemm::GemmIndirect): no packing of rows the strip has just
// written to L2.
Status RowsGemm(int64_t m, const float* a, int64_t lda, const sgemm::PackedB& b, float* c, int64_t ldc,
                const sgemm::Epilogue& ep) {
  if (b.k() > kMaxIndirectK) return sgemm::Gemm(m, a, lda, b, c, ldc, ep, nullptr);
  const DenseRows d{a, lda};
  return sgemm::GemmIndirect(m, sgemm::IndirectA{DenseRowPointers, &d, 1, b.k()}, b, c, ldc, ep, nullptr);
}

// kBf16: the 1x1 GEMMs on bf16 (the kernel is then one of IsBf16Kernel's).
template <bool kBf16>
class InvertedResidualKernel final : public std::conditional_t<kBf16, bf16_internal::Bf16KernelBase, OpKernel>,
                                     public PacksConstantInputs {
  using PackedW = std::conditional_t<kBf16, PackedBf16B, sgemm::PackedB>;
  using Epilogue = std::conditional_t<kBf16, Bf16Epilogue, sgemm::Epilogue>;

 public:
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2, 3, 4, 5, 6}; }

  // split (kBf16 only): the 1x1 GEMMs on split rows (block_bf16::RoundRowsSplit).
  InvertedResidualKernel(const Node& node, const Tensor* we, const Tensor* be, const Tensor& wd, const Tensor* bd,
                         const Tensor& wp, const Tensor* bp, bool split)
      : expand_(PartNode(node, kExpandPrefix, "expand")),
        dw_node_(PartNode(node, kDepthwisePrefix, "depthwise")),
        project_(PartNode(node, kProjectPrefix, "project")),
        has_expand_(we != nullptr),
        has_residual_(node.inputs.size() > 7 && node.inputs[7] >= 0),
        split_(kBf16 && split),
        cin_(we ? we->dim(1) : wd.dim(0)),
        ce_(wd.dim(0)),
        cout_(wp.dim(0)),
        wd_shape_(wd.shape()),
        dw_(dw::PackWeights(wd, bd)) {
    if (be) be_.assign(be->data<float>(), be->data<float>() + ce_);
    if (bp) bp_.assign(bp->data<float>(), bp->data<float>() + cout_);
  }

  Status Init(const KernelInit& init, const Tensor* we, const Tensor& wp) {
    known_dw_ = StaticConvShapes(init, dw_node_, wd_shape_, ce_);
    const Node* parts[] = {&expand_, &dw_node_, &project_};
    FusedActivation* acts[] = {&act_e_, &act_d_, &act_p_};
    for (int i = 0; i < 3; ++i) {
      ASSIGN_OR_RETURN(*acts[i], ParseFusedActivation(*parts[i]));
    }
    if (we) {
      ASSIGN_OR_RETURN(we_, Pack(*we, ce_, cin_));
    }
    ASSIGN_OR_RETURN(wp_, Pack(wp, cout_, ce_));
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat || x->rank() != 4)
      return InvalidArgument(node.Describe(), ": input X must be a float32 NHWC tensor of rank 4, got ",
                             x ? DataTypeName(x->dtype()) : "nothing", " ", x ? ShapeToString(x->shape()) : "");
    const int64_t n = x->dim(0), h = x->dim(1), w = x->dim(2);
    if (x->dim(3) != cin_)
      return InvalidArgument(node.Describe(), ": X ", ShapeToString(x->shape()), " (NHWC) has ", x->dim(3),
                             " channels, the block's first conv expects ", cin_);
    // The depthwise conv's geometry (pads, auto_pad, strides) as the Conv would compute it.
    // The static shape's geometry, made at creation, saves the attribute lookups per run.
    const ConvShapes* known = known_dw_.For(n, ce_, h, w);
    auto ds = known ? Result<ConvShapes>(*known) : CheckConvShapes(dw_node_, {n, ce_, h, w}, wd_shape_, nullptr);
    if (!ds.ok()) return MakeStatus(ds.status().code(), node.Describe(), ": ", ds.status().message());
    const SpatialGeometry& g = ds->geo;
    const int64_t oh = g.out[0], ow = g.out[1];
    const Shape out_shape = {n, oh, ow, cout_};
    const Tensor* res = nullptr;
    if (has_residual_) {
      res = ctx.input(7);
      if (!res || res->dtype() != DataType::kFloat || res->shape() != out_shape)
        return InvalidArgument(node.Describe(), ": the fused residual must be float32 ", ShapeToString(out_shape),
                               " (the block output), got ", res ? DataTypeName(res->dtype()) : "nothing", " ",
                               res ? ShapeToString(res->shape()) : "");
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape));
    if (y->num_elements() == 0) return Status::Ok();

    Plan p;
    p.x = x->data<float>();
    p.res = res ? res->data<float>() : nullptr;
    p.y = y->mutable_data<float>();
    p.h = h, p.w = w, p.oh = oh, p.ow = ow;
    p.sh = g.strides[0], p.dh = g.dilations[0], p.pt = g.pad_begin[0];
    p.rg = dw::RowGeometry{w, ow, g.strides[1], g.dilations[1], g.pad_begin[1], act_d_.min, act_d_.max};
    const int64_t span = (dw_.kh - 1) * p.dh + 1;  // input rows one output row reads
    // Words (floats or bf16 pairs) per pixel row: an expanded row, its bf16 input row, a
    // depthwise output row.
    const int64_t exp_px = has_expand_ ? ce_ + (kBf16 ? Pairs(cin_) : 0) : 0;
    const int64_t dw_px = kBf16 ? Pairs(ce_) : ce_;
    const int64_t row_bytes = (p.sh * w * exp_px + ow * dw_px) * static_cast<int64_t>(sizeof(float));
    p.strip = std::clamp<int64_t>(kStripBytes / std::max<int64_t>(1, row_bytes), 1, oh);
    p.exp_rows = has_expand_ ? std::min(h, (p.strip - 1) * p.sh + span) : 0;
    // bf16 adds two fp32 depthwise rows, rounded into the strip's pair rows.
    const int64_t part_floats = p.exp_rows * w * exp_px + p.strip * ow * dw_px + (kBf16 ? 2 * ow * ce_ : 0);
    const int64_t total = n * oh;
    const int threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
    // One part per thread: each part recomputes the expanded rows above its first strip (at
    // stride 1, two rows), so more parts cost more. mobilenet_v2, 2 threads, loaded VM,
    // 5 alternating runs of 300: min 2.59-2.71 ms (p10 6.5-12) with one part per thread,
    // 2.9-3.1 (p10 10.9-13.5) with two, 2.96-3.2 with two and whole-image blocks split
    // per phase over the pool instead. A late worker's part is taken by the caller.
    const int64_t parts = threads > 1 ? std::min<int64_t>({total, threads, kMaxParts}) : 1;
    if (parts > 1 && has_expand_ && ImageBytes(p) <= kPhasedMaxBytes &&
        4 * SplitExpandedRows(p, n, parts) >= 5 * n * p.h)
      return RunPhased(ctx, p, n, parts);
    ASSIGN_OR_RETURN(Tensor scratch, AllocateScratch(parts * part_floats, ctx.allocator(), node));
    float* buf = scratch.mutable_data<float>();
    Status status[kMaxParts];  // on the stack: a steady-state run allocates nothing
    auto run = [&](int64_t b, int64_t e) {
      // A chunk uses the buffers of its first part: concurrent chunks never share one.
      for (int64_t q = b; q < e; ++q)
        status[q] = RunRows(p, total * q / parts, total * (q + 1) / parts, buf + b * part_floats);
    };
    if (parts > 1) {
      ctx.pool()->Run(parts, 1, run);
    } else {
      run(0, 1);
    }
    for (int64_t q = 0; q < parts; ++q)
      if (const Status& st = status[q]; !st.ok()) return MakeStatus(st.code(), node.Describe(), ": ", st.message());
    return Status::Ok();
  }

 private:
  struct Plan {
    const float* x;
    const float* res;
    float* y;
    int64_t h, w, oh, ow, sh, dh, pt;
    dw::RowGeometry rg;
    int64_t strip, exp_rows;  // output rows per strip; expanded rows the buffer holds
  };

  // Words of the phased path's buffers for one image: the expanded map (with kBf16 its input
  // rounded to pairs as well) and the depthwise output; then per thread two fp32 depthwise
  // rows (kBf16).
  int64_t ExpandWords(const Plan& p) const { return has_expand_ ? p.h * p.w * (ce_ + (kBf16 ? Pairs(cin_) : 0)) : 0; }
  int64_t DwWords(const Plan& p) const { return p.oh * p.ow * (kBf16 ? Pairs(ce_) : ce_); }
  int64_t ImageBytes(const Plan& p) const {
    return (ExpandWords(p) + DwWords(p)) * static_cast<int64_t>(sizeof(float));
  }

  // The input rows [lo, hi) that output rows [oy0, oy1) of one image read.
  std::pair<int64_t, int64_t> InputRows(const Plan& p, int64_t oy0, int64_t oy1) const {
    const int64_t lo = std::clamp<int64_t>(oy0 * p.sh - p.pt, 0, p.h);
    return {lo, std::max(lo, std::clamp<int64_t>((oy1 - 1) * p.sh - p.pt + (dw_.kh - 1) * p.dh + 1, 0, p.h))};
  }

  // Expanded rows the parts of RunRows would compute in all (each part recomputes the ones
  // above its first strip that the previous part also needs).
  int64_t SplitExpandedRows(const Plan& p, int64_t n, int64_t parts) const {
    const int64_t total = n * p.oh;
    int64_t rows = 0;
    for (int64_t q = 0; q < parts; ++q)
      for (int64_t r = total * q / parts, r1 = total * (q + 1) / parts; r < r1;) {
        const int64_t oy0 = r % p.oh, oy1 = std::min(p.oh, oy0 + (r1 - r));
        const auto [lo, hi] = InputRows(p, oy0, oy1);
        rows += hi - lo;
        r += oy1 - oy0;
      }
    return rows;
  }

  Epilogue ExpandEpilogue() const {
    Epilogue ep;
    ep.bias = be_.empty() ? nullptr : be_.data();
    ep.min = act_e_.min, ep.max = act_e_.max;
    return ep;
  }
  Epilogue ProjectEpilogue() const {
    Epilogue ep;
    ep.bias = bp_.empty() ? nullptr : bp_.data();
    ep.min = act_p_.min, ep.max = act_p_.max;
    return ep;
  }

  // A small map (14x14, 7x7) split by rows into parts gives each part little work and a
  // large share of recomputed overlap rows (7 rows on two threads: 3 and 4, the second part
  // expanding 5 input rows of 7), so the whole image goes through three phases instead, each
  // split evenly over the pool: the expand GEMM over the input pixels, the depthwise rows,
  // the project GEMM over the output pixels. Nothing is computed twice. Every pixel's sums
  // run as in RunRows, so the results are the same.
  Status RunPhased(KernelContext& ctx, const Plan& p, int64_t n, int64_t parts) const {
    const Node& node = ctx.node();
    const int64_t hw = p.h * p.w, ohw = p.oh * p.ow, ldp_in = Pairs(cin_), ldw = kBf16 ? Pairs(ce_) : ce_;
    const int64_t tmp_floats = kBf16 ? 2 * p.ow * ce_ : 0;
    ASSIGN_OR_RETURN(Tensor scratch,
                     AllocateScratch(ExpandWords(p) + DwWords(p) + parts * tmp_floats, ctx.allocator(), node));
    float* exp_buf = scratch.mutable_data<float>();
    uint32_t* x16 = reinterpret_cast<uint32_t*>(exp_buf + (has_expand_ ? hw * ce_ : 0));
    float* dw_buf = exp_buf + ExpandWords(p);
    float* row_tmp = dw_buf + DwWords(p);
    Plan whole = p;
    whole.exp_rows = p.h;  // expanded row iy in slot iy: the whole map
    const Epilogue ep_e = ExpandEpilogue();
    Status status[kMaxParts];  // on the stack: a steady-state run allocates nothing
    // Runs f(q, begin, end) for part q of `count` items on the pool.
    const auto phase = [&](int64_t count, const auto& f) {
      ctx.pool()->Run(parts, 1, [&](int64_t b, int64_t e) {
        for (int64_t q = b; q < e; ++q)
          if (status[q].ok()) status[q] = f(q, count * q / parts, count * (q + 1) / parts);
      });
    };
    for (int64_t b = 0; b < n; ++b) {
      const float* xb = p.x + b * hw * cin_;
      if (has_expand_) {
        phase(hw, [&](int64_t, int64_t r0, int64_t r1) -> Status {
          if (r0 == r1) return Status::Ok();
          if constexpr (kBf16) {
            Round(xb + r0 * cin_, cin_, r1 - r0, cin_, x16 + r0 * ldp_in, ldp_in);
            return Gemm(r1 - r0, x16 + r0 * ldp_in, ldp_in, we_, exp_buf + r0 * ce_, ce_, ep_e);
          } else {
            return Gemm(r1 - r0, xb + r0 * cin_, cin_, we_, exp_buf + r0 * ce_, ce_, ep_e);
          }
        });
      }
      phase(p.oh, [&](int64_t q, int64_t a, int64_t e) -> Status {
        DwRows(whole, exp_buf, xb, 0, a, e, dw_buf, row_tmp + q * tmp_floats);
        return Status::Ok();
      });
      const int64_t out_off = b * ohw * cout_;
      phase(ohw, [&](int64_t, int64_t r0, int64_t r1) -> Status {
        if (r0 == r1) return Status::Ok();
        Epilogue ep_p = ProjectEpilogue();
        if (p.res) {
          ep_p.residual = p.res + out_off + r0 * cout_;
          ep_p.ldr = cout_;
        }
        const float* a = dw_buf + r0 * ldw;  // pair rows (kBf16) are ldw words apart as well
        return Gemm(r1 - r0, a, ldw, wp_, p.y + out_off + r0 * cout_, cout_, ep_p);
      });
    }
    for (int64_t q = 0; q < parts; ++q)
      if (const Status& st = status[q]; !st.ok()) return MakeStatus(st.code(), node.Describe(), ": ", st.message());
    return Status::Ok();
  }

  // Row stride in words of k floats as pair rows (kBf16).
  int64_t Pairs(int64_t k) const {
    return block_bf16::RowWords(split_ ? block_bf16::SplitPairsPerRow(k) : block_bf16::PairsPerRow(k));
  }
  // `rows` rows of k floats (stride lda) as pair rows ldp words apart (kBf16).
  void Round(const float* a, int64_t lda, int64_t rows, int64_t k, uint32_t* dst, int64_t ldp) const {
    if (split_) {
      block_bf16::RoundRowsSplit(a, lda, rows, k, dst, ldp);
    } else {
      block_bf16::RoundRows(a, lda, rows, k, dst, ldp);
    }
  }

  // A 1x1 weight [m, c, 1, 1] as the GEMM's B (K = c, N = m).
  Result<PackedW> Pack(const Tensor& wt, int64_t m, int64_t c) const {
    if constexpr (kBf16) {
      if (split_) return block_bf16::PackSplitWeights(sgemm::WeightRows::Of(wt), m, c);
      return PackBf16(sgemm::WeightRows::Of(wt), c, m, /*trans=*/true);
    } else {
      return sgemm::PackConvWeights(sgemm::WeightRows::Of(wt), m, c, 1);
    }
  }

  // C[m, N] = A x B + ep, A being m rows of K = b's K (fp32 rows lda floats apart, or with
  // kBf16 pair rows lda words apart).
  static Status Gemm(int64_t m, const void* a, int64_t lda, const PackedW& b, float* c, int64_t ldc,
                     const Epilogue& ep) {
    if constexpr (kBf16) {
      block_bf16::PairRowsGemm(m, static_cast<const uint32_t*>(a), lda, b, c, ldc, ep);
      return Status::Ok();
    } else {
      return RowsGemm(m, static_cast<const float*>(a), lda, b, c, ldc, ep);
    }
  }

  // Depthwise output rows [a, e) of image b into dw_buf (row oy at oy - oy0; with kBf16 as
  // pair rows, computed into the fp32 row_tmp, two rows long, first); expanded row iy is in
  // exp_buf's slot iy % exp_rows (or, without expand, read from xb). At vertical stride and
  // dilation 1 two output rows at a time: they share KH - 1 of their input rows.
  void DwRows(const Plan& p, const float* exp_buf, const float* xb, int64_t oy0, int64_t a, int64_t e, void* dw_buf,
              float* row_tmp) const {
    const int64_t kh = dw_.kh, erow = p.w * ce_;
    const float* rows_small[17];
    std::vector<const float*> rows_big(kh > 16 ? kh + 1 : 0);
    const float** rows = kh > 16 ? rows_big.data() : rows_small;
    const bool pairs = p.sh == 1 && p.dh == 1;
    for (int64_t oy = a; oy < e;) {
      const int64_t n = pairs && oy + 1 < e ? 2 : 1;
      const int64_t iy0 = oy * p.sh - p.pt;
      for (int64_t ky = 0; ky < kh + n - 1; ++ky) {
        const int64_t iy = iy0 + ky * p.dh;
        rows[ky] = iy < 0 || iy >= p.h ? nullptr
                   : has_expand_       ? exp_buf + iy % p.exp_rows * erow
                                       : xb + iy * p.w * cin_;
      }
      float* y = kBf16 ? row_tmp : static_cast<float*>(dw_buf) + (oy - oy0) * p.ow * ce_;
      if (n == 2) {
        dw::ConvRowPair(dw_, p.rg, rows, y, y + p.ow * ce_);
      } else {
        dw::ConvRow(dw_, p.rg, rows, y);
      }
      if constexpr (kBf16) {
        const int64_t ldp = Pairs(ce_);
        Round(row_tmp, ce_, n * p.ow, ce_, static_cast<uint32_t*>(dw_buf) + (oy - oy0) * p.ow * ldp, ldp);
      }
      oy += n;
    }
  }

  // Output rows [r0, r1) of the flattened [N * OH] rows; buf holds exp_rows expanded rows,
  // then `strip` depthwise output rows; with kBf16 then exp_rows bf16 input rows and two
  // fp32 depthwise rows.
  Status RunRows(const Plan& p, int64_t r0, int64_t r1, float* buf) const {
    const int64_t w = p.w, ce = ce_, erow = w * ce;
    const int64_t ldp_in = Pairs(cin_), ldp_dw = Pairs(ce);
    float* exp_buf = buf;
    float* dw_buf = buf + p.exp_rows * erow;
    float* after_dw = dw_buf + p.strip * p.ow * (kBf16 ? ldp_dw : ce);
    uint32_t* x16 = reinterpret_cast<uint32_t*>(after_dw);  // kBf16: the new input rows as pairs
    float* row_tmp = after_dw + (has_expand_ ? p.exp_rows * w * ldp_in : 0);
    const Epilogue ep_e = ExpandEpilogue();
    Epilogue ep_p = ProjectEpilogue();
    // Expanded row iy of image held_b sits in slot iy % exp_rows of exp_buf (a ring: a window
    // of rows is never longer than exp_rows), so the rows a strip shares with the previous
    // one stay where they are; moving them to the front of the buffer was 3.5% of a
    // 56x56x144 block.
    int64_t held_b = -1, held_lo = 0, held_hi = 0;  // expanded rows [held_lo, held_hi) of image held_b
    for (int64_t row = r0; row < r1;) {
      const int64_t b = row / p.oh, oy0 = row - b * p.oh;
      const int64_t oy1 = std::min({p.oh, oy0 + p.strip, oy0 + (r1 - row)});
      const auto [lo, hi] = InputRows(p, oy0, oy1);
      const float* xb = p.x + b * p.h * w * cin_;
      if (has_expand_) {
        const int64_t start = held_b == b && lo >= held_lo && lo < held_hi ? std::min(hi, held_hi) : lo;
        // The new rows in at most two runs of slots (the ring wraps once).
        for (int64_t r = start; r < hi;) {
          const int64_t run = std::min(hi - r, p.exp_rows - r % p.exp_rows);
          const float* xs = xb + r * w * cin_;
          float* dst = exp_buf + r % p.exp_rows * erow;
          if constexpr (kBf16) {
            Round(xs, cin_, run * w, cin_, x16, ldp_in);
            RETURN_IF_ERROR(Gemm(run * w, x16, ldp_in, we_, dst, ce, ep_e));
          } else {
            RETURN_IF_ERROR(Gemm(run * w, xs, cin_, we_, dst, ce, ep_e));
          }
          r += run;
        }
        held_b = b, held_lo = lo, held_hi = hi;
      }
      DwRows(p, exp_buf, xb, oy0, oy0, oy1, dw_buf, row_tmp);
      const int64_t out_off = (b * p.oh + oy0) * p.ow * cout_;
      if (p.res) {
        ep_p.residual = p.res + out_off;
        ep_p.ldr = cout_;
      }
      RETURN_IF_ERROR(Gemm((oy1 - oy0) * p.ow, dw_buf, kBf16 ? ldp_dw : ce, wp_, p.y + out_off, cout_, ep_p));
      row += oy1 - oy0;
    }
    return Status::Ok();
  }

  Node expand_, dw_node_, project_;  // the ONNX Convs, for geometry and activations
  bool has_expand_, has_residual_;
  bool split_;
  int64_t cin_, ce_, cout_;
  Shape wd_shape_;
  StaticConvShapes known_dw_;  // the depthwise conv's geometry for X's static shape
  dw::Weights dw_;
  PackedW we_, wp_;
  std::vector<float> be_, bp_;
  FusedActivation act_e_, act_d_, act_p_;
};

// A constant float32 tensor of rank 4 with the given dims (-1: any), or nullptr.
const Tensor* ConstWeight(const KernelInit& init, size_t i, std::initializer_list<int64_t> dims) {
  const Tensor* t = init.constant_input(i);
  if (!t || t->dtype() != DataType::kFloat || t->rank() != 4 || t->num_elements() == 0) return nullptr;
  size_t k = 0;
  for (int64_t d : dims) {
    if (d >= 0 && t->dim(k) != d) return nullptr;
    ++k;
  }
  return t;
}

template <bool kBf16>
Result<std::unique_ptr<OpKernel>> Build(const KernelInit& init, const Tensor* we, const Tensor* const* bias,
                                        const Tensor& wd, const Tensor& wp, bool split = false) {
  const Node& node = init.node;
  auto k = std::make_unique<InvertedResidualKernel<kBf16>>(node, we, bias[0], wd, bias[1], wp, bias[2], split);
  Status st = k->Init(init, we, wp);
  if (!st.ok()) return MakeStatus(st.code(), node.Describe(), ": ", st.message());
  return std::unique_ptr<OpKernel>(std::move(k));
}

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeNhwcInvertedResidual(const KernelInit& init) {
  const Node& node = init.node;
  if (!sgemm::Available() || !dw::Available())
    return Unsupported(node.Describe(), ": the fused inverted-residual block needs AVX-512F");
  if (node.inputs.size() < 6 || node.outputs.size() != 1)
    return InvalidModel(node.Describe(), ": needs inputs X, We, Be, Wd, Bd, Wp[, Bp, R] and one output");
  const Tensor* wd = ConstWeight(init, 3, {-1, 1, -1, -1});
  if (!wd) return InvalidModel(node.Describe(), ": the depthwise weight must be a constant float32 [C, 1, KH, KW]");
  const int64_t ce = wd->dim(0);
  const Tensor* we = nullptr;
  if (init.has_input(1)) {
    we = ConstWeight(init, 1, {ce, -1, 1, 1});
    if (!we) return InvalidModel(node.Describe(), ": the expand weight must be a constant float32 [", ce, ", C, 1, 1]");
  } else if (init.has_input(2)) {
    return InvalidModel(node.Describe(), ": an expand bias without an expand weight");
  }
  const Tensor* wp = ConstWeight(init, 5, {-1, ce, 1, 1});
  if (!wp) return InvalidModel(node.Describe(), ": the project weight must be a constant float32 [M, ", ce, ", 1, 1]");
  const Tensor* bias[3] = {nullptr, nullptr, nullptr};
  const size_t bias_in[3] = {2, 4, 6};
  const int64_t bias_len[3] = {ce, ce, wp->dim(0)};
  for (int i = 0; i < 3; ++i) {
    if (!init.has_input(bias_in[i])) continue;
    bias[i] = init.constant_input(bias_in[i]);
    if (!bias[i] || bias[i]->dtype() != DataType::kFloat || bias[i]->rank() != 1 || bias[i]->dim(0) != bias_len[i])
      return InvalidModel(node.Describe(), ": bias input ", bias_in[i], " must be a constant float32 [", bias_len[i],
                          "]");
  }
  // bf16 fast-math sessions run the 1x1 GEMMs of wide blocks on bf16 (the session test is
  // MakeNhwcBf16Conv's); see kMinBf16ExpandWidth for why narrow ones do not, and
  // kMinSplitExpandWidth for the split rows mid-width ones take on AMX.
  if (init.config.bf16_fast_math && !init.config.prefer_reference && Bf16GemmAvailable()) {
    if (ce >= kMinBf16ExpandWidth) return Build<true>(init, we, bias, *wd, *wp);
    if (ce >= kMinSplitExpandWidth && bf16_internal::AmxAvailable() && Bf16SplitRowsEnabled())
      return Build<true>(init, we, bias, *wd, *wp, /*split=*/true);
  }
  return Build<false>(init, we, bias, *wd, *wp);
}

}  // namespace strata
