#!/usr/bin/python3
"""ORT parity of ONNX Runtime's transformer and fused contrib ops (com.microsoft
SkipLayerNormalization, SkipSimplifiedLayerNormalization, BiasGelu, EmbedLayerNormalization,
Attention, MultiHeadAttention, GroupQueryAttention, RotaryEmbedding, FusedMatMul, FusedConv, FusedGemm, and SimplifiedLayerNormalization in ai.onnx).

ONNX Runtime defines these ops (its transformer optimizer writes them, and so do its saved
optimized models), so its CPU kernels are the reference. For each case this builds a small
one-node model on seeded inputs, runs it in strata (`strata run -o`) and in ONNX Runtime
1.30 (ort_bench --save-outputs), and compares every output: max |strata - ort| / max |ort|
must stay within --tol (1e-5; the kernels accumulate differently). Integer outputs
(EmbedLayerNormalization's mask_index) are cast to float in the model and must be equal.

  /usr/bin/python3 bench/compare-ort/contrib_parity.py [--strata PATH] [--ort-bench PATH]
      [--work DIR] [--cases a,b] [--tol 1e-5] [--markdown FILE]

Exit status 1 when any case differs by more than the tolerance.
"""
import argparse
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbits_parity import ROOT, build_ort_bench, run_strata_and_ort  # noqa: E402

MS = "com.microsoft"


class Builder:
    """One model: graph inputs fed from seeded arrays, initializers, one or more nodes."""

    def __init__(self, seed):
        self.nodes, self.inits, self.inputs, self.outputs, self.feeds = [], [], [], [], {}
        self.rng = np.random.default_rng(seed)

    def feed(self, name, arr):
        """A graph input named `name` fed with arr."""
        t = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}[arr.dtype.type]
        self.inputs.append(helper.make_tensor_value_info(name, t, list(arr.shape)))
        self.feeds[name] = arr
        return name

    def rand(self, name, shape, lo=-1.0, hi=1.0):
        return self.feed(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def crand(self, name, shape, lo=-1.0, hi=1.0):
        return self.const(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def node(self, op, ins, outs, domain=MS, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, domain=domain, **attrs))

    def output(self, name, shape, as_float=False):
        """A float graph output of `shape`; as_float casts an integer tensor to float first."""
        if as_float:
            self.node("Cast", [name], [name + "_f"], domain="", to=TensorProto.FLOAT)
            name += "_f"
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))

    def model(self):
        g = helper.make_graph(self.nodes, "contrib", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
        m.ir_version = 8
        return m


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ---- SkipLayerNormalization family ---------------------------------------------------------

@case
def skip_layer_norm_all_outputs(b):
    b.rand("x", [2, 5, 24], -3, 3)
    b.rand("skip", [2, 5, 24])
    b.crand("gamma", [24])
    b.crand("beta", [24])
    b.crand("bias", [24])
    b.node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y", "mean", "inv", "sum"],
           epsilon=1e-5)
    for o, s in (("y", [2, 5, 24]), ("mean", [2, 5, 1]), ("inv", [2, 5, 1]), ("sum", [2, 5, 24])):
        b.output(o, s)


@case
def skip_layer_norm_broadcast_skip(b):
    b.rand("x", [3, 4, 40])
    b.rand("skip", [1, 4, 40])
    b.crand("gamma", [40])
    b.node("SkipLayerNormalization", ["x", "skip", "gamma"], ["y"])
    b.output("y", [3, 4, 40])


@case
def skip_layer_norm_2d_skip(b):
    b.rand("x", [2, 3, 17])
    b.rand("skip", [3, 17])
    b.crand("gamma", [17])
    b.crand("beta", [17])
    b.node("SkipLayerNormalization", ["x", "skip", "gamma", "beta"], ["y", "", "", "sum"], epsilon=1e-6)
    b.output("y", [2, 3, 17])
    b.output("sum", [2, 3, 17])


