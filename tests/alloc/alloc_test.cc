// Steady-state allocation behaviour of io-binding runs (strata_session_run_binding),
// measured with the counting hook in alloc_hook.cc, for the digits example, a small
// transformer encoder block and com.microsoft MatMulNBits nodes (4 and 8 bits, accuracy
// levels 0 and 4, each of the kernel's paths) and the integer ops (QLinearConv, ConvInteger,
// QLinearMatMul, MatMulInteger with constant weights) built here: after warm-up, zero allocations
// and zero frees per run, with 1 and 2 intra-op threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "alloc_hook.h"
#include "onnx_builder.h"
#include "strata/strata.h"
#include "strata/strata.hpp"

namespace {

namespace ob = strata::onnx_builder;

std::string Message(strata_status* st) {
  std::string m = strata_status_get_message(st);
  strata_status_release(st);
  return m;
}

#define ASSERT_NO_STATUS(expr)                                \
  do {                                                        \
    strata_status* st_ = (expr);                              \
    ASSERT_EQ(st_, nullptr) << #expr << ": " << Message(st_); \
  } while (0)

void AddFloatInit(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, uint32_t seed, float scale,
                  float offset = 0.0f) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;  // deterministic weights, no <random> state
    t->add_float_data(offset + scale * (static_cast<float>(s >> 8) / 16777216.0f - 0.5f));
  }
}

void AddInt64Init(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

onnx::NodeProto* WithInts(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return n;
}
onnx::NodeProto* WithInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
  return n;
}

// One post-norm transformer encoder block: 2-head self-attention over [1, 8, 16] and a
// GELU (Erf form) feed-forward of width 32, with residuals and LayerNormalization.
constexpr int64_t kSeq = 8, kModel = 16, kHeads = 2, kHead = kModel / kHeads, kFf = 32;
std::string EncoderModel() {
  onnx::ModelProto m = ob::MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "x", {1, kSeq, kModel});
  ob::AddOutput(g, "y", {1, kSeq, kModel});
  AddFloatInit(g, "wq", {kModel, kModel}, 1, 0.5f);
  AddFloatInit(g, "wk", {kModel, kModel}, 2, 0.5f);
  AddFloatInit(g, "wv", {kModel, kModel}, 3, 0.5f);
  AddFloatInit(g, "wo", {kModel, kModel}, 4, 0.5f);
  AddFloatInit(g, "w1", {kModel, kFf}, 5, 0.5f);
  AddFloatInit(g, "b1", {kFf}, 6, 0.1f);
  AddFloatInit(g, "w2", {kFf, kModel}, 7, 0.5f);
  AddFloatInit(g, "b2", {kModel}, 8, 0.1f);
  AddFloatInit(g, "ln1_g", {kModel}, 9, 0.2f, 1.0f);
  AddFloatInit(g, "ln1_b", {kModel}, 10, 0.1f);
  AddFloatInit(g, "ln2_g", {kModel}, 11, 0.2f, 1.0f);
  AddFloatInit(g, "ln2_b", {kModel}, 12, 0.1f);
  AddFloatInit(g, "scale", {}, 13, 0.0f, 1.0f / std::sqrt(static_cast<float>(kHead)));
  AddFloatInit(g, "sqrt2", {}, 14, 0.0f, std::sqrt(2.0f));
  AddFloatInit(g, "one", {}, 15, 0.0f, 1.0f);
  AddFloatInit(g, "half", {}, 16, 0.0f, 0.5f);
  AddInt64Init(g, "heads_shape", {1, kSeq, kHeads, kHead});
  AddInt64Init(g, "model_shape", {1, kSeq, kModel});

  for (const char* p : {"q", "k", "v"}) {
    std::string w = std::string("w") + p, s = p;
    ob::AddNode(g, "MatMul", {"x", w}, {s + "_lin"});
    ob::AddNode(g, "Reshape", {s + "_lin", "heads_shape"}, {s + "_heads"});
  }
  WithInts(ob::AddNode(g, "Transpose", {"q_heads"}, {"qt"}), "perm", {0, 2, 1, 3});
  WithInts(ob::AddNode(g, "Transpose", {"k_heads"}, {"kt"}), "perm", {0, 2, 3, 1});
  WithInts(ob::AddNode(g, "Transpose", {"v_heads"}, {"vt"}), "perm", {0, 2, 1, 3});
  ob::AddNode(g, "MatMul", {"qt", "kt"}, {"scores"});
  ob::AddNode(g, "Mul", {"scores", "scale"}, {"scaled"});
  WithInt(ob::AddNode(g, "Softmax", {"scaled"}, {"attn"}), "axis", -1);
  ob::AddNode(g, "MatMul", {"attn", "vt"}, {"ctx"});
  WithInts(ob::AddNode(g, "Transpose", {"ctx"}, {"ctx_t"}), "perm", {0, 2, 1, 3});
  ob::AddNode(g, "Reshape", {"ctx_t", "model_shape"}, {"ctx_m"});
  ob::AddNode(g, "MatMul", {"ctx_m", "wo"}, {"proj"});
  ob::AddNode(g, "Add", {"x", "proj"}, {"res1"});
  WithInt(ob::AddNode(g, "LayerNormalization", {"res1", "ln1_g", "ln1_b"}, {"h1"}), "axis", -1);
  ob::AddNode(g, "MatMul", {"h1", "w1"}, {"ff1"});
  ob::AddNode(g, "Add", {"ff1", "b1"}, {"ff1b"});
  ob::AddNode(g, "Div", {"ff1b", "sqrt2"}, {"g_div"});
  ob::AddNode(g, "Erf", {"g_div"}, {"g_erf"});
  ob::AddNode(g, "Add", {"g_erf", "one"}, {"g_add"});
  ob::AddNode(g, "Mul", {"ff1b", "g_add"}, {"g_mul"});
  ob::AddNode(g, "Mul", {"g_mul", "half"}, {"gelu"});
  ob::AddNode(g, "MatMul", {"gelu", "w2"}, {"ff2"});
  ob::AddNode(g, "Add", {"ff2", "b2"}, {"ff2b"});
  ob::AddNode(g, "Add", {"h1", "ff2b"}, {"res2"});
  WithInt(ob::AddNode(g, "LayerNormalization", {"res2", "ln2_g", "ln2_b"}, {"y"}), "axis", -1);
  return ob::Serialize(m);
}

