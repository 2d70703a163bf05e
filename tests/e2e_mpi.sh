#!/usr/bin/env bash
# End to end: `mpirun -n 4 shardc-mpi build` gives the dataset a one-machine build gives; a rank
# that fails (its part folder cannot be made: a file stands there) stops every rank with a clear
# message, a non-zero exit and no manifest, and --resume then finishes the job. Skipped where
# shardc-mpi or mpirun is missing (shardc-mpi is built where mpicc is found).
. "$(dirname "$0")/lib.sh"
SHARDBENCH="$ROOT/$BUILD/bin/shardbench"
MPI_BIN="$ROOT/$BUILD/bin/shardc-mpi"
if [ ! -x "$MPI_BIN" ] || ! command -v mpirun >/dev/null; then
  echo "  skip: shardc-mpi or mpirun not found (scripts/deps.sh installs Open MPI)"; exit 77
fi
# Open MPI refuses root without these; --oversubscribe: more ranks than cores
mpi() { mpirun --allow-run-as-root --oversubscribe -n "$@"; }
# Open MPI's own allocations outlive MPI_Finalize: not ours to report. LeakSanitizer reads one
# suppressions file (the last suppressions= wins), so the suites' file and Open MPI's are joined.
cat "$ROOT/tests/lsan.supp" "$ROOT/tests/mpi-lsan.supp" > "$T/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$T/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
# keep its components loaded at exit, so that leak reports can name (and suppress) them
export OMPI_MCA_mca_base_component_disable_dlclose=1
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$ROOT/tests/mpi-tsan.supp"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 12 --seed 11 --quiet || { echo "mksample failed"; exit 1; }
opts=(--size 40x30 --shard-samples 7 --no-progress -j1)
"$SHARDC" build "$T/src" -o "$T/ref" "${opts[@]}" >/dev/null 2>&1
check "reference build finished with rejects (exit 1)" [ $? -eq 1 ]

checksum() {
  "$SHARDBENCH" read "$1" --threads 2 --batch 4 --order seq --epochs 1 --checksum --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["checksum"])'
}
manifest_rest() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m.pop("shards"); print(json.dumps(m, sort_keys=True))' "$1/manifest.json"
}
same_as_ref() {
  local d=$1 f
  [ -e "$d/manifest.json" ] || { echo "    no manifest in $d"; return 1; }
  [ "$(checksum "$d")" = "$(checksum "$T/ref")" ] || { echo "    checksum differs"; return 1; }
  [ "$(manifest_rest "$d")" = "$(manifest_rest "$T/ref")" ] || { echo "    manifest differs"; return 1; }
  for f in rejects.tsv inputs.tsv; do cmp -s "$T/ref/$f" "$d/$f" || { echo "    $f differs"; return 1; }; done
  "$SHARDC" verify "$d" >/dev/null 2>&1 || { echo "    verify fails"; return 1; }
}

expect_exit 1 "mpirun -n 4 shardc-mpi build (rejects: exit 1)" \
  mpi 4 "$MPI_BIN" build "$T/src" -o "$T/m4" "${opts[@]}" --json
check "4 ranks == one-machine build" same_as_ref "$T/m4"
check "4 parts were built" [ "$(ls "$T/m4/parts" | wc -l)" -eq 4 ]
check "one summary, from rank 0" [ "$(grep -c '^shardc-mpi: wrote 36 samples' "$T/err")" -eq 1 ]
check "no per-part summaries" [ "$(grep -c '^shardc: wrote' "$T/err")" -eq 0 ]
check "one JSON summary on stdout" [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])' <"$T/out")" = 36 ]
expect_exit 1 "mpirun -n 1" mpi 1 "$MPI_BIN" build "$T/src" -o "$T/m1" "${opts[@]}"
check "1 rank == one-machine build" same_as_ref "$T/m1"

# a rank that cannot make its part folder stops them all, and no manifest is written
mkdir -p "$T/fail/parts"
: >"$T/fail/parts/00002-of-00004"
expect_exit 3 "a failing rank makes mpirun exit 3" \
  mpi 4 "$MPI_BIN" build "$T/src" -o "$T/fail" "${opts[@]}"
check "the failing rank says why" grep -q "cannot write to $T/fail/parts/00002-of-00004: not a directory" "$T/err"
check "rank 0 names the failed rank" grep -q "rank 2 (part 2 of 4) failed (exit 3)" "$T/err"
check "and says no manifest was written" grep -q "1 of 4 rank(s) failed.*no manifest written" "$T/err"
check "no manifest" [ ! -e "$T/fail/manifest.json" ]
rm "$T/fail/parts/00002-of-00004"
expect_exit 1 "after the cause is gone, --resume finishes the job" \
  mpi 4 "$MPI_BIN" build "$T/src" -o "$T/fail" "${opts[@]}" --resume
check "the resumed job == one-machine build" same_as_ref "$T/fail"

expect_exit 2 "shardc-mpi refuses --part" mpi 2 "$MPI_BIN" build "$T/src" -o "$T/x" "${opts[@]}" --part 0/2
expect_exit 2 "shardc-mpi usage error once" mpi 2 "$MPI_BIN" build "$T/src" "${opts[@]}"
check "the usage error is printed by rank 0 only" [ "$(grep -c 'no output directory' "$T/err")" -eq 1 ]
finish
