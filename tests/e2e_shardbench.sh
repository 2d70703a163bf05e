#!/usr/bin/env bash
# End to end: shardbench read on a shardc dataset (through libshardread) and on its source folder
# (the decode path): rows, keys, exact image counts for every order, cold runs, the memcpy
# baseline, and the exit codes of bad datasets and bad options. Speeds are never asserted.
. "$(dirname "$0")/lib.sh"
BENCH="$ROOT/$BUILD/bin/shardbench"

"$MKSAMPLE" "$T/src" --classes 4 --per-class 10 --seed 3 --quiet --no-broken || { echo "mksample failed"; exit 1; }
"$SHARDC" build "$T/src" -o "$T/ds" --size 32x32 --shard-samples 16 --no-progress >/dev/null 2>&1 \
  || { echo "shardc build failed"; exit 1; }
n=$(find "$T/src" -type f | wc -l)
[ "$n" -eq 40 ] || { echo "expected 40 source images, got $n"; exit 1; }

# rows FILE FORMAT... : the JSON lines of FILE are one row per FORMAT, in that order, each with the
# keys and exact counts for $n samples x $EPOCHS epochs; extra checks come as Python in $EXTRA
rows() {
  local file=$1; shift
  N=$n EPOCHS=$EPOCHS EXTRA=${EXTRA:-} python3 - "$file" "$@" <<'PY'
import json, os, sys
path, formats = sys.argv[1], sys.argv[2:]
n, epochs = int(os.environ["N"]), int(os.environ["EPOCHS"])
lines = [l for l in open(path) if l.strip()]
rows = [json.loads(l) for l in lines]
assert [r["format"] for r in rows] == formats, [r["format"] for r in rows]
keys = ["dataset", "format", "images_per_s", "mb_per_s", "cpu_s_per_image", "threads", "epochs",
        "cold", "images", "wall_s", "first_epoch", "measured_images", "errors", "width", "height"]
for r in rows:
    for k in keys:
        assert k in r, (k, r)
    assert r["epochs"] == epochs, r
    assert r["images"] == n * epochs, (r["images"], n * epochs)
    assert r["first_epoch"]["images"] == n, r["first_epoch"]
    assert r["measured_images"] == (n * (epochs - 1) if epochs > 1 else n), r
    assert r["errors"] == 0, r
    assert r["cpu_s_per_image"] > 0, r
    assert r["images_per_s"] > 0 and r["mb_per_s"] > 0 and r["wall_s"] > 0, r
    # MB/s is pixel bytes: images/s x the output geometry
    px = r["width"] * r["height"] * r["channels"]
    assert abs(r["mb_per_s"] - r["images_per_s"] * px / 1e6) <= 0.002 * r["mb_per_s"] + 0.11, r
exec(os.environ["EXTRA"])
PY
}

EPOCHS=3
EXTRA='
assert rows[0]["dataset"].endswith("/ds") and rows[1]["dataset"].endswith("/src")
assert all(r["threads"] == 2 and r["cold"] is False and r["order"] == "seq" for r in rows)
assert all((r["width"], r["height"], r["channels"]) == (32, 32, 3) for r in rows), rows
assert all(r["measured_epochs"] == "2-3" for r in rows)'
expect_exit 0 "read the dataset and its source folder (--json)" \
  "$BENCH" read "$T/ds" "$T/src" --json --epochs 3 --threads 2 --batch 16
cp "$T/out" "$T/seq.json"
check "raw and folder rows with exact counts; folder size taken from the dataset" \
  rows "$T/seq.json" raw folder

for order in random quasi; do
  EXTRA="assert all(r['order'] == '$order' for r in rows)"
  expect_exit 0 "--order $order" "$BENCH" read "$T/ds" "$T/src" --json -e 3 -j 2 -b 7 \
    --order "$order" --seed 9
  cp "$T/out" "$T/$order.json"
  check "--order $order: every sample once per epoch, partial batches included" \
    rows "$T/$order.json" raw folder
done

