// ProviderParity/*: one table of op cases, run on every accelerator provider (the "ref"
// test provider, Vulkan, CUDA) and compared with strata's CPU reference kernels through
// the shared harness (provider_harness.h). Edge sizes around the GEMM tiles (1, odd,
// 17, 33, 65) and empty tensors are included. A provider that is not usable here (no
// device, no driver) skips with one reason; a provider that declines a case it is
// required to run (`must`) fails, others may decline (the node would then run on the
// CPU in a session).
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "provider_harness.h"

namespace strata::testing {
namespace {

const std::set<std::string> kGpus = {"vulkan", "cuda"};
const std::set<std::string> kAll = {"ref", "vulkan", "cuda"};  // the ref test provider runs these too

struct Case {
  std::string name;
  OpSpec spec;
  std::vector<Tensor> inputs;
  std::vector<size_t> constants;
  std::set<std::string> must;  // providers that must accept the node
  double rtol = 1e-4, atol = 1e-5;
};

Tensor F(const Shape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return RandomTensor(DataType::kFloat, s, seed, lo, hi);
}
Tensor I64(const std::vector<int64_t>& v) {
  std::vector<double> d(v.begin(), v.end());
  return MakeTensor(DataType::kInt64, {static_cast<int64_t>(v.size())}, d);
}

void RunCases(const std::string& provider, const std::vector<Case>& cases) {
  const ProviderUnderTest& put = LoadProviderForTest(provider);
  if (!put.skip.empty()) GTEST_SKIP() << put.skip;
  int ran = 0, declined = 0;
  std::string declined_names;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RunOptions opts;
    opts.constant_inputs = c.constants;
    auto probe = RunOnProvider(provider, c.spec, c.inputs, opts);
    if (!probe.ok() && probe.status().code() == StatusCode::kUnsupported) {
      ++declined;
      declined_names += (declined_names.empty() ? "" : ", ") + c.name;
      EXPECT_FALSE(c.must.count(provider)) << provider << " must run this case: " << probe.status().ToString();
      continue;
    }
    ++ran;
    EXPECT_TRUE(ProviderMatchesReference(provider, c.spec, c.inputs, c.rtol, c.atol, opts));
  }
  std::printf("[ %s: %d cases matched the CPU reference, %d declined%s%s ]\n", provider.c_str(), ran, declined,
              declined ? ": " : "", declined_names.c_str());
}

class ProviderParity : public ::testing::TestWithParam<std::string> {};

std::vector<Case> GemmCases() {
  std::vector<Case> v;
  const int64_t dims[][3] = {{1, 1, 1}, {7, 13, 5}, {17, 33, 65}, {65, 31, 17}, {2, 64, 3}};
  uint64_t seed = 1;
  for (const auto& d : dims) {
    v.push_back({"MatMul " + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]),
                 OpSpec("MatMul", 13),
                 {F({d[0], d[1]}, seed++), F({d[1], d[2]}, seed++)},
                 {},
                 kAll});
  }
  v.push_back({"MatMul batched, B broadcast", OpSpec("MatMul", 13), {F({2, 3, 7, 9}, 20), F({9, 4}, 21)}, {}, kAll});
  v.push_back({"MatMul batched both", OpSpec("MatMul", 13), {F({2, 5, 6}, 22), F({2, 6, 3}, 23)}, {}, kGpus});
  v.push_back({"MatMul constant B", OpSpec("MatMul", 13), {F({5, 33}, 24), F({33, 17}, 25)}, {1}, kAll});
  v.push_back({"MatMul empty M", OpSpec("MatMul", 13), {F({0, 4}, 26), F({4, 3}, 27)}, {}, {}});
  v.push_back({"Gemm transA transB alpha beta",
               OpSpec("Gemm", 13).Attr("transA", 1).Attr("transB", 1).Attr("alpha", 0.5f).Attr("beta", 2.0f),
               {F({9, 7}, 30), F({5, 9}, 31), F({5}, 32)},
               {},
               kAll});
  v.push_back({"Gemm C [M,N]", OpSpec("Gemm", 13), {F({4, 6}, 33), F({6, 3}, 34), F({4, 3}, 35)}, {}, kAll});
  v.push_back({"Gemm C [1,N] constant weights",
               OpSpec("Gemm", 13).Attr("transB", 1),
               {F({3, 17}, 36), F({33, 17}, 37), F({1, 33}, 38)},
               {1, 2},
               kAll});
  v.push_back({"Gemm no C", OpSpec("Gemm", 13), {F({1, 65}, 39), F({65, 2}, 40)}, {}, kAll});
  return v;
}

