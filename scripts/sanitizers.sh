#!/usr/bin/env bash
# Configures and builds a sanitizer preset, then runs tests under it.
#   scripts/sanitizers.sh asan   AddressSanitizer + UBSan (+ LeakSanitizer): the whole ctest
#                                suite except the packaging and fuzz labels.
#   scripts/sanitizers.sh tsan   ThreadSanitizer: the Concurrency* tests.
# Extra arguments go to ctest (asan) or to the gtest binary (tsan).
# Sanitizer builds are slow: on 2 cores expect well over half an hour for asan.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-}"
shift || true
jobs="${STRATA_SAN_JOBS:-2}"
case "$kind" in
  asan)
    cmake --preset asan >/dev/null
    cmake --build --preset asan -j "$jobs"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
    # Leaks inside libraries we do not own (protobuf's descriptor pool, libonnx's schema
    # registry, lavapipe) are process-lifetime singletons; the suppressions name only those.
    export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
    ctest --test-dir build/asan -j "$jobs" --output-on-failure -LE 'packaging|fuzz' "$@"
    ;;
  tsan)
    cmake --preset tsan >/dev/null
    cmake --build --preset tsan -j "$jobs" --target strata_tests
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
    ./build/tsan/bin/strata_tests --gtest_filter='Concurrency*' "$@"
    ;;
  *)
    echo "usage: scripts/sanitizers.sh asan|tsan [args]" >&2
    exit 2
    ;;
esac
