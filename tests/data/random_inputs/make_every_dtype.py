#!/usr/bin/env python3
"""Writes every_dtype.onnx: one [64] input of each numeric type strata's `--random` fills
(uint8, int8, uint16, int16, uint32, uint64, int32, int64, float16, bfloat16, double, bool, float),
y = the smallest over the inputs of max |x| (as float). y is 0 when any input was left all zeros.
Run with Debian's python3-onnx: /usr/bin/python3 make_every_dtype.py
"""
import os

import onnx
from onnx import TensorProto as T
from onnx import helper as h

TYPES = [("u8", T.UINT8), ("i8", T.INT8), ("u16", T.UINT16), ("i16", T.INT16), ("u32", T.UINT32),
         ("u64", T.UINT64), ("i32", T.INT32), ("i64", T.INT64), ("f16", T.FLOAT16), ("bf16", T.BFLOAT16),
         ("f64", T.DOUBLE), ("b", T.BOOL), ("f32", T.FLOAT)]
nodes, inputs, maxes = [], [], []
for name, t in TYPES:
    inputs.append(h.make_tensor_value_info(name, t, [64]))
    nodes.append(h.make_node("Cast", [name], [name + "_f"], to=T.FLOAT))
    nodes.append(h.make_node("Abs", [name + "_f"], [name + "_a"]))
    nodes.append(h.make_node("ReduceMax", [name + "_a"], [name + "_m"], keepdims=0))
    maxes.append(name + "_m")
nodes.append(h.make_node("Min", maxes, ["y"]))
graph = h.make_graph(nodes, "every_dtype", inputs, [h.make_tensor_value_info("y", T.FLOAT, [])])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], producer_name="strata-tests")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "every_dtype.onnx"))
