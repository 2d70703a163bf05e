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

finish
