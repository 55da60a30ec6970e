// com.microsoft GroupQueryAttention (cpu/gqa_contrib.cc): the reference and the SGEMM kernel
// against grouped-query attention computed here in double from its definition: first
// prompts (padded rows too), continued prompts, token generation over ragged batches,
// present caches longer than the total (a shared buffer), packed QKV, in-op rotary (halves
// and pairs, given positions), local windows, softcap, smooth softmax, head sinks and
// attention_bias, one and two threads; each bad input or attribute gets an error naming it.
// (Against ONNX Runtime: contrib_parity.py.)
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

struct Config {
  int64_t batch, seq, heads, kv_heads, h, past, total;
  std::vector<int32_t> seqlens;
  bool packed = false, rotary = false, interleaved = false, pos_ids = false, ab = false, sink = false, smooth = false;
  int64_t window = -1;
  float softcap = 0;
  std::string Name() const {
    std::string s = "B" + std::to_string(batch) + " S" + std::to_string(seq) + " N" + std::to_string(heads) + "/" +
                    std::to_string(kv_heads) + " H" + std::to_string(h) + " P" + std::to_string(past) + " T" +
                    std::to_string(total);
    if (packed) s += " packed";
    if (rotary) s += interleaved ? " rotary-pairs" : " rotary";
    if (pos_ids) s += " pos";
    if (ab) s += " ab";
    if (sink) s += " sink";
    if (smooth) s += " smooth";
    if (window > 0) s += " window" + std::to_string(window);
    if (softcap > 0) s += " softcap";
    return s;
  }
};

constexpr int64_t kMaxPos = 40;

std::vector<Tensor> MakeInputs(const Config& c, uint64_t seed) {
  std::vector<Tensor> t(12);
  const int64_t nq = c.heads * c.h, nkv = c.kv_heads * c.h;
  t[0] = RandomTensor(DataType::kFloat, {c.batch, c.seq, c.packed ? nq + 2 * nkv : nq}, seed);
  if (!c.packed) {
    t[1] = RandomTensor(DataType::kFloat, {c.batch, c.seq, nkv}, seed + 1);
    t[2] = RandomTensor(DataType::kFloat, {c.batch, c.seq, nkv}, seed + 2);
  }
  if (c.past) {
    t[3] = RandomTensor(DataType::kFloat, {c.batch, c.kv_heads, c.past, c.h}, seed + 3);
    t[4] = RandomTensor(DataType::kFloat, {c.batch, c.kv_heads, c.past, c.h}, seed + 4);
  }
  t[5] = Tensor::FromVector(c.seqlens, {c.batch});
  t[6] = Tensor::FromVector(std::vector<int32_t>{static_cast<int32_t>(c.total)}, {1});
  if (c.rotary) {
    t[7] = RandomTensor(DataType::kFloat, {kMaxPos, c.h / 4}, seed + 5);
    t[8] = RandomTensor(DataType::kFloat, {kMaxPos, c.h / 4}, seed + 6);
  }
  if (c.pos_ids) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < c.batch * c.seq; ++i) p.push_back((i * 7 + 3) % kMaxPos);
    t[9] = Tensor::FromVector(p, {c.batch, c.seq});
  }
  if (c.ab) t[10] = RandomTensor(DataType::kFloat, {1, c.heads, c.seq, c.total}, seed + 7, -2, 2);
  if (c.sink) t[11] = RandomTensor(DataType::kFloat, {c.heads}, seed + 8);
  while (!t.empty() && !t.back().valid()) t.pop_back();
  return t;
}

struct Want {
  std::vector<double> y, pk, pv;
};

