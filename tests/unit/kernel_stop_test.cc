// Kernels whose single call costs more than their inputs and outputs bound (a pooling window
// or a conv kernel as large as the padded image, an LRN window over thousands of channels,
// thousands of recurrent steps, a product of large matrices) stop at the run's deadline or
// terminate call (core/kernel_stop.h) instead of running on for seconds to hours: each case
// below took 2-19 s here with the checks disabled (the run then succeeds, or is cancelled
// only before the next node, and the test fails), and is CANCELLED naming the node at a
// 100 ms deadline; XNNPACK's grouped convs, before such kernels left it, ran over 30 s.
// Also: the products that are cut into items to be stoppable give the values of a
// double-precision product (KernelStop.SplitProductsMatchADoubleProduct).
#include "core/kernel_stop.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/run_control.h"
#include "core/session.h"
#include "cpu/gemm_bf16.h"
#include "cpu/sgemm.h"
#include "onnx_builder.h"

namespace strata {
namespace {

namespace ob = onnx_builder;
using Feeds = std::vector<std::pair<std::string, Value>>;

void SetInts(onnx::NodeProto* n, const std::string& name, std::initializer_list<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

Value Filled(const Shape& shape, float v) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Value(Tensor::FromVector<float>(std::vector<float>(static_cast<size_t>(n), v), shape));
}
Value FilledDouble(const Shape& shape, double v) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Value(Tensor::FromVector<double>(std::vector<double>(static_cast<size_t>(n), v), shape));
}

struct LongCase {
  std::string name;  // also the node's name
  std::function<std::string()> model;
  std::function<Feeds()> feeds;
  // Runs on strata's AVX-512 kernels; without AVX-512F (or with STRATA_SGEMM=0) XNNPACK
  // takes it, whose calls cannot be stopped (docs/hardening.md).
  bool needs_avx512 = false;
  bool bf16 = false;  // a bf16 fast-math session (skipped without AVX512_BF16)
  int level = 99;     // the session's optimization level: 1 keeps convs NCHW
};

// One node `op` named `name` from input x [dims] (float, or double) to y.
onnx::NodeProto* OneNode(onnx::ModelProto* m, const std::string& op, const std::string& name,
                         std::initializer_list<int64_t> dims, int elem = onnx::TensorProto::FLOAT,
                         std::initializer_list<std::string> extra = {}) {
  onnx::GraphProto* g = m->mutable_graph();
  ob::AddInput(g, "x", dims, elem);
  ob::AddOutput(g, "y", {-1, -1, -1, -1}, elem);
  std::vector<std::string> ins = {"x"};
  ins.insert(ins.end(), extra.begin(), extra.end());
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& s : ins) n->add_input(s);
  n->add_output("y");
  return n;
}

// A 512 x 512 window over a 512 x 512 image padded to keep its size: 2^18 outputs of
// ~150K taps each.
std::string BigWindowPool(const std::string& op, int64_t size) {
  onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
  onnx::NodeProto* n = OneNode(&m, op, op, {1, 1, size, size});
  SetInts(n, "kernel_shape", {size, size});
  SetInts(n, "pads", {size / 2 - 1, size / 2 - 1, size / 2, size / 2});
  return ob::Serialize(m);
}

std::string BigKernelConv(bool dbl, bool transpose, int64_t group, int64_t channels, int64_t image, int64_t k) {
  onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
  const int elem = dbl ? onnx::TensorProto::DOUBLE : onnx::TensorProto::FLOAT;
  onnx::NodeProto* n = OneNode(&m, transpose ? "ConvTranspose" : "Conv", transpose ? "ConvTranspose" : "Conv",
                               {1, channels, image, image}, elem, {"w"});
  const int64_t o = transpose ? channels / group : channels, i = transpose ? channels : channels / group;
  const std::vector<int64_t> wdims = transpose ? std::vector<int64_t>{i, o, k, k} : std::vector<int64_t>{o, i, k, k};
  const size_t count = static_cast<size_t>(o * i * k * k);
  if (dbl) {
    ob::AddRawInit<double>(m.mutable_graph(), "w", onnx::TensorProto::DOUBLE, wdims, std::vector<double>(count, 1e-3));
  } else {
    ob::AddRawInit<float>(m.mutable_graph(), "w", onnx::TensorProto::FLOAT, wdims, std::vector<float>(count, 1e-3f));
  }
  if (group > 1) SetInt(n, "group", group);
  if (!transpose) SetInts(n, "pads", {k / 2 - 1, k / 2 - 1, k / 2, k / 2});
  return ob::Serialize(m);
}

