#!/usr/bin/env bash
# Builds the release preset and runs the whole test suite (the README's test command), then
# fuzzes every libFuzzer target for a bounded time (docs/hardening.md).
#   STRATA_FUZZ_SECONDS  seconds per fuzz target (default 40; 4 targets). 0 skips fuzzing.
#   STRATA_FUZZ_SEED / STRATA_FUZZ_RUNS  libFuzzer -seed / -runs (defaults 1 / 800000): a
#                        fixed seed and execution cap make the run reproducible (scripts/fuzz.sh
#                        also fixes the seed files' order and turns off address randomisation),
#                        so a test command that passed once keeps passing on a machine with
#                        the same CPU and checkout path; scripts/fuzz.sh alone explores with
#                        random seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release
cmake --build --preset release
ctest --preset release -j2

# Fuzzing needs clang-14 and its libFuzzer runtime (scripts/install-deps.sh installs both).
# It builds its own tree (build/fuzz: strata_core + the audit reader + 4 targets, all with
# clang + ASan/UBSan); a crash, leak or sanitizer report fails this script.
fuzz_secs="${STRATA_FUZZ_SECONDS:-40}"
if [ "$fuzz_secs" = 0 ]; then
  echo "test.sh: STRATA_FUZZ_SECONDS=0: fuzzing skipped"
elif ! command -v clang++-14 >/dev/null || ! compgen -G "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "test.sh: clang-14 / libclang-rt-14-dev not installed: fuzzing skipped"
else
  start=$SECONDS
  STRATA_FUZZ_SEED="${STRATA_FUZZ_SEED:-1}" STRATA_FUZZ_RUNS="${STRATA_FUZZ_RUNS:-800000}" \
    bash scripts/fuzz.sh "$fuzz_secs"
  echo "test.sh: fuzz build + runs took $((SECONDS - start)) s"
fi
