// Shared pieces of the recurrent kernels (cpu/rnn.cc reference, cpu/rnn_lstm_fast.cc
// optimised LSTM): attribute parsing, input validation and tensor indexing by layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/kernel.h"

namespace strata {
namespace rnn {

enum class Cell { kRnn, kGru, kLstm };

// One activation function with its (already defaulted) alpha/beta.
struct Activation {
  enum class Kind {
    kRelu,
    kTanh,
    kSigmoid,
    kAffine,
    kLeakyRelu,
    kThresholdedRelu,
    kScaledTanh,
    kHardSigmoid,
    kElu,
    kSoftsign,
    kSoftplus
  };
  Kind kind = Kind::kTanh;
  float alpha = 0, beta = 0;

  template <typename A>
  A Apply(A x) const {
    const A a = alpha, b = beta;
    switch (kind) {
      case Kind::kRelu:
        return x > 0 ? x : A(0);
      case Kind::kTanh:
        return std::tanh(x);
      case Kind::kSigmoid:
        return A(1) / (A(1) + std::exp(-x));
      case Kind::kAffine:
        return a * x + b;
      case Kind::kLeakyRelu:
        return x >= 0 ? x : a * x;
      case Kind::kThresholdedRelu:
        return x > a ? x : A(0);
      case Kind::kScaledTanh:
        return a * std::tanh(b * x);
      case Kind::kHardSigmoid: {
        A v = a * x + b;
        return v < 0 ? A(0) : (v > 1 ? A(1) : v);
      }
      case Kind::kElu:
        return x >= 0 ? x : a * (std::exp(x) - A(1));
      case Kind::kSoftsign:
        return x / (A(1) + std::abs(x));
      case Kind::kSoftplus:
        return std::log1p(std::exp(x));
    }
    return x;
  }
};

struct Attrs {
  Cell cell = Cell::kLstm;
  int64_t num_directions = 1;
  bool reverse = false;      // direction == "reverse" (only meaningful when num_directions == 1)
  int64_t hidden_size = -1;  // -1: take it from R
  // Activations per direction: acts[d * per_dir + k].
  std::vector<Activation> acts;
  float clip = 0;  // <= 0: no clipping
  bool input_forget = false;
  bool linear_before_reset = false;
  int64_t layout = 0;

  static int NumGates(Cell c) { return c == Cell::kLstm ? 4 : (c == Cell::kGru ? 3 : 1); }
  static int ActsPerDirection(Cell c) { return c == Cell::kLstm ? 3 : (c == Cell::kGru ? 2 : 1); }
};

Result<Attrs> ParseAttrs(const Node& node, Cell cell);

// Validated dimensions and inputs of one run.
struct Inputs {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  const Tensor* x = nullptr;
  const Tensor* w = nullptr;
  const Tensor* r = nullptr;
  const Tensor* b = nullptr;         // optional
  const Tensor* seq_lens = nullptr;  // optional
  const Tensor* init_h = nullptr;    // optional
  const Tensor* init_c = nullptr;    // optional (LSTM)
  const Tensor* p = nullptr;         // optional (LSTM)
  std::vector<int64_t> lens;         // per batch, always filled (seq when absent)
};

Result<Inputs> GetInputs(const KernelContext& ctx, const Attrs& attrs);

// Output shapes for the layout.
Shape YShape(const Inputs& in, int64_t layout);
Shape StateShape(const Inputs& in, int64_t layout);

// Element offsets by layout (layout 0: time-major, 1: batch-major).
inline int64_t XRow(int64_t t, int64_t b, const Inputs& in, int64_t layout) {
  return layout == 0 ? t * in.batch + b : b * in.seq + t;
}
inline int64_t YOffset(int64_t t, int64_t d, int64_t b, const Inputs& in, int64_t layout) {
  return (layout == 0 ? (t * in.dirs + d) * in.batch + b : (b * in.seq + t) * in.dirs + d) * in.hidden;
}
inline int64_t StateOffset(int64_t d, int64_t b, const Inputs& in, int64_t layout) {
  return (layout == 0 ? d * in.batch + b : b * in.dirs + d) * in.hidden;
}

// The reference implementation for all three cells and every float dtype.
Status ReferenceCompute(KernelContext& ctx, Cell cell);

}  // namespace rnn

// Registers the optimised fp32 LSTM (cpu/rnn_lstm_fast.cc).
void RegisterFastLstmKernels(KernelRegistry& r);

}  // namespace strata