// An LSTM (or GRU) of `steps` steps of batch 1 and input size 1; W and R constants (the
// fused LSTM, the reference GRU) or graph inputs (the LSTM's per-run packing path).
std::string LongRecurrence(const std::string& op, int64_t steps, int64_t hidden, bool weights_are_inputs) {
  onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
  onnx::GraphProto* g = m.mutable_graph();
  const int64_t gates = op == "GRU" ? 3 : 4;
  onnx::NodeProto* n = OneNode(&m, op, op, {steps, 1, 1}, onnx::TensorProto::FLOAT, {"W", "R"});
  SetInt(n, "hidden_size", hidden);
  if (weights_are_inputs) {
    ob::AddInput(g, "W", {1, gates * hidden, 1});
    ob::AddInput(g, "R", {1, gates * hidden, hidden});
  } else {
    ob::AddFloatInit(g, "W", {1, gates * hidden, 1}, [](size_t c) { return std::vector<float>(c, 0.01f); });
    ob::AddFloatInit(g, "R", {1, gates * hidden, hidden}, [](size_t c) { return std::vector<float>(c, 1e-4f); });
  }
  return ob::Serialize(m);
}

std::string BigProduct(const std::string& op, int64_t n) {
  onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "a", {n, n});
  ob::AddInput(g, "b", {n, n});
  ob::AddOutput(g, "y", {-1, -1});
  onnx::NodeProto* node = ob::AddNode(g, op, {"a", "b"}, {"y"}, op);
  if (op == "Gemm") SetInt(node, "transB", 1);
  return ob::Serialize(m);
}

Value FilledBytes(const Shape& shape, uint8_t v) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Value(Tensor::FromVector<uint8_t>(std::vector<uint8_t>(static_cast<size_t>(n), v), shape));
}

// Scalar initializers of QLinear ops: a float scale and a zero point of ONNX type `zp_type`.
void AddQuantParams(onnx::GraphProto* g, const std::string& prefix, int zp_type) {
  ob::AddRawInit<float>(g, prefix + "_scale", onnx::TensorProto::FLOAT, {}, {0.05f});
  ob::AddRawInit<uint8_t>(g, prefix + "_zp", zp_type, {}, {0});
}

// MatMulInteger of two run-time uint8 [n, n] (the int16 kernel: a run-time B is packed per run).
std::string IntegerProduct(int64_t n) {
  onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "a", {n, n}, onnx::TensorProto::UINT8);
  ob::AddInput(g, "b", {n, n}, onnx::TensorProto::UINT8);
  ob::AddOutput(g, "y", {-1, -1}, onnx::TensorProto::INT32);
  ob::AddNode(g, "MatMulInteger", {"a", "b"}, {"y"}, "MatMulInteger");
  return ob::Serialize(m);
}

// QLinearMatMul of a run-time uint8 A [m, k] and a constant int8 B [k, n] (the VNNI GEMM).
std::string QLinearProduct(int64_t m_rows, int64_t k, int64_t n) {
  onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "a", {m_rows, k}, onnx::TensorProto::UINT8);
  ob::AddOutput(g, "y", {-1, -1}, onnx::TensorProto::UINT8);
  ob::AddRawInit<int8_t>(g, "b", onnx::TensorProto::INT8, {k, n}, std::vector<int8_t>(static_cast<size_t>(k * n), 3));
  AddQuantParams(g, "a", onnx::TensorProto::UINT8);
  AddQuantParams(g, "b", onnx::TensorProto::INT8);
  AddQuantParams(g, "y", onnx::TensorProto::UINT8);
  ob::AddNode(g, "QLinearMatMul", {"a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"}, {"y"},
              "QLinearMatMul");
  return ob::Serialize(m);
}

