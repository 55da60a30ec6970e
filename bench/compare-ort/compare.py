#!/usr/bin/python3
"""Runs strata and ONNX Runtime side by side and writes docs/benchmarks.md (+ .png).

For every model and thread count it starts several processes per runtime, alternating
strata / ORT / strata / ORT (A/B/A/B), because on the shared VM the 2-thread timings
are sometimes bimodal and a slow phase should hit both runtimes alike. Each process
reports its own median latency; the table shows the median of those per-process
medians ("pooled") and every process's median.

Both runtimes read the same inputs: `strata bench --save-inputs DIR` writes seeded
random .npy files once per model, and `ort_bench` (ORT's C API) loads them.

Normally started by run.sh, which builds ort_bench and strata first.
"""
import argparse
import datetime
import json
import glob
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALL_MODELS = ["mlp", "lstm", "mobilenet_v2", "resnet18", "resnet50", "bert", "gpt2"]
QUICK_MODELS = ["mlp", "lstm", "resnet18"]
# Dynamic-int8 variants (bench/models/quantize_dynamic.py, ONNX Runtime's quantize_dynamic
# pattern), made from the fp32 model on first use; --models mlp_dynq,bert_dynq,gpt2_dynq.
INT8_MODELS = ["mlp_dynq", "bert_dynq", "gpt2_dynq"]
# Static-int8 QDQ variants (bench/models/quantize_static.py, ONNX Runtime's quantize_static QDQ
# layout, calibrated by a strata run on the sample input), made on first use;
# --models resnet18_qdq,resnet50_qdq,mobilenet_v2_qdq (convs) or bert_qdq,gpt2_qdq (Linear layers).
QDQ_MODELS = ["resnet18_qdq", "resnet50_qdq", "mobilenet_v2_qdq", "bert_qdq", "gpt2_qdq"]
# Timed runs per process: (quick, full). Small models get more runs.
NOTES_MARKER = "<!-- notes: kept by compare.py -->"
ITERS = {
    "mlp": (200, 1000), "lstm": (40, 200), "mobilenet_v2": (20, 100), "resnet18": (15, 60),
    "resnet50": (8, 30), "bert": (8, 30), "gpt2": (10, 40),
    "mlp_dynq": (200, 1000), "bert_dynq": (8, 30), "gpt2_dynq": (10, 40),
    "resnet18_qdq": (20, 80), "resnet50_qdq": (10, 40), "mobilenet_v2_qdq": (40, 150),
    "bert_qdq": (10, 40), "gpt2_qdq": (20, 80),
}
# Session creations timed per process, by both runtimes.
CREATIONS = 7


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_json(cmd, timeout):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[-2000:]))
    return json.loads(r.stdout)


def openblas_peak(threads):
    """GFLOP/s of a 1024^3 fp32 GEMM (OpenBLAS via numpy) with `threads` threads, best of 5."""
    code = (
        "import time, numpy as np\n"
        "a = np.random.rand(1024, 1024).astype(np.float32); b = np.random.rand(1024, 1024).astype(np.float32)\n"
        "a @ b\n"
        "best = 1e9\n"
        "for _ in range(5):\n"
        "    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)\n"
        "print(2 * 1024**3 / best / 1e9)\n")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        log("GEMM peak measurement failed: " + r.stderr.strip())
        return None
    return float(r.stdout.strip())


