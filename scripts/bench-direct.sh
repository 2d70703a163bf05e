#!/usr/bin/env bash
# Data larger than RAM: the direct reader against the disk's own O_DIRECT rate, and the stored
# forms of the same photos (raw, lz4, zstd, the JPEG mix) in bytes and images/s, warm and cold.
#   scripts/bench-direct.sh            (BUILD=dir, BENCH_DIR=dir, PER=photos per class, REPS=n;
#                                       OLD_SHARDBENCH=path: also rows of another shardbench, e.g.
#                                       one built before the batched direct reads)
# Prints markdown tables. Cold: every file evicted from the page cache before each epoch
# (shardbench --cold); O_DIRECT bypasses the cache anyway. Medians of REPS runs; every ratio is
# against the dd rate measured in the same run.
set -euo pipefail
BUILD=${BUILD:-build}
bin=$BUILD/bin
W=${BENCH_DIR:-/tmp/shardc-bench-direct}
PER=${PER:-750}
REPS=${REPS:-3}
SB=${SHARDBENCH:-$bin/shardbench}
mkdir -p "$W"
if [ ! -f "$W/photos.stamp" ] || [ "$(cat "$W/photos.stamp")" != "$PER" ]; then
  rm -rf "$W/photos" "$W"/ds-*
  "$bin/shardc-mksample" "$W/photos" --photo --classes 4 --per-class "$PER" --seed 1 --quiet
  echo "$PER" > "$W/photos.stamp"
fi
build() {   # NAME ARGS...
  local n=$1; shift
  [ -f "$W/ds-$n/manifest.json" ] || "$bin/shardc" build "$W/photos" -o "$W/ds-$n" --size 224x224 \
    --no-progress "$@" >/dev/null
}
build raw
build lz4 --compress lz4
build zstd --compress zstd
build mix --jpeg-fraction 0.5
build jpeg --format jpeg
shard=$(ls "$W"/ds-raw/shard-*.raw | head -1)
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for r in $(seq "$REPS"); do
  # the disk's own sequential O_DIRECT rate on the same file
  sync
  dd if="$shard" of=/dev/null bs=4M iflag=direct 2>&1 | awk -v r="$r" '/copied/ {
    for (i = 1; i <= NF; i++) if ($i == "s,") { secs = $(i - 1) }
    print "{\"what\": \"dd\", \"run\": " r ", \"bytes\": " $1 ", \"secs\": " secs "}" }' >> "$rows"
  for order in seq quasi random; do
    for t in 1 2; do
      "$SB" read "$W/ds-raw" --access direct --cold --order "$order" -j "$t" -e 3 --json |
        sed "s/}\$/, \"what\": \"direct\", \"run\": $r}/" >> "$rows"
      [ -n "${OLD_SHARDBENCH:-}" ] && "$OLD_SHARDBENCH" read "$W/ds-raw" --access direct --cold \
        --order "$order" -j "$t" -e 3 --json | sed "s/}\$/, \"what\": \"direct-sync\", \"run\": $r}/" >> "$rows"
      "$SB" read "$W/ds-raw" --access mmap --cold --order "$order" -j "$t" -e 3 --json |
        sed "s/}\$/, \"what\": \"mmap\", \"run\": $r}/" >> "$rows"
    done
  done
  for f in raw lz4 zstd mix jpeg; do
    for cold in "" --cold; do
      "$SB" read "$W/ds-$f" --order random -j 2 -e 3 $cold --json |
        sed "s/}\$/, \"what\": \"form\", \"form\": \"$f\", \"run\": $r}/" >> "$rows"
    done
  done
done
python3 - "$rows" "$W" <<'PY'
import json, os, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
W = sys.argv[2]
def med(xs): return st.median(xs) if xs else float("nan")
dd = med([r["bytes"] / r["secs"] / 1e6 for r in rows if r["what"] == "dd"])
print(f"dd iflag=direct bs=4M on the raw shard: {dd:,.0f} MB/s (median)\n")
print("| order | threads | direct MB/s | x dd | images/s | one request at a time MB/s | mmap cold MB/s |")
print("|---|---:|---:|---:|---:|---:|---:|")
for order in ("seq", "quasi", "random"):
    for t in (1, 2):
        g = lambda w: [r for r in rows if r["what"] == w and r["order"] == order and r["threads"] == t]
        d, o, m = g("direct"), g("direct-sync"), g("mmap")
        dm = med([r["mb_per_s"] for r in d])
        om = med([r["mb_per_s"] for r in o]) if o else None
        mm = med([r["mb_per_s"] for r in m])
        print(f"| {order} | {t} | {dm:,.0f} | {dm / dd:.2f} | {med([r['images_per_s'] for r in d]):,.0f} | "
              f"{'%.0f' % om if om else 'n/a'} | {mm:,.0f} |")
print()
raw_bytes = None
print("| stored as | bytes | x raw | images/s warm | images/s cold | CPU-s/image warm | fits in RAM of G GiB at 1.28M images |")
print("|---|---:|---:|---:|---:|---:|---:|")
for f in ("raw", "lz4", "zstd", "mix", "jpeg"):
    b = sum(os.path.getsize(os.path.join(dp, n)) for dp, _, ns in os.walk(f"{W}/ds-{f}") for n in ns)
    if f == "raw": raw_bytes = b
    g = lambda cold: [r for r in rows if r["what"] == "form" and r["form"] == f and r["cold"] == cold]
    n = g(False)[0]["images"] if g(False) else 1
    proj = b / n * 1.28e6 / 2**30
    print(f"| {f} | {b / 1e6:,.1f} MB | {b / raw_bytes:.3f} | {med([r['images_per_s'] for r in g(False)]):,.0f} | "
          f"{med([r['images_per_s'] for r in g(True)]):,.0f} | {med([r['cpu_s_per_image'] for r in g(False)]) * 1e6:.0f} us | {proj:,.1f} |")
PY
