#!/usr/bin/env bash
# One-shot check of the CUDA provider on a machine with an NVIDIA GPU and driver >= r580
# (e.g. an H200): configure for the local GPU (CMAKE_CUDA_ARCHITECTURES=native), build,
# run the Cuda* unit tests (the CPU-vs-GPU packer parity included), then run the
# benchmark models through `strata` on the CPU and on cuda and print the latencies.
# Budget: under 8 minutes on a 16-core machine (the build dominates).
#
# Usage: scripts/gpu-check.sh [BUILD_DIR]      (default: build/gpu-check)
# Env:   STRATA_GPU_MODELS="mlp resnet18 ..."  models to time (default: mlp resnet18 bert)
#        STRATA_GPU_RUNS=5                     timed runs per model and device
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build/gpu-check}"
MODELS="${STRATA_GPU_MODELS:-mlp resnet18 bert}"
RUNS="${STRATA_GPU_RUNS:-5}"
JOBS="$(nproc)"
START=$(date +%s)
# Debian's python3 carries torch/onnx/numpy (python3-torch, python3-onnx); a pyenv shim may not.
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3

say() { printf '\n== %s (%ss)\n' "$*" "$(( $(date +%s) - START ))"; }
die() { printf 'gpu-check: error: %s\n' "$*" >&2; exit 1; }

say "environment"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader \
  || die "nvidia-smi cannot talk to the driver"
NVCC="${CUDACXX:-}"
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
[[ -z "$NVCC" ]] && NVCC="$(command -v nvcc || true)"
[[ -n "$NVCC" ]] || die "nvcc not found (install the CUDA 13 toolkit or set CUDACXX)"
"$NVCC" --version | tail -1

say "configure (CMAKE_CUDA_ARCHITECTURES=native, STRATA_CUDA=ON)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=native -DSTRATA_BUILD_BENCH=OFF >/dev/null

say "build"
# strata_test_providers: strata_tests' plugin fixtures; the CLI for the model runs.
timeout 300 ninja -C "$BUILD" -j"$JOBS" strata_provider_cuda strata_cli strata_tests strata_test_providers \
  || die "build failed or took over 5 minutes"

STRATA="$BUILD/bin/strata"
say "strata devices"
"$STRATA" devices
"$STRATA" devices --json | grep -q '"name": "cuda"' || die "cuda provider missing from the report"

say "Cuda* unit tests and the provider parity harness on cuda (a skip here means no usable device)"
timeout 180 "$BUILD/bin/strata_tests" --gtest_filter='Cuda*:Providers/ProviderParity.*/cuda' --gtest_brief=1 \
  | tee "$BUILD/cuda-tests.log"
grep -q 'SKIPPED' "$BUILD/cuda-tests.log" && die "a Cuda* test skipped on a GPU machine (see above)"

say "example model: CPU vs cuda outputs"
"$STRATA" run "$ROOT/examples/digits.onnx" --random -o "$BUILD/out-cpu" >/dev/null
"$STRATA" run "$ROOT/examples/digits.onnx" --random -o "$BUILD/out-cuda" --device cuda -v | tail -5

say "benchmark models (bench/models/make_models.py)"
MDIR="$BUILD/models"
if "$PY" -c 'import torch, onnx, numpy' 2>/dev/null; then
  # shellcheck disable=SC2086
  timeout 120 "$PY" "$ROOT/bench/models/make_models.py" "$MDIR" --only "$(echo $MODELS | tr ' ' ',')" >/dev/null \
    || echo "gpu-check: model generation failed or timed out; timing what exists"
else
  echo "gpu-check: $PY lacks torch/onnx/numpy; skipping model timings"
  MODELS=""
fi

# Median wall time of RUNS runs (process start, model load and session creation included).
time_run() {
  local model=$1 device=$2 inputs=() t0 t1 times=()
  for f in "$MDIR/${model}"_input_*.npy; do
    [[ -e "$f" ]] || continue
    local idx=${f##*_input_}; idx=${idx%.npy}
    local name
    name=$("$PY" -c "import json,sys; m=json.load(open('$MDIR/manifest.json')); \
e=[x for x in (m['models'] if isinstance(m,dict) and 'models' in m else m) if x['name']=='$model'][0]; \
print(e['inputs'][$idx]['name'])" 2>/dev/null) || return 1
    inputs+=(-i "$name=$f")
  done
  for _ in $(seq "$RUNS"); do
    t0=$(date +%s%N)
    timeout 60 "$STRATA" run "$MDIR/$model.onnx" "${inputs[@]}" --device "$device" >/dev/null 2>&1 || return 1
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p"
}

if [[ -n "$MODELS" ]]; then
  printf '%-14s %12s %12s\n' model "cpu ms" "cuda ms"
  for m in $MODELS; do
    [[ -e "$MDIR/$m.onnx" ]] || { printf '%-14s %12s %12s\n' "$m" missing missing; continue; }
    cpu=$(time_run "$m" cpu || echo FAIL)
    gpu=$(time_run "$m" cuda || echo FAIL)
    printf '%-14s %12s %12s\n' "$m" "$cpu" "$gpu"
  done
fi

say "done"
