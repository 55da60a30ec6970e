// strata.internal MaskedSoftmax(X, mask?) with attributes scale (float) and divide (int):
//   Y = Softmax(X / scale + mask)  (divide = 1)   or   Softmax(X * scale + mask)  (divide = 0)
// over the last axis, the mask broadcast onto X (it may not enlarge it). Emitted by
// core/transformer_fusion.cc for attention's scale -> Add(mask) -> Softmax chain: one pass
// over the score tensor instead of three, with no intermediate tensors.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "core/kernel.h"
#include "core/layout_pass.h"
#include "cpu/attention_core.h"
#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

// Element strides of a mask broadcast onto X (0 along broadcast dimensions), X's rank.
Result<Shape> MaskStrides(const Node& node, const Shape& x, const Shape& m) {
  if (m.size() > x.size())
    return InvalidArgument(node.Describe(), ": mask ", ShapeToString(m), " has more dimensions than the scores ",
                           ShapeToString(x));
  Shape strides(x.size(), 0);
  int64_t s = 1;
  const size_t off = x.size() - m.size();
  for (size_t k = m.size(); k-- > 0;) {
    if (m[k] != 1 && m[k] != x[off + k])
      return InvalidArgument(node.Describe(), ": mask ", ShapeToString(m), " does not broadcast onto the scores ",
                             ShapeToString(x));
    strides[off + k] = m[k] == 1 ? 0 : s;
    s *= m[k];
  }
  return strides;
}

// One row of scores: y = x / scale (or * scale) + mask row, then softmax in place. m is
// the row's mask (nullptr: none) with column stride mcol (0: one value for the row).
// Division stays a division so the result matches the unfused Div bit for bit.
void ScaleMaskSoftmaxRow(const float* x, const float* m, int64_t mcol, float* y, int64_t n, float scale, bool divide,
                         bool reference) {
  if (divide) {
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] / scale;
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale;
  }
  if (m && mcol == 0) {
    const float v = m[0];
    for (int64_t j = 0; j < n; ++j) y[j] += v;
  } else if (m) {
    for (int64_t j = 0; j < n; ++j) y[j] += m[j];
  }
  if (reference)
    cpu::SoftmaxRowRef(y, n);
  else
    cpu::SoftmaxRowInPlace(y, n);
}

class MaskedSoftmaxKernel final : public OpKernel {
 public:
  MaskedSoftmaxKernel(float scale, bool divide, bool reference) : scale_(scale), divide_(divide), ref_(reference) {}

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    const Tensor* mask = ctx.input(1);
    if (!x) return InvalidArgument(node.Describe(), ": MaskedSoftmax needs input X");
    if (x->dtype() != DataType::kFloat || (mask && mask->dtype() != DataType::kFloat))
      return InvalidArgument(node.Describe(), ": MaskedSoftmax takes float32 X and mask, got ",
                             DataTypeName(x->dtype()), mask ? " and " : "", mask ? DataTypeName(mask->dtype()) : "");
    const Shape& xs = x->shape();
    if (xs.empty()) return InvalidArgument(node.Describe(), ": MaskedSoftmax needs X of rank >= 1");
    Shape mstride;
    if (mask) {
      ASSIGN_OR_RETURN(mstride, MaskStrides(node, xs, mask->shape()));
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, xs));
    const int64_t n = xs.back();
    if (n == 0 || x->num_elements() == 0) return Status::Ok();
    const int64_t rows = x->num_elements() / n;
    const float* xp = x->data<float>();
    const float* mp = mask ? mask->data<float>() : nullptr;
    float* yp = y->mutable_data<float>();
    const int64_t mcol = mask ? mstride.back() : 0;
    const int lead = static_cast<int>(xs.size()) - 1;

    auto run = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = xp + r * n;
        float* yr = yp + r * n;
        // Row r's mask offset: its index over the leading dims, through the mask strides.
        const float* mr = nullptr;
        if (mp) {
          int64_t off = 0, t = r;
          for (int k = lead - 1; k >= 0; --k) {
            off += (t % xs[k]) * mstride[k];
            t /= xs[k];
          }
          mr = mp + off;
        }
        ScaleMaskSoftmaxRow(xr, mr, mcol, yr, n, scale_, divide_, ref_);
      }
    };
    // Rows of ~4K elements or more are worth a task each (as Softmax).
    if (ctx.pool() && ctx.pool()->num_threads() > 1)
      ctx.pool()->ParallelFor(rows, std::max<int64_t>(1, 4096 / n), run);
    else
      run(0, rows);
    return Status::Ok();
  }

 private:
  float scale_;
  bool divide_;
  bool ref_;
};

