// Tests for the ONNX importer: models are built in memory with the onnx protobuf API,
// serialised, imported, and the resulting IR (or the error) is checked.
#include <gtest/gtest.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>

#include "core/onnx_import.h"
#include "onnx_builder.h"
#include "test_files.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
const std::string kTestData = "/usr/share/libonnx-testdata/data";

// ---- model building helpers ----

using namespace onnx_builder;  // AddInput, AddOutput, AddNode, AddFloatInit, SetType, Serialize
using testing::TempDir;

onnx::ModelProto MakeModel(int opset = 13, int64_t ir = 8) {
  onnx::ModelProto m = onnx_builder::MakeModel(opset, "import_test");
  m.set_ir_version(ir);
  return m;
}

// Output whose dims are all unknown (lets shape inference fill them in). The checker wants
// main-graph outputs to have a shape, so the rank is given.
void AddOutputUnknownDims(onnx::GraphProto* g, const std::string& name, int rank, int elem = onnx::TensorProto::FLOAT) {
  auto* v = g->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int i = 0; i < rank; ++i) shape->add_dim();
}

Result<Model> Import(const onnx::ModelProto& m, const ImportOptions& opts = {}) {
  std::string s = Serialize(m);
  return ImportOnnxBytes(s.data(), s.size(), opts);
}

const Node* FindNode(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

void ExpectError(const Result<Model>& r, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "error is not one line";
}

// ---- happy paths ----

TEST(ImportBasic, ValuesInputsOutputsInitializersAndTypes) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {-1, 3});
  AddFloatInit(g, "W", {3}, {1, 2, 3});
  AddNode(g, "Add", {"X", "W"}, {"S"});
  AddNode(g, "Relu", {"S"}, {"Y"}, "relu");
  AddOutputUnknownDims(g, "Y", 2);
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& ir = *r->graph;
  EXPECT_EQ(r->ir_version, 8);
  EXPECT_EQ(r->opsets.at(""), 13);
  ASSERT_EQ(ir.inputs.size(), 1u);
  EXPECT_EQ(ir.ValueName(ir.inputs[0]), "X");
  EXPECT_EQ(ir.values[ir.inputs[0]].type.ToString(), "float32[n,3]");
  ASSERT_EQ(ir.outputs.size(), 1u);
  EXPECT_EQ(ir.ValueName(ir.outputs[0]), "Y");
  // Shape inference filled the output's shape, including the symbolic dim.
  EXPECT_EQ(ir.values[ir.outputs[0]].type.ToString(), "float32[n,3]");
  EXPECT_EQ(ir.values[ir.FindValue("S")].type.ToString(), "float32[n,3]");
  int w = ir.FindValue("W");
  ASSERT_TRUE(ir.IsConstant(w));
  const Tensor* wt = ir.Constant(w);
  ASSERT_EQ(wt->shape(), (Shape{3}));
  EXPECT_EQ(wt->data<float>()[2], 3.0f);
  ASSERT_EQ(ir.nodes.size(), 2u);
  EXPECT_EQ(ir.nodes[0].name, "Add_0");  // unnamed nodes get "<op>_<index>"
  EXPECT_EQ(ir.nodes[0].opset, 13);
  EXPECT_EQ(ir.nodes[0].domain, "");
  EXPECT_EQ(ir.nodes[0].inputs, (std::vector<int>{ir.FindValue("X"), w}));
  EXPECT_EQ(ir.nodes[1].name, "relu");
  EXPECT_EQ(ir.nodes[1].outputs, (std::vector<int>{ir.outputs[0]}));
}

// A Conv whose W another node makes (weight normalisation: W = V * scale) is kept from libonnx's
// inference until W's shape is known (the kernel-rank guard, import_infer_guard.cc); a second
// inference call then types the Conv and everything after it, which the optimizer's fusions
// need. Without it, c and y stayed untyped.
TEST(ImportBasic, ConvWithComputedWeightIsTypedDownstream) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 3, 8, 8});
  AddPseudoRandomInit(g, "v", {8, 3, 3, 3}, 7);
  AddFloatInit(g, "scale", {8, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2});
  AddNode(g, "Mul", {"v", "scale"}, {"w"});
  SetInts(AddNode(g, "Conv", {"x", "w"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  AddNode(g, "Relu", {"c"}, {"y"});
  AddOutputUnknownDims(g, "y", 4);
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& ir = *r->graph;
  EXPECT_EQ(ir.values[ir.FindValue("w")].type.ToString(), "float32[8,3,3,3]");
  EXPECT_EQ(ir.values[ir.FindValue("c")].type.ToString(), "float32[1,8,8,8]");
  EXPECT_EQ(ir.values[ir.FindValue("y")].type.ToString(), "float32[1,8,8,8]");
  // The kernel_shape the guard lent libonnx is not left on the node.
  const Node* conv = FindNode(ir, "Conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_FALSE(conv->HasAttr("kernel_shape"));
}

TEST(ImportBasic, DomainName) {
  EXPECT_EQ(OnnxDomainName(""), "ai.onnx");
  EXPECT_EQ(OnnxDomainName("ai.onnx"), "ai.onnx");
  EXPECT_EQ(OnnxDomainName("ai.onnx.ml"), "ai.onnx.ml");
}

TEST(ImportBasic, EmptyOptionalNamesMapToMinusOne) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {4});
  AddFloatInit(g, "lo", {}, {0});
  AddNode(g, "Clip", {"X", "", "lo"}, {"Y"});  // min omitted, max given
  AddOutput(g, "Y", {4});
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node& n = r->graph->nodes.at(0);
  ASSERT_EQ(n.inputs.size(), 3u);
  EXPECT_EQ(n.inputs[1], -1);
  EXPECT_EQ(n.inputs[2], r->graph->FindValue("lo"));
}

TEST(ImportBasic, AttributesOfAllKinds) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1, 1, 4, 4});
  auto* n = AddNode(g, "MaxPool", {"X"}, {"Y"}, "pool");
  auto* a = n->add_attribute();
  a->set_name("kernel_shape");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(2);
  a->add_ints(2);
  a = n->add_attribute();
  a->set_name("auto_pad");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("VALID");
  auto* lr = AddNode(g, "LeakyRelu", {"Y"}, {"Z"}, "lrelu");
  a = lr->add_attribute();
  a->set_name("alpha");
  a->set_f(0.25f);  // type left UNDEFINED, as some old exporters do: inferred from the field
  AddOutput(g, "Z", {1, 1, 2, 2});
  auto r = Import(m, ImportOptions{.run_checker = false});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node* pool = FindNode(*r->graph, "MaxPool");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->GetInts("kernel_shape"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(pool->GetString("auto_pad", ""), "VALID");
  EXPECT_FLOAT_EQ(FindNode(*r->graph, "LeakyRelu")->GetFloat("alpha", 0), 0.25f);
}