EPOCHS=2
EXTRA='
assert all(r["cold"] is True for r in rows)
assert all(0 <= r["resident_after_evict"] <= 1 for r in rows)'
expect_exit 0 "--cold" "$BENCH" read "$T/ds" "$T/src" --json --cold -e 2 -j 2 -b 16
cp "$T/out" "$T/cold.json"
check "--cold rows say cold and count exactly" rows "$T/cold.json" raw folder

EXTRA='
assert rows[0]["dataset"] == rows[1]["dataset"]
assert rows[1]["threads"] == rows[0]["threads"] == 1'
expect_exit 0 "--memcpy" "$BENCH" read "$T/ds" --json --memcpy -e 2 -j 1 -b 5 --order random
cp "$T/out" "$T/memcpy.json"
check "--memcpy adds a memcpy row of the same samples" rows "$T/memcpy.json" raw memcpy

EXTRA='assert rows[0]["cold"] is True'
expect_exit 0 "--memcpy --cold --access pread" "$BENCH" read "$T/ds" --json --memcpy --cold -e 2 \
  -j 2 --access pread
cp "$T/out" "$T/memcpy-cold.json"
check "--memcpy --cold rows" rows "$T/memcpy-cold.json" raw memcpy

EPOCHS=1
EXTRA='
assert (rows[0]["width"], rows[0]["height"]) == (24, 20), rows[0]
assert (rows[1]["width"], rows[1]["height"]) == (24, 20), rows[1]
assert rows[0]["measured_epochs"] == "1"'
expect_exit 0 "--size 24x20 (reader crops, folder resizes)" "$BENCH" read "$T/ds" "$T/src" --json \
  --size 24x20 -e 1
cp "$T/out" "$T/size.json"
check "--size applies to both rows" rows "$T/size.json" raw folder

EXTRA='assert (rows[0]["width"], rows[0]["height"]) == (224, 224), rows[0]'
expect_exit 0 "a folder alone is measured at 224x224" "$BENCH" read "$T/src" --json -e 1 -j 2
cp "$T/out" "$T/alone.json"
check "default folder size 224x224" rows "$T/alone.json" folder

EXTRA='
assert (rows[0]["width"], rows[0]["height"]) == (20, 20), rows[0]
assert (rows[1]["width"], rows[1]["height"]) == (20, 20), rows[1]'
expect_exit 0 "--size 20 is 20x20, as shardc takes it" "$BENCH" read "$T/ds" "$T/src" --json \
  --size 20 -e 1
cp "$T/out" "$T/square.json"
check "--size N applies NxN to both rows" rows "$T/square.json" raw folder

# human-readable table: a header, one row per dataset, the steady-state note
expect_exit 0 "table output" "$BENCH" read "$T/ds" "$T/src" --memcpy -e 2 -j 2
check "table has a header and raw, memcpy and folder rows" \
  bash -c "grep -q 'images/s' '$T/out' && grep -q ' raw ' '$T/out' && grep -q ' memcpy ' '$T/out' \
    && grep -q ' folder ' '$T/out' && grep -q 'reader / memcpy' '$T/out'"

# broken source files are skipped and counted, not fatal
"$MKSAMPLE" "$T/broken" --classes 2 --per-class 3 --seed 4 --quiet || { echo "mksample failed"; exit 1; }
nbroken=$(find "$T/broken" -name 'broken-*' | wc -l)
expect_exit 0 "a folder with broken files" "$BENCH" read "$T/broken" --json -e 2 --size 16x16
check "only the 6 valid images are delivered, every broken file counted per epoch" \
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read()); assert r["images"] == 12 and r["errors"] == 2 * int(sys.argv[2]), r' "$T/out" "$nbroken"
check "the skipped files are reported on stderr" grep -q "decodes failed" "$T/err"

# failures
expect_exit 1 "a missing dataset" "$BENCH" read "$T/nope" --json
check "the message names the missing dataset" grep -q "shardbench: cannot open $T/nope" "$T/err"
check "nothing is measured before a bad argument is found" [ ! -s "$T/out" ]
# Damaged samples: one pixel byte of samples 3 and 21 flipped in a copy (found in their shards by
# the bytes `shardc cat` gives of the clean dataset). --verify-samples catches them; --on-error
# substitute and skip finish every epoch and report the count; fail (the default) exits 1
# naming the shard.
mkdir -p "$T/dmg"
cp -r "$T/ds/." "$T/dmg/"
for i in 3 21; do
  "$SHARDC" cat "$T/ds" "$i" -o "$T/s$i.ppm" || { echo "shardc cat failed"; exit 1; }
