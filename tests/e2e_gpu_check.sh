#!/usr/bin/env bash
# End to end: scripts/gpu-check.sh, the one-command GPU check, on the CPU paths at tiny sizes.
# Prepared as for the GPU machine (--prepare --no-build: the bundle and the wheel or module of
# this build) where the GPU libraries were built, else straight from $BUILD (--cpu OUT); then the
# report must hold every row with the right kind of value: correctness checks pass (or skip,
# those that need a device), transfer and training figures numeric, every step finished, and OUT
# flat with its three files. A failing correctness check must give a non-zero exit with the
# report still written.
. "$(dirname "$0")/lib.sh"

case "$BUILD:${SAN:-}" in
  *address*|*thread*|*:?*)
    # a sanitizer build's module needs its runtime preloaded; the plain build covers the script
    echo "  (gpu-check is tested in the plain build only)"; exit 77 ;;
esac
need_python PY 'torch, torchvision, pytest' "no python3 with torch, torchvision and pytest"
export PYTHON=$PY
GC="$ROOT/scripts/gpu-check.sh"
# the report's correctness row runs test_cuda, which `make all` does not build: bring it up to
# date here (make check-e2e depends on it too), so the check runs after any build of the tree and
# never pairs a stale test_cuda with a newer GPU library
expect_exit 0 "make $BUILD/tests/test_cuda" make --no-print-directory -C "$ROOT" BUILD="$BUILD" \
  "$BUILD/tests/test_cuda"
OUT=$T/report

if [ -f "$ROOT/$BUILD/lib/libshardbench-gpu.so" ] && [ -x "$ROOT/$BUILD/tests/test_cuda" ]; then
  # packed at xz preset 3, 2.5x faster than the default 6 and still well under the size limit
  expect_exit 0 "--prepare --no-build" env XZ_PRESET=3 "$GC" --prepare "$T/prep" --no-build
  check "the prepared folder has the bundle, packed" test -s "$T/prep/bundle.tar.xz"
  check "and the module (a wheel or the built module)" \
    bash -c "ls '$T/prep'/*.whl >/dev/null 2>&1 || test -d '$T/prep/python'"
  check "its size is printed" grep -q "is [0-9]* MiB" "$T/out"
  check "with bench-augment.py's harness built (cpubench needs it there)" \
    bash -c "! grep -q 'harness did not build' '$T/err'"
  how=(--run "$T/prep" "$OUT" --cpu)
else
  how=(--cpu "$OUT")
fi
t0=$(date +%s)
expect_exit 0 "gpu-check.sh ${how[*]}" "$GC" "${how[@]}"
echo "       ($(( $(date +%s) - t0 ))s)"

TSV=$OUT/report.tsv
check "OUT holds report.tsv, report.md and logs.txt, nothing else" \
  test "$(cd "$OUT" && ls | tr '\n' ' ')" = "logs.txt report.md report.tsv "
check "the logs of every step" bash -c "for s in data test_cuda pytest check transfer train-resnet18 doctor-resnet18; do grep -q \"^######## \$s\$\" '$OUT/logs.txt' || exit 1; done"

"$PY" - "$TSV" > "$T/verdict" 2>&1 <<'PY'
import math, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
bad = []
if rows[0] != ["step", "config", "metric", "value", "unit", "note"]:
    bad.append(f"header {rows[0]}")
rows = rows[1:]
bad += [f"row of {len(r)} fields: {r}" for r in rows if len(r) != 6]
have = {(r[0], r[1], r[2]): r[3] for r in rows if len(r) == 6}

def num(v):
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None

for r in rows:
    if r[0] in ("data", "transfer", "train", "steps") and num(r[3]) is None:
        bad.append(f"not a number: {r}")
    if r[0] == "correctness" and r[3] not in ("pass", "skip"):
        bad.append(f"correctness not passed: {r}")
for c in ("test_cuda", "pytest", "loader_threads_deterministic"):
    if have.get(("correctness", c, "result")) != "pass":
        bad.append(f"correctness {c}: {have.get(('correctness', c, 'result'))}")
for c in ("pytest_pinned_test", "loader_is_pinned", "async_copy_equal", "copy_overlaps_compute",
          "slot_kept_until_copy_done"):
    if have.get(("correctness", c, "result")) not in ("pass", "skip"):
        bad.append(f"correctness {c} missing")
