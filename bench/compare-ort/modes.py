#!/usr/bin/env python3
"""Count per-process speed modes: runs N processes of `strata bench MODEL --json` (alternating
between the given binaries) and prints each process's median and min, so a split of the
same binary into fast and slow processes is visible and countable.

  bench/compare-ort/modes.py --model build/nbits-bench/nbits_8_k2048_n2048_l4.onnx \
      --shape A=1x2048 --threads 1 --procs 12 --bin build/release/bin/strata --bin /work/baseline7/strata

Options: --prefix wraps each process (e.g. "setarch -R" or "taskset -c 1"); --perf EVENTS
runs each process under `perf stat` and prints the counts per timed run (the counts cover
the whole process, session creation included, so use enough --iters that runs dominate);
--env NAME=VALUE sets a variable for the processes of the binary at the same position.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile


def steal_ticks():
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    return int(cpu[8]) if len(cpu) > 8 else 0


def run_one(binary, args, env_extra):
    cmd = shlex.split(args.prefix) + [binary, "bench", args.model, "--json", "-t", str(args.threads), "--iters",
                                      str(args.iters), "--warmup", str(args.warmup), "--creations", "1"]
    for s in args.shape:
        cmd += ["--shape", s]
    perf_out = None
    if args.perf:
        fd, perf_out = tempfile.mkstemp(prefix="modes_perf_")
        os.close(fd)
        cmd = ["perf", "stat", "-x", ",", "-e", args.perf, "-o", perf_out] + cmd
    env = dict(os.environ)
    env.update(env_extra)
    s0 = steal_ticks()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    steal = steal_ticks() - s0
    if r.returncode != 0:
        sys.exit("modes: command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-2000:]))
    js = json.loads(r.stdout)
    counts = {}
    if perf_out:
        with open(perf_out) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) >= 3 and parts[0] and not line.startswith("#"):
                    try:
                        counts[parts[2]] = float(parts[0])
                    except ValueError:
                        pass
        os.unlink(perf_out)
    return js, counts, steal


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", action="append", default=[], help="strata binary (repeatable: alternated)")
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE[;NAME=VALUE] for the binary at the same position (repeatable)")
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--procs", type=int, default=12, help="processes per binary")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--prefix", default="", help="command prefix, e.g. 'setarch -R'")
    ap.add_argument("--perf", default="", help="perf stat events, e.g. cycles,instructions,page-faults")
    ap.add_argument("--slow-factor", type=float, default=1.25,
                    help="a process counts as slow when its median exceeds its binary's fastest median times this")
    ap.add_argument("--windows", type=int, default=0,
                    help="also print the median of each window of this many consecutive timed runs")
    args = ap.parse_args()
    bins = args.bin or [os.path.join(os.path.dirname(__file__), "../../build/release/bin/strata")]
    envs = []
    for i in range(len(bins)):
        e = {}
        if i < len(args.env):
            for kv in filter(None, args.env[i].split(";")):
                k, _, v = kv.partition("=")
                e[k] = v
        envs.append(e)
    results = {b: [] for b in range(len(bins))}
    for p in range(args.procs):
        for bi, b in enumerate(bins):
            js, counts, steal = run_one(b, args, envs[bi])
            lat = js["latency_ms"]
            line = "%-2d %-40s median %.4f  min %.4f  p90 %.4f  steal %d" % (
                p, b[-40:], lat["median"], lat["min"], lat["p90"], steal)
            runs = args.iters + args.warmup
            for k, v in counts.items():
                line += "  %s/run %.4g" % (k, v / runs)
            if "cycles" in counts and "instructions" in counts and counts["cycles"]:
                line += "  IPC %.2f" % (counts["instructions"] / counts["cycles"])
            print(line, flush=True)
            if args.windows:
                xs = js["samples_ms"]
                print("     windows: " + " ".join("%.3f" % statistics.median(xs[i:i + args.windows])
                                                  for i in range(0, len(xs), args.windows)), flush=True)
            results[bi].append(lat["median"])
    print("summary (median of per-process medians [min-max], slow processes, sorted medians):")
    for bi, b in enumerate(bins):
        med = results[bi]
        slow = sum(v > min(med) * args.slow_factor for v in med)  # against this binary's own fastest
        print("  %s: %.4f [%.4f-%.4f]  slow %d of %d  %s" % (b, statistics.median(med), min(med), max(med), slow,
                                                            len(med), " ".join("%.4f" % v for v in sorted(med))))


if __name__ == "__main__":
    main()
