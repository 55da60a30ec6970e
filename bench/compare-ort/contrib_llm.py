#!/usr/bin/python3
"""A Llama-style decoder in the form onnxruntime-genai's model builder writes, strata vs ORT.

The builder's graph per layer: SimplifiedLayerNormalization (ai.onnx, ORT's RMS norm) ->
Q/K/V MatMuls -> GroupQueryAttention (grouped KV heads, in-op rotary, past/present caches,
seqlens_k and total_sequence_length computed from attention_mask in the graph) -> output
MatMul -> SkipSimplifiedLayerNormalization -> SiLU-gated MLP; then the final norm and the LM
head. This builds that graph (seeded random weights; the builder itself is not on this
machine), runs a prompt (empty past) and then three greedy decoding steps, each fed the
previous step's present caches, in strata and in ONNX Runtime 1.30, and compares the logits
and caches of every step (max |a - b| / max |b| within --tol) and the greedy tokens.

  /usr/bin/python3 bench/compare-ort/contrib_llm.py [--layers 2] [--tol 1e-4]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbits_parity import ROOT, build_ort_bench, run_strata_and_ort  # noqa: E402

MS = "com.microsoft"
VOCAB, HIDDEN, HEADS, KV_HEADS, FFN, MAX_POS = 512, 256, 8, 2, 512, 128
HEAD = HIDDEN // HEADS


def build(path, layers, seed=11):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def c(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(op, ins, outs, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, domain=domain, **attrs))
        return outs[0]

    half = HEAD // 2
    ang = np.arange(MAX_POS)[:, None] * (10000.0 ** (-np.arange(half) / half))[None, :]
    c("cos", np.cos(ang).astype(np.float32))
    c("sin", np.sin(ang).astype(np.float32))
    # seqlens_k = sum(attention_mask) - 1, total_sequence_length = attention_mask's length.
    node("ReduceSum", ["attention_mask", c("axes1", np.array([1], np.int64))], ["mask_sum"], keepdims=0)
    node("Sub", ["mask_sum", c("one64", np.array(1, np.int64))], ["seqlens_64"])
    node("Cast", ["seqlens_64"], ["seqlens_k"], to=TensorProto.INT32)
    node("Shape", ["attention_mask"], ["mask_shape"])
    node("Gather", ["mask_shape", c("idx1", np.array(1, np.int64))], ["total_64"], axis=0)
    node("Cast", ["total_64"], ["total_len"], to=TensorProto.INT32)
    x = node("Gather", [w("embed", [VOCAB, HIDDEN], 0.5), "input_ids"], ["h_embed"])
    s = 1.0 / np.sqrt(HIDDEN)
    for i in range(layers):
        p = "l%d_" % i
        n1 = node("SimplifiedLayerNormalization", [x, w(p + "ln1", [HIDDEN], 1.0)], [p + "n1"], epsilon=1e-5)
        q = node("MatMul", [n1, w(p + "wq", [HIDDEN, HIDDEN], s)], [p + "q"])
        k = node("MatMul", [n1, w(p + "wk", [HIDDEN, KV_HEADS * HEAD], s)], [p + "k"])
        v = node("MatMul", [n1, w(p + "wv", [HIDDEN, KV_HEADS * HEAD], s)], [p + "v"])
        att = node("GroupQueryAttention",
                   [q, k, v, "past_key_values.%d.key" % i, "past_key_values.%d.value" % i, "seqlens_k", "total_len",
                    "cos", "sin"],
                   [p + "att", "present.%d.key" % i, "present.%d.value" % i], domain=MS, num_heads=HEADS,
                   kv_num_heads=KV_HEADS, do_rotary=1)
        o = node("MatMul", [att, w(p + "wo", [HIDDEN, HIDDEN], s)], [p + "o"])
        node("SkipSimplifiedLayerNormalization", [o, x, w(p + "ln2", [HIDDEN], 1.0)], [p + "n2", "", "", p + "res"],
             domain=MS, epsilon=1e-5)
        gate = node("MatMul", [p + "n2", w(p + "wg", [HIDDEN, FFN], s)], [p + "gate"])
        up = node("MatMul", [p + "n2", w(p + "wu", [HIDDEN, FFN], s)], [p + "up"])
        sig = node("Sigmoid", [gate], [p + "sig"])
        silu = node("Mul", [gate, sig], [p + "silu"])
        act = node("Mul", [silu, up], [p + "act"])
        down = node("MatMul", [act, w(p + "wd", [FFN, HIDDEN], 1.0 / np.sqrt(FFN))], [p + "down"])
        x = node("Add", [down, p + "res"], [p + "out"])
    nf = node("SimplifiedLayerNormalization", [x, w("lnf", [HIDDEN], 1.0)], ["nf"], epsilon=1e-5)
    node("MatMul", [nf, w("lm_head", [HIDDEN, VOCAB], s)], ["logits"])
    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"])]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])]
    for i in range(layers):
        for kv in ("key", "value"):
            ins.append(helper.make_tensor_value_info("past_key_values.%d.%s" % (i, kv), TensorProto.FLOAT,
                                                     ["batch", KV_HEADS, "past", HEAD]))
            outs.append(helper.make_tensor_value_info("present.%d.%s" % (i, kv), TensorProto.FLOAT,
                                                      ["batch", KV_HEADS, "total", HEAD]))
    g = helper.make_graph(nodes, "llama_genai_form", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/contrib-llm"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    build_ort_bench(args.ort_bench)
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "llama_%d.onnx" % args.layers)
    build(model, args.layers)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, VOCAB, [1, 7]).astype(np.int64)
    past = {"past_key_values.%d.%s" % (i, kv): np.zeros([1, KV_HEADS, 0, HEAD], np.float32)
            for i in range(args.layers) for kv in ("key", "value")}
    worst, failed, tokens = 0.0, False, ([], [])
    for step in range(args.steps + 1):
        total = past["past_key_values.0.key"].shape[2] + ids.shape[1]
        feeds = {"input_ids": ids, "attention_mask": np.ones([1, total], np.int64), **past}
        got, ref = run_strata_and_ort(args.strata, args.ort_bench, model, feeds,
                                      os.path.join(args.work, "step%d" % step))
        out = {"strata": got, "ort": ref}
        diffs = {k: float(np.max(np.abs(out["strata"][k] - v))) / max(float(np.max(np.abs(v))), 1e-30)
                 for k, v in out["ort"].items()}
        step_worst = max(diffs.values())
        worst = max(worst, step_worst)
        tok = [int(np.argmax(out[rt]["logits"][0, -1])) for rt in ("strata", "ort")]
        tokens[0].append(tok[0])
        tokens[1].append(tok[1])
        print("step %d (%s, %d tokens, total %d): max rel diff %.3g over %d outputs; next token strata %d, ORT %d" % (
            step, "prompt" if step == 0 else "decode", ids.shape[1], total, step_worst, len(diffs), tok[0], tok[1]),
            flush=True)
        failed |= step_worst > args.tol or tok[0] != tok[1]
        # The next step: ORT's token and caches (the same inputs for both runtimes).
        ids = np.array([[tok[1]]], np.int64)
        past = {"past_key_values.%d.%s" % (i, kv): out["ort"]["present.%d.%s" % (i, kv)]
                for i in range(args.layers) for kv in ("key", "value")}
    print("worst %.3g; tokens strata %s, ORT %s: %s" % (worst, tokens[0], tokens[1], "FAIL" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
