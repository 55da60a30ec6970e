// Explicit registration of every CPU kernel family. Each src/cpu/<family>.cc
// defines one Register*Kernels function; RegisterAllCpuKernels calls them all.
#pragma once

namespace strata {

class KernelRegistry;

void RegisterAllCpuKernels(KernelRegistry& r);

void RegisterElementwiseKernels(KernelRegistry& r);  // cpu/elementwise.cc: unary, binary, compare, logic, activations
void RegisterTensorKernels(KernelRegistry& r);       // cpu/tensor_ops.cc: reshape, transpose, slice, gather, concat...
void RegisterGemmKernels(KernelRegistry& r);         // cpu/gemm.cc: MatMul, Gemm
void RegisterConvKernels(KernelRegistry& r);         // cpu/conv.cc: Conv, ConvTranspose
void RegisterPoolKernels(KernelRegistry& r);         // cpu/pool.cc: Max/Average/Global/Lp pooling
void RegisterNormKernels(KernelRegistry& r);         // cpu/norm.cc: BatchNorm, LayerNorm, InstanceNorm, Softmax...
void RegisterReduceKernels(KernelRegistry& r);       // cpu/reduce.cc: Reduce*, ArgMax/ArgMin
void RegisterRnnKernels(KernelRegistry& r);          // cpu/rnn.cc: LSTM, GRU, RNN
void RegisterControlFlowKernels(KernelRegistry& r);  // cpu/control_flow.cc: If, Loop, Scan
void RegisterSequenceKernels(KernelRegistry& r);     // cpu/sequence.cc: Sequence*, Optional*
void RegisterQuantizeKernels(KernelRegistry& r);     // cpu/quantize.cc: (De)QuantizeLinear, *Integer, QLinear*
void RegisterResizeKernels(KernelRegistry& r);       // cpu/resize.cc: Resize (opset 10-17)
void RegisterDetectionKernels(KernelRegistry& r);    // cpu/detection.cc: NonMaxSuppression, RoiAlign
void RegisterStringKernels(KernelRegistry& r);  // cpu/string_ops.cc: StringNormalizer, TfIdfVectorizer, StringConcat,
                                                // StringSplit, RegexFullMatch
void RegisterTokenizerKernels(KernelRegistry& r);    // cpu/string_tokenizer.cc: com.microsoft Tokenizer
void RegisterSignalKernels(KernelRegistry& r);       // cpu/signal.cc: DFT, STFT, windows, MelWeightMatrix
void RegisterRandomKernels(KernelRegistry& r);       // cpu/random.cc: Random*, Bernoulli, Multinomial
void RegisterMiscKernels(KernelRegistry& r);         // cpu/misc_ops.cc: Det, GridSample
void RegisterSpatialKernels(KernelRegistry& r);      // cpu/spatial_ops.cc: Col2Im, CenterCropPad, AffineGrid
void RegisterDeformConvKernels(KernelRegistry& r);   // cpu/deform_conv.cc: DeformConv
void RegisterQuantWeightKernels(KernelRegistry& r);  // cpu/matmul_nbits.cc: com.microsoft MatMulNBits
// ai.onnx.ml (classical ML: scikit-learn, XGBoost, LightGBM exports)
void RegisterMlTreeKernels(KernelRegistry& r);  // cpu/ml_tree.cc: TreeEnsembleClassifier/Regressor
void RegisterMlKernels(KernelRegistry& r);      // cpu/ml_ops.cc: linear models, SVMs, scalers, encoders, ...

}  // namespace strata
