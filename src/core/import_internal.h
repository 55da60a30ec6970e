// Internals shared by the ONNX importer's files (onnx_import.cc, import_tensor.cc,
// import_graph.cc, import_function.cc). Not part of any public interface.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/deferred_payload.h"
#include "core/ir.h"
#include "core/onnx_import.h"
#include "core/status.h"

namespace onnx {
struct ShapeInferenceOptions;
}  // namespace onnx

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

// Where a main-graph initializer's raw_data payload sits in the original model bytes, when
// StripLargeRawData took it out of the bytes given to protobuf.
struct InlineRange {
  uint64_t offset = 0;
  size_t length = 0;
  bool stripped = false;
};

// A model file the strip scan gave up on is read into memory up to this size, and parsed
// from its mapping above it (see ImportImpl).
inline constexpr size_t kReadWholeModelMaxBytes = size_t{64} << 20;

// Payloads of at least this many bytes are kept out of protobuf. Small tensors stay in the
// proto because shape inference reads constant data (Reshape shapes, Slice starts...).
inline constexpr size_t kStripRawDataThreshold = 4096;

// Re-serializes a ModelProto with every main-graph initializer's raw_data of at least
// `threshold` bytes replaced by a one-byte raw_data; table[i] says where initializer i's
// payload was (table is in initializer order). Returns false when nothing was stripped or the
// bytes are not what it expects (the caller then parses `data` as is; see import_wire.cc).
bool StripLargeRawData(const void* data, size_t size, size_t threshold, std::string* stripped,
                       std::vector<InlineRange>* table);
// The same, the model's `size` bytes read from `fd` (pread, a small window at a time)
// instead of from memory. kStripped: as true above. kWhole: the scan read the whole file and
// found nothing to strip; *stripped then holds the model (re-serialized, parse it as is), so
// the file need not be read again. kGaveUp: as false above (bytes it does not expect).
// kReadFailed: a read failed or came back short (the file shrank while it was loaded).
enum class StripResult { kStripped, kWhole, kGaveUp, kReadFailed };
StripResult StripLargeRawDataFromFile(int fd, size_t size, size_t threshold, std::string* stripped,
                                      std::vector<InlineRange>* table);

// Where stripped payloads are read from: the model file (fd >= 0) or the caller's bytes.
struct InlineSource {
  const uint8_t* bytes = nullptr;
  size_t size = 0;
  int fd = -1;
  std::string path;  // for messages; "" for memory
  std::vector<InlineRange> table;
  // Set: payloads that would be read into memory of their own are read on first use
  // instead (core/deferred_payload.h).
  std::shared_ptr<DeferredPayloads> deferred;
};

// Tensor conversion context: where external data lives and the memory budget.
struct TensorContext {
  std::string base_dir;  // "" : external data is rejected
  MemoryBudget* budget = nullptr;
  const InlineSource* inline_source = nullptr;  // main-graph initializers' stripped payloads
};

// Whether large element-aligned payloads are mapped from the file (true) or read into
// AllocateWeightBuffer memory (core/large_pages.h). Reading wins where transparent huge pages exist: the pread copy
// lands in 2 MiB pages faulted in at once, while a file mapping faults (and, on a VM, makes
// the hypervisor update its page tables) once per 4 KiB page when the weights are packed:
// bert's 440 MB took ~2.5x longer mapped. STRATA_MAP_WEIGHTS=1 / =0 forces either.
bool MapWeightPayloads();

// Reads `length` bytes at `offset` of the open file `fd` into a buffer of its own. With
// allow_map, ranges of at least 64 KiB whose offset is a multiple of `elem_align` (the
// element size, so typed pointers stay naturally aligned) are mapped (MAP_PRIVATE: zero-copy,
// writes stay private); the rest is read with pread into AllocateWeightBuffer memory (core/large_pages.h). A mapping
// keeps the file's data alive after `fd` is closed or the file is deleted. `what` names the
// tensor in errors.

