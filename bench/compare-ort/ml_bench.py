#!/usr/bin/python3
"""Classical-ML (ai.onnx.ml) models timed side by side: strata (`strata bench`) against ONNX
Runtime 1.30 (ort_bench, its C API), same model files, inputs and thread counts, alternating
runtimes over --rounds rounds; the table gives each runtime's pooled median and the ratio.

Models (written here, seeded): scikit-learn forests and gradient boosting converted by
ml_models.py, and synthetic boosted ensembles in LightGBM's layout (BRANCH_LT, NaN routed to
a branch): the sizes people serve, one row (online scoring) and 1000 rows (batch).

  /usr/bin/python3 bench/compare-ort/ml_bench.py [--threads 1,2] [--iters 200] [--rounds 3] [--markdown FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ml_models  # noqa: E402
from nbits_parity import ROOT, build_ort_bench, write_inputs  # noqa: E402
from onnx import TensorProto  # noqa: E402


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def models():
    """(name, description, ModelProto, feature count)"""
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    out = []
    x, y = ml_models.data(3000, 20, 5, 4)
    rf = RandomForestClassifier(n_estimators=100, max_depth=12, random_state=0, n_jobs=1).fit(x, y)
    trees = [e.tree_ for e in rf.estimators_]

    def proba(t, tree, i):
        v = tree.value[i][0]
        return [(k, w / v.sum() / len(trees)) for k, w in enumerate(v)]
    out.append(("rf100_clf4", "RandomForestClassifier, 100 trees, depth <= 12, 4 classes, 20 features",
                ml_models.classifier_model(ml_models.tree_attrs(trees, proba, "class"), 20, rf.classes_.tolist()), 20))
    xr, yr = ml_models.data(3000, 20, 6)
    gb = GradientBoostingRegressor(n_estimators=300, max_depth=6, learning_rate=0.05, random_state=0).fit(xr, yr)
    gtrees = [e.tree_ for e in gb.estimators_[:, 0]]
    attrs = ml_models.tree_attrs(gtrees, lambda t, tree, i: [(0, gb.learning_rate * tree.value[i][0][0])], "target")
    out.append(("gb300_reg", "GradientBoostingRegressor, 300 trees, depth 6, 20 features",
                ml_models.regressor_model(attrs, 20, 1, base_values=[float(gb._raw_predict_init(xr[:1])[0, 0])]), 20))
    spec = ml_models.RandomForestSpec(500, 7, 50, 1, seed=3, modes=("BRANCH_LT",), missing_rate=0.5)
    out.append(("lgbm500_bin", "LightGBM-style binary, 500 trees, depth 7, 50 features, NaN routing",
                ml_models.regressor_model(spec.weights("target"), 50, 1, post_transform="NONE"), 50))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/ml-bench"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rows", default="1,1000")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    build_ort_bench(args.ort_bench)
    os.makedirs(args.work, exist_ok=True)
    rows_out = []
    for name, what, model, nf in models():
        path = os.path.join(args.work, name + ".onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        for rows in [int(r) for r in args.rows.split(",")]:
            x = ml_models.x_with_nans(rows, nf, 1, 0.05 if "lgbm" in name else 0.0)
            d = os.path.join(args.work, "%s_%d" % (name, rows))
            flags = write_inputs({"X": x}, d)
            for t in [int(v) for v in args.threads.split(",")]:
                iters = max(20, args.iters if rows == 1 else args.iters // 10)
                s_med, o_med = [], []
                for _ in range(args.rounds):
                    s_med.append(json.loads(sh([args.strata, "bench", path, "-t", str(t), "--iters", str(iters),
                                                "--creations", "1", "--json"] + flags))["latency_ms"]["median"])
                    o_med.append(json.loads(sh([args.ort_bench, path, d, "--threads", str(t), "--iters", str(iters),
                                                "--creations", "1"]))["latency_ms"]["median"])
                s, o = statistics.median(s_med), statistics.median(o_med)
                rows_out.append((name, rows, t, s, o, s / o, s_med, o_med))
                print("%-12s rows %5d threads %d: strata %.4f ms  ORT %.4f ms  ratio %.2f   (%s | %s)" % (
                    name, rows, t, s, o, s / o, ", ".join("%.4f" % v for v in s_med),
                    ", ".join("%.4f" % v for v in o_med)), flush=True)
    table = ["| model | rows | threads | strata ms | ORT ms | strata / ORT |", "| --- | --- | --- | --- | --- | --- |"]
    table += ["| %s | %d | %d | %.4f | %.4f | %.2f |" % r[:6] for r in rows_out]
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