for c, m in (("pinned_memcpy", "rate"), ("pageable_memcpy", "rate"), ("loader_ring", "rate"),
             ("loader_ring", "vs_pinned"), ("loader_ring", "vs_pageable")):
    v = num(have.get(("transfer", c, m), ""))
    if v is None or v <= 0:
        bad.append(f"transfer {c} {m}: {have.get(('transfer', c, m))}")
for f in ("synthetic", "shardread:1", "shardread:2", "cudafeed:1", "dataloader:1", "dataloader:2"):
    cfg = f"resnet18/{f}"
    ips = num(have.get(("train", cfg, "images_per_s"), ""))
    stall = num(have.get(("train", cfg, "stall"), ""))
    cores = num(have.get(("train", cfg, "cores_busy"), ""))
    if ips is None or ips <= 0:
        bad.append(f"{cfg} images_per_s {have.get(('train', cfg, 'images_per_s'))}")
    if stall is None or not 0 <= stall <= 100:
        bad.append(f"{cfg} stall {have.get(('train', cfg, 'stall'))}")
    if cores is None or cores < 0:
        bad.append(f"{cfg} cores_busy {have.get(('train', cfg, 'cores_busy'))}")
    if f != "synthetic" and (num(have.get(("train", cfg, "vs_ceiling"), "")) or 0) <= 0:
        bad.append(f"{cfg} vs_ceiling missing")
# the doctor: threads='auto' and the fixed count, predicted and measured stall
for cfg in ("resnet18/threads=auto", "resnet18/threads=2"):
    for m in ("predicted_stall", "measured_stall"):
        v = num(have.get(("doctor", cfg, m), ""))
        if v is None or not 0 <= v <= 100:
            bad.append(f"doctor {cfg} {m} {have.get(('doctor', cfg, m))}")
    if (num(have.get(("doctor", cfg, "images_per_s"), "")) or 0) <= 0:
        bad.append(f"doctor {cfg} images_per_s {have.get(('doctor', cfg, 'images_per_s'))}")
    if num(have.get(("doctor", cfg, "active_threads"), "")) not in (1, 2):
        bad.append(f"doctor {cfg} active_threads {have.get(('doctor', cfg, 'active_threads'))}")
for s in ("data", "test_cuda", "pytest", "check", "transfer", "train-resnet18",
          "doctor-resnet18"):
    if have.get(("steps", s, "exit")) != "0":
        bad.append(f"step {s} exit {have.get(('steps', s, 'exit'))}")
if num(have.get(("data", "jpeg", "images"), "")) != 64:
    bad.append(f"data: {have.get(('data', 'jpeg', 'images'))} JPEGs, expected 2 x 4 x 8")
print("\n".join(bad) if bad else "ok")
sys.exit(1 if bad else 0)
PY
check "report.tsv: every row, numbers numeric, correctness passed or skipped" test "$(cat "$T/verdict")" = ok
grep -v '^ok$' "$T/verdict" | sed 's/^/       /' | head -20
check "report.md has its tables" bash -c "grep -q '^## Correctness' '$OUT/report.md' && grep -q '^## Transfer' '$OUT/report.md' && grep -q '^## Training' '$OUT/report.md' && grep -q '^| resnet18/dataloader:2 | [0-9]' '$OUT/report.md' && grep -q '^| resnet18/threads=auto | [0-9]' '$OUT/report.md'"
check "the CPU report says it holds no GPU figure" grep -q 'no GPU figure' "$OUT/report.md"

# a correctness check that fails (pytest collects nothing): exit 1, the report still written
expect_exit 1 "a failed correctness check fails the run" \
  env ONLY="data correctness" PYTEST_K=no_such_test_at_all "$GC" --cpu "$T/report2"
check "the failure is in the report" bash -c "awk -F'\t' '\$1 == \"correctness\" && \$2 == \"pytest\" && \$4 == \"fail\"' '$T/report2/report.tsv' | grep -q ."
check "and report.md still written" grep -q '| pytest | \*\*fail\*\*' "$T/report2/report.md"
expect_exit 2 "a usage error" "$GC" --run
finish