Result<std::shared_ptr<Buffer>> LoadFileRange(int fd, uint64_t offset, size_t length, size_t elem_align, bool allow_map,
                                              const std::string& path, const std::string& what);

// pread()s [offset, offset + length) of `fd` into dst, retrying short and interrupted reads.
// kIOError naming `what` and `path` on a read error or an early end of file; *done (if
// given) gets the bytes read either way.
Status ReadFully(int fd, uint64_t offset, size_t length, char* dst, const std::string& path, const std::string& what,
                 size_t* done = nullptr);

// Testing seam: when set, `hook(ctx)` runs before every pread of a model or weight file
// (ReadFully, and the strip scan's window reads), on whichever thread reads. It lets a test
// cut the file short between any two reads of a load (tests/unit/load_test.cc). nullptr,
// the default, turns it off; an atomic load per read is its whole cost.
using ReadHookForTesting = void (*)(void* ctx);
void SetReadHookForTesting(ReadHookForTesting hook, void* ctx);
void RunReadHookForTesting();

// Resolves an external-data location against base_dir, rejecting absolute paths, ".."
// components and symlinks that end up outside base_dir. Returns the resolved path.
Result<std::string> ResolveExternalLocation(const std::string& base_dir, const std::string& location,
                                            const std::string& tensor_name);
// Checks every external tensor reachable from the graph (initializers, tensor attributes,
// subgraphs) without reading data, so path problems are reported before the checker runs.
Status ValidateExternalData(const onnx::GraphProto& g, const std::string& base_dir);

// libonnx shape inference (import_infer_guard.cc; best effort: its errors are ignored). What
// would crash it and is invalid anyway (a stride below 1, a ConvTranspose weight of declared
// rank < 2, a negative GatherND batch_dims) is an error first; the nodes it could mis-index
// are shielded for the call and restored after; then an out-of-range LayerNormalization axis
// is an error.
Status InferShapesGuarded(onnx::ModelProto* proto, const onnx::ShapeInferenceOptions& options);

// TensorProto -> Tensor (all storage forms and external data). Errors name the tensor.
// `range`, when set, is where StripLargeRawData found this tensor's raw_data (read from
// ctx.inline_source instead of the proto's placeholder raw_data).
Result<Tensor> ConvertTensor(const onnx::TensorProto& tp, const TensorContext& ctx, const InlineRange* range = nullptr);
// TypeProto -> TypeInfo (kUnknown for unset and sparse types).
TypeInfo ConvertType(const onnx::TypeProto& tp);
// Whether an ONNX TensorProto data type number is one strata has a tensor type for (1-16).
bool KnownDataType(int32_t t);
// TypeInfo of an initializer from its dtype and dims.
TypeInfo TensorTypeInfo(const onnx::TensorProto& tp);
// Reads a whole file; errors name it.
Result<std::string> ReadFileBytes(const std::string& path);

// A read-only, private mapping of a whole model file, plus its open descriptor (for
// LoadFileRange). Checks like ReadFileBytes: missing file, directory, not a regular file.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const void* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  // Drops the whole-file mapping (tensors that mapped ranges keep their own mappings).
  void Unmap();

 private:
  MappedFile() = default;
  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Topologically sorts the nodes of `g` and of all its subgraphs in place (Kahn) and
// validates SSA form: every node input is defined (locally or in `outer`), no value is
// produced twice, no cycle, every node's domain has an opset import in `opsets`, and
// nesting is at most max_depth. `outer` holds the names visible from enclosing scopes.
Status SortAndValidateGraph(onnx::GraphProto* g, const std::unordered_set<std::string>& outer, const OpsetMap& opsets,
                            int depth, int max_depth);

// Rewrites ONNX Runtime's com.microsoft FusedConv and FusedGemm nodes (in the graph and its
// subgraphs) into the standard ops they fuse: Conv [+ Add] [+ activation], Gemm [+
// activation] (import_ort_fused.cc). Call on a validated graph, before the checker.
// Errors name the node (an unknown activation: kUnsupported).
Status LowerOrtFusedNodes(onnx::ModelProto* model, const OpsetMap& opsets);

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
