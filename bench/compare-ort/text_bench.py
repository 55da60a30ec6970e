#!/usr/bin/python3
"""Median latency of classifiers ending in ZipMap and of scikit-learn text pipelines,
strata against ONNX Runtime 1.30, side by side in one run.

strata: `strata bench` (Session::Run through the C++ API: the kernels make the maps; the C API's
copy into caller-owned handles is not timed). ONNX Runtime: ort_maps ITERS (OrtApi::Run, which
makes its std::map outputs, plus their release). Same models (map_parity.py and
text_parity.py write them), same inputs, 1 intra-op thread, rounds alternating A/B/A/B;
the table gives the pooled median of each round's median.

  /usr/bin/python3 bench/compare-ort/text_bench.py [--rounds 3] [--iters 300] [--markdown FILE] [--work DIR]

Needs the release build and bench/ort (bash bench/compare-ort/run.sh --quick installs it).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx

import map_parity
import text_parity

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
STRATA = os.path.join(ROOT, "build", "release", "bin", "strata")


def strata_median(model, npys, iters):
    cmd = [STRATA, "bench", model, "-t", "1", "--iters", str(iters), "--json"]
    for name, path in npys.items():
        cmd += ["-i", "%s=%s" % (name, path)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["latency_ms"]["median"]


def ort_median(exe, model, feeds_json, iters):
    r = subprocess.run([exe, model, feeds_json, str(iters)], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--markdown")
    ap.add_argument("--work")
    args = ap.parse_args()
    exe = map_parity.ort_maps_binary()
    work = args.work or tempfile.mkdtemp(prefix="text_bench_")
    os.makedirs(work, exist_ok=True)
    wanted = {"zipmap_logreg_int": "LogisticRegression -> ZipMap", "sklearn_tfidf_logreg":
              "TfidfVectorizer -> LogisticRegression -> ZipMap", "sklearn_count_logreg":
              "CountVectorizer -> LogisticRegression -> ZipMap"}
    cases = [c for c in map_parity.zipmap_cases() + text_parity.pipeline_cases() if c.name in wanted]
    rows = []
    for c in cases:
        (name, x), = c.feeds.items()
        for n in (1, len(x)):
            tag = "%s_%d" % (c.name, n)
            model = os.path.join(work, c.name + ".onnx")
            onnx.save(c.model, model)
            npy = os.path.join(work, tag + ".npy")
            np.save(npy, np.asarray(x[:n]) if x.dtype != object else np.array([str(v) for v in x[:n]]))
            feeds = os.path.join(work, tag + ".json")
            with open(feeds, "w") as f:
                json.dump({name: map_parity.tensor_feed(x[:n])}, f)
            s_meds, o_meds = [], []
            for _ in range(args.rounds):
                s_meds.append(strata_median(model, {name: npy}, args.iters))
                o_meds.append(ort_median(exe, model, feeds, args.iters))
            s, o = statistics.median(s_meds), statistics.median(o_meds)
            rows.append((wanted[c.name], n, s, o, s / o, s_meds, o_meds))
            print("%-50s rows %-4d strata %.4f ms  ORT %.4f ms  ratio %.2f  (strata %s; ORT %s)" % (
                wanted[c.name], n, s, o, s / o, ", ".join("%.4f" % v for v in s_meds),
                ", ".join("%.4f" % v for v in o_meds)), flush=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| model | rows | strata ms | ORT ms | strata / ORT | per-round medians (strata; ORT) |\n"
                    "| --- | --- | --- | --- | --- | --- |\n")
            for m, n, s, o, r, sm, om in rows:
                f.write("| %s | %d | %.4f | %.4f | %.2f | %s; %s |\n" % (
                    m, n, s, o, r, ", ".join("%.4f" % v for v in sm), ", ".join("%.4f" % v for v in om)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