def strata_sgemm_peak(kernel_bench, threads):
    """GFLOP/s of strata's own 1024^3 SGEMM (strata_kernel_bench BM_Sgemm), best of 3; None when
    the binary or a benchmark for this thread count is missing. Why a second measure: Debian's
    OpenBLAS 0.3.21 does not know every CPU (on an Intel Xeon of family 6 model 207 it falls back
    to its generic "Prescott" kernels, ~28 GFLOP/s), and the peak is the best GEMM the machine runs."""
    if not os.access(kernel_bench, os.X_OK):
        return None
    name = "BM_Sgemm/strata_1024x1024x1024/%d%s$" % (threads, "" if threads == 1 else "/real_time")
    r = subprocess.run([kernel_bench, "--benchmark_filter=^" + name, "--benchmark_min_time=0.3",
                        "--benchmark_repetitions=3", "--benchmark_format=json"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        log("strata SGEMM peak measurement failed: " + r.stderr.strip()[-500:])
        return None
    flops = [b["FLOPS"] for b in json.loads(r.stdout).get("benchmarks", [])
             if b.get("run_type") == "iteration" and "FLOPS" in b]
    return max(flops) / 1e9 if flops else None


def gemm_peak(threads, kernel_bench):
    """The machine's fp32 GEMM peak for `threads`: the better of OpenBLAS and strata's SGEMM,
    with both measurements for the doc."""
    both = {"OpenBLAS through numpy": openblas_peak(threads),
            "strata's SGEMM": strata_sgemm_peak(kernel_bench, threads)}
    known = [v for v in both.values() if v]
    return (max(known) if known else None), both


def copy_sample_inputs(models_dir, model, in_dir):
    """Writes in_dir/inputs.txt for the sample inputs make_models.py stored with the model."""
    for suffix in ("_dynq", "_qdq"):  # the fp32 model's inputs
        model = model[:-len(suffix)] if model.endswith(suffix) else model
    with open(os.path.join(models_dir, "manifest.json")) as f:
        manifest = json.load(f)
    entry = next((e for e in manifest["models"] if e["name"] == model), None)
    if entry is None:
        raise RuntimeError("%s is not in %s/manifest.json" % (model, models_dir))
    os.makedirs(in_dir, exist_ok=True)
    with open(os.path.join(in_dir, "inputs.txt"), "w") as idx:
        for i in entry["inputs"]:
            shutil.copy(os.path.join(models_dir, i["file"]), in_dir)
            idx.write("%s\t%s\n" % (i["name"], i["file"]))


def fmt_ms(x):
    return "%.3f" % x if x < 10 else "%.1f" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "bench/ort/ort_bench"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "bench/models/out"))
    ap.add_argument("--quick", action="store_true", help="mlp, lstm, resnet18 with few iterations (< 5 min)")
    ap.add_argument("--models", help="comma-separated subset (default: all, or the quick set)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--procs", type=int, default=None, help="processes per runtime and config (default 3)")
    ap.add_argument("--warmup-ms", type=float, default=1000.0,
                    help="each process also warms up for this long before its timed runs (both runtimes)")
    ap.add_argument("--iters-scale", type=float, default=1.0, help="multiply the per-model timed runs")
    ap.add_argument("--out-md", default=os.path.join(ROOT, "docs/benchmarks.md"))
    ap.add_argument("--out-png", default=os.path.join(ROOT, "docs/benchmarks.png"))
    ap.add_argument("--raw-json", help="also write every process's raw JSON here")
    args = ap.parse_args()

    models = args.models.split(",") if args.models else (QUICK_MODELS if args.quick else ALL_MODELS)
    for m in models:
        if m not in ITERS:
            sys.exit("compare.py: unknown model '%s' (known: %s)" % (m, ", ".join(ALL_MODELS + INT8_MODELS + QDQ_MODELS)))
    threads_list = [int(t) for t in args.threads.split(",")]
    procs = args.procs or 3
    for exe in (args.strata, args.ort_bench):
        if not os.access(exe, os.X_OK):
            sys.exit("compare.py: %s is not an executable (run bench/compare-ort/run.sh)" % exe)

    kernel_bench = os.path.join(os.path.dirname(args.strata), "strata_kernel_bench")
    measured = {t: gemm_peak(t, kernel_bench) for t in threads_list}
    peaks = {t: m[0] for t, m in measured.items()}
    peak_sources = {t: m[1] for t, m in measured.items()}
    log("GEMM 1024^3 peak: " + "; ".join(
        "%d thr %.1f GFLOP/s (%s)" % (t, p or 0, ", ".join("%s %.1f" % (k, v or 0) for k, v in peak_sources[t].items()))
        for t, p in peaks.items()))

    tmp = tempfile.mkdtemp(prefix="strata-compare-")
    results, raw, profiles = [], [], {}
    for m in models:
        path = os.path.join(args.models_dir, m + ".onnx")
        base = os.path.join(args.models_dir, m[:-len("_dynq")] + ".onnx") if m in INT8_MODELS else None
        if not os.path.exists(path) and base and os.path.exists(base):
            subprocess.run([sys.executable, os.path.join(ROOT, "bench/models/quantize_dynamic.py"), base, path],
                           check=True)
        if m in QDQ_MODELS and not os.path.exists(path):
            fp32 = m[:-len("_qdq")]
            calib = sorted(glob.glob(os.path.join(args.models_dir, fp32 + "_input_[0-9]*.npy")))
            subprocess.run([sys.executable, os.path.join(ROOT, "bench/models/quantize_static.py"),
                            os.path.join(args.models_dir, fp32 + ".onnx"), path] + calib +
                           ["--strata", args.strata], check=True)
        if not os.path.exists(path):
            sys.exit("compare.py: %s missing (bench/models/make_models.py --only %s)" % (path, m))
        iters = max(3, int(ITERS[m][0 if args.quick else 1] * args.iters_scale))
        warmup = max(2, iters // 10)
        in_dir = os.path.join(tmp, m)
        # One profiled strata run writes the shared inputs and gives FLOPs and the op breakdown.
        strata_error = None
        try:
            prof = run_json([args.strata, "bench", path, "--threads", "1", "--warmup", str(warmup), "--iters",
                             str(iters), "--creations", "1", "--profile", "--top", "5", "--json", "--save-inputs",
                             in_dir], 1800)
            profiles[m] = prof
        except RuntimeError as e:
            # strata cannot run this model: still time ORT on the model's bundled sample inputs.
            strata_error = str(e).rsplit("strata: error: ", 1)[-1].strip()
            log("%s: strata failed: %s" % (m, strata_error))
            prof = {}
            copy_sample_inputs(args.models_dir, m, in_dir)
        flops = prof.get("profile", {}).get("flops_per_run", 0)
        for t in threads_list:
            runs = {"strata": [], "ort": []}
            for p in range(procs):
                for rt in ("strata", "ort"):  # A/B/A/B
                    common = ["--threads", str(t), "--warmup", str(warmup), "--warmup-ms", str(args.warmup_ms),
                              "--iters", str(iters), "--creations", str(CREATIONS)]
                    if rt == "strata":
                        if strata_error:
                            continue
                        # Same seed as the --save-inputs run: the same inputs ORT reads.
                        cmd = [args.strata, "bench", path, "--json", "--seed", "42"] + common
                    else:
                        cmd = [args.ort_bench, path, in_dir] + common
                    j = run_json(cmd, 1800)
                    runs[rt].append(j)
                    raw.append({"model": m, "threads": t, "runtime": rt, "result": j})
                    log("%-13s %d thr %-6s proc %d: median %s ms" % (m, t, rt, p, fmt_ms(j["latency_ms"]["median"])))
            row = {"model": m, "threads": t, "flops": flops, "iters": iters, "strata_error": strata_error}
            for rt, js in runs.items():
                if not js:
                    row[rt] = None
                    continue
                meds = [j["latency_ms"]["median"] for j in js]
                row[rt] = {
                    "medians": meds,
                    "median": statistics.median(meds),
                    "p90": statistics.median([j["latency_ms"]["p90"] for j in js]),
                    "create": statistics.median([j["session_create_ms"]["median"] for j in js]),
                    "rss_mib": statistics.median([j["peak_rss_kib"]["vm_hwm"] for j in js]) / 1024.0,
                }
            results.append(row)

    if args.raw_json:
        with open(args.raw_json, "w") as f:
            json.dump({"results": results, "raw": raw, "profiles": profiles}, f, indent=1)
    write_markdown(args, results, profiles, peaks, peak_sources, procs)
    write_chart(args.out_png, results)
    log("wrote %s and %s" % (args.out_md, args.out_png))


def write_markdown(args, results, profiles, peaks, peak_sources, procs):
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()
    L = []
    L.append("# Benchmarks: strata vs ONNX Runtime 1.30")
    L.append("")
    L.append("Generated by `bench/compare-ort/run.sh%s` on %s UTC." %
             (" --quick" if args.quick else "", datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")))
    L.append("Machine: %s, %d online CPUs, %s; load average at the end %.1f / %.1f / %.1f." %
             (cpu, os.cpu_count() or 0, platform.platform(), *load))
    L.append("")
    L.append("How it is measured:")
    L.append("")
    L.append("- strata is timed with `strata bench MODEL --json`; **ONNX Runtime 1.30.0 is timed through its C API** "
             "by `bench/compare-ort/ort_bench.cc` (the CPU library from npm `onnxruntime-node@1.30.0`, "
             "graph optimization level ALL, intra-op threads = the thread count, inter-op 1, default spinning).")
    L.append("- Both time `Run` only (inputs prepared once, outputs released each run) on the same seeded random "
             "inputs: `strata bench --save-inputs` writes them as .npy and `ort_bench` loads them.")
    L.append("- For every model and thread count, %d processes per runtime run alternately (strata, ORT, strata, ORT, "
             "...); each process warms up (at least a tenth of the timed runs, and at least %.0f ms: on this VM a new "
             "process of either runtime runs up to 1.5x slower for its first few tenths of a second), then does the "
             "timed runs. *Median* is the median of the per-process medians; the per-process medians are listed so "
             "bimodal runs are visible." % (procs, args.warmup_ms))
    L.append("- Session creation: median of %d creations per process (the first in a process pays one-time set-up "
             "in both runtimes, so a median of 3 swung with it). Peak RSS: `VmHWM` of the process (ORT's "
             "figure includes its arena and thread pool; strata's its caching allocator)." % CREATIONS)
    L.append("- GFLOP/s: the model's Conv/Gemm/MatMul/LSTM FLOPs per run (from `strata bench --profile`) divided by "
             "the median latency, and as a share of this machine's measured fp32 GEMM peak: the better of a 1024^3 "
             "GEMM with OpenBLAS through numpy (best of 5) and strata's own SGEMM (`strata_kernel_bench "
             "BM_Sgemm/strata_1024x1024x1024`, best of 3), measured in the same run: %s." %
             "; ".join("%d thread%s %.1f GFLOP/s (%s)" % (t, "s" if t > 1 else "", p, ", ".join(
                 "%s %.1f" % (k, v) for k, v in peak_sources[t].items() if v)) for t, p in peaks.items() if p))
    L.append("- Ratio = strata / ORT: below 1 means strata is faster (or smaller).")
    L.append("")
    L.append("| model | threads | strata median ms | ORT median ms | ratio | strata GFLOP/s (% peak) | "
             "ORT GFLOP/s (% peak) | create ratio (strata/ORT ms) | peak RSS ratio (MiB) | strata per-process | "
             "ORT per-process |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    failures = []
    for r in results:
        s, o = r["strata"], r["ort"]
        peak = peaks.get(r["threads"])

        def gf(ms):
            if not r["flops"] or ms <= 0:
                return "-"
            g = r["flops"] / ms / 1e6
            return "%.1f (%.0f%%)" % (g, 100 * g / peak) if peak else "%.1f" % g
        if s is None:
            failures.append(r)
            L.append("| %s | %d | fails (see below) | %s | - | - | - | - (- / %s) | - (- / %.0f) | - | %s |" % (
                r["model"], r["threads"], fmt_ms(o["median"]), fmt_ms(o["create"]), o["rss_mib"],
                " ".join(fmt_ms(x) for x in o["medians"])))
            continue
        L.append("| %s | %d | %s | %s | **%.2f** | %s | %s | %.2f (%s / %s) | %.2f (%.0f / %.0f) | %s | %s |" % (
            r["model"], r["threads"], fmt_ms(s["median"]), fmt_ms(o["median"]), s["median"] / o["median"],
            gf(s["median"]), gf(o["median"]), s["create"] / o["create"], fmt_ms(s["create"]), fmt_ms(o["create"]),
            s["rss_mib"] / o["rss_mib"], s["rss_mib"], o["rss_mib"],
            " ".join(fmt_ms(x) for x in s["medians"]), " ".join(fmt_ms(x) for x in o["medians"])))
    seen = set()
    for r in failures:
        if r["model"] not in seen:
            seen.add(r["model"])
            L.append("")
            L.append("strata could not run **%s** in this build: `%s`" % (r["model"], r["strata_error"]))
    L.append("")
    L.append("![strata vs ONNX Runtime](benchmarks.png)")
    L.append("")
    L.append("## Where strata's time goes (`strata bench --profile`, 1 thread)")
    L.append("")
    for m, p in profiles.items():
        prof = p.get("profile")
        if not prof:
            continue
        L.append("**%s** (median %s ms, %.3f GFLOP/run):" %
                 (m, fmt_ms(p["latency_ms"]["median"]), prof["flops_per_run"] / 1e9))
        L.append("")
        L.append("| op type | nodes | mean ms/run | % | GFLOP/s |")
        L.append("|---|---|---|---|---|")
        for o in prof["op_types"][:6]:
            L.append("| %s | %d | %.3f | %.1f | %s |" % (o["op_type"], o["nodes"], o["ms_per_run"], o["percent"],
                                                       "%.1f" % o["gflops_per_s"] if "gflops_per_s" in o else "-"))
        L.append("")
    # Hand-written analysis after NOTES_MARKER survives regeneration.
    notes = ""
    if os.path.exists(args.out_md):
        with open(args.out_md) as f:
            old = f.read()
        if NOTES_MARKER in old:
            notes = old[old.index(NOTES_MARKER):]
    with open(args.out_md, "w") as f:
        f.write("\n".join(L) + "\n" + notes)


def write_chart(path, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("python3-matplotlib missing (apt-get install -y python3-matplotlib): no chart")
        return
    results = [r for r in results if r["strata"] and r["ort"]]
    if not results:
        return
    labels = ["%s\n%d thr" % (r["model"], r["threads"]) for r in results]
    x = list(range(len(results)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(6, 1.1 * len(results)), 7), sharex=True)
    w = 0.38
    ax1.bar([i - w / 2 for i in x], [r["strata"]["median"] for r in results], w, label="strata")
    ax1.bar([i + w / 2 for i in x], [r["ort"]["median"] for r in results], w, label="ONNX Runtime 1.30 (C API)")
    ax1.set_yscale("log")
    ax1.set_ylabel("median latency, ms (log)")
    ax1.legend()
    ax1.set_title("strata vs ONNX Runtime: median latency")
    ratios = [r["strata"]["median"] / r["ort"]["median"] for r in results]
    ax2.bar(x, ratios, 0.6, color=["tab:green" if v <= 1 else "tab:red" for v in ratios])
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.set_yscale("log")  # keeps 0.5x and a pathological 300x readable on one axis
    ax2.set_ylabel("strata / ORT, log (lower is better)")
    for i, v in enumerate(ratios):
        ax2.text(i, v, "%.2f" % v, ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(x)
    ax2.set_xticklabels(labels, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
