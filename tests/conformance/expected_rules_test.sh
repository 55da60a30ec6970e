#!/usr/bin/env bash
# The runner's expected-failures rules (runner.cc): a listed case that passes is an error,
# unless its reason starts with "random op" (a random op's draw may match numpy's by chance).
# node/test_abs always passes, so it stands in for both kinds of listed case.
set -u
runner="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "node/test_abs random op: stand-in" > "$tmp/random.txt"
echo "node/test_abs some other reason" > "$tmp/plain.txt"

out="$("$runner" --suites node --filter node/test_abs --expected-failures "$tmp/random.txt")"
rc=$?
if [ $rc -ne 0 ] || ! grep -q "PASS node/test_abs (listed random op" <<<"$out"; then
  echo "FAIL: a listed random op that passes should be reported and accepted (rc $rc):"; echo "$out"; exit 1
fi
out="$("$runner" --suites node --filter node/test_abs --expected-failures "$tmp/plain.txt")"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "UNEXPECTED PASS node/test_abs" <<<"$out"; then
  echo "FAIL: a listed case that passes should fail the run (rc $rc):"; echo "$out"; exit 1
fi
for bad in 0 -1 x 2x 257 ""; do
  out="$("$runner" --threads "$bad" --suites node --filter node/test_abs 2>&1)"
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "--threads wants a count from 1 to 256, got '$bad'" <<<"$out"; then
    echo "FAIL: --threads '$bad' should be refused with a clear error (rc $rc):"; echo "$out"; exit 1
  fi
done
out="$("$runner" --threads 2 --suites node --filter node/test_abs -v)"
if [ $? -ne 0 ] || ! grep -q "PASS node/test_abs" <<<"$out"; then
  echo "FAIL: --threads 2 should run the case:"; echo "$out"; exit 1
fi
# --run-one runs after all options are read, so a --threads after it applies too.
out="$("$runner" --run-one /usr/share/libonnx-testdata/data/node/test_abs --threads 2)"
if [ $? -ne 0 ] || [ "$out" != "PASS" ]; then
  echo "FAIL: --run-one with --threads after it should run the case:"; echo "$out"; exit 1
fi
echo "expected-failures rules: ok"
