// Small-M GEMV (cpu/gemv.h), the MatMul/Gemm kernels that dispatch to it, the fused
// LSTM path (cpu/rnn_lstm_fused.h) and the thread pool's region protocol: every fast
// path against the reference kernel through the shared harness, at edge sizes (1, odd,
// panel+1, empty) and with 1 and 2 threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "core/threadpool.h"
#include "cpu/gemv.h"
#include "kernel_harness.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::TensorsNear;

// ------------------------------------------------------------------ GEMV kernel

std::vector<float> RandomVec(size_t n, uint64_t seed) {
  Tensor t = RandomTensor(DataType::kFloat, {static_cast<int64_t>(n)}, seed);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

// zero_pct: about this percentage of A's entries are set to 0 (ReLU-like inputs, which the
// one-row kernel skips along with their weight rows).
void CheckGemv(int64_t m, int64_t k, int64_t n, bool nk, bool bias, float lo, float hi, ThreadPool* pool,
               int zero_pct = 0) {
  SCOPED_TRACE(::testing::Message() << "m=" << m << " k=" << k << " n=" << n << " nk=" << nk << " bias=" << bias
                                    << " zero_pct=" << zero_pct);
  const float alpha = 0.75f;
  std::vector<float> a = RandomVec(static_cast<size_t>(m * k), 1), b = RandomVec(static_cast<size_t>(k * n), 2),
                     bv = RandomVec(static_cast<size_t>(n), 3);
  for (size_t i = 0; i < a.size(); ++i)
    if (static_cast<int>((i * 2654435761u >> 7) % 100) < zero_pct) a[i] = 0.0f;
  // The pool also packs: matrices of 2^18 floats and more are split between its threads.
  auto w = GemvWeights::Pack(b.data(), k, n, nk, alpha, bias ? bv.data() : nullptr, pool);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const int64_t ldy = n + 3;  // a row stride wider than N: nothing past N may be written
  std::vector<float> y(static_cast<size_t>(m * ldy), -7.0f);
  Gemv(a.data(), k, m, *w, y.data(), ldy, lo, hi, pool);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? bv[j] : 0.0;
      for (int64_t kk = 0; kk < k; ++kk) acc += a[r * k + kk] * alpha * (nk ? b[j * k + kk] : b[kk * n + j]);
      acc = std::min<double>(hi, std::max<double>(lo, acc));
      ASSERT_NEAR(acc, y[r * ldy + j], 1e-4 * (1 + std::abs(acc))) << "row " << r << " col " << j;
    }
    for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(y[r * ldy + j], -7.0f) << "wrote past N at row " << r;
  }
}

TEST(GemmPerfPaths, GemvMatchesNaiveAtEdgeSizes) {
  const float inf = std::numeric_limits<float>::infinity();
  ThreadPool pool2(2);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2})
    for (int64_t m : {1, 2, 3, 4})
      // K around the k-row unrolls (2, 4, 8), the prefetch distance and a panel-row multiple; N giving last panels of
      // every width (16 for 1, 10 and 65; 32 for 17; 48 for 40 and 100; 64 for 64).
      for (int64_t k : {0, 1, 3, 7, 8, 9, 15, 17, 64, 65})
        for (int64_t n : {1, 10, 17, 40, 64, 65, 100, 130}) {
          CheckGemv(m, k, n, false, true, -inf, inf, pool);
          CheckGemv(m, k, n, true, false, 0.0f, 0.5f, pool);
        }
}

TEST(GemmPerfPaths, GemvSkipsZerosOfOneRowA) {
  const float inf = std::numeric_limits<float>::infinity();
  ThreadPool pool2(2);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2})
    // Around the smallest K that skips (64) and the k-row unrolls; every last-panel width;
    // fewer zeros than skipping needs (10%), about half, and all.
    for (int64_t k : {63, 64, 65, 72, 129, 1024})
      for (int64_t n : {1, 10, 17, 40, 64, 65, 130, 1024})
        for (int zero_pct : {10, 50, 100}) {
          CheckGemv(1, k, n, false, true, -inf, inf, pool, zero_pct);
          CheckGemv(1, k, n, true, false, 0.0f, 0.5f, pool, zero_pct);
        }
}