// Relu then a batch-1 Gemm (K = N = 256): the Relu leaves ~35% of the input zero (see
// Input), so the GEMV takes its sparse path, which lists the nonzeros in a per-thread buffer;
// 256 x 256 multiply-adds are enough to split the panels over a 2-thread pool.
constexpr int64_t kMlpK = 256;
std::string ReluGemvModel() {
  onnx::ModelProto m = ob::MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "x", {1, kMlpK});
  ob::AddOutput(g, "y", {1, kMlpK});
  AddFloatInit(g, "w", {kMlpK, kMlpK}, 21, 0.2f);
  AddFloatInit(g, "b", {kMlpK}, 22, 0.1f);
  ob::AddNode(g, "Relu", {"x"}, {"r"});
  ob::AddNode(g, "Gemm", {"r", "w", "b"}, {"y"});
  return ob::Serialize(m);
}

// Two NCHW convs (3x3 pad 1, 16 -> 32 channels, then 1x1 32 -> 32) with a Relu between, on
// a 1 x 16 x hw x hw image. In fp32 (hw = 28) the 3x3 conv runs on Winograd, the 1x1 on the
// SGEMM. In a bf16 session (on an AVX512_BF16 CPU; hw = 13: maps of at most 14x14 take bf16,
// and 13x13 is below Winograd's smallest map) both run as NHWC bf16 GEMMs over 169 rows,
// split over a 2-thread pool, through the per-thread A packs and row pointers.
constexpr int64_t kConvC = 16, kConvK = 32, kConvHW = 28, kBf16ConvHW = 13;
std::string ConvPairModel(int64_t hw) {
  onnx::ModelProto m = ob::MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "x", {1, kConvC, hw, hw});
  ob::AddOutput(g, "y", {1, kConvK, hw, hw});
  AddFloatInit(g, "w1", {kConvK, kConvC, 3, 3}, 31, 0.3f);
  AddFloatInit(g, "b1", {kConvK}, 32, 0.1f);
  AddFloatInit(g, "w2", {kConvK, kConvK, 1, 1}, 33, 0.3f);
  AddFloatInit(g, "b2", {kConvK}, 34, 0.1f);
  WithInts(ob::AddNode(g, "Conv", {"x", "w1", "b1"}, {"c1"}), "pads", {1, 1, 1, 1});
  ob::AddNode(g, "Relu", {"c1"}, {"r1"});
  ob::AddNode(g, "Conv", {"r1", "w2", "b2"}, {"y"});
  return ob::Serialize(m);
}

