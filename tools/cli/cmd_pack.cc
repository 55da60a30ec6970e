// `strata pack --target cuda-sm80|cuda-sm90 IN.onnx OUT.onnx`: rewrites every top-level
// com.microsoft MatMulNBits node whose B/scales(/zero_points) are initializers so that B
// holds the device layout blob (docs/cuda-weight-layout.md, CPU reference packer) and
// tags the node with weight_prepacked=<target>. The zero points move into the blob, so
// the node's zero_points input is dropped; scales stay (the schema requires them).
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cpu/cuda_weight_layout.h"

namespace strata::cli {
namespace {

struct PackArgs {
  std::string target, in, out;
};

// Dense bytes of a uint8 initializer (raw_data, or int32_data per the ONNX spec).
Result<std::vector<uint8_t>> Uint8Data(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::UINT8)
    return InvalidArgument("initializer '", t.name(), "' is not uint8");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return Unsupported("initializer '", t.name(), "' uses external data, which strata pack does not read");
  if (t.has_raw_data()) return std::vector<uint8_t>(t.raw_data().begin(), t.raw_data().end());
  std::vector<uint8_t> v;
  for (int32_t x : t.int32_data()) v.push_back(static_cast<uint8_t>(x));
  return v;
}

Result<std::vector<float>> FloatData(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::FLOAT)
    return Unsupported("initializer '", t.name(), "' is not float32 (only float32 scales are packed)");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return Unsupported("initializer '", t.name(), "' uses external data, which strata pack does not read");
  if (t.has_raw_data()) {
    std::vector<float> v(t.raw_data().size() / sizeof(float));
    std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
    return v;
  }
  return std::vector<float>(t.float_data().begin(), t.float_data().end());
}

int64_t IntAttr(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

// Packs one node in place; sets *skip (and changes nothing) when it is left as is.
Status PackNode(onnx::GraphProto* g, onnx::NodeProto* node, const std::string& target,
                std::map<std::string, int>* init_index, std::string* skip, size_t* before, size_t* after) {
  for (const auto& a : node->attribute())
    if (a.name() == "weight_prepacked") {
      *skip = "already packed for " + a.s();
      return Status::Ok();
    }
  if (node->input_size() < 3) return InvalidModel("MatMulNBits '", node->name(), "' has fewer than 3 inputs");
  if ((node->input_size() > 4 && !node->input(4).empty()) || (node->input_size() > 5 && !node->input(5).empty())) {
    *skip = "g_idx/bias inputs are not packed";
    return Status::Ok();
  }
  auto find = [&](int i) -> const onnx::TensorProto* {
    if (i >= node->input_size() || node->input(i).empty()) return nullptr;
    auto it = init_index->find(node->input(i));
    return it == init_index->end() ? nullptr : &g->initializer(it->second);
  };
  const onnx::TensorProto *b = find(1), *sc = find(2), *zp = find(3);
  if (!b || !sc || (node->input_size() > 3 && !node->input(3).empty() && !zp)) {
    *skip = "B, scales or zero_points is not an initializer";
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Uint8Data(*b));
  ASSIGN_OR_RETURN(std::vector<float> scales, FloatData(*sc));
  std::vector<uint8_t> zps;
  if (zp) {
    auto z = Uint8Data(*zp);
    if (!z.ok()) {
      *skip = z.status().message();  // float zero points: left for the CPU/GPU unpacked path
      return Status::Ok();
    }
    zps = std::move(*z);
  }
  cpu::NBitsWeights w;
  w.bits = static_cast<int>(IntAttr(*node, "bits", 4));
  w.n = IntAttr(*node, "N", 0);
  w.k = IntAttr(*node, "K", 0);
  w.block_size = IntAttr(*node, "block_size", 0);
  w.b = bytes.data();
  w.b_bytes = bytes.size();
  w.scales = scales.data();
  w.scale_count = scales.size();
  w.zero_points = zp ? zps.data() : nullptr;
  w.zp_bytes = zps.size();
  auto packed = cpu::PackCudaWeights(target, w);
  if (!packed.ok())
    return MakeStatus(packed.status().code(), "MatMulNBits '", node->name(), "': ", packed.status().message());
  *before += bytes.size() + zps.size();
  *after += packed->size();
  onnx::TensorProto* t = g->add_initializer();
  std::string name = node->input(1) + "_" + target;
  for (char& c : name)
    if (c == '-') c = '_';
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::UINT8);
  t->add_dims(static_cast<int64_t>(packed->size()));
  t->set_raw_data(packed->data(), packed->size());
  (*init_index)[name] = g->initializer_size() - 1;
  node->set_input(1, name);
  if (node->input_size() > 3) node->set_input(3, "");
  while (node->input_size() > 3 && node->input(node->input_size() - 1).empty()) node->mutable_input()->RemoveLast();
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name("weight_prepacked");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(target);
  return Status::Ok();
}

// Drops initializers no node (and no graph output) refers to any more.
void DropUnused(onnx::GraphProto* g) {
  std::map<std::string, bool> used;
  for (const auto& n : g->node())
    for (const auto& i : n.input()) used[i] = true;
  for (const auto& o : g->output()) used[o.name()] = true;
  auto* inits = g->mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i)
    if (!used.count(inits->Get(i).name())) inits->DeleteSubrange(i, 1);
}

int Execute(const PackArgs& a) {
  if (!cpu::CudaLayoutForTarget(a.target).ok()) return Fail(cpu::CudaLayoutForTarget(a.target).status().message());
  onnx::ModelProto model;
  {
    std::ifstream f(a.in, std::ios::binary);
    if (!f) return Fail("cannot open '" + a.in + "'");
    if (!model.ParseFromIstream(&f)) return Fail("'" + a.in + "' is not a valid ONNX model");
  }
  onnx::GraphProto* g = model.mutable_graph();
  std::map<std::string, int> init_index;
  for (int i = 0; i < g->initializer_size(); ++i) init_index[g->initializer(i).name()] = i;
  int packed = 0;
  size_t before = 0, after = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto* n = g->mutable_node(i);
    if (n->op_type() != "MatMulNBits" || n->domain() != "com.microsoft") continue;
    std::string skip;
    Status st = PackNode(g, n, a.target, &init_index, &skip, &before, &after);
    if (!st.ok()) return Fail(st.message());
    if (!skip.empty())
      std::fprintf(stderr, "strata: MatMulNBits '%s' left unpacked: %s\n", n->name().c_str(), skip.c_str());
    else
      ++packed;
  }
  DropUnused(g);
  std::ofstream f(a.out, std::ios::binary | std::ios::trunc);
  if (!f || !model.SerializeToOstream(&f)) return Fail("cannot write '" + a.out + "'");
  std::printf("packed %d MatMulNBits node(s) for %s: %zu -> %zu weight bytes, wrote %s\n", packed, a.target.c_str(),
              before, after, a.out.c_str());
  return 0;
}

}  // namespace

void AddPackCommand(CLI::App& app) {
  auto args = std::make_shared<PackArgs>();
  CLI::App* sub = app.add_subcommand("pack", "Prepack MatMulNBits weights into a device layout");
  sub->add_option("--target", args->target, "Layout target: cuda-sm80 or cuda-sm90")->required();
  sub->add_option("input", args->in, "ONNX model to read")->required();
  sub->add_option("output", args->out, "ONNX model to write")->required();
  sub->callback([args] { Exit(Execute(*args)); });
}

}  // namespace strata::cli
