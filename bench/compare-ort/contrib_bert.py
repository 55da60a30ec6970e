#!/usr/bin/python3
"""A BERT encoder in the form ONNX Runtime's transformer optimizer writes, strata vs ORT.

onnxruntime.transformers.optimizer turns a BERT export into com.microsoft ops:
EmbedLayerNormalization -> per layer [Attention -> MatMul -> SkipLayerNormalization (the
projection's bias as its bias input) -> MatMul -> BiasGelu -> MatMul -> SkipLayerNormalization].
This builds that graph directly (the Python optimizer is not on this machine) with the bench
BERT's shapes (12 layers, hidden 768, 12 heads, FFN 3072, 128 tokens; seeded random weights,
a padded attention mask), checks strata's output against ORT 1.30's (max |a - b| / max |b|
within --tol) and times both side by side (`strata bench` / `ort_bench`, alternating, --rounds
rounds, medians).

  /usr/bin/python3 bench/compare-ort/contrib_bert.py [--layers 12] [--threads 1,2] [--iters 20]
      [--rounds 2] [--tol 1e-4] [--markdown FILE]
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbits_parity import ROOT, build_ort_bench, run_strata_and_ort, sh, write_inputs  # noqa: E402

MS = "com.microsoft"


def build(path, layers, hidden=768, heads=12, ffn=3072, vocab=30522, max_pos=512, seed=7):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def ones(name, n):
        inits.append(numpy_helper.from_array((1 + 0.1 * rng.standard_normal(n)).astype(np.float32), name))
        return name

    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "segment_ids", w("word", [vocab, hidden], 0.02), w("pos", [max_pos, hidden], 0.02),
         w("seg", [2, hidden], 0.02), ones("emb_g", hidden), w("emb_b", [hidden], 0.02), "attention_mask"],
        ["h0", "mask_index"], domain=MS, epsilon=1e-12))
    x = "h0"
    s = 1.0 / np.sqrt(hidden)
    for i in range(layers):
        p = "l%d_" % i
        nodes.append(helper.make_node("Attention", [x, w(p + "qkv_w", [hidden, 3 * hidden], s),
                                                    w(p + "qkv_b", [3 * hidden], 0.02), "mask_index"],
                                      [p + "att"], domain=MS, num_heads=heads))
        nodes.append(helper.make_node("MatMul", [p + "att", w(p + "o_w", [hidden, hidden], s)], [p + "o"]))
        nodes.append(helper.make_node("SkipLayerNormalization",
                                      [p + "o", x, ones(p + "ln1_g", hidden), w(p + "ln1_b", [hidden], 0.02),
                                       w(p + "o_b", [hidden], 0.02)], [p + "ln1"], domain=MS, epsilon=1e-12))
        nodes.append(helper.make_node("MatMul", [p + "ln1", w(p + "ff1_w", [hidden, ffn], s)], [p + "ff1"]))
        nodes.append(helper.make_node("BiasGelu", [p + "ff1", w(p + "ff1_b", [ffn], 0.02)], [p + "gelu"], domain=MS))
        nodes.append(helper.make_node("MatMul", [p + "gelu", w(p + "ff2_w", [ffn, hidden], 1.0 / np.sqrt(ffn))],
                                      [p + "ff2"]))
        out = "last_hidden_state" if i == layers - 1 else p + "out"
        nodes.append(helper.make_node("SkipLayerNormalization",
                                      [p + "ff2", p + "ln1", ones(p + "ln2_g", hidden), w(p + "ln2_b", [hidden], 0.02),
                                       w(p + "ff2_b", [hidden], 0.02)], [out], domain=MS, epsilon=1e-12))
        x = out
    ins = [helper.make_tensor_value_info(n, TensorProto.INT32, [1, 128])
           for n in ("input_ids", "segment_ids", "attention_mask")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, 128, hidden])]
    g = helper.make_graph(nodes, "bert_contrib", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/contrib-bert"))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    build_ort_bench(args.ort_bench)
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "bert_contrib_%d.onnx" % args.layers)
    if not os.path.exists(model):
        build(model, args.layers)
    rng = np.random.default_rng(1)
    in_dir = os.path.join(args.work, "inputs")
    mask = np.ones([1, 128], np.int32)
    mask[0, 100:] = 0  # padded tail
    feeds = {"input_ids": rng.integers(0, 30522, [1, 128]).astype(np.int32),
             "segment_ids": (np.arange(128) >= 64).astype(np.int32)[None, :], "attention_mask": mask}
    got, ref = run_strata_and_ort(args.strata, args.ort_bench, model, feeds, args.work)
    a, b = got["last_hidden_state"], ref["last_hidden_state"]
    diff = float(np.max(np.abs(a - b))) / float(np.max(np.abs(b)))
    print("output: max |strata - ORT| / max |ORT| = %.3g (tol %g)" % (diff, args.tol), flush=True)
    rows = []
    for t in [int(v) for v in args.threads.split(",")]:
        st, ot = [], []
        for _ in range(args.rounds):
            st.append(json.loads(sh([args.strata, "bench", model, "-t", str(t), "--iters", str(args.iters), "--json"]
                                    + write_inputs(feeds, in_dir)))
                      ["latency_ms"]["median"])
            ot.append(json.loads(sh([args.ort_bench, model, in_dir, "--threads", str(t), "--iters", str(args.iters),
                                     "--creations", "1"]))["latency_ms"]["median"])
        rows.append((t, float(np.median(st)), float(np.median(ot)), st, ot))
        print("threads %d: strata %.2f ms  ORT %.2f ms  ratio %.3f  (rounds strata %s, ORT %s)" % (
            t, rows[-1][1], rows[-1][2], rows[-1][1] / rows[-1][2], ["%.2f" % v for v in st],
            ["%.2f" % v for v in ot]), flush=True)
    table = ["| threads | strata (ms) | ORT 1.30 (ms) | strata / ORT |", "| --- | --- | --- | --- |"]
    for t, s, o, _, _ in rows:
        table.append("| %d | %.2f | %.2f | %.3f |" % (t, s, o, s / o))
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("output max rel diff %.3g\n\n" % diff + "\n".join(table) + "\n")
    return 0 if diff <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
