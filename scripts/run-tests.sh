#!/usr/bin/env bash
# Run test programs and print one closing line: "tests: N passed, N failed".
#   scripts/run-tests.sh unit BIN...     check suites (each prints its own per-test results)
#   scripts/run-tests.sh e2e SCRIPT...   shell end-to-end tests (exit 0 = pass, 77 = skipped)
set -u
kind=$1; shift
# LeakSanitizer (in SAN=address builds) is told about libhdf5's own leaks, and only those
if [ -z "${LSAN_OPTIONS:-}" ]; then
  export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")/.." && pwd)/tests/lsan.supp:print_suppressions=0"
fi
pass=0; fail=0; skip=0; failed=()
for t in "$@"; do
  echo "== $t"
  if [ "$kind" = unit ]; then "$t"; else bash "$t"; fi
  rc=$?
  if [ $rc -eq 0 ]; then pass=$((pass+1))
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "   (skipped)"
  else fail=$((fail+1)); failed+=("$t"); fi
done
[ $fail -gt 0 ] && printf 'FAILED: %s\n' "${failed[@]}"
echo "$kind: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
