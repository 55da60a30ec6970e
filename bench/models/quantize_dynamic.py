#!/usr/bin/python3
"""Dynamic int8 quantization of a float ONNX model, the way ONNX Runtime's quantize_dynamic does it.

Every MatMul whose B is a 2-D float initializer (and every Gemm with a constant B, alpha 1,
transA 0) becomes ONNX Runtime's "IntegerOps" pattern:

    a_q, a_scale, a_zp = DynamicQuantizeLinear(A)               # uint8, per tensor, per run
    acc = MatMulInteger(a_q, W_q, a_zp, W_zp)                   # int8 W, symmetric (W_zp = 0)
    y = Cast(acc, float) * (a_scale * W_scale)  [+ bias (Gemm C)]

W_q = round(W / W_scale), W_scale = max|W| / 127 (one scale per tensor, ORT's default
weight_type=QInt8, per_channel=False). Nothing else changes. python3-onnx and numpy only (no
onnxruntime.quantization on Debian), so the benchmark set's quantized variants can be made
here and timed against ORT on the very same file:

  bench/models/quantize_dynamic.py bench/models/out/bert.onnx bench/models/out/bert_dynq.onnx
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def quantize(model):
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    new_nodes, new_inits, done = [], [], 0
    for node in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        b = inits.get(node.input[1]) if node.op_type in ("MatMul", "Gemm") and len(node.input) > 1 else None
        ok = b is not None and b.data_type == TensorProto.FLOAT and len(b.dims) == 2
        if ok and node.op_type == "Gemm":
            ok = attrs.get("transA", 0) == 0 and attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0
        if not ok:
            new_nodes.append(node)
            continue
        w = numpy_helper.to_array(b).astype(np.float32)
        if node.op_type == "Gemm" and attrs.get("transB", 0):
            w = w.T
        scale = np.float32(max(float(np.abs(w).max()), 1e-12) / 127.0)
        wq = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        p = "%s_dynq%d" % (node.name or node.op_type, done)
        new_inits += [numpy_helper.from_array(wq, p + "_W_q"),
                      numpy_helper.from_array(np.array(scale, np.float32), p + "_W_scale"),
                      numpy_helper.from_array(np.array(0, np.int8), p + "_W_zp")]
        a = node.input[0]
        out = node.output[0]
        mm_out = out if node.op_type == "MatMul" else p + "_mm"
        new_nodes += [
            helper.make_node("DynamicQuantizeLinear", [a], [p + "_a_q", p + "_a_scale", p + "_a_zp"], p + "_dql"),
            helper.make_node("MatMulInteger", [p + "_a_q", p + "_W_q", p + "_a_zp", p + "_W_zp"], [p + "_acc"],
                             p + "_mmi"),
            helper.make_node("Cast", [p + "_acc"], [p + "_accf"], p + "_cast", to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "_a_scale", p + "_W_scale"], [p + "_scale"], p + "_scales"),
            helper.make_node("Mul", [p + "_accf", p + "_scale"], [mm_out], p + "_mul"),
        ]
        if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2]:
            new_nodes.append(helper.make_node("Add", [mm_out, node.input[2]], [out], p + "_bias"))
        done += 1
    used = {i for n in new_nodes for i in n.input}
    kept = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    del g.node[:]
    g.node.extend(new_nodes)
    return done


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: quantize_dynamic.py IN.onnx OUT.onnx")
    model = onnx.load(sys.argv[1])
    n = quantize(model)
    if n == 0:
        sys.exit("quantize_dynamic.py: %s has no MatMul/Gemm with a constant 2-D float B" % sys.argv[1])
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])
    print("%s: %d MatMul/Gemm nodes quantized -> %s" % (sys.argv[1], n, sys.argv[2]))


if __name__ == "__main__":
    main()
