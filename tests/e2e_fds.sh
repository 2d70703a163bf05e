#!/usr/bin/env bash
# Descriptors and mappings per shard: a reader holds none of its own per shard (mapped shards
# close theirs once mapped, pread and O_DIRECT shards take theirs from a bounded cache, lmdb
# shards close their environment once validated, HDF5 holds at most 32 chunked files open), so a
# dataset of one sample per shard reads under a small `ulimit -n` in every access mode, with a
# Dataset and a Loader open at once: shardc info, verify and cat, and a whole epoch of the
# Loader whose every sample equals the Dataset's, for raw, lmdb, and hdf5 shards contiguous and
# chunked. FDS_SHARDS sets the raw shard count: with the plain build, 3,618 past the mapping cap
# (a quarter of vm.max_map_count: 16,382 mapped by default, so 20,000 shards, the last 3,618 read
# with pread; the whole test takes 32 s on two cores), at most 100,000 where the setting is so
# high that the cap is past that; 300 with a sanitizer build (past `ulimit -n 256`, in seconds);
# the other formats use min(FDS_SHARDS, 300) shards.
. "$(dirname "$0")/lib.sh"

case "$BUILD" in
  *address*|*thread*) SANBUILD=1; N=${FDS_SHARDS:-300} ;;
  *) SANBUILD=
     N=$(( $(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 65530) / 4 + 3618 ))
     N=${FDS_SHARDS:-$(( N < 100000 ? N : 100000 ))} ;;
esac
M=$(( N < 300 ? N : 300 ))
# the build fsyncs every shard: on tmpfs that costs nothing (20,000 shards in seconds)
W=$T
if [ -d /dev/shm ] && [ -w /dev/shm ] && W2=$(mktemp -d /dev/shm/shardc-fds.XXXXXX); then
  W=$W2
  trap 'rm -rf "$T" "$W"' EXIT
fi
PER=$(( (N + 3) / 4 ))
"$MKSAMPLE" "$W/in" --classes 4 --per-class "$PER" --min-side 8 --max-side 8 --no-broken \
  --quiet >/dev/null
expect_exit 0 "build $((PER * 4)) samples of 4x4, one per shard" \
  "$SHARDC" build "$W/in" -o "$W/ds" --shard-samples 1 --size 4x4 --threads 2
S=$(json_get "$W/ds/manifest.json" samples)
check "one shard per sample" test "$(ls "$W/ds" | grep -c '\.raw$')" -eq "$S"
PER2=$(( (M + 3) / 4 ))
"$MKSAMPLE" "$W/in2" --classes 4 --per-class "$PER2" --min-side 8 --max-side 8 --no-broken \
  --quiet >/dev/null
S2=$(( PER2 * 4 ))

# a limit well under the shard count: every reader below opens every shard
lim() { (ulimit -n 256 && "$@"); }
expect_exit 0 "info under ulimit -n 256" lim "$SHARDC" info "$W/ds"
check "info counts every shard" grep -q "^shards: *$S," "$T/out"
expect_exit 0 "verify under ulimit -n 256" lim "$SHARDC" verify "$W/ds"
check "verify reads every sample" grep -q "all $S samples in $S shard(s) verified" "$T/err"
expect_exit 0 "cat of the last sample under ulimit -n 256" \
  lim "$SHARDC" cat "$W/ds" $((S - 1)) -o "$W/last.ppm"
check "cat wrote a 4x4 PPM" test "$(head -c 7 "$W/last.ppm" | tr '\n' ' ')" = "P6 4 4 "

# hdf5 shards (contiguous pixels) likewise: mapped, or read with the cache's descriptors
expect_exit 0 "build $S2 as hdf5" "$SHARDC" build "$W/in2" -o "$W/h5" --shard-samples 1 \
  --size 4x4 --threads 2 --format hdf5
expect_exit 0 "hdf5: info under ulimit -n 256" lim "$SHARDC" info "$W/h5"
check "hdf5: info counts every shard" grep -q "^shards: *$S2," "$T/out"
expect_exit 0 "hdf5: verify under ulimit -n 256" lim "$SHARDC" verify "$W/h5"
check "hdf5: verify reads every sample" grep -q "all $S2 samples in $S2 shard(s) verified" "$T/err"

