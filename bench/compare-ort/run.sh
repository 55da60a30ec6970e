#!/usr/bin/env bash
# Side-by-side strata vs ONNX Runtime 1.30 benchmark.
#
#   bench/compare-ort/run.sh [--quick] [compare.py options...]
#
# 1. installs ONNX Runtime 1.30 (npm onnxruntime-node, CPU library only) and the ORT
#    C/C++ headers (npm com.github.asus4.onnxruntime, from its iOS xcframework) into
#    bench/ort/ (git-ignored; never committed),
# 2. compiles bench/compare-ort/ort_bench.cc against them (linked to the .so, rpath),
# 3. generates the benchmark models if missing, builds strata's CLI, and
# 4. runs compare.py, which writes docs/benchmarks.md and docs/benchmarks.png.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ORT_DIR="$ROOT/bench/ort"
ORT_VERSION=1.30.0
HEADERS_PKG=com.github.asus4.onnxruntime@0.4.9
cd "$ROOT"

QUICK=0
for a in "$@"; do [[ "$a" == "--quick" ]] && QUICK=1; done

ORT_LIB="$ORT_DIR/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"
HDR_ROOT="$ORT_DIR/node_modules/com.github.asus4.onnxruntime"
if [[ ! -f "$ORT_LIB" || ! -d "$HDR_ROOT" ]]; then
  command -v npm >/dev/null || { echo "run.sh: npm is required (apt-get install -y npm)" >&2; exit 1; }
  mkdir -p "$ORT_DIR"
  echo "== installing onnxruntime-node@$ORT_VERSION and $HEADERS_PKG into $ORT_DIR" >&2
  # ONNXRUNTIME_NODE_INSTALL=skip: the package's postinstall would otherwise try to
  # download GPU binaries and fail; the CPU library ships inside the package.
  (cd "$ORT_DIR" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --no-save \
      "onnxruntime-node@$ORT_VERSION" "$HEADERS_PKG" >&2)
fi
[[ -f "$ORT_LIB" ]] || { echo "run.sh: $ORT_LIB missing after npm install" >&2; exit 1; }
HDR="$(dirname "$(find "$HDR_ROOT" -path '*ios-arm64/*Headers/onnxruntime_c_api.h' | head -n 1)")"
[[ -f "$HDR/onnxruntime_c_api.h" ]] || { echo "run.sh: onnxruntime_c_api.h not found under $HDR_ROOT" >&2; exit 1; }

# Link against the versioned .so by path; rpath lets ort_bench find it at run time.
mkdir -p "$ORT_DIR/lib"
ln -sf "$ORT_LIB" "$ORT_DIR/lib/libonnxruntime.so"
ORT_BENCH="$ORT_DIR/ort_bench"
if [[ ! -x "$ORT_BENCH" || "$ROOT/bench/compare-ort/ort_bench.cc" -nt "$ORT_BENCH" ||
      "$ROOT/bench/compare-ort/ort_check.h" -nt "$ORT_BENCH" ]]; then
  echo "== compiling $ORT_BENCH" >&2
  g++ -std=c++17 -O2 -Wall -Wextra -I"$HDR" "$ROOT/bench/compare-ort/ort_bench.cc" -o "$ORT_BENCH" \
      -L"$ORT_DIR/lib" -lonnxruntime -Wl,-rpath,"$(dirname "$ORT_LIB")"
fi

# The chart (docs/benchmarks.png) needs python3-matplotlib, a Debian package: installed here
# when missing and run as root (as scripts/install-deps.sh installs the build's packages).
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  if [[ $(id -u) == 0 ]]; then
    echo "== installing python3-matplotlib (for the chart)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-matplotlib >&2
  else
    echo "run.sh: python3-matplotlib is missing (apt-get install -y python3-matplotlib); no chart" >&2
  fi
fi

MODELS=(mlp lstm resnet18)
[[ $QUICK == 1 ]] || MODELS=(mlp lstm mobilenet_v2 resnet18 resnet50 bert gpt2)
MISSING=()
for m in "${MODELS[@]}"; do [[ -f "bench/models/out/$m.onnx" ]] || MISSING+=("$m"); done
if (( ${#MISSING[@]} )); then
  echo "== generating models: ${MISSING[*]}" >&2
  /usr/bin/python3 bench/models/make_models.py --only "$(IFS=,; echo "${MISSING[*]}")" >&2
fi

STRATA="${STRATA:-$ROOT/build/release/bin/strata}"
if [[ ! -x "$STRATA" ]]; then
  echo "== building strata" >&2
  cmake --preset release >/dev/null
  ninja -C build/release -j2 strata_cli >&2
fi

exec /usr/bin/python3 "$ROOT/bench/compare-ort/compare.py" --strata "$STRATA" --ort-bench "$ORT_BENCH" "$@"