// One MatMulNBits node Y[M, N] = A[M, K] . W^T + bias with deterministic 4/8-bit weights,
// uint8 zero points and a bias. K = 200 is not a multiple of the kernels' K step, so A rows
// are zero-padded per run (scratch too); N = 70 leaves partial column groups and panels.
constexpr int64_t kNbK = 200, kNbN = 70, kNbBlock = 32;
std::string NBitsModel(int64_t bits, int64_t level, int64_t M) {
  onnx::ModelProto m = ob::MakeModel(17);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "A", {M, kNbK});
  ob::AddOutput(g, "Y", {M, kNbN});
  const int64_t n_blocks = (kNbK + kNbBlock - 1) / kNbBlock, blob = kNbBlock * bits / 8;
  const int64_t zp_bytes = (n_blocks * bits + 7) / 8;
  auto add_u8 = [&](const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::UINT8);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    std::string raw(static_cast<size_t>(n), '\0');
    uint32_t s = seed;
    for (char& c : raw) {
      s = s * 1664525u + 1013904223u;
      c = static_cast<char>(s >> 24);
    }
    t->set_raw_data(raw);
  };
  add_u8("B", {kNbN, n_blocks, blob}, 21);
  AddFloatInit(g, "S", {kNbN * n_blocks}, 22, 0.02f, 0.02f);
  add_u8("Z", {kNbN * zp_bytes}, 23);
  AddFloatInit(g, "bias", {kNbN}, 24, 0.5f);
  onnx::NodeProto* n = ob::AddNode(g, "MatMulNBits", {"A", "B", "S", "Z", "", "bias"}, {"Y"});
  n->set_domain("com.microsoft");
  WithInt(n, "K", kNbK);
  WithInt(n, "N", kNbN);
  WithInt(n, "bits", bits);
  WithInt(n, "block_size", kNbBlock);
  WithInt(n, "accuracy_level", level);
  return ob::Serialize(m);
}

// QuantizeLinear then DequantizeLinear over [4, 16]: per tensor (scalar scale, uint8 zero
// point) and per axis 1 (16 scales, int8 zero points), summed so both are outputs' inputs.
std::string QdqModel() {
  onnx::ModelProto m = ob::MakeModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "x", {4, 16});
  ob::AddOutput(g, "y", {4, 16});
  AddFloatInit(g, "s", {}, 31, 0.0f, 0.05f);
  AddFloatInit(g, "s_axis", {16}, 32, 0.04f, 0.05f);
  auto add_zp = [&](const std::string& name, onnx::TensorProto::DataType dt, std::vector<int64_t> dims,
                    std::string raw) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(dt);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(raw);
  };
  add_zp("z", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(128)));
  std::string zs(16, '\0');
  for (size_t i = 0; i < zs.size(); ++i) zs[i] = static_cast<char>(static_cast<int>(i) - 8);
  add_zp("z_axis", onnx::TensorProto::INT8, {16}, zs);
  ob::AddNode(g, "QuantizeLinear", {"x", "s", "z"}, {"q"});
  ob::AddNode(g, "DequantizeLinear", {"q", "s", "z"}, {"d"});
  ob::AddNode(g, "QuantizeLinear", {"x", "s_axis", "z_axis"}, {"qa"});
  ob::AddNode(g, "DequantizeLinear", {"qa", "s_axis", "z_axis"}, {"da"});
  ob::AddNode(g, "Add", {"d", "da"}, {"y"});
  return ob::Serialize(m);
}

// An initializer of 8-bit or int32 values from an LCG (raw little-endian data); `lo`/`span`
// bound the values.
void AddIntInit(onnx::GraphProto* g, const std::string& name, onnx::TensorProto::DataType dt, std::vector<int64_t> dims,
                uint32_t seed, int32_t lo, uint32_t span) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(dt);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  const size_t width = dt == onnx::TensorProto::INT32 ? 4 : 1;
  std::string raw(static_cast<size_t>(n) * width, '\0');
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const int32_t v = lo + static_cast<int32_t>((s >> 8) % span);
    std::memcpy(&raw[static_cast<size_t>(i) * width], &v, width);  // little-endian low bytes
  }
  t->set_raw_data(raw);
}