TEST(ImportBasic, TypeProtoAttributeBecomesTypeString) {
  auto m = MakeModel(15);
  auto* g = m.mutable_graph();
  auto* n = AddNode(g, "Optional", {}, {"O"}, "empty_opt");
  auto* a = n->add_attribute();
  a->set_name("type");
  a->set_type(onnx::AttributeProto::TYPE_PROTO);
  SetType(a->mutable_tp()->mutable_sequence_type()->mutable_elem_type(), onnx::TensorProto::INT64, {});
  AddNode(g, "OptionalHasElement", {"O"}, {"H"});
  AddOutput(g, "H", {}, onnx::TensorProto::BOOL);
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node* opt = FindNode(*r->graph, "Optional");
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->GetString("type", ""), "seq(tensor(int64))");
  // Shape inference typed the optional value.
  const TypeInfo& t = r->graph->values[r->graph->FindValue("O")].type;
  EXPECT_EQ(t.kind, TypeInfo::Kind::kOptional);
  EXPECT_TRUE(t.optional_of_sequence);
  EXPECT_EQ(t.elem_type, DataType::kInt64);
}

TEST(ImportInitializer, AllStorageForms) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  auto add = [&](const std::string& name, int dt, std::initializer_list<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(dt);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  };
  float raw[2] = {1.5f, -2.0f};
  add("raw", onnx::TensorProto::FLOAT, {2})->set_raw_data(std::string(reinterpret_cast<char*>(raw), sizeof(raw)));
  auto* i8 = add("i8", onnx::TensorProto::INT8, {2});
  i8->add_int32_data(-5);
  i8->add_int32_data(7);
  add("rawbool", onnx::TensorProto::BOOL, {2})->set_raw_data(std::string("\x00\x05", 2));
  auto* u8 = add("u8", onnx::TensorProto::UINT8, {1});
  u8->add_int32_data(200);
  auto* b = add("b", onnx::TensorProto::BOOL, {2});
  b->add_int32_data(1);
  b->add_int32_data(0);
  auto* h = add("h", onnx::TensorProto::FLOAT16, {1});
  h->add_int32_data(FloatToHalf(0.5f));
  auto* bf = add("bf", onnx::TensorProto::BFLOAT16, {1});
  bf->add_int32_data(FloatToBFloat16(3.0f));
  auto* i16 = add("i16", onnx::TensorProto::INT16, {1});
  i16->add_int32_data(-300);
  auto* i32 = add("i32", onnx::TensorProto::INT32, {1});
  i32->add_int32_data(-70000);
  auto* i64 = add("i64", onnx::TensorProto::INT64, {2});
  i64->add_int64_data(int64_t{1} << 40);
  i64->add_int64_data(-1);
  auto* u32 = add("u32", onnx::TensorProto::UINT32, {1});
  u32->add_uint64_data(4000000000u);
  auto* u64 = add("u64", onnx::TensorProto::UINT64, {1});
  u64->add_uint64_data(uint64_t{1} << 63);
  auto* d = add("d", onnx::TensorProto::DOUBLE, {1});
  d->add_double_data(2.25);
  auto* s = add("s", onnx::TensorProto::STRING, {2});
  s->add_string_data("hello");
  s->add_string_data("");
  add("empty", onnx::TensorProto::FLOAT, {0, 3});
  AddInput(g, "X", {2});
  AddNode(g, "Add", {"X", "raw"}, {"Y"});
  AddOutput(g, "Y", {2});
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& ir = *r->graph;
  auto get = [&](const std::string& n) { return ir.Constant(ir.FindValue(n)); };
  EXPECT_EQ(get("raw")->data<float>()[1], -2.0f);
  EXPECT_EQ(get("i8")->data<int8_t>()[0], -5);
  const auto* rb = static_cast<const uint8_t*>(get("rawbool")->raw_data());
  EXPECT_EQ(rb[0], 0);
  EXPECT_EQ(rb[1], 1);  // normalised to a valid bool
  EXPECT_EQ(get("u8")->data<uint8_t>()[0], 200);
  EXPECT_TRUE(get("b")->data<bool>()[0]);
  EXPECT_FALSE(get("b")->data<bool>()[1]);
  EXPECT_EQ(static_cast<float>(get("h")->data<Float16>()[0]), 0.5f);
  EXPECT_EQ(static_cast<float>(get("bf")->data<BFloat16>()[0]), 3.0f);
  EXPECT_EQ(get("i16")->data<int16_t>()[0], -300);
  EXPECT_EQ(get("i32")->data<int32_t>()[0], -70000);
  EXPECT_EQ(get("i64")->data<int64_t>()[0], int64_t{1} << 40);
  EXPECT_EQ(get("u32")->data<uint32_t>()[0], 4000000000u);
  EXPECT_EQ(get("u64")->data<uint64_t>()[0], uint64_t{1} << 63);
  EXPECT_EQ(get("d")->data<double>()[0], 2.25);
  EXPECT_EQ(get("s")->data<std::string>()[0], "hello");
  EXPECT_EQ(get("empty")->shape(), (Shape{0, 3}));
  EXPECT_EQ(ir.values[ir.FindValue("i64")].type.ToString(), "int64[2]");
  // None of the initializers is declared in graph.input, so none is a graph input.
  EXPECT_EQ(ir.inputs.size(), 1u);
}

