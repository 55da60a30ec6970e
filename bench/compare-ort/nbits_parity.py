#!/usr/bin/python3
"""ORT parity of `strata quantize` models (issue 8).

Quantizes the bench MLP and a transformer (make_models.py's bert, --small: 2 layers) with
`strata quantize` in four variants (4/8 bits x asymmetric/symmetric, block 32), runs each
quantized model in strata (`strata run -o`) and in ONNX Runtime 1.30 (ort_bench
--save-outputs) on the same inputs (`strata bench --save-inputs`), and asserts that every
output's max |strata - ort| / max |ort| is <= --tol (1e-3).

  /usr/bin/python3 bench/compare-ort/nbits_parity.py [--strata PATH] [--ort-bench PATH]
      [--work DIR] [--models mlp,bert] [--tol 1e-3] [--markdown FILE]

--ort-bench defaults to build/nbits-ort/ort_bench, compiled from ort_bench.cc against
bench/ort (see run.sh) when missing. Exit status 1 when any variant exceeds the tolerance.
"""
import argparse
import glob
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VARIANTS = [(4, False), (4, True), (8, False), (8, True)]


def sh(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit("nbits_parity: command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-4000:]))
    return r.stdout


def build_ort_bench(path):
    ort_dir = os.path.join(ROOT, "bench", "ort")
    lib = os.path.join(ort_dir, "node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1")
    hdr = glob.glob(os.path.join(ort_dir, "node_modules/com.github.asus4.onnxruntime/**/ios-arm64/**/Headers/"
                                 "onnxruntime_c_api.h"), recursive=True)
    if not os.path.exists(lib) or not hdr:
        sys.exit("nbits_parity: ONNX Runtime is not installed in bench/ort (run bench/compare-ort/run.sh --quick once)")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    src = os.path.join(ROOT, "bench/compare-ort/ort_bench.cc")
    common = os.path.join(ROOT, "bench/compare-ort/ort_check.h")
    if os.path.exists(path) and os.path.getmtime(path) >= max(os.path.getmtime(src), os.path.getmtime(common)):
        return
    sh(["g++", "-std=c++17", "-O2", "-I" + os.path.dirname(hdr[0]), src, "-o", path, lib,
        "-Wl,-rpath," + os.path.dirname(os.path.realpath(lib))])


def model_path(name, work):
    if name == "mlp":
        p = os.path.join(ROOT, "bench/models/out/mlp.onnx")
        if not os.path.exists(p):
            sh(["/usr/bin/python3", os.path.join(ROOT, "bench/models/make_models.py"), os.path.join(work, "models"),
                "--only", "mlp"])
            p = os.path.join(work, "models", "mlp.onnx")
        return p
    # A 2-layer BERT (same architecture as bench's bert, small enough for a quick check).
    p = os.path.join(work, "models", name + ".onnx")
    if not os.path.exists(p):
        sh(["/usr/bin/python3", os.path.join(ROOT, "bench/models/make_models.py"), os.path.join(work, "models"),
            "--only", name, "--small"])
    return p


def write_inputs(feeds, d):
    """feeds (name -> array) as d/in<i>.npy and d/inputs.txt (ort_bench's list); returns strata's -i flags."""
    os.makedirs(d, exist_ok=True)
    flags = []
    with open(os.path.join(d, "inputs.txt"), "w") as f:
        for i, (k, v) in enumerate(feeds.items()):
            np.save(os.path.join(d, "in%d.npy" % i), v)
            f.write("%s\tin%d.npy\n" % (k, i))
            flags += ["-i", "%s=%s" % (k, os.path.join(d, "in%d.npy" % i))]
    return flags


def run_strata_and_ort(strata, ort_bench, model, feeds, work):
    """Runs model once in strata (`strata run -o`) and once in ORT (`ort_bench --save-outputs`) on feeds
    (written under work/inputs); returns ({output: array} of strata, of ORT)."""
    flags = write_inputs(feeds, os.path.join(work, "inputs"))
    dirs = os.path.join(work, "strata"), os.path.join(work, "ort")
    for d in dirs:
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    sh([strata, "run", model, "-o", dirs[0]] + flags)
    sh([ort_bench, model, os.path.join(work, "inputs"), "--warmup", "0", "--iters", "1", "--creations", "1",
        "--save-outputs", dirs[1]])
    return load_outputs(dirs[0]), load_outputs(dirs[1])


def load_outputs(d):
    return {os.path.basename(f)[:-4]: np.load(f) for f in sorted(glob.glob(os.path.join(d, "*.npy")))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/nbits-parity"))
    ap.add_argument("--models", default="mlp,bert")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--markdown", help="also write the result table to this file")
    args = ap.parse_args()
    if not os.access(args.strata, os.X_OK):
        sys.exit("nbits_parity: %s is not built (ninja -C build/release strata_cli)" % args.strata)
    build_ort_bench(args.ort_bench)
    os.makedirs(args.work, exist_ok=True)

    rows, failed = [], False
    for name in args.models.split(","):
        src = model_path(name, args.work)
        for bits, sym in VARIANTS:
            tag = "%s_int%d_%s" % (name, bits, "sym" if sym else "asym")
            q = os.path.join(args.work, tag + ".onnx")
            cmd = [args.strata, "quantize", src, q, "--bits", str(bits), "--block-size", str(args.block_size),
                   "--no-compare"]
            sh(cmd + (["--symmetric"] if sym else []))
            inputs = os.path.join(args.work, tag + "_inputs")
            sh([args.strata, "bench", q, "--save-inputs", inputs, "--warmup", "0", "--iters", "1", "--creations", "1"])
            feeds = []
            with open(os.path.join(inputs, "inputs.txt")) as f:
                for line in f:
                    if "\t" in line:
                        n, file = line.rstrip("\n").split("\t")
                        feeds += ["-i", "%s=%s" % (n, os.path.join(inputs, file))]
            s_dir, o_dir = os.path.join(args.work, tag + "_strata"), os.path.join(args.work, tag + "_ort")
            for d in (s_dir, o_dir):
                os.makedirs(d, exist_ok=True)
                for f in glob.glob(os.path.join(d, "*.npy")):
                    os.remove(f)
            sh([args.strata, "run", q, "-o", s_dir] + feeds)
            sh([args.ort_bench, q, inputs, "--warmup", "0", "--iters", "1", "--creations", "1", "--save-outputs",
                o_dir])
            s_out, o_out = load_outputs(s_dir), load_outputs(o_dir)
            if set(s_out) != set(o_out) or not s_out:
                sys.exit("nbits_parity: %s: outputs differ by name: strata %s, ort %s" % (tag, sorted(s_out),
                                                                                          sorted(o_out)))
            worst_rel, worst_abs = 0.0, 0.0
            for k in s_out:
                a, b = s_out[k].astype(np.float64), o_out[k].astype(np.float64)
                if a.shape != b.shape:
                    sys.exit("nbits_parity: %s: output %s has shape %s in strata, %s in ort" % (tag, k, a.shape,
                                                                                                 b.shape))
                diff = float(np.max(np.abs(a - b)))
                worst_abs = max(worst_abs, diff)
                worst_rel = max(worst_rel, diff / max(float(np.max(np.abs(b))), 1e-30))
            ok = worst_rel <= args.tol
            failed |= not ok
            rows.append((name, bits, "symmetric" if sym else "asymmetric", worst_abs, worst_rel, ok))
            print("%-22s max|diff| %.3g  relative %.3g  %s" % (tag, worst_abs, worst_rel, "ok" if ok else "FAIL"),
                  flush=True)

    table = ["| model | bits | zero points | max abs diff | max abs diff / max abs output | <= %g |" % args.tol,
             "| --- | --- | --- | --- | --- | --- |"]
    for name, bits, sym, d, r, ok in rows:
        table.append("| %s | %d | %s | %.3g | %.3g | %s |" % (name, bits, sym, d, r, "yes" if ok else "**no**"))
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
