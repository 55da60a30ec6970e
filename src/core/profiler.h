// Per-node profiling for the executor, plus the statistics and input-shape helpers
// that `strata bench` uses (kept in the core so unit tests can reach them).
//
// Profiling is scoped to a thread: a ScopedProfiling object makes a Profiler the
// active one on the current thread, and every top-level Executor::Run on that thread
// (Session::Run included) times each node into it. When no profiler is active the
// executor pays one thread-local load per Run and nothing per node. Subgraph runs
// (Loop/If/Scan bodies) are not recorded separately: their time is part of the
// enclosing control-flow node, so per-node times add up to the run time.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/ir.h"
#include "core/status.h"
#include "core/tensor.h"

namespace strata {

struct NodeProfile {
  std::string name;
  std::string op_type;
  std::string provider;
  int64_t calls = 0;
  double total_ns = 0;
  // Floating-point operations of one call (multiply and add count as two), or -1 when
  // strata cannot compute them for this op. Taken from the shapes of the first call.
  double flops = -1;
  double mean_ms() const { return calls ? total_ns / calls / 1e6 : 0; }
};

struct OpTypeProfile {
  std::string op_type;
  int64_t nodes = 0;  // distinct nodes of this type
  int64_t calls = 0;
  double total_ns = 0;
  double flops = -1;  // summed over calls; -1 when unknown for every node
  double GflopsPerSecond() const { return flops > 0 && total_ns > 0 ? flops / total_ns : -1; }
};

class Profiler {
 public:
  // Called by the executor after a node ran; `ns` is its wall time.
  void Record(const Node& node, const std::vector<const Value*>& inputs, const std::vector<Value>& outputs, int64_t ns);
  // Counts one complete top-level run (used to report per-run means).
  void CountRun(int64_t ns);

  // Nodes in first-execution order.
  std::vector<NodeProfile> Nodes() const;
  // Aggregated by op type, heaviest first.
  std::vector<OpTypeProfile> ByOpType() const;
  int64_t runs() const;
  double run_ns() const;  // sum of whole-run times
  void Reset();

 private:
  mutable std::mutex mu_;
  std::unordered_map<const Node*, size_t> index_;
  std::vector<NodeProfile> nodes_;
  int64_t runs_ = 0;
  double run_ns_ = 0;
};

// FLOPs of one execution of `node` with these input/output values (-1 if unknown).
// Conv, ConvTranspose, Gemm, MatMul and LSTM/GRU/RNN are computed from shapes.
double NodeFlops(const Node& node, const std::vector<const Value*>& inputs, const std::vector<Value>& outputs);

// The profiler active on this thread, or nullptr.
Profiler* ActiveProfiler();

// Makes `p` the active profiler of the calling thread for the object's lifetime.
class ScopedProfiling {
 public:
  explicit ScopedProfiling(Profiler* p);
  ~ScopedProfiling();
  ScopedProfiling(const ScopedProfiling&) = delete;
  ScopedProfiling& operator=(const ScopedProfiling&) = delete;

 private:
  Profiler* prev_;
};

// ---- benchmark statistics ----

struct LatencyStats {
  size_t count = 0;
  double mean = 0, median = 0, p10 = 0, p90 = 0, p99 = 0, min = 0, max = 0, stddev = 0;
};

// Percentile q in [0, 100] of `sorted` (ascending), linear interpolation between
// closest ranks (numpy's default). 0 for an empty vector.
double Percentile(const std::vector<double>& sorted, double q);
// Summary statistics of `samples` (any order). All zero for an empty vector.
LatencyStats Summarize(std::vector<double> samples);

// ---- input shapes ----

// Parses "NAME=D1xD2x..." (dims > 0; "NAME=" alone means a scalar). Errors name the spec.
Result<std::pair<std::string, Shape>> ParseShapeSpec(const std::string& spec);

// Concrete shapes for the model inputs: overrides from `specs` (NAME=DIMS), otherwise
// the declared dims with every unknown dim set to 1. INVALID_ARGUMENT when a spec names
// something that is not an input, is given twice, has the wrong rank, or contradicts a
// static dim.
Result<std::vector<Shape>> ResolveInputShapes(const std::vector<ValueInfo>& inputs,
                                              const std::vector<std::string>& specs);

// Fills `t` with seeded pseudo-random data suited to its dtype: floats (float, double,
// float16, bfloat16) ~ N(0, 1), integers uniform in [0, int_high) (8-bit ones also below
// 128), bool 0/1; strings and complex types are refused. std::mt19937 seeded with `seed`; the
// same seed gives the same tensor on every platform with the same standard library.
Status FillRandom(Tensor* t, uint32_t seed, int64_t int_high = 100);

}  // namespace strata
