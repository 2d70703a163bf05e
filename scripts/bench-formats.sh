#!/usr/bin/env bash
# Read throughput of every storage format built from the same images, in one run (make bench).
#
#   scripts/bench-formats.sh        (BUILD=dir for the binaries, BENCH_DIR=dir for the data)
#
# The 900 photo-like JPEGs of bench-build.sh / bench-read.sh are compiled by `shardc build
# --size 224x224` into raw, hdf5, lmdb, png0, bmp and jpeg (q90) datasets; each is read with
# `shardbench read --order random --batch 256` on one thread and on all cores, warm (steady state:
# epochs after the first) and cold (every file evicted before each epoch). Printed as a markdown
# table (images/s, MB/s of pixels delivered, CPU-s per image, bytes on disk, ratio to raw) and
# written to $BENCH_DIR/formats.md. Warm raw/hdf5/lmdb runs: median of REPS (default 3) runs.
set -euo pipefail
BUILD=${BUILD:-build}
W=${BENCH_DIR:-.bench}
bin=$BUILD/bin
cores=$(nproc)
REPS=${REPS:-3}
PER=225
PY=python3
mkdir -p "$W"
if [ ! -f "$W/photos.stamp" ] || [ "$(cat "$W/photos.stamp")" != "$PER" ] || [ ! -d "$W/photos" ]; then
  rm -rf "$W/photos"
  "$bin/shardc-mksample" "$W/photos" --photo --classes 4 --per-class "$PER" --seed 1 --quiet
  echo "$PER" > "$W/photos.stamp"
fi
formats=(raw hdf5 lmdb png0 bmp jpeg)
for f in "${formats[@]}"; do
  rm -rf "$W/fmt-$f"
  "$bin/shardc" build "$W/photos" -o "$W/fmt-$f" --format "$f" --size 224x224 --no-progress 2>/dev/null
done
rows="$W/formats.jsonl"
: > "$rows"
for f in "${formats[@]}"; do
  bytes=$(du -sb "$W/fmt-$f" | cut -f1)
  case $f in raw|hdf5|lmdb) warm_epochs=8; reps=$REPS ;; *) warm_epochs=3; reps=1 ;; esac
  for t in 1 "$cores"; do
    for r in $(seq "$reps"); do
      "$bin/shardbench" read "$W/fmt-$f" --threads "$t" --order random --epochs "$warm_epochs" --json 2>/dev/null |
        sed "s/}\$/, \"bytes_on_disk\": $bytes, \"fmt\": \"$f\", \"cache\": \"warm\"}/" >> "$rows"
    done
    "$bin/shardbench" read "$W/fmt-$f" --threads "$t" --order random --epochs 2 --cold --json 2>/dev/null |
      sed "s/}\$/, \"bytes_on_disk\": $bytes, \"fmt\": \"$f\", \"cache\": \"cold\"}/" >> "$rows"
  done
done
"$PY" - "$rows" "$cores" <<'PY' | tee "$W/formats.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cores = int(sys.argv[2])
def med(f, t, c, key):
    v = [r[key] for r in rows if r["fmt"] == f and r["threads"] == t and r["cache"] == c]
    return statistics.median(v) if v else float("nan")
print("# shardbench read: every format from the same 900 photos at 224x224\n")
print(f"Random order, batch 256; {cores} core(s). Warm = steady state (raw/hdf5/lmdb: epochs 2..8, medians of runs; image sets: epochs 2..3);")
print("cold = every file evicted from the page cache before the epoch (posix_fadvise DONTNEED).\n")
print("| format | bytes on disk | threads | cache | images/s | MB/s | CPU-s/image | vs raw |")
print("|---|---:|---:|---|---:|---:|---:|---:|")
for t in sorted({1, cores}):
    for c in ("warm", "cold"):
        raw = med("raw", t, c, "images_per_s")
        for f in ("raw", "hdf5", "lmdb", "png0", "bmp", "jpeg"):
            ips = med(f, t, c, "images_per_s")
            b = next(r["bytes_on_disk"] for r in rows if r["fmt"] == f)
            print(f"| {f} | {b/1e6:.1f} MB | {t} | {c} | {ips:,.0f} | {med(f, t, c, 'mb_per_s'):,.0f} | "
                  f"{med(f, t, c, 'cpu_s_per_image'):.3g} | {ips/raw:.2f}x |")
PY

# h5py's per-sample reads of the same HDF5 shards (random order, one thread, warm), the way a
# Python loader reads an HDF5 dataset, against our reader's 1-thread warm figure above
PYH5=
for p in python3 /usr/bin/python3; do "$p" -c 'import h5py, numpy' 2>/dev/null && { PYH5=$p; break; }; done
if [ -n "$PYH5" ]; then
  "$PYH5" - "$W/fmt-hdf5" <<'PY' | tee -a "$W/formats.md"
import glob, random, sys, time
import h5py
files = sorted(glob.glob(sys.argv[1] + "/shard-*.h5"))
dsets = [h5py.File(f, "r")["pixels"] for f in files]
order = [(k, i) for k, d in enumerate(dsets) for i in range(d.shape[0])]
random.Random(1).shuffle(order)
rates = []
for rep in range(3):
    t = time.perf_counter()
    for k, i in order:
        dsets[k][i]
    rates.append(len(order) / (time.perf_counter() - t))
rates.sort()
print(f"\nh5py per-sample random reads of the same hdf5 shards (1 thread, warm, median of 3): {rates[1]:,.0f} images/s")
PY
else
  echo "(h5py not installed: scripts/deps.sh --bench installs it)"
fi
