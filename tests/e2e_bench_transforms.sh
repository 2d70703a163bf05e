#!/usr/bin/env bash
# End to end: the reader's read-time transforms through shardbench read, train and compare
# (--rrc, --flip, --interpolation, --dtype, --layout, --normalize, and the augmentations
# --color-jitter .. --cutmix): the delivered batches do not
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
check "the message names --dtype, the table's names and the short forms" grep -q \
  "^shardbench: --dtype (dtype) must be one of uint8, float32, float16, not 'f64' (also u8, f32, f16)$" "$T/err"
expect_exit 2 "a bad --layout" "$BENCH" read "$T/ds" --layout hwc
check "the message names the layouts" grep -q \
  "^shardbench: --layout (layout) must be one of NHWC, NCHW, not 'hwc' (any case)$" "$T/err"
expect_exit 2 "a bad --interpolation" "$BENCH" read "$T/ds" --rrc --interpolation cubic
check "the message names the filters" grep -q \
  "must be one of nearest, box, bilinear, hamming, bicubic, lanczos, not 'cubic'$" "$T/err"
expect_exit 2 "a bad --flip probability" "$BENCH" read "$T/ds" --flip=1.5
check "the message states the library's range" \
  grep -q "^shardbench: --flip (flip_p) must be in 0..1, not 1.5$" "$T/err"
expect_exit 2 "--normalize with a std missing" "$BENCH" read "$T/ds" --normalize=1,2,3/4,5,6,7,8
expect_exit 2 "transforms on an image folder" "$BENCH" read "$T/src" --rrc
check "... say the folder is no shardc dataset" grep -q "image folder, not a shardc dataset" "$T/err"
expect_exit 2 "train: transforms on an image folder" "$BENCH" train "$T/src" --rrc
expect_exit 1 "uint8 cannot hold normalised values (the reader refuses)" \
  "$BENCH" read "$T/ds" --size 24x24 --dtype u8 --normalize
check "... with the reader's reason" grep -q "normalisation needs a float dtype" "$T/err"
# the augmentations: every one changes the batches, none depends on the thread count
AUG=(--size 24x24 --rrc --flip --color-jitter 0.4,0.4,0.4,0.1 --grayscale 0.2 --rotation 15
     --affine 10,0.1,0.9,1.1,5 --auto-augment ta_wide --erase 0.3 --dtype f32 --normalize
     -e 2 --order random --seed 5 --checksum --json)
expect_exit 0 "read with every per-sample augmentation (1 thread)" "$BENCH" read "$T/ds" "${AUG[@]}" --threads 1
check "the row names them" grep -q 'RandomRotation 15, RandomAffine 10, TrivialAugmentWide, ColorJitter 0.4,0.4,0.4,0.1, RandomGrayscale 0.2, RandomErasing 0.3' "$T/out"
aug=$(field "$T/out" checksum)
expect_exit 0 "... and with 3 threads" "$BENCH" read "$T/ds" "${AUG[@]}" --threads 3
check "same batches at 1 and 3 threads" [ "$(field "$T/out" checksum)" = "$aug" ]
expect_exit 0 "... without them" "$BENCH" read "$T/ds" --size 24x24 --rrc --flip --dtype f32 --normalize \
  -e 2 --order random --seed 5 --checksum --json --threads 2
check "the augmentations change the batches" [ "$(field "$T/out" checksum)" != "$aug" ]
for pol in rand_augment imagenet; do
  expect_exit 0 "--auto-augment $pol" "$BENCH" read "$T/ds" --size 24x24 --rrc --auto-augment $pol --checksum --json
done
expect_exit 0 "MixUp and CutMix per batch (float32)" \
  "$BENCH" read "$T/ds" --size 24x24 --rrc --dtype f32 --mixup 0.2 --cutmix 1.0 --threads 2 --checksum --json
check "... named in the row" grep -q 'MixUp 0.2, CutMix 1' "$T/out"
expect_exit 0 "train with MixUp on normalised floats" \
  "$BENCH" train "$T/ds" --size 24x24 --rrc --flip --normalize --mixup 0.2 --model softmax --device cpu -e 2 -b 8 --json
expect_exit 1 "MixUp on uint8 (the reader refuses)" "$BENCH" read "$T/ds" --size 24x24 --mixup 0.2
check "... with the reader's reason" grep -q "mixup and cutmix need a float dtype" "$T/err"
expect_exit 2 "a bad --color-jitter" "$BENCH" read "$T/ds" --color-jitter 0.4,0.4,0.4
check "... named" grep -q "bad --color-jitter '0.4,0.4,0.4'" "$T/err"
expect_exit 2 "a hue above 0.5" "$BENCH" read "$T/ds" --color-jitter 0,0,0,0.7
expect_exit 2 "a bad --auto-augment" "$BENCH" read "$T/ds" --auto-augment autoaugment
expect_exit 2 "a bad --affine" "$BENCH" read "$T/ds" --affine 10,0.1,0.9
expect_exit 2 "a bad --grayscale" "$BENCH" read "$T/ds" --grayscale 2
expect_exit 2 "a bad --cutmix" "$BENCH" read "$T/ds" --cutmix 0
expect_exit 0 "read --help documents the transforms" "$BENCH" read --help
check "... --rrc and --normalize" bash -c "grep -q -- '--rrc \[SMIN:SMAX' '$T/out' && grep -q -- '--normalize \[dataset' '$T/out'"

finish
