// Dropping constants that kernels no longer need after session creation.
//
// Kernels such as Gemm/Conv/MatMul copy their constant weights into a packed layout when
// they are created. The graph's initializer then only costs memory: for a 400 MB model that
// is a second copy of every weight. A kernel opts in by also deriving from
// PacksConstantInputs and listing the input slots it packed; once every reader of a
// constant has reported it packed, the session frees the constant's storage.
//
// The session releases while kernels are being created (ConstantReleaser, fed by the
// executor after each kernel), not at the end: otherwise the peak RSS of creation would
// still hold every original weight next to every packed copy.
//
// Contract for a kernel that lists slot k: after creation it never reads the data of
// input k again (Compute still receives the tensor, with its dtype and shape, but
// raw_data() is null). It may still look at the shape.
#pragma once

#include <cstddef>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/ir.h"
#include "core/kernel.h"

namespace strata {

class PacksConstantInputs {
 public:
  virtual ~PacksConstantInputs() = default;
  // Input slots whose constant tensor the kernel copied at creation and no longer reads.
  virtual std::vector<size_t> PackedConstantInputs() const = 0;
};

struct ConstantReleaseStats {
  int released = 0;  // buffers freed (constants aliasing one buffer count once)
  size_t bytes = 0;  // their byte size
};

// Frees initializers of `g` (the main graph) as soon as it is safe, node by node. A constant
// goes once all of these hold: each node reading it has a kernel that lists every slot it
// reads the constant through in PackedConstantInputs(); it is not a graph output, not an
// overridable graph input, not read from any subgraph or attribute; and every constant
// sharing its buffer goes too. The Graph keeps the (now empty) tensor so types and shapes
// remain. Feed OnKernel once per node, in any order; a node never fed keeps its constants.
class ConstantReleaser {
 public:
  explicit ConstantReleaser(Graph& g);
  // Node `node`'s kernel exists now (nullptr: the node keeps every constant it reads).
  void OnKernel(size_t node, const OpKernel* kernel);
  const ConstantReleaseStats& stats() const { return stats_; }

 private:
  void TryRelease(const Buffer* buffer);

  Graph& g_;
  std::vector<int> readers_left_;  // by value: node-slot reads not yet reported
  std::vector<char> needed_;       // by value: some reader (or the graph interface) needs the data
  std::vector<char> seen_;         // by node: already reported
  // Every initializer backed by a buffer; a buffer is freed only with all of them.
  std::unordered_map<const Buffer*, std::vector<int>> by_buffer_;
  std::unordered_set<const Buffer*> released_;
  ConstantReleaseStats stats_;
};

// One-shot form: feeds every node's kernel (kernel_of(node index), nullptr for none).
ConstantReleaseStats ReleasePackedConstants(Graph& g, const std::function<const OpKernel*(size_t)>& kernel_of);

}  // namespace strata
