#!/usr/bin/python3
"""Compares strata's conformance results with ONNX Runtime's reference results.

Usage: scripts/conformance-diff.py STRATA_RESULTS [REFERENCE] [--markdown]

Both files use the runner's format: `PASS|FAIL|SKIP suite/case reason` lines and
`SUMMARY suite: N passed, ...` lines. REFERENCE defaults to
../shared/reference/ort-1.30-conformance.txt beside the repository.
Prints, per suite, both runtimes' pass counts, and the cases where they differ.
"""
import os
import sys


def load(path):
    res = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) >= 2 and parts[0] in ("PASS", "FAIL", "SKIP"):
                res[parts[1]] = (parts[0], parts[2] if len(parts) > 2 else "")
    return res


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    md = "--markdown" in sys.argv
    if not args:
        print(__doc__)
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    ref_path = args[1] if len(args) > 1 else os.path.join(here, "..", "..", "shared", "reference",
                                                          "ort-1.30-conformance.txt")
    ours, ref = load(args[0]), load(ref_path)
    suites = sorted({k.split("/")[0] for k in list(ours) + list(ref)})
    rows = []
    tot = [0, 0, 0]
    for s in suites:
        keys = {k for k in list(ours) + list(ref) if k.startswith(s + "/")}
        a = sum(1 for k in keys if ours.get(k, ("",))[0] == "PASS")
        b = sum(1 for k in keys if ref.get(k, ("",))[0] == "PASS")
        rows.append((s, len(keys), a, b))
        tot[0] += len(keys)
        tot[1] += a
        tot[2] += b
    rows.append(("total", tot[0], tot[1], tot[2]))
    if md:
        print("| suite | cases | strata | ONNX Runtime 1.30 |\n| --- | --- | --- | --- |")
        for s, n, a, b in rows:
            print(f"| {s} | {n} | {a} | {b} |")
    else:
        for s, n, a, b in rows:
            print(f"{s:20s} {n:5d} cases  strata {a:5d}  ort {b:5d}  ({a - b:+d})")
    only_ours = sorted(k for k in ours if ours[k][0] == "PASS" and ref.get(k, ("",))[0] != "PASS")
    only_ref = sorted(k for k in ref if ref[k][0] == "PASS" and ours.get(k, ("",))[0] != "PASS")
    print(f"\npassed by strata only ({len(only_ours)}):")
    for k in only_ours:
        print(f"  {k}    ort: {ref.get(k, ('MISSING', ''))[0]} {ref.get(k, ('', ''))[1][:100]}")
    print(f"\npassed by ONNX Runtime only ({len(only_ref)}):")
    for k in only_ref:
        print(f"  {k}    strata: {ours.get(k, ('MISSING', ''))[0]} {ours.get(k, ('', ''))[1][:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
