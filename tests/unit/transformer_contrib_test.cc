// ONNX Runtime's transformer contrib ops (cpu/transformer_contrib.cc): SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization, BiasGelu and
// EmbedLayerNormalization against the formulas computed here in double, on edge sizes
// (hidden 1, odd, empty batches), every optional input and output, with one and two
// threads; each bad input gets an error naming the node and the input. (Their outputs
// against ONNX Runtime itself: bench/compare-ort/contrib_parity.py.)
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/session.h"
#include "kernel_harness.h"
#include "onnx_builder.h"

namespace strata {
namespace {

using testing::MakeTensor;
using testing::OpSpec;
using testing::RandomTensor;
using testing::RunKernel;
using testing::RunOptions;
using testing::ToDoubles;

constexpr char kMs[] = "com.microsoft";

// Row-wise (layer or RMS) normalization of `s` (rows x n) in double.
struct NormRef {
  std::vector<double> y, mean, inv;
};
NormRef Normalize(const std::vector<double>& s, int64_t n, const std::vector<double>& gamma,
                  const std::vector<double>* beta, double eps, bool rms) {
  NormRef r;
  const int64_t rows = n ? static_cast<int64_t>(s.size()) / n : 0;
  r.y.resize(s.size());
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, sq = 0;
    if (!rms) {
      for (int64_t k = 0; k < n; ++k) mean += s[i * n + k];
      mean /= static_cast<double>(n);
    }
    for (int64_t k = 0; k < n; ++k) sq += (s[i * n + k] - mean) * (s[i * n + k] - mean);
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
    for (int64_t k = 0; k < n; ++k)
      r.y[i * n + k] = (s[i * n + k] - mean) * inv * gamma[k] + (beta ? (*beta)[k] : 0.0);
    r.mean.push_back(mean);
    r.inv.push_back(inv);
  }
  return r;
}

void ExpectNear(const std::vector<double>& want, const Tensor& got, double tol, const std::string& what) {
  const std::vector<double> g = ToDoubles(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " element " << i;
}

TEST(TransformerContrib, SkipLayerNormMatchesTheFormula) {
  struct Case {
    Shape x, skip;
    bool beta, bias;
  };
  const std::vector<Case> cases = {
      {{2, 5, 24}, {2, 5, 24}, true, true},  {{2, 5, 24}, {1, 5, 24}, true, false},
      {{3, 4, 17}, {4, 17}, false, true},    {{7, 33}, {7, 33}, true, true},
      {{1, 1, 1}, {1, 1, 1}, true, true},    {{2, 3, 1}, {3, 1}, false, false},
      {{0, 4, 8}, {0, 4, 8}, true, true},    {{2, 3, 65}, {1, 1, 65}, true, true},
  };
  uint64_t seed = 100;
  for (bool rms : {false, true})
    for (const Case& c : cases)
      for (int threads : {1, 2}) {
        const int64_t h = c.x.back();
        SCOPED_TRACE(std::string(rms ? "simplified " : "") + ShapeToString(c.x) + " skip " + ShapeToString(c.skip) +
                     " threads " + std::to_string(threads));
        const Tensor x = RandomTensor(DataType::kFloat, c.x, ++seed, -3, 3);
        const Tensor skip = RandomTensor(DataType::kFloat, c.skip, ++seed);
        const Tensor gamma = RandomTensor(DataType::kFloat, {h}, ++seed);
        const Tensor beta = c.beta && !rms ? RandomTensor(DataType::kFloat, {h}, ++seed) : Tensor();
        const Tensor bias = c.bias ? RandomTensor(DataType::kFloat, {h}, ++seed) : Tensor();
        const double eps = 1e-5;
        std::vector<Tensor> ins = {x, skip, gamma};
        if (rms) {
          ins.push_back(bias);
        } else {
          ins.push_back(beta);
          ins.push_back(bias);
        }
        RunOptions opts;
        opts.threads = threads;
        auto got = RunKernel(OpSpec(rms ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization", 1, kMs)
                                 .Attr("epsilon", eps)
                                 .Outputs(4),
                             ins, opts);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(got->size(), 4u);
        const std::vector<double> xd = ToDoubles(x), sd = ToDoubles(skip), bd = c.bias ? ToDoubles(bias) : std::vector<double>{};
        std::vector<double> sum(xd.size());
        for (size_t i = 0; i < xd.size(); ++i)
          sum[i] = static_cast<double>(static_cast<float>(static_cast<float>(xd[i] + sd[i % sd.size()]) +
                                                          (c.bias ? static_cast<float>(bd[i % h]) : 0.0f)));
        const std::vector<double> bed = beta.valid() ? ToDoubles(beta) : std::vector<double>{};
        const NormRef ref = Normalize(sum, h, ToDoubles(gamma), beta.valid() ? &bed : nullptr, eps, rms);
        Shape stat = c.x;
        stat.back() = 1;
        EXPECT_EQ((*got)[0].shape(), c.x);
        EXPECT_EQ((*got)[1].shape(), stat);
        EXPECT_EQ((*got)[2].shape(), stat);
        EXPECT_EQ((*got)[3].shape(), c.x);
        ExpectNear(ref.y, (*got)[0], 1e-5, "output");
        ExpectNear(ref.mean, (*got)[1], 1e-6, "mean");
        ExpectNear(ref.inv, (*got)[2], 1e-5, "inv_std_var");
        ExpectNear(sum, (*got)[3], 0, "input_skip_bias_sum");
      }
}

// The AVX-512 kernels (float partial sums) against the reference (double), every output,
// at row lengths around the 16-lane width and a transformer's 768.
TEST(TransformerContrib, SkipNormOptimizedMatchesReference) {
  uint64_t seed = 200;
  for (bool rms : {false, true})
    for (int64_t h : {1, 15, 16, 17, 33, 768})
      for (int threads : {1, 2}) {
        const OpSpec spec = OpSpec(rms ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization", 1, kMs)
                                .Attr("epsilon", 1e-6)
                                .Outputs(4);
        if (!testing::HasOptimizedKernel(spec, DataType::kFloat)) GTEST_SKIP() << "no AVX-512 on this CPU";
        SCOPED_TRACE(std::string(rms ? "simplified" : "layer") + " hidden " + std::to_string(h));
        std::vector<Tensor> ins = {RandomTensor(DataType::kFloat, {2, 5, h}, ++seed, -3, 3),
                                   RandomTensor(DataType::kFloat, {1, 5, h}, ++seed),
                                   RandomTensor(DataType::kFloat, {h}, ++seed),
                                   RandomTensor(DataType::kFloat, {h}, ++seed)};
        if (!rms) ins.push_back(RandomTensor(DataType::kFloat, {h}, ++seed));
        EXPECT_TRUE(testing::OptimizedMatchesReference(spec, ins, 2e-5, 2e-5, threads));
      }
}

TEST(TransformerContrib, SimplifiedLayerNormOverTrailingAxes) {
  uint64_t seed = 300;
  for (const auto& [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{3, 5, 64}, -1}, {{2, 3, 4}, 1}, {{4, 1}, -1}, {{5}, 0}, {{0, 7}, 1}, {{2, 3, 31}, 2}}) {
    SCOPED_TRACE(ShapeToString(shape) + " axis " + std::to_string(axis));
    const int64_t a = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
    const Shape norm(shape.begin() + a, shape.end());
    const Tensor x = RandomTensor(DataType::kFloat, shape, ++seed, -4, 4);
    const Tensor scale = RandomTensor(DataType::kFloat, norm, ++seed);
    auto got = RunKernel(OpSpec("SimplifiedLayerNormalization", 1).Attr("axis", axis).Attr("epsilon", 1e-6).Outputs(2),
                         {x, scale});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const NormRef ref = Normalize(ToDoubles(x), NumElements(norm), ToDoubles(scale), nullptr, 1e-6, true);
    ExpectNear(ref.y, (*got)[0], 1e-5, "Y");
    ExpectNear(ref.inv, (*got)[1], 1e-5, "inv_std_var");
    Shape stat(shape.begin(), shape.begin() + a);
    stat.resize(shape.size(), 1);
    EXPECT_EQ((*got)[1].shape(), stat);
  }
}

// ORT writes SimplifiedLayerNormalization in the ai.onnx domain: a model using it passes
// the ONNX checker (its schema is registered) and runs.
TEST(TransformerContrib, SimplifiedLayerNormModelLoadsInTheOnnxDomain) {
  auto m = onnx_builder::MakeModel(17);
  auto* g = m.mutable_graph();
  onnx_builder::AddInput(g, "x", {2, 8});
  onnx_builder::AddFloatInit(g, "scale", {8}, [](size_t n) { return std::vector<float>(n, 2.0f); });
  onnx_builder::AddNode(g, "SimplifiedLayerNormalization", {"x", "scale"}, {"y"});
  onnx_builder::AddOutput(g, "y", {2, 8});
  const std::string bytes = onnx_builder::Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> xv(16);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i) - 7.5f;
  auto out = (*s)->Run({{"x", Value(Tensor::FromVector(xv, {2, 8}))}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = (*out)[0].tensor();
  for (int r = 0; r < 2; ++r) {
    double sq = 0;
    for (int k = 0; k < 8; ++k) sq += xv[r * 8 + k] * xv[r * 8 + k];
    const double inv = 1.0 / std::sqrt(sq / 8 + 1e-5);
    for (int k = 0; k < 8; ++k) EXPECT_NEAR(y.data<float>()[r * 8 + k], xv[r * 8 + k] * inv * 2.0, 1e-5);
  }
}

// Its input untyped (the output of a com.microsoft op, which libonnx cannot infer): shape
// inference must skip what it does not know. Its inference function dereferenced the
// missing type (SIGSEGV at load) until 12-07, found by bench/compare-ort/contrib_llm.py.
TEST(TransformerContrib, SimplifiedLayerNormAfterAnUntypedValueLoads) {
  auto m = onnx_builder::MakeModel(17);
  onnx_builder::AddOpsetImport(&m, "com.microsoft", 1);
  auto* g = m.mutable_graph();
  onnx_builder::AddInput(g, "x", {2, 8});
  onnx_builder::AddFloatInit(g, "scale", {8}, [](size_t n) { return std::vector<float>(n, 1.0f); });
  onnx_builder::AddNode(g, "QuickGelu", {"x"}, {"t"})->set_domain("com.microsoft");
  onnx_builder::AddNode(g, "SimplifiedLayerNormalization", {"t", "scale"}, {"y"});
  onnx_builder::AddOutput(g, "y", {2, 8});
  const std::string bytes = onnx_builder::Serialize(m);
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto out = (*s)->Run({{"x", Value(RandomTensor(DataType::kFloat, {2, 8}, 5))}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor().shape(), (Shape{2, 8}));
}

TEST(TransformerContrib, BiasGeluIsGeluOfTheSum) {
  uint64_t seed = 400;
  for (const Shape& shape : std::vector<Shape>{{2, 7, 37}, {1}, {3, 16}, {0, 5}, {4, 1, 33}})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(ShapeToString(shape));
      const Tensor a = RandomTensor(DataType::kFloat, shape, ++seed, -5, 5);
      const Tensor b = RandomTensor(DataType::kFloat, {shape.back()}, ++seed);
      RunOptions opts;
      opts.threads = threads;
      auto got = RunKernel(OpSpec("BiasGelu", 1, kMs), {a, b}, opts);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const std::vector<double> ad = ToDoubles(a), bd = ToDoubles(b);
      std::vector<double> want(ad.size());
      for (size_t i = 0; i < ad.size(); ++i) {
        const double v = static_cast<float>(ad[i] + bd[i % bd.size()]);
        want[i] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      }
      ExpectNear(want, (*got)[0], 2e-6, "C");
    }
}

Tensor Ids(const Shape& shape, const std::vector<int32_t>& v) { return Tensor::FromVector(v, shape); }

TEST(TransformerContrib, EmbedLayerNormSumsTheTablesAndCountsTheMask) {
  const int64_t b = 2, s = 4, h = 9;
  const Tensor ids = Ids({b, s}, {0, 5, 9, 2, 7, 7, 1, 3});
  const Tensor seg = Ids({b, s}, {0, 0, 1, 1, 1, 0, 0, 1});
  const Tensor word = RandomTensor(DataType::kFloat, {10, h}, 1);
  const Tensor pos = RandomTensor(DataType::kFloat, {6, h}, 2);
  const Tensor segemb = RandomTensor(DataType::kFloat, {2, h}, 3);
  const Tensor gamma = RandomTensor(DataType::kFloat, {h}, 4);
  const Tensor beta = RandomTensor(DataType::kFloat, {h}, 5);
  const Tensor mask = Ids({b, s}, {1, 1, 1, 0, 1, 0, 0, 0});
  for (int variant = 0; variant < 5; ++variant) {
    // 0: everything; 1: no segment, no mask; 2: position_ids [B,S]; 3: position_ids [1,S];
    // 4: the segment table without segment_ids (ONNX Runtime adds its row 0).
    SCOPED_TRACE("variant " + std::to_string(variant));
    const bool with_seg = variant == 0, with_mask = variant == 0, table_only = variant == 4;
    Tensor pids;
    if (variant == 2) pids = Ids({b, s}, {5, 0, 1, 1, 2, 3, 4, 5});
    if (variant == 3) pids = Ids({1, s}, {3, 2, 1, 0});
    auto got = RunKernel(OpSpec("EmbedLayerNormalization", 1, kMs).Attr("epsilon", 1e-6).Outputs(3),
                         {ids, with_seg ? seg : Tensor(), word, pos, with_seg || table_only ? segemb : Tensor(), gamma, beta,
                          with_mask ? mask : Tensor(), pids});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const auto wd = ToDoubles(word), pd = ToDoubles(pos), gd = ToDoubles(segemb);
    std::vector<double> sum(b * s * h);
    for (int64_t r = 0; r < b * s; ++r) {
      const int64_t p = variant == 2 ? pids.data<int32_t>()[r] : variant == 3 ? pids.data<int32_t>()[r % s] : r % s;
      for (int64_t k = 0; k < h; ++k) {
        float v = static_cast<float>(wd[ids.data<int32_t>()[r] * h + k] + pd[p * h + k]);
        if (with_seg) v = static_cast<float>(v + gd[seg.data<int32_t>()[r] * h + k]);
        if (table_only) v = static_cast<float>(v + gd[k]);
        sum[r * h + k] = v;
      }
    }
    const auto bed = ToDoubles(beta);
    const NormRef ref = Normalize(sum, h, ToDoubles(gamma), &bed, 1e-6, false);
    ExpectNear(ref.y, (*got)[0], 1e-5, "output");
    ExpectNear(sum, (*got)[2], 1e-6, "embedding_sum");
    EXPECT_EQ((*got)[1].dtype(), DataType::kInt32);
    EXPECT_EQ(ToDoubles((*got)[1]), (with_mask ? std::vector<double>{3, 1} : std::vector<double>{0, 0}));
  }
}

// RotaryEmbedding against the rotation written out here (halves and pairs, [B,S,D] and
// [B,N,S,H], partial rotary dims, one position value or one per token).
TEST(TransformerContrib, RotaryEmbeddingRotatesTheFirstDimsOfEachHead) {
  struct Case {
    Shape x;
    int64_t heads, rot_attr, half, max_pos;
    bool interleaved, one_pos;
  };
  const std::vector<Case> cases = {
      {{2, 5, 32}, 0, 0, 4, 16, false, false}, {{2, 3, 4, 8}, 0, 0, 4, 12, true, false},
      {{1, 6, 40}, 2, 8, 4, 32, false, true},  {{2, 3, 24}, 0, 0, 6, 8, true, true},
      {{1, 1, 2}, 0, 0, 1, 1, false, false},   {{3, 7, 30}, 3, 6, 3, 9, true, false},
  };
  uint64_t seed = 600;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(ShapeToString(c.x) + (c.interleaved ? " pairs" : " halves") + (c.one_pos ? " one position" : ""));
      const bool bnsh = c.x.size() == 4;
      const int64_t batch = c.x[0], seq = bnsh ? c.x[2] : c.x[1], hidden = bnsh ? c.x[1] * c.x[3] : c.x[2];
      const int64_t head = c.rot_attr ? hidden / c.heads : 2 * c.half, heads = hidden / head, rot = 2 * c.half;
      const Tensor x = RandomTensor(DataType::kFloat, c.x, ++seed);
      std::vector<int64_t> pv;
      if (c.one_pos) {
        pv = {c.max_pos - seq};
      } else {
        for (int64_t i = 0; i < batch * seq; ++i) pv.push_back((i * 5 + 3) % c.max_pos);
      }
      const Tensor pos = c.one_pos ? Tensor::FromVector(pv, {1}) : Tensor::FromVector(pv, {batch, seq});
      const Tensor cs = RandomTensor(DataType::kFloat, {c.max_pos, c.half}, ++seed);
      const Tensor sn = RandomTensor(DataType::kFloat, {c.max_pos, c.half}, ++seed);
      OpSpec spec("RotaryEmbedding", 1, kMs);
      spec.Attr("interleaved", c.interleaved ? 1 : 0);
      if (c.heads) spec.Attr("num_heads", c.heads);
      if (c.rot_attr) spec.Attr("rotary_embedding_dim", c.rot_attr);
      RunOptions opts;
      opts.threads = threads;
      auto got = RunKernel(spec, {x, pos, cs, sn}, opts);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const auto xd = ToDoubles(x), cd = ToDoubles(cs), sd = ToDoubles(sn);
      std::vector<double> want(xd);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t n = 0; n < heads; ++n)
          for (int64_t t = 0; t < seq; ++t) {
            const int64_t off = bnsh ? ((b * heads + n) * seq + t) * head : (b * seq + t) * hidden + n * head;
            const int64_t p = c.one_pos ? pv[0] + t : pv[b * seq + t];
            for (int64_t k = 0; k < rot / 2; ++k) {
              const int64_t i0 = c.interleaved ? 2 * k : k, i1 = c.interleaved ? 2 * k + 1 : k + rot / 2;
              const double co = cd[p * c.half + k], si = sd[p * c.half + k];
              want[off + i0] = xd[off + i0] * co - xd[off + i1] * si;
              want[off + i1] = xd[off + i1] * co + xd[off + i0] * si;
            }
          }
      ExpectNear(want, (*got)[0], 1e-6, "y");
    }
}

// Bad inputs: a clear error that names the node's op and the input, never a crash.
TEST(TransformerContrib, BadInputsNameTheProblem) {
  const Tensor x = RandomTensor(DataType::kFloat, {2, 3, 8}, 1);
  const Tensor g8 = RandomTensor(DataType::kFloat, {8}, 2);
  const Tensor g7 = RandomTensor(DataType::kFloat, {7}, 3);
  auto expect_error = [](const Result<std::vector<Tensor>>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
  };
  const OpSpec sln("SkipLayerNormalization", 1, kMs);
  expect_error(RunKernel(sln, {x, RandomTensor(DataType::kFloat, {2, 3, 7}, 4), g8}), "skip [2,3,7]");
  expect_error(RunKernel(sln, {x, RandomTensor(DataType::kFloat, {2, 1, 8}, 4), g8}), "skip [2,1,8]");
  expect_error(RunKernel(sln, {x, x, g7}), "'gamma' must be 1-D of the hidden size 8");
  expect_error(RunKernel(sln, {x, x, g8, g7}), "'beta'");
  expect_error(RunKernel(sln, {x, x, g8, Tensor(), g7}), "'bias'");
  expect_error(RunKernel(sln, {x, x}), "gamma");
  expect_error(RunKernel(sln, {x, RandomTensor(DataType::kInt64, {2, 3, 8}, 5), g8}), "'skip' must be float32");
  expect_error(RunKernel(sln, {RandomTensor(DataType::kFloat, {2, 2, 3, 8}, 6), x, g8}), "2-D or 3-D");
  expect_error(RunKernel(OpSpec("SkipLayerNormalization", 1, kMs).Attr("epsilon", -1.0), {x, x, g8}), "epsilon");
  expect_error(RunKernel(OpSpec("SimplifiedLayerNormalization", 1).Attr("axis", 3), {x, g8}), "axis 3");
  expect_error(RunKernel(OpSpec("SimplifiedLayerNormalization", 1), {x, g7}), "scale [7]");
  expect_error(RunKernel(OpSpec("SimplifiedLayerNormalization", 1).Attr("stash_type", 0), {x, g8}), "stash_type");
  expect_error(RunKernel(OpSpec("BiasGelu", 1, kMs), {x, g7}), "bias B [7]");
  expect_error(RunKernel(OpSpec("BiasGelu", 1, kMs), {x, x}), "bias B [2,3,8]");

  const OpSpec eln("EmbedLayerNormalization", 1, kMs);
  const Tensor ids = Ids({1, 3}, {0, 1, 2});
  const Tensor word = RandomTensor(DataType::kFloat, {4, 8}, 7);
  const Tensor pos = RandomTensor(DataType::kFloat, {3, 8}, 8);
  expect_error(RunKernel(eln, {Ids({1, 3}, {0, 4, 2}), Tensor(), word, pos, Tensor(), g8, g8}),
               "input_ids[0,1] = 4 is outside [0, 4)");
  expect_error(RunKernel(eln, {Ids({1, 3}, {0, -1, 2}), Tensor(), word, pos, Tensor(), g8, g8}),
               "input_ids[0,1] = -1");
  expect_error(RunKernel(eln, {Ids({1, 4}, {0, 1, 2, 3}), Tensor(), word, pos, Tensor(), g8, g8}),
               "sequence length 4 exceeds position_embedding's 3 rows");
  expect_error(RunKernel(eln, {ids, Ids({1, 3}, {0, 0, 0}), word, pos, Tensor(), g8, g8}),
               "segment_ids given without segment_embedding");
  expect_error(RunKernel(eln, {ids, Tensor(), word, pos, RandomTensor(DataType::kFloat, {0, 8}, 9), g8, g8}),
               "segment_embedding has no rows");
  expect_error(RunKernel(eln, {ids, Ids({1, 3}, {0, 2, 0}), word, pos, RandomTensor(DataType::kFloat, {2, 8}, 9), g8,
                               g8}),
               "segment_ids[0,1] = 2 is outside [0, 2)");
  expect_error(RunKernel(eln, {ids, Tensor(), word, pos, Tensor(), g8, g8, Tensor(), Ids({1, 3}, {0, 3, 1})}),
               "position_ids[0,1] = 3");
  expect_error(RunKernel(eln, {ids, Tensor(), word, RandomTensor(DataType::kFloat, {3, 7}, 10), Tensor(), g8, g8}),
               "'position_embedding' [3,7] must be 2-D [rows, hidden] with hidden 8");
  expect_error(RunKernel(eln, {MakeTensor(DataType::kInt64, {1, 3}, {0, 1, 2}), Tensor(), word, pos, Tensor(), g8, g8}),
               "input_ids must be int32");
  expect_error(RunKernel(eln, {ids, Tensor(), word, pos, Tensor(), g8, g8, Ids({1, 2}, {1, 1})}), "'mask' [1,2]");
  expect_error(RunKernel(eln, {ids, Tensor(), word, pos, Tensor(), g8}), "beta");

  const OpSpec rope("RotaryEmbedding", 1, kMs);
  const Tensor rx = RandomTensor(DataType::kFloat, {1, 3, 8}, 11);
  const Tensor cache = RandomTensor(DataType::kFloat, {4, 2}, 12);
  auto p64 = [](const std::vector<int64_t>& v, const Shape& s) { return Tensor::FromVector(v, s); };
  expect_error(RunKernel(rope, {rx, p64({0, 1, 4}, {1, 3}), cache, cache}),
               "position 4 of batch 0, token 2 is outside the cache's 4 positions");
  expect_error(RunKernel(rope, {rx, p64({0, -1, 2}, {1, 3}), cache, cache}), "position -1 of batch 0, token 1");
  expect_error(RunKernel(rope, {rx, p64({2}, {1}), cache, cache}), "position 2 + 2 of batch 0, token 2 is outside");
  expect_error(RunKernel(rope, {rx, p64({0, 1}, {1, 2}), cache, cache}), "position_ids [1,2] must be [1,3]");
  expect_error(RunKernel(rope, {rx, MakeTensor(DataType::kInt32, {1}, {0}), cache, cache}),
               "position_ids must be int64");
  expect_error(RunKernel(rope, {rx, p64({0}, {1}), cache, RandomTensor(DataType::kFloat, {4, 3}, 13)}),
               "cos_cache and sin_cache must be 2-D of one shape");
  expect_error(RunKernel(rope, {RandomTensor(DataType::kFloat, {1, 3, 6}, 14), p64({0}, {1}), cache, cache}),
               "hidden 6 is not a multiple of the head size 4");
  expect_error(RunKernel(OpSpec(rope).Attr("rotary_embedding_dim", 4), {rx, p64({0}, {1}), cache, cache}),
               "rotary_embedding_dim needs num_heads");
  expect_error(RunKernel(OpSpec(rope).Attr("rotary_embedding_dim", 6).Attr("num_heads", 2),
                         {rx, p64({0}, {1}), cache, cache}),
               "rotary dim 6 must be even, at most the head size 4");
  expect_error(RunKernel(rope, {RandomTensor(DataType::kFloat, {1, 2, 3, 6}, 15), p64({0}, {1}), cache, cache}),
               "4-D input [1,2,3,6] must be [batch, 2, sequence, 4]");
}

}  // namespace
}  // namespace strata
