#!/usr/bin/env bash
# End to end: --dry-run's projected size against what the build really writes, for every format
# and the options that change the size (geometry, gray, tiny samples, alignment, JPEG quality,
# augmentation); and the raw layout's honest size for tiny samples.
. "$(dirname "$0")/lib.sh"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 12 --seed 11 --quiet --no-broken || { echo "mksample failed"; exit 1; }

# bytes of every file under a directory
tree_bytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }

# projection NAME ARGS...: dry run, build, and the projection within 10% of the real size
projection() {
  local name=$1; shift
  local out="$T/$name"
  if ! "$SHARDC" build "$T/src" -o "$out" --dry-run --json --no-progress "$@" >"$T/dry.json" 2>"$T/err"; then
    bad "$name: dry run failed"; sed 's/^/       /' "$T/err" | head; return
  fi
  if ! "$SHARDC" build "$T/src" -o "$out" --no-progress "$@" >/dev/null 2>"$T/err"; then
    bad "$name: build failed"; sed 's/^/       /' "$T/err" | head; return
  fi
  local p real
  p=$(json_get "$T/dry.json" projected_bytes)
  real=$(tree_bytes "$out")
  if awk -v p="$p" -v r="$real" 'BEGIN { exit !(p >= 0.9 * r && p <= 1.1 * r) }'; then
    ok "$name: projected $p bytes, wrote $real"
  else
    bad "$name: projected $p bytes, wrote $real (more than 10% off)"
  fi
}

for f in raw hdf5 lmdb png0 bmp jpeg; do
  projection "$f-64x48" --format "$f" --size 64x48 -j2
done
projection "raw-short-side" --format raw --short-side 40 -j2
projection "raw-own-size" --format raw -j2
projection "raw-gray-8x8" --format raw --gray --size 8x8 -j2
projection "raw-align-4096" --format raw --size 64x48 --align 4096 -j2
projection "raw-shards" --format raw --size 96x96 --shard-samples 5 -j2
projection "raw-augment" --format raw --size 32x32 --augment 3 -j2
projection "jpeg-q50-short-side" --format jpeg --quality 50 --short-side 56 -j2
projection "jpeg-own-size" --format jpeg -j2
projection "lmdb-gray" --format lmdb --gray --size 40x40 -j2
projection "hdf5-short-side" --format hdf5 --short-side 40 -j2
projection "raw-lz4" --format raw --size 64x48 --compress lz4 -j2
projection "raw-jpeg-mix" --format raw --size 64x48 --jpeg-fraction 0.5 -j2
projection "raw-zstd-short-side" --format raw --short-side 40 --compress zstd:9 -j2

# tiny samples are packed: 8x8 gray is 64 pixel bytes and a 64-byte index entry per sample, not
# a 4096-byte page each
shard_bytes=$(cat "$T/raw-gray-8x8"/shard-*.raw | wc -c)
n=$(find "$T/src" -type f | wc -l)
check "8x8 gray: shards within 5% of pixels + index + one header page" \
  [ "$shard_bytes" -le $(( (128 * n) * 105 / 100 + 4096 + 64 )) ]
expect_exit 0 "8x8 gray: the shards verify" "$SHARDC" verify "$T/raw-gray-8x8"
# the packed and the aligned layout hold the same pixels
ok_same=1
for i in 0 5 17 35; do
  "$SHARDC" cat "$T/raw-64x48" $i -o "$T/p.ppm" 2>/dev/null || ok_same=0
  "$SHARDC" cat "$T/raw-align-4096" $i -o "$T/a.ppm" 2>/dev/null || ok_same=0
  cmp -s "$T/p.ppm" "$T/a.ppm" || ok_same=0
done
check "packed (version 2) and --align 4096 (version 1) shards give the same samples" [ $ok_same -eq 1 ]
check "the packed shard is version 2" [ "$(od -An -tu2 -j8 -N2 "$T/raw-64x48/shard-00000.raw" | tr -d ' ')" = 2 ]
check "--align 4096 writes version 1" [ "$(od -An -tu2 -j8 -N2 "$T/raw-align-4096/shard-00000.raw" | tr -d ' ')" = 1 ]

finish
