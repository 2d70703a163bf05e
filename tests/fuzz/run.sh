#!/usr/bin/env bash
# Run the fuzz targets (called by make fuzz-run and make fuzz-replay).
#   tests/fuzz/run.sh fuzz BINDIR CORPUS SECONDS NAME...
#       BINDIR/fuzz_NAME (libFuzzer) for SECONDS each, one after the other, on CORPUS/NAME and
#       tests/fuzz/regressions/NAME; new inputs go to BINDIR/work/NAME, findings (crashes, leaks,
#       ooms, timeouts) to BINDIR/crashes/NAME/ (emptied first) with a TRIAGE file saying whose
#       code is at fault (triage.awk), the log to BINDIR/logs/NAME.log. FUZZ_FLAGS adds
#       libFuzzer flags.
#   tests/fuzz/run.sh replay BINDIR CORPUS 0 NAME...
#       BINDIR/replay_NAME over CORPUS/NAME and tests/fuzz/regressions/NAME.
# Exit status 1 if a replay crashed, a fuzzer found a bug in our code (or one it cannot place), or a
# target had nothing to run on; findings inside third-party libraries and findings that do not
# reproduce alone are reported, not failed on (README.md says why).
set -uo pipefail
mode=${1:?usage: run.sh fuzz|replay BINDIR CORPUS SECONDS NAME...}
bindir=$2
corpus=$3
seconds=$4
shift 4
here=$(dirname "$0")
failed=()
# leaks inside third-party libraries (lsan.supp says which) are not findings of ours
export LSAN_OPTIONS="suppressions=$(cd "$here" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

dirs_of() {     # the existing input directories of target $1
  local d
  for d in "$corpus/$1" "$here/regressions/$1"; do
    [ -d "$d" ] && printf '%s\n' "$d"
  done
}

for name in "$@"; do
  mapfile -t dirs < <(dirs_of "$name")
  if [ ${#dirs[@]} -eq 0 ]; then
    echo "  FAIL    $name: no seeds or regressions (make fuzz-seeds)"
    failed+=("$name")
    continue
  fi
  if [ "$mode" = replay ]; then
    if out=$("$bindir/replay_$name" "${dirs[@]}" 2>&1); then
      echo "  ok      $name: $(echo "$out" | tail -1 | sed 's/.*: //')"
    else
      echo "$out" | tail -40
      echo "  FAIL    $name"
      failed+=("$name")
    fi
    continue
  fi
  work=$bindir/work/$name
  crashes=$bindir/crashes/$name
  log=$bindir/logs/$name.log
  rm -rf "$crashes"
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  dict=()
  [ -f "$here/dict/$name.dict" ] && dict=(-dict="$here/dict/$name.dict")
  # fork mode: a finding does not end the run, so one run reports every kind of finding and
  # findings inside third-party libraries (known for libhdf5) do not hide ours; -timeout: an
  # input running longer is a finding (a hang), like a crash
  # shellcheck disable=SC2086
  "$bindir/fuzz_$name" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -artifact_prefix="$crashes/" \
    "${dict[@]}" ${FUZZ_FLAGS:-} "$work" "${dirs[@]}" > "$log" 2>&1
  rc=$?
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
  runs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
  cov=$(echo "$last" | grep -o 'cov: [0-9]*')
  # triage: replay every finding alone and ask triage.awk whose code is at fault
  ours=0 third=0 gone=0 kinds=()
  for f in "$crashes"/*; do
    [ -f "$f" ] || continue
    out=$("$bindir/fuzz_$name" -runs=1 -timeout=20 -rss_limit_mb=2560 "$f" 2>&1)
    rrc=$?
    if [ $rrc -ne 0 ] && [[ $out == *"out-of-memory (used:"* ]]; then
      # memory grew past the limit: no stack says who; catch a single large allocation instead
      out=$("$bindir/fuzz_$name" -runs=1 -timeout=20 -rss_limit_mb=4096 -malloc_limit_mb=1024 \
              "$f" 2>&1)
      rrc=$?
    fi
    if [ $rrc -eq 0 ]; then
      verdict=unreproduced
      gone=$((gone + 1))
    else
      verdict=$(printf '%s\n' "$out" | awk -f "$here/triage.awk")
      case "$verdict" in
        third-party:*) third=$((third + 1)) ;;
        *) ours=$((ours + 1)) ;;
      esac
    fi
    kinds+=("$verdict")
    echo "$verdict $(basename "$f")" >> "$crashes/TRIAGE"
  done
  summary="${runs:-?} executions, $cov, $(find "$work" -type f | wc -l) corpus units"
  if [ ${#kinds[@]} -gt 0 ]; then
    summary+="; findings: $(printf '%s\n' "${kinds[@]}" | sort | uniq -c |
                            awk '{printf "%s%d %s", (NR > 1 ? ", " : ""), $1, $2}')"
  fi
  if [ $rc -ne 0 ] && [ ${#kinds[@]} -eq 0 ]; then
    tail -20 "$log"
    echo "  FAIL    $name (exit $rc, no finding saved): see $log"
    failed+=("$name")
  elif [ $ours -gt 0 ]; then
    echo "  FAIL    $name: $summary (see $crashes/TRIAGE, $log)"
    failed+=("$name")
  else
    echo "  ok      $name: $summary"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz $mode: failed: ${failed[*]}"
  exit 1
fi