TEST(ImportInitializer, InputWithDefaultStaysOverridableOnlyInIr4AndLater) {
  for (int64_t ir : {8, 3}) {
    auto m = MakeModel(ir >= 4 ? 13 : 7, ir);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2});
    AddInput(g, "B", {2});
    AddFloatInit(g, "B", {2}, {1, 2});
    AddNode(g, "Add", {"X", "B"}, {"Y"});
    AddOutput(g, "Y", {2});
    auto r = Import(m);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Graph& gr = *r->graph;
    int b = gr.FindValue("B");
    EXPECT_TRUE(gr.IsConstant(b));
    bool listed = std::find(gr.inputs.begin(), gr.inputs.end(), b) != gr.inputs.end();
    EXPECT_EQ(listed, ir >= 4) << "ir_version " << ir;
  }
}

TEST(ImportConstant, FoldedIntoInitializers) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  auto* c = AddNode(g, "Constant", {}, {"C"});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(2);
  a->mutable_t()->add_float_data(4);
  a->mutable_t()->add_float_data(5);
  auto add_const = [&](const std::string& out, const std::string& attr, auto fill) {
    auto* n = AddNode(g, "Constant", {}, {out});
    auto* at = n->add_attribute();
    at->set_name(attr);
    fill(at);
  };
  add_const("F", "value_float", [](onnx::AttributeProto* at) {
    at->set_type(onnx::AttributeProto::FLOAT);
    at->set_f(1.5f);
  });
  add_const("FS", "value_floats", [](onnx::AttributeProto* at) {
    at->set_type(onnx::AttributeProto::FLOATS);
    at->add_floats(1);
    at->add_floats(2);
  });
  add_const("I", "value_int", [](onnx::AttributeProto* at) {
    at->set_type(onnx::AttributeProto::INT);
    at->set_i(-3);
  });
  add_const("IS", "value_ints", [](onnx::AttributeProto* at) {
    at->set_type(onnx::AttributeProto::INTS);
    at->add_ints(7);
    at->add_ints(8);
    at->add_ints(9);
  });
  add_const("S", "value_string", [](onnx::AttributeProto* at) {
    at->set_type(onnx::AttributeProto::STRING);
    at->set_s("abc");
  });
  add_const("SS", "value_strings", [](onnx::AttributeProto* at) {
    at->set_type(onnx::AttributeProto::STRINGS);
    at->add_strings("x");
    at->add_strings("y");
  });
  AddInput(g, "X", {2});
  AddNode(g, "Add", {"X", "C"}, {"Y"});
  AddOutput(g, "Y", {2});
  AddOutput(g, "IS", {3}, onnx::TensorProto::INT64);
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& ir = *r->graph;
  ASSERT_EQ(ir.nodes.size(), 1u);  // only the Add is left
  EXPECT_EQ(ir.nodes[0].op_type, "Add");
  auto get = [&](const std::string& n) { return ir.Constant(ir.FindValue(n)); };
  ASSERT_NE(get("C"), nullptr);
  EXPECT_EQ(get("C")->data<float>()[1], 5.0f);
  EXPECT_EQ(get("F")->shape(), Shape{});
  EXPECT_EQ(get("F")->data<float>()[0], 1.5f);
  EXPECT_EQ(get("FS")->shape(), Shape{2});
  EXPECT_EQ(get("I")->data<int64_t>()[0], -3);
  EXPECT_EQ(get("IS")->shape(), Shape{3});
  EXPECT_EQ(get("IS")->data<int64_t>()[2], 9);
  EXPECT_EQ(get("S")->data<std::string>()[0], "abc");
  EXPECT_EQ(get("SS")->data<std::string>()[1], "y");
  EXPECT_EQ(ir.values[ir.FindValue("C")].type.ToString(), "float32[2]");
  EXPECT_TRUE(ir.IsConstant(ir.outputs[1]));
}

// If node whose branches read an outer value; the then-branch nests a second If that reads
// the same outer value, so both levels must capture it.
onnx::ModelProto NestedIfModel(int depth_extra = 0) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "cond", {}, onnx::TensorProto::BOOL);
  AddInput(g, "X", {2});
  AddNode(g, "Neg", {"X"}, {"NX"}, "neg");
  auto* iff = AddNode(g, "If", {"cond"}, {"Y"}, "if");
  auto* then_attr = iff->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* then_g = then_attr->mutable_g();
  then_g->set_name("then");
  auto* inner = AddNode(then_g, "If", {"cond"}, {"T"}, "inner_if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* ia = inner->add_attribute();
    ia->set_name(branch);
    ia->set_type(onnx::AttributeProto::GRAPH);
    auto* ig = ia->mutable_g();
    ig->set_name(std::string("inner_") + branch);
    AddNode(ig, "Abs", {"NX"}, {std::string("A_") + branch});
    AddOutput(ig, std::string("A_") + branch, {2});
  }
  AddOutput(then_g, "T", {2});
  auto* else_attr = iff->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* else_g = else_attr->mutable_g();
  else_g->set_name("else");
  AddNode(else_g, "Identity", {"X"}, {"E"});
  AddOutput(else_g, "E", {2});
  AddOutput(g, "Y", {2});
  (void)depth_extra;
  return m;
}

