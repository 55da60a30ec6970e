#!/usr/bin/python3
"""ORT parity of the ai.onnx.ml map ops (ZipMap, CastMap, DictVectorizer): strata against
ONNX Runtime 1.30, on maps and sequences of maps.

onnxruntime-node cannot pass maps or sequences, so ONNX Runtime runs through its C API in
ort_maps (ort_maps.cc, compiled here into bench/ort on first use against the headers that
run.sh fetches). strata runs through its Python binding from the build tree: map inputs are
dicts, ZipMap outputs lists of dicts. Cases: scikit-learn classifiers ending in ZipMap as
skl2onnx writes them (int and string labels, unsorted and repeated labels, [C] input, no
rows), CastMap in every cast_to x map_form x value type, DictVectorizer for both vocabulary
types and every value type (repeated and absent keys), and a DictVectorizer -> LinearRegressor
pipeline. Map keys must come back in the same order and be equal; values and tensors within
--tol (relative), strings and integers exactly.

  /usr/bin/python3 bench/compare-ort/map_parity.py [--tol 1e-6] [--markdown FILE] [--work DIR]

Needs the release build and bench/ort (bash bench/compare-ort/run.sh --quick installs it).
Exit status 1 when a case differs.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
ORT_DIR = os.path.join(ROOT, "bench", "ort")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "build", "release", "lib", "python3", "dist-packages"))

from ml_models import data, ml_model, node, vi  # noqa: E402
import strata  # noqa: E402

ONNX_ELEM = {"float": TensorProto.FLOAT, "double": TensorProto.DOUBLE, "int64": TensorProto.INT64,
             "string": TensorProto.STRING}
NP_OF = {"float": np.float32, "double": np.float64, "int64": np.int64, "string": object}


def ort_maps_binary():
    """bench/ort/ort_maps, compiled when missing or older than its source."""
    exe = os.path.join(ORT_DIR, "ort_maps")
    src = [os.path.join(HERE, "ort_maps.cc"), os.path.join(HERE, "ort_check.h")]
    if os.path.exists(exe) and all(os.path.getmtime(exe) >= os.path.getmtime(s) for s in src):
        return exe
    hdrs = glob.glob(os.path.join(ORT_DIR, "node_modules", "com.github.asus4.onnxruntime", "**", "ios-arm64", "**",
                                  "Headers", "onnxruntime_c_api.h"), recursive=True)
    lib = os.path.join(ORT_DIR, "node_modules", "onnxruntime-node", "bin", "napi-v6", "linux", "x64",
                       "libonnxruntime.so.1")
    if not hdrs or not os.path.exists(lib):
        sys.exit("map_parity: ONNX Runtime is not installed in bench/ort (bash bench/compare-ort/run.sh --quick)")
    os.makedirs(os.path.join(ORT_DIR, "lib"), exist_ok=True)
    link = os.path.join(ORT_DIR, "lib", "libonnxruntime.so")
    if not os.path.exists(link):
        os.symlink(lib, link)
    subprocess.run(["g++", "-std=c++17", "-O1", "-I" + os.path.dirname(hdrs[0]), src[0], "-o", exe,
                    "-L" + os.path.join(ORT_DIR, "lib"), "-lonnxruntime", "-Wl,-rpath," + os.path.dirname(lib)],
                   check=True)
    return exe


# ---------------------------------------------------------------- cases

def map_type(key, value="float"):
    tp = onnx.TypeProto()
    tp.map_type.key_type = ONNX_ELEM[key]
    tp.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(ONNX_ELEM[value], None))
    return tp


def seq_map_type(key):
    return helper.make_sequence_type_proto(map_type(key))


class Case:
    """A model and its feeds. `check`, if given, takes strata's outputs ({name: value}) and
    returns a note for the table (e.g. agreement with scikit-learn)."""

    def __init__(self, name, what, model, feeds, check=None):
        self.name, self.what, self.model, self.feeds, self.check = name, what, model, feeds, check


def tensor_feed(a):
    a = np.asarray(a)
    if a.dtype.kind in "OUS":
        return {"kind": "tensor", "dtype": "string", "shape": list(a.shape), "data": [str(v) for v in a.reshape(-1)]}
    dtype = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.int64): "int64"}[a.dtype]
    return {"kind": "tensor", "dtype": dtype, "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def map_feed(key, value, d):
    return {"kind": "map", "key": key, "value": value, "keys": list(d), "values": list(d.values())}


def zipmap_cases():
    from sklearn.linear_model import LogisticRegression
    cases = []
    x, y = data(300, 6, 41, 3)
    lr = LogisticRegression(max_iter=500).fit(x, y)
    fl = lambda a: [float(v) for v in np.asarray(a, np.float64).reshape(-1)]  # noqa: E731

    def classifier(labels, zip_labels=None, shape=("N", 6)):
        zip_labels = labels if zip_labels is None else zip_labels
        key = "string" if isinstance(zip_labels[0], str) else "int64"
        lab = {"classlabels_strings": labels} if isinstance(labels[0], str) else {"classlabels_ints": labels}
        zl = {"classlabels_strings": zip_labels} if key == "string" else {"classlabels_int64s": zip_labels}
        nodes = [node("LinearClassifier", ["X"], ["output_label", "probabilities"], coefficients=fl(lr.coef_),
                      intercepts=fl(lr.intercept_), multi_class=1, post_transform="SOFTMAX", **lab),
                 node("ZipMap", ["probabilities"], ["output_probability"], **zl)]
        ltype = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
        return ml_model(nodes, [vi("X", TensorProto.FLOAT, list(shape))],
                        [vi("output_label", ltype, [shape[0]] if len(shape) == 2 else [1]),
                         helper.make_value_info("output_probability", seq_map_type(key))], ml_opset=1)

    rows = {"X": x[:40]}
    cases.append(Case("zipmap_logreg_int", "LogisticRegression -> ZipMap, int labels (skl2onnx default)",
                      classifier([0, 1, 2]), rows))
    cases.append(Case("zipmap_strings_unsorted", "ZipMap, string labels z, a, m (keys come back sorted)",
                      classifier(["z", "a", "m"]), rows))
    cases.append(Case("zipmap_int_unsorted", "ZipMap, int labels 30, -4, 12", classifier([30, -4, 12]), rows))
    cases.append(Case("zipmap_repeated_label", "ZipMap, labels 1, 0, 1 (a label listed twice)",
                      classifier([0, 1, 2], [1, 0, 1]), rows))
    cases.append(Case("zipmap_one_row_1d", "ZipMap on a [C] input",
                      ml_model([node("ZipMap", ["X"], ["Z"], classlabels_int64s=[5, 6, 7])],
                               [vi("X", TensorProto.FLOAT, [3])],
                               [helper.make_value_info("Z", seq_map_type("int64"))], ml_opset=1),
                      {"X": np.array([0.25, 0.5, 0.25], np.float32)}))
    cases.append(Case("zipmap_no_rows", "ZipMap on 0 rows", classifier(["a", "b", "c"]), {"X": x[:0]}))
    return cases


def castmap_cases():
    cases = []
    values = {"float": {0: 1.5, 2: -2.25, 5: 300.0}, "string": {0: "1.5", 2: "-2", 5: " 3e2"}}
    ints_from_strings = {0: "-42", 2: "7", 5: "12abc"}
    for value in ("float", "string"):
        for cast in ("TO_FLOAT", "TO_STRING", "TO_INT64"):
            for form in ("DENSE", "SPARSE"):
                out = {"TO_FLOAT": TensorProto.FLOAT, "TO_STRING": TensorProto.STRING,
                       "TO_INT64": TensorProto.INT64}[cast]
                attrs = {"cast_to": cast, "map_form": form}
                if form == "SPARSE":
                    attrs["max_map"] = 7
                m = ml_model([node("CastMap", ["M"], ["Y"], **attrs)], [helper.make_value_info("M", map_type("int64", value))],
                             [vi("Y", out, [1, None])], ml_opset=1)
                d = ints_from_strings if (value == "string" and cast == "TO_INT64") else values[value]
                cases.append(Case(f"castmap_{value}_{cast.lower()}_{form.lower()}",
                                  f"CastMap int64->{value}, {cast}, {form}", m, {"M": ("int64", value, d)}))
    m = ml_model([node("CastMap", ["M"], ["Y"], map_form="SPARSE", max_map=4)],
                 [helper.make_value_info("M", map_type("int64"))], [vi("Y", TensorProto.FLOAT, [1, 4])], ml_opset=1)
    cases.append(Case("castmap_keys_past_max_map", "CastMap SPARSE, keys 1 and 9, max_map 4", m,
                      {"M": ("int64", "float", {9: 9.0, 1: 1.0})}))
    m = ml_model([node("CastMap", ["M"], ["Y"])], [helper.make_value_info("M", map_type("int64"))],
                 [vi("Y", TensorProto.FLOAT, [1, None])], ml_opset=1)
    cases.append(Case("castmap_empty", "CastMap DENSE, empty map", m, {"M": ("int64", "float", {})}))
    return cases


def dictvectorizer_cases():
    cases = []
    # The value types the schema allows per key type: string keys with numbers, int64 keys with
    # float, double or string.
    feeds = {"float": {"b": 2.5, "a": 1.0, "zz": 9.0}, "double": {"b": 2.5, "a": 1.0}, "int64": {"b": 7, "a": -3}}
    for value, d in feeds.items():
        m = ml_model([node("DictVectorizer", ["M"], ["Y"], string_vocabulary=["a", "c", "b", "a"])],
                     [helper.make_value_info("M", map_type("string", value))], [vi("Y", ONNX_ELEM[value], [1, 4])],
                     ml_opset=1)
        cases.append(Case(f"dictvec_string_{value}", f"DictVectorizer string vocabulary (a repeated, c absent), "
                          f"{value} values", m, {"M": ("string", value, d)}))
    int_feeds = {"float": {30: 3.0, 10: 1.0, 99: 9.0}, "double": {-1: 0.5}, "string": {30: "thirty", 10: "ten"}}
    for value, d in int_feeds.items():
        m = ml_model([node("DictVectorizer", ["M"], ["Y"], int64_vocabulary=[10, -1, 30])],
                     [helper.make_value_info("M", map_type("int64", value))], [vi("Y", ONNX_ELEM[value], [1, 3])],
                     ml_opset=1)
        cases.append(Case(f"dictvec_int64_{value}", f"DictVectorizer int64 vocabulary, {value} values", m,
                          {"M": ("int64", value, d)}))
    # A pair the schema does not allow: ONNX Runtime refuses the model, strata the run.
    m = ml_model([node("DictVectorizer", ["M"], ["Y"], string_vocabulary=["a"])],
                 [helper.make_value_info("M", map_type("string", "string"))], [vi("Y", TensorProto.STRING, [1, 1])],
                 ml_opset=1)
    cases.append(Case("dictvec_string_string", "DictVectorizer, map(string, string): not a schema type", m,
                      {"M": ("string", "string", {"a": "x"})}))
    # scikit-learn DictVectorizer -> LinearRegression on records, one record per run.
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LinearRegression
    rng = np.random.default_rng(5)
    names = ["age", "height", "income", "weight"]
    records = [{n: float(rng.normal()) for n in names if rng.random() < 0.8} for _ in range(60)]
    target = [sum((i + 1) * r.get(n, 0.0) for i, n in enumerate(names)) for r in records]
    dv = DictVectorizer(sparse=False).fit(records)
    reg = LinearRegression().fit(dv.transform(records), target)
    m = ml_model([node("DictVectorizer", ["M"], ["row"], string_vocabulary=list(dv.feature_names_)),
                  node("LinearRegressor", ["row"], ["Y"], coefficients=[float(c) for c in reg.coef_],
                       intercepts=[float(reg.intercept_)])],
                 [helper.make_value_info("M", map_type("string"))], [vi("Y", TensorProto.FLOAT, [1, 1])], ml_opset=1)
    for i in (0, 1, 2):
        cases.append(Case(f"dictvec_linreg_{i}", f"DictVectorizer -> LinearRegressor (scikit-learn), record {i}", m,
                          {"M": ("string", "float", records[i])}))
    return cases


# ---------------------------------------------------------------- running and comparing

def run_ort(exe, model_path, case, work):
    spec = {}
    for k, v in case.feeds.items():
        spec[k] = map_feed(*v) if isinstance(v, tuple) else tensor_feed(v)
    path = os.path.join(work, "feeds.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    r = subprocess.run([exe, model_path, path], capture_output=True, text=True)
    if r.returncode != 0:
        return r.stderr.strip()
    return {o["name"]: o for o in json.loads(r.stdout)["outputs"]}


def run_strata(model_path, case):
    feeds = {k: (v[2] if isinstance(v, tuple) else v) for k, v in case.feeds.items()}
    try:
        with strata.Session(model_path, threads=1) as s:
            return dict(zip([o.name for o in s.outputs], s.run(None, feeds)))
    except strata.Error as e:
        return str(e)


def rel_diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1.0))


def compare_values(got, want, tol):
    """(ok, max relative difference, note) of a strata output against ort_maps' JSON."""
    if want["kind"] == "tensor":
        if not isinstance(got, np.ndarray):
            return False, float("inf"), "strata returned %s" % type(got).__name__
        if list(got.shape) != want["shape"]:
            return False, float("inf"), "shape %s vs %s" % (list(got.shape), want["shape"])
        if want["dtype"] in ("float", "double"):
            d = rel_diff(got.reshape(-1), want["data"])
            return d <= tol, d, "%s %.1e" % (want["dtype"], d)
        ok = got.reshape(-1).tolist() == want["data"]
        return ok, 0.0 if ok else float("inf"), "%s %s" % (want["dtype"], "equal" if ok else "differ")
    if want["kind"] == "seq":
        if not isinstance(got, list) or len(got) != len(want["items"]):
            return False, float("inf"), "sequence length %s vs %d" % (
                len(got) if isinstance(got, list) else type(got).__name__, len(want["items"]))
        worst = 0.0
        for g, w in zip(got, want["items"]):
            ok, d, note = compare_values(g, w, tol)
            if not ok:
                return ok, d, note
            worst = max(worst, d)
        return True, worst, "%d maps, keys equal, values %.1e" % (len(got), worst)
    if not isinstance(got, dict):
        return False, float("inf"), "strata returned %s" % type(got).__name__
    if list(got) != want["keys"]:
        return False, float("inf"), "keys %s vs %s" % (list(got), want["keys"])
    d = rel_diff(list(got.values()), want["values"])
    return d <= tol, d, "map values %.1e" % d


