#!/usr/bin/python3
"""Per-layer strata vs ONNX Runtime: which nodes lose, at which thread count.

Runs alternating processes of `strata bench --profile --json` and `ort_profile` (ORT's own
profiler, OrtApi::EnableProfiling), takes each node's mean time per run in every process,
and prints, per strata node, the minimum and median of those means over the processes for
both runtimes, with the ratio of the minima (robust to load from other processes: a slow
phase only raises a process's numbers). ORT's nodes are matched through the ONNX graph:
ORT names a fused or NCHWc node after its output tensor (e.g. /layer1/layer1.0/relu/Relu_output_0
for conv1 + Relu), strata after the Conv; both are mapped to the Conv that starts the chain.

    bench/compare-ort/layer_compare.py --models resnet18 --threads 1,2 --procs 4

--strata-b BIN adds a second strata binary (e.g. the unmodified main build) for A/B.
Builds ort_profile (g++, the ORT headers and library under bench/ort) into --work-dir.
"""
import argparse
import collections
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAIN_OPS = {"Relu", "Add", "Clip", "Sum"}


def build_ort_profile(work_dir):
    exe = os.path.join(work_dir, "ort_profile")
    src = os.path.join(ROOT, "bench/compare-ort/ort_profile.cc")
    common = os.path.join(ROOT, "bench/compare-ort/ort_check.h")
    if os.path.exists(exe) and os.path.getmtime(exe) >= max(os.path.getmtime(src), os.path.getmtime(common)):
        return exe
    hdrs = glob.glob(os.path.join(ROOT, "bench/ort/node_modules/**/ios-arm64/*/Headers/onnxruntime_c_api.h"),
                     recursive=True)
    libs = glob.glob(
        os.path.join(ROOT, "bench/ort/node_modules/onnxruntime-node/bin/napi-v*/linux/x64/libonnxruntime.so.1"))
    if not hdrs or not libs:
        sys.exit("layer_compare: ORT headers or library missing under bench/ort (run bench/compare-ort/run.sh once)")
    lib = os.path.realpath(libs[0])
    subprocess.run(["g++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-I" + os.path.dirname(hdrs[0]), src, "-o", exe,
                    lib, "-Wl,-rpath," + os.path.dirname(lib)], check=True)
    return exe


def conv_of_tensor(model_path):
    """Maps tensor and node names to the name of the Conv (or other node) starting their chain."""
    import onnx
    g = onnx.load(model_path, load_external_data=False).graph
    producer = {o: n for n in g.node for o in n.output}
    out = {}
    for n in g.node:
        out[n.name] = n.name
        for o in n.output:
            cur = n
            # Walk Relu/Add back to the node feeding them (an Add's first produced input).
            while cur.op_type in CHAIN_OPS:
                ins = [producer[i] for i in cur.input if i in producer]
                if not ins:
                    break
                cur = ins[0]
            out[o] = cur.name
    return out


