#!/usr/bin/python3
"""Static int8 quantization of a float model in the QDQ format, the way ONNX Runtime's
quantize_static writes it (QuantFormat.QDQ, activations QUInt8, weights QInt8 per channel):

    x_q = QuantizeLinear(x, x_scale, x_zp)                     # once per quantized tensor
    x'  = DequantizeLinear(x_q, x_scale, x_zp)                 # one per consumer
    W'  = DequantizeLinear(W_q, W_scale[M], 0, axis=0)         # int8, symmetric, per channel
    B'  = DequantizeLinear(B_q, x_scale * W_scale[M], 0)       # int32
    y   = Conv(x', W', B')

Quantized tensors: the input of every Conv and every Conv's output (its Relu's or Clip's output
when that is the Conv's only reader), except graph outputs. Ranges (min/max, asymmetric uint8) come
from one calibration run of the float model on the benchmark input, by `strata run` with those
tensors made graph outputs. python3-onnx and numpy only (no onnxruntime.quantization on Debian).

Transformers: every MatMul with a constant 2-D weight [K, N] (a Linear layer) gets its input and
its output (before the bias Add) quantized, and W' = DequantizeLinear(W_q, W_scale[N], 0, axis=1)
(int8, symmetric, per column): DQ -> MatMul -> Q groups, which ONNX Runtime runs as QLinearMatMul
(as after its quantize_static, which quantizes the Add reading the output too). MatMuls of two
activations (attention scores) and everything else stay float. --linear-inputs-only leaves the
outputs float (ORT's quantize_static with op_types_to_quantize=['MatMul']).

  bench/models/quantize_static.py bench/models/out/resnet18.onnx bench/models/out/resnet18_qdq.onnx \
      bench/models/out/resnet18_input_0.npy [--strata build/release/bin/strata]
  bench/models/quantize_static.py bench/models/out/bert.onnx bench/models/out/bert_qdq.onnx \
      bench/models/out/bert_input_0.npy bench/models/out/bert_input_1.npy   # one .npy per graph input
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def consumers(graph):
    c = {}
    for n in graph.node:
        for i in n.input:
            c.setdefault(i, []).append(n)
    return c


def is_linear(n, inits):
    """A MatMul whose second input is a constant 2-D weight."""
    return n.op_type == "MatMul" and n.input[1] in inits and len(inits[n.input[1]].dims) == 2


def tensors_to_quantize(graph, inits, linear_outputs=False):
    outs = {o.name for o in graph.output}
    cons = consumers(graph)
    names = []
    for n in graph.node:
        if is_linear(n, inits):
            if n.input[0] not in inits:
                names.append(n.input[0])
            if linear_outputs:
                names.append(n.output[0])
            continue
        if n.op_type != "Conv":
            continue
        if n.input[0] not in inits:
            names.append(n.input[0])
        y = n.output[0]
        readers = cons.get(y, [])
        if len(readers) == 1 and readers[0].op_type in ("Relu", "Clip") and y not in outs:
            y = readers[0].output[0]
        names.append(y)
    seen, result = set(), []
    for t in names:
        if t not in seen and t not in outs:
            seen.add(t)
            result.append(t)
    return result


def calibrate(model, names, input_npys, strata):
    """min/max of each tensor in `names` on one run of the float model (one .npy per graph input)."""
    m = onnx.shape_inference.infer_shapes(model)
    g = m.graph
    info = {v.name: v for v in list(g.value_info) + list(g.input)}
    for k, t in enumerate(names):
        g.node.append(helper.make_node("Identity", [t], ["calib_%d" % k], "calib_id_%d" % k))
        out = onnx.ValueInfoProto()
        if t in info:
            out.CopyFrom(info[t])
        else:  # shape inference left it untyped: every quantized tensor is float
            out.type.tensor_type.elem_type = TensorProto.FLOAT
        out.name = "calib_%d" % k
        g.output.append(out)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "calib.onnx")
        onnx.save(m, path)
        init_names = {i.name for i in g.initializer}
        inputs = [i.name for i in g.input if i.name not in init_names]
        if len(inputs) != len(input_npys):
            raise SystemExit("quantize_static.py: the model has %d inputs (%s), %d .npy files given" %
                             (len(inputs), ", ".join(inputs), len(input_npys)))
        cmd = [strata, "run", path, "-o", d, "--opt-level", "1"]
        for name, npy in zip(inputs, input_npys):
            cmd += ["-i", "%s=%s" % (name, npy)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        ranges = {}
        for k, t in enumerate(names):
            a = np.load(os.path.join(d, "calib_%d.npy" % k))
            ranges[t] = (float(a.min()), float(a.max()))
    return ranges


def uint8_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32(max(hi - lo, 1e-8) / 255.0)
    zp = np.uint8(np.clip(np.rint(-lo / scale), 0, 255))
    return scale, zp


def quantize(model, ranges, per_tensor=False):
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    cons = consumers(g)
    new_inits, new_nodes = [], []
    params = {}
    for t, (lo, hi) in ranges.items():
        s, z = uint8_params(lo, hi)
        params[t] = (s, z)
        new_inits += [numpy_helper.from_array(np.array(s, np.float32), t + "_scale"),
                      numpy_helper.from_array(np.array(z, np.uint8), t + "_zp")]
    # Conv weights and biases (the bias scale needs the input's scale).
    weight_nodes = []
    for n in g.node:
        if is_linear(n, inits) and n.input[0] in params:
            w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
            if per_tensor:
                ws = np.float32(max(float(np.abs(w).max()), 1e-12)) / np.float32(127)
                wq = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
            else:
                ws = np.maximum(np.abs(w).max(axis=0), 1e-12).astype(np.float32) / np.float32(127)
                wq = np.clip(np.rint(w / ws.reshape(1, -1)), -127, 127).astype(np.int8)
            p = n.input[1]
            new_inits += [numpy_helper.from_array(wq, p + "_q"), numpy_helper.from_array(np.asarray(ws), p + "_scale"),
                          numpy_helper.from_array(np.zeros(np.shape(ws), np.int8), p + "_zp")]
            weight_nodes.append(helper.make_node("DequantizeLinear", [p + "_q", p + "_scale", p + "_zp"],
                                                 [p + "_dq"], p + "_DequantizeLinear", axis=1))
            n.input[1] = p + "_dq"
            continue
        if n.op_type != "Conv" or n.input[1] not in inits or n.input[0] not in params:
            continue
        w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
        ws = np.maximum(np.abs(w.reshape(w.shape[0], -1)).max(axis=1), 1e-12).astype(np.float32) / np.float32(127)
        wq = np.clip(np.rint(w / ws.reshape(-1, *([1] * (w.ndim - 1)))), -127, 127).astype(np.int8)
        p = n.input[1]
        new_inits += [numpy_helper.from_array(wq, p + "_q"), numpy_helper.from_array(ws, p + "_scale"),
                      numpy_helper.from_array(np.zeros(w.shape[0], np.int8), p + "_zp")]
        weight_nodes.append(helper.make_node("DequantizeLinear", [p + "_q", p + "_scale", p + "_zp"], [p + "_dq"],
                                             p + "_DequantizeLinear", axis=0))
        n.input[1] = p + "_dq"
        if len(n.input) > 2 and n.input[2] in inits:
            b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float32)
            bs = (params[n.input[0]][0] * ws).astype(np.float32)
            bq = np.clip(np.rint(b / bs), -2**31, 2**31 - 1).astype(np.int32)
            q = n.input[2]
            new_inits += [numpy_helper.from_array(bq, q + "_q"), numpy_helper.from_array(bs, q + "_scale"),
                          numpy_helper.from_array(np.zeros(b.shape[0], np.int32), q + "_zp")]
            weight_nodes.append(helper.make_node("DequantizeLinear", [q + "_q", q + "_scale", q + "_zp"],
                                                 [q + "_dq"], q + "_DequantizeLinear", axis=0))
            n.input[2] = q + "_dq"
    # Activations: one QuantizeLinear per tensor, one DequantizeLinear per reader (ORT's layout,
    # which its QDQ fusions expect).
    producer_pos = {o: i for i, n in enumerate(g.node) for o in n.output}
    inserts = {}
    graph_inputs = {i.name for i in g.input}
    for t in ranges:
        qn = helper.make_node("QuantizeLinear", [t, t + "_scale", t + "_zp"], [t + "_q"], t + "_QuantizeLinear")
        chain = [qn]
        for k, reader in enumerate(cons.get(t, [])):
            dq = "%s_dq%d" % (t, k)
            chain.append(helper.make_node("DequantizeLinear", [t + "_q", t + "_scale", t + "_zp"], [dq],
                                          "%s_DequantizeLinear%d" % (t, k)))
            for j, i in enumerate(reader.input):
                if i == t:
                    reader.input[j] = dq
        pos = -1 if t in graph_inputs else producer_pos[t]
        inserts.setdefault(pos, []).extend(chain)
    new_nodes = list(weight_nodes) + inserts.get(-1, [])
    for i, n in enumerate(g.node):
        new_nodes.append(n)
        new_nodes.extend(inserts.get(i, []))
    used = {i for n in new_nodes for i in n.input}
    kept = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(kept + [i for i in new_inits if i.name in used])
    del g.node[:]
    g.node.extend(new_nodes)
    return len(weight_nodes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input_model")
    ap.add_argument("output_model")
    ap.add_argument("calibration_npy", nargs="+", help="the calibration run's inputs, one .npy per graph input")
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--per-tensor-linear", action="store_true",
                    help="one scale per MatMul weight (ORT's per_channel=False) instead of one per column")
    ap.add_argument("--linear-inputs-only", action="store_true",
                    help="quantize a Linear MatMul's input only, not its output (ORT's quantize_static with "
                         "op_types_to_quantize=['MatMul']; its CPU provider then dequantizes W on every run)")
    args = ap.parse_args()
    model = onnx.load(args.input_model)
    if model.opset_import[0].version < 13:
        raise SystemExit("quantize_static.py: per-channel DequantizeLinear needs opset >= 13")
    inits = {i.name: i for i in model.graph.initializer}
    names = tensors_to_quantize(model.graph, inits, not args.linear_inputs_only)
    if not names:
        raise SystemExit("quantize_static.py: %s has no Conv or MatMul with a constant weight" % args.input_model)
    ranges = calibrate(model, names, args.calibration_npy, args.strata)
    n = quantize(model, ranges, args.per_tensor_linear)
    onnx.checker.check_model(model)
    onnx.save(model, args.output_model)
    print("%s: %d tensors and %d weights/biases quantized -> %s" % (args.input_model, len(names), n,
                                                                    args.output_model))


if __name__ == "__main__":
    main()
