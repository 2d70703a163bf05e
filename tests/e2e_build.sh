#!/usr/bin/env bash
# End to end: generate a dataset, build, info, verify, cat, determinism across -j, damage detection.
. "$(dirname "$0")/lib.sh"

"$MKSAMPLE" "$T/src" --classes 4 --per-class 10 --seed 7 --quiet --no-broken || { echo "mksample failed"; exit 1; }
nsrc=$(find "$T/src" -type f | wc -l)

expect_exit 0 "build -j1 of a clean dataset" "$SHARDC" build "$T/src" -o "$T/a" -j1 --size 48x40 --shard-samples 15 --json --no-progress
cp "$T/out" "$T/build.json"
check "--json summary counts every input" [ "$(json_get "$T/build.json" samples)" -eq "$nsrc" ]
check "three shards of at most 15 samples" [ "$(ls "$T/a"/shard-*.raw | wc -l)" -eq $(( (nsrc + 14) / 15 )) ]
check "no temp files or journal left" [ -z "$(ls -A "$T/a" | grep -E 'tmp|journal')" ]
check "rejects.tsv has only its header" [ "$(cat "$T/a/rejects.tsv")" = "$(printf 'path\treason')" ]

expect_exit 0 "build -j4 of the same inputs" "$SHARDC" build "$T/src" -o "$T/b" -j4 --size 48x40 --shard-samples 15 --no-progress
same=1
for f in "$T/a"/shard-*.raw "$T/a/manifest.json"; do cmp -s "$f" "$T/b/$(basename "$f")" || same=0; done
check "-j1 and -j4 give byte-identical shards and manifest" [ $same -eq 1 ]

expect_exit 0 "info --json" "$SHARDC" info "$T/a" --json
cp "$T/out" "$T/info.json"
check "info reports the sample count" [ "$(json_get "$T/info.json" samples)" -eq "$nsrc" ]
check "info reports 4 classes" [ "$(json_get "$T/info.json" num_classes)" -eq 4 ]
expect_exit 0 "info (text)" "$SHARDC" info "$T/a"
check "text info names the geometry" grep -q "48x40, fit crop" "$T/out"

expect_exit 0 "verify a good dataset" "$SHARDC" verify "$T/a"

# cat: a P6 image of the right size whose pixels hash to the recorded value
expect_exit 0 "cat sample 3" "$SHARDC" cat "$T/a" 3 -o "$T/s3.ppm"
check "cat writes a 48x40 P6" [ "$(head -c 13 "$T/s3.ppm" | tr '\n' ' ')" = "P6 48 40 255 " ]
check "cat payload is 48*40*3 bytes" [ "$(stat -c %s "$T/s3.ppm")" -eq $((13 + 48*40*3)) ]
"$SHARDC" cat "$T/a" 3 > "$T/s3b.ppm"
check "cat to stdout equals cat -o" cmp -s "$T/s3.ppm" "$T/s3b.ppm"
expect_exit 2 "cat past the end" "$SHARDC" cat "$T/a" 100000

# labels follow sorted class folders and inputs stay in order
python3 - "$T/a" "$T/src" <<'PY' && ok "labels and order follow the class folders" || bad "labels and order"
import json, os, struct, sys
out, src = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(out, "manifest.json")))
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
assert m["classes"] == classes, (m["classes"], classes)
labels = []
for s in m["shards"]:
    b = open(os.path.join(out, s["file"]), "rb").read()
    n, idx_off = struct.unpack_from("<QQ", b, 16)[0], struct.unpack_from("<Q", b, 32)[0]
    for i in range(n):
        labels.append(struct.unpack_from("<i", b, idx_off + 64 * i + 24)[0])
expect = []
for c, name in enumerate(classes):
    expect += [c] * len([f for f in os.listdir(os.path.join(src, name))])
assert labels == expect, (labels, expect)
PY

# damage: flip one payload byte of sample 17 (shard 1, entry 2)
python3 - "$T/a/shard-00001.raw" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
idx = struct.unpack_from("<Q", b, 32)[0]
off = struct.unpack_from("<Q", b, idx + 64 * 2)[0]
b[off + 100] ^= 0x40
open(p, "wb").write(b)
PY
expect_exit 1 "verify finds a flipped byte" "$SHARDC" verify "$T/a"
check "verify names sample 17" grep -q "sample 17 " "$T/out"
check "verify names only the damaged sample" [ "$(grep -c damaged "$T/out")" -eq 1 ]

# a damaged header is reported for the whole shard
printf 'X' | dd of="$T/b/shard-00000.raw" bs=1 seek=20 conv=notrunc status=none
expect_exit 1 "verify finds a damaged shard header" "$SHARDC" verify "$T/b"
check "verify names the sample range of that shard" grep -q "samples 0-14" "$T/out"
expect_exit 1 "info refuses a dataset with a damaged shard" "$SHARDC" info "$T/b"

# dry run writes nothing
expect_exit 0 "dry run" "$SHARDC" build "$T/src" -o "$T/dry" --size 64x64 --dry-run --json
check "dry run creates no output" [ ! -e "$T/dry" ]
# 64x64x3 = 12288 bytes: runs of 5 samples fill 61440 bytes, a multiple of 4096 (no padding)
check "dry run projects the exact shard size" [ "$(json_get "$T/out" shard_bytes)" -eq $((4096 + nsrc * (4096*3 + 64))) ]

# geometry: --gray keeps one channel; no geometry keeps source sizes
expect_exit 0 "gray build" "$SHARDC" build "$T/src" -o "$T/g" --gray --size 32x32 --no-progress
"$SHARDC" cat "$T/g" 0 -o "$T/g0.pgm"
check "gray samples are P5" [ "$(head -c 2 "$T/g0.pgm")" = "P5" ]
expect_exit 0 "keep-size build" "$SHARDC" build "$T/src" -o "$T/k" --no-progress --max-side 64
maxside=0; n=$(json_get "$T/k/manifest.json" samples); varied=0
for i in $(seq 0 $((n-1))); do
  read -r w h < <("$SHARDC" cat "$T/k" "$i" | head -c 20 | sed -n 2p)
  [ "$w" -gt "$maxside" ] && maxside=$w; [ "$h" -gt "$maxside" ] && maxside=$h
  [ "$w" -ne "$h" ] && varied=1
done
check "--max-side caps every long side at 64" [ "$maxside" -eq 64 ]
check "keep-size samples keep their aspect (not all square)" [ "$varied" -eq 1 ]
finish
