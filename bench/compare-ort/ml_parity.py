#!/usr/bin/python3
"""ORT parity of the ai.onnx.ml (classical ML) ops: strata against ONNX Runtime 1.30.

Models come from scikit-learn estimators (Debian's python3-sklearn) written here into ONNX-ML
nodes the way skl2onnx lays them out (tree ensembles, linear models, SVMs, scalers, encoders:
see ml_models.py), plus hand-made cases for the corners the converters rarely produce (every
post transform, base value count, aggregate function, branch mode, NaN routing, input type,
double-tensor attributes, string labels). Each model runs once in strata (its Python binding,
from the build tree) and once in ONNX Runtime (onnxruntime-node through ort_run.js, which also
returns int64 and string outputs), on the same seeded inputs, 1 thread.

Scores must agree within --tol (max |strata - ort| / max(|ort|, 1)); labels and every
integer or string output exactly. For the scikit-learn models the table also gives how many
rows' labels (or values, within 1e-4) agree with scikit-learn's own predict.

  /usr/bin/python3 bench/compare-ort/ml_parity.py [--cases a,b] [--tol 1e-5] [--markdown FILE] [--work DIR]

Needs the release build and bench/ort (bash bench/compare-ort/run.sh --quick installs it).
Exit status 1 when a case differs.
"""
import argparse
import base64
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "build", "release", "lib", "python3", "dist-packages"))

import ml_models  # noqa: E402
import strata  # noqa: E402

NP_TYPES = {np.float32: "float32", np.float64: "float64", np.int64: "int64", np.int32: "int32", np.bool_: "bool",
            np.uint8: "uint8", np.int8: "int8", np.float16: "float16"}


def run_ort(model_path, feeds, work, threads=1):
    """Runs the model once in ONNX Runtime (ort_run.js): {name: array}, or its error message."""
    req = {"model": model_path, "threads": threads, "feeds": {}}
    for k, v in feeds.items():
        if v.dtype.kind in "OUS":
            req["feeds"][k] = {"type": "string", "dims": list(v.shape), "data": [str(s) for s in v.reshape(-1)]}
        else:
            req["feeds"][k] = {"type": NP_TYPES[v.dtype.type], "dims": list(v.shape),
                               "data": base64.b64encode(np.ascontiguousarray(v).tobytes()).decode()}
    rq, rs = os.path.join(work, "ort_request.json"), os.path.join(work, "ort_response.json")
    with open(rq, "w") as f:
        json.dump(req, f)
    subprocess.run(["node", os.path.join(HERE, "ort_run.js"), rq, rs], check=True)
    with open(rs) as f:
        res = json.load(f)
    if "error" in res:
        return res["error"]
    out = {}
    for k, spec in res.items():
        if spec["type"] == "string":
            out[k] = np.array(spec["data"], dtype=object).reshape(spec["dims"])
        else:
            dt = {v: k for k, v in NP_TYPES.items()}[spec["type"]]
            out[k] = np.frombuffer(base64.b64decode(spec["data"]), dtype=dt).reshape(spec["dims"])
    return out


def compare(a, b):
    """(ok, max relative difference or mismatch count, description)."""
    if a.shape != b.shape:
        return False, float("inf"), "shape %s vs %s" % (a.shape, b.shape)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if a.size == 0:
            return True, 0.0, "empty"
        nan_ok = np.array_equal(np.isnan(a64), np.isnan(b64))
        a64, b64 = np.nan_to_num(a64), np.nan_to_num(b64)
        rel = float(np.max(np.abs(a64 - b64)) / max(float(np.max(np.abs(b64))), 1.0))
        return nan_ok, rel, "float"
    bad = int(np.sum(a.reshape(-1) != b.reshape(-1)))
    return bad == 0, bad, "exact"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "ml-parity"))
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--markdown", help="also write the result table to this file")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cases = ml_models.all_cases()
    if args.cases:
        want = set(args.cases.split(","))
        cases = [c for c in cases if c.name in want]
    rows, failed = [], False
    for c in cases:
        path = os.path.join(args.work, c.name + ".onnx")
        with open(path, "wb") as f:
            f.write(c.model.SerializeToString())
        try:
            s = strata.Session(path, threads=1)
            got = dict(zip([o.name for o in s.outputs], s.run(None, c.feeds)))
        except strata.Error as e:
            got = "strata: %s: %s" % (type(e).__name__, e)
        if c.ort_alt is not None:
            alt = os.path.join(args.work, c.name + "_ort.onnx")
            with open(alt, "wb") as f:
                f.write(c.ort_alt[0].SerializeToString())
            ref = run_ort(alt, c.ort_alt[1], args.work)
        else:
            ref = run_ort(path, c.feeds, args.work)
        notes, worst, ok = [], 0.0, True
        if isinstance(ref, str) or isinstance(got, str):
            ok = isinstance(ref, str) and isinstance(got, str)  # both refuse: reported, not failed
            notes.append(("ORT: " + ref) if isinstance(ref, str) else "ORT ran")
            notes.append(got if isinstance(got, str) else "strata ran")
        else:
            for name, r in ref.items():
                g = got.get(name)
                if g is None:
                    ok = False
                    notes.append("%s missing in strata" % name)
                    continue
                good, diff, kind = compare(g, r)
                if kind == "float":
                    worst = max(worst, diff)
                    good = good and diff <= args.tol
                    notes.append("%s %.1e" % (name, diff))
                elif kind == "exact":
                    notes.append("%s %s" % (name, "equal" if good else "%d differ" % diff))
                else:
                    notes.append("%s %s" % (name, kind))
                ok = ok and good
            if c.reference is not None and not isinstance(got, str):
                notes.append(c.reference(got))
        failed = failed or not ok
        rows.append((c.name, c.what, "ok" if ok else "FAIL", "; ".join(notes)))
        print("%-4s %-34s %s" % (rows[-1][2], c.name, rows[-1][3]), flush=True)
    table = ["| case | model | result | max rel. difference / agreement |", "| --- | --- | --- | --- |"]
    table += ["| %s | %s | %s | %s |" % r for r in rows]
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    print("ml_parity: %d cases, %d failed" % (len(rows), sum(r[2] != "ok" for r in rows)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
