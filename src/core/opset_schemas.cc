// ai.onnx opsets 18-23 for libonnx 1.12 (which knows 1-17). Each op that changed in those
// opsets gets its new schema, derived from its previous one where only types or attributes
// were added, and written out where the op is new (Mish, Bitwise*, GroupNormalization, Gelu).
// Ops that changed but that strata does not implement get no schema: CheckOnnxOpVersion then
// refuses them by name, so that no node runs with an older version's meaning.
//
// The new versions keep the previous type lists (libonnx's checker does not hold nodes to
// them; the kernels' dtype lists do). float8, int4 and uint4 (opsets 19-21) have no strata
// tensor type and are refused by name at import (onnx_import.cc); the bfloat16 that opset 22
// adds to many ops runs where a kernel has it, as at older opsets, and elsewhere the kernel
// lookup refuses the node naming the type.
#include "core/opset_schemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace strata {
namespace {

using onnx::InferenceContext;
using onnx::OpSchema;

// The ops new or changed in each opset after 17 (ONNX's Changelog.md).
const std::map<int, std::vector<const char*>>& OpsetChanges() {
  static const std::map<int, std::vector<const char*>> changes = {
      {18,
       {"Pad",
        "CenterCropPad",
        "Resize",
        "Mish",
        "OptionalGetElement",
        "OptionalHasElement",
        "Split",
        "Col2Im",
        "ScatterND",
        "ScatterElements",
        "ReduceSumSquare",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceL1",
        "ReduceL2",
        "ReduceMax",
        "ReduceMin",
        "ReduceMean",
        "ReduceProd",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitwiseNot",
        "GroupNormalization",
        "LpPool"}},
      {19,
       {"Equal", "AveragePool", "Cast", "CastLike", "Constant", "DeformConv", "DequantizeLinear", "Identity", "If",
        "Loop", "Pad", "QuantizeLinear", "Resize", "Reshape", "Scan", "Shape", "Size"}},
      {20,
       {"AffineGrid", "ConstantOfShape", "DFT", "Gelu", "GridSample", "ImageDecoder", "IsInf", "IsNaN", "ReduceMax",
        "ReduceMin", "RegexFullMatch", "StringConcat", "StringSplit"}},
      {21,
       {"Cast",
        "CastLike",
        "Constant",
        "ConstantOfShape",
        "DequantizeLinear",
        "Flatten",
        "GroupNormalization",
        "Identity",
        "If",
        "Loop",
        "Pad",
        "QLinearMatMul",
        "QuantizeLinear",
        "Reshape",
        "Scan",
        "Shape",
        "Size",
        "Squeeze",
        "Transpose",
        "Unsqueeze"}},
      {22,
       {"Acos",
        "Acosh",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "AveragePool",
        "Bernoulli",
        "Conv",
        "ConvTranspose",
        "Cos",
        "Cosh",
        "DeformConv",
        "Det",
        "Dropout",
        "Elu",
        "EyeLike",
        "GRU",
        "GlobalAveragePool",
        "GlobalLpPool",
        "GlobalMaxPool",
        "GridSample",
        "HardSigmoid",
        "HardSwish",
        "InstanceNormalization",
        "LSTM",
        "LpNormalization",
        "LpPool",
        "MaxPool",
        "MaxRoiPool",
        "MaxUnpool",
        "Mish",
        "Multinomial",
        "NegativeLogLikelihoodLoss",
        "RNN",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "RoiAlign",
        "Round",
        "Selu",
        "Sin",
        "Sinh",
        "Softplus",
        "Softsign",
        "Tan",
        "ThresholdedRelu"}},
      {23, {"Attention",       "Cast", "CastLike", "Constant", "ConstantOfShape", "DequantizeLinear", "Flatten",
            "Identity",        "If",   "Loop",     "Pad",      "QuantizeLinear",  "RMSNormalization", "Reshape",
            "RotaryEmbedding", "Scan", "Shape",    "Size",     "Squeeze",         "Transpose",        "Unsqueeze"}},
  };
  return changes;
}

const std::vector<std::string> kFloatTypes = {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"};
const std::vector<std::string> kIntTypes = {"tensor(uint8)", "tensor(uint16)", "tensor(uint32)", "tensor(uint64)",
                                            "tensor(int8)",  "tensor(int16)",  "tensor(int32)",  "tensor(int64)"};

bool HasInput(InferenceContext& ctx, size_t i) { return ctx.getNumInputs() > i && ctx.getInputType(i) != nullptr; }

// Output 0 gets input 0's element type and rank, with unknown dims: for the new attribute
// and input combinations whose exact shape the older inference would get wrong.
void TypeAndRank(InferenceContext& ctx) {
  if (!HasInput(ctx, 0) || ctx.getInputType(0)->value_case() != onnx::TypeProto::kTensorType) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  auto* out = onnx::getOutputShape(ctx, 0);
  out->clear_dim();
  for (int i = 0; i < ctx.getInputType(0)->tensor_type().shape().dim_size(); ++i) out->add_dim();
}

void SameAsInput(InferenceContext& ctx) {
  if (HasInput(ctx, 0)) onnx::propagateShapeAndTypeFromFirstInput(ctx);
}

// A new schema from the previous version `base`: same inputs, outputs, attributes, types,
// inference and data propagation (and function body, for a type bump), then `edit` adds what
// the new version adds.
struct Derivation {
  std::vector<std::string> drop_attrs;
  std::vector<std::pair<std::string, std::string>> add_inputs;  // name, type string (optional inputs)
  std::vector<size_t> optional_inputs;                          // inputs that became optional
  std::map<std::string, std::vector<std::string>> extra_types;  // type parameter -> added types
  std::function<onnx::InferenceFunction(onnx::InferenceFunction base)> infer;
  std::function<void(OpSchema&)> edit;
};

OpSchema Derive(const OpSchema& base, int since, const Derivation& d) {
  OpSchema s;
  s.SetName(base.Name()).SetDomain(base.domain()).SinceVersion(since).SetSupportLevel(base.support_level());
  s.SetDoc("strata: " + base.Name() + "-" + std::to_string(since) + ", derived from version " +
           std::to_string(base.SinceVersion()) + " (src/core/opset_schemas.cc).");
  s.SetLocation(__FILE__, __LINE__);
  int n = 0;
  for (const auto& p : base.inputs()) {
    const bool now_optional = std::find(d.optional_inputs.begin(), d.optional_inputs.end(), static_cast<size_t>(n)) !=
                              d.optional_inputs.end();
    s.Input(n++, p.GetName(), p.GetDescription(), p.GetTypeStr(), now_optional ? OpSchema::Optional : p.GetOption(),
            p.GetIsHomogeneous(), p.GetMinArity(), p.GetDifferentiationCategory());
  }
  for (const auto& [name, type] : d.add_inputs) s.Input(n++, name, name, type, OpSchema::Optional);
  n = 0;
  for (const auto& p : base.outputs())
    s.Output(n++, p.GetName(), p.GetDescription(), p.GetTypeStr(), p.GetOption(), p.GetIsHomogeneous(), p.GetMinArity(),
             p.GetDifferentiationCategory());
  for (const auto& [name, a] : base.attributes())
    if (std::find(d.drop_attrs.begin(), d.drop_attrs.end(), name) == d.drop_attrs.end()) s.Attr(a);
  for (const auto& tc : base.typeConstraintParams()) {
    std::vector<std::string> types = tc.allowed_type_strs;
    auto extra = d.extra_types.find(tc.type_param_str);
    if (extra != d.extra_types.end())
      for (const auto& t : extra->second)
        if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    s.TypeConstraint(tc.type_param_str, types, tc.description);
  }
  onnx::InferenceFunction infer = base.GetTypeAndShapeInferenceFunction();
  if (d.infer) infer = d.infer(infer);
  if (infer) s.TypeAndShapeInferenceFunction(infer);
  if (base.GetDataPropagationFunction()) s.PartialDataPropagationFunction(base.GetDataPropagationFunction());
  // A function body still means the same only when the signature is unchanged (a type bump).
  const bool same_signature = d.drop_attrs.empty() && d.add_inputs.empty() && d.optional_inputs.empty() && !d.edit;
  if (same_signature && base.HasFunction() && base.GetFunction() != nullptr) {
    const onnx::FunctionProto& f = *base.GetFunction();
    std::vector<onnx::NodeProto> nodes(f.node().begin(), f.node().end());
    std::vector<onnx::OperatorSetIdProto> opsets(f.opset_import().begin(), f.opset_import().end());
    s.FunctionBody(nodes, opsets);
  }
  if (d.edit) d.edit(s);
  return s;
}

// --- new ops ------------------------------------------------------------------------------

OpSchema UnarySchema(const char* name, int since, const std::vector<std::string>& types) {
  OpSchema s;
  s.SetName(name).SetDomain("").SinceVersion(since).SetLocation(__FILE__, __LINE__);
  s.SetDoc(std::string("strata: ai.onnx ") + name + "-" + std::to_string(since) + " (src/core/opset_schemas.cc).");
  s.Input(0, "X", "input", "T").Output(0, "Y", "output", "T").TypeConstraint("T", types, "element type");
  s.TypeAndShapeInferenceFunction(SameAsInput);
  return s;
}

OpSchema BitwiseBinarySchema(const char* name) {
  OpSchema s;
  s.SetName(name).SetDomain("").SinceVersion(18).SetLocation(__FILE__, __LINE__);
  s.SetDoc(std::string("strata: ai.onnx ") + name + "-18, numpy broadcasting (src/core/opset_schemas.cc).");
  s.Input(0, "A", "first operand", "T").Input(1, "B", "second operand", "T").Output(0, "C", "result", "T");
  s.TypeConstraint("T", kIntTypes, "integer tensors");
  s.TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
    if (!HasInput(ctx, 0)) return;
    onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
    if (onnx::hasNInputShapes(ctx, 2))
      onnx::bidirectionalBroadcastShapeInference(ctx.getInputType(0)->tensor_type().shape(),
                                                 ctx.getInputType(1)->tensor_type().shape(),
                                                 *onnx::getOutputShape(ctx, 0));
  });
  return s;
}

