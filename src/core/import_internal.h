// Internals shared by the ONNX importer's files (onnx_import.cc, import_tensor.cc,
// import_graph.cc, import_function.cc). Not part of any public interface.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/ir.h"
#include "core/onnx_import.h"
#include "core/status.h"

namespace onnx {
class OpSchema;
}

namespace strata::import {

// Domain -> opset version; "" stands for ai.onnx.
using OpsetMap = std::map<std::string, int>;

// "" for "ai.onnx", otherwise unchanged.
std::string NormalizeDomain(const std::string& d);

// Replaces newlines (onnx's checker messages have several) so errors stay one line.
std::string OneLine(const std::string& s);

// Counts constant bytes against ImportOptions::memory_cap_bytes.
struct MemoryBudget {
  size_t cap = 0;  // 0: unlimited
  size_t used = 0;
  Status Charge(size_t bytes, const std::string& what);
};

// Tensor conversion context: where external data lives and the memory budget.
struct TensorContext {
  std::string base_dir;  // "" : external data is rejected
  MemoryBudget* budget = nullptr;
};

// Resolves an external-data location against base_dir, rejecting absolute paths, ".."
// components and symlinks that end up outside base_dir. Returns the resolved path.
Result<std::string> ResolveExternalLocation(const std::string& base_dir, const std::string& location,
                                            const std::string& tensor_name);
// Checks every external tensor reachable from the graph (initializers, tensor attributes,
// subgraphs) without reading data, so path problems are reported before the checker runs.
Status ValidateExternalData(const onnx::GraphProto& g, const std::string& base_dir);

// TensorProto -> Tensor (all storage forms and external data). Errors name the tensor.
Result<Tensor> ConvertTensor(const onnx::TensorProto& tp, const TensorContext& ctx);
// TypeProto -> TypeInfo (kUnknown for maps and unset types).
TypeInfo ConvertType(const onnx::TypeProto& tp);
// TypeInfo of an initializer from its dtype and dims.
TypeInfo TensorTypeInfo(const onnx::TensorProto& tp);
// Reads a whole file; errors name it.
Result<std::string> ReadFileBytes(const std::string& path);

// Topologically sorts the nodes of `g` and of all its subgraphs in place (Kahn) and
// validates SSA form: every node input is defined (locally or in `outer`), no value is
// produced twice, no cycle, every node's domain has an opset import in `opsets`, and
// nesting is at most max_depth. `outer` holds the names visible from enclosing scopes.
Status SortAndValidateGraph(onnx::GraphProto* g, const std::unordered_set<std::string>& outer, const OpsetMap& opsets,
                            int depth, int max_depth);

// Rejects duplicate model-local functions and functions that call themselves directly or
// through others (onnx's shape inference would recurse until the stack overflows).
Status CheckLocalFunctions(const onnx::ModelProto& model);

// A node after function inlining, with the opsets that apply to it.
struct ExpandedNode {
  onnx::NodeProto proto;
  const OpsetMap* opsets = nullptr;
};

// Replaces function calls by their bodies until no call is left (model-local functions
// always; schema functions when opts.has_kernel says no kernel exists).
class FunctionInliner {
 public:
  FunctionInliner(const onnx::ModelProto& model, const OpsetMap& model_opsets, const ImportOptions& opts);
  // Appends `node` or its fully inlined body to `out`.
  Status Expand(const onnx::NodeProto& node, const OpsetMap* opsets, std::vector<ExpandedNode>* out);

 private:
  Status ExpandRec(const onnx::NodeProto& node, const OpsetMap* opsets, int depth, std::vector<ExpandedNode>* out);
  // fallback_domain/version: the opset the body runs at when fn declares none for that domain
  // (schema functions run at their schema's since_version).
  // schema (may be null) supplies default values for attributes the call leaves out.
  Status Inline(const onnx::NodeProto& call, const onnx::FunctionProto& fn, const onnx::OpSchema* schema,
                const OpsetMap* caller_opsets, const std::string& fallback_domain, int fallback_version, int depth,
                std::vector<ExpandedNode>* out);
  void CollectTypes(const onnx::GraphProto& g);
  const onnx::TypeProto* TypeOf(const std::string& name) const;

  const OpsetMap& model_opsets_;
  const ImportOptions& opts_;
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> local_functions_;
  std::unordered_map<std::string, const onnx::TypeProto*> types_;  // from shape inference
  std::deque<OpsetMap> opset_storage_;                             // stable addresses
  std::deque<onnx::FunctionProto> built_functions_;                // context-dependent bodies
  std::deque<onnx::TypeProto> initializer_types_;
  // Functions being inlined right now (domain, name): a repeat means recursion.
  std::vector<std::pair<std::string, std::string>> active_;
  int64_t counter_ = 0;
};

}  // namespace strata::import
