// fp32 pointwise (1x1, stride 1, unpadded, ungrouped) Conv on NCHW without transposes:
// per image Y[M, HW] = W[M, C] * X[C, HW], one OpenBLAS sgemm per column block. The
// XNNPACK path would spend as long transposing as computing for these layers.
#include <cblas.h>

#include <algorithm>

#include "cpu/conv_kernels.h"
#include "cpu/gemm_kernels.h"
#include "cpu/xnnpack_util.h"

namespace strata {
namespace {

class PointwiseConvKernel final : public OpKernel {
 public:
  PointwiseConvKernel(Shape w_shape, const float* w, const float* b, FusedActivation act)
      : w_shape_(std::move(w_shape)), act_(act) {
    m_ = w_shape_[0];
    c_ = w_shape_[1];
    weights_.assign(w, w + m_ * c_);
    if (b) bias_.assign(b, b + m_);
    EnsureBlasSingleThreaded();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    ASSIGN_OR_RETURN(FloatConvIo io, StartFloatConv(ctx, w_shape_));
    if (io.y->num_elements() == 0) return Status::Ok();
    const Tensor* x = io.x;
    Tensor* y = io.y;
    const ConvShapes& s = io.shapes;
    const int64_t hw = s.geo.InSize();
    if (hw > INT32_MAX || c_ > INT32_MAX || m_ > INT32_MAX)
      return Unsupported(node.Describe(), ": dimensions exceed the BLAS int range");
    const int64_t threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
    // Whole images per call unless there are fewer images than threads.
    int64_t splits = s.batch >= threads ? 1 : (2 * threads + s.batch - 1) / s.batch;
    int64_t cols = std::max<int64_t>(std::min<int64_t>(hw, 64), (hw + splits - 1) / splits);
    int64_t blocks = (hw + cols - 1) / cols;
    const float* xp = x->data<float>();
    float* yp = y->mutable_data<float>();
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        int64_t n = item / blocks, c0 = (item % blocks) * cols, nc = std::min(hw, c0 + cols) - c0;
        float* yb = yp + n * m_ * hw + c0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m_), static_cast<int>(nc),
                    static_cast<int>(c_), 1.0f, weights_.data(), static_cast<int>(c_), xp + n * c_ * hw + c0,
                    static_cast<int>(hw), 0.0f, yb, static_cast<int>(hw));
        for (int64_t o = 0; o < m_; ++o) {
          float* row = yb + o * hw;
          if (!bias_.empty())
            for (int64_t j = 0; j < nc; ++j) row[j] += bias_[o];
          ApplyActivation(row, nc, act_);
        }
      }
    };
    int64_t items = s.batch * blocks;
    if (ctx.pool() && threads > 1 && items > 1) {
      ctx.pool()->ParallelFor(items, 1, body);
    } else {
      body(0, items);
    }
    return Status::Ok();
  }

 private:
  Shape w_shape_;
  FusedActivation act_;
  int64_t m_ = 0, c_ = 0;
  std::vector<float> weights_, bias_;
};

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
}

}  // namespace

Result<std::unique_ptr<OpKernel>> MakePointwiseConv(const KernelInit& init, const Tensor& w, const Tensor* b,
                                                    const FusedActivation& act) {
  const Node& node = init.node;
  if (w.rank() < 3 || node.GetInt("group", 1) != 1) return Unsupported("not pointwise");
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (!AllEqual(kernel, 1) || !AllEqual(node.GetInts("strides"), 1) || !AllEqual(node.GetInts("pads"), 0))
    return Unsupported("not pointwise");
  std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return Unsupported("bad auto_pad");
  // Attribute-length errors are left to the shared checks at run time.
  if (node.HasAttr("strides") && node.GetInts("strides").size() != kernel.size()) return Unsupported("bad strides");
  if (node.HasAttr("pads") && node.GetInts("pads").size() != 2 * kernel.size()) return Unsupported("bad pads");
  return std::unique_ptr<OpKernel>(
      std::make_unique<PointwiseConvKernel>(w.shape(), w.data<float>(), b ? b->data<float>() : nullptr, act));
}

}  // namespace strata
