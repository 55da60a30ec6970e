#!/usr/bin/python3
"""MatMulNBits side by side, strata vs ONNX Runtime 1.30 (run through nbits_bench.sh).

One-node com.microsoft MatMulNBits models (random codes, block 32, uint8 zero points) for
bits 4/8 and accuracy_level 0/4, shapes K x N, and M rows of A. Each case is timed in
`strata bench` and ort_bench on the same saved inputs, alternately (rounds A B A B), and the
median of all samples of each runtime is reported (and the ratio of the minima: under load
preemption inflates medians, most for the slower side). The copy bandwidth (nbits_memcpy) is
measured before, between and after the cases; GEMV (M = 1) rows report the weight bytes
(ORT layout: codes + fp32 scales + zero points) read per second as % of that bandwidth.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ALL_KINDS = [(4, 0), (4, 4), (8, 0), (8, 4)]  # (bits, accuracy_level)
FULL_CASES = [  # (K, N, M list, kinds)
    (2048, 2048, [1, 16, 128], ALL_KINDS),
    (4096, 4096, [1, 16, 128], ALL_KINDS),
    (4096, 8192, [1, 16], ALL_KINDS),
    # GEMV with weights larger than the L3 (int8: 64 MiB + scales): a memory-bound case.
    # ORT's int8 level 0 is a non-prepacked fallback taking seconds per run here: left out.
    (8192, 8192, [1], [(4, 0), (4, 4), (8, 4)]),
]
QUICK_CASES = [(2048, 2048, [1, 16], ALL_KINDS), (4096, 4096, [1], ALL_KINDS)]
BLOCK = 32
MARK_BEGIN, MARK_END = "<!-- nbits-bench:begin -->", "<!-- nbits-bench:end -->"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("nbits_bench: command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-3000:]))
    return r.stdout


def make_model(path, K, N, bits, level):
    rng = np.random.default_rng(K * 31 + N * 7 + bits)
    n_blocks = (K + BLOCK - 1) // BLOCK
    blob = BLOCK * bits // 8
    b = rng.integers(0, 256, size=(N, n_blocks, blob), dtype=np.uint8)
    scales = rng.uniform(0.001, 0.01, size=(N * n_blocks,)).astype(np.float32)
    zp = rng.integers(0, 256, size=(N * ((n_blocks * bits + 7) // 8),), dtype=np.uint8)
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zp"], ["Y"], domain="com.microsoft", K=K, N=N,
                            bits=bits, block_size=BLOCK, accuracy_level=level)
    graph = helper.make_graph(
        [node], "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", K])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", N])],
        [numpy_helper.from_array(b, "B"), numpy_helper.from_array(scales, "scales"),
         numpy_helper.from_array(zp, "zp")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, path)
    return b.nbytes + scales.nbytes + zp.nbytes


def memcpy_gbps(exe):
    return json.loads(run([exe, "256", "7"]))["copy_gbps"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", required=True)
    ap.add_argument("--memcpy", required=True)
    ap.add_argument("--ort-bench", default=os.path.join(ROOT, "build/nbits-ort/ort_bench"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build/nbits-bench"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=2, help="A/B rounds per case")
    ap.add_argument("--quick", action="store_true", help="a few small cases (a smoke test)")
    ap.add_argument("--only", default="", help="run only the cases whose 'KxN' is in this comma-separated list")
    ap.add_argument("--levels", default="", help="run only these accuracy levels (comma-separated, e.g. 4)")
    ap.add_argument("--ms", default="", help="run only these M (comma-separated, e.g. 1,16)")
    ap.add_argument("--l3-mib", type=float, default=32.0,
                    help="last-level cache size: GEMV weights at most this big are marked as in cache")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs/quantization.md"))
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(__file__))
    from nbits_parity import build_ort_bench  # same compilation of ort_bench.cc
    build_ort_bench(args.ort_bench)
    os.makedirs(args.work, exist_ok=True)

    t_start = time.time()
    bw = [memcpy_gbps(args.memcpy)]
    rows = []
    cases = QUICK_CASES if args.quick else FULL_CASES
    if args.only:
        cases = [c for c in cases if "%dx%d" % (c[0], c[1]) in args.only.split(",")]
    levels = [int(v) for v in args.levels.split(",")] if args.levels else None
    only_ms = [int(v) for v in args.ms.split(",")] if args.ms else None
    for ci, (K, N, ms, kinds) in enumerate(cases):
        if only_ms:
            ms = [m for m in ms if m in only_ms]
        for bits, level in kinds:
            if levels is not None and level not in levels:
                continue
            model = os.path.join(args.work, "nbits_%d_k%d_n%d_l%d.onnx" % (bits, K, N, level))
            wbytes = make_model(model, K, N, bits, level)
            for M in ms:
                inputs = os.path.join(args.work, "in_k%d_m%d" % (K, M))
                shape = ["--shape", "A=%dx%d" % (M, K)]
                # Fewer iterations for the big cases: the whole run must stay short. Small cases
                # (a 2048^2 GEMV takes 20-40 us) get up to 300 runs after as many warm-up runs:
                # 30 runs were ~1 ms of work, which timed thread-pool start-up (workers just
                # created and asleep) rather than the steady state of token generation. Both
                # runtimes get the same counts.
                iters = max(3, min(300, int(3e9 / (2 * M * N * K) * 10)))
                common = ["--warmup", str(max(2, iters)), "--iters", str(iters), "--creations", "1"]
                # ORT's int8 level 0 is a non-prepacked fallback (0.02-2 s per run): 3 runs are plenty.
                ort_common = (["--warmup", "1", "--iters", "3", "--creations", "1"] if (bits, level) == (8, 0) else
                              common)
                if not os.path.exists(os.path.join(inputs, "inputs.txt")):
                    run([args.strata, "bench", model, "--save-inputs", inputs, "--warmup", "0", "--iters", "1",
                         "--creations", "1"] + shape)
                s_samples, o_samples = [], []
                for _ in range(args.rounds):
                    js = json.loads(run([args.strata, "bench", model, "--json", "-t", str(args.threads)] + shape +
                                        common))
                    s_samples += js["samples_ms"]
                    jo = json.loads(run([args.ort_bench, model, inputs, "--threads", str(args.threads)] + ort_common))
                    o_samples += jo["samples_ms"]
                s_ms, o_ms = statistics.median(s_samples), statistics.median(o_samples)
                # The minima too: on a loaded machine preemption inflates medians, most for the slower side.
                s_min, o_min = min(s_samples), min(o_samples)
                rows.append(dict(bits=bits, level=level, K=K, N=N, M=M, strata=s_ms, ort=o_ms, wbytes=wbytes,
                                 min_ratio=o_min / s_min))
                print("int%d level %d K=%d N=%d M=%-3d strata %.3f ms  ort %.3f ms  ort/strata %.2f  "
                      "(min: strata %.3f ort %.3f ratio %.2f)" %
                      (bits, level, K, N, M, s_ms, o_ms, o_ms / s_ms, s_min, o_min, o_min / s_min), flush=True)
        bw.append(memcpy_gbps(args.memcpy))
    copy = statistics.median(bw)
    elapsed = time.time() - t_start

    lines = [
        "Run of `bench/compare-ort/nbits_bench.sh` (%s UTC, %d threads each, %d A/B rounds, %.0f s in all); "
        "memcpy %.2f GB/s (bytes copied per second, median of %s GB/s measured between the cases)." %
        (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), args.threads, args.rounds, elapsed, copy,
         ", ".join("%.2f" % b for b in bw)),
        "",
        "GEMV rows: weight bytes read per second, as %% of the memcpy figure; *in cache* marks weights of at most "
        "%.0f MiB (the L3), where the %% says nothing about memory bandwidth." % args.l3_mib,
        "",
        "| bits | level | K x N | M | strata ms | ORT ms | ORT / strata | ORT / strata (min) | "
        "strata GEMV GB/s (% memcpy) | ORT GEMV GB/s (% memcpy) | weights MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        gemv = ["", ""]
        mib = r["wbytes"] / 2**20
        where = "%.1f%s" % (mib, " (in cache)" if mib <= args.l3_mib else "")
        if r["M"] == 1:
            gemv = ["%.2f (%.0f%%)" % (r["wbytes"] / t / 1e6, 100 * r["wbytes"] / t / 1e6 / copy)
                    for t in (r["strata"], r["ort"])]
        lines.append("| %d | %d | %dx%d | %d | %.3f | %.3f | %.2f | %.2f | %s | %s | %s |" %
                     (r["bits"], r["level"], r["K"], r["N"], r["M"], r["strata"], r["ort"], r["ort"] / r["strata"],
                      r["min_ratio"], gemv[0], gemv[1], where))
    table = "\n".join(lines)
    print(table)
    if not args.no_doc:
        with open(args.doc) as f:
            doc = f.read()
        block = MARK_BEGIN + "\n" + table + "\n" + MARK_END
        if MARK_BEGIN in doc and MARK_END in doc:
            doc = re.sub(re.escape(MARK_BEGIN) + ".*?" + re.escape(MARK_END), lambda _: block, doc, flags=re.S)
        else:
            doc = doc.rstrip("\n") + "\n\n## strata vs ONNX Runtime (MatMulNBits)\n\n" + block + "\n"
        with open(args.doc, "w") as f:
            f.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
