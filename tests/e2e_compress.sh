#!/usr/bin/env bash
# End to end: shardc build --compress lz4|zstd. Compressed raw shards give the same samples as
# plain ones (cat, and the reader's batch checksum in every access mode and order), verify and
# resume work unchanged, a damaged compressed block is a clean error naming the sample, and the
# option is refused where it does not apply.
. "$(dirname "$0")/lib.sh"
SHARDBENCH="$ROOT/$BUILD/bin/shardbench"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 10 --seed 5 --quiet --no-broken || { echo "mksample failed"; exit 1; }
"$MKSAMPLE" "$T/src/photo" --photo --classes 1 --per-class 8 --seed 6 --quiet || { echo "mksample failed"; exit 1; }

expect_exit 0 "plain raw build" "$SHARDC" build "$T/src" -o "$T/plain" --size 64x48 --shard-samples 9 -j2 --no-progress
for c in lz4 lz4:9 zstd zstd:-3 zstd:9; do
  expect_exit 0 "build --compress $c" "$SHARDC" build "$T/src" -o "$T/$c" --size 64x48 --shard-samples 9 -j2 --no-progress --compress "$c"
  expect_exit 0 "verify --compress $c" "$SHARDC" verify "$T/$c"
done
plain=$(cat "$T/plain"/shard-*.raw | wc -c)
for c in lz4 zstd zstd:9; do
  comp=$(cat "$T/$c"/shard-*.raw | wc -c)
  check "$c shards are smaller than plain ones ($comp < $plain)" [ "$comp" -lt "$plain" ]
done
check "the build options name the codec" grep -q '"compress": "zstd:9"' "$T/zstd:9/manifest.json"
check "entries record their codec (some samples stored compressed)" \
  python3 - "$T/zstd/shard-00000.raw" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n, ix = struct.unpack_from("<Q", b, 16)[0], struct.unpack_from("<Q", b, 32)[0]
codecs = [(struct.unpack_from("<H", b, ix + 64 * i + 38)[0] >> 8) & 15 for i in range(n)]
assert 2 in codecs, codecs
PY

# the same samples: cat, and the reader's checksum in every order and access mode
same=1
for i in 0 4 13 37; do
  "$SHARDC" cat "$T/plain" $i -o "$T/a.ppm" 2>/dev/null || same=0
  for c in lz4 zstd:9; do
    "$SHARDC" cat "$T/$c" $i -o "$T/b.ppm" 2>/dev/null || same=0
    cmp -s "$T/a.ppm" "$T/b.ppm" || same=0
  done
done
check "cat gives the same samples from plain and compressed shards" [ $same -eq 1 ]
sum() { "$SHARDBENCH" read "$1" --checksum --json -e 1 -b 5 -j "$2" --order "$3" --access "$4" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["checksum"])'; }
for order in seq random quasi; do
  want=$(sum "$T/plain" 1 "$order" mmap)
  all=1
  for c in lz4 zstd; do
    for a in mmap pread direct; do
      got=$(sum "$T/$c" 2 "$order" "$a")
      [ -n "$want" ] && [ "$got" = "$want" ] || { all=0; echo "       $c $a $order: $got, plain $want"; }
    done
  done
  check "order $order: compressed shards give plain's batch checksum in every access mode" [ $all -eq 1 ]
done

