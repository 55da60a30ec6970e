// Grouped NhwcConv with wide groups (see conv_nhwc_grouped.h): one implicit-GEMM SGEMM per
// group. Group g's weights are a plain conv of G inputs and G outputs (OIHW rows g * G ..
// g * G + G - 1), packed once like the ungrouped SGEMM conv's (K = taps * G in im2col
// order); per run its A is the pointer table of NhwcIm2colPointers over X offset to the
// group's first channel (C stays the pixel stride), so each tap's segment is the group's G
// channels of one input pixel, read in place, and its C is Y's columns g * G .. g * G + G - 1.
// The groups are spread over the session pool, each product on one thread: a group's product
// is small (ResNeXt-50's layer3: 196 x 144 x 16), so splitting it over the pool would cost a
// hand-off per group. XNNPACK, which ran these before, did not get faster at 2 threads than
// at 1 (its pthreadpool beside the session's).
#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "core/constant_release.h"
#include "core/first_error.h"
#include "core/layout_pass.h"
#include "core/threadpool.h"
#include "cpu/conv_kernels.h"
#include "cpu/conv_nhwc_grouped.h"
#include "cpu/nhwc_kernels.h"
#include "cpu/sgemm.h"

namespace strata {
namespace {

// The IndirectA of one group: the run's pointer table (every output pixel's taps, made once
// for all groups by NhwcIm2colPointers in its own layout: per block of kIndirectRows rows,
// [tap][row]) advanced to the group's first channel. A padding tap points into the zeros,
// which hold C floats, so it stays there. With 16 channels per group a tap's segment is
// only 16 k steps of the tile, and making the pointers per group and tile cost about as
// much as the tile's FMAs.
struct GroupRows {
  const float* const* table;
  int64_t taps, offset;
  static void Rows(const void* ctx, int64_t row0, int64_t rows, const float** dst) {
    constexpr int64_t kR = sgemm::kIndirectRows;
    const GroupRows& g = *static_cast<const GroupRows*>(ctx);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = row0 + r;
      const float* const* src = g.table + row / kR * g.taps * kR + row % kR;
      for (int64_t t = 0; t < g.taps; ++t) dst[t * kR + r] = src[t * kR] + g.offset;
    }
  }
};

// The calling thread's pointer table, kept across runs (no allocation per run once grown).
const float** ThreadTable(size_t entries) {
  thread_local std::vector<const float*> table;
  if (table.size() < entries) table.resize(entries);
  return table.data();
}

class NhwcGroupedGemmConvKernel final : public OpKernel, public PacksConstantInputs {
 public:
  const char* ImplName() const override { return "nhwc-grouped-gemm"; }
  std::vector<size_t> PackedConstantInputs() const override { return {1, 2}; }

  NhwcGroupedGemmConvKernel(const KernelInit& init, const Tensor& w, const Tensor* b, const FusedActivation& act,
                            std::vector<sgemm::PackedB> packed)
      : nchw_node_(OriginalNode(init.node, "Conv")),
        w_shape_(w.shape()),
        known_(init, nchw_node_, w_shape_),
        act_(act),
        packed_(std::move(packed)),
        zeros_(static_cast<size_t>(w.dim(0)), 0.0f) {
    if (b) bias_.assign(b->data<float>(), b->data<float>() + w.dim(0));
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    ASSIGN_OR_RETURN(NhwcConvInput xin, CheckNhwcConvInput(node, x, nchw_node_, w_shape_, &known_));
    const SpatialGeometry& g = xin.shapes.geo;
    const int64_t m = w_shape_[0], cg = w_shape_[1], oh = g.out[0], ow = g.out[1];
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {xin.n, oh, ow, m}));
    if (y->num_elements() == 0) return Status::Ok();
    const int64_t rows = xin.n * oh * ow, groups = static_cast<int64_t>(packed_.size());
    const int64_t taps = g.kernel[0] * g.kernel[1];
    constexpr int64_t kR = sgemm::kIndirectRows;
    const int64_t blocks = (rows + kR - 1) / kR;
    const float** table = ThreadTable(static_cast<size_t>(blocks * taps * kR));
    const NhwcIm2col geo{MakeNhwcWindow(x->data<float>(), xin), zeros_.data()};
    for (int64_t bi = 0; bi < blocks; ++bi)
      NhwcIm2colPointers(&geo, bi * kR, std::min(kR, rows - bi * kR), table + bi * taps * kR);
    float* out = y->mutable_data<float>();
    // The SGEMM fails when it cannot get its scratch, or when the run's deadline or a
    // terminate call stops it (checked on the run's thread).
    FirstError failed;
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t gi = begin; gi < end; ++gi) {
        const GroupRows rows_of{table, taps, gi * cg};
        const sgemm::IndirectA ia{GroupRows::Rows, &rows_of, taps, cg};
        const auto ep = NhwcConvEpilogue<sgemm::Epilogue>(bias_.empty() ? nullptr : bias_.data() + gi * cg, act_.min,
                                                          act_.max, act_.kind, nullptr, y, m);
        failed.Set(sgemm::GemmIndirect(rows, ia, packed_[static_cast<size_t>(gi)], out + gi * cg, m, ep, nullptr));
      }
    };
    if (ctx.pool() && ctx.pool()->num_threads() > 1) {
      ctx.pool()->Run(groups, 1, run);
    } else {
      run(0, groups);
    }
    if (Status st = failed.Take(); !st.ok()) return MakeStatus(st.code(), node.Describe(), ": ", st.message());
    return Status::Ok();
  }

 private:
  Node nchw_node_;
  Shape w_shape_;
  StaticConvShapes known_;  // X's checked geometry for its static shape
  FusedActivation act_;
  std::vector<sgemm::PackedB> packed_;  // one per group
  std::vector<float> bias_;
  std::vector<float> zeros_;  // C floats of zeros: the padding taps' segment, for every group's offset
};

}  // namespace

Result<std::unique_ptr<OpKernel>> MakeNhwcGroupedGemmConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                          const FusedActivation& act) {
  const Node& node = init.node;
  const int64_t group = node.GetInt("group", 1), cg = w.dim(1), taps = w.dim(2) * w.dim(3);
  std::vector<sgemm::PackedB> packed;
  packed.reserve(static_cast<size_t>(group));
  const float* wd = w.data<float>();
  for (int64_t gi = 0; gi < group; ++gi) {
    // Group gi's OIHW rows: cg outputs of cg inputs each.
    auto p = sgemm::PackConvWeights(wd + gi * cg * cg * taps, cg, cg, taps, nullptr);
    if (!p.ok()) return MakeStatus(p.status().code(), node.Describe(), ": group ", gi, ": ", p.status().message());
    packed.push_back(std::move(p).value());
  }
  return std::unique_ptr<OpKernel>(std::make_unique<NhwcGroupedGemmConvKernel>(init, w, b, act, std::move(packed)));
}

}  // namespace strata