@case
def skip_layer_norm_2d_input(b):
    b.rand("x", [7, 33])
    b.rand("skip", [7, 33])
    b.crand("gamma", [33])
    b.crand("beta", [33])
    b.crand("bias", [33])
    b.node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y"])
    b.output("y", [7, 33])


@case
def skip_simplified_layer_norm(b):
    b.rand("x", [2, 6, 48], -2, 2)
    b.rand("skip", [2, 6, 48])
    b.crand("gamma", [48])
    b.crand("bias", [48])
    b.node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"], ["y", "", "inv", "sum"],
           epsilon=1e-6)
    for o, s in (("y", [2, 6, 48]), ("inv", [2, 6, 1]), ("sum", [2, 6, 48])):
        b.output(o, s)


@case
def simplified_layer_norm(b):
    b.rand("x", [3, 5, 64], -4, 4)
    b.crand("scale", [64])
    b.node("SimplifiedLayerNormalization", ["x", "scale"], ["y", "inv"], domain="", axis=-1, epsilon=1e-6)
    b.output("y", [3, 5, 64])
    b.output("inv", [3, 5, 1])


# ---- BiasGelu ------------------------------------------------------------------------------

@case
def bias_gelu(b):
    b.rand("a", [2, 7, 37], -4, 4)
    b.crand("bias", [37])
    b.node("BiasGelu", ["a", "bias"], ["y"])
    b.output("y", [2, 7, 37])


# ---- EmbedLayerNormalization ---------------------------------------------------------------

def _ids(b, name, shape, hi):
    return b.feed(name, b.rng.integers(0, hi, shape).astype(np.int32))


@case
def embed_layer_norm_full(b):
    B, S, H = 2, 9, 32
    _ids(b, "ids", [B, S], 50)
    _ids(b, "seg", [B, S], 2)
    b.crand("word", [50, H])
    b.crand("pos", [16, H])
    b.crand("segemb", [2, H])
    b.crand("gamma", [H])
    b.crand("beta", [H])
    mask = np.ones([B, S], np.int32)
    mask[0, 6:] = 0
    mask[1, 2:] = 0
    b.feed("mask", mask)
    b.node("EmbedLayerNormalization", ["ids", "seg", "word", "pos", "segemb", "gamma", "beta", "mask"],
           ["y", "mask_index", "sum"], epsilon=1e-12)
    b.output("y", [B, S, H])
    b.output("mask_index", [B], as_float=True)
    b.output("sum", [B, S, H])


@case
def embed_layer_norm_no_segment(b):
    B, S, H = 3, 5, 24
    _ids(b, "ids", [B, S], 30)
    b.crand("word", [30, H])
    b.crand("pos", [8, H])
    b.crand("gamma", [H])
    b.crand("beta", [H])
    b.node("EmbedLayerNormalization", ["ids", "", "word", "pos", "", "gamma", "beta"], ["y", "mask_index"],
           epsilon=1e-5)
    b.output("y", [B, S, H])
    b.output("mask_index", [B], as_float=True)


@case
def embed_layer_norm_position_ids(b):
    B, S, H = 2, 4, 16
    _ids(b, "ids", [B, S], 20)
    b.crand("word", [20, H])
    b.crand("pos", [10, H])
    b.crand("gamma", [H])
    b.crand("beta", [H])
    b.feed("pids", np.array([[3, 1, 9, 0], [2, 2, 5, 7]], np.int32))
    b.node("EmbedLayerNormalization", ["ids", "", "word", "pos", "", "gamma", "beta", "", "pids"],
           ["y", "mask_index"])
    b.output("y", [B, S, H])


# ---- Attention -----------------------------------------------------------------------------

