// com.microsoft FusedMatMul (ONNX Runtime's MatMul with folded transposes and scale, which
// its graph optimizer writes into saved optimized models): Y = alpha * matmul(A', B') with
// numpy batch broadcasting, where X' is X with its transposes applied:
//   transX                 swaps the last two dims;
//   transBatchX            moves dim 0 to the row slot: perm [1, ..., r-2, 0, r-1];
//   transX and transBatchX perm [1, ..., r-2, r-1, 0].
// Rank-1 operands ignore transA/transB; transBatch needs A and B of one rank >= 3 (as in
// ONNX Runtime).
//
// A' is made contiguous when a flag moves its dims; B' too, except a plain transB, which the
// SGEMM reads in place. Two kernels: the reference (plain loops) and, with AVX-512, the
// SGEMM one (distinct from strata.internal FusedMatMul, the transformer fusion's op).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "core/status.h"
#include "cpu/attention_core.h"
#include "cpu/gemm_kernels.h"
#include "cpu/sgemm.h"
#include "cpu/transformer_kernels.h"

namespace strata {
namespace {

struct Flags {
  bool trans = false, trans_batch = false;
};

// The permutation of a rank-r operand for its flags (identity when nothing moves).
std::vector<size_t> Perm(size_t r, Flags f) {
  std::vector<size_t> p(r);
  std::iota(p.begin(), p.end(), 0);
  if (r < 2) return p;
  if (f.trans_batch) {
    std::vector<size_t> q;
    for (size_t i = 1; i + 1 < r; ++i) q.push_back(i);
    if (f.trans) {
      q.push_back(r - 1);
      q.push_back(0);
    } else {
      q.push_back(0);
      q.push_back(r - 1);
    }
    return q;
  }
  if (f.trans) std::swap(p[r - 2], p[r - 1]);
  return p;
}

bool IsIdentity(const std::vector<size_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != i) return false;
  return true;
}

// dst = src permuted by perm (dst dim i is src dim perm[i]), contiguous.
void Permute(const float* src, const Shape& shape, const std::vector<size_t>& perm, float* dst) {
  const size_t r = shape.size();
  Shape src_strides(r, 1), out_shape(r), strides(r);
  for (size_t i = r - 1; i-- > 0;) src_strides[i] = src_strides[i + 1] * shape[i + 1];
  for (size_t i = 0; i < r; ++i) {
    out_shape[i] = shape[perm[i]];
    strides[i] = src_strides[perm[i]];
  }
  const int64_t n = NumElements(shape);
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t e = 0; e < n; ++e) {
    dst[e] = src[off];
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out_shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (out_shape[d] - 1);
      idx[d] = 0;
    }
  }
}

Shape Permuted(const Shape& s, const std::vector<size_t>& perm) {
  Shape out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[perm[i]];
  return out;
}

class MsFusedMatMulKernel final : public OpKernel {
 public:
  MsFusedMatMulKernel(float alpha, Flags a, Flags b, bool reference)
      : alpha_(alpha), fa_(a), fb_(b), reference_(reference) {}
  const char* ImplName() const override { return reference_ ? "ref" : "avx512"; }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    if (!a || !b) return InvalidArgument(node.Describe(), ": FusedMatMul needs inputs A and B");
    for (const auto& [t, name] : {std::pair{a, "A"}, std::pair{b, "B"}})
      if (t->dtype() != DataType::kFloat)
        return InvalidArgument(node.Describe(), ": input ", name, " must be float32, got ", DataTypeName(t->dtype()));
    if ((fa_.trans_batch || fb_.trans_batch) && (a->rank() != b->rank() || a->rank() < 3))
      return InvalidArgument(node.Describe(), ": transBatchA/transBatchB need A and B of the same rank >= 3, got A ",
                             ShapeToString(a->shape()), " and B ", ShapeToString(b->shape()));
    const std::vector<size_t> pa = Perm(a->rank(), fa_), pb = Perm(b->rank(), fb_);
    // A plain transB (no batch move) is read in place by the SGEMM as B^T.
    const bool b_in_place_t = !reference_ && b->rank() >= 2 && fb_.trans && !fb_.trans_batch;
    const std::vector<size_t> pb_copy = b_in_place_t ? Perm(b->rank(), Flags{}) : pb;
    const Shape sa = Permuted(a->shape(), pa), sb = Permuted(b->shape(), pb);
    ASSIGN_OR_RETURN(MatMulDims d, ComputeMatMulDims(sa, sb, node));
    ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, d.out));
    float* yp = y->mutable_data<float>();
    const int64_t M = d.M, N = d.N, K = d.K;
    if (d.batch * M * N == 0) return Status::Ok();
    std::vector<float> abuf, bbuf;
    const float* ap = a->data<float>();
    const float* bp = b->data<float>();
    if (!IsIdentity(pa)) {
      abuf.resize(static_cast<size_t>(a->num_elements()));
      Permute(ap, a->shape(), pa, abuf.data());
      ap = abuf.data();
    }
    if (!IsIdentity(pb_copy)) {
      bbuf.resize(static_cast<size_t>(b->num_elements()));
      Permute(bp, b->shape(), pb_copy, bbuf.data());
      bp = bbuf.data();
    }
    if (reference_) {
      KernelStop stop(node);
      int64_t pending = 0;
      for (int64_t t = 0; t < d.batch; ++t) {
        const float* am = ap + d.a_index[t] * M * K;
        const float* bm = bp + d.b_index[t] * K * N;
        for (int64_t i = 0; i < M; ++i) {
          if (!stop.Continue(pending, K * N)) return stop.status();
          for (int64_t j = 0; j < N; ++j) {
            float acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += am[i * K + k] * bm[k * N + j];
            yp[(t * M + i) * N + j] = alpha_ * acc;
          }
        }
      }
      return stop.status();
    }
    sgemm::Epilogue ep;
    ep.alpha = alpha_;
    for (int64_t t = 0; t < d.batch; ++t) {
      Status st = sgemm::GemmUnpacked(M, N, K, ap + d.a_index[t] * M * K, K, bp + d.b_index[t] * K * N,
                                      b_in_place_t ? K : N, b_in_place_t, yp + t * M * N, N, ep, ctx.pool());
      if (!st.ok()) return Status(st.code(), node.Describe() + ": " + st.message());
    }
    return Status::Ok();
  }

 private:
  float alpha_;
  Flags fa_, fb_;
  bool reference_;
};

Result<std::unique_ptr<OpKernel>> MakeMsFusedMatMul(const KernelInit& init, bool reference) {
  const Node& node = init.node;
  const float alpha = node.GetFloat("alpha", 1.0f);
  if (!std::isfinite(alpha)) return InvalidModel(node.Describe(), ": alpha must be finite, got ", alpha);
  const Flags a{node.GetInt("transA", 0) != 0, node.GetInt("transBatchA", 0) != 0};
  const Flags b{node.GetInt("transB", 0) != 0, node.GetInt("transBatchB", 0) != 0};
  return std::unique_ptr<OpKernel>(
      std::make_unique<MsFusedMatMulKernel>(alpha, a, b, reference || !sgemm::Available()));
}

}  // namespace

void RegisterMsFusedMatMulKernels(KernelRegistry& r) { cpu::RegisterRefAndSgemm(r, "FusedMatMul", MakeMsFusedMatMul); }

}  // namespace strata
