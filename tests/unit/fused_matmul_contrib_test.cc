// com.microsoft FusedMatMul (cpu/fused_matmul_contrib.cc): both kernels against
// alpha * matmul of the operands transposed here by permutations written out per case (not
// derived from the flags as the kernel does), on edge sizes (vectors, one row or column,
// odd sizes, a panel width + 1, empty batches, broadcast batches), with one and two
// threads; bad inputs name the problem. (Against ONNX Runtime: contrib_parity.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/sgemm.h"
#include "kernel_harness.h"

namespace strata {
namespace {

using testing::OpSpec;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::ToDoubles;

// x permuted: result dim i is x's dim perm[i].
std::vector<double> PermuteRef(const std::vector<double>& x, const Shape& s, const std::vector<size_t>& perm,
                               Shape* out) {
  out->clear();
  for (size_t p : perm) out->push_back(s[p]);
  std::vector<double> y(x.size());
  std::vector<int64_t> idx(s.size());
  for (size_t e = 0; e < x.size(); ++e) {
    int64_t rem = static_cast<int64_t>(e);
    for (size_t d = s.size(); d-- > 0;) {
      idx[d] = rem % s[d];
      rem /= s[d];
    }
    int64_t o = 0;
    for (size_t i = 0; i < perm.size(); ++i) o = o * (*out)[i] + idx[perm[i]];
    y[o] = x[e];
  }
  return y;
}

// numpy matmul of rank >= 2 operands with broadcast batch dims, in double.
std::vector<double> MatMulRef(const std::vector<double>& a, Shape sa, const std::vector<double>& b, Shape sb,
                              Shape* out) {
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  while (ba.size() < bb.size()) ba.insert(ba.begin(), 1);
  while (bb.size() < ba.size()) bb.insert(bb.begin(), 1);
  Shape batch(ba.size());
  for (size_t i = 0; i < ba.size(); ++i) batch[i] = ba[i] == 1 ? bb[i] : ba[i];  // 1 broadcasts (also onto 0)
  *out = batch;
  out->push_back(M);
  out->push_back(N);
  const int64_t nb = NumElements(batch);
  std::vector<double> y(static_cast<size_t>(nb * M * N));
  for (int64_t t = 0; t < nb; ++t) {
    int64_t ia = 0, ib = 0, rem = t, sta = 1, stb = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      const int64_t c = rem % batch[d];
      rem /= batch[d];
      ia += (ba[d] == 1 ? 0 : c) * sta;
      ib += (bb[d] == 1 ? 0 : c) * stb;
      sta *= ba[d];
      stb *= bb[d];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += a[(ia * M + i) * K + k] * b[(ib * K + k) * N + j];
        y[(t * M + i) * N + j] = acc;
      }
  }
  return y;
}

struct Case {
  Shape a, b;
  int trans_a, trans_b, batch_a, batch_b;
  std::vector<size_t> perm_a, perm_b;  // what the flags mean for these ranks, written out
  float alpha;
};

TEST(MsFusedMatMul, BothKernelsMatchTransposedMatMul) {
  const std::vector<Case> cases = {
      {{3, 5, 7}, {7, 4}, 0, 0, 0, 0, {0, 1, 2}, {0, 1}, 0.125f},
      {{2, 7, 5}, {2, 4, 7}, 1, 1, 0, 0, {0, 2, 1}, {0, 2, 1}, 2.0f},
      {{2, 1, 5, 33}, {3, 17, 33}, 0, 1, 0, 0, {0, 1, 2, 3}, {0, 2, 1}, 1.0f},
      {{5, 3, 7}, {3, 7, 4}, 0, 0, 1, 0, {1, 0, 2}, {0, 1, 2}, 1.0f},
      {{2, 5, 7}, {7, 2, 4}, 0, 0, 0, 1, {0, 1, 2}, {1, 0, 2}, 1.0f},
      {{7, 2, 3, 5}, {2, 3, 4, 7}, 1, 1, 1, 0, {1, 2, 3, 0}, {0, 1, 3, 2}, 0.5f},
      {{2, 3, 5, 7}, {4, 2, 3, 7}, 0, 1, 0, 1, {0, 1, 2, 3}, {1, 2, 3, 0}, 1.0f},
      {{6, 2, 9}, {9, 2, 3}, 0, 0, 1, 1, {1, 0, 2}, {1, 0, 2}, -1.5f},
      {{1, 1, 1}, {1, 1, 1}, 1, 1, 0, 0, {0, 2, 1}, {0, 2, 1}, 3.0f},
      {{1, 40, 1}, {40, 33}, 1, 0, 0, 0, {0, 2, 1}, {0, 1}, 1.0f},
      {{0, 4, 6}, {6, 5}, 0, 0, 0, 0, {0, 1, 2}, {0, 1}, 1.0f},
      {{2, 4, 0}, {2, 0, 5}, 0, 0, 0, 0, {0, 1, 2}, {0, 1, 2}, 1.0f},
  };
  uint64_t seed = 800;
  for (const Case& c : cases) {
    seed += 3;
    const Tensor a = RandomTensor(DataType::kFloat, c.a, seed);
    const Tensor b = RandomTensor(DataType::kFloat, c.b, seed + 1);
    Shape pa, pb, out;
    const auto ad = PermuteRef(ToDoubles(a), c.a, c.perm_a, &pa);
    const auto bd = PermuteRef(ToDoubles(b), c.b, c.perm_b, &pb);
    std::vector<double> want = MatMulRef(ad, pa, bd, pb, &out);
    for (double& v : want) v *= c.alpha;
    for (bool reference : {true, false})
      for (int threads : {1, 2}) {
        if (!reference && !sgemm::Available()) continue;
        SCOPED_TRACE(ShapeToString(c.a) + " x " + ShapeToString(c.b) + (reference ? " reference" : " sgemm") +
                     " threads " + std::to_string(threads));
        RunOptions opts;
        opts.want_reference = reference;
        opts.threads = threads;
        auto got = RunKernel(OpSpec("FusedMatMul", 1, "com.microsoft")
                                 .Attr("alpha", c.alpha)
                                 .Attr("transA", c.trans_a)
                                 .Attr("transB", c.trans_b)
                                 .Attr("transBatchA", c.batch_a)
                                 .Attr("transBatchB", c.batch_b),
                             {a, b}, opts);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ((*got)[0].shape(), out);
        const auto y = ToDoubles((*got)[0]);
        ASSERT_EQ(y.size(), want.size());
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
      }
  }
  // A rank-1 A ignores transA: [9] x [2, 9, 4] -> [2, 4].
  auto got = RunKernel(OpSpec("FusedMatMul", 1, "com.microsoft").Attr("transA", 1),
                       {RandomTensor(DataType::kFloat, {9}, 1), RandomTensor(DataType::kFloat, {2, 9, 4}, 2)});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].shape(), (Shape{2, 4}));
}

