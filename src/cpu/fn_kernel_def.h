// Registry entries for stateless kernels: a `Status(KernelContext&)` function wrapped as a
// factory, shared by the kernel families that register plain functions.
#pragma once

#include <climits>
#include <memory>

#include "core/kernel.h"

namespace strata {

// Wraps a stateless Status(KernelContext&) function as a factory.
template <typename F>
KernelFactory StatelessFactory(F f) {
  return [f](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> { return MakeFnKernel(f); };
}

// The entry of a stateless ai.onnx op for opsets [since, end] that dispatches on no input's
// dtype (type_input -1: one kernel serves every type, as for control flow and sequences).
template <typename F>
KernelDef UntypedFnDef(const char* op, int since, F f, int end = INT_MAX) {
  KernelDef d;
  d.op_type = op;
  d.since_version = since;
  d.end_version = end;
  d.type_input = -1;
  d.factory = StatelessFactory(f);
  return d;
}

}  // namespace strata
