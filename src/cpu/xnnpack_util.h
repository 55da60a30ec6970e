// Helpers shared by the heavy CPU kernels (gemm*, conv*, pool*): XNNPACK
// lifetime, fused-activation attributes, NCHW<->NHWC transposes and a small
// numeric "compute type" mapping used by the reference kernels.
#pragma once

#include <xnnpack.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/function_ref.h"
#include "core/ir.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "cpu/act_kind.h"

namespace strata {

// Initializes XNNPACK once per process; later calls return the first result.
Status EnsureXnnpackInitialized();
const char* XnnStatusName(xnn_status s);

struct XnnOperatorDeleter {
  void operator()(xnn_operator_t op) const {
    if (op) xnn_delete_operator(op);
  }
};
using XnnOperatorPtr = std::unique_ptr<xnn_operator, XnnOperatorDeleter>;

// Strata-internal fused activation on Conv/Gemm/MatMul nodes (set by the optimizer):
//   activation = "Relu" | "Clip", activation_min / activation_max (floats).
// Without the attribute the range is (-inf, +inf). NhwcConv nodes may also carry
// activation = "Silu" | "HardSwish" (kind; no range), which only ParseNhwcConvActivation
// accepts: every NhwcConv kernel either applies it or declines the node.
struct FusedActivation {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
  ActKind kind = ActKind::kClamp;
  bool active() const {
    return kind != ActKind::kClamp || min > -std::numeric_limits<float>::infinity() ||
           max < std::numeric_limits<float>::infinity();
  }
};
// Relu or Clip; anything else is kInvalidModel naming the node.
Result<FusedActivation> ParseFusedActivation(const Node& node);
// Also Silu and HardSwish (MakeNhwcConv).
Result<FusedActivation> ParseNhwcConvActivation(const Node& node);

// Applies the activation to data[0, n) (no-op when inactive).
template <typename T>
void ApplyActivation(T* data, int64_t n, const FusedActivation& act) {
  if (!act.active()) return;
  for (int64_t i = 0; i < n; ++i) {
    float v = ActivateScalar(static_cast<float>(data[i]), act.kind);
    v = v < act.min ? act.min : (v > act.max ? act.max : v);
    data[i] = static_cast<T>(v);
  }
}

// [n, c, hw] -> [n, hw, c] and back, blocked for cache reuse and split across the pool.
void TransposeNchwToNhwc(const float* in, float* out, int64_t n, int64_t c, int64_t hw, ThreadPool* pool);
void TransposeNhwcToNchw(const float* in, float* out, int64_t n, int64_t c, int64_t hw, ThreadPool* pool);

// Scratch memory for one Compute call (64-byte aligned, from the session allocator when given).
Result<Tensor> AllocateScratch(int64_t floats, Allocator* alloc, const Node& node);

// Type in which reference kernels accumulate: double for double, int64/uint64 for
// integers, float otherwise (float16/bfloat16 are widened).
template <typename T>
struct AccType {
  using type = float;
};
template <>
struct AccType<double> {
  using type = double;
};
template <>
struct AccType<int32_t> {
  using type = int64_t;
};
template <>
struct AccType<int64_t> {
  using type = int64_t;
};
template <>
struct AccType<uint32_t> {
  using type = uint64_t;
};
template <>
struct AccType<uint64_t> {
  using type = uint64_t;
};
template <>
struct AccType<int8_t> {
  using type = int64_t;
};
template <>
struct AccType<uint8_t> {
  using type = uint64_t;
};

// Converts an accumulator back to storage type (Float16/BFloat16 have explicit ctors).
template <typename T, typename A>
inline T FromAcc(A v) {
  return T(static_cast<std::conditional_t<std::is_integral_v<T>, A, float>>(v));
}
template <>
inline double FromAcc<double, double>(double v) {
  return v;
}

}  // namespace strata

namespace strata {

// Sends pthreadpool's workers to sleep at once. After an operator they otherwise spin
// for ~20 ms of CPU (pthreadpool's 1M-iteration wait loop, measured here), stealing a core
// from strata's own pool that runs the next kernels: on 2 vCPUs that made 2-thread
// sessions no faster than 1-thread ones. Costs one no-op dispatch (the workers are still
// spinning) plus a futex wake at the next XNNPACK operator. No-op for a null pool.
void ParkXnnWorkers(pthreadpool_t tp);

// One XNNPACK operator that is re-created when its shape-dependent parameters (the
// `key`, e.g. SAME pads computed from the input size) change. xnn_setup_* stores the
// I/O pointers inside the operator, so setup+run must not interleave across threads:
// Run holds a mutex for the whole setup+run. Concurrent runs of one node therefore
// serialise on this node only (other nodes still run in parallel).
class XnnOperatorCache {
 public:
  // Non-owning callbacks (no allocation per run); keys are inline Shapes for the same reason.
  // The mutex is this kernel's own, so it is never shared with another session.
  using Key = Shape;
  using CreateFn = FunctionRef<xnn_status(xnn_operator_t*)>;
  using SetupFn = FunctionRef<xnn_status(xnn_operator_t)>;
  // Creates eagerly (factory time) so that weight packing happens once, up front.
  Status Prepare(const Key& key, CreateFn create, const Node& node, const char* what);
  // A kUnsupported result means XNNPACK rejected the parameters for this key (the caller
  // may fall back to a reference kernel); other errors are run-time failures.
  Status Run(const Key& key, CreateFn create, SetupFn setup, pthreadpool_t tp, const Node& node,
             const char* what) const;

 private:
  mutable std::mutex mu_;
  mutable Key key_;
  mutable XnnOperatorPtr op_;
  // Last key XNNPACK rejected: answered kUnsupported without retrying the create.
  mutable Key rejected_key_;
  mutable bool has_rejected_ = false;
  // The first kTimedRuns runs go inline and are timed; afterwards the operator uses the
  // pthreadpool only if its fastest inline run took more than kMinPoolNs. Waking parked
  // workers costs a scheduler round trip (milliseconds on a loaded VM: resnet18's max
  // pool took 16.9 ms/run at 2 threads vs 0.5 ms inline), which only large operators repay.
  static constexpr int kTimedRuns = 3;
  static constexpr int64_t kMinPoolNs = 1'000'000;
  mutable int timed_runs_ = 0;
  mutable int64_t fastest_inline_ns_ = INT64_MAX;
};

}  // namespace strata