OpSchema GroupNormSchema() {
  OpSchema s;
  s.SetName("GroupNormalization").SetDomain("").SinceVersion(18).SetLocation(__FILE__, __LINE__);
  s.SetDoc("strata: ai.onnx GroupNormalization-18: scale and bias per group (src/core/opset_schemas.cc).");
  s.Attr("epsilon", "added to the variance", onnx::AttributeProto::FLOAT, 1e-5f)
      .Attr("num_groups", "number of groups the channels are divided into", onnx::AttributeProto::INT, true)
      .Input(0, "X", "[N, C, D1, ...]", "T")
      .Input(1, "scale", "[num_groups]", "T")
      .Input(2, "bias", "[num_groups]", "T")
      .Output(0, "Y", "same shape as X", "T")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction(SameAsInput);
  return s;
}

OpSchema GeluSchema() {
  OpSchema s = UnarySchema("Gelu", 20, kFloatTypes);
  s.Attr("approximate", "'none' (erf) or 'tanh'", onnx::AttributeProto::STRING, std::string("none"));
  return s;
}

OpSchema NewSchema(const char* name, int since) {
  OpSchema s;
  s.SetName(name).SetDomain("").SinceVersion(since).SetLocation(__FILE__, __LINE__);
  s.SetDoc(std::string("strata: ai.onnx ") + name + "-" + std::to_string(since) + " (src/core/opset_schemas.cc).");
  return s;
}

