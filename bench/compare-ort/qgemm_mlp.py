#!/usr/bin/python3
"""Writes a QOperator-format MLP: x [ROWS, 784] float -> QuantizeLinear -> three com.microsoft
QGemm (784 -> 1024 -> 1024 -> 10, int8 weights transposed with per-column scales and int32 C,
the first two requantized to uint8, the last with a float output): the benchmark MLP's
architecture as ONNX Runtime's quantizer writes a Gemm in the QOperator format.

  /usr/bin/python3 bench/compare-ort/qgemm_mlp.py ROWS OUT.onnx
  build/release/bin/strata bench OUT.onnx --save-inputs DIR --iters 1
  build/release/bin/strata bench OUT.onnx -t 1 --iters 500 --json
  bench/ort/ort_bench OUT.onnx DIR --threads 1 --iters 500      # (bench/compare-ort/run.sh builds it)
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows, out = int(sys.argv[1]), sys.argv[2]
    rng = np.random.default_rng(1)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(nh.from_array(arr, name))
        return name

    const("xs", np.array(0.05, np.float32))
    const("xz", np.array(128, np.uint8))
    nodes.append(h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q0"]))
    dims = [784, 1024, 1024, 10]
    prev, ps, pz = "q0", "xs", "xz"
    for i in range(3):
        k, n = dims[i], dims[i + 1]
        ins = [prev, ps, pz,
               const(f"w{i}", rng.integers(-127, 127, (n, k)).astype(np.int8)),
               const(f"ws{i}", np.full((n,), 0.002, np.float32)),
               const(f"wz{i}", np.zeros((n,), np.int8)),
               const(f"b{i}", rng.integers(-1000, 1000, (n,)).astype(np.int32))]
        last = i == 2
        if not last:
            ys, yz = const(f"ys{i}", np.array(0.05, np.float32)), const(f"yz{i}", np.array(128, np.uint8))
            ins += [ys, yz]
        y = "y" if last else f"q{i + 1}"
        nodes.append(h.make_node("QGemm", ins, [y], domain="com.microsoft", transB=1))
        if not last:
            prev, ps, pz = y, ys, yz
    graph = h.make_graph(nodes, "qgemm_mlp", [h.make_tensor_value_info("x", T.FLOAT, [rows, 784])],
                         [h.make_tensor_value_info("y", T.FLOAT, [rows, 10])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, out)


if __name__ == "__main__":
    main()