// The integer ops with constant weights between QuantizeLinear (uint8) and DequantizeLinear:
// QLinearConv (per-channel int8 weights, scales and zero points, int32 bias) and ConvInteger
// on a batch of 2, 3x3 pad 1, 8 -> 16 channels, summed; and QLinearMatMul and MatMulInteger
// (per-column b_zero_point) over [4, 64] x [64, 48], summed.
constexpr int64_t kQcN = 2, kQcC = 8, kQcK = 16, kQcHW = 10, kQmM = 4, kQmK = 64, kQmN = 48;
std::string QLinearConvModel() {
  onnx::ModelProto m = ob::MakeModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "x", {kQcN, kQcC, kQcHW, kQcHW});
  ob::AddOutput(g, "y", {kQcN, kQcK, kQcHW, kQcHW});
  AddFloatInit(g, "xs", {}, 41, 0.0f, 0.01f);
  AddIntInit(g, "xz", onnx::TensorProto::UINT8, {}, 42, 128, 1);
  AddIntInit(g, "w", onnx::TensorProto::INT8, {kQcK, kQcC, 3, 3}, 43, -128, 256);
  AddFloatInit(g, "ws", {kQcK}, 44, 0.004f, 0.01f);
  AddIntInit(g, "wz", onnx::TensorProto::INT8, {kQcK}, 45, -4, 9);
  AddFloatInit(g, "ys", {}, 46, 0.0f, 0.1f);
  AddIntInit(g, "yz", onnx::TensorProto::UINT8, {}, 47, 120, 1);
  AddIntInit(g, "bias", onnx::TensorProto::INT32, {kQcK}, 48, -3000, 6000);
  AddFloatInit(g, "is", {}, 49, 0.0f, 1e-5f);
  ob::AddNode(g, "QuantizeLinear", {"x", "xs", "xz"}, {"q"});
  WithInts(ob::AddNode(g, "QLinearConv", {"q", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"}, {"qc"}), "pads",
           {1, 1, 1, 1});
  ob::AddNode(g, "DequantizeLinear", {"qc", "ys", "yz"}, {"d1"});
  WithInts(ob::AddNode(g, "ConvInteger", {"q", "w", "xz", "wz"}, {"ci"}), "pads", {1, 1, 1, 1});
  ob::AddNode(g, "DequantizeLinear", {"ci", "is"}, {"d2"});
  ob::AddNode(g, "Add", {"d1", "d2"}, {"y"});
  return ob::Serialize(m);
}
std::string QLinearMatMulModel() {
  onnx::ModelProto m = ob::MakeModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  ob::AddInput(g, "x", {kQmM, kQmK});
  ob::AddOutput(g, "y", {kQmM, kQmN});
  AddFloatInit(g, "as", {}, 51, 0.0f, 0.01f);
  AddIntInit(g, "az", onnx::TensorProto::UINT8, {}, 52, 128, 1);
  AddIntInit(g, "b", onnx::TensorProto::INT8, {kQmK, kQmN}, 53, -128, 256);
  AddFloatInit(g, "bs", {}, 54, 0.0f, 0.01f);
  AddIntInit(g, "bz", onnx::TensorProto::INT8, {}, 55, 3, 1);
  AddIntInit(g, "bz_col", onnx::TensorProto::INT8, {kQmN}, 56, -4, 9);
  AddFloatInit(g, "ys", {}, 57, 0.0f, 0.1f);
  AddIntInit(g, "yz", onnx::TensorProto::UINT8, {}, 58, 120, 1);
  AddFloatInit(g, "is", {}, 59, 0.0f, 1e-5f);
  ob::AddNode(g, "QuantizeLinear", {"x", "as", "az"}, {"q"});
  ob::AddNode(g, "QLinearMatMul", {"q", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"qm"});
  ob::AddNode(g, "DequantizeLinear", {"qm", "ys", "yz"}, {"d1"});
  ob::AddNode(g, "MatMulInteger", {"q", "b", "az", "bz_col"}, {"mi"});
  ob::AddNode(g, "DequantizeLinear", {"mi", "is"}, {"d2"});
  ob::AddNode(g, "Add", {"d1", "d2"}, {"y"});
  return ob::Serialize(m);
}

// A model under test: how to make its session, and its one input and output.
struct Case {
  std::string label;
  std::string bytes;  // model bytes, or empty to load `path`
  std::string path;
  const char* input;
  std::vector<int64_t> in_shape;
  const char* output;
  std::vector<int64_t> out_shape;
  const char* precision = nullptr;  // the "precision" session option, when set
};

Case Digits() {
  return {"digits",        "",     std::string(STRATA_SOURCE_DIR) + "/examples/digits.onnx", "image", {2, 1, 8, 8},
          "probabilities", {2, 10}};
}
Case Encoder() { return {"encoder", EncoderModel(), "", "x", {1, kSeq, kModel}, "y", {1, kSeq, kModel}}; }
Case ReluGemv() { return {"relu gemv", ReluGemvModel(), "", "x", {1, kMlpK}, "y", {1, kMlpK}}; }
Case Bf16Convs() {
  return {"bf16 convs",
          ConvPairModel(kBf16ConvHW),
          "",
          "x",
          {1, kConvC, kBf16ConvHW, kBf16ConvHW},
          "y",
          {1, kConvK, kBf16ConvHW, kBf16ConvHW},
          "bf16"};
}
// The same convs in fp32: the 3x3 one on Winograd (per-thread tile scratch), the 1x1 on the SGEMM.
Case WinogradConvs() {
  return {"winograd convs",
          ConvPairModel(kConvHW),
          "",
          "x",
          {1, kConvC, kConvHW, kConvHW},
          "y",
          {1, kConvK, kConvHW, kConvHW}};
}
Case Qdq() { return {"qdq", QdqModel(), "", "x", {4, 16}, "y", {4, 16}}; }
Case QLinearConvs() {
  return {"qlinearconv+convinteger", QLinearConvModel(), "", "x", {kQcN, kQcC, kQcHW, kQcHW}, "y",
          {kQcN, kQcK, kQcHW, kQcHW}};
}
Case QLinearMatMuls() {
  return {"qlinearmatmul+matmulinteger", QLinearMatMulModel(), "", "x", {kQmM, kQmK}, "y", {kQmM, kQmN}};
}
Case NBits(int64_t bits, int64_t level, int64_t M) {
  return {"matmulnbits bits=" + std::to_string(bits) + " level=" + std::to_string(level) + " M=" + std::to_string(M),
          NBitsModel(bits, level, M),
          "",
          "A",
          {M, kNbK},
          "Y",
          {M, kNbN}};
}

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

strata_session* MakeSession(const Case& c, int threads) {
  strata_session_options* o = nullptr;
  EXPECT_EQ(strata_session_options_create(&o), nullptr);
  EXPECT_EQ(strata_session_options_set_threads(o, threads), nullptr);
  if (c.precision) EXPECT_EQ(strata_session_options_set(o, "precision", c.precision), nullptr);
  strata_session* s = nullptr;
  strata_status* st = c.bytes.empty()
                          ? strata_session_create(nullptr, c.path.c_str(), o, &s)
                          : strata_session_create_from_memory(nullptr, c.bytes.data(), c.bytes.size(), o, &s);
  strata_session_options_destroy(o);
  EXPECT_EQ(st, nullptr) << c.label << ": " << (st ? Message(st) : "");
  return s;
}

std::vector<float> Input(const Case& c) {
  std::vector<float> x(static_cast<size_t>(Count(c.in_shape)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 17) / 17.0f - 0.3f;
  return x;
}

// Output of a plain strata_session_run (the reference the binding must match).
std::vector<float> PlainRun(strata_session* s, const Case& c, std::vector<float>& x) {
  strata_tensor* in = nullptr;
  EXPECT_EQ(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, c.in_shape.data(), c.in_shape.size(), x.data(),
                               x.size() * sizeof(float), &in),
            nullptr);
  const char* names[] = {c.input};
  const char* outs_names[] = {c.output};
  strata_tensor* out = nullptr;
  strata_status* st = strata_session_run(s, names, &in, 1, outs_names, &out, 1);
  EXPECT_EQ(st, nullptr) << (st ? Message(st) : "");
  std::vector<float> y;
  if (out) {
    const float* p = static_cast<const float*>(strata_tensor_data(out));
    y.assign(p, p + strata_tensor_element_count(out));
  }
  strata_tensor_destroy(in);
  strata_tensor_destroy(out);
  return y;
}

class AllocTest : public ::testing::TestWithParam<int> {};

// The hook really counts: a plain run (which builds its feeds, results and output
// tensors on the heap) is seen allocating.
TEST_P(AllocTest, HookCountsPlainRuns) {
  Case c = Digits();
  strata_session* s = MakeSession(c, GetParam());
  ASSERT_NE(s, nullptr);
  std::vector<float> x = Input(c);
  PlainRun(s, c, x);  // warm-up
  alloc_hook::Arm();
  PlainRun(s, c, x);
  alloc_hook::Disarm();
  EXPECT_GT(alloc_hook::Allocations(), 0u);
  EXPECT_GT(alloc_hook::Frees(), 0u);
  strata_session_destroy(s);
}

// Warm-up, then 100 binding runs: outputs equal the plain run's and not one run
// allocates or frees heap memory (malloc/free/new/delete in any thread of the process).
// With a thread pool the warm-up is a few runs: scratch buffers that live per pool thread
// (SGEMM packing) are created on a thread's first share of the work, and which thread
// takes which share varies from run to run.
constexpr int kWarmupRuns = 20;

void CheckSteadyState(const Case& c, int threads) {
  strata_session* s = MakeSession(c, threads);
  ASSERT_NE(s, nullptr);
  std::vector<float> x = Input(c);
  std::vector<float> want = PlainRun(s, c, x);
  ASSERT_EQ(want.size(), static_cast<size_t>(Count(c.out_shape)));

  strata_tensor *in = nullptr, *out = nullptr;
  std::vector<float> y(want.size(), -1.0f);
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, c.in_shape.data(), c.in_shape.size(), x.data(),
                                      x.size() * sizeof(float), &in));
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, c.out_shape.data(), c.out_shape.size(), y.data(),
                                      y.size() * sizeof(float), &out));
  strata_io_binding* b = nullptr;
  ASSERT_NO_STATUS(strata_io_binding_create(s, &b));
  ASSERT_NO_STATUS(strata_io_binding_bind_input(b, c.input, in));
  ASSERT_NO_STATUS(strata_io_binding_bind_output(b, c.output, out));
  strata_tensor_destroy(in);  // the binding keeps the view; the memory is ours
  for (int r = 0; r < kWarmupRuns; ++r) ASSERT_NO_STATUS(strata_session_run_binding(s, b));

  // Per-run counts, gathered with no allocation of our own while armed.
  constexpr int kRuns = 100;
  size_t allocs[kRuns], frees[kRuns];
  size_t failures = 0;
  for (int r = 0; r < kRuns; ++r) {
    alloc_hook::Arm();
    strata_status* st = strata_session_run_binding(s, b);
    alloc_hook::Disarm();
    allocs[r] = alloc_hook::Allocations();
    frees[r] = alloc_hook::Frees();
    if (st) {
      ++failures;
      strata_status_release(st);
    }
  }
  ASSERT_EQ(failures, 0u);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-5f) << c.label << " element " << i;
  EXPECT_EQ(strata_io_binding_outputs_in_place(b), 1) << c.label << ": the last kernel should write into our buffer";

  alloc_hook::Arm();
  PlainRun(s, c, x);
  alloc_hook::Disarm();
  const size_t plain = alloc_hook::Allocations();
  const size_t max_allocs = *std::max_element(allocs, allocs + kRuns);
  const size_t max_frees = *std::max_element(frees, frees + kRuns);
  for (int r = 0; r < kRuns; ++r) {
    EXPECT_EQ(allocs[r], 0u) << c.label << " threads=" << threads << ": binding run " << r << " allocated " << allocs[r]
                             << " times (STRATA_ALLOC_TRACE=N prints where)";
    EXPECT_EQ(frees[r], 0u) << c.label << " threads=" << threads << ": binding run " << r << " freed " << frees[r]
                            << " times";
  }
  std::printf(
      "[ alloc    ] %s threads=%d: at most %zu allocations and %zu frees per binding run over %d runs (plain "
      "run: %zu allocations)\n",
      c.label.c_str(), threads, max_allocs, max_frees, kRuns, plain);

  // Changing the input in place is picked up by the next run without rebinding.
  for (float& v : x) v *= 0.5f;
  std::vector<float> want2 = PlainRun(s, c, x);
  ASSERT_NO_STATUS(strata_session_run_binding(s, b));
  for (size_t i = 0; i < want2.size(); ++i) ASSERT_NEAR(y[i], want2[i], 1e-5f) << c.label << " element " << i;

  strata_io_binding_destroy(b);
  strata_tensor_destroy(out);
  strata_session_destroy(s);
}