TEST(MsFusedMatMul, BadInputsNameTheProblem) {
  auto expect_error = [](const Result<std::vector<Tensor>>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
  };
  const OpSpec fm("FusedMatMul", 1, "com.microsoft");
  const Tensor a = RandomTensor(DataType::kFloat, {2, 3, 4}, 1);
  expect_error(RunKernel(fm, {a, RandomTensor(DataType::kFloat, {5, 6}, 2)}), "[2,3,4]");
  expect_error(RunKernel(fm, {a, RandomTensor(DataType::kInt32, {4, 6}, 2)}), "input B must be float32");
  expect_error(RunKernel(OpSpec(fm).Attr("transBatchA", 1), {a, RandomTensor(DataType::kFloat, {4, 6}, 2)}),
               "transBatchA/transBatchB need A and B of the same rank >= 3");
  expect_error(RunKernel(OpSpec(fm).Attr("transBatchB", 1),
                         {RandomTensor(DataType::kFloat, {3, 4}, 1), RandomTensor(DataType::kFloat, {4, 6}, 2)}),
               "same rank >= 3");
  expect_error(RunKernel(OpSpec(fm).Attr("alpha", std::nanf("")), {a, RandomTensor(DataType::kFloat, {4, 6}, 2)}),
               "alpha must be finite");
}

}  // namespace
}  // namespace strata