TEST(ImportSubgraph, CapturesOuterValuesAtEveryLevel) {
  auto r = Import(NestedIfModel());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& ir = *r->graph;
  const Node* iff = FindNode(ir, "If");
  ASSERT_NE(iff, nullptr);
  const Graph& then_g = *iff->FindAttr("then_branch")->g;
  const Graph& else_g = *iff->FindAttr("else_branch")->g;
  // The inner If reads `cond`; its branches read NX, so the then-branch captures both.
  std::set<std::string> then_caps;
  for (int c : then_g.captures) then_caps.insert(then_g.ValueName(c));
  EXPECT_EQ(then_caps, (std::set<std::string>{"cond", "NX"}));
  ASSERT_EQ(else_g.captures.size(), 1u);
  EXPECT_EQ(else_g.ValueName(else_g.captures[0]), "X");
  const Node* inner = FindNode(then_g, "If");
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->opset, 13);
  const Graph& deep = *inner->FindAttr("then_branch")->g;
  ASSERT_EQ(deep.captures.size(), 1u);
  EXPECT_EQ(deep.ValueName(deep.captures[0]), "NX");
  // Captures carry the outer value's type.
  EXPECT_EQ(deep.values[deep.captures[0]].type.ToString(), "float32[2]");
  EXPECT_TRUE(ir.captures.empty());
  ASSERT_EQ(deep.nodes.size(), 1u);
  EXPECT_EQ(deep.nodes[0].inputs[0], deep.captures[0]);
}

TEST(ImportSubgraph, DepthLimit) {
  ImportOptions opts;
  opts.max_subgraph_depth = 1;
  ExpectError(Import(NestedIfModel(), opts), StatusCode::kInvalidModel, "nested 2 levels deep");
  opts.max_subgraph_depth = 2;
  EXPECT_TRUE(Import(NestedIfModel(), opts).ok());
}

TEST(ImportTopology, OutOfOrderGraphIsSorted) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Relu", {"B"}, {"Y"}, "last");
  AddNode(g, "Neg", {"A"}, {"B"}, "middle");
  AddNode(g, "Abs", {"X"}, {"A"}, "first");
  AddOutput(g, "Y", {2});
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->graph->nodes.size(), 3u);
  EXPECT_EQ(r->graph->nodes[0].name, "first");
  EXPECT_EQ(r->graph->nodes[1].name, "middle");
  EXPECT_EQ(r->graph->nodes[2].name, "last");
}

// ---- function inlining ----

TEST(ImportFunction, ModelLocalFunctionIsInlined) {
  auto m = MakeModel(13);
  auto* f = AddLocalFunction(&m, "custom", "ScaledRelu");
  f->add_input("x");
  f->add_output("y");
  f->add_attribute("alpha");
  auto* fi = f->add_opset_import();
  fi->set_domain("");
  fi->set_version(13);
  auto* n1 = f->add_node();
  n1->set_op_type("LeakyRelu");
  n1->add_input("x");
  n1->add_output("t");
  auto* ref = n1->add_attribute();
  ref->set_name("alpha");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  auto* n2 = f->add_node();
  n2->set_op_type("Neg");
  n2->add_input("t");
  n2->add_output("y");
  auto* g = m.mutable_graph();
  AddInput(g, "X", {3});
  auto* call = AddNode(g, "ScaledRelu", {"X"}, {"Y"}, "call");
  call->set_domain("custom");
  auto* alpha = call->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  AddOutput(g, "Y", {3});
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& ir = *r->graph;
  ASSERT_EQ(ir.nodes.size(), 2u);
  EXPECT_EQ(ir.nodes[0].op_type, "LeakyRelu");
  EXPECT_EQ(ir.nodes[0].name, "call/LeakyRelu_0");
  EXPECT_FLOAT_EQ(ir.nodes[0].GetFloat("alpha", 0), 0.5f);
  EXPECT_EQ(ir.nodes[0].inputs[0], ir.FindValue("X"));
  EXPECT_EQ(ir.nodes[1].op_type, "Neg");
  EXPECT_EQ(ir.nodes[1].outputs[0], ir.FindValue("Y"));
  EXPECT_EQ(ir.nodes[1].inputs[0], ir.nodes[0].outputs[0]);
  EXPECT_NE(ir.ValueName(ir.nodes[0].outputs[0]), "t");  // inner names are made unique
  EXPECT_EQ(ir.nodes[1].opset, 13);
}

TEST(ImportFunction, RecursiveLocalFunctionIsRejected) {
  auto m = MakeModel(13);
  auto* f = AddLocalFunction(&m, "custom", "Forever");
  f->add_input("x");
  f->add_output("y");
  auto* fi = f->add_opset_import();
  fi->set_domain("custom");
  fi->set_version(1);
  for (int i = 0; i < 2; ++i) {  // two self-calls: naive expansion would explode
    auto* n = f->add_node();
    n->set_op_type("Forever");
    n->set_domain("custom");
    n->add_input(i == 0 ? "x" : "t");
    n->add_output(i == 0 ? "t" : "y");
  }
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1});
  AddNode(g, "Forever", {"X"}, {"Y"}, "call")->set_domain("custom");
  AddOutput(g, "Y", {1});
  ExpectError(Import(m), StatusCode::kInvalidModel, "calls itself");
  ExpectError(Import(m, ImportOptions{.run_checker = false}), StatusCode::kInvalidModel, "calls itself");
  // A duplicate definition is rejected as well.
  *m.add_functions() = m.functions(0);
  ExpectError(Import(m), StatusCode::kInvalidModel, "defined twice");
}

