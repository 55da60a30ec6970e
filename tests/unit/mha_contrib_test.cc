// com.microsoft MultiHeadAttention (cpu/mha_contrib.cc): the reference and the SGEMM kernel
// against attention computed here in double from its definition: self- and cross-attention,
// unequal K and V widths, cached BNSH keys/values, every key mask form, attention_bias
// broadcast over batch or heads, past/present, causal, decoding one token, one and two
// threads, edge sizes (head width 1, odd widths, no queries, an empty batch); each bad input
// or attribute gets an error naming it. (Against ONNX Runtime: contrib_parity.py.)
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

enum class Mask { kNone, kLengths, kRaw2D, kRaw3D };

struct Config {
  int64_t batch, seq, kv_len, d, dv, heads, past = 0;
  Mask mask = Mask::kNone;
  bool bnsh = false, bias = true, causal = false;
  int ab = 0;  // attention_bias: 0 none, 1 [B,1,S,T], 2 [1,N,S,T]
  std::string Name() const {
    return "B" + std::to_string(batch) + " S" + std::to_string(seq) + " L" + std::to_string(kv_len) + " D" +
           std::to_string(d) + " Dv" + std::to_string(dv) + " N" + std::to_string(heads) + " P" +
           std::to_string(past) + " mask" + std::to_string(static_cast<int>(mask)) + (bnsh ? " bnsh" : "") +
           (bias ? "" : " no-bias") + (causal ? " causal" : "") + " ab" + std::to_string(ab);
  }
};

std::vector<Tensor> MakeInputs(const Config& c, uint64_t seed) {
  const int64_t h = c.d / c.heads, hv = c.dv / c.heads, total = c.past + c.kv_len;
  std::vector<Tensor> t(8);
  t[0] = RandomTensor(DataType::kFloat, {c.batch, c.seq, c.d}, seed);
  if (c.bnsh) {
    t[1] = RandomTensor(DataType::kFloat, {c.batch, c.heads, c.kv_len, h}, seed + 1);
    t[2] = RandomTensor(DataType::kFloat, {c.batch, c.heads, c.kv_len, hv}, seed + 2);
  } else {
    t[1] = RandomTensor(DataType::kFloat, {c.batch, c.kv_len, c.d}, seed + 1);
    t[2] = RandomTensor(DataType::kFloat, {c.batch, c.kv_len, c.dv}, seed + 2);
  }
  if (c.bias) t[3] = RandomTensor(DataType::kFloat, {2 * c.d + c.dv}, seed + 3);
  std::vector<int32_t> m;
  if (c.mask == Mask::kLengths) {
    for (int64_t b = 0; b < c.batch; ++b) m.push_back(static_cast<int32_t>(std::max<int64_t>(1, total - 2 * b)));
    t[4] = Tensor::FromVector(m, {c.batch});
  } else if (c.mask == Mask::kRaw2D || c.mask == Mask::kRaw3D) {
    const int64_t rows = c.mask == Mask::kRaw2D ? c.batch : c.batch * c.seq;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < total; ++j) m.push_back(j == 0 || (r + 2 * j) % 3 != 0 ? 1 : 0);
    t[4] = Tensor::FromVector(m, c.mask == Mask::kRaw2D ? Shape{c.batch, total} : Shape{c.batch, c.seq, total});
  }
  if (c.ab == 1) t[5] = RandomTensor(DataType::kFloat, {c.batch, 1, c.seq, total}, seed + 4, -2, 2);
  if (c.ab == 2) t[5] = RandomTensor(DataType::kFloat, {1, c.heads, c.seq, total}, seed + 4, -2, 2);
  if (c.past) {
    t[6] = RandomTensor(DataType::kFloat, {c.batch, c.heads, c.past, h}, seed + 5);
    t[7] = RandomTensor(DataType::kFloat, {c.batch, c.heads, c.past, hv}, seed + 6);
  }
  while (!t.empty() && !t.back().valid()) t.pop_back();
  return t;
}

struct Want {
  std::vector<double> y, present_k, present_v;
};

