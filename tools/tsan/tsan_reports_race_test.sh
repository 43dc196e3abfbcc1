#!/usr/bin/env bash
# Under --config=tsan: racy_program's unguarded write must be reported as a data race naming
# BumpUnlocked, and the program must fail (halt_on_error).
set -uo pipefail
program="$1"
output=$("$program" 2>&1)
status=$?
if [ "$status" -eq 0 ]; then
  echo "FAIL: racy_program exited 0; TSan reported nothing. Output:"; echo "$output"; exit 1
fi
if ! grep -q "WARNING: ThreadSanitizer: data race" <<<"$output"; then
  echo "FAIL: exit $status without a data race report. Output:"; echo "$output"; exit 1
fi
if ! grep -q "BumpUnlocked" <<<"$output"; then
  echo "FAIL: the report does not name BumpUnlocked. Output:"; echo "$output"; exit 1
fi
echo "PASS: TSan reported the race in BumpUnlocked (exit $status)"
