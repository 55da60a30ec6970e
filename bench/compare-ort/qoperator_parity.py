#!/usr/bin/python3
"""ORT parity of the QOperator-format contrib ops (com.microsoft QLinear*, QGemm).

ONNX Runtime defines these ops (its quantizer writes them with quant_format=QOperator, and
ONNX Model Zoo's int8 models use them), so its CPU kernels are the reference. For each case
this builds a small model, float inputs -> QuantizeLinear -> the op(s) -> DequantizeLinear
(float outputs, so ort_bench --save-outputs can write them), runs it in strata (`strata run
-o`) and in ONNX Runtime 1.30 (ort_bench) on the same seeded inputs, and compares the outputs
in steps of the output's scale: the bytes should be identical (`--tol-steps 0`), except
where a case allows more (a transcendental function whose float rounding may differ by one
step).

  /usr/bin/python3 bench/compare-ort/qoperator_parity.py [--strata PATH] [--ort-bench PATH]
      [--work DIR] [--cases a,b] [--markdown FILE]

Exit status 1 when any case differs by more than it allows.
"""
import argparse
import os
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbits_parity import ROOT, build_ort_bench, run_strata_and_ort  # noqa: E402

U8, I8 = TensorProto.UINT8, TensorProto.INT8
NP = {U8: np.uint8, I8: np.int8}


class Builder:
    """One model: float inputs quantized in the graph, float outputs dequantized."""

    def __init__(self, seed):
        self.nodes, self.inits, self.inputs, self.outputs, self.feeds = [], [], [], [], {}
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def name(self, p):
        self.n += 1
        return "%s_%d" % (p, self.n)

    def const(self, value, dtype=None, name=None):
        arr = np.array(value, dtype=dtype) if dtype is not None else np.array(value)
        name = name or self.name("c")
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def scale(self, v):
        return self.const(np.float32(v))

    def zp(self, v, t):
        return self.const(NP[t](v))

    def qinput(self, shape, t, scale, zp, lo=-4.0, hi=4.0):
        """A float input (uniform in [lo, hi]) quantized to t: returns (q, scale, zp) names."""
        x = self.name("x")
        self.inputs.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, list(shape)))
        self.feeds[x] = self.rng.uniform(lo, hi, size=shape).astype(np.float32)
        s, z = self.scale(scale), self.zp(zp, t)
        q = self.name("q")
        self.nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [q]))
        return q, s, z

    def node(self, op, ins, n_out=1, ms=True, **attrs):
        outs = [self.name(op) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, domain="com.microsoft" if ms else "", **attrs))
        return outs[0] if n_out == 1 else outs

    def output(self, q, shape, s=None, z=None):
        """Dequantizes q (when s is given) into a float graph output of `shape` (the ONNX checker
        wants the main graph's outputs typed; dims may be names)."""
        y = self.name("y")
        if s is None:
            self.nodes.append(helper.make_node("Identity", [q], [y]))
        else:
            self.nodes.append(helper.make_node("DequantizeLinear", [q, s] + ([z] if z else []), [y]))
        self.outputs.append(helper.make_tensor_value_info(y, TensorProto.FLOAT, list(shape)))
        return y

    def model(self):
        g = helper.make_graph(self.nodes, "qop", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
        m.ir_version = 8
        return m


CASES = {}


def case(tol_steps=0):
    def reg(fn):
        CASES[fn.__name__] = (fn, tol_steps)
        return fn
    return reg


def run_case(name, args):
    fn, tol = CASES[name]
    b = Builder(zlib.crc32(name.encode()))
    steps = fn(b)  # the output scales, in output order (None: a float output, compared in ulps)
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(b.model(), path)
    got, ref = run_strata_and_ort(args.strata, args.ort_bench, path, b.feeds, work)
    worst, count, total = 0.0, 0, 0
    for out, step in zip(b.outputs, steps):
        a, r = got[out.name].astype(np.float64), ref[out.name].astype(np.float64)
        if a.shape != r.shape:
            return name, float("inf"), -1, r.size, tol, "shape %s vs ORT %s" % (a.shape, r.shape)
        if step is None:  # float: relative to the output's largest magnitude
            d = np.abs(a - r) / max(float(np.max(np.abs(r))) if r.size else 1.0, 1e-30) / 1e-6
        else:
            d = np.abs(a - r) / step
        worst = max(worst, float(d.max()) if d.size else 0.0)
        count += int(np.count_nonzero(d > 1e-6))
        total += d.size
    return name, worst, count, total, tol, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/qoperator-parity"))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--markdown", help="also write the result table to this file")
    args = ap.parse_args()
    if not os.access(args.strata, os.X_OK):
        sys.exit("qoperator_parity: %s is not built" % args.strata)
    build_ort_bench(args.ort_bench)
    rows, failed = [], False
    for name in args.cases.split(","):
        if name not in CASES:
            sys.exit("qoperator_parity: no case %r (cases: %s)" % (name, ", ".join(CASES)))
        row = run_case(name, args)
        ok = not row[5] and row[1] <= row[4] + 1e-9
        failed |= not ok
        rows.append(row + (ok,))
        print("%-34s max diff %8.3g steps  differing %d / %d  %s %s" % (row[0], row[1], row[2], row[3],
                                                                       "ok" if ok else "FAIL", row[5]), flush=True)
    table = ["| case | max diff (output steps) | elements differing | allowed | same |", "| --- | --- | --- | --- | --- |"]
    for name, worst, count, total, tol, _, ok in rows:
        table.append("| %s | %.3g | %d / %d | %g | %s |" % (name, worst, count, total, tol, "yes" if ok else "**no**"))
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    return 1 if failed else 0