// Per (batch, head): S = Q_h K_h^T (SGEMM, K read transposed in place), one
// scale+mask+softmax pass over S's rows, O_h = S V_h written straight into the
// [B, Sq, H*D] output. Q/K/V are read in their projection layout [B, S, H*D] (head h at
// column h*D, row stride H*D): the head-split Reshape/Transposes and the merge back are
// gone, and S is one [Sq, Skv] tile per task instead of a [B, H, Sq, Skv] tensor written
// by MatMul, Div, Add and Softmax in turn.
struct AttentionGeometry {
  int64_t batch = 0, heads = 0, head_dim = 0, q_len = 0, kv_len = 0;
};

class AttentionKernel final : public OpKernel {
 public:
  AttentionKernel(AttentionGeometry geo, Shape out_shape, float scale, bool divide, bool reference)
      : geo_(geo), out_shape_(std::move(out_shape)), scale_(scale), divide_(divide), ref_(reference) {}

  // One task scratch (score tile + packed K or V) per thread that can run heads at once,
  // made here: made lazily, on a worker's first head, it would allocate in whichever later
  // run that worker first takes one, and runs are allocation-free after the first.
  // Concurrent runs of one session may need more; those are added once and kept.
  Status MakeScratch(int threads) {
    free_.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i) {
      ASSIGN_OR_RETURN(std::unique_ptr<TaskScratch> t, NewScratch());
      free_.push_back(std::move(t));
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const AttentionGeometry& g = geo_;
    const int64_t hd = g.heads * g.head_dim;
    const char* names[3] = {"Q", "K", "V"};
    const float* qkv[3] = {};
    for (int i = 0; i < 3; ++i) {
      const Tensor* t = ctx.input(i);
      const int64_t want = g.batch * (i == 0 ? g.q_len : g.kv_len) * hd;
      if (!t || t->dtype() != DataType::kFloat || t->num_elements() != want)
        return InvalidArgument(node.Describe(), ": Attention input ", names[i], " must be float32 with ", want,
                               " elements, got ", t ? DataTypeName(t->dtype()) : "nothing", " ",
                               t ? ShapeToString(t->shape()) : "");
      qkv[i] = t->data<float>();
    }
    const Tensor* mask = ctx.input(3);
    Shape ms(4, 0);
    if (mask) {
      if (mask->dtype() != DataType::kFloat)
        return InvalidArgument(node.Describe(), ": Attention mask must be float32, got ", DataTypeName(mask->dtype()));
      ASSIGN_OR_RETURN(ms, MaskStrides(node, {g.batch, g.heads, g.q_len, g.kv_len}, mask->shape()));
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, out_shape_));
    if (y->num_elements() == 0 || g.kv_len == 0) return Status::Ok();
    const float* mp = mask ? mask->data<float>() : nullptr;
    float* yp = y->mutable_data<float>();
    const int64_t tasks = g.batch * g.heads;
    std::atomic<int64_t> failed{tasks};
    auto run = [&](int64_t t0, int64_t t1) {
      Lease scratch(*this);
      for (int64_t t = t0; t < t1; ++t)
        if (!scratch.get() || !Head(t, qkv, mp, ms, yp, scratch.get()).ok()) {
          int64_t cur = failed.load();
          while (t < cur && !failed.compare_exchange_weak(cur, t)) {
          }
        }
    };
    if (ctx.pool() && ctx.pool()->num_threads() > 1)
      ctx.pool()->ParallelFor(tasks, 1, run);
    else
      run(0, tasks);
    // Only the first failing head is remembered; it is re-run alone to report its error.
    const int64_t t = failed.load();
    if (t < tasks) {
      Lease scratch(*this);
      if (!scratch.get())
        return MakeStatus(StatusCode::kOutOfMemory, node.Describe(), ": cannot allocate attention scratch");
      Status st = Head(t, qkv, mp, ms, yp, scratch.get());
      return Status(st.code(), node.Describe() + ": " + st.message());
    }
    return Status::Ok();
  }

 private:
  struct TaskScratch {
    std::unique_ptr<float[]> tile;  // [Sq, Skv] scores
    sgemm::PackedB packed;          // K^T, then V, packed for the two products
  };
  Result<std::unique_ptr<TaskScratch>> NewScratch() const {
    const AttentionGeometry& g = geo_;
    // Never throws: a lease runs on pool workers, where a bad_alloc would end the process.
    int64_t tile = 0;
    if (__builtin_mul_overflow(g.q_len, g.kv_len, &tile) || tile > (int64_t{1} << 40))
      return MakeStatus(StatusCode::kOutOfMemory, "attention score tile of ", g.q_len, "x", g.kv_len,
                        " floats is too large");
    std::unique_ptr<TaskScratch> t(new (std::nothrow) TaskScratch);
    if (t) t->tile.reset(new (std::nothrow) float[static_cast<size_t>(std::max<int64_t>(1, tile))]);
    if (!t || !t->tile)
      return MakeStatus(StatusCode::kOutOfMemory, "cannot allocate an attention score tile of ", g.q_len, "x", g.kv_len,
                        " floats");
    if (!ref_) {
      RETURN_IF_ERROR(t->packed.Reserve(g.head_dim, g.kv_len));  // S = Q K^T: B is [D, Skv]
      RETURN_IF_ERROR(t->packed.Reserve(g.kv_len, g.head_dim));  // O = S V: B is [Skv, D]
    }
    return t;
  }

  // Takes a free task scratch and gives it back when the task ends.
  class Lease {
   public:
    explicit Lease(const AttentionKernel& k) : k_(k) {
      {
        std::lock_guard<std::mutex> lock(k_.free_mu_);
        if (!k_.free_.empty()) {
          t_ = std::move(k_.free_.back());
          k_.free_.pop_back();
        }
      }
      if (!t_) {
        auto made = k_.NewScratch();
        if (made.ok()) t_ = std::move(*made);
      }
    }
    ~Lease() {
      if (!t_) return;
      std::lock_guard<std::mutex> lock(k_.free_mu_);
      k_.free_.push_back(std::move(t_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    TaskScratch* get() const { return t_.get(); }

   private:
    const AttentionKernel& k_;
    std::unique_ptr<TaskScratch> t_;
  };

  Status Head(int64_t t, const float* const* qkv, const float* mp, const Shape& ms, float* yp,
              TaskScratch* scratch) const {
    const AttentionGeometry& g = geo_;
    const int64_t b = t / g.heads, h = t % g.heads, hd = g.heads * g.head_dim, d = g.head_dim;
    const int64_t sq = g.q_len, skv = g.kv_len;
    const float* q = qkv[0] + b * sq * hd + h * d;
    const float* k = qkv[1] + b * skv * hd + h * d;
    const float* v = qkv[2] + b * skv * hd + h * d;
    float* o = yp + b * sq * hd + h * d;
    float* s = scratch->tile.get();
    if (ref_) {
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j) {
          float acc = 0.0f;
          for (int64_t c = 0; c < d; ++c) acc += q[i * hd + c] * k[j * hd + c];
          s[i * skv + j] = acc;
        }
    } else {
      RETURN_IF_ERROR(
          sgemm::GemmUnpacked(sq, skv, d, q, hd, k, hd, true, s, skv, sgemm::Epilogue{}, nullptr, &scratch->packed));
    }
    for (int64_t i = 0; i < sq; ++i) {
      const float* mr = mp ? mp + b * ms[0] + h * ms[1] + i * ms[2] : nullptr;
      ScaleMaskSoftmaxRow(s + i * skv, mr, ms[3], s + i * skv, skv, scale_, divide_, ref_);
    }
    if (!ref_)
      return sgemm::GemmUnpacked(sq, d, skv, s, skv, v, hd, false, o, hd, sgemm::Epilogue{}, nullptr, &scratch->packed);
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t c = 0; c < d; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < skv; ++j) acc += s[i * skv + j] * v[j * hd + c];
        o[i * hd + c] = acc;
      }
    return Status::Ok();
  }

  AttentionGeometry geo_;
  Shape out_shape_;
  float scale_;
  bool divide_;
  bool ref_;
  mutable std::mutex free_mu_;
  // Its capacity covers the scratch made at creation, so giving one back does not allocate.
  mutable std::vector<std::unique_ptr<TaskScratch>> free_;
};

