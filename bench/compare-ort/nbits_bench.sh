#!/usr/bin/env bash
# Side-by-side MatMulNBits benchmark, strata vs ONNX Runtime 1.30 (issue 8): one-node
# models (int4/int8, block 32, accuracy_level 0 and 4) timed alternately in `strata bench`
# and ort_bench, plus the memcpy bandwidth measured in the same run. Writes the markdown
# table between the nbits-bench markers of docs/quantization.md.
#
#   bench/compare-ort/nbits_bench.sh [nbits_bench.py options, e.g. --quick]
#
# Needs ONNX Runtime in bench/ort (bench/compare-ort/run.sh --quick installs it) and
# build/release/bin/strata. A full run takes about 3-4 minutes on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
STRATA="${STRATA:-$ROOT/build/release/bin/strata}"
if [[ ! -x "$STRATA" ]]; then
  cmake --preset release >/dev/null
  ninja -C build/release -j2 strata_cli >&2
fi
mkdir -p build/nbits-ort
MEMCPY=build/nbits-ort/nbits_memcpy
if [[ ! -x "$MEMCPY" || bench/compare-ort/nbits_memcpy.cc -nt "$MEMCPY" ]]; then
  g++ -std=c++17 -O2 -Wall -Wextra bench/compare-ort/nbits_memcpy.cc -o "$MEMCPY"
fi
exec /usr/bin/python3 bench/compare-ort/nbits_bench.py --strata "$STRATA" --memcpy "$MEMCPY" "$@"