// Output 0's element type from input 0, its rank `rank_delta` more or less than input 0's.
void TypeAndRankPlus(InferenceContext& ctx, int rank_delta) {
  if (!HasInput(ctx, 0) || ctx.getInputType(0)->value_case() != onnx::TypeProto::kTensorType) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const int rank = ctx.getInputType(0)->tensor_type().shape().dim_size() + rank_delta;
  auto* out = onnx::getOutputShape(ctx, 0);
  out->clear_dim();
  for (int i = 0; i < rank; ++i) out->add_dim();
}

const std::vector<std::string> kAllTypes = {"tensor(uint8)",   "tensor(uint16)",  "tensor(uint32)", "tensor(uint64)",
                                            "tensor(int8)",    "tensor(int16)",   "tensor(int32)",  "tensor(int64)",
                                            "tensor(float16)", "tensor(float)",   "tensor(double)", "tensor(string)",
                                            "tensor(bool)",    "tensor(bfloat16)"};

OpSchema Col2ImSchema() {
  OpSchema s = NewSchema("Col2Im", 18);
  s.Attr("dilations", "dilation per image axis", onnx::AttributeProto::INTS, false)
      .Attr("pads", "padding at the start and end of each image axis", onnx::AttributeProto::INTS, false)
      .Attr("strides", "stride per image axis", onnx::AttributeProto::INTS, false)
      .Input(0, "input", "[N, C * prod(block_shape), L]", "T")
      .Input(1, "image_shape", "the image's spatial shape", "tensor(int64)")
      .Input(2, "block_shape", "the block's shape", "tensor(int64)")
      .Output(0, "output", "[N, C, image...]", "T")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        if (HasInput(ctx, 0)) onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
      });
  return s;
}

OpSchema CenterCropPadSchema() {
  OpSchema s = NewSchema("CenterCropPad", 18);
  s.Attr("axes", "the axes `shape` refers to (default: all)", onnx::AttributeProto::INTS, false)
      .Input(0, "input_data", "input", "T")
      .Input(1, "shape", "the output length of each axis", "Tind")
      .Output(0, "output_data", "cropped or padded", "T")
      .TypeConstraint("T", kAllTypes, "any tensor")
      .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "shape type")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { TypeAndRankPlus(ctx, 0); });
  return s;
}