TEST_P(AllocTest, DigitsSteadyState) { CheckSteadyState(Digits(), GetParam()); }
TEST_P(AllocTest, EncoderSteadyState) { CheckSteadyState(Encoder(), GetParam()); }
TEST_P(AllocTest, WinogradConvSteadyState) { CheckSteadyState(WinogradConvs(), GetParam()); }
TEST_P(AllocTest, QuantizeDequantizeLinearSteadyState) { CheckSteadyState(Qdq(), GetParam()); }
// The integer ops with constant weights (packed at creation, per-run buffers from the
// session allocator).
TEST_P(AllocTest, QLinearConvSteadyState) { CheckSteadyState(QLinearConvs(), GetParam()); }
TEST_P(AllocTest, QLinearMatMulSteadyState) { CheckSteadyState(QLinearMatMuls(), GetParam()); }
TEST_P(AllocTest, SparseGemvSteadyState) { CheckSteadyState(ReluGemv(), GetParam()); }
TEST_P(AllocTest, Bf16ConvSteadyState) { CheckSteadyState(Bf16Convs(), GetParam()); }
// MatMulNBits per path (on AVX-512 VNNI): M = 1 the GEMV, M = 16 the 4-bit table GEMM (8
// bits: the panel GEMM), M = 40 the panel GEMM; level 4 quantizes A to int8 for all three.
TEST_P(AllocTest, MatMulNBitsSteadyState) {
  for (int64_t bits : {4, 8})
    for (int64_t level : {0, 4})
      for (int64_t M : {1, 16, 40}) CheckSteadyState(NBits(bits, level, M), GetParam());
}
// The AVX2 and scalar kernels (STRATA_FORCE_ISA caps the ISA at session creation): the GEMV
// and the panel GEMM, whose per-task panel must not come from the heap either.
TEST_P(AllocTest, MatMulNBitsCappedIsaSteadyState) {
  const char* old = std::getenv("STRATA_FORCE_ISA");
  const std::string saved = old ? old : "";
  for (const char* isa : {"avx2", "scalar"}) {
    setenv("STRATA_FORCE_ISA", isa, 1);
    for (int64_t bits : {4, 8})
      for (int64_t M : {1, 16}) {
        Case c = NBits(bits, 0, M);
        c.label += std::string(" isa=") + isa;
        CheckSteadyState(c, GetParam());
      }
  }
  if (old) {
    setenv("STRATA_FORCE_ISA", saved.c_str(), 1);
  } else {
    unsetenv("STRATA_FORCE_ISA");
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, AllocTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) { return "threads" + std::to_string(i.param); });