// 0 * inf is NaN: weights that are not all finite must read every row, as the reference does.
TEST(GemmPerfPaths, GemvZerosTimesNonFiniteWeightsGiveNaN) {
  const int64_t k = 128, n = 20;
  std::vector<float> a = RandomVec(k, 1), b = RandomVec(static_cast<size_t>(k * n), 2);
  for (int64_t i = 0; i < k; i += 2) a[i] = 0.0f;
  auto finite = GemvWeights::Pack(b.data(), k, n, /*b_is_nk=*/false, 1.0f, nullptr);
  ASSERT_TRUE(finite.ok()) << finite.status().ToString();
  EXPECT_TRUE(finite->all_finite());
  b[4 * n + 3] = std::numeric_limits<float>::infinity();   // row 4 (a zero of A), column 3
  b[6 * n + 5] = std::numeric_limits<float>::quiet_NaN();  // row 6 (a zero of A), column 5
  auto w = GemvWeights::Pack(b.data(), k, n, /*b_is_nk=*/false, 1.0f, nullptr);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_FALSE(w->all_finite());
  std::vector<float> y(n, -7.0f);
  const float inf = std::numeric_limits<float>::infinity();
  Gemv(a.data(), k, 1, *w, y.data(), n, -inf, inf, nullptr);
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(std::isnan(y[j]), j == 3 || j == 5) << "column " << j << ": " << y[j];
  // A NaN in A (nonzero) reaches every column through the skipping loop too.
  a[1] = std::numeric_limits<float>::quiet_NaN();
  Gemv(a.data(), k, 1, *finite, y.data(), n, -inf, inf, nullptr);
  for (int64_t j = 0; j < n; ++j) EXPECT_TRUE(std::isnan(y[j])) << "column " << j;
}

// Packed by two threads, a non-finite weight in either thread's panels is seen.
TEST(GemmPerfPaths, GemvPackedInParallelChecksEveryPanel) {
  ThreadPool pool(2);
  const int64_t k = 1024, n = 520;  // 532,480 floats: split; the last panel is 8 columns wide
  std::vector<float> b = RandomVec(static_cast<size_t>(k * n), 4);
  for (bool nk : {false, true}) {
    auto finite = GemvWeights::Pack(b.data(), k, n, nk, 1.0f, nullptr, &pool);
    ASSERT_TRUE(finite.ok());
    EXPECT_TRUE(finite->all_finite());
    for (size_t at : {size_t{0}, b.size() - 1}) {
      std::vector<float> bad = b;
      bad[at] = std::numeric_limits<float>::quiet_NaN();
      auto w = GemvWeights::Pack(bad.data(), k, n, nk, 1.0f, nullptr, &pool);
      ASSERT_TRUE(w.ok());
      EXPECT_FALSE(w->all_finite()) << "NaN at " << at << " nk=" << nk;
    }
  }
}

TEST(GemmPerfPaths, GemvLargeSplitsAcrossThreads) {
  const float inf = std::numeric_limits<float>::infinity();
  ThreadPool pool(2);
  CheckGemv(1, 784, 1024, false, true, 0.0f, inf, &pool);
  CheckGemv(4, 513, 1000, true, true, -inf, inf, &pool);
}

TEST(GemmPerfPaths, GemvPackRejectsBadDimensions) {
  float b = 1.0f;
  auto w = GemvWeights::Pack(&b, -1, 4, false, 1.0f, nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("negative"), std::string::npos) << w.status().message();
  auto empty = GemvWeights::Pack(nullptr, 5, 0, false, 1.0f, nullptr);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_NE(std::string(GemvIsaName()), "");
}

// ------------------------------------------------------------------ MatMul / Gemm kernels

// Optimized (constant B) vs reference kernel on the same inputs.
// atol: the absolute tolerance; long sums of mixed-sign products need more near zero.
void ExpectFastMatchesRef(const OpSpec& spec, const std::vector<Tensor>& in, std::vector<size_t> constants, int threads,
                          double atol = 1e-5) {
  RunOptions fast, ref;
  fast.constant_inputs = ref.constant_inputs = std::move(constants);
  fast.threads = ref.threads = threads;
  ref.want_reference = true;
  auto a = RunKernel(spec, in, fast);
  auto b = RunKernel(spec, in, ref);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_TRUE(TensorsNear((*b)[i], (*a)[i], 1e-4, atol)) << "output " << i;
}

