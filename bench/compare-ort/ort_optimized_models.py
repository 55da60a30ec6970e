#!/usr/bin/python3
"""strata on models that ONNX Runtime optimized and saved (its contrib ops in them).

People often keep the model ORT's graph optimizer wrote (SessionOptions.optimized_model_filepath):
it carries com.microsoft ops (FusedConv, FusedGemm, SkipLayerNormalization, FusedMatMul,
Gelu, ...). For each bench model this has ORT 1.30 save its level-"extended" optimization
(ort_bench --save-optimized), counts the contrib ops in it, runs the original and the
ORT-optimized model in strata on the same inputs and compares their outputs (max |a - b| /
max |b|, must stay within --tol), and with --time also times strata on both and ORT on the
original, side by side (`strata bench` / `ort_bench`, alternating, medians).

  /usr/bin/python3 bench/compare-ort/ort_optimized_models.py [--models mlp,mobilenet_v2,...]
      [--threads 1] [--iters 30] [--time] [--tol 1e-5] [--markdown FILE]

Needs bench/models/out (bench/models/make_models.py) and ONNX Runtime in bench/ort
(bench/compare-ort/run.sh --quick once). Exit status 1 when a model fails or differs.
"""
import argparse
import collections
import json
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbits_parity import ROOT, build_ort_bench, sh  # noqa: E402


def feeds(in_dir):
    out = []
    with open(os.path.join(in_dir, "inputs.txt")) as f:
        for line in f:
            name, file = line.rstrip("\n").split("\t")
            out += ["-i", "%s=%s" % (name, os.path.join(in_dir, file))]
    return out


def outputs(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def median_ms(cmd):
    return json.loads(sh(cmd))["latency_ms"]["median"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "bench/models/out"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/ort-optimized"))
    ap.add_argument("--models", default="mlp,lstm,mobilenet_v2,resnet18,bert,gpt2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--time", action="store_true", help="also time both models in strata and the original in ORT")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--markdown", help="also write the result table to this file")
    args = ap.parse_args()
    build_ort_bench(args.ort_bench)
    rows, failed = [], False
    for name in args.models.split(","):
        model = os.path.join(args.models_dir, name + ".onnx")
        if not os.path.exists(model):
            sys.exit("ort_optimized_models: %s is missing (run bench/models/make_models.py)" % model)
        work = os.path.join(args.work, name)
        in_dir, opt = os.path.join(work, "inputs"), os.path.join(work, name + "_ort.onnx")
        os.makedirs(work, exist_ok=True)
        sh([args.strata, "bench", model, "--iters", "1", "--warmup", "0", "--save-inputs", in_dir])
        sh([args.ort_bench, model, in_dir, "--iters", "1", "--warmup", "0", "--creations", "1",
            "--save-optimized", opt])
        ops = collections.Counter(n.op_type for n in onnx.load(opt, load_external_data=False).graph.node
                                  if n.domain == "com.microsoft")
        got = {}
        for tag, path in (("orig", model), ("ort", opt)):
            d = os.path.join(work, "out_" + tag)
            os.makedirs(d, exist_ok=True)
            for f in os.listdir(d):
                os.remove(os.path.join(d, f))
            sh([args.strata, "run", path, "-o", d] + feeds(in_dir))
            got[tag] = outputs(d)
        diff = max(float(np.max(np.abs(got["ort"][k] - v))) / max(float(np.max(np.abs(v))), 1e-30)
                   for k, v in got["orig"].items())
        ok = diff <= args.tol and got["orig"].keys() == got["ort"].keys()
        failed |= not ok
        t = ("", "", "")
        if args.time:
            th = ["-t", str(args.threads), "--iters", str(args.iters), "--json"]
            s_orig, s_ort, o_orig = [], [], []
            for _ in range(2):  # alternate the three, twice; the medians of the two rounds are pooled
                s_orig.append(median_ms([args.strata, "bench", model] + th))
                s_ort.append(median_ms([args.strata, "bench", opt] + th))
                o_orig.append(median_ms([args.ort_bench, model, in_dir, "--threads", str(args.threads), "--iters",
                                         str(args.iters), "--creations", "1"]))
            t = tuple("%.3f" % float(np.median(v)) for v in (s_orig, s_ort, o_orig))
        rows.append((name, ", ".join("%s x%d" % kv for kv in sorted(ops.items())) or "(none)", diff, ok) + t)
        print("%-14s %-70s max rel diff %.3g %s %s" % (name, rows[-1][1], diff, "ok" if ok else "FAIL",
                                                      " ".join(t)), flush=True)
    head = "| model | com.microsoft ops in ORT's optimized model | strata: optimized vs original output | ok |"
    sep = "| --- | --- | --- | --- |"
    if args.time:
        head += " strata original (ms) | strata ORT-optimized (ms) | ORT original (ms) |"
        sep += " --- | --- | --- |"
    table = [head, sep]
    for r in rows:
        table.append("| %s | %s | %.3g | %s |" % (r[0], r[1], r[2], "yes" if r[3] else "**no**") +
                     (" %s | %s | %s |" % r[4:] if args.time else ""))
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
