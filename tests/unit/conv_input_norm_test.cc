// NhwcConv's fused channel Concat and pre-activation BatchNormalization (inputs 5-8 and
// input_parts, cpu/conv_nhwc_input_norm.h): each kernel the registry picks computes
// conv(act(BN(Concat(parts)))) against the naive conv of that input made whole. The
// pointwise SGEMM conv gathers its A tiles from the parts; other kernels (3x3 SGEMM,
// Winograd, depthwise, grouped) run on a transformed copy. With the fused residual (in place
// too), 1 and 2 threads, odd and empty part widths, a one-pixel map, an empty batch; a NaN stays NaN
// through the clamp; bad parts or norm parameters give errors naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/conv_nhwc_input_norm.h"
#include "cpu/sgemm.h"
#include "nhwc_conv_harness.h"

// ConvCase literals name only the fields each case needs.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace strata {
namespace {

using namespace nhwc_test;  // NOLINT(google-build-using-namespace): the shared harness

struct Norm {
  Tensor scale, b, mean, var;
  float eps = 1e-3f;
  std::string act;  // "", "Relu" or "Clip"
  float lo = 0, hi = 0;
};

Norm RandomNorm(int64_t c, uint32_t seed, const std::string& act) {
  Norm n{Random({c}, seed), Random({c}, seed + 1, 0.5f), Random({c}, seed + 2, 0.5f), Random({c}, seed + 3)};
  for (int64_t i = 0; i < c; ++i) n.var.mutable_data<float>()[i] = std::fabs(n.var.data<float>()[i]) + 0.1f;
  n.act = act;
  if (act == "Clip") n.lo = -0.25f, n.hi = 0.5f;
  if (act == "Relu") n.lo = 0, n.hi = INFINITY;
  return n;
}

// The input the conv reads: the parts concatenated over channels, then the norm (if any).
Tensor WholeInput(const std::vector<Tensor>& parts, const Norm* norm) {
  int64_t c = 0;
  for (const Tensor& p : parts) c += p.dim(3);
  const int64_t rows = parts[0].dim(0) * parts[0].dim(1) * parts[0].dim(2);
  Tensor x = Tensor::Allocate(DataType::kFloat, {parts[0].dim(0), parts[0].dim(1), parts[0].dim(2), c}).value();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t k = 0;
    for (const Tensor& p : parts)
      for (int64_t j = 0; j < p.dim(3); ++j, ++k) {
        double v = p.data<float>()[r * p.dim(3) + j];
        if (norm) {
          v = (v - norm->mean.data<float>()[k]) * norm->scale.data<float>()[k] /
                  std::sqrt(static_cast<double>(norm->var.data<float>()[k]) + norm->eps) +
              norm->b.data<float>()[k];
          if (!norm->act.empty()) v = v < norm->lo ? norm->lo : (v > norm->hi ? norm->hi : v);
        }
        x.mutable_data<float>()[r * c + k] = static_cast<float>(v);
      }
  }
  return x;
}

// The NhwcConv node FuseNhwcConvInputNorm makes, run on the registry's kernel. `edit` may
// spoil the node before creation (the bad-encoding tests).
KernelRun RunInputNorm(const ConvCase& cc, const std::vector<Tensor>& parts, const Norm* norm, const Tensor& w,
                       const Tensor* b, const Tensor* r, ThreadPool* pool, bool in_place = false,
                       void (*edit)(Node&, Graph&) = nullptr) {
  Graph g;
  Node node = NhwcConvNode(cc);
  std::vector<Value> vals;
  auto add = [&](const Tensor* t, const char* name, bool constant) {
    if (!t) {
      node.inputs.push_back(-1);
      vals.emplace_back();
      return;
    }
    const int v = g.AddValue(name);
    if (constant) g.initializers[v] = *t;
    node.inputs.push_back(v);
    vals.push_back(Value(*t));
  };
  Tensor r_copy;
  if (r && in_place) r_copy = *r->Clone();
  add(&parts[0], "x0", false);
  add(&w, "w", true);
  add(b, "b", true);
  add(r ? (in_place ? &r_copy : r) : nullptr, "r", false);
  add(nullptr, "s", false);
  if (norm) {
    add(&norm->scale, "bn_scale", true);
    add(&norm->b, "bn_b", true);
    add(&norm->mean, "bn_mean", true);
    add(&norm->var, "bn_var", true);
    node.attrs["input_norm_epsilon"] = Attribute::Float(norm->eps);
    if (!norm->act.empty()) {
      node.attrs["input_norm_activation"] = Attribute::String(norm->act);
      node.attrs["input_norm_activation_min"] = Attribute::Float(norm->lo);
      node.attrs["input_norm_activation_max"] = Attribute::Float(norm->hi);
    }
  } else {
    for (int i = 0; i < 4; ++i) add(nullptr, "", false);
  }
  for (size_t i = 1; i < parts.size(); ++i) add(&parts[i], ("x" + std::to_string(i)).c_str(), false);
  if (parts.size() > 1) node.attrs["input_parts"] = Attribute::Int(static_cast<int64_t>(parts.size()));
  while (node.inputs.size() > 2 && node.inputs.back() < 0) {
    node.inputs.pop_back();
    vals.pop_back();
  }
  node.outputs = {g.AddValue("y")};
  if (edit) edit(node, g);
  return RunNhwcConvNode(node, g, vals, pool, r && in_place ? &r_copy : nullptr);
}

