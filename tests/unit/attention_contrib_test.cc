// com.microsoft Attention (cpu/attention_contrib.cc): the reference and the SGEMM kernel
// against attention computed here in double from its definition, for every mask form,
// unidirectional, past/present, attention_bias, unequal Q/K/V sizes, constant and run-time
// weights, one and two threads, and edge sizes (one token, one head, odd sizes, an empty
// batch); each bad input or attribute gets an error naming it. (Against ONNX Runtime
// itself: bench/compare-ort/contrib_parity.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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

enum class Mask { kNone, kEnds, kEndsStarts, kRaw2D, kRaw3D };

struct Config {
  int64_t batch, seq, din, heads, past = 0;
  Mask mask = Mask::kNone;
  bool unidirectional = false, bias = true, attention_bias = false;
  std::vector<int64_t> sizes;  // qkv_hidden_sizes, empty: din each
  float scale = 0;
  std::string Name() const {
    return "B" + std::to_string(batch) + " S" + std::to_string(seq) + " D" + std::to_string(din) + " N" +
           std::to_string(heads) + " P" + std::to_string(past) + " mask" + std::to_string(static_cast<int>(mask)) +
           (unidirectional ? " causal" : "") + (bias ? "" : " no-bias") + (attention_bias ? " ab" : "") +
           (sizes.empty() ? "" : " sizes") + (scale != 0 ? " scale" : "");
  }
};

struct Inputs {
  std::vector<Tensor> t;  // input, weights, bias, mask, past, attention_bias
  Tensor mask;
};

Inputs MakeInputs(const Config& c, uint64_t seed) {
  const int64_t dq = c.sizes.empty() ? c.din : c.sizes[0], dv = c.sizes.empty() ? c.din : c.sizes[2];
  const int64_t dtot = 2 * dq + dv, total = c.past + c.seq;
  Inputs in;
  in.t.push_back(RandomTensor(DataType::kFloat, {c.batch, c.seq, c.din}, seed));
  in.t.push_back(RandomTensor(DataType::kFloat, {c.din, dtot}, seed + 1, -0.4, 0.4));
  in.t.push_back(c.bias ? RandomTensor(DataType::kFloat, {dtot}, seed + 2) : Tensor());
  std::vector<int32_t> m;
  Shape ms;
  switch (c.mask) {
    case Mask::kNone:
      break;
    case Mask::kEnds:
      for (int64_t b = 0; b < c.batch; ++b) m.push_back(static_cast<int32_t>(std::max<int64_t>(1, total - b)));
      ms = {c.batch};
      break;
    case Mask::kEndsStarts:
      for (int64_t b = 0; b < c.batch; ++b) m.push_back(static_cast<int32_t>(total - b % 2));
      for (int64_t b = 0; b < c.batch; ++b) m.push_back(static_cast<int32_t>(std::min<int64_t>(b + 1, total - 1)));
      ms = {2 * c.batch};
      break;
    case Mask::kRaw2D:
    case Mask::kRaw3D: {
      const int64_t rows = c.mask == Mask::kRaw2D ? c.batch : c.batch * c.seq;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < total; ++j) m.push_back(j == 0 || (r * 7 + j * 3) % 5 != 0 ? 1 : (j % 2 ? 0 : -2));
      ms = c.mask == Mask::kRaw2D ? Shape{c.batch, total} : Shape{c.batch, c.seq, total};
      break;
    }
  }
  in.t.push_back(c.mask == Mask::kNone ? Tensor() : Tensor::FromVector(m, ms));
  in.t.push_back(c.past ? RandomTensor(DataType::kFloat, {2, c.batch, c.heads, c.past, dq / c.heads}, seed + 3)
                        : Tensor());
  in.t.push_back(c.attention_bias ? RandomTensor(DataType::kFloat, {1, c.heads, c.seq, total}, seed + 4, -2, 2)
                                  : Tensor());
  while (!in.t.empty() && !in.t.back().valid()) in.t.pop_back();
  return in;
}