TEST(ImportFunction, SchemaFunctionInlinedOnlyWithoutKernel) {
  const std::string path = kTestData + "/node/test_celu/model.onnx";
  if (!fs::exists(path)) GTEST_SKIP() << "libonnx-testdata not installed";
  auto plain = ImportOnnxFile(path);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_NE(FindNode(*plain->graph, "Celu"), nullptr);  // has_kernel unset: never inline

  ImportOptions opts;
  opts.has_kernel = [](const std::string& domain, const std::string& op, int) { return op != "Celu"; };
  auto r = ImportOnnxFile(path, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FindNode(*r->graph, "Celu"), nullptr);
  EXPECT_GT(r->graph->nodes.size(), 1u);
  for (const auto& n : r->graph->nodes) EXPECT_GT(n.opset, 0) << n.Describe();
  EXPECT_EQ(r->graph->nodes.back().outputs[0], r->graph->outputs[0]);
}

TEST(ImportFunction, ContextDependentFunctionUsesInferredTypes) {
  const std::string path = kTestData + "/node/test_layer_normalization_2d_axis0/model.onnx";
  if (!fs::exists(path)) GTEST_SKIP() << "libonnx-testdata not installed";
  ImportOptions opts;
  opts.has_kernel = [](const std::string&, const std::string& op, int) { return op != "LayerNormalization"; };
  auto r = ImportOnnxFile(path, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FindNode(*r->graph, "LayerNormalization"), nullptr);
  EXPECT_GT(r->graph->nodes.size(), 5u);
}

// ---- bad inputs ----

TEST(ImportErrors, GarbageBytes) {
  std::string junk = "this is definitely not a protobuf \xff\xff\xff\xff";
  ExpectError(ImportOnnxBytes(junk.data(), junk.size(), {}), StatusCode::kInvalidModel, "not a valid ONNX model");
  ExpectError(ImportOnnxBytes(junk.data(), 0, {}), StatusCode::kInvalidModel, "empty");
}

TEST(ImportErrors, MissingFile) {
  auto r = ImportOnnxFile("/nonexistent/dir/model.onnx");
  ExpectError(r, StatusCode::kNotFound, "/nonexistent/dir/model.onnx");
  EXPECT_NE(r.status().message().find("does not exist"), std::string::npos);
  TempDir dir;
  ExpectError(ImportOnnxFile(dir.path()), StatusCode::kIOError, "directory");
  ExpectError(ImportOnnxFile("/dev/zero"), StatusCode::kIOError, "not a regular file");
}

TEST(ImportErrors, TruncatedFileNamesTheFile) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {64});
  std::vector<float> big(64, 1.0f);
  auto* t = g->add_initializer();
  t->set_name("W");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(64);
  t->set_raw_data(std::string(reinterpret_cast<char*>(big.data()), big.size() * 4));
  AddNode(g, "Add", {"X", "W"}, {"Y"});
  AddOutput(g, "Y", {64});
  std::string bytes = Serialize(m);
  TempDir dir;
  dir.Write("cut.onnx", bytes.substr(0, bytes.size() / 2));
  auto r = ImportOnnxFile(dir.File("cut.onnx"));
  ExpectError(r, StatusCode::kInvalidModel, dir.File("cut.onnx"));
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
}

TEST(ImportErrors, CheckerFailureIsInvalidModel) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Add", {"X"}, {"Y"}, "lonely_add");  // Add needs two inputs
  AddOutput(g, "Y", {2});
  ExpectError(Import(m), StatusCode::kInvalidModel, "ONNX checker");
  m.mutable_graph()->mutable_node(0)->set_op_type("NoSuchOp");
  ExpectError(Import(m), StatusCode::kInvalidModel, "NoSuchOp");
  // With the checker off the unknown op gets through (a missing kernel is reported later).
  EXPECT_TRUE(Import(m, ImportOptions{.run_checker = false}).ok());
}

TEST(ImportErrors, Cycle) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Abs", {"X"}, {"A"}, "entry");
  AddNode(g, "Add", {"A", "C"}, {"B"}, "loop_a");
  AddNode(g, "Neg", {"B"}, {"C"}, "loop_b");
  AddNode(g, "Relu", {"C"}, {"Y"}, "after");
  AddOutput(g, "Y", {2});
  auto r = Import(m);
  ExpectError(r, StatusCode::kInvalidModel, "cycle");
  const std::string& msg = r.status().message();
  EXPECT_TRUE(msg.find("loop_a") != std::string::npos || msg.find("loop_b") != std::string::npos) << msg;
}

TEST(ImportErrors, DuplicateProducer) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Abs", {"X"}, {"A"}, "one");
  AddNode(g, "Neg", {"X"}, {"A"}, "two");
  AddOutput(g, "A", {2});
  ExpectError(Import(m), StatusCode::kInvalidModel, "'A'");
  auto r = Import(m);
  EXPECT_NE(r.status().message().find("produced twice"), std::string::npos);
  // Producing a graph input is also a duplicate.
  auto m2 = MakeModel();
  AddInput(m2.mutable_graph(), "X", {2});
  AddNode(m2.mutable_graph(), "Abs", {"X"}, {"X"}, "self");
  AddOutput(m2.mutable_graph(), "X", {2});
  ExpectError(Import(m2), StatusCode::kInvalidModel, "graph input or initializer");
}