OpSchema AffineGridSchema() {
  OpSchema s = NewSchema("AffineGrid", 20);
  s.Attr("align_corners", "-1 and 1 at the corner pixels' centres (1) or edges (0)", onnx::AttributeProto::INT,
         static_cast<int64_t>(0))
      .Input(0, "theta", "[N, 2, 3] or [N, 3, 4]", "T1")
      .Input(1, "size", "[N, C, H, W] or [N, C, D, H, W]", "T2")
      .Output(0, "grid", "[N, H, W, 2] or [N, D, H, W, 3]", "T1")
      .TypeConstraint("T1", kFloatTypes, "float tensors")
      .TypeConstraint("T2", {"tensor(int64)"}, "size type")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        if (HasInput(ctx, 0)) onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
      });
  return s;
}

OpSchema RegexFullMatchSchema() {
  OpSchema s = NewSchema("RegexFullMatch", 20);
  s.Attr("pattern", "RE2 regular expression", onnx::AttributeProto::STRING, false)
      .Input(0, "X", "strings", "T1")
      .Output(0, "Y", "whether each string matches as a whole", "T2")
      .TypeConstraint("T1", {"tensor(string)"}, "strings")
      .TypeConstraint("T2", {"tensor(bool)"}, "bools")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::BOOL);
        if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
      });
  return s;
}

OpSchema StringConcatSchema() {
  OpSchema s = NewSchema("StringConcat", 20);
  s.Input(0, "X", "strings", "T")
      .Input(1, "Y", "strings", "T")
      .Output(0, "Z", "X and Y concatenated, broadcast", "T")
      .TypeConstraint("T", {"tensor(string)"}, "strings")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::STRING);
        if (onnx::hasNInputShapes(ctx, 2))
          onnx::bidirectionalBroadcastShapeInference(ctx.getInputType(0)->tensor_type().shape(),
                                                     ctx.getInputType(1)->tensor_type().shape(),
                                                     *onnx::getOutputShape(ctx, 0));
      });
  return s;
}

OpSchema DeformConvSchema() {
  OpSchema s = NewSchema("DeformConv", 19);
  s.Attr("dilations", "dilation per spatial axis", onnx::AttributeProto::INTS, false)
      .Attr("group", "groups of input and output channels", onnx::AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("kernel_shape", "the kernel's spatial shape (default: W's)", onnx::AttributeProto::INTS, false)
      .Attr("offset_group", "groups of input channels sharing offsets", onnx::AttributeProto::INT,
            static_cast<int64_t>(1))
      .Attr("pads", "padding at the start and end of each spatial axis", onnx::AttributeProto::INTS, false)
      .Attr("strides", "stride per spatial axis", onnx::AttributeProto::INTS, false)
      .Input(0, "X", "[N, C, H, W]", "T")
      .Input(1, "W", "[oC, C / group, kH, kW]", "T")
      .Input(2, "offset", "[N, offset_group * kH * kW * 2, oH, oW]", "T")
      .Input(3, "B", "[oC]", "T", OpSchema::Optional)
      .Input(4, "mask", "[N, offset_group * kH * kW, oH, oW]", "T", OpSchema::Optional)
      .Output(0, "Y", "[N, oC, oH, oW]", "T")
      .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)"}, "float tensors")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { TypeAndRankPlus(ctx, 0); });
  return s;
}

OpSchema RmsNormSchema() {
  OpSchema s = NewSchema("RMSNormalization", 23);
  s.Attr("axis", "first normalized axis", onnx::AttributeProto::INT, static_cast<int64_t>(-1))
      .Attr("epsilon", "added to the mean square", onnx::AttributeProto::FLOAT, 1e-5f)
      .Attr("stash_type", "accumulation type (1: float32)", onnx::AttributeProto::INT, static_cast<int64_t>(1))
      .Input(0, "X", "input", "T")
      .Input(1, "scale", "scale over the normalized axes", "V")
      .Output(0, "Y", "X / sqrt(mean(X^2) + epsilon) * scale", "V")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeConstraint("V", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        if (HasInput(ctx, 1) && ctx.getInputType(1)->value_case() == onnx::TypeProto::kTensorType)
          onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
        if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
      });
  return s;
}