TEST(GemmPerfPaths, MatMulConstantBSmallAndLargeM) {
  for (int threads : {1, 2})
    for (int64_t k : {1, 33, 300})
      for (int64_t n : {1, 65, 700})
        for (const Shape& lead : std::vector<Shape>{{}, {1}, {3}, {2, 2}, {5}, {2, 3}}) {
          SCOPED_TRACE(::testing::Message()
                       << "threads=" << threads << " k=" << k << " n=" << n << " lead=" << ShapeToString(lead));
          Shape as = lead;
          as.push_back(k);
          ExpectFastMatchesRef(OpSpec("MatMul", 13),
                               {RandomTensor(DataType::kFloat, as, 11), RandomTensor(DataType::kFloat, {k, n}, 12)},
                               {1}, threads);
        }
}

TEST(GemmPerfPaths, MatMulEmptyRows) {
  ExpectFastMatchesRef(OpSpec("MatMul", 13),
                       {RandomTensor(DataType::kFloat, {0, 8}, 1), RandomTensor(DataType::kFloat, {8, 5}, 2)}, {1}, 1);
}

TEST(GemmPerfPaths, GemmConstantBVariants) {
  for (int threads : {1, 2})
    for (int64_t m : {1, 3, 4, 6})
      for (bool trans_a : {false, true})
        for (bool trans_b : {false, true})
          for (int c_kind : {0, 1, 2, 3}) {  // none, row vector, scalar, full matrix (run-time)
            SCOPED_TRACE(::testing::Message() << "threads=" << threads << " m=" << m << " tA=" << trans_a
                                              << " tB=" << trans_b << " c=" << c_kind);
            const int64_t k = 70, n = 129;
            OpSpec spec("Gemm", 13);
            spec.Attr("transA", trans_a ? 1 : 0).Attr("transB", trans_b ? 1 : 0).Attr("alpha", 0.5f);
            spec.Attr("beta", 2.0f);
            std::vector<Tensor> in = {RandomTensor(DataType::kFloat, trans_a ? Shape{k, m} : Shape{m, k}, 21),
                                      RandomTensor(DataType::kFloat, trans_b ? Shape{n, k} : Shape{k, n}, 22)};
            std::vector<size_t> constants = {1};
            if (c_kind == 1) in.push_back(RandomTensor(DataType::kFloat, {n}, 23)), constants.push_back(2);
            if (c_kind == 2) in.push_back(RandomTensor(DataType::kFloat, {1}, 24)), constants.push_back(2);
            if (c_kind == 3) in.push_back(RandomTensor(DataType::kFloat, {m, n}, 25));
            ExpectFastMatchesRef(spec, in, constants, threads);
          }
}

// Batch-1 Gemm (the GEMV path) at edge sizes: N = 1, odd, narrow last panels, K = 16j +- 1
// and the mlp's widths, B in both layouts, every form of bias C, 1 and 2 threads.
TEST(GemmPerfPaths, GemmBatchOneEdgeSizes) {
  const std::vector<std::pair<int64_t, int64_t>> kn = {{1, 1},    {1, 10},  {15, 1},   {17, 17},    {31, 40},
                                                       {33, 100}, {63, 65}, {255, 10}, {784, 1024}, {1025, 1000}};
  const std::vector<Shape> c_shapes = {{}, {1}, {1, 1}, {0}, {1, 0}};  // {0}/{1, 0}: replaced by N below
  for (int threads : {1, 2})
    for (const auto& [k, n] : kn)
      for (bool trans_b : {false, true})
        for (size_t ci = 0; ci <= c_shapes.size(); ++ci) {  // ci == size: no C
          Shape cs;
          if (ci < c_shapes.size()) {
            cs = c_shapes[ci];
            if (!cs.empty() && cs.back() == 0) cs.back() = n;
          }
          SCOPED_TRACE(::testing::Message() << "threads=" << threads << " k=" << k << " n=" << n << " tB=" << trans_b
                                            << " c=" << (ci < c_shapes.size() ? ShapeToString(cs) : "none"));
          OpSpec spec("Gemm", 13);
          spec.Attr("transB", trans_b ? 1 : 0).Attr("alpha", 1.5f).Attr("beta", 0.5f);
          std::vector<Tensor> in = {RandomTensor(DataType::kFloat, {1, k}, 41),
                                    RandomTensor(DataType::kFloat, trans_b ? Shape{n, k} : Shape{k, n}, 42)};
          std::vector<size_t> constants = {1};
          if (ci < c_shapes.size()) in.push_back(RandomTensor(DataType::kFloat, cs, 43)), constants.push_back(2);
          // Summation order differs from the reference's: rounding grows with K.
          ExpectFastMatchesRef(spec, in, constants, threads, 1e-5 * (1.0 + static_cast<double>(k) / 64));
        }
}

