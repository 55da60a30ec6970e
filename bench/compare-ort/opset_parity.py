#!/usr/bin/python3
"""ORT parity of ai.onnx opsets 18-23: strata against ONNX Runtime 1.30 on the ops that changed
in those opsets (Reduce* axes inputs, Split num_outputs, Pad axes and wrap, Resize axes,
keep_aspect_ratio_policy, antialias and half_pixel_symmetric, Bitwise*, Mish,
GroupNormalization 18 and 21, LpPool ceil_mode, AveragePool dilations, Gelu, DFT's axis input,
blocked QuantizeLinear / DequantizeLinear and output_dtype, the Optional ops on plain tensors,
type-only bumps) and the new ops (Col2Im, CenterCropPad, DeformConv, AffineGrid, the string
ops, RMSNormalization, RotaryEmbedding), each model stamped with the opset and IR version a
current exporter writes (IR 8 for opset 18, 9 for 19-20, 10 for 21-22, 11 for 23).

Each model runs once in strata (its Python binding, from the build tree) and once in ONNX
Runtime (onnxruntime-node through ort_run.js), 1 thread, on the same seeded inputs. Floats
must agree within --tol (max |strata - ort| / max(|ort|, 1)), integers and booleans exactly.
A case marked `refuse` (none now) is one strata refuses by name: it passes when strata's
error names the op or attribute and ONNX Runtime runs it.

  /usr/bin/python3 bench/compare-ort/opset_parity.py [--cases a,b] [--tol 1e-5] [--markdown FILE]

Needs the release build and bench/ort (bash bench/compare-ort/run.sh --quick installs it).
Exit status 1 when a case differs.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "build", "release", "lib", "python3", "dist-packages"))

import strata  # noqa: E402
from ml_parity import run_ort  # noqa: E402  (onnxruntime-node through ort_run.js)

IR_FOR_OPSET = {18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11}
ONNX_OF = {np.object_: T.STRING, np.float16: T.FLOAT16, np.float32: T.FLOAT, np.float64: T.DOUBLE, np.int64: T.INT64, np.int32: T.INT32, np.bool_: T.BOOL,
           np.uint8: T.UINT8, np.int8: T.INT8}

CASES = {}


class Case:
    def __init__(self, name, opset, nodes, feeds, outputs, inits=(), refuse=None):
        self.name, self.opset, self.nodes, self.feeds = name, opset, nodes, feeds
        self.outputs, self.inits, self.refuse = outputs, list(inits), refuse

    def model(self, out_types=None):
        """Outputs untyped (ONNX Runtime accepts that), or typed from `out_types` {name: array}
        with the arrays' element types and ranks (dims left unknown), as libonnx's checker wants."""
        ins = [helper.make_tensor_value_info(k, ONNX_OF[v.dtype.type], list(v.shape)) for k, v in self.feeds.items()]
        if out_types is None:
            outs = [helper.make_value_info(o, onnx.TypeProto()) for o in self.outputs]
        else:
            outs = [helper.make_tensor_value_info(o, ONNX_OF[out_types[o].dtype.type], [None] * out_types[o].ndim)
                    for o in self.outputs]
        g = helper.make_graph(self.nodes, self.name, ins, outs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="opset_parity")
        m.ir_version = IR_FOR_OPSET[self.opset]
        return m


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def rng(name):
    return np.random.default_rng(sum(map(ord, name)))


def f32(r, *shape):
    return r.standard_normal(shape).astype(np.float32)


def const(name, values, dtype=T.INT64, shape=None):
    a = np.asarray(values)
    return helper.make_tensor(name, dtype, list(a.shape) if shape is None else shape, a.reshape(-1).tolist())


def one(name, opset, op, feeds, n_out=1, inputs=None, inits=(), refuse=None, **attrs):
    ins = list(feeds) if inputs is None else inputs
    outs = ["Y"] if n_out == 1 else ["Y%d" % i for i in range(n_out)]
    return Case(name, opset, [helper.make_node(op, ins, outs, **attrs)], feeds, outs, inits, refuse)


# ---------------------------------------------------------------- opset 18

@case
def reduce_axes_inputs():
    r = rng("reduce")
    x = {"X": f32(r, 3, 4, 5)}
    nodes, outs = [], []
    for i, (op, axes, keep) in enumerate([("ReduceMean", [1], 1), ("ReduceMax", [-1], 0), ("ReduceMin", [0, 2], 1),
                                          ("ReduceProd", [2], 0), ("ReduceL1", [1], 1), ("ReduceL2", [-2, -1], 0),
                                          ("ReduceSumSquare", [0], 1), ("ReduceLogSumExp", [2], 1)]):
        nodes.append(helper.make_node(op, ["X", "axes%d" % i], ["Y%d" % i], keepdims=keep))
        outs.append("Y%d" % i)
    inits = [const("axes%d" % i, a) for i, (_, a, _) in enumerate([(0, [1], 0), (0, [-1], 0), (0, [0, 2], 0),
                                                                     (0, [2], 0), (0, [1], 0), (0, [-2, -1], 0),
                                                                     (0, [0], 0), (0, [2], 0)])]
    return Case("reduce_axes_inputs", 18, nodes, x, outs, inits)


@case
def reduce_no_axes():
    r = rng("reduce_all")
    x = {"X": np.abs(f32(r, 2, 3, 4)) + 0.5}
    nodes = [helper.make_node("ReduceLogSum", ["X"], ["Y0"], keepdims=0),
             helper.make_node("ReduceMean", ["X", "empty"], ["Y1"], noop_with_empty_axes=1),
             helper.make_node("ReduceMax", ["X", "empty"], ["Y2"], noop_with_empty_axes=0)]
    return Case("reduce_no_axes", 18, nodes, x, ["Y0", "Y1", "Y2"], [const("empty", [], shape=[0])])


@case
def split_num_outputs_uneven():
    return one("split_num_outputs_uneven", 18, "Split", {"X": f32(rng("split"), 7, 4)}, n_out=3, axis=0,
               num_outputs=3)


@case
def split_num_outputs_last_axis():
    return one("split_num_outputs_last_axis", 18, "Split", {"X": f32(rng("split2"), 2, 3, 8)}, n_out=4, axis=-1,
               num_outputs=4)


@case
def pad_axes_constant():
    return one("pad_axes_constant", 18, "Pad", {"X": f32(rng("pad"), 2, 3, 4)}, inputs=["X", "pads", "cv", "axes"],
               inits=[const("pads", [1, 2, 0, 3]), helper.make_tensor("cv", T.FLOAT, [], [1.5]),
                      const("axes", [1, -1])], mode="constant")


@case
def pad_axes_reflect():
    return one("pad_axes_reflect", 18, "Pad", {"X": f32(rng("padr"), 1, 2, 5, 6)}, inputs=["X", "pads", "", "axes"],
               inits=[const("pads", [2, 1, 1, 3]), const("axes", [2, 3])], mode="reflect")


@case
def resize_axes_linear():
    return one("resize_axes_linear", 18, "Resize", {"X": f32(rng("rs"), 1, 2, 5, 7)}, inputs=["X", "", "scales"],
               inits=[helper.make_tensor("scales", T.FLOAT, [2], [1.6, 0.5])], axes=[2, 3], mode="linear")


@case
def resize_axes_sizes_cubic():
    return one("resize_axes_sizes_cubic", 18, "Resize", {"X": f32(rng("rs2"), 1, 2, 6, 6)},
               inputs=["X", "", "", "sizes"], inits=[const("sizes", [9, 4])], axes=[-1, -2], mode="cubic")


@case
def resize_not_larger():
    return one("resize_not_larger", 18, "Resize", {"X": f32(rng("rs3"), 1, 1, 6, 9)}, inputs=["X", "", "", "sizes"],
               inits=[const("sizes", [10, 10])], axes=[2, 3], mode="linear", keep_aspect_ratio_policy="not_larger")


@case
def resize_not_smaller():
    return one("resize_not_smaller", 18, "Resize", {"X": f32(rng("rs4"), 1, 1, 6, 9)},
               inputs=["X", "", "", "sizes"], inits=[const("sizes", [1, 1, 4, 4])], mode="nearest",
               keep_aspect_ratio_policy="not_smaller")


@case
def resize_antialias_linear():
    return one("resize_antialias_linear", 18, "Resize", {"X": f32(rng("rs5"), 1, 2, 9, 11)}, inputs=["X", "", "scales"],
               inits=[helper.make_tensor("scales", T.FLOAT, [4], [1, 1, 0.5, 0.3])], mode="linear", antialias=1)


@case
def resize_antialias_cubic_sizes():
    return one("resize_antialias_cubic_sizes", 18, "Resize", {"X": f32(rng("rs6"), 1, 1, 13, 10)},
               inputs=["X", "", "", "sizes"], inits=[const("sizes", [1, 1, 5, 4])], mode="cubic", antialias=1,
               cubic_coeff_a=-0.5)


@case
def resize_antialias_exclude_outside():
    return one("resize_antialias_exclude_outside", 19, "Resize", {"X": f32(rng("rs7"), 1, 1, 16, 16)},
               inputs=["X", "", "scales"], inits=[helper.make_tensor("scales", T.FLOAT, [4], [1, 1, 0.4, 0.25])],
               mode="cubic", antialias=1, exclude_outside=1, coordinate_transformation_mode="half_pixel_symmetric")


@case
def resize_antialias_upsample():
    return one("resize_antialias_upsample", 18, "Resize", {"X": f32(rng("rs8"), 1, 1, 4, 5)},
               inputs=["X", "", "scales"], inits=[helper.make_tensor("scales", T.FLOAT, [4], [1, 1, 2.5, 0.6])],
               mode="linear", antialias=1, coordinate_transformation_mode="align_corners")
    # (0.6: 5 * 0.6 is a whole length. align_corners with a fractional scale * length is the
    # one place strata follows the ONNX test data's unrounded length and ORT does not.)


@case
def scatter_elements_max_min():
    r = rng("scat")
    data = f32(r, 3, 4)
    idx = np.array([[0, 1, 0, 2], [2, 2, 1, 0]], np.int64)
    upd = f32(r, 2, 4)
    return Case("scatter_elements_max_min", 18,
                [helper.make_node("ScatterElements", ["D", "I", "U"], ["Y0"], axis=0, reduction="max"),
                 helper.make_node("ScatterElements", ["D", "I", "U"], ["Y1"], axis=0, reduction="min")],
                {"D": data, "I": idx, "U": upd}, ["Y0", "Y1"])


@case
def scatter_nd_max():
    r = rng("scatnd")
    return one("scatter_nd_max", 18, "ScatterND",
               {"D": f32(r, 4, 3), "I": np.array([[1], [3], [1]], np.int64), "U": f32(r, 3, 3)}, reduction="max")


@case
def bitwise_int32_broadcast():
    r = rng("bit")
    a = r.integers(-1000, 1000, (3, 4)).astype(np.int32)
    b = r.integers(-1000, 1000, (4,)).astype(np.int32)
    return Case("bitwise_int32_broadcast", 18,
                [helper.make_node("BitwiseAnd", ["A", "B"], ["Y0"]), helper.make_node("BitwiseOr", ["A", "B"], ["Y1"]),
                 helper.make_node("BitwiseXor", ["A", "B"], ["Y2"]), helper.make_node("BitwiseNot", ["A"], ["Y3"])],
                {"A": a, "B": b}, ["Y0", "Y1", "Y2", "Y3"])


@case
def bitwise_uint8():
    r = rng("bitu8")
    return one("bitwise_uint8", 18, "BitwiseXor", {"A": r.integers(0, 256, (5, 3)).astype(np.uint8),
                                                   "B": r.integers(0, 256, (1, 3)).astype(np.uint8)})


@case
def mish():
    return one("mish", 18, "Mish", {"X": f32(rng("mish"), 4, 33) * 4})


@case
def group_norm_18():
    r = rng("gn18")
    return one("group_norm_18", 18, "GroupNormalization", {"X": f32(r, 2, 6, 3, 5)}, inputs=["X", "s", "b"],
               inits=[helper.make_tensor("s", T.FLOAT, [3], [0.5, 1.5, -1.0]),
                      helper.make_tensor("b", T.FLOAT, [3], [0.1, -0.2, 0.3])], num_groups=3, epsilon=1e-3)


@case
def lppool_ceil_dilations():
    return one("lppool_ceil_dilations", 18, "LpPool", {"X": f32(rng("lp"), 1, 2, 9, 9)}, kernel_shape=[3, 3],
               strides=[2, 2], ceil_mode=1, dilations=[1, 2], p=2)


@case
def optional_plain_tensor():
    x = {"X": f32(rng("opt"), 2, 3)}
    return Case("optional_plain_tensor", 18,
                [helper.make_node("OptionalHasElement", ["X"], ["Y0"]),
                 helper.make_node("OptionalGetElement", ["X"], ["Y1"])], x, ["Y0", "Y1"])


@case
def col2im_2d():
    r = rng("c2i")
    # image 5x6, block 2x3, dilation 1x2, pads, stride 1x2: blocks (5+1+0-2)/1+1 = 5 by (6+1+1-5)/2+1 = 2
    return one("col2im_2d", 18, "Col2Im", {"X": f32(r, 2, 3 * 6, 10)}, inputs=["X", "img", "blk"],
               inits=[const("img", [5, 6]), const("blk", [2, 3])], dilations=[1, 2], pads=[1, 1, 0, 1],
               strides=[1, 2])


@case
def col2im_1d():
    return one("col2im_1d", 18, "Col2Im", {"X": f32(rng("c2i1"), 1, 4, 7)}, inputs=["X", "img", "blk"],
               inits=[const("img", [10]), const("blk", [4])])


@case
def center_crop_pad():
    r = rng("ccp")
    return Case("center_crop_pad", 18,
                [helper.make_node("CenterCropPad", ["X", "s0"], ["Y0"]),
                 helper.make_node("CenterCropPad", ["X", "s1"], ["Y1"], axes=[-1, 1])],
                {"X": f32(r, 2, 5, 4)}, ["Y0", "Y1"], [const("s0", [3, 2, 7]), const("s1", [7, 2])])


# ---------------------------------------------------------------- opset 19

@case
def average_pool_dilations():
    return one("average_pool_dilations", 19, "AveragePool", {"X": f32(rng("ap"), 1, 3, 10, 10)},
               kernel_shape=[3, 3], dilations=[2, 2], strides=[1, 2], pads=[1, 1, 1, 1], count_include_pad=0)


@case
def resize_half_pixel_symmetric():
    return one("resize_half_pixel_symmetric", 19, "Resize", {"X": f32(rng("hps"), 1, 2, 5, 7)},
               inputs=["X", "", "scales"], inits=[helper.make_tensor("scales", T.FLOAT, [4], [1, 1, 1.7, 0.6])],
               mode="linear", coordinate_transformation_mode="half_pixel_symmetric")


@case
def pad_wrap():
    return one("pad_wrap", 19, "Pad", {"X": f32(rng("wrap"), 2, 3, 4)}, inputs=["X", "pads"],
               inits=[const("pads", [0, 1, 2, 0, 2, 1])], mode="wrap")


@case
def cast_family_19():
    r = rng("cast")
    x = f32(r, 3, 4) * 100
    return Case("cast_family_19", 19,
                [helper.make_node("Cast", ["X"], ["Y0"], to=T.INT32),
                 helper.make_node("CastLike", ["X", "D"], ["Y1"]),
                 helper.make_node("Equal", ["Y0", "Y0"], ["Y2"]),
                 helper.make_node("Shape", ["X"], ["Y3"], start=1),
                 helper.make_node("Size", ["X"], ["Y4"]),
                 helper.make_node("Reshape", ["X", "shp"], ["Y5"]),
                 helper.make_node("Identity", ["X"], ["Y6"])],
                {"X": x, "D": np.zeros((1,), np.float64)}, ["Y%d" % i for i in range(7)], [const("shp", [4, -1])])


@case
def quantize_per_axis_19():
    r = rng("q19")
    return Case("quantize_per_axis_19", 19,
                [helper.make_node("QuantizeLinear", ["X", "s", "z"], ["Y0"], axis=1),
                 helper.make_node("DequantizeLinear", ["Y0", "s", "z"], ["Y1"], axis=1)],
                {"X": f32(r, 2, 3, 4) * 3}, ["Y0", "Y1"],
                [helper.make_tensor("s", T.FLOAT, [3], [0.02, 0.05, 0.1]), helper.make_tensor("z", T.INT8, [3], [0, -3, 5])])


@case
def deform_conv_v2_groups():
    r = rng("dcv2")
    n, c, h, w, oc, k = 2, 4, 7, 8, 6, 3
    return one("deform_conv_v2_groups", 19, "DeformConv",
               {"X": f32(r, n, c, h, w), "W": f32(r, oc, c // 2, k, k), "O": f32(r, n, 2 * 2 * k * k, 7, 4) * 1.5,
                "B": f32(r, oc), "M": np.abs(f32(r, n, 2 * k * k, 7, 4))},
               group=2, offset_group=2, pads=[1, 1, 1, 1], strides=[1, 2])


@case
def deform_conv_v1_dilated_22():
    r = rng("dcv1")
    return one("deform_conv_v1_dilated_22", 22, "DeformConv",
               {"X": f32(r, 1, 3, 9, 9), "W": f32(r, 2, 3, 2, 3), "O": f32(r, 1, 2 * 6, 7, 5) * 3},
               dilations=[2, 2], kernel_shape=[2, 3])


@case
def dequantize_float16_scale_19():
    r = rng("dq16")
    return one("dequantize_float16_scale_19", 19, "DequantizeLinear",
               {"X": r.integers(-128, 127, (3, 4)).astype(np.int8)}, inputs=["X", "s", "z"],
               inits=[helper.make_tensor("s", T.FLOAT16, [4], [0.5, 0.25, 0.125, 2.0]),
                      helper.make_tensor("z", T.INT8, [4], [0, 1, -2, 3])], axis=1)


# ---------------------------------------------------------------- opset 20

@case
def gelu_none_and_tanh():
    x = {"X": f32(rng("gelu"), 3, 40) * 3}
    return Case("gelu_none_and_tanh", 20, [helper.make_node("Gelu", ["X"], ["Y0"]),
                                           helper.make_node("Gelu", ["X"], ["Y1"], approximate="tanh")], x, ["Y0", "Y1"])


@case
def dft_axis_input():
    r = rng("dft")
    return Case("dft_axis_input", 20,
                [helper.make_node("DFT", ["X", "", "ax"], ["Y0"]),
                 helper.make_node("DFT", ["X"], ["Y1"], onesided=1),
                 helper.make_node("DFT", ["X", "len"], ["Y2"], inverse=1)],
                {"X": f32(r, 2, 8, 6, 1)}, ["Y0", "Y1", "Y2"],
                [helper.make_tensor("ax", T.INT64, [], [1]), helper.make_tensor("len", T.INT64, [], [10])])


@case
def type_bumps_20():
    r = rng("t20")
    x = f32(r, 3, 4)
    x[0, 1], x[1, 2], x[2, 0] = np.inf, np.nan, -np.inf
    return Case("type_bumps_20", 20,
                [helper.make_node("IsInf", ["X"], ["Y0"]), helper.make_node("IsNaN", ["X"], ["Y1"]),
                 helper.make_node("ConstantOfShape", ["shp"], ["Y2"],
                                  value=helper.make_tensor("v", T.FLOAT, [1], [2.5])),
                 helper.make_node("ReduceMax", ["Z", "ax"], ["Y3"], keepdims=0),
                 helper.make_node("ReduceMin", ["Z", "ax"], ["Y4"], keepdims=1)],
                {"X": x, "Z": f32(r, 4, 5)}, ["Y%d" % i for i in range(5)], [const("shp", [2, 3]), const("ax", [1])])


@case
def grid_sample_20():
    r = rng("gs")
    return one("grid_sample_20", 20, "GridSample", {"X": f32(r, 1, 2, 5, 6), "G": f32(r, 1, 4, 3, 2) * 0.9},
               mode="linear", padding_mode="border", align_corners=0)


@case
def affine_grid_2d():
    r = rng("ag2")
    return Case("affine_grid_2d", 20,
                [helper.make_node("AffineGrid", ["T", "S"], ["Y0"], align_corners=0),
                 helper.make_node("AffineGrid", ["T", "S"], ["Y1"], align_corners=1)],
                {"T": f32(r, 2, 2, 3)}, ["Y0", "Y1"], [const("S", [2, 3, 4, 5])])


@case
def affine_grid_3d():
    return one("affine_grid_3d", 20, "AffineGrid", {"T": f32(rng("ag3"), 1, 3, 4)}, inputs=["T", "S"],
               inits=[const("S", [1, 1, 3, 2, 4])], align_corners=1)


def strings(*v):
    return np.array(v, dtype=object)


@case
def string_ops_20():
    x = strings(["a,b,,c", "  lead and trail  ", ""], ["x", "no-delim", "a,b"]).reshape(2, 3)
    nodes = [helper.make_node("StringSplit", ["X"], ["Y0", "Y1"], delimiter=","),
             helper.make_node("StringSplit", ["X"], ["Y2", "Y3"]),
             helper.make_node("StringSplit", ["X"], ["Y4", "Y5"], delimiter=",", maxsplit=1),
             helper.make_node("StringSplit", ["X"], ["Y6", "Y7"], maxsplit=1),
             helper.make_node("StringConcat", ["X", "suffix"], ["Y8"]),
             helper.make_node("RegexFullMatch", ["X"], ["Y9"], pattern=r"[a-z,]+"),
             helper.make_node("RegexFullMatch", ["X"], ["Y10"], pattern=r"\s*\pL+(\s+\pL+)*\s*")]
    return Case("string_ops_20", 20, nodes, {"X": x, "suffix": strings("!", "?", ".")},
                ["Y%d" % i for i in range(11)])


# ---------------------------------------------------------------- opset 21

@case
def group_norm_21_per_channel():
    r = rng("gn21")
    return one("group_norm_21_per_channel", 21, "GroupNormalization", {"X": f32(r, 2, 6, 4, 3)},
               inputs=["X", "s", "b"], inits=[helper.make_tensor("s", T.FLOAT, [6], (f32(r, 6)).tolist()),
                                              helper.make_tensor("b", T.FLOAT, [6], (f32(r, 6)).tolist())],
               num_groups=2, epsilon=1e-5, stash_type=1)


@case
def quantize_blocked_21():
    r = rng("qb")
    scale = np.abs(f32(r, 2, 3)) * 0.05 + 0.01
    zp = r.integers(-5, 5, (2, 3)).astype(np.int8)
    return Case("quantize_blocked_21", 21,
                [helper.make_node("QuantizeLinear", ["X", "s", "z"], ["Y0"], axis=1, block_size=2),
                 helper.make_node("DequantizeLinear", ["Y0", "s", "z"], ["Y1"], axis=1, block_size=2)],
                {"X": f32(r, 2, 6) * 2}, ["Y0", "Y1"],
                [helper.make_tensor("s", T.FLOAT, [2, 3], scale.reshape(-1).tolist()),
                 helper.make_tensor("z", T.INT8, [2, 3], zp.reshape(-1).tolist())])


@case
def quantize_blocked_uneven_21():
    r = rng("qbu")
    scale = np.abs(f32(r, 3, 2, 4)) * 0.05 + 0.01
    return Case("quantize_blocked_uneven_21", 21,
                [helper.make_node("QuantizeLinear", ["X", "s"], ["Y0"], axis=1, block_size=3, output_dtype=T.INT8),
                 helper.make_node("DequantizeLinear", ["Y0", "s"], ["Y1"], axis=1, block_size=3)],
                {"X": f32(r, 3, 5, 4)}, ["Y0", "Y1"], [helper.make_tensor("s", T.FLOAT, [3, 2, 4], scale.reshape(-1).tolist())])


@case
def shape_ops_21():
    r = rng("s21")
    return Case("shape_ops_21", 21,
                [helper.make_node("Flatten", ["X"], ["f"], axis=2),
                 helper.make_node("Unsqueeze", ["f", "a0"], ["u"]),
                 helper.make_node("Transpose", ["u"], ["t"], perm=[2, 0, 1]),
                 helper.make_node("Squeeze", ["t", "a1"], ["Y0"]),
                 helper.make_node("Pad", ["X", "pads"], ["Y1"], mode="edge")],
                {"X": f32(r, 2, 3, 4, 1)}, ["Y0", "Y1"],
                [const("a0", [1]), const("a1", [2]), const("pads", [0, 0, 1, 0, 0, 0, 1, 0])])


# ---------------------------------------------------------------- opset 22

@case
def cnn_ops_22():
    r = rng("c22")
    x = {"X": f32(r, 1, 3, 12, 12)}
    return Case("cnn_ops_22", 22,
                [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("HardSwish", ["c"], ["h"]),
                 helper.make_node("MaxPool", ["h"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
                 helper.make_node("InstanceNormalization", ["m", "s", "b"], ["n"]),
                 helper.make_node("Elu", ["n"], ["e"], alpha=0.7),
                 helper.make_node("GlobalAveragePool", ["e"], ["Y0"]),
                 helper.make_node("Softplus", ["n"], ["Y1"]),
                 helper.make_node("Round", ["n"], ["Y2"])],
                x, ["Y0", "Y1", "Y2"],
                [helper.make_tensor("W", T.FLOAT, [4, 3, 3, 3], f32(r, 4, 3, 3, 3).reshape(-1).tolist()),
                 helper.make_tensor("B", T.FLOAT, [4], f32(r, 4).tolist()),
                 helper.make_tensor("s", T.FLOAT, [4], [1, 0.5, 2, -1]), helper.make_tensor("b", T.FLOAT, [4], [0, 1, 0, 1])])


@case
def lstm_22():
    r = rng("lstm22")
    h = 5
    return one("lstm_22", 22, "LSTM", {"X": f32(r, 4, 2, 3)}, inputs=["X", "W", "R"], n_out=1,
               inits=[helper.make_tensor("W", T.FLOAT, [1, 4 * h, 3], (f32(r, 4 * h, 3) * 0.5).reshape(-1).tolist()),
                      helper.make_tensor("R", T.FLOAT, [1, 4 * h, h], (f32(r, 4 * h, h) * 0.5).reshape(-1).tolist())],
               hidden_size=h)


# ---------------------------------------------------------------- opset 23

@case
def rms_normalization_23():
    r = rng("rms")
    return Case("rms_normalization_23", 23,
                [helper.make_node("RMSNormalization", ["X", "s"], ["Y0"], epsilon=1e-4),
                 helper.make_node("RMSNormalization", ["X", "s2"], ["Y1"], axis=1)],
                {"X": f32(r, 2, 3, 8)}, ["Y0", "Y1"],
                [helper.make_tensor("s", T.FLOAT, [8], f32(r, 8).tolist()),
                 helper.make_tensor("s2", T.FLOAT, [3, 8], f32(r, 3, 8).reshape(-1).tolist())])


@case
def rotary_embedding_23():
    r = rng("rope")
    b, s, n, h, maxp = 2, 5, 3, 8, 16
    pos = r.integers(0, maxp, (b, s)).astype(np.int64)
    x3 = f32(r, b, s, n * h)
    x4 = f32(r, b, n, s, h)
    return Case("rotary_embedding_23", 23,
                [helper.make_node("RotaryEmbedding", ["X3", "cos", "sin", "P"], ["Y0"], num_heads=n),
                 helper.make_node("RotaryEmbedding", ["X3", "cos", "sin", "P"], ["Y1"], num_heads=n, interleaved=1),
                 helper.make_node("RotaryEmbedding", ["X4", "cos2", "sin2", "P"], ["Y2"], rotary_embedding_dim=4),
                 helper.make_node("RotaryEmbedding", ["X4", "cosb", "sinb"], ["Y3"])],
                {"X3": x3, "X4": x4, "P": pos}, ["Y0", "Y1", "Y2", "Y3"],
                [helper.make_tensor("cos", T.FLOAT, [maxp, h // 2], f32(r, maxp, h // 2).reshape(-1).tolist()),
                 helper.make_tensor("sin", T.FLOAT, [maxp, h // 2], f32(r, maxp, h // 2).reshape(-1).tolist()),
                 helper.make_tensor("cos2", T.FLOAT, [maxp, 2], f32(r, maxp, 2).reshape(-1).tolist()),
                 helper.make_tensor("sin2", T.FLOAT, [maxp, 2], f32(r, maxp, 2).reshape(-1).tolist()),
                 helper.make_tensor("cosb", T.FLOAT, [b, s, h // 2], f32(r, b, s, h // 2).reshape(-1).tolist()),
                 helper.make_tensor("sinb", T.FLOAT, [b, s, h // 2], f32(r, b, s, h // 2).reshape(-1).tolist())])


@case
def type_bumps_23():
    r = rng("t23")
    return Case("type_bumps_23", 23,
                [helper.make_node("Cast", ["X"], ["c"], to=T.DOUBLE),
                 helper.make_node("Flatten", ["c"], ["f"], axis=1),
                 helper.make_node("Unsqueeze", ["f", "a0"], ["u"]),
                 helper.make_node("Transpose", ["u"], ["t"], perm=[1, 0, 2]),
                 helper.make_node("Squeeze", ["t", "a1"], ["Y0"]),
                 helper.make_node("Pad", ["X", "pads"], ["Y1"], mode="reflect"),
                 helper.make_node("QuantizeLinear", ["X", "qs"], ["q"]),
                 helper.make_node("DequantizeLinear", ["q", "qs"], ["Y2"])],
                {"X": f32(r, 2, 3, 4)}, ["Y0", "Y1", "Y2"],
                [const("a0", [0]), const("a1", [1]), const("pads", [0, 1, 1, 0, 1, 2]),
                 helper.make_tensor("qs", T.FLOAT, [], [0.02])])


# ---------------------------------------------------------------- runner

def compare(a, b):
    if a.shape != b.shape:
        return False, float("inf"), "shape %s vs ORT %s" % (a.shape, b.shape)
    if a.dtype != b.dtype:
        return False, float("inf"), "dtype %s vs ORT %s" % (a.dtype, b.dtype)
    if a.dtype.kind == "f":
        if a.size == 0:
            return True, 0.0, ""
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not np.array_equal(np.isnan(a64), np.isnan(b64)):
            return False, float("inf"), "NaN positions differ"
        a64, b64 = np.nan_to_num(a64), np.nan_to_num(b64)
        return True, float(np.max(np.abs(a64 - b64)) / max(float(np.max(np.abs(b64))), 1.0)), ""
    bad = int(np.sum(a.reshape(-1) != b.reshape(-1)))
    return bad == 0, float(bad), "" if bad == 0 else "%d elements differ" % bad


def run_case(c, work, tol):
    # ONNX Runtime first, on untyped outputs; its output types then declare strata's.
    path = os.path.join(work, c.name + ".onnx")
    onnx.save(c.model(), path)
    ref = run_ort(path, c.feeds, work)
    if not isinstance(ref, str):
        onnx.save(c.model(ref), path)
    try:
        s = strata.Session(path, threads=1)
        got = dict(zip([o.name for o in s.outputs], s.run(None, c.feeds)))
    except strata.Error as e:
        got = "%s: %s" % (type(e).__name__, str(e).replace(path + ": ", ""))
    if c.refuse:
        ok = isinstance(got, str) and c.refuse in got and not isinstance(ref, str)
        return ok, 0.0, "strata refuses (%s); ORT %s" % (got if isinstance(got, str) else "ran!",
                                                          "ran" if not isinstance(ref, str) else "refused: " + ref)
    if isinstance(got, str) or isinstance(ref, str):
        return False, float("inf"), "strata: %s; ORT: %s" % (got if isinstance(got, str) else "ran",
                                                               ref if isinstance(ref, str) else "ran")
    worst, notes, ok = 0.0, [], True
    for name in c.outputs:
        good, diff, note = compare(np.asarray(got[name]), ref[name])
        if np.asarray(got[name]).dtype.kind == "f":
            good = good and diff <= tol
            worst = max(worst, diff)
        ok &= good
        if note:
            notes.append("%s: %s" % (name, note))
    return ok, worst, "; ".join(notes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "opset-parity"))
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--markdown", help="also write the result table to this file")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    names = args.cases.split(",") if args.cases else list(CASES)
    rows, failed = [], False
    for name in names:
        if name not in CASES:
            sys.exit("opset_parity: no case %r (cases: %s)" % (name, ", ".join(CASES)))
        c = CASES[name]()
        ok, worst, note = run_case(c, args.work, args.tol)
        failed |= not ok
        ops = ", ".join(sorted({n.op_type for n in c.nodes}))
        rows.append((name, c.opset, ops, worst, ok, note))
        print("%-30s opset %d  max rel diff %9.3g  %s  %s" % (name, c.opset, worst, "ok" if ok else "FAIL", note),
              flush=True)
    table = ["| case | opset | ops | max rel. diff | agree | note |", "| --- | --- | --- | --- | --- | --- |"]
    for name, opset, ops, worst, ok, note in rows:
        table.append("| %s | %d | %s | %.2g | %s | %s |" % (name, opset, ops, worst, "yes" if ok else "**no**",
                                                            note.replace("|", "/")))
    print("\n%d of %d cases agree" % (sum(r[4] for r in rows), len(rows)))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
