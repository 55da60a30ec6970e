#!/usr/bin/python3
"""Where a model's bf16 error comes from: bf16 in one group of nodes at a time.

Runs the model in fp32 and in bf16 sessions whose bf16 kernels are limited to the nodes
whose names start with a group's prefixes (STRATA_BF16_NODES, see cpu/gemm_bf16.h), on the
same saved seeded inputs, and prints max |out - fp32| / max |fp32| for each: bf16 only in
that group, and bf16 everywhere except that group. Also the model's sensitivity to one bf16
rounding of its input (fp32 on the rounded input), as bf16_compare.py prints it.

  bench/compare-ort/bf16_stages.py --model resnet50 \\
      --groups /conv1/ /layer1/ /layer2/ /layer3/ /layer4/ /fc/
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bf16_compare import ROOT, max_rel_err, seeded_inputs  # noqa: E402


def outputs(strata, model, feeds, prec, out_dir, nodes=None):
    env = dict(os.environ)
    env.pop("STRATA_BF16_NODES", None)
    if nodes is not None:
        env["STRATA_BF16_NODES"] = nodes
    cmd = [strata, "run", model, "--threads", "1", "--precision", prec, "-o", out_dir] + feeds
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[-2000:]))
    return {os.path.basename(f): np.load(f) for f in glob.glob(os.path.join(out_dir, "*.npy"))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "bench/models/out"))
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--groups", nargs="+", default=["/conv1/", "/layer1/", "/layer2/", "/layer3/", "/layer4/", "/fc/"])
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    path = os.path.join(args.models_dir, args.model + ".onnx")
    tmp = tempfile.mkdtemp(prefix="bf16_stages_" + args.model + "_")
    _, feeds, rounded = seeded_inputs(args.strata, path, tmp, args.seed)
    ref = outputs(args.strata, path, feeds, "fp32", os.path.join(tmp, "fp32"))
    sens = max_rel_err(ref, outputs(args.strata, path, rounded, "fp32", os.path.join(tmp, "fp32_rounded")))
    full = max_rel_err(ref, outputs(args.strata, path, feeds, "bf16", os.path.join(tmp, "bf16")))
    print("%s seed %d: bf16 everywhere %.2e, fp32 on the bf16-rounded input %.2e" % (args.model, args.seed, full, sens))
    print("%-28s %14s %18s" % ("group (name prefixes)", "bf16 only here", "bf16 all but here"))
    for i, g in enumerate(args.groups):
        only = max_rel_err(ref, outputs(args.strata, path, feeds, "bf16", os.path.join(tmp, "only%d" % i), g))
        rest = ",".join(x for x in args.groups if x != g)
        but = max_rel_err(ref, outputs(args.strata, path, feeds, "bf16", os.path.join(tmp, "but%d" % i), rest))
        print("%-28s %14.2e %18.2e" % (g, only, but), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
