#!/usr/bin/python3
"""strata against ONNX Runtime on CNNs outside the benchmark set (torchvision's zoo).

The seven benchmark models are what strata was tuned on; this checks that what it does
carries over. Each model is exported from torchvision with random weights (initialised and
BN-calibrated as make_models.py does for its CNNs) into bench/models/out/zoo/, then:

  * outputs: strata fp32 against ONNX Runtime on the same seeded input (max |a - b| /
    max |b|), and strata bf16 against strata fp32;
  * time: median latency per process of ORT, strata fp32 and strata bf16, alternating
    A/B/C for --rounds rounds, each process warming up for --warmup-ms first; the table
    gives the median of the process medians and the ratios.

ORT runs through ort_bench (bench/compare-ort/run.sh builds it). Prints a markdown table.

  bench/compare-ort/zoo.py [--models resnet34,efficientnet_b0] [--threads 1] [--rounds 2]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["resnet34", "resnet101", "densenet121", "efficientnet_b0", "mobilenet_v3_large", "regnet_y_400mf",
          "shufflenet_v2_x1_0", "mnasnet1_0", "squeezenet1_1", "convnext_tiny", "resnext50_32x4d",
          "vit_b_32", "swin_t"]


def export(name, path):
    sys.path.insert(0, os.path.join(ROOT, "bench/models"))
    import torch
    import torchvision
    import make_models
    torch.manual_seed(0)
    model = make_models.calibrated_cnn(getattr(torchvision.models, name)(weights=None))
    torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), path, opset_version=17, input_names=["input"],
                      output_names=["logits"], do_constant_folding=True, **make_models.export_kwargs())


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[-1000:]))
    return json.loads(r.stdout)


def load(d):
    return {os.path.basename(f): np.load(f) for f in glob.glob(os.path.join(d, "*.npy"))}


def max_rel_err(a, ref):
    return max(float(np.max(np.abs(a[k] - ref[k])) / max(float(np.max(np.abs(ref[k]))), 1e-30)) for k in ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "bench/ort/ort_bench"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "bench/models/out/zoo"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--warmup-ms", type=float, default=1000.0)
    args = ap.parse_args()
    for exe in (args.strata, args.ort_bench):
        if not os.access(exe, os.X_OK):
            sys.exit("zoo.py: %s is not an executable (build strata; bench/compare-ort/run.sh builds ort_bench)" % exe)
    os.makedirs(args.dir, exist_ok=True)
    rows = []
    for m in args.models.split(","):
        path = os.path.join(args.dir, m + ".onnx")
        if not os.path.exists(path):
            print("exporting %s" % m, file=sys.stderr, flush=True)
            export(m, path)
        d = os.path.join(args.dir, "run_" + m)
        os.makedirs(os.path.join(d, "ort"), exist_ok=True)
        run_json([args.strata, "bench", path, "--threads", "1", "--iters", "1", "--warmup", "0", "--json", "--seed",
                  "42", "--save-inputs", d])
        feeds = []
        with open(os.path.join(d, "inputs.txt")) as f:
            for line in f:
                name, fn = line.rstrip("\n").split("\t")
                feeds += ["-i", "%s=%s" % (name, os.path.join(d, fn))]
        run_json([args.ort_bench, path, d, "--threads", "1", "--iters", "1", "--warmup", "0", "--creations", "1",
                  "--save-outputs", os.path.join(d, "ort")])
        for p in ("fp32", "bf16"):
            subprocess.run([args.strata, "run", path, "--precision", p, "-o", os.path.join(d, p)] + feeds, check=True,
                           capture_output=True)
        err32 = max_rel_err(load(os.path.join(d, "fp32")), load(os.path.join(d, "ort")))
        err16 = max_rel_err(load(os.path.join(d, "bf16")), load(os.path.join(d, "fp32")))
        times = {"ort": [], "fp32": [], "bf16": []}
        common = ["--threads", str(args.threads), "--iters", str(args.iters), "--warmup", "3", "--warmup-ms",
                  str(args.warmup_ms), "--creations", "1"]
        for _ in range(args.rounds):
            for k in times:
                cmd = ([args.ort_bench, path, d] if k == "ort" else
                       [args.strata, "bench", path, "--json", "--seed", "42", "--precision", k]) + common
                times[k].append(run_json(cmd)["latency_ms"]["median"])
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((m, med, err32, err16))
        print("%-20s ORT %.2f ms, strata fp32 %.2f (%.2f), bf16 %.2f (%.2f); errors %.1e / %.1e" %
              (m, med["ort"], med["fp32"], med["fp32"] / med["ort"], med["bf16"], med["bf16"] / med["ort"], err32,
               err16), file=sys.stderr, flush=True)
    print("| model | ORT ms | strata fp32 ms | fp32 / ORT | strata bf16 ms | bf16 / ORT | fp32 vs ORT | bf16 vs fp32 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for m, med, e32, e16 in rows:
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1e | %.1e |" %
              (m, med["ort"], med["fp32"], med["fp32"] / med["ort"], med["bf16"], med["bf16"] / med["ort"], e32, e16))
    return 0


if __name__ == "__main__":
    sys.exit(main())