done
python3 - "$T" <<'PY' || { echo "cannot damage the samples"; exit 1; }
import glob, os, sys
t = sys.argv[1]
for i in (3, 21):
    ppm = open(f"{t}/s{i}.ppm", "rb").read()
    pixels = ppm.split(b"\n", 3)[3]          # P6, W H, 255, pixels
    hits = []
    for shard in sorted(glob.glob(f"{t}/dmg/shard-*")):
        data = open(shard, "rb").read()
        off = data.find(pixels)
        if off >= 0:
            hits.append((shard, off))
    assert len(hits) == 1, (i, hits)
    shard, off = hits[0]
    with open(shard, "r+b") as f:
        f.seek(off + 11)
        b = f.read(1)[0]
        f.seek(off + 11)
        f.write(bytes([b ^ 0x10]))
PY
for mode in substitute skip; do
  expect_exit 0 "--on-error $mode --verify-samples over damaged samples" \
    "$BENCH" read "$T/dmg" --json -e 2 -j 2 -b 8 --order random --on-error "$mode" --verify-samples
  if [ "$mode" = substitute ]; then got=$((2 * n)); rep=4; skp=0; else got=$((2 * n - 4)); rep=0; skp=4; fi
  check "$mode: every epoch completes, $rep replaced and $skp skipped in the row" python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['images'] == $got and r['replaced'] == $rep and r['skipped'] == $skp, r" "$T/out"
  check "$mode: the count is reported on stderr, naming the shard" \
    grep -q "$T/dmg: $rep sample(s) replaced, $skp skipped over 2 epoch(s) (latest: .*shard-0000" "$T/err"
  expect_exit 0 "train --on-error $mode --verify-samples" "$BENCH" train "$T/dmg" --json -e 2 -j 2 \
    -b 8 --step-ms 0 --on-error "$mode" --verify-samples
  check "train $mode: the count is in its row" python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['replaced'] == $rep and r['skipped'] == $skp, r" "$T/out"
done
expect_exit 1 "--on-error fail (the default) with --verify-samples stops at a damaged sample" \
  "$BENCH" read "$T/dmg" -e 1 -j 2 -b 8 --on-error fail --verify-samples
check "the message names the shard" grep -q "cannot read $T/dmg: .*shard-0000" "$T/err"
expect_exit 1 "train --verify-samples stops at a damaged sample" \
  "$BENCH" train "$T/dmg" -e 1 -j 2 -b 8 --step-ms 0 --verify-samples
expect_exit 0 "without --verify-samples a pixel flip is not seen" "$BENCH" read "$T/dmg" -e 1 -j 2 -b 8
expect_exit 2 "a bad --on-error" "$BENCH" read "$T/ds" --on-error ignore
check "the message names the choices (the library's options table)" \
  grep -q "^shardbench: --on-error (on_error) must be one of fail, skip, substitute, not 'ignore'$" "$T/err"

# memory and devices: the ring says whether it is pinned and how big it is; a GPU asked for and
# not found fails with the reason; auto says on stderr why it runs on the CPU
expect_exit 0 "read: the ring's memory in the row" "$BENCH" read "$T/ds" --json -e 1 -j 2 -b 8
check "pinned and ring_bytes" python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert isinstance(r['pinned'], bool) and r['ring_bytes'] >= 8 * 32 * 32 * 3, r" "$T/out"
for src in ds src; do
  expect_exit 0 "train $src --device cpu: pageable memory, no copy figures" \
    "$BENCH" train "$T/$src" --json -e 1 -j 2 -b 8 --step-ms 0 --device cpu
  check "train $src --device cpu: the keys, null where no GPU ran" python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['device'] == 'cpu' and r['pinned'] is False and r['ring_bytes'] > 0, r
for k in ('h2d_gb_per_s', 'h2d_baseline_pinned_gb_per_s', 'h2d_pageable_gb_per_s',
          'h2d_vs_baseline', 'gpu_status'):
    assert k in r and r[k] is None, (k, r)" "$T/out"