std::vector<Case> ConvCases() {
  std::vector<Case> v;
  v.push_back({"Conv 3x3 pad 1",
               OpSpec("Conv", 11).Attr("pads", std::vector<int64_t>{1, 1, 1, 1}),
               {F({1, 3, 9, 9}, 50), F({4, 3, 3, 3}, 51), F({4}, 52)},
               {1, 2},
               kAll});
  v.push_back(
      {"Conv stride 2 dilation 2 batch 2",
       OpSpec("Conv", 11).Attr("strides", std::vector<int64_t>{2, 2}).Attr("dilations", std::vector<int64_t>{2, 2}),
       {F({2, 2, 11, 10}, 53), F({3, 2, 3, 3}, 54)},
       {1},
       kAll});
  v.push_back({"Conv group 2 asymmetric pads",
               OpSpec("Conv", 11).Attr("group", 2).Attr("pads", std::vector<int64_t>{0, 1, 2, 1}),
               {F({1, 4, 7, 7}, 55), F({6, 2, 3, 3}, 56), F({6}, 57)},
               {1, 2},
               kAll});
  v.push_back({"Conv depthwise",
               OpSpec("Conv", 11).Attr("group", 6).Attr("pads", std::vector<int64_t>{1, 1, 1, 1}),
               {F({1, 6, 8, 8}, 58), F({6, 1, 3, 3}, 59), F({6}, 60)},
               {1, 2},
               kAll});
  v.push_back({"Conv 1x1 17 channels", OpSpec("Conv", 11), {F({1, 17, 5, 5}, 61), F({33, 17, 1, 1}, 62)}, {1}, kAll});
  v.push_back({"Conv fused Clip(0,6)",
               OpSpec("Conv", 11).Attr("activation", "Clip").Attr("activation_min", 0.0f).Attr("activation_max", 6.0f),
               {F({1, 3, 6, 6}, 63, -4, 4), F({5, 3, 3, 3}, 64, -2, 2), F({5}, 65)},
               {1, 2},
               {"cuda", "vulkan"}});
  v.push_back({"MaxPool 3x3 stride 2 pad 1",
               OpSpec("MaxPool", 12)
                   .Attr("kernel_shape", std::vector<int64_t>{3, 3})
                   .Attr("strides", std::vector<int64_t>{2, 2})
                   .Attr("pads", std::vector<int64_t>{1, 1, 1, 1}),
               {F({1, 3, 9, 8}, 66)},
               {},
               kAll});
  v.push_back({"AveragePool ceil count_include_pad",
               OpSpec("AveragePool", 11)
                   .Attr("kernel_shape", std::vector<int64_t>{2, 2})
                   .Attr("strides", std::vector<int64_t>{2, 2})
                   .Attr("pads", std::vector<int64_t>{1, 1, 0, 0})
                   .Attr("ceil_mode", 1)
                   .Attr("count_include_pad", 1),
               {F({2, 2, 7, 7}, 67)},
               {},
               kGpus});
  v.push_back({"GlobalAveragePool", OpSpec("GlobalAveragePool", 1), {F({2, 5, 7, 3}, 68)}, {}, kGpus});
  return v;
}