// Bad bindings are refused with errors that name the problem.
TEST(IoBinding, ErrorsNameTheProblem) {
  Case c = Digits();
  strata_session* s = MakeSession(c, 1);
  ASSERT_NE(s, nullptr);
  strata_io_binding* b = nullptr;
  ASSERT_NO_STATUS(strata_io_binding_create(s, &b));

  std::vector<float> x(2 * 64), y(2 * 10), wrong(2 * 7);
  int64_t in_dims[] = {2, 1, 8, 8}, out_dims[] = {2, 10}, bad_dims[] = {2, 7};
  strata_tensor *in = nullptr, *out = nullptr, *bad = nullptr, *i64 = nullptr;
  std::vector<int64_t> y64(20);
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, in_dims, 4, x.data(), x.size() * 4, &in));
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, out_dims, 2, y.data(), y.size() * 4, &out));
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, bad_dims, 2, wrong.data(), wrong.size() * 4, &bad));
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_INT64, out_dims, 2, y64.data(), y64.size() * 8, &i64));

  strata_status* st = strata_io_binding_bind_output(b, "probabilities", bad);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(strata_status_get_code(st), STRATA_INVALID_ARGUMENT);
  std::string m = Message(st);
  EXPECT_NE(m.find("probabilities"), std::string::npos) << m;
  EXPECT_NE(m.find("[2,7]"), std::string::npos) << m;

  st = strata_io_binding_bind_output(b, "probabilities", i64);
  ASSERT_NE(st, nullptr);
  m = Message(st);
  EXPECT_NE(m.find("probabilities"), std::string::npos) << m;
  EXPECT_NE(m.find("int64"), std::string::npos) << m;

  st = strata_io_binding_bind_output(b, "nope", out);
  ASSERT_NE(st, nullptr);
  m = Message(st);
  EXPECT_NE(m.find("'nope' is not an output"), std::string::npos) << m;

  st = strata_io_binding_bind_input(b, "image", bad);
  ASSERT_NE(st, nullptr);
  m = Message(st);
  EXPECT_NE(m.find("image"), std::string::npos) << m;

  // Run with the input unbound.
  ASSERT_NO_STATUS(strata_io_binding_bind_output(b, "probabilities", out));
  st = strata_session_run_binding(s, b);
  ASSERT_NE(st, nullptr);
  m = Message(st);
  EXPECT_NE(m.find("input 'image'"), std::string::npos) << m;
  EXPECT_NE(m.find("not bound"), std::string::npos) << m;

  // An output whose batch dim (symbolic in the model) differs from the run's: caught
  // after the run, naming the output.
  int64_t small_dims[] = {1, 10};
  strata_tensor* small = nullptr;
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, small_dims, 2, y.data(), 10 * 4, &small));
  ASSERT_NO_STATUS(strata_io_binding_bind_input(b, "image", in));
  ASSERT_NO_STATUS(strata_io_binding_bind_output(b, "probabilities", small));
  st = strata_session_run_binding(s, b);
  ASSERT_NE(st, nullptr);
  m = Message(st);
  EXPECT_NE(m.find("output 'probabilities' has shape [2,10]"), std::string::npos) << m;
  EXPECT_NE(m.find("[1,10]"), std::string::npos) << m;

  // A binding belongs to its session.
  strata_session* other = MakeSession(c, 1);
  st = strata_session_run_binding(other, b);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(Message(st).find("different session"), std::string::npos);
  strata_io_binding* none = nullptr;
  st = strata_io_binding_create(nullptr, &none);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(Message(st).find("session is NULL"), std::string::npos);

  for (strata_tensor* t : {in, out, bad, i64, small}) strata_tensor_destroy(t);
  strata_io_binding_destroy(b);
  strata_session_destroy(other);
  strata_session_destroy(s);
}

