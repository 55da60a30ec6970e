#!/usr/bin/env bash
# Configures and builds a sanitizer preset, then runs tests under it (docs/hardening.md).
#   scripts/sanitizers.sh asan   AddressSanitizer + UBSan (+ LeakSanitizer): the whole ctest
#                                suite except the packaging and fuzz labels.
#   scripts/sanitizers.sh tsan   ThreadSanitizer: the Concurrency* tests, the kernel-level
#                                HeavyConcurrency* test and the LSTM's lock-free shared steps
#                                (NormRnnLstm.SharedSteps*; strata_tests only).
# Extra arguments go to ctest (asan, e.g. --rerun-failed or -R NAME) or to the gtest binary
# (tsan, e.g. --gtest_repeat=3). STRATA_SAN_JOBS sets the build and ctest parallelism (2).
# Sanitizer builds are slow: ~190 steps for asan (~2,500 CPU-s); on 2 busy cores expect an hour.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-}"
shift || true
jobs="${STRATA_SAN_JOBS:-2}"
case "$kind" in
  asan)
    cmake --preset asan >/dev/null
    cmake --build --preset asan -j "$jobs"
    # allocator_may_return_null: an allocation ASan cannot serve returns NULL, as glibc's
    # does, so the engine's OUT_OF_MEMORY paths (hostile shapes without a memory cap) are
    # exercised instead of ASan aborting the test.
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
    # Leaks inside libraries we do not own (protobuf's descriptor pool, libonnx's schema
    # registry, lavapipe) are process-lifetime singletons; the suppressions name only those.
    export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
    # Excluded labels: packaging builds and audits the release archives (release builds
    # only; it has no test in this build anyway); fuzz is the timed libFuzzer run, which
    # has its own ASan build (the fuzz preset, scripts/fuzz.sh).
    start=$SECONDS
    status=0
    ctest --test-dir build/asan -j "$jobs" --output-on-failure -LE 'packaging|fuzz' "$@" || status=$?
    echo "asan ctest: $((SECONDS - start)) s wall, exit $status"
    exit "$status"
    ;;
  tsan)
    cmake --preset tsan >/dev/null
    cmake --build --preset tsan -j "$jobs" --target strata_tests
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
    start=$SECONDS
    status=0
    ./build/tsan/bin/strata_tests --gtest_filter='Concurrency*:HeavyConcurrency*:NormRnnLstm.SharedSteps*' "$@" || status=$?
    echo "tsan tests: $((SECONDS - start)) s wall, exit $status"
    exit "$status"
    ;;
  *)
    echo "usage: scripts/sanitizers.sh asan|tsan [args]" >&2
    exit 2
    ;;
esac