Result<float> ScaleAttr(const Node& node) {
  const Attribute* scale = node.FindAttr("scale");
  if (!scale || scale->type != Attribute::Type::kFloat || !std::isfinite(scale->f) || scale->f == 0.0f)
    return InvalidModel(node.Describe(), ": needs a finite non-zero float attribute 'scale'");
  const int64_t divide = node.GetInt("divide", 0);
  if (divide != 0 && divide != 1) return InvalidModel(node.Describe(), ": attribute 'divide' must be 0 or 1");
  return scale->f;
}

Result<std::unique_ptr<OpKernel>> MakeAttention(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  if (node.inputs.size() < 3 || node.inputs.size() > 4 || node.outputs.size() != 1)
    return InvalidModel(node.Describe(), ": Attention takes inputs (Q, K, V, mask?) and one output");
  ASSIGN_OR_RETURN(float scale, ScaleAttr(node));
  AttentionGeometry g;
  g.batch = node.GetInt("batch", -1);
  g.heads = node.GetInt("num_heads", -1);
  g.head_dim = node.GetInt("head_dim", -1);
  g.q_len = node.GetInt("q_len", -1);
  g.kv_len = node.GetInt("kv_len", -1);
  const std::vector<int64_t> out = node.GetInts("output_shape");
  const Shape out_shape(out.begin(), out.end());
  // Checked products: the attributes come from the file when a model carries this op itself.
  auto q_elems = CheckedNumElements({g.batch, g.q_len, g.heads, g.head_dim}, "Attention Q");
  auto kv_elems = CheckedNumElements({g.batch, g.kv_len, g.heads, g.head_dim}, "Attention K/V");
  auto out_elems = CheckedNumElements(out_shape, "Attention output");
  if (g.batch < 0 || g.heads <= 0 || g.head_dim <= 0 || g.q_len < 0 || g.kv_len < 0 || out.empty() || !q_elems.ok() ||
      !kv_elems.ok() || !out_elems.ok() || *out_elems != *q_elems)
    return InvalidModel(node.Describe(), ": Attention needs non-negative batch/q_len/kv_len, positive num_heads/",
                        "head_dim and an output_shape of batch*q_len*num_heads*head_dim elements");
  // The SGEMM path needs AVX-512; the pass only emits Attention where it has it.
  reference = reference || !sgemm::Available();
  auto k = std::make_unique<AttentionKernel>(g, Shape(out.begin(), out.end()), scale, node.GetInt("divide", 0) == 1,
                                             reference);
  const Status made = k->MakeScratch(init.pool ? std::max(1, init.pool->num_threads()) : 1);
  if (!made.ok()) return Status(made.code(), node.Describe() + ": " + made.message());
  return std::unique_ptr<OpKernel>(std::move(k));
}