std::vector<Tensor> RandomParts(const ConvCase& cc, const std::vector<int64_t>& widths, uint32_t seed) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < widths.size(); ++i)
    parts.push_back(Random({cc.n, cc.h, cc.w, widths[i]}, seed + static_cast<uint32_t>(i)));
  return parts;
}

struct NormCase {
  ConvCase cc;
  std::vector<int64_t> widths;  // the parts' channels (sum = cc.c)
  const char* act;              // the norm's activation; nullptr = no norm
  const char* impl;
  const char* why;
};

TEST(NhwcConvInputNorm, EveryKernelMatchesTheConvOfTheWholeInput) {
  if (!sgemm::Available()) GTEST_SKIP() << "the NHWC conv kernels need AVX-512F";
  ThreadPool pool2(2);
  const NormCase cases[] = {
      // DenseNet's dense layer: 64 + 32 + 32 channels, BN + Relu, 1x1 conv to 128 + Relu.
      {{.h = 7, .w = 9, .c = 128, .m = 128, .kh = 1, .kw = 1, .relu = true},
       {64, 32, 32},
       "Relu",
       "nhwc-sgemm",
       "dense layer"},
      // Odd widths: a part boundary inside a 16-lane vector and inside a K block.
      {{.n = 2, .h = 5, .w = 3, .c = 37, .m = 19, .kh = 1, .kw = 1},
       {3, 17, 1, 16},
       "Clip",
       "nhwc-sgemm",
       "odd widths, Clip"},
      // K past one 256-float block: a part spans two blocks.
      {{.h = 4, .w = 4, .c = 300, .m = 40, .kh = 1, .kw = 1}, {150, 150}, "Relu", "nhwc-sgemm", "two K blocks"},
      // Parts alone (SqueezeNet's fire output into the next squeeze conv) and the norm alone.
      {{.h = 6, .w = 6, .c = 128, .m = 16, .kh = 1, .kw = 1, .relu = true},
       {64, 64},
       nullptr,
       "nhwc-sgemm",
       "parts, no norm"},
      {{.h = 6, .w = 5, .c = 24, .m = 33, .kh = 1, .kw = 1}, {24}, "", "nhwc-sgemm", "norm, no activation, one part"},
      {{.h = 1, .w = 1, .c = 5, .m = 1, .kh = 1, .kw = 1}, {2, 3}, "Relu", "nhwc-sgemm", "one pixel, one output"},
      // A part of no channels (Concat allows one) between others, and first.
      {{.h = 3, .w = 4, .c = 20, .m = 8, .kh = 1, .kw = 1}, {0, 4, 0, 16}, "Relu", "nhwc-sgemm", "empty parts"},
      {{.h = 5, .w = 5, .c = 20, .m = 8, .pads = {1, 1, 1, 1}}, {4, 0, 16}, nullptr, "nhwc-sgemm", "empty part, 3x3"},
      {{.n = 0, .h = 4, .w = 4, .c = 8, .m = 8, .kh = 1, .kw = 1}, {4, 4}, "Relu", "nhwc-sgemm", "empty batch"},
      // Other kernels read the transformed copy.
      {{.n = 2, .h = 7, .w = 6, .c = 24, .m = 33, .sh = 2, .sw = 2, .pads = {1, 1, 1, 1}},
       {8, 16},
       "Relu",
       "nhwc-sgemm",
       "3x3 stride 2 on the SGEMM"},
      {{.h = 16, .w = 16, .c = 32, .m = 32, .pads = {1, 1, 1, 1}}, {16, 16}, "Relu", "winograd-f4x4", "Winograd"},
      {{.h = 9, .w = 9, .c = 48, .m = 48, .pads = {1, 1, 1, 1}, .group = 48},
       {16, 32},
       "Relu",
       "nhwc-depthwise",
       "depthwise"},
      {{.h = 8, .w = 8, .c = 32, .m = 32, .pads = {1, 1, 1, 1}, .group = 8},
       {20, 12},
       "Clip",
       "nhwc-grouped",
       "grouped"},
  };
  uint32_t seed = 100;
  for (const NormCase& nc : cases) {
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      const ConvCase& cc = nc.cc;
      SCOPED_TRACE(std::string(nc.why) + ", " + Name(cc) + (pool ? ", 2 threads" : ", 1 thread"));
      const std::vector<Tensor> parts = RandomParts(cc, nc.widths, seed);
      const Norm norm = RandomNorm(cc.c, seed + 50, nc.act ? nc.act : "");
      const Tensor w = Random({cc.m, cc.c / cc.group, cc.kh, cc.kw}, seed + 60, 0.5f);
      const Tensor b = Random({cc.m}, seed + 61);
      seed += 7;
      const Tensor want = NaiveConv(cc, WholeInput(parts, nc.act ? &norm : nullptr), w, &b, nullptr);
      for (int rep = 0; rep < 2; ++rep) {  // a second run reuses whatever the first kept
        KernelRun got = RunInputNorm(cc, parts, nc.act ? &norm : nullptr, w, &b, nullptr, pool);
        ASSERT_TRUE(got.create.ok()) << got.create.ToString();
        ASSERT_TRUE(got.compute.ok()) << got.compute.ToString();
        EXPECT_EQ(got.impl, nc.impl);
        if (cc.n == 0) {
          EXPECT_EQ(got.y.num_elements(), 0);
          continue;
        }
        ExpectNear(got.y, want, nc.why);
      }
    }
  }
}