def main():
    return run_cases(__doc__, lambda: zipmap_cases() + castmap_cases() + dictvectorizer_cases(), "map_parity_")


def run_cases(doc, make_cases, prefix):
    """Parses the command line, runs every case in both runtimes, prints and writes the table;
    returns the exit status (1 when a case differs)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--markdown")
    ap.add_argument("--work")
    args = ap.parse_args()
    exe = ort_maps_binary()
    work = args.work or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    cases = make_cases()
    rows, failed = [], 0
    for c in cases:
        path = os.path.join(work, c.name + ".onnx")
        onnx.save(c.model, path)
        want = run_ort(exe, path, c, work)
        got = run_strata(path, c)
        if isinstance(want, str) or isinstance(got, str):
            ok = isinstance(want, str) and isinstance(got, str)  # both refuse it
            result = "both refuse" if ok else ("ORT: " + want if isinstance(want, str) else "strata: " + got)
        else:
            notes, ok = [], set(got) == set(want)
            for name, w in want.items():
                if name not in got:
                    notes.append("%s missing" % name)
                    continue
                o, _, note = compare_values(got[name], w, args.tol)
                ok = ok and o
                notes.append("%s: %s" % (name, note))
            if c.check:
                notes.append(c.check(got))
            result = "; ".join(notes)
        failed += not ok
        rows.append((c.name, c.what, "ok" if ok else "DIFFERS", result))
        print("%-32s %-8s %s" % (c.name, "ok" if ok else "DIFFERS", result), flush=True)
    print("%d of %d cases agree" % (len(cases) - failed, len(cases)))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| case | model | result | outputs |\n| --- | --- | --- | --- |\n")
            for r in rows:
                f.write("| %s |\n" % " | ".join(r))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
