#!/usr/bin/python3
"""Per-run cost of the Python binding, side by side with `strata bench` (the C++ engine
called directly) on the same model, threads and inputs, alternating rounds.

usage: /usr/bin/python3 bench/python/binding_overhead.py [MODEL ...] [--threads N] [--iters K] [--rounds R]
       (default models: bench/models/out/mlp.onnx and examples/digits.onnx; run from the repository
       root after the release build; PYTHONPATH is set to the build tree's package here)

Prints, per model, the median latency of Session.run, of IoBinding.run and of `strata
bench` (each round's median, pooled over rounds), and the binding's overhead in microseconds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, "build", "release")
sys.path.insert(0, os.path.join(BUILD, "lib", "python3", "dist-packages"))

import numpy as np  # noqa: E402

import strata  # noqa: E402


def feeds_for(session, rng):
    feeds = {}
    for i in session.inputs:
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if i.dtype == "float32":
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif i.dtype == "int64":
            feeds[i.name] = np.ones(shape, np.int64)
        else:
            raise SystemExit(f"{i.name}: {i.dtype} inputs are not handled by this script")
    return feeds


def time_py(fn, iters):
    for _ in range(max(5, iters // 20)):
        fn()
    t = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        t.append(time.perf_counter_ns() - t0)
    return statistics.median(t) / 1e6


def time_cli(model, threads, iters, tmp, feeds):
    args = [os.path.join(BUILD, "bin", "strata"), "bench", model, "-t", str(threads), "--iters", str(iters), "--json",
            "--creations", "1"]
    for name, arr in feeds.items():
        path = os.path.join(tmp, f"{len(args)}.npy")
        np.save(path, arr)
        args += ["-i", f"{name}={path}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["latency_ms"]["median"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*",
                    default=[os.path.join(ROOT, "bench/models/out/mlp.onnx"), os.path.join(ROOT, "examples/digits.onnx")])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"strata {strata.__version__}, {a.threads} thread(s), {a.iters} runs x {a.rounds} rounds, alternating")
    print("| model | strata bench (C++) ms | Session.run ms | IoBinding.run ms | run overhead us | binding overhead us |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models:
            s = strata.Session(model, threads=a.threads)
            feeds = feeds_for(s, rng)
            outs = [np.empty([d if isinstance(d, int) else 1 for d in o.shape], np.float32) for o in s.outputs]
            b = strata.IoBinding(s)
            for k, v in feeds.items():
                b.bind_input(k, v)
            ref = s.run(None, feeds)
            for o, arr, r in zip(s.outputs, outs, ref):
                arr.resize(r.shape, refcheck=False)
                b.bind_output(o.name, arr)
            cli, run, bind = [], [], []
            for _ in range(a.rounds):
                cli.append(time_cli(model, a.threads, a.iters, tmp, feeds))
                run.append(time_py(lambda: s.run(None, feeds), a.iters))
                bind.append(time_py(b.run, a.iters))
            c, r, bb = statistics.median(cli), statistics.median(run), statistics.median(bind)
            print(f"| {os.path.basename(model)} | {c:.4f} | {r:.4f} | {bb:.4f} | {(r - c) * 1e3:.1f} | "
                  f"{(bb - c) * 1e3:.1f} |")
            print(f"<!-- rounds: cli {[round(x, 4) for x in cli]} run {[round(x, 4) for x in run]} "
                  f"binding {[round(x, 4) for x in bind]} -->")


if __name__ == "__main__":
    main()