std::vector<Case> ElementwiseCases() {
  std::vector<Case> v;
  v.push_back({"Add broadcast row", OpSpec("Add", 14), {F({2, 3, 4}, 70), F({4}, 71)}, {}, kAll});
  v.push_back({"Sub outer broadcast", OpSpec("Sub", 14), {F({3, 1}, 72), F({1, 5}, 73)}, {}, kGpus});
  v.push_back({"Mul same shape odd", OpSpec("Mul", 14), {F({17, 33}, 74), F({17, 33}, 75)}, {}, kGpus});
  v.push_back({"Div", OpSpec("Div", 14), {F({4, 5}, 76), F({5}, 77, 0.5, 2.0)}, {}, kGpus});
  v.push_back({"Pow", OpSpec("Pow", 15), {F({6, 7}, 78, 0.1, 3.0), F({7}, 79, -1.0, 2.0)}, {}, kGpus});
  v.push_back({"Add empty", OpSpec("Add", 14), {F({0, 3}, 80), F({3}, 81)}, {}, {}});
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp"})
    v.push_back({op, OpSpec(op, 13), {F({3, 65}, 82, -4, 4)}, {}, std::string(op) == "Relu" ? kAll : kGpus});
  v.push_back({"Sqrt", OpSpec("Sqrt", 13), {F({5, 9}, 83, 0.0, 4.0)}, {}, kGpus});
  v.push_back({"LeakyRelu", OpSpec("LeakyRelu", 16).Attr("alpha", 0.2f), {F({4, 9}, 84)}, {}, kGpus});
  v.push_back(
      {"Clip constant bounds",
       OpSpec("Clip", 13),
       {F({4, 9}, 85, -3, 3), MakeTensor(DataType::kFloat, {}, {-0.5}), MakeTensor(DataType::kFloat, {}, {1.5})},
       {1, 2},
       {"cuda"}});
  return v;
}

std::vector<Case> NormCases() {
  std::vector<Case> v;
  v.push_back({"Softmax last axis", OpSpec("Softmax", 13), {F({3, 17}, 90, -5, 5)}, {}, kAll});
  v.push_back({"LogSoftmax last axis", OpSpec("LogSoftmax", 13), {F({2, 4, 33}, 91, -5, 5)}, {}, {"cuda"}});
  v.push_back({"LayerNormalization",
               OpSpec("LayerNormalization", 17).Attr("axis", -1).Attr("epsilon", 1e-5f),
               {F({2, 5, 33}, 92, -2, 2), F({33}, 93), F({33}, 94)},
               {1, 2},
               kGpus});
  v.push_back({"ReduceMean last axis",
               OpSpec("ReduceMean", 13).Attr("axes", std::vector<int64_t>{-1}),
               {F({3, 4, 65}, 95)},
               {},
               kGpus});
  v.push_back({"ReduceSum last axis keepdims 0",
               OpSpec("ReduceSum", 13).Attr("keepdims", 0),
               {F({5, 31}, 96), I64({-1})},
               {1},
               kGpus});
  return v;
}

std::vector<Case> TensorCases() {
  std::vector<Case> v;
  v.push_back({"Transpose",
               OpSpec("Transpose", 13).Attr("perm", std::vector<int64_t>{2, 0, 1}),
               {F({3, 4, 5}, 100)},
               {},
               kGpus});
  v.push_back({"Concat axis 1", OpSpec("Concat", 13).Attr("axis", 1), {F({2, 3}, 101), F({2, 5}, 102)}, {}, kGpus});
  v.push_back({"Slice negative step",
               OpSpec("Slice", 13),
               {F({6, 7}, 103), I64({5, 1}), I64({0, 6}), I64({0, 1}), I64({-2, 2})},
               {1, 2, 3, 4},
               kGpus});
  v.push_back({"Gather axis 0", OpSpec("Gather", 13).Attr("axis", 0), {F({5, 4}, 104), I64({4, 0, 2, 2})}, {1}, kGpus});
  v.push_back({"Reshape", OpSpec("Reshape", 14), {F({2, 6}, 105), I64({3, -1})}, {1}, kAll});
  v.push_back({"Flatten", OpSpec("Flatten", 13).Attr("axis", 2), {F({2, 3, 4, 5}, 106)}, {}, kAll});
  v.push_back({"Unsqueeze", OpSpec("Unsqueeze", 13), {F({3, 4}, 107), I64({0, 3})}, {1}, kGpus});
  v.push_back({"Squeeze", OpSpec("Squeeze", 13), {F({3, 1, 4}, 108), I64({1})}, {1}, kGpus});
  v.push_back({"Cast float to int64",
               OpSpec("Cast", 13).Attr("to", static_cast<int64_t>(7)),
               {F({4, 5}, 109, -9, 9)},
               {},
               {"cuda"}});
  return v;
}