// One binding run from two threads at once: the loser gets a clear error, the results
// are never corrupted.
TEST(IoBinding, ConcurrentRunsOfOneBindingAreRefused) {
  Case c = Encoder();
  strata_session* s = MakeSession(c, 1);
  ASSERT_NE(s, nullptr);
  std::vector<float> x = Input(c);
  std::vector<float> want = PlainRun(s, c, x);
  std::vector<float> y(want.size());
  strata_tensor *in = nullptr, *out = nullptr;
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, c.in_shape.data(), 3, x.data(), x.size() * 4, &in));
  ASSERT_NO_STATUS(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, c.out_shape.data(), 3, y.data(), y.size() * 4, &out));
  strata_io_binding* b = nullptr;
  ASSERT_NO_STATUS(strata_io_binding_create(s, &b));
  ASSERT_NO_STATUS(strata_io_binding_bind_input(b, "x", in));
  ASSERT_NO_STATUS(strata_io_binding_bind_output(b, "y", out));

  std::atomic<int> ok{0}, refused{0}, other_error{0};
  auto worker = [&] {
    for (int i = 0; i < 300; ++i) {
      strata_status* st = strata_session_run_binding(s, b);
      if (!st) {
        ++ok;
      } else {
        std::string m = Message(st);
        if (m.find("single-threaded") != std::string::npos) {
          ++refused;
        } else {
          ++other_error;
        }
      }
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  EXPECT_EQ(other_error.load(), 0);
  EXPECT_EQ(ok.load() + refused.load(), 600);
  EXPECT_GT(ok.load(), 0);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-5f) << i;
  std::printf("[ binding  ] concurrent: %d runs, %d refused\n", ok.load(), refused.load());

  strata_io_binding_destroy(b);
  strata_tensor_destroy(in);
  strata_tensor_destroy(out);
  strata_session_destroy(s);
}

// The C++ wrapper's RAII IoBinding.
TEST(IoBinding, CppWrapper) {
  Case c = Digits();
  strata::Env env;
  strata::SessionOptions opts;
  opts.SetThreads(1);
  strata::Session session(env, c.path, &opts);
  std::vector<float> x = Input(c), y(20, 0.0f);
  strata::Tensor in = strata::Tensor::Wrap(STRATA_DTYPE_FLOAT32, c.in_shape, x.data(), x.size());
  strata::Tensor out = strata::Tensor::Wrap(STRATA_DTYPE_FLOAT32, c.out_shape, y.data(), y.size());
  strata::IoBinding binding(session);
  binding.BindInput("image", in).BindOutput("probabilities", out);
  binding.Run();
  binding.Run();
  auto want = session.Run({{"image", &in}});
  ASSERT_EQ(want.size(), 1u);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[0].data<float>()[i], 1e-6f);
  EXPECT_TRUE(binding.OutputsInPlace());
  try {
    binding.BindOutput("probabilities", in);
    FAIL() << "binding an input-shaped buffer as the output should throw";
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.code(), STRATA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("probabilities"), std::string::npos) << e.what();
  }
}

}  // namespace
