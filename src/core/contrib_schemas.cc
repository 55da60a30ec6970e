// ONNX schemas for ops that ONNX Runtime defines in the ai.onnx domain, registered in libonnx's
// schema registry so that its checker and shape inference accept models that use them.
// ORT registers these in its own (statically linked) copy of onnx; strata's libonnx is
// shared, so each schema is added only where the registry has none yet (another library in
// the process may have added it first).
#include "core/contrib_schemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <exception>
#include <mutex>

namespace strata {
namespace {

// SimplifiedLayerNormalization (ai.onnx, version 1): RMS normalization,
// Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale; output 1 is the
// optional inv_std_var (X's shape with the normalized axes set to 1). ONNX Runtime's
// transformer optimizer writes it for T5- and Llama-style models.
onnx::OpSchema SimplifiedLayerNormSchema() {
  onnx::OpSchema s;
  s.SetName("SimplifiedLayerNormalization")
      .SetDomain("")
      .SinceVersion(1)
      .SetDoc("ONNX Runtime's RMS normalization (strata: src/cpu/transformer_contrib.cc).")
      .Attr("axis", "first normalized axis", onnx::AttributeProto::INT, static_cast<int64_t>(-1))
      .Attr("epsilon", "added to the mean square", onnx::AttributeProto::FLOAT, 1e-5f)
      .Attr("stash_type", "accumulation type (1: float32)", onnx::AttributeProto::INT, static_cast<int64_t>(1))
      .Input(0, "X", "input", "T")
      .Input(1, "scale", "scale over the normalized axes", "V")
      .Output(0, "Y", "normalized X", "V")
      .Output(1, "inv_std_var", "1 / sqrt(mean square + epsilon)", "U", onnx::OpSchema::Optional)
      .TypeConstraint("T", {"tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"}, "X")
      .TypeConstraint("U", {"tensor(float)", "tensor(double)"}, "inv_std_var")
      .TypeConstraint("V", {"tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"}, "scale, Y")
      .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
        // Inputs may be untyped (the outputs of com.microsoft ops, which libonnx cannot
        // infer): propagate only what is known (libonnx's helpers dereference the types).
        if (ctx.getNumInputs() > 1 && ctx.getInputType(1) != nullptr &&
            ctx.getInputType(1)->value_case() == onnx::TypeProto::kTensorType)
          onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
        if (onnx::hasNInputShapes(ctx, 1)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
        if (ctx.getNumOutputs() > 1) onnx::updateOutputElemType(ctx, 1, onnx::TensorProto::FLOAT);
      });
  return s;
}

}  // namespace

void EnsureContribSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      if (onnx::OpSchemaRegistry::Schema("SimplifiedLayerNormalization", 1, "") == nullptr) {
        onnx::OpSchema s = SimplifiedLayerNormSchema();
        onnx::OpSchemaRegistry::OpSchemaRegisterOnce reg(s);
      }
    } catch (const std::exception&) {
      // Left unregistered: such models then fail the checker with its own message.
    }
  });
}

}  // namespace strata