std::vector<Case> RnnCases() {
  std::vector<Case> v;
  const int64_t S = 5, B = 2, I = 3, H = 4;
  auto lstm = [&](const std::string& dir) {
    return OpSpec("LSTM", 14).Attr("hidden_size", H).Attr("direction", dir).Outputs(3);
  };
  v.push_back({"LSTM forward",
               lstm("forward"),
               {F({S, B, I}, 120), F({1, 4 * H, I}, 121), F({1, 4 * H, H}, 122), F({1, 8 * H}, 123)},
               {1, 2, 3},
               {"cuda"}});
  v.push_back({"LSTM reverse with initial state",
               lstm("reverse"),
               {F({S, B, I}, 124), F({1, 4 * H, I}, 125), F({1, 4 * H, H}, 126), F({1, 8 * H}, 127), Tensor(),
                F({1, B, H}, 128), F({1, B, H}, 129)},
               {1, 2, 3},
               {"cuda"}});
  OpSpec bi = lstm("bidirectional");
  bi.Attr("clip", 0.8f);
  v.push_back({"LSTM bidirectional peepholes clip",
               bi,
               {F({S, B, I}, 130), F({2, 4 * H, I}, 131), F({2, 4 * H, H}, 132), F({2, 8 * H}, 133), Tensor(),
                F({2, B, H}, 134), F({2, B, H}, 135), F({2, 3 * H}, 136)},
               {1, 2, 3, 7},
               {"cuda"}});
  OpSpec coupled = lstm("forward");
  coupled.Attr("input_forget", 1);
  v.push_back({"LSTM input_forget",
               coupled,
               {F({S, 1, I}, 137), F({1, 4 * H, I}, 138), F({1, 4 * H, H}, 139)},
               {1, 2},
               {"cuda"}});
  return v;
}

std::vector<Case> QuantCases() {
  std::vector<Case> v;
  const int64_t K = 64, N = 9, block = 32, blocks = K / block;
  for (int bits : {4, 8}) {
    OpSpec spec("MatMulNBits", 1, "com.microsoft");
    spec.Attr("K", K).Attr("N", N).Attr("bits", static_cast<int64_t>(bits)).Attr("block_size", block);
    Tensor b = RandomTensor(DataType::kUInt8, {N, blocks, block * bits / 8}, 140 + bits, 0, 255);
    v.push_back({"MatMulNBits " + std::to_string(bits) + "-bit",
                 spec,
                 {F({3, K}, 150 + bits), b, F({N * blocks}, 160 + bits, 0.01, 0.1)},
                 {1, 2},
                 {"cuda"},
                 1e-4,
                 1e-4});
  }
  return v;
}

TEST_P(ProviderParity, GemmAndMatMul) { RunCases(GetParam(), GemmCases()); }
TEST_P(ProviderParity, ConvAndPooling) { RunCases(GetParam(), ConvCases()); }
TEST_P(ProviderParity, Elementwise) { RunCases(GetParam(), ElementwiseCases()); }
TEST_P(ProviderParity, NormalizationAndReductions) { RunCases(GetParam(), NormCases()); }
TEST_P(ProviderParity, TensorMovement) { RunCases(GetParam(), TensorCases()); }
TEST_P(ProviderParity, Lstm) { RunCases(GetParam(), RnnCases()); }
TEST_P(ProviderParity, MatMulNBits) { RunCases(GetParam(), QuantCases()); }

INSTANTIATE_TEST_SUITE_P(Providers, ProviderParity, ::testing::Values("ref", "vulkan", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace strata::testing
