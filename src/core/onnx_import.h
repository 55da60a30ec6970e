// ONNX import: protobuf bytes -> checked, shape-inferred strata IR.
// Uses Debian's libonnx (parser, checker, shape inference).
//
// Conventions of the produced IR (see also core/ir.h):
//  * Graph::inputs lists the values the caller may feed. In IR >= 4 an input that also has an
//    initializer is a "constant with a default": it is in Graph::initializers AND in
//    Graph::inputs, so a fed value overrides the default. In IR < 4 every initializer had to be
//    listed in graph.input, so there such inputs are plain initializers and not in Graph::inputs.
//  * Constant nodes are folded into Graph::initializers (the node disappears); a graph output
//    may therefore be a constant.
//  * An attribute of type TYPE_PROTO (e.g. Optional's `type`) becomes a kString attribute
//    holding ONNX's type string, e.g. "tensor(float)", "seq(tensor(int64))".
//  * Model-local functions are always inlined; schema functions only when has_kernel says no
//    kernel exists. Inlined nodes carry the function's opset in Node::opset.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "core/ir.h"
#include "core/status.h"

namespace strata {

struct ImportOptions {
  // Folder that external-data locations are resolved against (normally the model's
  // folder). Locations that leave it (.., absolute paths, symlinks out) are rejected.
  // ImportOnnxFile uses the model file's folder when this is empty.
  std::string base_dir;
  bool run_checker = true;
  bool infer_shapes = true;
  // 0: no cap. Otherwise the total bytes of all constants (initializers, Constant nodes,
  // tensor attributes) may not exceed it; the tensor that crosses it is named (OUT_OF_MEMORY).
  size_t memory_cap_bytes = 0;
  int max_subgraph_depth = 32;  // deeper nesting is rejected
  // ImportOnnxFile only: large initializer payloads are read from the file when first used
  // (core/deferred_payload.h) instead of during the import; Model::deferred then holds
  // them, and whoever set this must call its LoadAll before trusting any constant's data
  // (Session::Init does, at the end of creation).
  bool defer_weight_reads = false;
  // Says whether a kernel exists for (domain, op_type, opset); domain "" is ai.onnx.
  // When it returns false for an op whose ONNX schema has a function body, the node is
  // replaced by that body. nullptr: schema functions are never inlined.
  std::function<bool(const std::string& domain, const std::string& op, int opset)> has_kernel;
};

// Parses, checks and converts a model file. Errors name the file and the problem.
Result<Model> ImportOnnxFile(const std::string& path, ImportOptions opts = {});
// Same for bytes in memory.
Result<Model> ImportOnnxBytes(const void* data, size_t size, const ImportOptions& opts);

// Reads a serialized TensorProto (.pb), e.g. the conformance data inputs.
Result<Tensor> LoadTensorProtoFile(const std::string& path);
// Reads a .pb that holds a TensorProto, a SequenceProto or an OptionalProto
// (the conformance data's input_N.pb / output_N.pb). `kind` hints at which it is,
// taken from the model's declared type: TypeInfo::Kind::kTensor/kSequence/kOptional.
Result<Value> LoadValueProtoFile(const std::string& path, const TypeInfo& declared);

// "ai.onnx" for "" (and for "ai.onnx"); other domains unchanged.
std::string OnnxDomainName(const std::string& d);

}  // namespace strata
