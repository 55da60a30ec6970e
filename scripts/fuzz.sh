#!/usr/bin/env bash
# Builds the `fuzz` preset (clang-14 + libFuzzer + ASan/UBSan) and runs every fuzz target
# for SECONDS_PER_TARGET seconds (default 60) from the seed corpora. Any crash leaves its
# input as build/fuzz/artifacts/<target>/crash-* and makes the script fail; minimise it,
# fix the bug, and commit the input under tests/data/hostile/<target>/ (hostile_test.cc
# replays those files through the same entry points in the normal test suite).
#   Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (targets: model run npy elf)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(model run npy elf)
command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 is required (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${STRATA_FUZZ_JOBS:-2}"

root=build/fuzz
seed_corpus() {  # $1: target, $2: folder to fill
  local t="$1" dir="$2"
  mkdir -p "$dir"
  case "$t" in
    model)
      cp -f examples/*.onnx tests/data/*.onnx "$dir"/ 2>/dev/null || true
      # A selection of the ONNX conformance models: small, many different ops.
      local n=0
      for f in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
        [ -f "$f" ] || continue
        n=$((n + 1)); [ $((n % 8)) -eq 0 ] || continue
        cp -f "$f" "$dir/$(basename "$(dirname "$f")").onnx"
      done
      for f in /usr/share/libonnx-testdata/data/simple/*/model.onnx; do
        [ -f "$f" ] && cp -f "$f" "$dir/simple_$(basename "$(dirname "$f")").onnx"
      done ;;
    run)
      # Every node conformance model (small graphs of one op, with typed inputs to run),
      # the "simple" ones, the test models, and small com.microsoft QOperator models (the
      # conformance data has no contrib ops).
      cp -f examples/*.onnx tests/data/*.onnx tests/data/fuzz_seeds/run/*.onnx "$dir"/ 2>/dev/null || true
      for f in /usr/share/libonnx-testdata/data/node/*/model.onnx /usr/share/libonnx-testdata/data/simple/*/model.onnx; do
        [ -f "$f" ] && cp -f "$f" "$dir/$(basename "$(dirname "$f")").onnx"
      done ;;
    npy) cp -f tests/data/npy/*.npy tests/data/*.npy examples/*.npy "$dir"/ 2>/dev/null || true ;;
    elf)
      # Small system ELF files plus, when the release tree exists, strata's own library.
      for f in /bin/true /usr/lib/x86_64-linux-gnu/libdl.so.2 build/release/lib/libstrata.so.*.*.*; do
        [ -f "$f" ] && cp -f "$f" "$dir/$(basename "$f")"
      done ;;
  esac
  # Every input that once crashed stays in the corpus.
  cp -f tests/data/hostile/"$t"/* "$dir"/ 2>/dev/null || true
}

fail=0
for t in "${targets[@]}"; do
  bin="$root/fuzz-targets/strata_fuzz_$t"
  [ -x "$bin" ] || bin="$root/fuzz/strata_fuzz_$t"
  art="$root/artifacts/$t/"
  seeds="$root/seeds/$t"
  rm -rf "$seeds"
  seed_corpus "$t" "$seeds"
  mkdir -p "$art"
  extra=()
  launch=()
  if [ -n "${STRATA_FUZZ_SEED:-}" ]; then
    # Reproducible runs (CI): the same seed inputs in the same order, a fixed seed, a cap on
    # executions, a fresh output corpus and no address randomisation make a run the same
    # sequence of inputs on every machine with this CPU and checkout path (source paths are
    # compiled in and move the binary's globals), so what passed here passes there.
    # (libFuzzer sorts its seeds by size only, so ties kept the directory's order, which
    # differs between file systems; with ASLR, pointer-keyed hashing changed which edges an
    # input covered, and two runs here already diverged at start-up.)
    corpus="$root/corpus-seeded/$t"
    rm -rf "$corpus"
    mkdir -p "$corpus"
    find "$seeds" -type f | LC_ALL=C sort | paste -sd, >"$root/seeds/$t.list"
    extra+=("-seed=$STRATA_FUZZ_SEED" "-seed_inputs=@$root/seeds/$t.list" -reload=0)
    if setarch "$(uname -m)" -R true 2>/dev/null; then
      launch=(setarch "$(uname -m)" -R)
    else
      echo "fuzz.sh: cannot disable address randomisation here (setarch -R); the run may differ from other machines'"
    fi
  else
    # Exploring: the corpus keeps what earlier runs found.
    corpus="$root/corpus/$t"
    mkdir -p "$corpus"
    cp -f "$seeds"/* "$corpus"/
  fi
  echo "== fuzzing $t for ${secs}s ($(ls "$seeds" | wc -l) seed files)"
  runs="${STRATA_FUZZ_RUNS:-}"
  # The run target's executions are capped as well (STRATA_FUZZ_RUN_RUNS, default 30000, about
  # 30 s on a 2-vCPU VM) whenever a cap is set: a machine faster than the one that checked the
  # seeded run then repeats the checked inputs instead of going past them.
  if [ -n "$runs" ] && [ "$t" = run ] && [ "$runs" -gt "${STRATA_FUZZ_RUN_RUNS:-30000}" ]; then
    runs="${STRATA_FUZZ_RUN_RUNS:-30000}"
  fi
  [ -n "$runs" ] && extra+=("-runs=$runs")
  # ELF and model seeds are large; -max_len caps mutated inputs so runs stay fast.
  maxlen=65536
  [ "$t" = npy ] && maxlen=8192
  if ! ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}" \
      "${launch[@]}" "$bin" "$corpus" -max_total_time="$secs" -max_len="$maxlen" -rss_limit_mb=2048 -timeout=25 \
      -artifact_prefix="$art" -print_final_stats=1 "${extra[@]}" 2>"$root/$t.log"; then
    echo "!! $t: crash, see $root/$t.log and $art" >&2
    tail -40 "$root/$t.log" >&2
    fail=1
  else
    grep -E "^stat::(number_of_executed_units|new_units_added)" "$root/$t.log" || true
  fi
done
exit "$fail"
