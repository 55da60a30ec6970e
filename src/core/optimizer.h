// Graph optimization passes over the strata IR. Each pass keeps the graph's
// meaning: tests compare optimized with unoptimized outputs.
#pragma once

#include <vector>

#include "core/ir.h"
#include "core/kernel.h"
#include "core/status.h"

namespace strata {

struct OptimizerOptions {
  int level = 99;  // 0 none, 1 basic (folding, dead code), 2+ fusions
  ThreadPool* pool = nullptr;
  KernelConfig kernel;
  // False when accelerator providers may claim nodes after optimization: passes that move
  // ops into strata's internal domain (the NHWC layout pass) are then skipped, since no
  // provider supports those ops.
  bool cpu_only = true;
  // The session's memory cap (0: none): constant folding allocates no buffer above it.
  size_t memory_cap_bytes = 0;
};

Status OptimizeGraph(Graph& g, const OptimizerOptions& opts);

// Use counts of every value: node inputs, graph outputs, and names captured by subgraphs
// (a value with count 0 is dead; count 1 and not a graph output: a single consumer).
std::vector<int> UseCounts(const Graph& g);

// Individual passes, exposed for tests. Each returns how many rewrites it made.
Result<int> FoldConstants(Graph& g, const OptimizerOptions& opts);
int EliminateIdentities(Graph& g);
int EliminateDeadNodes(Graph& g);
Result<int> FoldConvBatchNorm(Graph& g);
int FuseActivations(Graph& g);
// After ConvertToNhwc: NhwcConv -> Add(other) [-> Relu] becomes one NhwcConv with `other`
// as input 3 (residual) and activation=Relu, when the conv output feeds only the Add, the
// Add's operands have the same static shape and a registered kernel covers the fused
// node (the SGEMM conv). The fused node takes the Add's place in the node order (the
// residual may be produced after the conv). Call before dead-node removal.
// (src/core/conv_residual_fusion.cc)
int FuseNhwcConvResidual(Graph& g);
// After FuseInvertedResidualBlocks: NhwcConv -> SiLU (com.microsoft QuickGelu with alpha 1,
// what FuseSilu makes of x * Sigmoid(x)) or -> HardSwish becomes one NhwcConv with
// activation = "Silu" | "HardSwish", applied in the conv's store, when the conv has no
// activation yet, its output feeds only that node and is not a graph output, and a kernel
// covers the fused node (NhwcConv: on AVX-512F CPUs). Saves a pass over every such map
// (EfficientNet, YOLO: SiLU after each conv; MobileNetV3: HardSwish). Returns the count.
// (src/core/conv_residual_fusion.cc)
int FuseNhwcConvActivation(Graph& g);
// After FuseInvertedResidualBlocks: Mul(map, scale) read only by a pointwise NhwcConv (1x1,
// stride 1, unpadded, ungrouped), where map has the conv input's static NHWC shape [N, H, W,
// C] and scale is [1 or N, 1, 1, C] (a squeeze-excitation block: EfficientNet, MobileNetV3),
// becomes that conv with X = map and the scale as input 4 (cpu/conv_nhwc_scale.h): no pass
// over the map for the Mul. Only where a kernel covers the fused node. Returns the count.
// (src/core/conv_input_scale_fusion.cc)
int FuseNhwcConvInputScale(Graph& g);
// After FuseNhwcBatchNormRelu: a pointwise NhwcConv (no input scale) whose X is made by an
// NhwcBatchNormalization (its activation too) that only it reads, by a channel Concat (last
// axis, static shapes) that only that BN or the conv reads, or by both (DenseNet's
// Concat -> BN -> Relu -> 1x1 conv), takes the Concat's inputs as its parts and the BN's
// parameters as a fused input norm (cpu/conv_nhwc_input_norm.h): the Concat and the BN are
// gone, and the SGEMM conv reads the parts as it packs A. Only where a kernel covers the
// fused node. Returns the count. (src/core/conv_input_scale_fusion.cc)
int FuseNhwcConvInputNorm(Graph& g);
// Before FuseNhwcConvInputNorm: an NhwcMaxPool or NhwcAveragePool whose input is a channel
// Concat (static shapes) that only it reads, and whose output only a pointwise NhwcConv
// reads (SqueezeNet: a fire module's two expand convs -> Concat -> MaxPool -> the next
// squeeze conv), becomes one pool per Concat input and a Concat of the pooled parts, which
// FuseNhwcConvInputNorm then hands to the conv: the concatenated map is never written.
// Pools are per channel, so the values are the same. Returns the count.
// (src/core/conv_input_scale_fusion.cc)
int SplitNhwcPoolOverConcat(Graph& g);
// Last of the NHWC passes: NhwcGlobalAveragePool of a depthwise NhwcConv's output (multiplier
// 1, no residual) becomes that conv's second output (attribute pool_keepdims), where a kernel
// covers it (the AVX-512F depthwise conv, which sums each output row's channels while the row
// is in L1): no pass of its own over the map (squeeze-excitation blocks). The conv keeps
// output 0 for its other readers. Returns the count. (src/core/conv_input_scale_fusion.cc)
int FuseDepthwiseGlobalPool(Graph& g);
// After ConvertToNhwc: NhwcBatchNormalization -> Relu becomes one NhwcBatchNormalization with
// activation = Relu when the BN output feeds only the Relu and is not a graph output
// (DenseNet's pre-activations: one pass over each map instead of two). Returns the count.
// (src/core/conv_residual_fusion.cc)
int FuseNhwcBatchNormRelu(Graph& g);

}  // namespace strata