TEST(NhwcConvInputNorm, WithResidualInPlaceAndNaN) {
  if (!sgemm::Available()) GTEST_SKIP() << "the NHWC conv kernels need AVX-512F";
  ThreadPool pool2(2);
  ConvCase cc{.n = 2, .h = 5, .w = 6, .c = 48, .m = 40, .kh = 1, .kw = 1, .relu = true, .residual = true};
  std::vector<Tensor> parts = RandomParts(cc, {16, 32}, 7);
  const Norm norm = RandomNorm(cc.c, 9, "Relu");
  const Tensor w = Random({cc.m, cc.c, 1, 1}, 11, 0.5f), b = Random({cc.m}, 12);
  const Tensor r = Random({cc.n, cc.h, cc.w, cc.m}, 13);
  const Tensor want = NaiveConv(cc, WholeInput(parts, &norm), w, &b, &r);
  for (bool in_place : {false, true})
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      SCOPED_TRACE(std::string(in_place ? "in place" : "separate") + (pool ? ", 2 threads" : ", 1 thread"));
      KernelRun got = RunInputNorm(cc, parts, &norm, w, &b, &r, pool, in_place);
      ASSERT_TRUE(got.compute.ok()) << got.create.ToString() << got.compute.ToString();
      EXPECT_EQ(got.in_place, in_place);
      ExpectNear(got.y, want, "residual");
    }
  // A NaN in a part stays NaN through the norm's clamp (compares, as NhwcBatchNormalization),
  // so the pixel's outputs are NaN and the other pixels are untouched.
  parts[1].mutable_data<float>()[5 * 32 + 3] = std::numeric_limits<float>::quiet_NaN();
  KernelRun got = RunInputNorm(cc, parts, &norm, w, &b, nullptr, nullptr);
  ASSERT_TRUE(got.compute.ok()) << got.compute.ToString();
  for (int64_t o = 0; o < cc.m; ++o) EXPECT_TRUE(std::isnan(got.y.data<float>()[5 * cc.m + o])) << o;
  EXPECT_FALSE(std::isnan(got.y.data<float>()[4 * cc.m]));
}