TEST(GemmPerfPaths, GemmFusedReluAndClip) {
  for (const char* act : {"Relu", "Clip"}) {
    OpSpec spec("Gemm", 13);
    spec.Attr("transB", 1).Attr("activation", act).Attr("activation_min", 0.0f).Attr("activation_max", 0.25f);
    std::vector<Tensor> in = {RandomTensor(DataType::kFloat, {1, 784}, 31),
                              RandomTensor(DataType::kFloat, {1024, 784}, 32),
                              RandomTensor(DataType::kFloat, {1024}, 33)};
    RunOptions fast;
    fast.constant_inputs = {1, 2};
    fast.threads = 2;
    auto y = RunKernel(spec, in, fast);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    // Reference: plain Gemm, then the clamp.
    OpSpec plain("Gemm", 13);
    plain.Attr("transB", 1);
    RunOptions ref;
    ref.want_reference = true;
    auto r = RunKernel(plain, in, ref);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<double> e = testing::ToDoubles((*r)[0]);
    const float hi = std::string(act) == "Relu" ? std::numeric_limits<float>::infinity() : 0.25f;
    for (double& v : e) v = std::min<double>(hi, std::max(0.0, v));
    EXPECT_TRUE(TensorsNear(MakeTensor(DataType::kFloat, {1, 1024}, e), (*y)[0], 1e-4, 1e-5)) << act;
  }
}

TEST(GemmPerfPaths, GemmBadShapeNamesNode) {
  OpSpec spec("Gemm", 13);
  RunOptions fast;
  fast.constant_inputs = {1};
  auto y =
      RunKernel(spec, {RandomTensor(DataType::kFloat, {1, 5}, 1), RandomTensor(DataType::kFloat, {6, 3}, 2)}, fast);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("Gemm"), std::string::npos) << y.status().message();
}

// ------------------------------------------------------------------ LSTM fused path

struct LstmCase {
  int64_t T, B, I, H;
  std::string direction = "forward";
  bool peep = false, seq_lens = false, init = false, input_forget = false;
  float clip = 0;
  int64_t layout = 0;
};

void CheckLstm(const LstmCase& c, int threads) {
  SCOPED_TRACE(::testing::Message() << "T=" << c.T << " B=" << c.B << " I=" << c.I << " H=" << c.H << " dir="
                                    << c.direction << " peep=" << c.peep << " lens=" << c.seq_lens << " init=" << c.init
                                    << " clip=" << c.clip << " layout=" << c.layout << " threads=" << threads);
  const int64_t D = c.direction == "bidirectional" ? 2 : 1;
  OpSpec spec("LSTM", 14);
  spec.Attr("hidden_size", c.H).Attr("direction", c.direction).Attr("layout", c.layout).Outputs(3);
  if (c.clip > 0) spec.Attr("clip", c.clip);
  if (c.input_forget) spec.Attr("input_forget", 1);
  const Shape xs = c.layout == 0 ? Shape{c.T, c.B, c.I} : Shape{c.B, c.T, c.I};
  const Shape ss = c.layout == 0 ? Shape{D, c.B, c.H} : Shape{c.B, D, c.H};
  std::vector<Tensor> in = {RandomTensor(DataType::kFloat, xs, 41),
                            RandomTensor(DataType::kFloat, {D, 4 * c.H, c.I}, 42, -0.4, 0.4),
                            RandomTensor(DataType::kFloat, {D, 4 * c.H, c.H}, 43, -0.4, 0.4),
                            RandomTensor(DataType::kFloat, {D, 8 * c.H}, 44, -0.3, 0.3)};
  if (c.seq_lens) {
    std::vector<double> lens;
    for (int64_t b = 0; b < c.B; ++b) lens.push_back(static_cast<double>((b * 3 + 1) % (c.T + 1)));
    in.push_back(MakeTensor(DataType::kInt32, {c.B}, lens));
  } else {
    in.push_back(Tensor());
  }
  in.push_back(c.init ? RandomTensor(DataType::kFloat, ss, 45) : Tensor());
  in.push_back(c.init ? RandomTensor(DataType::kFloat, ss, 46) : Tensor());
  in.push_back(c.peep ? RandomTensor(DataType::kFloat, {D, 3 * c.H}, 47) : Tensor());
  ExpectFastMatchesRef(spec, in, {1, 2, 3}, threads);
}

