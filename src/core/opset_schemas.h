// ai.onnx opsets 18-23 on top of Debian's libonnx 1.12, which knows opsets up to 17
// (opset_schemas.cc). Models that PyTorch 2.x, onnxscript and current converters write
// import opset 18 or later with IR version 9 or 10.
#pragma once

#include <string>

#include "core/status.h"

namespace strata {

// Newest ai.onnx opset and IR version this build imports.
inline constexpr int kMaxOnnxOpset = 23;
inline constexpr int kMaxIrVersion = 11;

// Raises libonnx's ai.onnx range to kMaxOnnxOpset and registers the schemas of the ops that
// changed in opsets 18-23 and that strata implements, so that the checker and shape inference
// see the right version of each. Once per process; thread-safe.
void EnsureOpsetSchemas();

// For an ai.onnx node at `opset`: OK when the schema libonnx resolves is that op's newest
// version at that opset. Otherwise the op is new in, or changed in, an opset this build has
// no schema for (Col2Im, DeformConv, ...), and the error names the op and the version, instead
// of the node silently running with an older version's meaning.
Status CheckOnnxOpVersion(const std::string& op_type, int opset, const std::string& node_desc);

}  // namespace strata