TEST(NhwcConvInputNorm, BadPartsGiveAClearError) {
  if (!sgemm::Available()) GTEST_SKIP() << "the NHWC conv kernels need AVX-512F";
  const ConvCase pw{.h = 4, .w = 4, .c = 8, .m = 4, .kh = 1, .kw = 1};
  const ConvCase k3{.h = 4, .w = 4, .c = 8, .m = 4, .pads = {1, 1, 1, 1}};
  const Tensor w1 = Random({4, 8, 1, 1}, 1), w3 = Random({4, 8, 3, 3}, 2);
  const Norm norm = RandomNorm(8, 3, "Relu");
  struct Bad {
    std::vector<Tensor> parts;
    const char* want;
  };
  const Bad bad[] = {
      {{Random({1, 4, 4, 4}, 5), Random({1, 4, 5, 4}, 6)}, "input part 1 of X has shape [1,4,5,4]"},
      {{Random({1, 4, 4, 4}, 5), Random({1, 4, 4, 3}, 6)}, "have 7 channels in all but W has 8"},
      {{Random({1, 4, 4, 4}, 5), Random({1, 4, 4}, 6)}, "input part 1 of X (input 9) must be a float32 NHWC tensor"},
  };
  for (const ConvCase* cc : {&pw, &k3})
    for (const Bad& b : bad) {
      KernelRun got = RunInputNorm(*cc, b.parts, &norm, cc->kh == 1 ? w1 : w3, nullptr, nullptr, nullptr);
      ASSERT_TRUE(got.create.ok()) << got.create.ToString();
      EXPECT_FALSE(got.compute.ok()) << b.want;
      EXPECT_NE(got.compute.message().find(b.want), std::string::npos) << got.compute.ToString();
      EXPECT_NE(got.compute.message().find("conv0"), std::string::npos) << got.compute.ToString();
    }
}

TEST(NhwcConvInputNorm, BadEncodingFailsAtCreation) {
  const ConvCase cc{.h = 4, .w = 4, .c = 8, .m = 4, .kh = 1, .kw = 1};
  const std::vector<Tensor> parts = RandomParts(cc, {4, 4}, 21);
  const Norm norm = RandomNorm(8, 22, "Relu");
  const Tensor w = Random({4, 8, 1, 1}, 23);
  struct Bad {
    void (*edit)(Node&, Graph&);
    const char* want;
  };
  const Bad bad[] = {
      {[](Node& n, Graph&) { n.attrs["input_parts"] = Attribute::Int(3); }, "input_parts 3 needs inputs"},
      {[](Node& n, Graph&) { n.attrs["input_parts"] = Attribute::Int(1); }, "input_parts 1 needs inputs"},
      {[](Node& n, Graph&) { n.inputs[9] = -1; }, "input part 1 (input 9) is absent"},
      {[](Node& n, Graph& g) { g.initializers.erase(n.inputs[7]); }, "norm's mean (input 7) must be a constant"},
      {[](Node& n, Graph& g) { g.initializers[n.inputs[8]] = Random({7}, 1); }, "norm's var (input 8)"},
      {[](Node& n, Graph&) { n.attrs["input_norm_activation"] = Attribute::String("Gelu"); },
       "unsupported fused activation 'Gelu'"},
      {[](Node& n, Graph& g) { n.inputs[4] = g.AddValue("s"); }, "input scale (input 4) does not combine"},
  };
  for (const Bad& b : bad) {
    KernelRun got = RunInputNorm(cc, parts, &norm, w, nullptr, nullptr, nullptr, false, b.edit);
    EXPECT_FALSE(got.create.ok()) << b.want;
    EXPECT_NE(got.create.message().find(b.want), std::string::npos) << got.create.ToString();
    EXPECT_NE(got.create.message().find("conv0"), std::string::npos) << got.create.ToString();
  }
}

}  // namespace
}  // namespace strata
