#!/usr/bin/env python3
"""Writes the small models the C API and Python binding tests feed (committed; rerun to regenerate).

strings.onnx  text: string [N] -> same (Identity), upper (StringNormalizer UPPER)
aliases.onnx  x: float [2] -> weights (a constant), passthrough (x itself), relu,
              relu_again (the same value as relu once Identity is removed)
zipmap.onnx   x: float [N,2] -> a 3-class LinearClassifier (SOFTMAX): label int64 [N],
              probabilities float [N,3], and both through ZipMap as skl2onnx writes them:
              output_probability seq(map(int64,float)) (labels 10,20,30) and by_name
              seq(map(string,float)) (labels "cat","dog","eel")
maps.onnx     features: map(string,float) -> row (DictVectorizer, vocabulary age,height,weight);
              sparse: map(int64,float) -> dense (CastMap SPARSE, max_map 4)
sequences.onnx items: seq(tensor(float)) -> count (SequenceLength), same (Identity);
              maybe: optional(tensor(float)) -> has (OptionalHasElement)
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


ML_OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]


def map_type(key):
    """map(key, tensor(float)) (Debian's onnx helper has no make_map_type_proto)."""
    tp = onnx.TypeProto()
    tp.map_type.key_type = key
    tp.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    return tp


def zipmap():
    seq_map = lambda key: helper.make_sequence_type_proto(map_type(key))
    g = helper.make_graph(
        [helper.make_node("LinearClassifier", ["x"], ["label", "probabilities"], domain="ai.onnx.ml",
                          coefficients=[1.0, -1.0, 0.5, 0.5, -1.0, 2.0], intercepts=[0.1, 0.0, -0.2],
                          classlabels_ints=[10, 20, 30], post_transform="SOFTMAX", multi_class=1),
         helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain="ai.onnx.ml",
                          classlabels_int64s=[10, 20, 30]),
         helper.make_node("ZipMap", ["probabilities"], ["by_name"], domain="ai.onnx.ml",
                          classlabels_strings=["cat", "dog", "eel"])],
        "zipmap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 3]),
         helper.make_value_info("output_probability", seq_map(TensorProto.INT64)),
         helper.make_value_info("by_name", seq_map(TensorProto.STRING))])
    save(helper.make_model(g, opset_imports=ML_OPSETS, producer_name="strata-tests"), "zipmap.onnx")


def maps():
    g = helper.make_graph(
        [helper.make_node("DictVectorizer", ["features"], ["row"], domain="ai.onnx.ml",
                          string_vocabulary=["age", "height", "weight"]),
         helper.make_node("CastMap", ["sparse"], ["dense"], domain="ai.onnx.ml", map_form="SPARSE", max_map=4)],
        "maps", [helper.make_value_info("features", map_type(TensorProto.STRING)),
                 helper.make_value_info("sparse", map_type(TensorProto.INT64))],
        [helper.make_tensor_value_info("row", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("dense", TensorProto.FLOAT, [1, 4])])
    save(helper.make_model(g, opset_imports=ML_OPSETS, producer_name="strata-tests"), "maps.onnx")


def sequences():
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    g = helper.make_graph(
        [helper.make_node("SequenceLength", ["items"], ["count"]),
         helper.make_node("Identity", ["items"], ["same"]),
         helper.make_node("OptionalHasElement", ["maybe"], ["has"])],
        "sequences", [helper.make_value_info("items", seq), helper.make_value_info("maybe", opt)],
        [helper.make_tensor_value_info("count", TensorProto.INT64, []),
         helper.make_value_info("same", seq),
         helper.make_tensor_value_info("has", TensorProto.BOOL, [])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="strata-tests"),
         "sequences.onnx")


if __name__ == "__main__":
    strings()
    aliases()
    zipmap()
    maps()
    sequences()