// Attention from its definition, in double: the expected output and present.
std::pair<std::vector<double>, std::vector<double>> Expected(const Config& c, const std::vector<Tensor>& t) {
  const int64_t dq = c.sizes.empty() ? c.din : c.sizes[0], dv = c.sizes.empty() ? c.din : c.sizes[2];
  const int64_t dtot = 2 * dq + dv, total = c.past + c.seq, hq = dq / c.heads, hv = dv / c.heads;
  auto at = [&](size_t i) { return i < t.size() && t[i].valid() ? ToDoubles(t[i]) : std::vector<double>{}; };
  const auto x = at(0), w = at(1), bias = at(2), mask = at(3), past = at(4), ab = at(5);
  std::vector<double> qkv(c.batch * c.seq * dtot);
  for (int64_t r = 0; r < c.batch * c.seq; ++r)
    for (int64_t j = 0; j < dtot; ++j) {
      double s = bias.empty() ? 0 : bias[j];
      for (int64_t k = 0; k < c.din; ++k) s += x[r * c.din + k] * w[k * dtot + j];
      qkv[r * dtot + j] = s;
    }
  const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(hq));
  std::vector<double> out(c.batch * c.seq * dv), present(2 * c.batch * c.heads * total * hv);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t n = 0; n < c.heads; ++n) {
      auto key = [&](int64_t j, int64_t k, int kv) {  // kv 0: K, 1: V
        if (j < c.past) return past[(((kv * c.batch + b) * c.heads + n) * c.past + j) * hv + k];
        const int64_t off = kv == 0 ? dq + n * hq : 2 * dq + n * hv;
        return qkv[(b * c.seq + j - c.past) * dtot + off + k];
      };
      for (int kv = 0; kv < 2; ++kv)
        for (int64_t j = 0; j < total; ++j)
          for (int64_t k = 0; k < hv; ++k)
            present[(((kv * c.batch + b) * c.heads + n) * total + j) * hv + k] = key(j, k, kv);
      for (int64_t i = 0; i < c.seq; ++i) {
        std::vector<double> s(total);
        for (int64_t j = 0; j < total; ++j) {
          double dot = 0;
          for (int64_t k = 0; k < hq; ++k) dot += qkv[(b * c.seq + i) * dtot + n * hq + k] * key(j, k, 0);
          bool masked = false;
          switch (c.mask) {
            case Mask::kNone:
              break;
            case Mask::kEnds:
              masked = j >= mask[b];
              break;
            case Mask::kEndsStarts:
              masked = j >= mask[b] || j < mask[c.batch + b];
              break;
            case Mask::kRaw2D:
              masked = mask[b * total + j] <= 0;
              break;
            case Mask::kRaw3D:
              masked = mask[(b * c.seq + i) * total + j] <= 0;
              break;
          }
          s[j] = scale * dot + (masked ? -10000.0 : 0.0);
          if (!ab.empty()) s[j] += ab[(n * c.seq + i) * total + j];
          if (c.unidirectional && c.seq > 1 && j > c.past + i) s[j] = -std::numeric_limits<double>::infinity();
        }
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (double v : s) mx = std::max(mx, v);
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (int64_t k = 0; k < hv; ++k) {
          double acc = 0;
          for (int64_t j = 0; j < total; ++j) acc += s[j] / sum * key(j, k, 1);
          out[(b * c.seq + i) * dv + n * hv + k] = acc;
        }
      }
    }
  return {out, present};
}

OpSpec Spec(const Config& c) {
  OpSpec s("Attention", 1, "com.microsoft");
  s.Attr("num_heads", c.heads);
  if (c.unidirectional) s.Attr("unidirectional", 1);
  if (!c.sizes.empty()) s.Attr("qkv_hidden_sizes", c.sizes);
  if (c.scale != 0) s.Attr("scale", c.scale);
  if (c.past) s.Outputs(2);
  return s;
}

TEST(MsAttention, BothKernelsMatchTheDefinition) {
  std::vector<Config> configs = {
      {1, 1, 4, 1},
      {2, 7, 32, 4, 0, Mask::kRaw2D},
      {1, 33, 48, 3, 0, Mask::kEnds},
      {3, 5, 12, 2, 0, Mask::kRaw3D},
      {2, 17, 64, 2, 0, Mask::kEndsStarts},
      {2, 6, 16, 4, 0, Mask::kNone, true},
      {2, 6, 16, 4, 0, Mask::kRaw2D, true},
      {2, 3, 16, 2, 5, Mask::kRaw2D, true},
      {1, 1, 24, 3, 9, Mask::kNone, true},
      {2, 4, 20, 2, 3, Mask::kEnds},
      {1, 8, 16, 2, 0, Mask::kNone, false, false},
      {2, 5, 24, 2, 0, Mask::kEnds, false, true, true},
      {0, 3, 8, 2},
      {1, 65, 32, 1, 0, Mask::kRaw2D, true},
  };
  Config sized{2, 5, 16, 2, 0, Mask::kRaw2D};
  sized.sizes = {16, 16, 24};
  sized.scale = 0.25f;
  configs.push_back(sized);
  uint64_t seed = 500;
  for (const Config& c : configs) {
    seed += 10;
    const Inputs in = MakeInputs(c, seed);
    const auto [want, want_present] = Expected(c, in.t);
    for (bool reference : {true, false})
      for (bool const_w : {true, false})
        for (int threads : {1, 2}) {
          if (!reference && !sgemm::Available()) continue;
          SCOPED_TRACE(c.Name() + (reference ? " reference" : " sgemm") + (const_w ? " const W" : " run-time W") +
                       " threads " + std::to_string(threads));
          RunOptions opts;
          opts.want_reference = reference;
          opts.threads = threads;
          if (const_w) opts.constant_inputs = {1};
          auto got = RunKernel(Spec(c), in.t, opts);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          const int64_t dv = c.sizes.empty() ? c.din : c.sizes[2];
          EXPECT_EQ((*got)[0].shape(), (Shape{c.batch, c.seq, dv}));
          const auto y = ToDoubles((*got)[0]);
          ASSERT_EQ(y.size(), want.size());
          for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << i;
          if (c.past) {
            EXPECT_EQ((*got)[1].shape(), (Shape{2, c.batch, c.heads, c.past + c.seq, dv / c.heads}));
            const auto p = ToDoubles((*got)[1]);
            ASSERT_EQ(p.size(), want_present.size());
            for (size_t i = 0; i < p.size(); ++i) ASSERT_NEAR(p[i], want_present[i], 1e-5) << "present " << i;
          }
        }
  }
}