TEST(GemmPerfPaths, LstmFusedMatchesReference) {
  std::vector<LstmCase> cases = {
      {1, 1, 1, 1},
      {7, 1, 5, 16},
      {7, 3, 5, 17},
      {4, 2, 3, 40},
      {0, 1, 3, 8},
      {5, 2, 4, 33, "reverse"},
      {5, 2, 4, 20, "bidirectional"},
  };
  LstmCase p{6, 3, 4, 18};
  p.peep = p.seq_lens = p.init = true;
  cases.push_back(p);
  LstmCase q{6, 3, 4, 18, "reverse"};
  q.seq_lens = q.init = q.input_forget = true;
  q.clip = 0.5f;
  q.layout = 1;
  cases.push_back(q);
  LstmCase r{6, 3, 4, 18, "bidirectional"};
  r.seq_lens = r.peep = true;
  r.layout = 1;
  cases.push_back(r);
  for (int threads : {1, 2})
    for (const LstmCase& c : cases) CheckLstm(c, threads);
}

TEST(GemmPerfPaths, LstmFusedParallelRecurrentSteps) {
  // B * 4H * H >= 2^20 (kParallelStepMacs): the recurrent steps are shared between threads.
  // (H = 128..144 here stays on the caller now; LstmFusedMatchesReference covers that.)
  for (int threads : {1, 2}) {
    CheckLstm({12, 1, 32, 512}, threads);
    LstmCase c{7, 2, 16, 386};
    c.seq_lens = c.init = true;
    CheckLstm(c, threads);
    CheckLstm({7, 1, 16, 520, "reverse"}, threads);
    CheckLstm({6, 1, 8, 144}, threads);  // below the threshold: serial steps, parallel projection
  }
}

// ------------------------------------------------------------------ thread pool

TEST(GemmPerfPaths, ThreadPoolCoversEveryIndexOnce) {
  ThreadPool pool(2);
  for (int64_t n : {1, 2, 7, 64, 1000})
    for (int64_t grain : {1, 3, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.Run(n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " grain=" << grain << " i=" << i;
    }
  int called = 0;
  pool.Run(0, 1, [&](int64_t, int64_t) { ++called; });
  EXPECT_EQ(called, 0);
}

TEST(GemmPerfPaths, ThreadPoolNestedAndConcurrentRegions) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  // Nested regions run inline (also on the thread that owns the outer region).
  pool.Run(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) pool.Run(10, 1, [&](int64_t b2, int64_t e2) { sum.fetch_add(e2 - b2); });
  });
  EXPECT_EQ(sum.load(), 80);
  // Several threads sharing one pool (concurrent session runs): every item still runs once.
  sum = 0;
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    });
  for (auto& th : callers) th.join();
  EXPECT_EQ(sum.load(), 3 * 200 * 100);
}

TEST(GemmPerfPaths, ThreadPoolParticipantsRunOnce) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 100; ++rep) {
    std::atomic<int> mask{0};
    struct Ctx {
      std::atomic<int>* mask;
    } ctx{&mask};
    pool.RunParticipants(
        3,
        [](void* c, int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) static_cast<Ctx*>(c)->mask->fetch_add(1 << (4 * i));
        },
        &ctx);
    ASSERT_EQ(mask.load(), 0x111);
  }
}

}  // namespace
}  // namespace strata
