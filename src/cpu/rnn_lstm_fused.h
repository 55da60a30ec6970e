// Fused AVX-512 LSTM direction (cpu/rnn_lstm_fused.cc), used by the fast LSTM kernel for
// constant weights with the default activations.
//
// Weights are packed into GEMV panels (cpu/gemv.h) with the gates interleaved per block
// of 16 hidden units: panel p holds the i, o, f, c columns of units [16p, 16p + 16). One
// panel of the recurrent product therefore yields every gate of its units, and the gate
// math runs on the accumulators before anything is stored. The input projection for the
// whole sequence is one product over all timesteps; the recurrent steps are shared
// between threads in chunks of panels, each thread owning a fixed run of them, with a
// lock-free step word instead of a fork-join per step (see rnn_lstm_fused.cc).
#pragma once

#include <cstdint>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/gemv.h"
#include "cpu/rnn_common.h"

namespace strata {
namespace lstm_fused {

constexpr int64_t kUnits = kGemvPanel / 4;  // hidden units per panel

struct DirWeights {
  GemvWeights w;  // X -> gates, bias = Wb + Rb
  GemvWeights r;  // h -> gates, no bias
};

// True when the CPU has AVX-512F (and STRATA_FORCE_ISA does not cap it).
bool Available();

// One direction d of W [D, 4H, I], R [D, 4H, H] and b [8H] (this direction's, or null), ONNX
// gate order i, o, f, c. W and R still in the model file are read a block at a time and
// never loaded whole (GemvWeights::PackRows).
Result<DirWeights> Pack(const sgemm::WeightRows& w, const sgemm::WeightRows& r, int64_t d, const float* b,
                        int64_t hidden, int64_t input);

// Runs direction d of an LSTM with the default activations. y / yh / yc may be null
// (output not requested); y must be zero-filled beforehand where sequence_lens pads.
// stop (created on the run's thread) is checked between steps: a run's deadline or
// terminate call ends the loop, and the caller returns stop->status().
Status RunDirection(const Node& node, const rnn::Inputs& in, const rnn::Attrs& attrs, int64_t d, const DirWeights& wts,
                    float* y, float* yh, float* yc, ThreadPool* pool, Allocator* alloc, KernelStop* stop);

}  // namespace lstm_fused
}  // namespace strata