Want Expected(const Config& c, const std::vector<Tensor>& t) {
  auto at = [&](size_t i) { return i < t.size() && t[i].valid() ? ToDoubles(t[i]) : std::vector<double>{}; };
  const auto q = at(0), k = at(1), v = at(2), pastk = at(3), pastv = at(4), cs = at(7), sn = at(8), ab = at(10),
             sink = at(11);
  const std::vector<double> pos = at(9);
  const int64_t H = c.h, nq = c.heads * H, nkv = c.kv_heads * H, qw = c.packed ? nq + 2 * nkv : nq;
  const int64_t plen = std::max(c.total, c.past), half = H / 4;
  const bool first = c.seq == c.total;
  Want w;
  w.y.assign(c.batch * c.seq * nq, 0);
  w.pk.assign(c.batch * c.kv_heads * plen * H, 0);
  w.pv.assign(w.pk.size(), 0);
  auto position = [&](int64_t b, int64_t s, int64_t past) -> int64_t {
    if (c.pos_ids) return first ? static_cast<int64_t>(pos[0]) + s : static_cast<int64_t>(pos[b * c.seq + s]);
    return past + s;
  };
  auto rotate = [&](std::vector<double>& x, int64_t p) {
    for (int64_t i = 0; i < half; ++i) {
      const int64_t i0 = c.interleaved ? 2 * i : i, i1 = c.interleaved ? 2 * i + 1 : i + half;
      const double co = cs[p * half + i], si = sn[p * half + i], a = x[i0], bb = x[i1];
      x[i0] = a * co - bb * si;
      x[i1] = bb * co + a * si;
    }
  };
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t total = c.seqlens[b] + 1, past = first ? 0 : total - c.seq;
    for (int64_t g = 0; g < c.kv_heads; ++g) {
      double* kr = &w.pk[(b * c.kv_heads + g) * plen * H];
      double* vr = &w.pv[(b * c.kv_heads + g) * plen * H];
      for (int64_t j = 0; j < past; ++j)
        for (int64_t e = 0; e < H; ++e) {
          kr[j * H + e] = pastk[((b * c.kv_heads + g) * c.past + j) * H + e];
          vr[j * H + e] = pastv[((b * c.kv_heads + g) * c.past + j) * H + e];
        }
      for (int64_t s = 0; s < c.seq; ++s) {
        std::vector<double> kk(H);
        for (int64_t e = 0; e < H; ++e) {
          kk[e] = c.packed ? q[(b * c.seq + s) * qw + nq + g * H + e] : k[(b * c.seq + s) * nkv + g * H + e];
          vr[(past + s) * H + e] = c.packed ? q[(b * c.seq + s) * qw + nq + nkv + g * H + e]
                                            : v[(b * c.seq + s) * nkv + g * H + e];
        }
        if (c.rotary) rotate(kk, position(b, s, past));
        for (int64_t e = 0; e < H; ++e) kr[(past + s) * H + e] = kk[e];
      }
    }
    for (int64_t n = 0; n < c.heads; ++n) {
      const int64_t g = n / (c.heads / c.kv_heads);
      const double* kr = &w.pk[(b * c.kv_heads + g) * plen * H];
      const double* vr = &w.pv[(b * c.kv_heads + g) * plen * H];
      for (int64_t s = 0; s < c.seq; ++s) {
        std::vector<double> qq(H);
        for (int64_t e = 0; e < H; ++e) qq[e] = q[(b * c.seq + s) * qw + n * H + e];
        if (c.rotary) rotate(qq, position(b, s, past));
        const int64_t qpos = past + s, hi = std::min(qpos, total - 1);
        const int64_t lo = c.window > 0 ? std::max<int64_t>(0, qpos - c.window + 1) : 0;
        std::vector<double> x;
        for (int64_t j = lo; j <= hi; ++j) {
          double d = 0;
          for (int64_t e = 0; e < H; ++e) d += qq[e] * kr[j * H + e];
          d /= std::sqrt(static_cast<double>(H));
          if (c.softcap > 0) d = c.softcap * std::tanh(d / c.softcap);
          if (c.ab) d += ab[(n * c.seq + s) * c.total + j];
          x.push_back(d);
        }
        const bool has_sink = c.sink || c.smooth;
        const double sk = c.sink ? sink[n] : 0.0;
        double mx = has_sink ? sk : -std::numeric_limits<double>::infinity(), sum = 0;
        for (double d : x) mx = std::max(mx, d);
        if (has_sink) sum += std::exp(sk - mx);
        for (double& d : x) sum += (d = std::exp(d - mx));
        for (int64_t e = 0; e < H; ++e) {
          double acc = 0;
          for (int64_t j = lo; j <= hi; ++j) acc += x[j - lo] / sum * vr[j * H + e];
          w.y[(b * c.seq + s) * nq + n * H + e] = acc;
        }
      }
    }
  }
  return w;
}

OpSpec Spec(const Config& c) {
  OpSpec s("GroupQueryAttention", 1, "com.microsoft");
  s.Attr("num_heads", c.heads).Attr("kv_num_heads", c.kv_heads).Outputs(3);
  if (c.rotary) s.Attr("do_rotary", 1);
  if (c.interleaved) s.Attr("rotary_interleaved", 1);
  if (c.window > 0) s.Attr("local_window_size", c.window);
  if (c.softcap > 0) s.Attr("softcap", c.softcap);
  if (c.smooth) s.Attr("smooth_softmax", 1);
  return s;
}