std::vector<LongCase> LongCases() {
  std::vector<LongCase> cases;
  for (const char* op : {"MaxPool", "AveragePool"})
    cases.push_back({op, [op] { return BigWindowPool(op, 512); },
                     [] {
                       return Feeds{{"x", Filled({1, 1, 512, 512}, 0.5f)}};
                     }});
  cases.push_back({"LpPool", [] { return BigWindowPool("LpPool", 256); },
                   [] {
                     return Feeds{{"x", Filled({1, 1, 256, 256}, 0.5f)}};
                   }});
  // A 1x1 conv to 8 channels before a pool: the layout pass makes the pool an NhwcMaxPool.
  cases.push_back({"NhwcMaxPool",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "x", {1, 1, 384, 384});
                     ob::AddOutput(g, "y", {-1, -1, -1, -1});
                     ob::AddFloatInit(g, "w", {8, 1, 1, 1}, [](size_t c) { return std::vector<float>(c, 1.0f); });
                     ob::AddNode(g, "Conv", {"x", "w"}, {"c"}, "pre");
                     onnx::NodeProto* p = ob::AddNode(g, "MaxPool", {"c"}, {"y"}, "NhwcMaxPool");
                     SetInts(p, "kernel_shape", {384, 384});
                     SetInts(p, "pads", {191, 191, 192, 192});
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", Filled({1, 1, 384, 384}, 0.5f)}};
                   }});
  cases.push_back({"LRN",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     SetInt(OneNode(&m, "LRN", "LRN", {1, 4096, 64, 64}), "size", 4095);
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", Filled({1, 4096, 64, 64}, 0.5f)}};
                   }});
  // The SGEMM conv (K = 256 x 256), the depthwise conv, and the reference convs (double).
  cases.push_back({"Conv", [] { return BigKernelConv(false, false, 1, 1, 768, 256); },
                   [] {
                     return Feeds{{"x", Filled({1, 1, 768, 768}, 0.5f)}};
                   },
                   true});
  cases.push_back({"bf16 Conv", [] { return BigKernelConv(false, false, 1, 1, 768, 256); },
                   [] {
                     return Feeds{{"x", Filled({1, 1, 768, 768}, 0.5f)}};
                   },
                   true, true});
  // Grouped convs of 2-channel groups run on XNNPACK, except with such kernels.
  cases.push_back({"grouped Conv", [] { return BigKernelConv(false, false, 8, 16, 384, 128); },
                   [] {
                     return Feeds{{"x", Filled({1, 16, 384, 384}, 0.5f)}};
                   }});
  cases.push_back({"NCHW grouped Conv", [] { return BigKernelConv(false, false, 8, 16, 384, 128); },
                   [] {
                     return Feeds{{"x", Filled({1, 16, 384, 384}, 0.5f)}};
                   },
                   false, false, 1});
  cases.push_back({"NCHW depthwise Conv", [] { return BigKernelConv(false, false, 16, 16, 384, 128); },
                   [] {
                     return Feeds{{"x", Filled({1, 16, 384, 384}, 0.5f)}};
                   },
                   false, false, 1});
  cases.push_back({"depthwise Conv", [] { return BigKernelConv(false, false, 16, 16, 384, 128); },
                   [] {
                     return Feeds{{"x", Filled({1, 16, 384, 384}, 0.5f)}};
                   },
                   true});
  cases.push_back({"double Conv", [] { return BigKernelConv(true, false, 1, 1, 256, 128); },
                   [] {
                     return Feeds{{"x", FilledDouble({1, 1, 256, 256}, 0.5)}};
                   }});
  cases.push_back({"double ConvTranspose", [] { return BigKernelConv(true, true, 1, 1, 256, 128); },
                   [] {
                     return Feeds{{"x", FilledDouble({1, 1, 256, 256}, 0.5)}};
                   }});
  cases.push_back({"MatMul", [] { return BigProduct("MatMul", 6144); },
                   [] {
                     return Feeds{{"a", Filled({6144, 6144}, 0.5f)}, {"b", Filled({6144, 6144}, 0.5f)}};
                   }});
  cases.push_back({"Gemm", [] { return BigProduct("Gemm", 6144); },
                   [] {
                     return Feeds{{"a", Filled({6144, 6144}, 0.5f)}, {"b", Filled({6144, 6144}, 0.5f)}};
                   }});
  cases.push_back({"LSTM", [] { return LongRecurrence("LSTM", 20000, 1024, false); },
                   [] {
                     return Feeds{{"x", Filled({20000, 1, 1}, 0.5f)}};
                   }});
  cases.push_back({"weight-input LSTM", [] { return LongRecurrence("LSTM", 20000, 1024, true); },
                   [] {
                     return Feeds{{"x", Filled({20000, 1, 1}, 0.5f)},
                                  {"W", Filled({1, 4096, 1}, 0.01f)},
                                  {"R", Filled({1, 4096, 1024}, 1e-4f)}};
                   }});
  cases.push_back({"GRU", [] { return LongRecurrence("GRU", 20000, 256, false); },
                   [] {
                     return Feeds{{"x", Filled({20000, 1, 1}, 0.5f)}};
                   }});
  cases.push_back({"MatMulInteger", [] { return IntegerProduct(4096); },
                   [] {
                     return Feeds{{"a", FilledBytes({4096, 4096}, 7)}, {"b", FilledBytes({4096, 4096}, 9)}};
                   }});
  // 16384 x 4096 x 4096 on the VNNI GEMM (A read in place: no scratch); the int16 kernel
  // without VNNI.
  cases.push_back({"QLinearMatMul", [] { return QLinearProduct(16384, 4096, 4096); },
                   [] {
                     return Feeds{{"a", FilledBytes({16384, 4096}, 7)}};
                   }});
  // 4096 output channels of a 64 x 64 kernel over a padded 128 x 128 image (the VNNI conv;
  // the int16 reference conv without VNNI): 2^40 multiply-adds.
  cases.push_back({"QLinearConv",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "x", {1, 1, 128, 128}, onnx::TensorProto::UINT8);
                     ob::AddOutput(g, "y", {-1, -1, -1, -1}, onnx::TensorProto::UINT8);
                     ob::AddRawInit<int8_t>(g, "w", onnx::TensorProto::INT8, {4096, 1, 64, 64},
                                            std::vector<int8_t>(size_t{4096} * 64 * 64, 1));
                     AddQuantParams(g, "x", onnx::TensorProto::UINT8);
                     AddQuantParams(g, "w", onnx::TensorProto::INT8);
                     AddQuantParams(g, "y", onnx::TensorProto::UINT8);
                     onnx::NodeProto* n = ob::AddNode(
                         g, "QLinearConv", {"x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"}, {"y"},
                         "QLinearConv");
                     SetInts(n, "pads", {31, 31, 32, 32});
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", FilledBytes({1, 1, 128, 128}, 7)}};
                   }});
  // ONNX Runtime's QLinearAveragePool (NCHW and channels last) with the window of the image.
  for (int64_t channels_last : {0, 1})
    cases.push_back({channels_last ? "channels-last QLinearAveragePool" : "QLinearAveragePool",
                     [channels_last] {
                       onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                       ob::AddOpsetImport(&m, "com.microsoft", 1);
                       onnx::GraphProto* g = m.mutable_graph();
                       const int64_t s = 512;
                       if (channels_last) {
                         ob::AddInput(g, "x", {1, s, s, 8}, onnx::TensorProto::UINT8);
                       } else {
                         ob::AddInput(g, "x", {1, 1, s, s}, onnx::TensorProto::UINT8);
                       }
                       ob::AddOutput(g, "y", {-1, -1, -1, -1}, onnx::TensorProto::UINT8);
                       AddQuantParams(g, "x", onnx::TensorProto::UINT8);
                       AddQuantParams(g, "y", onnx::TensorProto::UINT8);
                       onnx::NodeProto* n =
                           ob::AddNode(g, "QLinearAveragePool", {"x", "x_scale", "x_zp", "y_scale", "y_zp"}, {"y"},
                                       "QLinearAveragePool");
                       n->set_domain("com.microsoft");
                       SetInts(n, "kernel_shape", {s, s});
                       SetInts(n, "pads", {s / 2 - 1, s / 2 - 1, s / 2, s / 2});
                       SetInt(n, "channels_last", channels_last);
                       return ob::Serialize(m);
                     },
                     [channels_last] {
                       return Feeds{{"x", FilledBytes(channels_last ? Shape{1, 512, 512, 8} : Shape{1, 1, 512, 512},
                                                      7)}};
                     }});
  // 32 x 32 samples per bin over a 512 x 512 output: 2^28 samples.
  cases.push_back({"RoiAlign",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(16, "kernel_stop_test");
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "x", {1, 1, 64, 64});
                     ob::AddOutput(g, "y", {-1, -1, -1, -1});
                     ob::AddRawInit<float>(g, "rois", onnx::TensorProto::FLOAT, {1, 4}, {0, 0, 63, 63});
                     ob::AddRawInit<int64_t>(g, "batch", onnx::TensorProto::INT64, {1}, {0});
                     onnx::NodeProto* n = ob::AddNode(g, "RoiAlign", {"x", "rois", "batch"}, {"y"}, "RoiAlign");
                     SetInt(n, "output_height", 512);
                     SetInt(n, "output_width", 512);
                     SetInt(n, "sampling_ratio", 32);
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", Filled({1, 1, 64, 64}, 0.5f)}};
                   }});
  // Frames of 16383 samples (an FFT each, by Bluestein's algorithm) every 64 samples.
  cases.push_back({"STFT",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "x", {1, 65536, 1});
                     ob::AddOutput(g, "y", {-1, -1, -1, -1});
                     ob::AddRawInit<int64_t>(g, "step", onnx::TensorProto::INT64, {}, {64});
                     ob::AddRawInit<int64_t>(g, "len", onnx::TensorProto::INT64, {}, {16383});
                     ob::AddNode(g, "STFT", {"x", "step", "", "len"}, {"y"}, "STFT");
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", Filled({1, 65536, 1}, 0.5f)}};
                   }});
  // 512 rois, each the whole 2048 x 2048 image: 2^31 compares for a 7 x 7 output each.
  cases.push_back({"MaxRoiPool",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "x", {1, 1, 2048, 2048});
                     ob::AddOutput(g, "y", {-1, -1, -1, -1});
                     std::vector<float> rois;
                     for (int i = 0; i < 512; ++i) rois.insert(rois.end(), {0, 0, 0, 2047, 2047});
                     ob::AddRawInit<float>(g, "rois", onnx::TensorProto::FLOAT, {512, 5}, rois);
                     SetInts(ob::AddNode(g, "MaxRoiPool", {"x", "rois"}, {"y"}, "MaxRoiPool"), "pooled_shape", {7, 7});
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", Filled({1, 1, 2048, 2048}, 0.5f)}};
                   }});
  // ONNX Runtime's QGemm (com.microsoft) of two run-time uint8 [4096, 4096], float output.
  cases.push_back({"QGemm",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     ob::AddOpsetImport(&m, "com.microsoft", 1);
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "a", {4096, 4096}, onnx::TensorProto::UINT8);
                     ob::AddInput(g, "b", {4096, 4096}, onnx::TensorProto::UINT8);
                     ob::AddOutput(g, "y", {-1, -1});
                     AddQuantParams(g, "a", onnx::TensorProto::UINT8);
                     AddQuantParams(g, "b", onnx::TensorProto::UINT8);
                     ob::AddNode(g, "QGemm", {"a", "a_scale", "a_zp", "b", "b_scale", "b_zp"}, {"y"}, "QGemm")
                         ->set_domain("com.microsoft");
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"a", FilledBytes({4096, 4096}, 7)}, {"b", FilledBytes({4096, 4096}, 9)}};
                   }});
  // MatMulNBits (4-bit weights, com.microsoft) of a 2048-row prompt by 8192 x 8192: 2^37
  // multiply-adds, run in row chunks.
  cases.push_back({"MatMulNBits",
                   [] {
                     const int64_t k = 8192, n = 8192, block = 32;
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     ob::AddOpsetImport(&m, "com.microsoft", 1);
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "a", {2048, k});
                     ob::AddOutput(g, "y", {-1, -1});
                     ob::AddRawInit<uint8_t>(g, "b", onnx::TensorProto::UINT8, {n, k / block, block / 2},
                                             std::vector<uint8_t>(static_cast<size_t>(n * k / 2), 0x37));
                     ob::AddRawInit<float>(g, "s", onnx::TensorProto::FLOAT, {n * k / block},
                                           std::vector<float>(static_cast<size_t>(n * k / block), 0.01f));
                     onnx::NodeProto* node = ob::AddNode(g, "MatMulNBits", {"a", "b", "s"}, {"y"}, "MatMulNBits");
                     node->set_domain("com.microsoft");
                     SetInt(node, "K", k);
                     SetInt(node, "N", n);
                     SetInt(node, "bits", 4);
                     SetInt(node, "block_size", block);
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"a", Filled({2048, 8192}, 0.5f)}};
                   }});
  // LU elimination of a 3072 x 3072 matrix: 10^10 multiply-adds over a 36 MiB input.
  cases.push_back({"Det",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "x", {3072, 3072});
                     ob::AddOutput(g, "y", {});
                     ob::AddNode(g, "Det", {"x"}, {"y"}, "Det");
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", Value(Tensor::FromVector<float>(ob::PseudoRandom(size_t{3072} * 3072, 7),
                                                                          Shape{3072, 3072}))}};
                   }});
  // Bigrams with up to 2^15 skips over 2^15 tokens: every start times every gap that fits.
  cases.push_back({"TfIdfVectorizer",
                   [] {
                     onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
                     onnx::GraphProto* g = m.mutable_graph();
                     ob::AddInput(g, "x", {32768}, onnx::TensorProto::INT64);
                     ob::AddOutput(g, "y", {-1}, onnx::TensorProto::FLOAT);
                     onnx::NodeProto* n = ob::AddNode(g, "TfIdfVectorizer", {"x"}, {"y"}, "TfIdfVectorizer");
                     auto* mode = n->add_attribute();
                     mode->set_name("mode");
                     mode->set_type(onnx::AttributeProto::STRING);
                     mode->set_s("TF");
                     SetInt(n, "min_gram_length", 2);
                     SetInt(n, "max_gram_length", 2);
                     SetInt(n, "max_skip_count", 32768);
                     SetInts(n, "ngram_counts", {0, 0});
                     SetInts(n, "ngram_indexes", {0});
                     SetInts(n, "pool_int64s", {1, 2});
                     return ob::Serialize(m);
                   },
                   [] {
                     return Feeds{{"x", Value(Tensor::FromVector<int64_t>(std::vector<int64_t>(32768, 1), Shape{32768}))}};
                   }});
  return cases;
}