# ---- cases ---------------------------------------------------------------------------------

@case()
def add_broadcast_u8(b):
    a, sa, za = b.qinput([2, 3, 4, 5], U8, 0.031, 120)
    c, sc, zc = b.qinput([3, 1, 1], U8, 0.017, 127)
    so, zo = b.scale(0.04), b.zp(128, U8)
    y = b.node("QLinearAdd", [a, sa, za, c, sc, zc, so, zo])
    b.output(y, [2, 3, 4, 5], so, zo)
    return [0.04]


@case()
def mul_i8_saturating(b):
    a, sa, za = b.qinput([3, 7], I8, 0.05, -3)
    c, sc, zc = b.qinput([7], I8, 0.04, 5)
    so, zo = b.scale(0.01), b.zp(-1, I8)
    y = b.node("QLinearMul", [a, sa, za, c, sc, zc, so, zo])
    b.output(y, [3, 7], so, zo)
    return [0.01]


@case()
def global_average_pool_nchw_u8(b):
    x, s, z = b.qinput([2, 8, 7, 5], U8, 0.03, 110, lo=-2.0, hi=6.0)
    so, zo = b.scale(0.02), b.zp(90, U8)
    y = b.node("QLinearGlobalAveragePool", [x, s, z, so, zo], channels_last=0)
    b.output(y, [2, 8, 1, 1], so, zo)
    return [0.02]


@case()
def global_average_pool_nhwc_i8(b):
    x, s, z = b.qinput([1, 6, 6, 16], I8, 0.03, -5)
    so, zo = b.scale(0.01), b.zp(3, I8)
    y = b.node("QLinearGlobalAveragePool", [x, s, z, so, zo], channels_last=1)
    b.output(y, [1, 1, 1, 16], so, zo)
    return [0.01]


@case()
def concat_u8_axis1(b):
    so, zo = b.scale(0.05), b.zp(128, U8)
    x1, s1, z1 = b.qinput([2, 3, 4], U8, 0.05, 128)  # Y's scale and zero point: copied
    x2, s2, z2 = b.qinput([2, 5, 4], U8, 0.031, 100)
    x3, s3, z3 = b.qinput([2, 1, 4], U8, 0.2, 7)
    y = b.node("QLinearConcat", [so, zo, x1, s1, z1, x2, s2, z2, x3, s3, z3], axis=1)
    b.output(y, [2, 9, 4], so, zo)
    return [0.05]


@case()
def concat_i8_last_axis(b):
    so, zo = b.scale(0.02, ), b.zp(-3, I8)
    x1, s1, z1 = b.qinput([3, 5], I8, 0.03, 4)
    x2, s2, z2 = b.qinput([3, 2], I8, 0.011, -20)
    y = b.node("QLinearConcat", [so, zo, x1, s1, z1, x2, s2, z2], axis=-1)
    b.output(y, [3, 7], so, zo)
    return [0.02]


def avg_pool(b, t, shape, out_shape, xs, xz, ys, yz, **attrs):
    x, s, z = b.qinput(shape, t, xs, xz, lo=-3.0, hi=5.0)
    so, zo = b.scale(ys), b.zp(yz, t)
    y = b.node("QLinearAveragePool", [x, s, z, so, zo], **attrs)
    b.output(y, out_shape, so, zo)
    return [ys]