TEST(ImportErrors, MissingValue) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Add", {"X", "ghost"}, {"Y"}, "adder");
  AddOutput(g, "Y", {2});
  auto r = Import(m);
  ExpectError(r, StatusCode::kInvalidModel, "'ghost'");
  EXPECT_NE(r.status().message().find("adder"), std::string::npos);
  // A subgraph may not read a value that no enclosing scope defines either.
  auto m2 = NestedIfModel();
  m2.mutable_graph()->mutable_node(1)->mutable_attribute(1)->mutable_g()->mutable_node(0)->set_input(0, "nowhere");
  ExpectError(Import(m2), StatusCode::kInvalidModel, "'nowhere'");
  // An undeclared graph output.
  auto m3 = MakeModel();
  AddInput(m3.mutable_graph(), "X", {2});
  AddOutput(m3.mutable_graph(), "Q", {2});
  ExpectError(Import(m3), StatusCode::kInvalidModel, "output 'Q' is never produced");
}

TEST(ImportErrors, MissingOpsetImport) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Relu", {"X"}, {"Y"}, "custom_relu")->set_domain("com.example");
  AddOutput(g, "Y", {2});
  ExpectError(Import(m), StatusCode::kInvalidModel, "com.example");
  auto m2 = MakeModel();
  m2.clear_opset_import();
  AddInput(m2.mutable_graph(), "X", {2});
  AddNode(m2.mutable_graph(), "Relu", {"X"}, {"Y"});
  AddOutput(m2.mutable_graph(), "Y", {2});
  ExpectError(Import(m2), StatusCode::kInvalidModel, "no opset_import");
}

TEST(ImportErrors, ByteSizeMismatch) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {4});
  auto* t = g->add_initializer();
  t->set_name("short_w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_raw_data(std::string(12, '\0'));  // 3 floats, shape says 4
  AddNode(g, "Add", {"X", "short_w"}, {"Y"});
  AddOutput(g, "Y", {4});
  ExpectError(Import(m, ImportOptions{.run_checker = false}), StatusCode::kInvalidModel, "short_w");
  // Typed fields are counted too.
  auto m2 = MakeModel();
  AddInput(m2.mutable_graph(), "X", {4});
  AddFloatInit(m2.mutable_graph(), "few", {4}, {1, 2});
  AddNode(m2.mutable_graph(), "Add", {"X", "few"}, {"Y"});
  AddOutput(m2.mutable_graph(), "Y", {4});
  ExpectError(Import(m2, ImportOptions{.run_checker = false}), StatusCode::kInvalidModel, "'few' has 2 values");
}

TEST(ImportErrors, OverflowingDims) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {1});
  auto* t = g->add_initializer();
  t->set_name("huge");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(int64_t{1} << 40);
  t->add_dims(int64_t{1} << 40);
  AddNode(g, "Add", {"X", "huge"}, {"Y"});
  AddOutput(g, "Y", {1});
  auto r = Import(m, ImportOptions{.run_checker = false});
  ExpectError(r, StatusCode::kInvalidModel, "huge");
  EXPECT_NE(r.status().message().find("overflow"), std::string::npos) << r.status().message();
  t->set_dims(0, -2);
  ExpectError(Import(m, ImportOptions{.run_checker = false}), StatusCode::kInvalidModel, "negative dimension");
}

TEST(ImportErrors, MemoryCap) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {4});
  AddFloatInit(g, "W", {4}, {1, 2, 3, 4});
  AddNode(g, "Add", {"X", "W"}, {"Y"});
  AddOutput(g, "Y", {4});
  ImportOptions opts;
  opts.memory_cap_bytes = 8;
  ExpectError(Import(m, opts), StatusCode::kOutOfMemory, "'W'");
  opts.memory_cap_bytes = 16;
  EXPECT_TRUE(Import(m, opts).ok());
}

// ---- external data ----

onnx::ModelProto ExternalModel(const std::string& location, int64_t offset = -1, int64_t length = -1) {
  auto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "X", {3});
  auto* t = g->add_initializer();
  t->set_name("ext_w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  if (offset >= 0) {
    kv = t->add_external_data();
    kv->set_key("offset");
    kv->set_value(std::to_string(offset));
  }
  if (length >= 0) {
    kv = t->add_external_data();
    kv->set_key("length");
    kv->set_value(std::to_string(length));
  }
  AddNode(g, "Add", {"X", "ext_w"}, {"Y"});
  AddOutput(g, "Y", {3});
  return m;
}