// Zero-width weights: an empty output whatever num_heads and past length say (they are then
// bounded by no tensor's memory, so nothing may loop over them).
TEST(MsAttention, ZeroHiddenSizesGiveEmptyOutputs) {
  const Tensor x = RandomTensor(DataType::kFloat, {2, 3, 4}, 1);
  const Tensor w = RandomTensor(DataType::kFloat, {4, 0}, 2);
  const Tensor past = RandomTensor(DataType::kFloat, {2, 2, int64_t{1} << 30, int64_t{1} << 20, 0}, 3);
  for (bool reference : {true, false}) {
    RunOptions opts;
    opts.want_reference = reference;
    auto got = RunKernel(OpSpec("Attention", 1, "com.microsoft").Attr("num_heads", int64_t{1} << 30).Outputs(2),
                         {x, w, Tensor(), Tensor(), past}, opts);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ((*got)[0].shape(), (Shape{2, 3, 0}));
    EXPECT_EQ((*got)[1].num_elements(), 0);
  }
}

TEST(MsAttention, BadInputsAndAttributesNameTheProblem) {
  const Config c{2, 3, 12, 2};
  const Inputs in = MakeInputs(c, 7);
  auto expect_error = [](const Result<std::vector<Tensor>>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
  };
  const OpSpec spec = Spec(c);
  auto with = [&](size_t slot, Tensor t) {
    std::vector<Tensor> v = in.t;
    v.resize(std::max(v.size(), slot + 1));
    v[slot] = std::move(t);
    return v;
  };
  auto ints = [](const std::vector<int32_t>& v, const Shape& s) { return Tensor::FromVector(v, s); };
  expect_error(RunKernel(OpSpec("Attention", 1, "com.microsoft"), in.t), "num_heads must be set");
  expect_error(RunKernel(OpSpec(spec).Attr("num_heads", 0), in.t), "num_heads must be set and positive");
  expect_error(RunKernel(OpSpec(spec).Attr("do_rotary", 1), in.t), "do_rotary is not supported");
  expect_error(RunKernel(OpSpec(spec).Attr("past_present_share_buffer", 1), in.t), "past_present_share_buffer");
  expect_error(RunKernel(OpSpec(spec).Attr("qkv_hidden_sizes", std::vector<int64_t>{12, 8, 12}), in.t),
               "qkv_hidden_sizes must be");
  expect_error(RunKernel(OpSpec(spec).Attr("num_heads", 5), in.t), "multiples of num_heads 5");
  expect_error(RunKernel(spec, with(0, RandomTensor(DataType::kFloat, {2, 3, 12, 1}, 1))), "must be 3-D");
  expect_error(RunKernel(spec, with(1, RandomTensor(DataType::kFloat, {11, 36}, 1))), "weights [11,36] must be [12");
  expect_error(RunKernel(spec, with(1, RandomTensor(DataType::kFloat, {12, 35}, 1))), "not a multiple of 3");
  expect_error(RunKernel(spec, with(2, RandomTensor(DataType::kFloat, {35}, 1))), "bias must be float32 [36]");
  expect_error(RunKernel(spec, with(0, RandomTensor(DataType::kInt64, {2, 3, 12}, 1))), "'input' must be float32");
  expect_error(RunKernel(spec, with(3, ints({3, 3, 3}, {3}))), "mask_index [3] must be [2], [4], [2,3] or [2,3,3]");
  expect_error(RunKernel(spec, with(3, ints({3, -1}, {2}))), "mask_index[1] = -1 is negative");
  expect_error(RunKernel(spec, with(3, ints(std::vector<int32_t>(8, 1), {8}))), "[3 * batch + 2] is not supported");
  expect_error(RunKernel(spec, with(3, ints(std::vector<int32_t>(18, 1), {2, 1, 3, 3}))), "4-D mask_index");
  expect_error(RunKernel(spec, with(3, RandomTensor(DataType::kFloat, {2, 3}, 1))), "mask_index must be int32");
  expect_error(RunKernel(spec, with(4, RandomTensor(DataType::kFloat, {2, 2, 2, 4, 5}, 1))),
               "past must be float32 [2, 2, 2, past_len, 6]");
  expect_error(RunKernel(spec, with(5, RandomTensor(DataType::kFloat, {2, 2, 3, 4}, 1))),
               "attention_bias must be [2 or 1, 2 or 1, 3, 3] float32");
  std::vector<Tensor> both = with(5, RandomTensor(DataType::kFloat, {1, 2, 3, 3}, 1));
  both[4] = RandomTensor(DataType::kFloat, {2, 2, 2, 1, 6}, 2);
  expect_error(RunKernel(spec, both), "past and attention_bias cannot be used together");
}

}  // namespace
}  // namespace strata