// The op type, the last word of a case's name ("double Conv" -> "Conv").
std::string NodeName(const std::string& name) { return name.substr(name.rfind(' ') + 1); }

TEST(KernelStop, LongKernelsMeetTheDeadline) {
  for (const LongCase& c : LongCases()) {
    SCOPED_TRACE(c.name);
    if (c.needs_avx512 && !sgemm::Available()) continue;
    if (c.bf16 && !Bf16GemmAvailable()) continue;
    const std::string bytes = c.model();
    SessionOptions o;
    o.threads = 2;  // the work is split over a pool worker too
    o.run_timeout_ms = 100;
    o.kernel.bf16_fast_math = c.bf16;
    o.optimization_level = c.level;
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    if (c.bf16) {
      bool on_bf16 = false;
      for (const NodeAssignment& a : (*s)->assignments()) on_bf16 = on_bf16 || a.impl.find("bf16") != std::string::npos;
      EXPECT_TRUE(on_bf16) << "the conv did not take a bf16 kernel";
    }
    const auto start = std::chrono::steady_clock::now();
    auto r = (*s)->Run(c.feeds());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r.ok()) {  // every case is reported, not just the first
      ADD_FAILURE() << "ran to completion in " << ms << " ms";
      continue;
    }
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find("deadline of 100 ms"), std::string::npos) << msg;
    EXPECT_NE(msg.find(" node '" + NodeName(c.name) + "'"), std::string::npos) << msg;
  }
}