TEST(ImportExternal, ReadsDataAtOffset) {
  TempDir dir;
  float vals[3] = {7, 8, 9};
  dir.Write("weights.bin", std::string("PAD!") + std::string(reinterpret_cast<char*>(vals), sizeof(vals)));
  dir.Write("model.onnx", Serialize(ExternalModel("weights.bin", 4, 12)));
  auto r = ImportOnnxFile(dir.File("model.onnx"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor* w = r->graph->Constant(r->graph->FindValue("ext_w"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data<float>()[0], 7.0f);
  EXPECT_EQ(w->data<float>()[2], 9.0f);
  EXPECT_EQ(r->path, dir.File("model.onnx"));
  // Length beyond the file, and a length that does not match the shape.
  dir.Write("model.onnx", Serialize(ExternalModel("weights.bin", 8, 12)));
  ExpectError(ImportOnnxFile(dir.File("model.onnx")), StatusCode::kInvalidModel, "exceeds the size");
  dir.Write("model.onnx", Serialize(ExternalModel("weights.bin", 0, 8)));
  ExpectError(ImportOnnxFile(dir.File("model.onnx")), StatusCode::kInvalidModel, "ext_w");
  // From memory there is no folder to resolve against unless base_dir is given.
  std::string bytes = Serialize(ExternalModel("weights.bin", 4, 12));
  ExpectError(ImportOnnxBytes(bytes.data(), bytes.size(), {}), StatusCode::kInvalidArgument, "base_dir");
  ImportOptions opts;
  opts.base_dir = dir.path();
  EXPECT_TRUE(ImportOnnxBytes(bytes.data(), bytes.size(), opts).ok());
}

TEST(ImportExternal, RejectsParentEscape) {
  TempDir dir;
  fs::create_directory(dir.File("sub"));
  float vals[3] = {1, 2, 3};
  dir.Write("x", std::string(reinterpret_cast<char*>(vals), sizeof(vals)));
  dir.Write("sub/model.onnx", Serialize(ExternalModel("../x")));
  ExpectError(ImportOnnxFile(dir.File("sub/model.onnx")), StatusCode::kInvalidModel, "'..'");
}

TEST(ImportExternal, RejectsAbsolutePath) {
  TempDir dir;
  float vals[3] = {1, 2, 3};
  dir.Write("w.bin", std::string(reinterpret_cast<char*>(vals), sizeof(vals)));
  dir.Write("model.onnx", Serialize(ExternalModel(dir.File("w.bin"))));
  ExpectError(ImportOnnxFile(dir.File("model.onnx")), StatusCode::kInvalidModel, "absolute path");
}

TEST(ImportExternal, RejectsSymlinkEscape) {
  TempDir outside;
  TempDir dir;
  float vals[3] = {1, 2, 3};
  outside.Write("secret.bin", std::string(reinterpret_cast<char*>(vals), sizeof(vals)));
  fs::create_symlink(outside.File("secret.bin"), dir.File("link.bin"));
  dir.Write("model.onnx", Serialize(ExternalModel("link.bin")));
  ExpectError(ImportOnnxFile(dir.File("model.onnx")), StatusCode::kInvalidModel, "outside the model's folder");
  // A symlink that stays inside the folder is fine.
  dir.Write("real.bin", std::string(reinterpret_cast<char*>(vals), sizeof(vals)));
  fs::create_symlink(dir.File("real.bin"), dir.File("inside.bin"));
  dir.Write("model.onnx", Serialize(ExternalModel("inside.bin")));
  EXPECT_TRUE(ImportOnnxFile(dir.File("model.onnx")).ok());
}

TEST(ImportExternal, MissingDataFile) {
  TempDir dir;
  dir.Write("model.onnx", Serialize(ExternalModel("absent.bin")));
  auto r = ImportOnnxFile(dir.File("model.onnx"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("absent.bin"), std::string::npos) << r.status().ToString();
}

// ---- real conformance files ----

class ImportRealFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kTestData)) GTEST_SKIP() << "libonnx-testdata not installed";
  }
};

TEST_F(ImportRealFiles, NodeAdd) {
  auto r = ImportOnnxFile(kTestData + "/node/test_add/model.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Graph& g = *r->graph;
  ASSERT_EQ(g.inputs.size(), 2u);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Add");
  EXPECT_EQ(g.values[g.inputs[0]].type.ToString(), "float32[3,4,5]");
  auto t = LoadTensorProtoFile(kTestData + "/node/test_add/test_data_set_0/input_0.pb");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->dtype(), DataType::kFloat);
  EXPECT_EQ(t->shape(), (Shape{3, 4, 5}));
  auto v = LoadValueProtoFile(kTestData + "/node/test_add/test_data_set_0/output_0.pb", g.values[g.outputs[0]].type);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE(v->is_tensor());
  // The expected output really is input_0 + input_1.
  auto b = LoadTensorProtoFile(kTestData + "/node/test_add/test_data_set_0/input_1.pb");
  ASSERT_TRUE(b.ok());
  EXPECT_FLOAT_EQ(v->tensor().data<float>()[7], t->data<float>()[7] + b->data<float>()[7]);
}

TEST_F(ImportRealFiles, NodeIfWithSubgraphs) {
  auto r = ImportOnnxFile(kTestData + "/node/test_if/model.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Node* iff = FindNode(*r->graph, "If");
  ASSERT_NE(iff, nullptr);
  ASSERT_NE(iff->FindAttr("then_branch"), nullptr);
  const auto& then_g = iff->FindAttr("then_branch")->g;
  const auto& else_g = iff->FindAttr("else_branch")->g;
  ASSERT_TRUE(then_g && else_g);
  EXPECT_EQ(then_g->outputs.size(), 1u);
  EXPECT_EQ(else_g->outputs.size(), 1u);
  EXPECT_TRUE(then_g->IsConstant(then_g->outputs[0]));  // its Constant node was folded
  auto v = LoadValueProtoFile(kTestData + "/node/test_if/test_data_set_0/input_0.pb",
                              r->graph->values[r->graph->inputs[0]].type);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->tensor().dtype(), DataType::kBool);
}