OpSchema RotaryEmbeddingSchema() {
  OpSchema s = NewSchema("RotaryEmbedding", 23);
  s.Attr("interleaved", "rotate pairs (1) or halves (0)", onnx::AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("num_heads", "heads of a 3-D input", onnx::AttributeProto::INT, false)
      .Attr("rotary_embedding_dim", "rotated dims per head (0: all)", onnx::AttributeProto::INT,
            static_cast<int64_t>(0))
      .Input(0, "X", "[B, S, hidden] or [B, num_heads, S, head_size]", "T")
      .Input(1, "cos_cache", "[max_position, R/2], or [B, S, R/2] without position_ids", "T")
      .Input(2, "sin_cache", "as cos_cache", "T")
      .Input(3, "position_ids", "[B, S]", "M", OpSchema::Optional)
      .Output(0, "Y", "X rotated", "T")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeConstraint("M", {"tensor(int64)"}, "positions")
      .TypeAndShapeInferenceFunction(SameAsInput);
  return s;
}

OpSchema StringSplitSchema() {
  OpSchema s = NewSchema("StringSplit", 20);
  s.Attr("delimiter", "the separator (absent or empty: runs of whitespace)", onnx::AttributeProto::STRING, false)
      .Attr("maxsplit", "at most this many splits", onnx::AttributeProto::INT, false)
      .Input(0, "X", "strings", "T1")
      .Output(0, "Y", "the pieces, padded with empty strings", "T2")
      .Output(1, "Z", "the number of pieces of each string", "T3")
      .TypeConstraint("T1", {"tensor(string)"}, "strings")
      .TypeConstraint("T2", {"tensor(string)"}, "strings")
      .TypeConstraint("T3", {"tensor(int64)"}, "counts")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::STRING);
        if (ctx.getNumOutputs() > 1) onnx::updateOutputElemType(ctx, 1, onnx::TensorProto::INT64);
        if (!onnx::hasInputShape(ctx, 0)) return;
        const auto& in = ctx.getInputType(0)->tensor_type().shape();
        auto* y = onnx::getOutputShape(ctx, 0);
        *y = in;
        y->add_dim();
        if (ctx.getNumOutputs() > 1) *onnx::getOutputShape(ctx, 1) = in;
      });
  return s;
}

// --- derived versions ---------------------------------------------------------------------

Derivation Plain() { return {}; }

Derivation WithAttrs(std::function<void(OpSchema&)> edit) {
  Derivation d;
  d.edit = std::move(edit);
  return d;
}

// Reduce*-18 take axes as an optional input, as ReduceSum-13 does: ReduceSum-13's inference
// (keepdims, noop_with_empty_axes, constant axes) is the one they now share.
Derivation ReduceWithAxesInput() {
  Derivation d;
  d.drop_attrs = {"axes"};
  d.add_inputs = {{"axes", "tensor(int64)"}};
  d.infer = [](onnx::InferenceFunction) {
    const OpSchema* sum = onnx::OpSchemaRegistry::Schema("ReduceSum", 13, "");
    return sum ? sum->GetTypeAndShapeInferenceFunction() : onnx::InferenceFunction(TypeAndRank);
  };
  d.edit = [](OpSchema& s) {
    s.Attr("noop_with_empty_axes", "with empty axes: 1 = identity, 0 = reduce all", onnx::AttributeProto::INT,
           static_cast<int64_t>(0));
  };
  return d;
}

Derivation PadWithAxes() {
  Derivation d;
  d.add_inputs = {{"axes", "Tind"}};
  d.infer = [](onnx::InferenceFunction base) -> onnx::InferenceFunction {
    return [base](InferenceContext& ctx) {
      if (HasInput(ctx, 3)) return TypeAndRank(ctx);  // pads cover only `axes`
      if (base) base(ctx);
    };
  };
  d.edit = [](OpSchema& s) { s.TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "axes type"); };
  return d;
}

Derivation SplitWithNumOutputs() {
  Derivation d;
  d.infer = [](onnx::InferenceFunction base) -> onnx::InferenceFunction {
    return [base](InferenceContext& ctx) {
      const onnx::AttributeProto* num = ctx.getAttribute("num_outputs");
      if (num == nullptr || HasInput(ctx, 1)) {
        if (base) base(ctx);
        return;
      }
      if (!HasInput(ctx, 0)) return;
      const int64_t parts = num->i();
      if (parts < 1 || static_cast<size_t>(parts) != ctx.getNumOutputs())
        fail_shape_inference("Split: num_outputs ", parts, " differs from the node's ", ctx.getNumOutputs(),
                             " outputs");
      for (size_t i = 0; i < ctx.getNumOutputs(); ++i) onnx::propagateElemTypeFromInputToOutput(ctx, 0, i);
      if (!onnx::hasInputShape(ctx, 0)) return;
      const auto& in = ctx.getInputType(0)->tensor_type().shape();
      int64_t axis = onnx::getAttribute(ctx, "axis", 0);
      if (axis < 0) axis += in.dim_size();
      if (axis < 0 || axis >= in.dim_size()) fail_shape_inference("Split: axis is out of range");
      for (size_t i = 0; i < ctx.getNumOutputs(); ++i) {
        auto* out = onnx::getOutputShape(ctx, i);
        *out = in;
        auto* dim = out->mutable_dim(static_cast<int>(axis));
        if (!in.dim(static_cast<int>(axis)).has_dim_value()) {
          dim->clear_dim_value();
          dim->clear_dim_param();
          continue;
        }
        // Chunks of ceil(len / parts); the last ones take what is left.
        const int64_t len = in.dim(static_cast<int>(axis)).dim_value();
        const int64_t chunk = (len + parts - 1) / parts;
        dim->set_dim_value(std::clamp<int64_t>(len - chunk * static_cast<int64_t>(i), 0, chunk));
      }
    };
  };
  d.edit = [](OpSchema& s) {
    s.Attr("num_outputs", "number of equal parts (the last may be smaller)", onnx::AttributeProto::INT, false);
  };
  return d;
}

