#!/usr/bin/env bash
# End to end: the reader's read-time transforms through shardbench read, train and compare
# (--rrc, --flip, --interpolation, --dtype, --layout, --normalize): the delivered batches do not
# depend on threads or access path, every spelling of the same options gives the same batches,
# float rows count their bytes, the CPU step trains on normalised floats, and bad values or
# combinations are usage errors that name the option. Speeds are never asserted.
. "$(dirname "$0")/lib.sh"
BENCH="$ROOT/$BUILD/bin/shardbench"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 8 --seed 4 --quiet --no-broken || { echo "mksample failed"; exit 1; }
"$SHARDC" build "$T/src" -o "$T/ds" --short-side 40 --max-side 64 --shard-samples 7 --no-progress \
  >/dev/null 2>&1 || { echo "shardc build failed"; exit 1; }

# field FILE KEY: KEY of the first JSON row of FILE
field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' "$1" "$2"; }

TF=(--size 32x24 --rrc --flip --dtype f32 --layout nchw --normalize)
expect_exit 0 "read with RandomResizedCrop, flip, float32 NCHW, normalised (1 thread)" \
  "$BENCH" read "$T/ds" "${TF[@]}" --threads 1 -e 3 --order random --seed 5 --checksum --json
cp "$T/out" "$T/a.json"
check "the row says which transforms" grep -q '"transform": "RandomResizedCrop 0.08:1 ratio 0.75:1.33333 bilinear, flip p=0.5, float32 NCHW normalised (dataset statistics)"' "$T/a.json"
check "MB/s counts 4 bytes per value" python3 -c '
import json,sys; r = json.loads(open(sys.argv[1]).readline())
px = r["width"] * r["height"] * r["channels"] * 4
assert abs(r["mb_per_s"] - r["images_per_s"] * px / 1e6) <= 0.002 * r["mb_per_s"] + 0.11, r' "$T/a.json"
want=$(field "$T/a.json" checksum)
expect_exit 0 "the same with 3 threads, pread, every default spelled out" \
  "$BENCH" read "$T/ds" --size 32x24 --rrc 0.08:1:0.75:1.3333333333333333 --flip=0.5 \
  --interpolation bilinear --dtype float32 --layout NCHW --normalize dataset --threads 3 \
  --access pread -e 3 --order random --seed 5 --checksum --json
check "same batches whatever the threads, access and spelling" [ "$(field "$T/out" checksum)" = "$want" ]
expect_exit 0 "another seed" "$BENCH" read "$T/ds" "${TF[@]}" -e 3 --order random --seed 6 --checksum --json
check "another seed, other batches" [ "$(field "$T/out" checksum)" != "$want" ]
expect_exit 0 "float16 NHWC with given statistics, bicubic, --rrc=SPEC" \
  "$BENCH" read "$T/ds" --size 20x20 --rrc=0.3:0.9 --interpolation bicubic --dtype f16 \
  --normalize 123.7,116.3,103.5/58.4,57.1,57.4 --checksum --json
check "float16 rows count 2 bytes per value" python3 -c '
import json,sys; r = json.loads(open(sys.argv[1]).readline())
assert abs(r["mb_per_s"] - r["images_per_s"] * 20 * 20 * 3 * 2 / 1e6) <= 0.002 * r["mb_per_s"] + 0.11, r' "$T/out"
expect_exit 0 "the table names the transforms" "$BENCH" read "$T/ds" --size 24x24 --rrc --flip
check "... under the table" grep -q "^transforms by the reader: RandomResizedCrop" "$T/out"

# train: the CPU step learns from the reader's normalised float batches as from the uint8 ones it
# normalises itself (the same images: the losses agree to float16's precision)
expect_exit 0 "train a softmax model on uint8 RandomResizedCrops (CPU)" \
  "$BENCH" train "$T/ds" --size 24x24 --rrc --flip --model softmax --device cpu -e 3 -b 8 --json
cp "$T/out" "$T/u8.json"
expect_exit 0 "train it on normalised float16 NCHW RandomResizedCrops (CPU)" \
  "$BENCH" train "$T/ds" --size 24x24 --rrc --flip --dtype f16 --layout nchw --normalize \
  --model softmax --device cpu -e 3 -b 8 --json
check "the same training as on uint8, and it learns" python3 -c '
import json,sys; a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert all(abs(x - y) < 0.01 for x, y in zip(a["loss"], b["loss"])), (a["loss"], b["loss"])
assert b["accuracy"][-1] > 0.5, b' "$T/u8.json" "$T/out"

# bad values and combinations: usage errors naming the option
expect_exit 2 "--rrc with SMIN 0" "$BENCH" read "$T/ds" --rrc 0:1
check "the message names --rrc" grep -q "bad --rrc '0:1'" "$T/err"
expect_exit 2 "--rrc with SMIN > SMAX" "$BENCH" read "$T/ds" --rrc=0.9:0.5
expect_exit 2 "--rrc with RMIN > RMAX" "$BENCH" read "$T/ds" --rrc=0.1:1:2:1
expect_exit 2 "a bad --dtype" "$BENCH" read "$T/ds" --dtype f64
check "the message names --dtype" grep -q "bad --dtype 'f64'" "$T/err"
expect_exit 2 "a bad --layout" "$BENCH" read "$T/ds" --layout hwc
expect_exit 2 "a bad --interpolation" "$BENCH" read "$T/ds" --rrc --interpolation cubic
expect_exit 2 "a bad --flip probability" "$BENCH" read "$T/ds" --flip=1.5
expect_exit 2 "--normalize with a std missing" "$BENCH" read "$T/ds" --normalize=1,2,3/4,5,6,7,8
expect_exit 2 "transforms on an image folder" "$BENCH" read "$T/src" --rrc
check "... say the folder is no shardc dataset" grep -q "image folder, not a shardc dataset" "$T/err"
expect_exit 2 "train: transforms on an image folder" "$BENCH" train "$T/src" --rrc
expect_exit 1 "uint8 cannot hold normalised values (the reader refuses)" \
  "$BENCH" read "$T/ds" --size 24x24 --dtype u8 --normalize
check "... with the reader's reason" grep -q "normalisation needs a float dtype" "$T/err"
expect_exit 0 "read --help documents the transforms" "$BENCH" read --help
check "... --rrc and --normalize" bash -c "grep -q -- '--rrc \[SMIN:SMAX' '$T/out' && grep -q -- '--normalize \[dataset' '$T/out'"

finish
