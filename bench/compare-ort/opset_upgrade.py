#!/usr/bin/python3
"""Rewrites an opset-17 model the way a current exporter writes it at opset 18-22, then checks
that strata runs it as it runs the original, and as ONNX Runtime 1.30 runs the rewritten one.

Debian's torch exports opset 17 at most; PyTorch 2.x, onnxscript and current converters write
opset 18 or later. The rewrite makes the changes they make:
  - Reduce* (all but ReduceSum) take `axes` as an int64 input instead of an attribute (18);
  - Split without a `split` input gets `num_outputs` (18);
  - the erf GELU subgraph x * 0.5 * (1 + Erf(x / sqrt(2))) (or 0.5 * x * ...) becomes one
    Gelu node (20);
  - the IR version becomes the one that opset pairs with (8, 9 or 10).

For each model: outputs of strata on the original and on the rewritten model (max relative
difference), of ONNX Runtime on the rewritten one against strata's, and `strata bench` medians
of both models measured alternately in one run (1 thread; the medians of the rounds' medians).

  /usr/bin/python3 bench/compare-ort/opset_upgrade.py [--models bert,gpt2,resnet18] [--opset 20]
      [--rounds 3] [--iters 30] [--markdown FILE]

Models come from bench/models (make_models.py); ONNX Runtime from bench/ort (run.sh --quick).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "build", "release", "lib", "python3", "dist-packages"))

import strata  # noqa: E402
from opset_parity import IR_FOR_OPSET, run_ort  # noqa: E402

REDUCE_WITH_AXES_INPUT = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


def scalar_of(graph_inits, consts, name):
    if name in graph_inits:
        a = numpy_helper.to_array(graph_inits[name])
    elif name in consts:
        a = consts[name]
    else:
        return None
    return float(a.reshape(-1)[0]) if a.size == 1 else None


def fuse_gelu(model):
    """Erf GELU subgraphs -> Gelu. Returns how many were rewritten."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consts = {}
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = numpy_helper.to_array(a.t)
    producer = {o: n for n in g.node for o in n.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def only_consumer(name, op):
        c = consumers.get(name, [])
        return c[0] if len(c) == 1 and c[0].op_type == op else None

    def other(node, value_of_x):
        """The input of a two-input node that is not value_of_x."""
        return node.input[1] if node.input[0] == value_of_x else node.input[0]

    drop, new_nodes, count = set(), {}, 0
    for erf in [n for n in g.node if n.op_type == "Erf"]:
        div = producer.get(erf.input[0])
        if div is None or div.op_type != "Div" or abs((scalar_of(inits, consts, div.input[1]) or 0) - 2 ** 0.5) > 1e-3:
            continue
        x = div.input[0]
        add = only_consumer(erf.output[0], "Add")
        if add is None or scalar_of(inits, consts, other(add, erf.output[0])) != 1.0:
            continue
        m1 = only_consumer(add.output[0], "Mul")
        if m1 is None:
            continue
        # x * (1 + erf) then * 0.5, or (x * 0.5) * (1 + erf)
        half = None
        if other(m1, add.output[0]) == x:
            m2 = only_consumer(m1.output[0], "Mul")
            if m2 is not None and scalar_of(inits, consts, other(m2, m1.output[0])) == 0.5:
                half, last = m2, m2
        else:
            h = producer.get(other(m1, add.output[0]))
            if h is not None and h.op_type == "Mul" and x in h.input and \
                    scalar_of(inits, consts, other(h, x)) == 0.5 and len(consumers.get(h.output[0], [])) == 1:
                half, last = h, m1
        if half is None:
            continue
        for n in (div, erf, add, m1, half):
            drop.add(id(n))
        new_nodes[id(last)] = helper.make_node("Gelu", [x], [last.output[0]], name=(erf.name or "gelu") + "_gelu")
        count += 1
    kept = []
    for n in g.node:
        if id(n) in new_nodes:
            kept.append(new_nodes[id(n)])
        elif id(n) not in drop:
            kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    return count


def upgrade(model, opset):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    stats = {"reduce": 0, "split": 0, "gelu": 0}
    for n in g.node:
        if n.domain not in ("", "ai.onnx"):
            continue
        if n.op_type in REDUCE_WITH_AXES_INPUT:
            axes = [a for a in n.attribute if a.name == "axes"]
            if axes:
                name = (n.name or n.output[0]) + "_axes"
                g.initializer.append(numpy_helper.from_array(np.array(list(axes[0].ints), np.int64), name))
                n.attribute.remove(axes[0])
                n.input.append(name)
                stats["reduce"] += 1
        elif n.op_type == "Split" and (len(n.input) < 2 or not n.input[1]):
            n.attribute.append(helper.make_attribute("num_outputs", len(n.output)))
            stats["split"] += 1
    if opset >= 20:
        stats["gelu"] = fuse_gelu(m)
    for imp in m.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = opset
    m.ir_version = IR_FOR_OPSET[opset]
    return m, stats


def strata_outputs(path, feeds):
    s = strata.Session(path, threads=1)
    return dict(zip([o.name for o in s.outputs], s.run(None, feeds)))


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def bench_strata(path, iters):
    out = subprocess.run([os.path.join(ROOT, "build", "release", "bin", "strata"), "bench", path, "--threads", "1",
                          "--iters", str(iters), "--warmup-ms", "500", "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["latency_ms"]["median"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="bert,gpt2,resnet18,mobilenet_v2,lstm")
    ap.add_argument("--opset", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "opset-upgrade"))
    ap.add_argument("--markdown")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows, failed = [], False
    for name in args.models.split(","):
        src = os.path.join(ROOT, "bench", "models", "out", name + ".onnx")
        if not os.path.exists(src):
            sys.exit("opset_upgrade: %s missing (run /usr/bin/python3 bench/models/make_models.py)" % src)
        model = onnx.load(src)
        up, stats = upgrade(model, args.opset)
        dst = os.path.join(args.work, "%s_opset%d.onnx" % (name, args.opset))
        onnx.save(up, dst)
        sess = strata.Session(src, threads=1)
        rng = np.random.default_rng(7)
        feeds = {}
        for i in sess.inputs:
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
            if "int" in str(i.dtype):
                feeds[i.name] = rng.integers(0, 100, shape).astype(np.int64)
                if i.name == "attention_mask":
                    feeds[i.name] = np.ones(shape, np.int64)
            else:
                feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        a, b = strata_outputs(src, feeds), strata_outputs(dst, feeds)
        same = max(rel(b[k], a[k]) for k in a)
        ort = run_ort(dst, feeds, args.work)
        vs_ort = "ORT: " + ort if isinstance(ort, str) else "%.2g" % max(rel(b[k], ort[k]) for k in ort)
        t_old, t_new = [], []
        for _ in range(args.rounds):
            t_old.append(bench_strata(src, args.iters))
            t_new.append(bench_strata(dst, args.iters))
        mo, mn = float(np.median(t_old)), float(np.median(t_new))
        ok = same <= 1e-5 and not isinstance(ort, str)
        failed |= not ok
        rows.append((name, stats, same, vs_ort, mo, mn))
        print("%-14s rewrote %s  strata new vs old %.2g  vs ORT %s  strata ms %.3f (opset 17) %.3f (opset %d)  %s" %
              (name, stats, same, vs_ort, mo, mn, args.opset, "ok" if ok else "FAIL"), flush=True)
    table = ["| model | rewritten nodes | strata: opset %d vs 17 | strata vs ORT (opset %d) | strata ms, opset 17 | "
             "strata ms, opset %d | ratio |" % (args.opset, args.opset, args.opset),
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, stats, same, vs_ort, mo, mn in rows:
        table.append("| %s | %s | %.2g | %s | %.3f | %.3f | %.3f |" % (
            name, ", ".join("%s %d" % kv for kv in stats.items() if kv[1]) or "none", same, vs_ort, mo, mn, mn / mo))
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
