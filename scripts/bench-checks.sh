#!/usr/bin/env bash
# What the damage checks cost, measured side by side in one run (medians, as ratios):
#  1. opening hdf5 and lmdb datasets (shardc info) with the manifest's pins checked, against the
#     same datasets with the pins removed from the manifest (what an older manifest gives);
#  2. reading an epoch with verify_samples (each sample hashed as read) against without, through
#     the Python Loader, one worker thread, warm page cache.
#   BUILD=build [PYTHON=/usr/bin/python3] [N=2000] scripts/bench-checks.sh
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
N=${N:-2000}
BIN="$ROOT/$BUILD/bin"
T=$(mktemp -d /tmp/shardc-bench-checks.XXXXXX)
trap 'rm -rf "$T"' EXIT

"$BIN/shardc-mksample" "$T/src" --classes 8 --per-class $((N / 8)) --seed 4 --no-broken \
  --min-side 160 --max-side 320 --quiet
for f in raw hdf5 lmdb; do
  "$BIN/shardc" build "$T/src" -o "$T/$f" --format $f --size 224x224 --shard-size 64MiB \
    --no-progress -j2 >/dev/null 2>&1
done
# many small samples: metadata, which the pins cover, dominates the open
for f in hdf5 lmdb; do
  "$BIN/shardc" build "$T/src" -o "$T/small-$f" --format $f --size 16x16 --augment 10 \
    --shard-samples 5000 --no-progress -j2 >/dev/null 2>&1
done
for d in hdf5 lmdb small-hdf5 small-lmdb; do
  cp -r "$T/$d" "$T/$d-nopin"
  "$PYTHON" - "$T/$d-nopin/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for s in m["shards"]:
    s.pop("pin", None)
    s.pop("file_hash", None)
json.dump(m, open(sys.argv[1], "w"))
PY
done

"$PYTHON" - "$T" "$BIN/shardc" "$ROOT/$BUILD/python" <<'PY'
import json, statistics, subprocess, sys, time
t, shardc, pymod = sys.argv[1:4]

def run(args, n=15):
    xs = []
    for _ in range(n):
        a = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        xs.append(time.perf_counter() - a)
    return statistics.median(xs)

print("open (shardc info, warm): with pin checks / without, median of 3 rounds of 15 runs")
for d in ("hdf5", "lmdb", "small-hdf5", "small-lmdb"):
    m = json.load(open(f"{t}/{d}/manifest.json"))
    ratios, last = [], None
    for _ in range(3):
        b = run([shardc, "info", f"{t}/{d}-nopin"])
        a = run([shardc, "info", f"{t}/{d}"])
        ratios.append(a / b)
        last = (a, b)
    print(f"  {d:11s} {m['samples']:6d} samples in {len(m['shards'])} shards: "
          f"{last[0] * 1e3:6.1f} ms / {last[1] * 1e3:6.1f} ms, ratio {statistics.median(ratios):.2f}")

sys.path.insert(0, pymod)
import shardread
print("read (Python Loader, 1 thread, batch 64, warm): verify_samples / without, median of 5 epochs")
for access in ("mmap", "pread"):
    times = {}
    for verify in (False, True):
        loader = shardread.Loader(f"{t}/raw", batch_size=64, threads=1, access=access,
                                  verify_samples=verify)
        xs = []
        for _ in range(6):
            a = time.perf_counter()
            for images, labels in loader:
                pass
            xs.append(time.perf_counter() - a)
        times[verify] = statistics.median(xs[1:])
    n = json.load(open(f"{t}/raw/manifest.json"))["samples"]
    print(f"  raw, {access:5s}: {n / times[True]:8.0f} / {n / times[False]:8.0f} images/s, "
          f"time ratio {times[True] / times[False]:.2f}")
PY