# chunked hdf5 (read through HDF5's own H5Dread, which holds a descriptor per open file): the
# same shards repacked chunked and compressed by h5repack, the manifest's byte counts updated
# and its pins (which hash the contiguous layout) dropped, as a manifest of an older build has none
cp -r "$W/h5" "$W/h5c"
ls "$W"/h5c/*.h5 | xargs -P 4 -I{} sh -c \
  'h5repack -l pixels:CHUNK=1x4x4x3 -f pixels:GZIP=1 "$1" "$1.tmp" && mv "$1.tmp" "$1"' sh {} ||
  bad "h5repack failed"
check "every shard repacked" test "$(ls "$W/h5c" | grep -c '\.h5$')" -eq "$S2"
check "the pixels are chunked and deflated" \
  sh -c "h5ls -v '$W/h5c/shard-00000.h5/pixels' | grep -q 'deflate'"
"${PYTHON:-python3}" - "$W/h5c" <<'PY'
import json, os, sys
d = sys.argv[1]
p = os.path.join(d, "manifest.json")
m = json.load(open(p))
for s in m["shards"]:
    s.pop("file_hash", None)
    s.pop("pin", None)
    s["bytes"] = os.path.getsize(os.path.join(d, s["file"]))
json.dump(m, open(p, "w"), indent=1)
PY
expect_exit 0 "chunked hdf5: info under ulimit -n 256" lim "$SHARDC" info "$W/h5c"
check "chunked hdf5: info counts every shard" grep -q "^shards: *$S2," "$T/out"
expect_exit 0 "chunked hdf5: verify under ulimit -n 256" lim "$SHARDC" verify "$W/h5c"
check "chunked hdf5: verify reads every sample" \
  grep -q "all $S2 samples in $S2 shard(s) verified" "$T/err"
expect_exit 0 "chunked hdf5: cat of the last sample under ulimit -n 256" \
  lim "$SHARDC" cat "$W/h5c" $((S2 - 1)) -o "$W/h5last.ppm"
"$SHARDC" cat "$W/h5" $((S2 - 1)) -o "$W/h5last0.ppm" >/dev/null 2>&1
check "chunked hdf5: the same pixels as contiguous" cmp -s "$W/h5last.ppm" "$W/h5last0.ppm"

# lmdb shards: each environment closed once validated, the shard mapped or read with pread
expect_exit 0 "build $S2 as lmdb" "$SHARDC" build "$W/in2" -o "$W/lm" --shard-samples 1 \
  --size 4x4 --threads 2 --format lmdb
check "lmdb: one environment per sample" test "$(ls "$W/lm" | grep -c '\.lmdb$')" -eq "$S2"
expect_exit 0 "lmdb: info under ulimit -n 256" lim "$SHARDC" info "$W/lm"
check "lmdb: info counts every shard" grep -q "^shards: *$S2," "$T/out"
expect_exit 0 "lmdb: verify under ulimit -n 256" lim "$SHARDC" verify "$W/lm"
check "lmdb: verify reads every sample" grep -q "all $S2 samples in $S2 shard(s) verified" "$T/err"
expect_exit 0 "lmdb: cat of the last sample under ulimit -n 256" \
  lim "$SHARDC" cat "$W/lm" $((S2 - 1)) -o "$W/lmlast.ppm"
check "lmdb: the same pixels as hdf5" cmp -s "$W/lmlast.ppm" "$W/h5last0.ppm"

cat >"$W/epoch.py" <<'PY'
import os, sys
import numpy as np
import shardread
path, n = sys.argv[1], int(sys.argv[2])
for access in ("mmap", "pread", "direct"):
    ds = shardread.Dataset(path, access=access)
    assert len(ds) == n, (access, len(ds))
    ld = shardread.Loader(path, batch_size=64, threads=2, access=access, return_indices=True)
    seen = np.zeros(n, np.int64)
    counts = np.zeros(4, np.int64)
    for images, labels, indices in ld:
        idx = np.asarray(indices, np.int64)
        lab = np.asarray(labels, np.int64)
        seen += np.bincount(idx, minlength=n)
        counts += np.bincount(lab, minlength=4)
        # spot-check against the Dataset, open at the same time (every 97th sample, and every
        # one of the first and last batch)
        for k in np.flatnonzero((idx % 97 == 0) | (idx < 64) | (idx >= n - 64)):
            i = int(idx[k])
            dimg, dlab = ds[i]
            assert dlab == int(lab[k]), (access, i, dlab, int(lab[k]))
            assert np.array_equal(dimg, images[k]), (access, i)
    assert (seen == 1).all(), (access, int((seen != 1).sum()))
    assert counts.tolist() == [n // 4] * 4, (access, counts.tolist())
    fds = len(os.listdir("/proc/self/fd"))
    # the cache keeps FMT_FDCACHE_MAX (64) idle, extents pin at most as many more
    assert fds < 200, (access, fds)
    print(access, "ok", fds)
    del ld, ds
PY
# the module of a sanitizer build needs its runtime preloaded: tests/python/run.sh's business
if [ -n "$SANBUILD" ]; then
  echo "  (the Python epoch runs with the plain build only)"
else
  PY=
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import numpy' 2>/dev/null; then PY=$py; break; fi
  done
  if [ -z "$PY" ]; then
    bad "no python3 with numpy (scripts/deps.sh installs python3-numpy)"
  else
    for ds in "ds $S" "h5c $S2" "lm $S2"; do
      set -- $ds
      expect_exit 0 "$1: a Dataset and a Loader read a whole epoch in mmap, pread and direct mode" \
        lim env PYTHONPATH="$ROOT/$BUILD/python" "$PY" "$W/epoch.py" "$W/$1" "$2"
      check "$1: all three modes read every sample once" test "$(grep -c ' ok ' "$T/out")" -eq 3
    done
  fi
fi
finish