Result<std::unique_ptr<OpKernel>> MakeMaskedSoftmax(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  if (node.inputs.empty() || node.inputs.size() > 2 || node.outputs.size() != 1)
    return InvalidModel(node.Describe(), ": MaskedSoftmax takes inputs (X, mask?) and one output");
  ASSIGN_OR_RETURN(float scale, ScaleAttr(node));
  return std::unique_ptr<OpKernel>(
      std::make_unique<MaskedSoftmaxKernel>(scale, node.GetInt("divide", 0) == 1, reference));
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& r) {
  r.Register({.domain = kInternalDomain,
              .op_type = "MaskedSoftmax",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeMaskedSoftmax(init, true); }});
  r.Register({.domain = kInternalDomain,
              .op_type = "MaskedSoftmax",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeMaskedSoftmax(init, false); },
              .reference = false,
              .impl = "simd"});
  r.Register({.domain = kInternalDomain,
              .op_type = "Attention",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeAttention(init, true); }});
  r.Register({.domain = kInternalDomain,
              .op_type = "Attention",
              .since_version = 1,
              .types = {DataType::kFloat},
              .factory = [](const KernelInit& init) { return MakeAttention(init, false); },
              // Without AVX-512 the reference entry runs it (the transformer fusion asks this).
              .covers = [](const KernelInit&) { return sgemm::Available(); },
              .reference = false,
              .impl = "avx512"});
}

}  // namespace strata