Want Expected(const Config& c, const std::vector<Tensor>& t) {
  const int64_t h = c.d / c.heads, hv = c.dv / c.heads, total = c.past + c.kv_len;
  auto at = [&](size_t i) { return i < t.size() && t[i].valid() ? ToDoubles(t[i]) : std::vector<double>{}; };
  const auto q = at(0), k = at(1), v = at(2), bias = at(3), mask = at(4), ab = at(5), pk = at(6), pv = at(7);
  const double scale = 1.0 / std::sqrt(static_cast<double>(h));
  Want w;
  w.y.assign(c.batch * c.seq * c.dv, 0);
  w.present_k.assign(c.batch * c.heads * total * h, 0);
  w.present_v.assign(c.batch * c.heads * total * hv, 0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t n = 0; n < c.heads; ++n) {
      auto key = [&](int64_t j, int64_t e) {
        if (j < c.past) return pk[((b * c.heads + n) * c.past + j) * h + e];
        const int64_t l = j - c.past;
        if (c.bnsh) return k[((b * c.heads + n) * c.kv_len + l) * h + e];
        return k[(b * c.kv_len + l) * c.d + n * h + e] + (bias.empty() ? 0 : bias[c.d + n * h + e]);
      };
      auto val = [&](int64_t j, int64_t e) {
        if (j < c.past) return pv[((b * c.heads + n) * c.past + j) * hv + e];
        const int64_t l = j - c.past;
        if (c.bnsh) return v[((b * c.heads + n) * c.kv_len + l) * hv + e];
        return v[(b * c.kv_len + l) * c.dv + n * hv + e] + (bias.empty() ? 0 : bias[2 * c.d + n * hv + e]);
      };
      for (int64_t j = 0; j < total; ++j) {
        for (int64_t e = 0; e < h; ++e) w.present_k[((b * c.heads + n) * total + j) * h + e] = key(j, e);
        for (int64_t e = 0; e < hv; ++e) w.present_v[((b * c.heads + n) * total + j) * hv + e] = val(j, e);
      }
      for (int64_t i = 0; i < c.seq; ++i) {
        std::vector<double> s(total);
        for (int64_t j = 0; j < total; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < h; ++e)
            dot += (q[(b * c.seq + i) * c.d + n * h + e] + (bias.empty() ? 0 : bias[n * h + e])) * key(j, e);
          bool masked = false;
          if (c.mask == Mask::kLengths) masked = j >= mask[b];
          if (c.mask == Mask::kRaw2D) masked = mask[b * total + j] <= 0;
          if (c.mask == Mask::kRaw3D) masked = mask[(b * c.seq + i) * total + j] <= 0;
          s[j] = scale * dot + (masked ? -10000.0 : 0.0);
          if (c.ab == 1) s[j] += ab[(b * c.seq + i) * total + j];
          if (c.ab == 2) s[j] += ab[(n * c.seq + i) * total + j];
          if (c.causal && c.seq > 1 && j > c.past + i) s[j] = -std::numeric_limits<double>::infinity();
        }
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < hv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < total; ++j) acc += s[j] / sum * val(j, e);
          w.y[(b * c.seq + i) * c.dv + n * hv + e] = acc;
        }
      }
    }
  return w;
}