// Resize-18: antialias, axes, keep_aspect_ratio_policy; Resize-19 adds the coordinate mode
// half_pixel_symmetric (a string value, so no schema change).
Derivation Resize18() {
  Derivation d;
  d.infer = [](onnx::InferenceFunction base) -> onnx::InferenceFunction {
    return [base](InferenceContext& ctx) {
      const onnx::AttributeProto* policy = ctx.getAttribute("keep_aspect_ratio_policy");
      if (ctx.getAttribute("axes") != nullptr || (policy != nullptr && policy->s() != "stretch"))
        return TypeAndRank(ctx);
      if (base) base(ctx);
    };
  };
  d.edit = [](OpSchema& s) {
    s.Attr("antialias", "antialiasing filter when downsampling", onnx::AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("axes", "axes that roi, scales and sizes refer to", onnx::AttributeProto::INTS, false)
        .Attr("keep_aspect_ratio_policy", "stretch, not_larger or not_smaller", onnx::AttributeProto::STRING,
              std::string("stretch"));
  };
  return d;
}

// Pooling with new geometry attributes (AveragePool-19 dilations; LpPool-18 ceil_mode and
// dilations): the older inference ignores them, so only type and rank are inferred then.
Derivation PoolWithAttrs(std::vector<const char*> attrs) {
  Derivation d;
  d.infer = [attrs](onnx::InferenceFunction base) -> onnx::InferenceFunction {
    return [base, attrs](InferenceContext& ctx) {
      for (const char* a : attrs)
        if (ctx.getAttribute(a) != nullptr) return TypeAndRank(ctx);
      if (base) base(ctx);
    };
  };
  d.edit = [attrs](OpSchema& s) {
    for (const char* a : attrs) {
      if (std::string(a) == "dilations")
        s.Attr("dilations", "dilation along each spatial axis", onnx::AttributeProto::INTS, false);
      else
        s.Attr("ceil_mode", "ceil instead of floor for the output shape", onnx::AttributeProto::INT,
               static_cast<int64_t>(0));
    }
  };
  return d;
}

Derivation WithSaturate() {
  return WithAttrs([](OpSchema& s) {
    s.Attr("saturate", "float8 conversions saturate (no effect on other types)", onnx::AttributeProto::INT,
           static_cast<int64_t>(1));
  });
}

// OptionalGetElement-18 and OptionalHasElement-18 also take plain tensors and sequences.
Derivation OptionalTakesPlainValues(bool has_element) {
  Derivation d;
  const OpSchema* get15 = onnx::OpSchemaRegistry::Schema("OptionalGetElement", 15, "");
  std::vector<std::string> plain;
  if (get15 != nullptr)
    for (const auto& tc : get15->typeConstraintParams())
      if (tc.type_param_str == "V") plain = tc.allowed_type_strs;
  d.extra_types["O"] = plain;
  if (has_element) d.optional_inputs = {0};
  d.infer = [has_element](onnx::InferenceFunction base) -> onnx::InferenceFunction {
    return [base, has_element](InferenceContext& ctx) {
      const onnx::TypeProto* t = ctx.getNumInputs() > 0 ? ctx.getInputType(0) : nullptr;
      if (has_element) {
        onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::BOOL);
        onnx::getOutputShape(ctx, 0)->clear_dim();
      } else if (t != nullptr && t->value_case() == onnx::TypeProto::kOptionalType) {
        if (base) base(ctx);
      } else if (t != nullptr) {
        *ctx.getOutputType(0) = *t;
      }
    };
  };
  return d;
}

// DFT-20: the axis is an optional int64 scalar input (default -2) instead of an attribute.
Derivation DftWithAxisInput() {
  Derivation d;
  d.drop_attrs = {"axis"};
  d.add_inputs = {{"axis", "tensor(int64)"}};
  d.infer = [](onnx::InferenceFunction) -> onnx::InferenceFunction {
    return [](InferenceContext& ctx) {
      TypeAndRank(ctx);
      if (!onnx::hasInputShape(ctx, 0)) return;
      auto* out = onnx::getOutputShape(ctx, 0);
      if (out->dim_size() > 0) out->mutable_dim(out->dim_size() - 1)->set_dim_value(2);
    };
  };
  return d;
}

