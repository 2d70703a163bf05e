#!/usr/bin/env bash
# End to end: one generated dataset built in every format holds the same samples (byte for byte;
# for jpeg, equal to decoding the JPEG files shardc wrote) with the same labels; verify passes on
# each and names damage in each; standard tools read HDF5 and LMDB output; reading with 8 threads
# gives the same batches as 1.
. "$(dirname "$0")/lib.sh"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 7 --seed 4 --quiet --no-broken || { echo "mksample failed"; exit 1; }
formats=(raw hdf5 lmdb png0 bmp jpeg)
for f in "${formats[@]}"; do
  expect_exit 0 "build --format $f" "$SHARDC" build "$T/src" -o "$T/$f" --format "$f" --size 24x20 --shard-samples 8 --no-progress
  expect_exit 0 "verify $f" "$SHARDC" verify "$T/$f"
  check "$f: info names the backend" sh -c "'$SHARDC' info '$T/$f' --json | grep -q '\"backend\": \"$f\"'"
done
n=$(json_get "$T/raw/manifest.json" samples)

# every sample equal to raw's, labels too (jpeg: equal to its own files decoded by djpeg)
fails=0
for f in hdf5 lmdb png0 bmp; do
  for i in $(seq 0 $((n - 1))); do
    cmp -s <("$SHARDC" cat "$T/raw" "$i") <("$SHARDC" cat "$T/$f" "$i") || { fails=$((fails+1)); echo "    $f sample $i differs"; }
  done
done
check "hdf5, lmdb, png0 and bmp samples equal raw's byte for byte" [ $fails -eq 0 ]
fails=0
for i in $(seq 0 $((n - 1))); do
  file=$(find "$T/jpeg" -name "$(printf '%08d' "$i").jpg" | head -1)
  [ -n "$file" ] || { fails=$((fails+1)); continue; }
  cmp -s <("$SHARDC" cat "$T/jpeg" "$i" | tail -c +14) <(djpeg -pnm "$file" | tail -c +14) || fails=$((fails+1))
done
check "jpeg samples equal djpeg's decode of the files shardc wrote" [ $fails -eq 0 ]
labels() { for i in $(seq 0 $((n - 1))); do "$SHARDC" info "$1" --sample "$i" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["label"])'; done | tr '\n' ' '; }
ref=$(labels "$T/raw")
for f in hdf5 lmdb png0 bmp jpeg; do
  check "$f: same labels as raw" [ "$(labels "$T/$f")" = "$ref" ]
done

# standard tools
if command -v h5dump >/dev/null; then
  check "h5dump reads an HDF5 shard" sh -c "h5dump -H '$T/hdf5/shard-00000.h5' | grep -q pixels"
fi
if command -v mdb_stat >/dev/null; then
  check "mdb_stat reads an LMDB shard" sh -c "mdb_stat '$T/lmdb/shard-00000.lmdb' | grep -q Entries"
fi
check "png0 files sit in class folders" [ "$(find "$T/png0" -name '*.png' | wc -l)" -eq "$n" ]

# the batch stream (indices, labels, pixels) read through libshardread: the same with 1 and 8
# threads, and the same in every lossless format
sum_of() { "$ROOT/$BUILD/bin/shardbench" read "$1" --threads "$2" --batch 4 --order random --epochs 2 --checksum --json 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["checksum"])'; }
ref=$(sum_of "$T/raw" 1)
check "raw: a checksum came back ($ref)" [ -n "$ref" ]
for f in "${formats[@]}"; do
  one=$(sum_of "$T/$f" 1); eight=$(sum_of "$T/$f" 8)
  check "$f: 8 reader threads give the batches 1 thread gives" [ -n "$one" ] && [ "$one" = "$eight" ]
  [ "$f" = jpeg ] || check "$f: the same batches as raw" [ "$one" = "$ref" ]
done

# a build killed partway and resumed gives the manifest (which pins every shard's content hash)
# of an uninterrupted build, in every format
for f in hdf5 lmdb png0 jpeg; do
  crash 9 "$SHARDC" build "$T/src" -o "$T/k$f" --format "$f" --size 24x20 --shard-samples 8 --no-progress
  "$SHARDC" build "$T/src" -o "$T/k$f" --format "$f" --size 24x20 --shard-samples 8 --no-progress --resume >/dev/null 2>&1
  check "$f: kill after sample 9 then --resume gives the same manifest" cmp -s "$T/$f/manifest.json" "$T/k$f/manifest.json"
  expect_exit 0 "$f: the resumed dataset verifies" "$SHARDC" verify "$T/k$f"
done

# damage in each format is named by verify
python3 - "$T" <<'PY'
import glob, os, sys
t = sys.argv[1]
def flip(path, frac=0.5):
    b = bytearray(open(path, "rb").read()); k = int(len(b) * frac); b[k] ^= 0x55
    open(path, "wb").write(b)
raw = t + "/raw/shard-00000.raw"
b = bytearray(open(raw, "rb").read())
idx = int.from_bytes(b[32:40], "little"); off = int.from_bytes(b[idx:idx + 8], "little")
b[off + 7] ^= 0x55
open(raw, "wb").write(b)
flip(sorted(glob.glob(t + "/png0/*/*.png"))[0], 0.6)
flip(sorted(glob.glob(t + "/bmp/*/*.bmp"))[0], 0.6)
PY
for f in raw png0 bmp; do
  expect_exit 1 "verify names damage in $f" "$SHARDC" verify "$T/$f"
  check "$f: a damaged sample is named" grep -q "damaged: sample" "$T/out"
done
rm "$(find "$T/jpeg" -name '*.jpg' | sort | head -1)"
expect_exit 1 "verify names a missing jpeg file" "$SHARDC" verify "$T/jpeg"

# truncated and garbage HDF5 / LMDB files: clean errors, no crash
truncate -s 1000 "$T/hdf5/shard-00000.h5"
expect_exit 1 "verify a truncated .h5" "$SHARDC" verify "$T/hdf5"
check "the message names the shard" grep -q "shard-00000.h5" "$T/out"
expect_exit 1 "info on a truncated .h5" "$SHARDC" info "$T/hdf5"
head -c 70000 /dev/urandom > "$T/lmdb/shard-00000.lmdb/data.mdb"
expect_exit 1 "verify a garbage data.mdb" "$SHARDC" verify "$T/lmdb"
check "the message names the shard" grep -q "shard-00000.lmdb" "$T/out"
finish