void ExpectNear(const std::vector<double>& want, const Tensor& got, const char* what) {
  const auto g = ToDoubles(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << what << " " << i;
}

TEST(MsMultiHeadAttention, BothKernelsMatchTheDefinition) {
  std::vector<Config> configs = {
      {2, 5, 5, 32, 32, 4},
      {2, 4, 9, 32, 48, 4, 0, Mask::kLengths},
      {2, 5, 5, 32, 32, 4, 0, Mask::kRaw2D, false, true, false, 1},
      {2, 6, 7, 24, 24, 3, 0, Mask::kRaw3D, false, false},
      {1, 8, 8, 16, 16, 2, 0, Mask::kNone, false, true, true, 2},
      {2, 3, 3, 32, 32, 4, 6, Mask::kRaw2D, false, true, true},
      {1, 1, 1, 64, 64, 2, 11, Mask::kNone, false, true, true},
      {2, 3, 10, 32, 32, 4, 0, Mask::kLengths, true},
      {1, 4, 4, 3, 3, 3},
      {1, 5, 33, 34, 17, 1, 0, Mask::kRaw2D},
      {0, 3, 3, 8, 8, 2},
      {2, 0, 4, 8, 8, 2, 2},
  };
  uint64_t seed = 900;
  for (const Config& c : configs) {
    seed += 10;
    const std::vector<Tensor> in = MakeInputs(c, seed);
    const Want want = Expected(c, in);
    for (bool reference : {true, false})
      for (int threads : {1, 2}) {
        if (!reference && !sgemm::Available()) continue;
        SCOPED_TRACE(c.Name() + (reference ? " reference" : " sgemm") + " threads " + std::to_string(threads));
        RunOptions opts;
        opts.want_reference = reference;
        opts.threads = threads;
        OpSpec spec("MultiHeadAttention", 1, "com.microsoft");
        spec.Attr("num_heads", c.heads).Outputs(3);
        if (c.causal) spec.Attr("unidirectional", 1);
        auto got = RunKernel(spec, in, opts);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const int64_t total = c.past + c.kv_len;
        EXPECT_EQ((*got)[0].shape(), (Shape{c.batch, c.seq, c.dv}));
        EXPECT_EQ((*got)[1].shape(), (Shape{c.batch, c.heads, total, c.d / c.heads}));
        EXPECT_EQ((*got)[2].shape(), (Shape{c.batch, c.heads, total, c.dv / c.heads}));
        ExpectNear(want.y, (*got)[0], "output");
        ExpectNear(want.present_k, (*got)[1], "present_key");
        ExpectNear(want.present_v, (*got)[2], "present_value");
      }
  }
}

TEST(MsMultiHeadAttention, BadInputsAndAttributesNameTheProblem) {
  const Config c{2, 3, 3, 12, 12, 2};
  const std::vector<Tensor> in = MakeInputs(c, 7);
  const OpSpec spec = OpSpec("MultiHeadAttention", 1, "com.microsoft").Attr("num_heads", 2);
  auto expect_error = [](const Result<std::vector<Tensor>>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
  };
  auto with = [&](size_t slot, Tensor t) {
    std::vector<Tensor> v = in;
    v.resize(std::max(v.size(), slot + 1));
    v[slot] = std::move(t);
    return v;
  };
  auto f = [](const Shape& s) { return RandomTensor(DataType::kFloat, s, 3); };
  auto ints = [](const std::vector<int32_t>& v, const Shape& s) { return Tensor::FromVector(v, s); };
  expect_error(RunKernel(OpSpec("MultiHeadAttention", 1, "com.microsoft"), in), "num_heads must be set");
  expect_error(RunKernel(spec, with(0, f({2, 3, 2, 3, 6}))), "packed QKV (a 5-D query) is not supported");
  expect_error(RunKernel(spec, with(1, f({2, 3, 2, 2, 6}))), "packed KV (a 5-D key) is not supported");
  expect_error(RunKernel(spec, with(2, Tensor())), "key and value are required");
  expect_error(RunKernel(spec, with(0, f({2, 12}))), "query must be 3-D");
  expect_error(RunKernel(spec, with(0, f({2, 3, 13}))), "query hidden size 13 is not a multiple of num_heads 2");
  expect_error(RunKernel(spec, with(1, f({2, 3, 10}))), "key must be [2, kv_length, 12]");
  expect_error(RunKernel(spec, with(2, f({2, 3, 7}))), "value hidden size 7 is not a multiple of num_heads 2");
  expect_error(RunKernel(spec, with(1, f({2, 2, 3, 6}))), "4-D key and value must both be [2, 2, kv_length, 6]");
  expect_error(RunKernel(spec, with(3, f({35}))), "bias must be [36]");
  expect_error(RunKernel(spec, with(4, ints({3, 3, 3, 3}, {4}))), "key_padding_mask [4] must be [2], [2,3] or [2,3,3]");
  expect_error(RunKernel(spec, with(4, ints(std::vector<int32_t>(8, 1), {8}))), "[3 * batch + 2] is not supported");
  expect_error(RunKernel(spec, with(4, ints({1, -1}, {2}))), "key_padding_mask[1] = -1 is negative");
  expect_error(RunKernel(spec, with(5, f({2, 2, 3, 4}))), "attention_bias must be [2 or 1, 2 or 1, 3, 3]");
  expect_error(RunKernel(spec, with(6, f({2, 2, 1, 6}))), "past_key and past_value must be given together");
  std::vector<Tensor> past = with(7, f({2, 2, 1, 5}));
  past[6] = f({2, 2, 1, 6});
  expect_error(RunKernel(spec, past), "past_key must be [2, 2, past_length, 6] and past_value [2, 2, past_length, 6]");
  std::vector<Tensor> bnsh_past = past;
  bnsh_past[1] = f({2, 2, 3, 6});
  bnsh_past[2] = f({2, 2, 3, 6});
  bnsh_past[7] = f({2, 2, 1, 6});
  expect_error(RunKernel(spec, bnsh_past), "past_key/past_value need 3-D key and value");
  expect_error(RunKernel(spec, with(8, ints({0}, {1}))), "past_sequence_length and cache_indirection");
  expect_error(RunKernel(OpSpec(spec).Outputs(4), in), "the qk output is not supported");
  expect_error(RunKernel(spec, with(0, RandomTensor(DataType::kInt32, {2, 3, 12}, 1))), "query must be float32");
}

}  // namespace
}  // namespace strata
