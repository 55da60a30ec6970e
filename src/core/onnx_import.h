// ONNX import: protobuf bytes -> checked, shape-inferred strata IR.
// Uses Debian's libonnx (parser, checker, shape inference).
#pragma once

#include <functional>
#include <string>

#include "core/ir.h"
#include "core/status.h"

namespace strata {

struct ImportOptions {
  // Folder that external-data locations are resolved against (normally the model's
  // folder). Locations that leave it (.., absolute paths, symlinks out) are rejected.
  std::string base_dir;
  bool run_checker = true;
  bool infer_shapes = true;
  size_t memory_cap_bytes = 0;     // 0: no cap; larger initializers are rejected
  int max_subgraph_depth = 32;     // deeper nesting is rejected
  // Whether a kernel exists for (domain, op, opset); schema functions are inlined when not.
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

}  // namespace strata