@case()
def average_pool_3x3_s2_pads_u8(b):
    return avg_pool(b, U8, [1, 4, 9, 9], [1, 4, 5, 5], 0.04, 77, 0.03, 61, kernel_shape=[3, 3], strides=[2, 2],
                    pads=[1, 1, 1, 1])


@case()
def average_pool_include_pad_i8(b):
    return avg_pool(b, I8, [2, 3, 8, 6], [2, 3, 8, 6], 0.04, -7, 0.02, 5, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                    count_include_pad=1)


@case()
def average_pool_ceil_nhwc_u8(b):
    return avg_pool(b, U8, [1, 7, 7, 16], [1, 4, 4, 16], 0.05, 100, 0.05, 101, kernel_shape=[2, 2],
                    strides=[2, 2], ceil_mode=1, channels_last=1)


@case()
def average_pool_same_upper_1d_i8(b):
    return avg_pool(b, I8, [1, 5, 11], [1, 5, 6], 0.03, 2, 0.01, -1, kernel_shape=[4], strides=[2],
                    auto_pad="SAME_UPPER")


@case()
def average_pool_whole_image_u8(b):
    return avg_pool(b, U8, [2, 8, 7, 7], [2, 8, 1, 1], 0.02, 120, 0.011, 127, kernel_shape=[7, 7])


def lookup(b, op, t, xs, xz, ys, yz, **attrs):
    x, s, z = b.qinput([3, 50], t, xs, xz, lo=-8.0, hi=8.0)
    so, zo = b.scale(ys), b.zp(yz, t)
    y = b.node(op, [x, s, z, so, zo], **attrs)
    b.output(y, [3, 50], so, zo)
    return [ys]


# ONNX Runtime's sigmoid is MLAS's rational approximation, strata's std::exp: a byte may round
# the other way where the value lies within float error of a rounding boundary.
@case(tol_steps=1)
def sigmoid_u8(b):
    return lookup(b, "QLinearSigmoid", U8, 0.07, 128, 1 / 256, 0)


@case(tol_steps=1)
def sigmoid_i8(b):
    return lookup(b, "QLinearSigmoid", I8, 0.05, -2, 1 / 256, -128)


@case()
def leaky_relu_u8(b):
    return lookup(b, "QLinearLeakyRelu", U8, 0.06, 120, 0.05, 40, alpha=0.1)


@case()
def leaky_relu_i8_default_alpha(b):
    return lookup(b, "QLinearLeakyRelu", I8, 0.06, 3, 0.04, -50)


@case()
def where_broadcast_u8(b):
    cf = b.name("cond_f")
    b.inputs.append(helper.make_tensor_value_info(cf, TensorProto.FLOAT, [4, 1, 6]))
    b.feeds[cf] = b.rng.uniform(-1, 1, size=[4, 1, 6]).astype(np.float32)
    cond = b.name("cond")
    b.nodes.append(helper.make_node("Greater", [cf, b.const(np.float32(0))], [cond]))
    x, sx, zx = b.qinput([3, 6], U8, 0.04, 100)
    y, sy, zy = b.qinput([4, 3, 1], U8, 0.04, 100)  # z's scale and zero point
    sz, zz = b.scale(0.04), b.zp(100, U8)
    z = b.node("QLinearWhere", [cond, x, sx, zx, y, sy, zy, sz, zz])
    b.output(z, [4, 3, 6], sz, zz)
    return [0.04]