done
"$BENCH" train "$T/ds" --json -e 1 -j 2 -b 8 --step-ms 0 --device gpu >"$T/gpu.json" 2>"$T/gpu.err"
gpu_rc=$?
if [ $gpu_rc -eq 1 ]; then
  check "--device gpu without a GPU: fails naming the cause" \
    grep -q "shardbench: cannot create the training step on the GPU: .*[a-z]: [a-zA-Z]" "$T/gpu.err"
  check "--device gpu without a GPU: nothing measured" [ ! -s "$T/gpu.json" ]
  expect_exit 0 "--device auto without a GPU" "$BENCH" train "$T/ds" --json -e 1 -j 2 -b 8 \
    --step-ms 0
  check "--device auto: the fall-back and its cause on stderr" \
    grep -q "shardbench: the training step runs on the CPU: .*: " "$T/err"
  check "--device auto: the cause in the row" python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['device'] == 'cpu' and r['gpu_status'] and r['h2d_vs_baseline'] is None, r" "$T/out"
else
  check "--device gpu with a GPU: runs (exit $gpu_rc)" [ $gpu_rc -eq 0 ]
  check "--device gpu: pinned batches and the copy baselines" python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['device'] == 'gpu' and r['pinned'] is True, r
assert r['h2d_gb_per_s'] > 0 and r['h2d_baseline_pinned_gb_per_s'] > 0, r
assert r['h2d_pageable_gb_per_s'] > 0 and r['h2d_vs_baseline'] > 0, r" "$T/gpu.json"
fi

expect_exit 1 "a missing dataset after a good one" "$BENCH" read "$T/ds" "$T/nope"
check "it is named" grep -q "cannot open $T/nope" "$T/err"
mkdir -p "$T/bad"
cp -r "$T/ds/." "$T/bad/"
echo '{"format": "shardc"' > "$T/bad/manifest.json"
expect_exit 1 "a dataset with a broken manifest" "$BENCH" read "$T/bad" --json
check "the message names it" grep -q "cannot open $T/bad" "$T/err"
mkdir -p "$T/empty/class"
expect_exit 1 "a folder without images" "$BENCH" read "$T/empty"
check "the message names it" grep -q "cannot open $T/empty" "$T/err"
expect_exit 1 "a file, not a directory" "$BENCH" read "$T/src/circle/00000.jpg"

expect_exit 2 "an unknown option" "$BENCH" read "$T/ds" --bogus
check "the message names the option" grep -q "unknown option '--bogus'" "$T/err"
expect_exit 2 "a bad --order" "$BENCH" read "$T/ds" --order sideways
check "the message names the table's names and the short form" grep -q \
  "^shardbench: --order (order) must be one of sequential, random, quasi, not 'sideways' (also seq)$" "$T/err"
expect_exit 2 "--threads 0" "$BENCH" read "$T/ds" --threads 0
check "the message states the library's range" \
  grep -q "^shardbench: --threads (threads) must be in 1..1024, not 0$" "$T/err"
expect_exit 2 "a bad --size" "$BENCH" read "$T/ds" --size 32x
check "the message names the forms" grep -q "bad --size '32x' (expected WxH or N" "$T/err"
expect_exit 2 "--size 0" "$BENCH" read "$T/ds" --size 0
expect_exit 2 "a bad --access" "$BENCH" read "$T/ds" --access tape
check "the message names the access modes" grep -q \
  "^shardbench: --access (access) must be one of mmap, pread, direct, not 'tape'$" "$T/err"
expect_exit 2 "--epochs without a value" "$BENCH" read "$T/ds" --epochs
expect_exit 2 "no dataset" "$BENCH" read --json
expect_exit 2 "no command" "$BENCH"
expect_exit 2 "an unknown command" "$BENCH" fly
expect_exit 0 "--help" "$BENCH" --help
check "--help lists read" grep -q "read DATASET" "$T/out"
expect_exit 0 "read --help" "$BENCH" read --help
check "read --help documents --cold" grep -q -- "--cold" "$T/out"
expect_exit 0 "--version" "$BENCH" --version
check "--version names the version" grep -q "^shardbench [0-9]" "$T/out"

finish