// Constant folding runs kernels at session creation, under its own 2 s budget: a long pool
// over a constant input (a ConstantOfShape, folded first) is given up there and left to
// run time, where the run's deadline ends it. Before the pool checked, creation ran it to
// the end (hours for this window).
TEST(KernelStop, FoldingGivesUpOnALongPool) {
  onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
  onnx::GraphProto* g = m.mutable_graph();
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(4);
  for (int64_t d : {1, 1, 1024, 1024}) shape->add_int64_data(d);
  ob::AddNode(g, "ConstantOfShape", {"shape"}, {"x"}, "fill");
  onnx::NodeProto* p = ob::AddNode(g, "MaxPool", {"x"}, {"y"}, "MaxPool");
  SetInts(p, "kernel_shape", {1024, 1024});
  SetInts(p, "pads", {511, 511, 512, 512});
  ob::AddOutput(g, "y", {-1, -1, -1, -1});
  const std::string bytes = ob::Serialize(m);
  SessionOptions o;
  o.threads = 2;
  o.run_timeout_ms = 100;
  const auto start = std::chrono::steady_clock::now();
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  const double created_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // The fold budget is 2 s; 60 s is far below the pool's own time (hours) on any machine.
  EXPECT_LT(created_s, 60.0) << "session creation ran the pool";
  auto r = (*s)->Run({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_NE(r.status().message().find("in MaxPool node 'MaxPool'"), std::string::npos) << r.status().ToString();
}

// A terminate call (here the run options', from another thread) ends a long kernel too,
// and a later run with the same options is unaffected.
TEST(KernelStop, TerminateEndsALongPool) {
  const std::string bytes = BigWindowPool("MaxPool", 512);
  SessionOptions o;
  o.threads = 2;
  auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  RunOptions ro;
  std::atomic<bool> done{false};
  std::thread stopper([&] {
    while (!done.load()) {
      ro.Terminate();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  auto r = (*s)->Run({{"x", Filled({1, 1, 512, 512}, 0.5f)}}, {}, &ro);
  done = true;
  stopper.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_NE(r.status().message().find("run terminated (strata_run_options_terminate), in MaxPool node 'MaxPool'"),
            std::string::npos)
      << r.status().ToString();
  // A small window afterwards runs to completion with the same options: max of 0.5s is 0.5.
  const std::string small = BigWindowPool("MaxPool", 8);
  auto s2 = Session::CreateFromBytes(small.data(), small.size(), o);
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  auto r2 = (*s2)->Run({{"x", Filled({1, 1, 8, 8}, 0.5f)}}, {}, &ro);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ((*r2)[0].tensor().data<float>()[0], 0.5f);
}

// Products above 2^30 multiply-adds run as tiles when on OpenBLAS (CPUs without AVX-512F, or
// STRATA_SGEMM=0: the ctest kernel_stop.blas_fallback), on the SGEMM otherwise; either way
// the values match a double-precision product. 1100^3 = 1.33 * 2^30, with a ragged edge.
TEST(KernelStop, SplitProductsMatchADoubleProduct) {
  constexpr int64_t n = 1100;
  const std::vector<float> a = ob::PseudoRandom(n * n, 1), b = ob::PseudoRandom(n * n, 2), c = ob::PseudoRandom(n, 3);
  std::vector<double> ab(static_cast<size_t>(n * n), 0.0), abt(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) {
      const double av = a[i * n + k];
      for (int64_t j = 0; j < n; ++j) ab[i * n + j] += av * b[k * n + j];
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += static_cast<double>(a[i * n + k]) * b[j * n + k];
      abt[i * n + j] = acc;
    }
  for (const std::string op : {"MatMul", "Gemm"}) {
    SCOPED_TRACE(op);
    onnx::ModelProto m = ob::MakeModel(17, "kernel_stop_test");
    onnx::GraphProto* g = m.mutable_graph();
    ob::AddInput(g, "a", {n, n});
    ob::AddInput(g, "b", {n, n});
    ob::AddOutput(g, "y", {-1, -1});
    if (op == "Gemm") {
      ob::AddInput(g, "c", {n});
      onnx::NodeProto* node = ob::AddNode(g, "Gemm", {"a", "b", "c"}, {"y"});
      SetInt(node, "transB", 1);
      auto* alpha = node->add_attribute();
      alpha->set_name("alpha");
      alpha->set_type(onnx::AttributeProto::FLOAT);
      alpha->set_f(0.5f);
    } else {
      ob::AddNode(g, "MatMul", {"a", "b"}, {"y"});
    }
    const std::string bytes = ob::Serialize(m);
    SessionOptions o;
    o.threads = 2;
    auto s = Session::CreateFromBytes(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Feeds feeds = {{"a", Value(Tensor::FromVector<float>(a, {n, n}))},
                   {"b", Value(Tensor::FromVector<float>(b, {n, n}))}};
    if (op == "Gemm") feeds.emplace_back("c", Value(Tensor::FromVector<float>(c, {n})));
    auto r = (*s)->Run(feeds);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const float* y = (*r)[0].tensor().data<float>();
    double worst = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double want = op == "Gemm" ? 0.5 * abt[i * n + j] + c[j] : ab[i * n + j];
        worst = std::max(worst, std::abs(y[i * n + j] - want));
      }
    EXPECT_LT(worst, 1e-3) << "largest difference from the double-precision product";
  }
}

}  // namespace
}  // namespace strata
