#!/usr/bin/env python3
"""Writes the small models the C API and Python binding tests feed (committed; rerun to regenerate).

strings.onnx  text: string [N] -> same (Identity), upper (StringNormalizer UPPER)
aliases.onnx  x: float [2] -> weights (a constant), passthrough (x itself), relu,
              relu_again (the same value as relu once Identity is removed)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))


def strings():
    g = helper.make_graph(
        [helper.make_node("Identity", ["text"], ["same"]),
         helper.make_node("StringNormalizer", ["text"], ["upper"], case_change_action="UPPER")],
        "strings", [helper.make_tensor_value_info("text", TensorProto.STRING, ["N"])],
        [helper.make_tensor_value_info("same", TensorProto.STRING, ["N"]),
         helper.make_tensor_value_info("upper", TensorProto.STRING, ["N"])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="strata-tests"), "strings.onnx")


def aliases():
    w = numpy_helper.from_array(np.array([1.5, -2.5, 3.5], dtype=np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["weights"]),
         helper.make_node("Identity", ["x"], ["passthrough"]),
         helper.make_node("Relu", ["x"], ["relu"]),
         helper.make_node("Identity", ["relu"], ["relu_again"])],
        "aliases", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("weights", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("passthrough", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("relu", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("relu_again", TensorProto.FLOAT, [2])], [w])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="strata-tests"), "aliases.onnx")


if __name__ == "__main__":
    strings()
    aliases()