def qgemm(b, ta, tb, M, K, N, trans_a=0, trans_b=0, per_column=False, bias=None, out=True, alpha=1.0):
    a, sa, za = b.qinput([K, M] if trans_a else [M, K], ta, 0.03, 110 if ta == U8 else -5)
    bshape = [N, K] if trans_b else [K, N]
    lo, hi = (0, 256) if tb == U8 else (-128, 128)
    bw = b.const(b.rng.integers(lo, hi, size=bshape).astype(NP[tb]))
    if per_column:
        sb = b.const(b.rng.uniform(0.005, 0.02, size=[N]).astype(np.float32))
        zb = b.const(b.rng.integers(lo // 2 + hi // 4, hi // 2 + hi // 4 if tb == U8 else 20, size=[N]).astype(NP[tb]))
    else:
        sb, zb = b.scale(0.012), b.zp(128 if tb == U8 else 0, tb)
    ins = [a, sa, za, bw, sb, zb]
    ins.append(b.const(b.rng.integers(-3000, 3000, size=bias).astype(np.int32)) if bias is not None else "")
    ty = U8 if ta == U8 else I8
    if out:
        sy, zy = b.scale(0.05), b.zp(128 if ty == U8 else 0, ty)
        ins += [sy, zy]
    y = b.node("QGemm", ins, transA=trans_a, transB=trans_b, alpha=alpha)
    if out:
        b.output(y, [M, N], sy, zy)
        return [0.05]
    b.output(y, [M, N])
    return [None]


@case()
def qgemm_u8_s8_transb_bias(b):
    return qgemm(b, U8, I8, 5, 67, 7, trans_b=1, bias=[7])


@case()
def qgemm_u8_u8_per_column(b):
    return qgemm(b, U8, U8, 4, 33, 9, per_column=True, bias=[4, 1])


@case()
def qgemm_s8_float_out_trans_a(b):
    return qgemm(b, I8, I8, 6, 40, 5, trans_a=1, bias=[6, 5], out=False, alpha=0.5)


def binary(b, op, t, sa_shape, sb_shape, out_shape, za, zb, zc, sc):
    a, sa, za_ = b.qinput(sa_shape, t, 0.031, za)
    c, sb, zb_ = b.qinput(sb_shape, t, 0.017, zb)
    so, zo = b.scale(sc), b.zp(zc, t)
    y = b.node(op, [a, sa, za_, c, sb, zb_, so, zo])
    b.output(y, out_shape, so, zo)
    return [sc]


@case()
def add_large_u8(b):
    return binary(b, "QLinearAdd", U8, [4, 64, 33], [4, 64, 33], [4, 64, 33], 117, 131, 125, 0.037)


@case()
def add_large_i8_scalar_b(b):
    return binary(b, "QLinearAdd", I8, [8, 1000], [1], [8, 1000], -13, 9, 3, 0.029)


@case()
def add_large_u8_row_broadcast_a(b):
    return binary(b, "QLinearAdd", U8, [1, 1000], [9, 1000], [9, 1000], 101, 140, 128, 0.043)


@case()
def add_large_u8_column_broadcast(b):
    return binary(b, "QLinearAdd", U8, [16, 300], [16, 1], [16, 300], 90, 160, 120, 0.023)


@case()
def mul_large_u8(b):
    return binary(b, "QLinearMul", U8, [4, 64, 33], [4, 64, 33], [4, 64, 33], 117, 131, 12, 0.003)


@case()
def mul_large_i8_broadcast(b):
    return binary(b, "QLinearMul", I8, [16, 300], [16, 1], [16, 300], -20, 7, -5, 0.004)


def qconv(b, x, xs, xz, cin, cout, k, stride, ys, yz, rng):
    """QLinearConv (uint8 x, int8 W with per-channel scales and zero zero points, int32 B)."""
    w = b.const(rng.integers(-127, 128, size=[cout, cin, k, k]).astype(np.int8))
    ws = b.const(rng.uniform(0.5, 1.5, size=[cout]).astype(np.float32) / (cin * k * k) ** 0.5 / 64)
    wz = b.const(np.zeros([cout], np.int8))
    bias = b.const(rng.integers(-500, 500, size=[cout]).astype(np.int32))
    s, z = b.scale(ys), b.zp(yz, U8)
    y = b.node("QLinearConv", [x, xs, xz, w, ws, wz, s, z, bias], ms=False, kernel_shape=[k, k],
               strides=[stride, stride], pads=[k // 2] * 4)
    return y, s, z


def resnet_like(b, blocks, size, channels):
    """A QOperator ResNet-like net: stem conv, `blocks` residual blocks of two 3x3 convs and a
    QLinearAdd, a QLinearAveragePool, QLinearGlobalAveragePool and a QGemm classifier."""
    rng = b.rng
    x, s, z = b.qinput([1, 3, size, size], U8, 0.02, 128, lo=-2.5, hi=2.5)
    x, s, z = qconv(b, x, s, z, 3, channels, 3, 2, 0.05, 0, rng)
    for _ in range(blocks):
        h, hs, hz = qconv(b, x, s, z, channels, channels, 3, 1, 0.05, 0, rng)
        h, hs, hz = qconv(b, h, hs, hz, channels, channels, 3, 1, 0.05, 60, rng)
        ys, yz = b.scale(0.06), b.zp(0, U8)
        x = b.node("QLinearAdd", [h, hs, hz, x, s, z, ys, yz])
        s, z = ys, yz
    # The last block's output too (every byte of the feature map is compared).
    b.output(x, [1, channels, size // 2, size // 2], s, z)
    ps, pz = b.scale(0.05), b.zp(0, U8)
    x = b.node("QLinearAveragePool", [x, s, z, ps, pz], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    gs, gz = b.scale(0.04), b.zp(0, U8)
    x = b.node("QLinearGlobalAveragePool", [x, ps, pz, gs, gz])
    shape = b.const(np.array([1, channels], np.int64))
    flat = b.name("flat")
    b.nodes.append(helper.make_node("Reshape", [x, shape], [flat]))
    w = b.const(rng.integers(-127, 128, size=[10, channels]).astype(np.int8))
    ws, wz = b.scale(0.01), b.zp(0, I8)
    c = b.const(rng.integers(-2000, 2000, size=[10]).astype(np.int32))
    os, oz = b.scale(0.3), b.zp(128, U8)
    y = b.node("QGemm", [flat, gs, gz, w, ws, wz, c, os, oz], transB=1)
    b.output(y, [1, 10], os, oz)
    return [0.06, 0.3]


@case()
def resnet_like_small(b):
    return resnet_like(b, 2, 32, 16)


@case()
def resnet_like_56x56x64(b):
    return resnet_like(b, 4, 112, 64)


def qconv_g(b, x, xs, xz, cin, cout, k, stride, group, ys, yz, rng):
    """QLinearConv with `group` groups (depthwise when group == cin == cout)."""
    w = b.const(rng.integers(-127, 128, size=[cout, cin // group, k, k]).astype(np.int8))
    ws = b.const(rng.uniform(0.5, 1.5, size=[cout]).astype(np.float32) / (cin // group * k * k) ** 0.5 / 64)
    wz = b.const(np.zeros([cout], np.int8))
    bias = b.const(rng.integers(-500, 500, size=[cout]).astype(np.int32))
    s, z = b.scale(ys), b.zp(yz, U8)
    y = b.node("QLinearConv", [x, xs, xz, w, ws, wz, s, z, bias], ms=False, kernel_shape=[k, k],
               strides=[stride, stride], pads=[k // 2] * 4, group=group)
    return y, s, z


def mobilenet_like(b, blocks, size, channels, expand):
    """A QOperator MobileNetV2-like net: stem conv, inverted residual blocks (1x1 expand,
    3x3 depthwise, 1x1 project, QLinearAdd), QLinearGlobalAveragePool, QGemm."""
    rng = b.rng
    x, s, z = b.qinput([1, 3, size, size], U8, 0.02, 128, lo=-2.5, hi=2.5)
    x, s, z = qconv_g(b, x, s, z, 3, channels, 3, 2, 1, 0.05, 0, rng)
    hidden = channels * expand
    for _ in range(blocks):
        h, hs, hz = qconv_g(b, x, s, z, channels, hidden, 1, 1, 1, 0.05, 0, rng)
        h, hs, hz = qconv_g(b, h, hs, hz, hidden, hidden, 3, 1, hidden, 0.05, 0, rng)
        h, hs, hz = qconv_g(b, h, hs, hz, hidden, channels, 1, 1, 1, 0.05, 70, rng)
        ys, yz = b.scale(0.06), b.zp(64, U8)
        x = b.node("QLinearAdd", [h, hs, hz, x, s, z, ys, yz])
        s, z = ys, yz
    b.output(x, [1, channels, size // 2, size // 2], s, z)
    gs, gz = b.scale(0.04), b.zp(0, U8)
    x = b.node("QLinearGlobalAveragePool", [x, s, z, gs, gz])
    flat = b.name("flat")
    b.nodes.append(helper.make_node("Reshape", [x, b.const(np.array([1, channels], np.int64))], [flat]))
    w = b.const(rng.integers(-127, 128, size=[10, channels]).astype(np.int8))
    os, oz = b.scale(0.3), b.zp(128, U8)
    y = b.node("QGemm", [flat, gs, gz, w, b.scale(0.01), b.zp(0, I8), b.const(
        rng.integers(-2000, 2000, size=[10]).astype(np.int32)), os, oz], transB=1)
    b.output(y, [1, 10], os, oz)
    return [0.06, 0.3]


@case()
def mobilenet_like_56x56x24(b):
    return mobilenet_like(b, 4, 112, 24, 6)


if __name__ == "__main__":
    sys.exit(main())
