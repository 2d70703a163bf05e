#!/usr/bin/env bash
# Run test programs and print one closing line: "tests: N passed, N failed".
#   scripts/run-tests.sh unit BIN...     check suites (each prints its own per-test results)
#   scripts/run-tests.sh e2e SCRIPT...   shell end-to-end tests (exit 0 = pass, 77 = skipped)
# A program exits 77 when a reference tool it compares against is missing (tests/tuskip.h). With
# SHARDC_NO_SKIP=1 (.ci/run sets it) such a skip is a failure: CI cannot pass without them.
set -u
kind=$1; shift
# LeakSanitizer (in SAN=address builds) is told about libhdf5's own leaks, and only those
if [ -z "${LSAN_OPTIONS:-}" ]; then
  export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")/.." && pwd)/tests/lsan.supp:print_suppressions=0"
fi
pass=0; fail=0; skip=0; failed=()
for t in "$@"; do
  echo "== $t"
  t0=$SECONDS
  # a hang is a failure, not a stalled run: 20 minutes each (the slowest, under TSan, take 5)
  if [ "$kind" = unit ]; then timeout -k 10 1200 "$t"; else timeout -k 10 1200 bash "$t"; fi
  rc=$?
  # each test's wall time, so that the slow ones can be found in a CI log
  echo "   ($((SECONDS - t0)) s)"
  [ $rc -eq 124 ] && echo "   (killed after 20 minutes: a hang)"
  if [ $rc -eq 0 ]; then pass=$((pass+1))
  elif [ $rc -eq 77 ] && [ "${SHARDC_NO_SKIP:-0}" = 1 ]; then
    fail=$((fail+1)); failed+=("$t (skipped, and SHARDC_NO_SKIP=1 makes a skip a failure)")
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "   (skipped)"
  else fail=$((fail+1)); failed+=("$t"); fi
done
[ $fail -gt 0 ] && printf 'FAILED: %s\n' "${failed[@]}"
echo "$kind: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