TEST_F(ImportRealFiles, PytorchAvgPool1d) {
  auto r = ImportOnnxFile(kTestData + "/pytorch-converted/test_AvgPool1d/model.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(FindNode(*r->graph, "AveragePool"), nullptr);
  ASSERT_EQ(r->graph->inputs.size(), 1u);
  auto t = LoadTensorProtoFile(kTestData + "/pytorch-converted/test_AvgPool1d/test_data_set_0/input_0.pb");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const TypeInfo& declared = r->graph->values[r->graph->inputs[0]].type;
  ASSERT_EQ(declared.dims.size(), t->rank());
  for (size_t i = 0; i < t->rank(); ++i) EXPECT_EQ(declared.dims[i].value, t->dim(i));
}

TEST_F(ImportRealFiles, SequenceAndOptionalValues) {
  auto r = ImportOnnxFile(kTestData + "/node/test_identity_sequence/model.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TypeInfo& in_type = r->graph->values[r->graph->inputs[0]].type;
  EXPECT_EQ(in_type.kind, TypeInfo::Kind::kSequence);
  auto v = LoadValueProtoFile(kTestData + "/node/test_identity_sequence/test_data_set_0/input_0.pb", in_type);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE(v->is_sequence());
  EXPECT_FALSE(v->sequence().empty());
  EXPECT_EQ(v->elem_type(), DataType::kFloat);

  const std::string opt = kTestData + "/node/test_optional_has_element_empty";
  if (!fs::exists(opt)) return;
  auto ro = ImportOnnxFile(opt + "/model.onnx");
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  const TypeInfo& ot = ro->graph->values[ro->graph->inputs[0]].type;
  EXPECT_EQ(ot.kind, TypeInfo::Kind::kOptional);
  auto ov = LoadValueProtoFile(opt + "/test_data_set_0/input_0.pb", ot);
  ASSERT_TRUE(ov.ok()) << ov.status().ToString();
  EXPECT_TRUE(ov->is_none());
}

TEST_F(ImportRealFiles, LoaderErrors) {
  ExpectError(Result<Model>(LoadTensorProtoFile("/nonexistent.pb").status()), StatusCode::kNotFound, "/nonexistent.pb");
  TempDir dir;
  dir.Write("bad.pb", std::string("\xff\xff\xff\xff\xff", 5));
  ExpectError(Result<Model>(LoadTensorProtoFile(dir.File("bad.pb")).status()), StatusCode::kInvalidArgument, "bad.pb");
}

// Every model of the conformance data imports, both as is and with every schema function
// inlined (has_kernel always false), which exercises the inliner on all function ops.
void ImportAll(const ImportOptions& opts, const char* label) {
  int ok = 0, total = 0;
  std::vector<std::string> failures;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    if (!fs::exists(kTestData + "/" + suite)) continue;
    for (const auto& entry : fs::directory_iterator(kTestData + "/" + suite)) {
      std::string model = entry.path().string() + "/model.onnx";
      if (!fs::exists(model)) continue;
      ++total;
      auto r = ImportOnnxFile(model, opts);
      if (r.ok()) {
        ++ok;
      } else {
        failures.push_back(r.status().ToString());
      }
    }
  }
  for (size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << label << ": " << failures[i];
  EXPECT_EQ(ok, total) << label;
  EXPECT_GT(total, 1000) << label;
}

TEST_F(ImportRealFiles, AllConformanceModelsImport) { ImportAll({}, "plain"); }

TEST_F(ImportRealFiles, AllConformanceModelsImportWithFunctionsInlined) {
  ImportOptions opts;
  opts.has_kernel = [](const std::string&, const std::string&, int) { return false; };
  ImportAll(opts, "inlined");
  // Spot check: a context-dependent function op disappears.
  auto r = ImportOnnxFile(kTestData + "/node/test_sce_NCd1_mean_weight_negative_ii/model.onnx", opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FindNode(*r->graph, "SoftmaxCrossEntropyLoss"), nullptr);
}

// ONNX ships "<test>_expanded" twins whose graphs are the function bodies expanded by
// onnx itself: inlining "<test>" must give the same multiset of ops.
TEST_F(ImportRealFiles, InliningMatchesOnnxExpandedModels) {
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(kTestData + "/node")) {
    std::string dir = entry.path().string();
    const std::string suffix = "_expanded";
    if (dir.size() <= suffix.size() || dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string base = dir.substr(0, dir.size() - suffix.size());
    if (!fs::exists(base + "/model.onnx")) continue;
    auto expanded = ImportOnnxFile(dir + "/model.onnx");
    ASSERT_TRUE(expanded.ok()) << expanded.status().ToString();
    // Inline only the op under test (the expanded twin keeps the ops its body uses).
    auto plain = ImportOnnxFile(base + "/model.onnx");
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    std::set<std::string> tested;
    for (const auto& n : plain->graph->nodes) tested.insert(n.op_type);
    ImportOptions opts;
    opts.has_kernel = [&](const std::string&, const std::string& op, int) { return !tested.count(op); };
    auto inlined = ImportOnnxFile(base + "/model.onnx", opts);
    ASSERT_TRUE(inlined.ok()) << inlined.status().ToString();
    auto ops = [](const Graph& g) {
      std::multiset<std::string> s;
      for (const auto& n : g.nodes) s.insert(n.op_type);
      return s;
    };
    EXPECT_EQ(ops(*inlined->graph), ops(*expanded->graph)) << base;
    EXPECT_EQ(inlined->graph->initializers.size(), expanded->graph->initializers.size()) << base;
    ++compared;
  }
  EXPECT_GT(compared, 50);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// ONNX Runtime's saved optimized models import every domain it knows, some at opsets newer
// than libonnx's (ai.onnx.ml 5): an import no node uses is accepted; a used one is refused.
TEST(ImportOpsets, UnusedDomainImportsBeyondLibonnxAreAccepted) {
  auto m = onnx_builder::MakeModel(17);
  auto* g = m.mutable_graph();
  onnx_builder::AddInput(g, "x", {2});
  onnx_builder::AddNode(g, "Relu", {"x"}, {"y"});
  onnx_builder::AddOutput(g, "y", {2});
  onnx_builder::AddOpsetImport(&m, "ai.onnx.ml", 99);
  auto ok = Import(m);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();

  auto* n = onnx_builder::AddNode(g, "Binarizer", {"y"}, {"z"});
  n->set_domain("ai.onnx.ml");
  onnx_builder::AddOutput(g, "z", {2});
  ExpectError(Import(m), StatusCode::kUnsupported, "model imports domain 'ai.onnx.ml' at opset 99");
}

}  // namespace
}  // namespace strata
