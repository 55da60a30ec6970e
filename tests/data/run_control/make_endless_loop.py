#!/usr/bin/python3
"""Writes endless_loop.onnx: y = x + (2^63 - 1) * 1, as a Loop of INT64_MAX iterations.

A model that runs for centuries, for the run-deadline and terminate tests
(tests/api/capi_test.cc, tests/cli): only run_timeout_ms or strata_session_terminate_runs
ends it. Run with Debian's python3-onnx: /usr/bin/python3 make_endless_loop.py
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

body = helper.make_graph(
    [helper.make_node("Identity", ["c_in"], ["c_out"], name="keep_going"),
     helper.make_node("Add", ["v_in", "one"], ["v_out"], name="step")],
    "body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])])
graph = helper.make_graph(
    [helper.make_node("Loop", ["M", "cond", "x"], ["y"], name="endless", body=body)],
    "endless_loop",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    initializer=[numpy_helper.from_array(np.array(2**63 - 1, dtype=np.int64), "M"),
                 numpy_helper.from_array(np.array(True), "cond"),
                 numpy_helper.from_array(np.array([1.0], dtype=np.float32), "one")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="strata_tests")
model.ir_version = 8
save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "endless_loop.onnx"))