def ort_means(exe, model, threads, runs, warmup, work_dir, mapping, per_call_min=False):
    prefix = os.path.join(work_dir, "ortprof")
    path = subprocess.run([exe, model, prefix, "--threads", str(threads), "--runs", str(runs + warmup)], check=True,
                          capture_output=True, text=True).stdout.strip().splitlines()[-1]
    events = json.load(open(path))
    os.remove(path)
    durs = collections.defaultdict(list)
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        if name.endswith("_nchwc"):
            name = name[: -len("_nchwc")]
        durs[mapping.get(name, "(ort) " + name)].append(e["dur"] / 1000.0)
    means = {}
    for k, v in durs.items():
        calls_per_run = max(1, len(v) // (runs + warmup))
        v = v[warmup * calls_per_run:]
        # Per-call minimum (nodes called once per run): what a call costs when nothing preempts it.
        means[k] = min(v) * calls_per_run if per_call_min and v else sum(v) / max(1, runs)
    return means


def strata_means(exe, model, threads, runs, warmup):
    out = subprocess.run([exe, "bench", model, "--threads", str(threads), "--iters", str(runs), "--warmup",
                          str(warmup), "--creations", "1", "--profile", "--json", "--top", "100000"], check=True,
                         capture_output=True, text=True).stdout
    j = json.loads(out)
    means = collections.defaultdict(float)
    for n in j["profile"]["top_nodes"]:
        # Layout transposes strata inserts are named after the node they serve ("/conv1/Conv/to_nhwc").
        means[n["node"]] += n["ms_per_run"]
    return means


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--procs", type=int, default=4, help="alternating processes per runtime")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--strata-b", help="a second strata binary for A/B (column B)")
    ap.add_argument("--work-dir", default="/tmp/layer_compare")
    ap.add_argument("--out-md", help="also write the tables here")
    ap.add_argument("--per-call-min", action="store_true",
                    help="on a loaded machine: strata runs --procs processes of 1 timed run each and ORT one "
                         "process of --procs runs, and each node's minimum over those calls is compared")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    exe = build_ort_profile(args.work_dir)
    lines = []
    for model in args.models.split(","):
        path = os.path.join(ROOT, "bench/models/out", model + ".onnx")
        mapping = conv_of_tensor(path)
        for t in (int(x) for x in args.threads.split(",")):
            cols = {"strata": [], "ort": [], "B": []}
            runs = 1 if args.per_call_min else args.runs
            for p in range(args.procs):
                cols["strata"].append(strata_means(args.strata, path, t, runs, args.warmup))
                if not args.per_call_min or p == 0:
                    cols["ort"].append(ort_means(exe, path, t, args.procs if args.per_call_min else args.runs,
                                                 args.warmup, args.work_dir, mapping, args.per_call_min))
                if args.strata_b:
                    cols["B"].append(strata_means(args.strata_b, path, t, runs, args.warmup))
                print(f"{model} t={t} process {p + 1}/{args.procs} done", file=sys.stderr)
            names = list(cols["strata"][0].keys())
            names += [k for k in cols["ort"][0] if k not in names]

            def stat(col, name):
                v = [m.get(name, 0.0) for m in cols[col]]
                return (min(v), statistics.median(v)) if cols[col] else (0.0, 0.0)

            head = f"| node | strata min / med ms | ORT min / med ms | strata/ORT (min) |"
            sep = "| --- | --- | --- | --- |"
            if args.strata_b:
                head += " B min / med ms | strata/B (min) |"
                sep += " --- | --- |"
            how = (f"per-call minimum over {args.procs} calls" if args.per_call_min else
                   f"{args.procs} processes x {args.runs} runs: min / median of the per-process means")
            lines += ["", f"### {model}, {t} thread(s), {how}", "", head, sep]
            tot = collections.defaultdict(float)
            for name in names:
                s, o, b = stat("strata", name), stat("ort", name), stat("B", name)
                for key, val in (("s", s[0]), ("o", o[0]), ("b", b[0])):
                    tot[key] += val
                ratio = f"{s[0] / o[0]:.2f}" if o[0] > 0 and s[0] > 0 else "-"
                row = f"| {name} | {s[0]:.3f} / {s[1]:.3f} | {o[0]:.3f} / {o[1]:.3f} | {ratio} |"
                if args.strata_b:
                    rb = f"{s[0] / b[0]:.2f}" if b[0] > 0 and s[0] > 0 else "-"
                    row += f" {b[0]:.3f} / {b[1]:.3f} | {rb} |"
                lines.append(row)
            row = f"| sum of minima | {tot['s']:.3f} | {tot['o']:.3f} | {tot['s'] / max(tot['o'], 1e-9):.2f} |"
            if args.strata_b:
                row += f" {tot['b']:.3f} | {tot['s'] / max(tot['b'], 1e-9):.2f} |"
            lines.append(row)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