def _attention(b, B=2, S=7, D=32, N=4, sizes=None, mask=None, past=0, bias=True, ab=False, const_w=True,
               **attrs):
    """input [B,S,D] -> Attention; mask: None | 'raw2d' | 'ends' | 'ends_starts' | 'raw3d'."""
    dq, dk, dv = sizes or (D, D, D)
    b.rand("x", [B, S, D])
    (b.crand if const_w else b.rand)("w", [D, dq + dk + dv], -0.3, 0.3)
    ins = ["x", "w", b.crand("bias", [dq + dk + dv]) if bias else ""]
    T = past + S
    if mask == "raw2d":
        m = np.ones([B, T], np.int32)
        m[0, T - 2:] = 0
        m[B - 1, 1] = 0
        ins.append(b.feed("mask", m))
    elif mask == "raw3d":
        ins.append(b.feed("mask", b.rng.integers(0, 2, [B, S, T]).astype(np.int32)))
    elif mask == "ends":
        ins.append(b.feed("mask", np.array([T - 3, T][:B], np.int32)))
    elif mask == "ends_starts":
        ins.append(b.feed("mask", np.array([T - 1, T, 2, 0][:2 * B], np.int32)))
    else:
        ins.append("")
    ins.append(b.rand("past", [2, B, N, past, dk // N]) if past else "")
    if ab:
        ins.append(b.rand("ab", [1, N, S, T], -2, 2))
    if sizes:
        attrs["qkv_hidden_sizes"] = list(sizes)
    while ins and ins[-1] == "":
        ins.pop()
    outs = ["y"] + (["present"] if past else [])
    b.node("Attention", ins, outs, num_heads=N, **attrs)
    b.output("y", [B, S, dv])
    if past:
        b.output("present", [2, B, N, T, dk // N])


@case
def attention_no_mask(b):
    _attention(b)


@case
def attention_raw_mask(b):
    _attention(b, mask="raw2d")


@case
def attention_raw_3d_mask(b):
    _attention(b, mask="raw3d", B=2, S=5)


@case
def attention_end_positions(b):
    _attention(b, mask="ends")


@case
def attention_end_and_start_positions(b):
    _attention(b, mask="ends_starts")


@case
def attention_unidirectional(b):
    _attention(b, unidirectional=1)


@case
def attention_unidirectional_padded(b):
    _attention(b, mask="raw2d", unidirectional=1)


@case
def attention_past_present(b):
    _attention(b, past=5, mask="raw2d", unidirectional=1, S=3)


@case
def attention_past_one_token(b):
    _attention(b, past=6, unidirectional=1, S=1)


@case
def attention_qkv_sizes_bias_scale(b):
    _attention(b, sizes=(32, 32, 48), ab=True, scale=0.3, mask="ends")


@case
def attention_runtime_weights(b):
    _attention(b, const_w=False, B=1, S=33, D=48, N=3, mask_filter_value=-1e3, mask="ends")

# No case without Attention's optional bias: ONNX Runtime 1.30's CPU kernel crashes (SIGSEGV)
# on such a model; strata reads a missing bias as zeros (tests/unit/transformer_contrib_test.cc).


@case
def attention_long_sequence(b):
    _attention(b, B=1, S=129, D=64, N=2, mask="raw2d")


# ---- MultiHeadAttention ----------------------------------------------------------------------

def _mha(b, B=2, S=5, L=None, D=32, Dv=None, N=4, bias=True, mask=None, ab=False, past=0, bnsh=False,
         present=False, **attrs):
    """query [B,S,D], key/value [B,L,D]/[B,L,Dv] (or BNSH) -> MultiHeadAttention."""
    L = S if L is None else L
    Dv = D if Dv is None else Dv
    H, Hv = D // N, Dv // N
    b.rand("q", [B, S, D])
    if bnsh:
        b.rand("k", [B, N, L, H])
        b.rand("v", [B, N, L, H])
        Dv, Hv = D, H
    else:
        b.rand("k", [B, L, D])
        b.rand("v", [B, L, Dv])
    ins = ["q", "k", "v", b.crand("bias", [2 * D + Dv]) if bias else ""]
    T = past + L
    if mask == "lengths":
        ins.append(b.feed("mask", np.array([T - 2, T, 1][:B], np.int32)))
    elif mask == "raw2d":
        m = np.ones([B, T], np.int32)
        m[0, T - 3:] = 0
        ins.append(b.feed("mask", m))
    elif mask == "raw3d":
        ins.append(b.feed("mask", (b.rng.integers(0, 4, [B, S, T]) > 0).astype(np.int32)))
    else:
        ins.append("")
    ins.append(b.rand("ab", [B, 1, S, T], -2, 2) if ab else "")
    if past:
        ins += [b.rand("pk", [B, N, past, H]), b.rand("pv", [B, N, past, Hv])]
    while ins and ins[-1] == "":
        ins.pop()
    outs = ["y"] + (["present_key", "present_value"] if present else [])
    b.node("MultiHeadAttention", ins, outs, num_heads=N, **attrs)
    b.output("y", [B, S, Dv])
    if present:
        b.output("present_key", [B, N, T, H])
        b.output("present_value", [B, N, T, Hv])


@case
def mha_self_bias(b):
    _mha(b)


@case
def mha_cross_lengths_mask(b):
    _mha(b, S=4, L=9, Dv=48, mask="lengths")


@case
def mha_raw_mask_attention_bias_scale(b):
    _mha(b, mask="raw2d", ab=True, scale=0.2)


@case
def mha_raw_3d_mask_no_bias(b):
    _mha(b, mask="raw3d", bias=False, S=6, L=7)


@case
def mha_causal(b):
    _mha(b, S=8, unidirectional=1)


@case
def mha_past_present_causal(b):
    _mha(b, S=3, past=6, present=True, unidirectional=1, mask="raw2d")


@case
def mha_decode_one_token(b):
    _mha(b, B=1, S=1, past=11, present=True, D=64, N=2)


@case
def mha_cross_bnsh_cache(b):
    _mha(b, S=3, L=10, bnsh=True, mask="lengths")


# ---- RotaryEmbedding -------------------------------------------------------------------------

def _rotary(b, shape, max_pos, half, pos, **attrs):
    b.rand("x", shape)
    if isinstance(pos, int):
        b.feed("pos", np.array([pos], np.int64))
    else:
        b.feed("pos", np.array(pos, np.int64))
    ang = np.arange(max_pos)[:, None] * (10000.0 ** (-np.arange(half) / half))[None, :]
    b.const("cos", np.cos(ang).astype(np.float32))
    b.const("sin", np.sin(ang).astype(np.float32))
    b.node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], **attrs)
    b.output("y", shape)


@case
def rotary_halves(b):
    _rotary(b, [2, 5, 32], 16, 4, [[0, 1, 2, 3, 4], [7, 3, 9, 15, 0]])


@case
def rotary_interleaved_bnsh(b):
    _rotary(b, [2, 3, 4, 8], 12, 4, [[1, 2, 3, 4], [5, 6, 7, 8]], interleaved=1)


@case
def rotary_partial_dim(b):
    _rotary(b, [1, 6, 40], 32, 4, 10, num_heads=2, rotary_embedding_dim=8)


@case
def rotary_scalar_position_interleaved(b):
    _rotary(b, [2, 3, 24], 8, 6, 4, interleaved=1)


# ---- GroupQueryAttention ---------------------------------------------------------------------

def _gqa(b, B=2, S=4, N=4, KV=2, H=32, past=0, seqlens=None, total=None, packed=False, rotary=False,
         pos_ids=None, ab=False, sink=False, **attrs):
    """query [B,S,N*H], key/value [B,S,KV*H] (or packed), past [B,KV,past,H] -> GroupQueryAttention."""
    total = S if total is None else total
    seqlens = [total - 1] * B if seqlens is None else seqlens
    if packed:
        b.rand("q", [B, S, (N + 2 * KV) * H])
        ins = ["q", "", ""]
    else:
        b.rand("q", [B, S, N * H])
        b.rand("k", [B, S, KV * H])
        b.rand("v", [B, S, KV * H])
        ins = ["q", "k", "v"]
    ins += [b.rand("pk", [B, KV, past, H]), b.rand("pv", [B, KV, past, H])] if past else ["", ""]
    ins.append(b.const("seqlens", np.array(seqlens, np.int32)))
    ins.append(b.const("total", np.array(total, np.int32)))
    if rotary:
        half = H // 4  # partial rotary: R = H / 2
        ang = np.arange(64)[:, None] * (10000.0 ** (-np.arange(half) / half))[None, :]
        ins += [b.const("cos", np.cos(ang).astype(np.float32)), b.const("sin", np.sin(ang).astype(np.float32))]
        attrs["do_rotary"] = 1
    else:
        ins += ["", ""]
    ins.append(b.feed("pos", np.array(pos_ids, np.int64)) if pos_ids is not None else "")
    ins.append(b.rand("ab", [B, 1, S, total], -2, 2) if ab else "")
    ins.append(b.crand("sink", [N]) if sink else "")
    while ins and ins[-1] == "":
        ins.pop()
    present = max(total, past)
    b.node("GroupQueryAttention", ins, ["y", "present_key", "present_value"], num_heads=N, kv_num_heads=KV, **attrs)
    b.output("y", [B, S, N * H])
    b.output("present_key", [B, KV, present, H])
    b.output("present_value", [B, KV, present, H])


@case
def gqa_prompt(b):
    _gqa(b)


@case
def gqa_prompt_padded_rotary(b):
    _gqa(b, S=6, seqlens=[5, 3], rotary=True)


@case
def gqa_decode_ragged(b):
    _gqa(b, S=1, past=7, total=8, seqlens=[7, 4])


@case
def gqa_decode_rotary_interleaved_shared_buffer(b):
    _gqa(b, S=1, past=12, total=9, seqlens=[8, 5], rotary=True, rotary_interleaved=1)


@case
def gqa_continued_prompt(b):
    _gqa(b, B=1, S=3, past=5, total=8, seqlens=[7], rotary=True)


@case
def gqa_packed_local_window_softcap(b):
    _gqa(b, S=9, packed=True, local_window_size=3, softcap=2.0, N=6, KV=3)


@case
def gqa_smooth_softmax_bias_scale(b):
    _gqa(b, S=5, ab=True, smooth_softmax=1, scale=0.3)


@case
def gqa_head_sink_position_ids(b):
    _gqa(b, S=1, past=4, total=5, seqlens=[4, 2], rotary=True, pos_ids=[[9], [3]], sink=True)


# ---- FusedMatMul --------------------------------------------------------------------------

def _fused_matmul(b, a_shape, b_shape, out_shape, **attrs):
    b.rand("a", a_shape)
    b.rand("b", b_shape)
    b.node("FusedMatMul", ["a", "b"], ["y"], **attrs)
    b.output("y", out_shape)


@case
def fused_matmul_alpha(b):
    _fused_matmul(b, [3, 5, 7], [7, 4], [3, 5, 4], alpha=0.125)


@case
def fused_matmul_trans_a_b(b):
    _fused_matmul(b, [2, 7, 5], [2, 4, 7], [2, 5, 4], transA=1, transB=1, alpha=2.0)


@case
def fused_matmul_trans_b_broadcast(b):
    _fused_matmul(b, [2, 1, 5, 33], [3, 17, 33], [2, 3, 5, 17], transB=1)


@case
def fused_matmul_trans_batch_a(b):
    _fused_matmul(b, [5, 3, 7], [3, 7, 4], [3, 5, 4], transBatchA=1)


@case
def fused_matmul_trans_batch_b(b):
    _fused_matmul(b, [2, 5, 7], [7, 2, 4], [2, 5, 4], transBatchB=1)


@case
def fused_matmul_trans_batch_and_trans(b):
    _fused_matmul(b, [7, 2, 3, 5], [2, 3, 4, 7], [2, 3, 5, 4], transBatchA=1, transA=1, transB=1, alpha=0.5)


@case
def fused_matmul_trans_batch_b_and_trans_b(b):
    _fused_matmul(b, [2, 3, 5, 7], [4, 2, 3, 7], [2, 3, 5, 4], transBatchB=1, transB=1)


@case
def fused_matmul_trans_batch_both(b):
    _fused_matmul(b, [6, 2, 9], [9, 2, 3], [2, 6, 3], transBatchA=1, transBatchB=1)


@case
def fused_matmul_vector(b):
    _fused_matmul(b, [9], [2, 9, 4], [2, 4], transA=1)


# ---- FusedConv / FusedGemm (strata rewrites them at import into the standard ops) ------------

@case
def fused_conv_clip_with_z(b):
    b.rand("x", [1, 6, 9, 9])
    b.crand("w", [8, 6, 3, 3], -0.3, 0.3)
    b.crand("bias", [8])
    b.rand("z", [1, 8, 9, 9])
    b.node("FusedConv", ["x", "w", "bias", "z"], ["y"], activation="Clip", activation_params=[-0.5, 0.75],
           kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    b.output("y", [1, 8, 9, 9])


@case
def fused_conv_leaky_relu_strided_grouped(b):
    b.rand("x", [2, 8, 11, 11])
    b.crand("w", [8, 4, 3, 3], -0.3, 0.3)
    b.node("FusedConv", ["x", "w"], ["y"], activation="LeakyRelu", activation_params=[0.1], kernel_shape=[3, 3],
           strides=[2, 2], group=2)
    b.output("y", [2, 8, 5, 5])


@case
def fused_conv_hard_sigmoid(b):
    b.rand("x", [1, 3, 7, 7])
    b.crand("w", [5, 3, 1, 1])
    b.crand("bias", [5])
    b.node("FusedConv", ["x", "w", "bias"], ["y"], activation="HardSigmoid", activation_params=[0.3, 0.4])
    b.output("y", [1, 5, 7, 7])


@case
def fused_gemm_relu(b):
    b.rand("a", [4, 33])
    b.crand("w", [17, 33])
    b.crand("c", [17])
    b.node("FusedGemm", ["a", "w", "c"], ["y"], activation="Relu", transB=1, alpha=0.5, beta=2.0)
    b.output("y", [4, 17])


@case
def fused_gemm_leaky_relu(b):
    b.rand("a", [3, 8])
    b.crand("w", [8, 5])
    b.node("FusedGemm", ["a", "w"], ["y"], activation="LeakyRelu", activation_alpha=0.2)
    b.output("y", [3, 5])


# ---- driver --------------------------------------------------------------------------------

def run_case(name, args):
    b = Builder(zlib.crc32(name.encode()))
    CASES[name](b)
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(b.model(), path)
    got, ref = run_strata_and_ort(args.strata, args.ort_bench, path, b.feeds, work)
    worst, total = 0.0, 0
    for out in b.outputs:
        a, r = got[out.name].astype(np.float64), ref[out.name].astype(np.float64)
        if a.shape != r.shape:
            return name, float("inf"), r.size, "%s: shape %s vs ORT %s" % (out.name, a.shape, r.shape)
        if a.size:
            worst = max(worst, float(np.max(np.abs(a - r))) / max(float(np.max(np.abs(r))), 1e-30))
        total += a.size
    return name, worst, total, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/contrib-parity"))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--markdown", help="also write the result table to this file")
    args = ap.parse_args()
    if not os.access(args.strata, os.X_OK):
        sys.exit("contrib_parity: %s is not built" % args.strata)
    build_ort_bench(args.ort_bench)
    rows, failed = [], False
    for name in args.cases.split(","):
        if name not in CASES:
            sys.exit("contrib_parity: no case %r (cases: %s)" % (name, ", ".join(CASES)))
        row = run_case(name, args)
        ok = not row[3] and row[1] <= args.tol
        failed |= not ok
        rows.append(row + (ok,))
        print("%-34s max rel diff %9.3g  elements %6d  %s %s" % (row[0], row[1], row[2], "ok" if ok else "FAIL",
                                                                 row[3]), flush=True)
    table = ["| case | max \\|strata - ORT\\| / max \\|ORT\\| | elements | within %g |" % args.tol,
             "| --- | --- | --- | --- |"]
    for name, worst, total, _, ok in rows:
        table.append("| %s | %.3g | %d | %s |" % (name, worst, total, "yes" if ok else "**no**"))
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