TEST(MsGroupQueryAttention, BothKernelsMatchTheDefinition) {
  std::vector<Config> configs = {
      {2, 4, 4, 2, 32, 0, 4, {3, 3}},
      {2, 6, 4, 2, 32, 0, 6, {5, 2}},
      {2, 1, 4, 2, 32, 7, 8, {7, 4}},
      {2, 1, 4, 4, 16, 12, 9, {8, 5}},
      {1, 3, 2, 1, 16, 5, 8, {7}},
      {2, 9, 6, 3, 8, 0, 9, {8, 8}},
      {1, 1, 1, 1, 1, 0, 1, {0}},
      {1, 17, 3, 1, 33, 0, 17, {16}},
  };
  configs[1].rotary = true;
  configs[3].rotary = configs[3].interleaved = true;
  configs[4].rotary = configs[4].pos_ids = true;
  configs[5].packed = true;
  configs[5].window = 3;
  configs[5].softcap = 2.0f;
  configs[0].ab = configs[0].smooth = true;
  configs[2].sink = true;
  configs[7].window = 5;
  uint64_t seed = 1000;
  for (const Config& c : configs) {
    seed += 20;
    const std::vector<Tensor> in = MakeInputs(c, seed);
    const Want want = Expected(c, in);
    for (bool reference : {true, false})
      for (int threads : {1, 2}) {
        if (!reference && !sgemm::Available()) continue;
        SCOPED_TRACE(c.Name() + (reference ? " reference" : " sgemm") + " threads " + std::to_string(threads));
        RunOptions opts;
        opts.want_reference = reference;
        opts.threads = threads;
        auto got = RunKernel(Spec(c), in, opts);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const int64_t plen = std::max(c.total, c.past);
        EXPECT_EQ((*got)[1].shape(), (Shape{c.batch, c.kv_heads, plen, c.h}));
        for (int o = 0; o < 3; ++o) {
          const std::vector<double>& wv = o == 0 ? want.y : o == 1 ? want.pk : want.pv;
          const auto g = ToDoubles((*got)[o]);
          ASSERT_EQ(g.size(), wv.size()) << "output " << o;
          for (size_t i = 0; i < g.size(); ++i)
            ASSERT_NEAR(g[i], wv[i], 2e-5 * (1 + std::fabs(wv[i]))) << "output " << o << " element " << i;
        }
      }
  }
}

TEST(MsGroupQueryAttention, BadInputsAndAttributesNameTheProblem) {
  Config c{2, 1, 4, 2, 16, 6, 7, {6, 3}};
  c.rotary = true;
  const std::vector<Tensor> in = MakeInputs(c, 5);
  const OpSpec spec = Spec(c);
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
  auto i32 = [](const std::vector<int32_t>& v, const Shape& s) { return Tensor::FromVector(v, s); };
  ASSERT_TRUE(RunKernel(spec, in).ok());
  expect_error(RunKernel(OpSpec(spec).Attr("kv_num_heads", 3), in), "num_heads a multiple of kv_num_heads");
  expect_error(RunKernel(OpSpec(spec).Attr("qk_output", 1), in), "qk_output is not supported");
  expect_error(RunKernel(OpSpec(spec).Outputs(4), in), "the output_qk output is not supported");
  expect_error(RunKernel(spec, with(12, f({1}))), "input 12 (quantized caches, q/k norms) is not supported");
  expect_error(RunKernel(spec, with(2, Tensor())), "key and value must be given together");
  expect_error(RunKernel(spec, with(1, f({2, 1, 16}))), "key and value must be [2, 1, 32]");
  expect_error(RunKernel(spec, with(0, f({2, 1, 63}))), "query hidden 63 is not a multiple of 4");
  expect_error(RunKernel(spec, with(3, f({2, 2, 5, 16}))), "past_key and past_value must be [2, 2, past, 16]");
  expect_error(RunKernel(spec, with(5, i32({6}, {1}))), "seqlens_k must be int32 [2]");
  expect_error(RunKernel(spec, with(5, i32({7, 3}, {2}))), "seqlens_k[0] = 7 must be in [0, 7)");
  expect_error(RunKernel(spec, with(5, i32({6, -1}, {2}))), "seqlens_k[1] = -1 must be in [0, 7)");
  expect_error(RunKernel(spec, with(6, i32({0}, {1}))), "total_sequence_length 0 must be >= 1");
  expect_error(RunKernel(spec, with(6, i32({7, 7}, {2}))), "total_sequence_length must be one int32 value");
  expect_error(RunKernel(spec, with(7, Tensor())), "do_rotary needs cos_cache and sin_cache");
  expect_error(RunKernel(spec, with(7, f({kMaxPos, 9}))), "cos_cache and sin_cache must be 2-D of one shape");
  expect_error(RunKernel(spec, with(9, Tensor::FromVector(std::vector<int64_t>{3, kMaxPos}, {2, 1}))),
               "position 40 of batch 1, token 0 is outside the rotary cache's 40 positions");
  expect_error(RunKernel(spec, with(9, i32({3, 4}, {2, 1}))), "position_ids must be int64 [2, >= 1]");
  expect_error(RunKernel(spec, with(10, f({2, 4, 1, 6}))), "attention_bias must be [2 or 1, 4 or 1, 1, 7]");
  expect_error(RunKernel(spec, with(11, f({3}))), "head_sink must be [4]");
  // Past context needs batch 1 for a multi-token prompt, and past rows the buffer holds.
  Config cont{2, 3, 4, 2, 16, 5, 8, {7, 7}};
  expect_error(RunKernel(Spec(cont), MakeInputs(cont, 9)), "batch must be 1 when a prompt of 3 tokens follows");
  Config short_past{1, 1, 4, 2, 16, 2, 8, {7}};
  expect_error(RunKernel(Spec(short_past), MakeInputs(short_past, 9)), "needs 7 past tokens but past_key holds 2");
  Config long_prompt{1, 4, 4, 2, 16, 0, 4, {5}};
  expect_error(RunKernel(Spec(long_prompt), MakeInputs(long_prompt, 9)), "seqlens_k[0] = 5 must be in [0, 4)");
}

}  // namespace
}  // namespace strata