# damage: one byte in the middle of the first compressed payload of shard 1
cp -r "$T/zstd" "$T/bad"
info=$(python3 - "$T/bad/shard-00001.raw" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n, first, ix = struct.unpack_from("<QQQ", b, 16)
for i in range(n):
    off, length = struct.unpack_from("<QQ", b, ix + 64 * i)
    flags = struct.unpack_from("<H", b, ix + 64 * i + 38)[0]
    if (flags >> 8) & 15:
        stored = struct.unpack_from("<I", b, ix + 64 * i + 60)[0]
        print(off + stored // 2, first + i)
        break
PY
)
set -- $info
printf '\x7f' | dd of="$T/bad/shard-00001.raw" bs=1 seek="$1" conv=notrunc status=none
for a in mmap pread direct; do
  expect_exit 1 "reading a damaged compressed block fails ($a)" "$SHARDBENCH" read "$T/bad" --access "$a" -e 1 -j 2 -b 4
  check "the error names the shard and sample $2 ($a)" grep -q "shard-00001.raw: cannot read sample $2" "$T/err"
done
expect_exit 1 "verify finds the damaged block" "$SHARDC" verify "$T/bad"
check "verify names the sample" grep -q "sample $2" "$T/out" "$T/err"

# resume: a build killed after 13 samples continues to the same bytes
crash 13 "$SHARDC" build "$T/src" -o "$T/resumed" --size 64x48 --shard-samples 9 -j2 --no-progress --compress zstd
expect_exit 0 "resume a compressed build" "$SHARDC" build "$T/src" -o "$T/resumed" --size 64x48 --shard-samples 9 -j2 --no-progress --compress zstd --resume
check "the resumed build kept finished shards" grep -q "kept" "$T/err"
same=1
for f in "$T/zstd"/shard-*.raw "$T/zstd/manifest.json"; do cmp -s "$f" "$T/resumed/$(basename "$f")" || same=0; done
check "resumed shards and manifest are byte-identical to an uninterrupted build" [ $same -eq 1 ]
# the codec is part of the build's fingerprint: a resume with another one keeps nothing
crash 13 "$SHARDC" build "$T/src" -o "$T/switched" --size 64x48 --shard-samples 9 -j2 --no-progress --compress lz4
expect_exit 0 "resume with another codec" "$SHARDC" build "$T/src" -o "$T/switched" --size 64x48 --shard-samples 9 -j2 --no-progress --compress zstd --resume
check "no shard of the other codec was kept" bash -c '! grep -q "kept" "$1"' _ "$T/err"
same=1
for f in "$T/zstd"/shard-*.raw; do cmp -s "$f" "$T/switched/$(basename "$f")" || same=0; done
check "the result is the zstd build" [ $same -eq 1 ]
expect_exit 2 "--compress with --format jpeg is a usage error" "$SHARDC" build "$T/src" -o "$T/j" --format jpeg --compress lz4
expect_exit 2 "an unknown codec is a usage error" "$SHARDC" build "$T/src" -o "$T/j" --compress gzip
check "the message names the codec" grep -q "unknown codec 'gzip'" "$T/err"
expect_exit 2 "a bad level is a usage error" "$SHARDC" build "$T/src" -o "$T/j" --compress zstd:42

# ---- the mixed mode: --jpeg-fraction P stores the samples a hash of their index picks as JPEG
expect_exit 0 "build --jpeg-fraction 0.5" "$SHARDC" build "$T/src" -o "$T/mix" --size 64x48 --shard-samples 9 -j2 --no-progress --jpeg-fraction 0.5 --quality 80
expect_exit 0 "verify the mixed dataset" "$SHARDC" verify "$T/mix"
python3 - "$T/mix" > "$T/codecs" <<'PY'
import glob, struct, sys
for s in sorted(glob.glob(sys.argv[1] + "/shard-*.raw")):
    b = open(s, "rb").read()
    n, first, ix = struct.unpack_from("<QQQ", b, 16)
    for i in range(n):
        flags = struct.unpack_from("<H", b, ix + 64 * i + 38)[0]
        print(first + i, (flags >> 8) & 15)
PY
njpeg=$(awk '$2 == 3' "$T/codecs" | wc -l); ntotal=$(wc -l < "$T/codecs")
check "about half the samples are JPEG ($njpeg of $ntotal)" [ "$njpeg" -ge $((ntotal / 4)) -a "$njpeg" -le $((3 * ntotal / 4)) ]
same=1
for i in $(awk '$2 == 0 {print $1}' "$T/codecs"); do
  "$SHARDC" cat "$T/plain" "$i" -o "$T/a.ppm" 2>/dev/null && "$SHARDC" cat "$T/mix" "$i" -o "$T/b.ppm" 2>/dev/null &&
    cmp -s "$T/a.ppm" "$T/b.ppm" || same=0
done
check "the samples not picked are the plain build's pixels" [ $same -eq 1 ]
if [ -n "$PYPIL" ]; then
  for i in $(awk '$2 == 3 {print $1}' "$T/codecs" | head -6); do "$SHARDC" cat "$T/mix" "$i" -o "$T/j$i.ppm"; done
  check "JPEG samples read back as Pillow decodes their stored JPEG" "$PYPIL" - "$T/mix" "$T" <<'PY'
import glob, io, struct, sys
from PIL import Image
ds, t = sys.argv[1], sys.argv[2]
checked = 0
for s in sorted(glob.glob(ds + "/shard-*.raw")):
    b = open(s, "rb").read()
    n, first, ix = struct.unpack_from("<QQQ", b, 16)
    for i in range(n):
        off = struct.unpack_from("<Q", b, ix + 64 * i)[0]
        flags = struct.unpack_from("<H", b, ix + 64 * i + 38)[0]
        stored = struct.unpack_from("<I", b, ix + 64 * i + 60)[0]
        try:
            got = open(f"{t}/j{first + i}.ppm", "rb").read()
        except FileNotFoundError:
            continue
        assert (flags >> 8) & 15 == 3
        im = Image.open(io.BytesIO(b[off:off + stored]))
        assert im.format == "JPEG"
        want = im.convert("RGB").tobytes()
        assert got.endswith(want) and len(got) - len(want) < 20, (first + i)
        checked += 1
assert checked >= 3, checked
PY
else
  echo "  skip JPEG samples against Pillow (no python3 with Pillow)"
fi
for order in seq random; do
  a=$(sum "$T/mix" 1 "$order" mmap); b=$(sum "$T/mix" 2 "$order" pread); c=$(sum "$T/mix" 2 "$order" direct)
  check "mixed dataset, order $order: one batch checksum in every access mode" [ -n "$a" -a "$a" = "$b" -a "$a" = "$c" ]
done
expect_exit 2 "--jpeg-fraction outside 0..1 is a usage error" "$SHARDC" build "$T/src" -o "$T/j" --jpeg-fraction 1.5
expect_exit 2 "--jpeg-fraction with --format hdf5 is a usage error" "$SHARDC" build "$T/src" -o "$T/j" --format hdf5 --jpeg-fraction 0.5

finish
