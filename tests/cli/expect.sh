#!/usr/bin/env bash
# expect.sh RC REGEX CMD...: runs CMD, passes if its exit status is RC ("nonzero" for
# any failure) and its combined output matches the extended REGEX.
rc_want=$1; re=$2; shift 2
out=$("$@" 2>&1); rc=$?
echo "$out"
if [ "$rc_want" = nonzero ]; then
  [ "$rc" -ne 0 ] || { echo "expect.sh: expected a failure, got exit 0"; exit 1; }
else
  [ "$rc" -eq "$rc_want" ] || { echo "expect.sh: expected exit $rc_want, got $rc"; exit 1; }
fi
echo "$out" | grep -Eq -- "$re" || { echo "expect.sh: output does not match /$re/"; exit 1; }
exit 0
