// Dropping constants that kernels no longer need after session creation.
//
// Kernels such as Gemm/Conv/MatMul copy their constant weights into a packed layout when
// they are created. The graph's initializer then only costs memory: for a 400 MB model that
// is a second copy of every weight. A kernel opts in by also deriving from
// PacksConstantInputs and listing the input slots it packed; once every reader of a
// constant has reported it packed, the session frees the constant's storage.
//
// Contract for a kernel that lists slot k: after creation it never reads the data of
// input k again (Compute still receives the tensor, with its dtype and shape, but
// raw_data() is null). It may still look at the shape.
#pragma once

#include <cstddef>
#include <functional>
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
  int released = 0;  // constants whose storage was freed
  size_t bytes = 0;  // their byte size
};

// Frees the storage of every initializer of `g` (the main graph) for which all of these hold:
// each node reading it has a kernel (kernel_of(node index)) that lists every slot it reads
// the constant through in PackedConstantInputs(); it is not a graph output, not an
// overridable graph input, not read from any subgraph; and its buffer is shared with no
// constant that stays. The Graph keeps the (now empty) tensor so types and shapes remain.
ConstantReleaseStats ReleasePackedConstants(Graph& g, const std::function<const OpKernel*(size_t)>& kernel_of);

}  // namespace strata