// QuantizeLinear-21: output_dtype picks the output type when there is no zero point.
Derivation Quantize21() {
  Derivation d;
  d.infer = [](onnx::InferenceFunction base) -> onnx::InferenceFunction {
    return [base](InferenceContext& ctx) {
      const onnx::AttributeProto* dt = ctx.getAttribute("output_dtype");
      if (dt == nullptr || dt->i() == 0 || HasInput(ctx, 2)) {
        if (base) base(ctx);
        return;
      }
      onnx::updateOutputElemType(ctx, 0, static_cast<int32_t>(dt->i()));
      if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
    };
  };
  d.edit = [](OpSchema& s) {
    s.Attr("block_size", "blocked quantization: elements per scale along axis (0: per tensor or axis)",
           onnx::AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("output_dtype", "output type when y_zero_point is absent (0: uint8)", onnx::AttributeProto::INT,
              static_cast<int64_t>(0));
  };
  return d;
}

// DequantizeLinear-19: y has x_scale's type (float16 scales give a float16 y).
Derivation Dequantize19() {
  Derivation d;
  d.infer = [](onnx::InferenceFunction base) -> onnx::InferenceFunction {
    return [base](InferenceContext& ctx) {
      if (base) base(ctx);
      if (HasInput(ctx, 1) && ctx.getInputType(1)->has_tensor_type() &&
          ctx.getInputType(1)->tensor_type().elem_type() != 0)
        ctx.getOutputType(0)->mutable_tensor_type()->set_elem_type(ctx.getInputType(1)->tensor_type().elem_type());
    };
  };
  return d;
}

Derivation Dequantize21() {
  return WithAttrs([](OpSchema& s) {
    s.Attr("block_size", "blocked quantization: elements per scale along axis (0: per tensor or axis)",
           onnx::AttributeProto::INT, static_cast<int64_t>(0));
  });
}

Derivation GroupNorm21() {
  return WithAttrs([](OpSchema& s) {
    s.Attr("stash_type", "type of the mean and variance (1: float32)", onnx::AttributeProto::INT,
           static_cast<int64_t>(1));
  });
}

// Every schema strata adds, in the order they must be registered (each derived version's
// base is the newest schema below it, which may be one registered here).
struct Entry {
  const char* op;
  int since;
  std::function<Derivation()> derive;  // null: `make` builds a new op
  std::function<OpSchema()> make;
};

std::vector<Entry> Entries() {
  std::vector<Entry> e;
  auto derived = [&e](const char* op, int since, std::function<Derivation()> f) {
    e.push_back({op, since, std::move(f), nullptr});
  };
  auto fresh = [&e](const char* op, int since, std::function<OpSchema()> f) {
    e.push_back({op, since, nullptr, std::move(f)});
  };
  // 18
  derived("Pad", 18, PadWithAxes);
  derived("Resize", 18, Resize18);
  fresh("Mish", 18, [] { return UnarySchema("Mish", 18, {"tensor(float16)", "tensor(float)", "tensor(double)"}); });
  derived("OptionalGetElement", 18, [] { return OptionalTakesPlainValues(false); });
  derived("OptionalHasElement", 18, [] { return OptionalTakesPlainValues(true); });
  derived("Split", 18, SplitWithNumOutputs);
  derived("ScatterND", 18, Plain);
  derived("ScatterElements", 18, Plain);
  for (const char* r : {"ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceL1", "ReduceL2", "ReduceMax",
                        "ReduceMin", "ReduceMean", "ReduceProd"})
    derived(r, 18, ReduceWithAxesInput);
  for (const char* b : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) fresh(b, 18, [b] { return BitwiseBinarySchema(b); });
  fresh("BitwiseNot", 18, [] { return UnarySchema("BitwiseNot", 18, kIntTypes); });
  fresh("GroupNormalization", 18, GroupNormSchema);
  fresh("Col2Im", 18, Col2ImSchema);
  fresh("CenterCropPad", 18, CenterCropPadSchema);
  derived("LpPool", 18, [] { return PoolWithAttrs({"ceil_mode", "dilations"}); });
  // 19
  derived("AveragePool", 19, [] { return PoolWithAttrs({"dilations"}); });
  derived("Cast", 19, WithSaturate);
  derived("CastLike", 19, WithSaturate);
  derived("QuantizeLinear", 19, WithSaturate);
  fresh("DeformConv", 19, DeformConvSchema);
  derived("DequantizeLinear", 19, Dequantize19);
  for (const char* op :
       {"Equal", "Constant", "Identity", "If", "Loop", "Pad", "Resize", "Reshape", "Scan", "Shape", "Size"})
    derived(op, 19, Plain);
  // 20
  derived("DFT", 20, DftWithAxisInput);
  fresh("Gelu", 20, GeluSchema);
  fresh("AffineGrid", 20, AffineGridSchema);
  fresh("RegexFullMatch", 20, RegexFullMatchSchema);
  fresh("StringConcat", 20, StringConcatSchema);
  fresh("StringSplit", 20, StringSplitSchema);
  for (const char* op : {"ConstantOfShape", "GridSample", "IsInf", "IsNaN", "ReduceMax", "ReduceMin"})
    derived(op, 20, Plain);
  // 21
  derived("QuantizeLinear", 21, Quantize21);
  derived("DequantizeLinear", 21, Dequantize21);
  derived("GroupNormalization", 21, GroupNorm21);
  for (const char* op : {"Cast", "CastLike", "Constant", "ConstantOfShape", "Flatten", "Identity", "If", "Loop", "Pad",
                         "QLinearMatMul", "Reshape", "Scan", "Shape", "Size", "Squeeze", "Transpose", "Unsqueeze"})
    derived(op, 21, Plain);
  // 22: bfloat16 added to these ops' types (not a strata change: see the file comment).
  for (const char* op : OpsetChanges().at(22)) derived(op, 22, Plain);
  // 23: float4e2m1 added to these ops' types (no strata tensor type: refused at import), and
  // two new ops that ONNX Runtime had as contrib ops. Attention-23 is not implemented.
  for (const char* op :
       {"Cast", "CastLike", "Constant", "ConstantOfShape", "DequantizeLinear", "Flatten", "Identity", "If", "Loop",
        "Pad", "QuantizeLinear", "Reshape", "Scan", "Shape", "Size", "Squeeze", "Transpose", "Unsqueeze"})
    derived(op, 23, Plain);
  fresh("RMSNormalization", 23, RmsNormSchema);
  fresh("RotaryEmbedding", 23, RotaryEmbeddingSchema);
  return e;
}

void Register(OpSchema s) {
  if (const OpSchema* have = onnx::OpSchemaRegistry::Schema(s.Name(), s.SinceVersion(), s.domain());
      have != nullptr && have->SinceVersion() == s.SinceVersion())
    return;  // another library in the process registered it first
  onnx::OpSchemaRegistry::OpSchemaRegisterOnce reg(s);
}

}  // namespace

void EnsureOpsetSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      // libonnx keeps its domain ranges in a singleton without a setter for a known domain
      // (AddDomainToVersion asserts the domain is new); the map object itself is not const.
      auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
      auto& map = const_cast<std::unordered_map<std::string, std::pair<int, int>>&>(ranges.Map());
      auto& last = const_cast<std::unordered_map<std::string, int>&>(ranges.LastReleaseVersionMap());
      if (map[onnx::ONNX_DOMAIN].second < kMaxOnnxOpset) {
        map[onnx::ONNX_DOMAIN].second = kMaxOnnxOpset;
        last[onnx::ONNX_DOMAIN] = kMaxOnnxOpset;
      }
    } catch (const std::exception&) {
      return;  // libonnx's ranges unchanged: newer opsets stay refused at import
    }
    for (const Entry& e : Entries()) {
      try {
        if (e.make) {
          Register(e.make());
          continue;
        }
        const OpSchema* base = onnx::OpSchemaRegistry::Schema(e.op, e.since - 1, "");
        if (base != nullptr) Register(Derive(*base, e.since, e.derive()));
      } catch (const std::exception&) {
        // Left unregistered: CheckOnnxOpVersion then refuses this op's nodes by name.
      }
    }
  });
}

Status CheckOnnxOpVersion(const std::string& op_type, int opset, const std::string& node_desc) {
  // op -> the opsets it changed in, ascending (built once: this runs for every node).
  static const std::unordered_map<std::string, std::vector<int>> index = [] {
    std::unordered_map<std::string, std::vector<int>> m;
    for (const auto& [version, ops] : OpsetChanges())
      for (const char* op : ops) m[op].push_back(version);
    return m;
  }();
  auto it = index.find(op_type);
  if (it == index.end() || it->second.front() > opset) return Status::Ok();
  int changed = 0;
  for (int v : it->second)
    if (v <= opset) changed = v;
  const OpSchema* schema = onnx::OpSchemaRegistry::Schema(op_type, opset, "");
  if (schema != nullptr && schema->SinceVersion() >= changed) return Status::Ok();
  if (schema == nullptr)
    return Unsupported(node_desc, ": ", op_type, " is new in ai.onnx opset ", it->second.front(),
                       " and this build does not implement it");
  return Unsupported(node_desc, ": ", op_type, " changed in ai.onnx opset ", changed, " (the model imports opset ",
                     opset, "); this build implements it only up to version ", schema->SinceVersion());
}

}  // namespace strata
