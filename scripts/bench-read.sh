#!/usr/bin/env bash
# Read throughput, measured against its baselines in the same run:
#
#   scripts/bench-read.sh            (BUILD=dir for the binaries, BENCH_DIR=dir for the data)
#
# On 900 photo-like JPEGs (~500x375..500x400, quality 90; mksample --photo, reused from
# $BENCH_DIR/photos when there) compiled by `shardc build --size 224x224` into raw shards, it runs
# shardbench read, in random order (a fresh shuffle per epoch), on one thread and on all cores:
#   raw      the shards through libshardread
#   memcpy   plain mmap + memcpy of the same sample bytes, same order, threads and batch size
#   folder   the JPEG folder decoded per epoch as a training loader would (same codecs as shardc,
#            shrink-on-load, resize + center crop to 224x224)
# warm (steady state: the epochs after the first) and cold (the files evicted from the page cache
# before every epoch). It prints a markdown table with images/s, MB/s (pixel bytes delivered),
# CPU-seconds per image and the ratios raw/folder and raw/memcpy, and writes it to
# $BENCH_DIR/read.md (the JSON rows go to $BENCH_DIR/read.jsonl). Raw and memcpy runs are repeated
# (REPS, default 5) and medians reported; the folder, which decodes for seconds, runs once.
set -euo pipefail
BUILD=${BUILD:-build}
W=${BENCH_DIR:-.bench}
bin=$BUILD/bin
cores=$(nproc)
# Epochs: the warm figure is the steady state, epochs 2..E. Raw and memcpy epochs take tens of
# milliseconds, so they get more of them; the folder decodes for seconds per epoch.
RAW_EPOCHS=${RAW_EPOCHS:-20}
FOLDER_EPOCHS=${FOLDER_EPOCHS:-3}
COLD_EPOCHS=${COLD_EPOCHS:-2}
ORDER=${ORDER:-random}
# raw and memcpy runs are short, so they are repeated and the medians reported; the folder once
REPS=${REPS:-5}
PER=225

for b in shardc shardc-mksample shardbench; do
  [ -x "$bin/$b" ] || { echo "bench-read: $bin/$b is missing (make BUILD=$BUILD all)" >&2; exit 2; }
done
mkdir -p "$W"
# the photo set is shared with bench-build.sh (same generator options and stamp)
if [ ! -f "$W/photos.stamp" ] || [ "$(cat "$W/photos.stamp")" != "$PER" ] || [ ! -d "$W/photos" ]; then
  rm -rf "$W/photos"
  "$bin/shardc-mksample" "$W/photos" --photo --classes 4 --per-class "$PER" --seed 1 --quiet
  echo "$PER" > "$W/photos.stamp"
fi
rm -rf "$W/raw224"
"$bin/shardc" build "$W/photos" -o "$W/raw224" --size 224x224 -j "$cores" --no-progress >/dev/null

out=$W/read.jsonl
: > "$out"
nrun=0
# every invocation's rows are tagged with a run number, so a reader row pairs with the memcpy row
# measured right after it
run() {
  nrun=$((nrun + 1))
  "$bin/shardbench" read "$@" --order "$ORDER" --json | sed "s/^{/{\"run\": $nrun, /" >> "$out"
}
threads=(1)
[ "$cores" -gt 1 ] && threads+=("$cores")
for t in "${threads[@]}"; do
  echo "bench-read: $t thread(s), warm" >&2
  for r in $(seq "$REPS"); do run "$W/raw224" --memcpy --threads "$t" --epochs "$RAW_EPOCHS"; done
  run "$W/photos" --size 224x224 --threads "$t" --epochs "$FOLDER_EPOCHS"
  echo "bench-read: $t thread(s), cold" >&2
  for r in $(seq "$REPS"); do run "$W/raw224" --memcpy --threads "$t" --epochs "$COLD_EPOCHS" --cold; done
  run "$W/photos" --size 224x224 --threads "$t" --epochs "$COLD_EPOCHS" --cold
done

python3 - "$out" "$W" "$cores" "$RAW_EPOCHS" "$FOLDER_EPOCHS" "$COLD_EPOCHS" "$ORDER" "$REPS" \
  "$(du -sb "$W/photos" | cut -f1)" "$(du -sb "$W/raw224" | cut -f1)" <<'PY' | tee "$W/read.md"
import json, statistics, sys
path, w, cores, raw_e, folder_e, cold_e, order, reps, jpeg_bytes, raw_bytes = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
def group(fmt, threads, cold):
    return [r for r in rows if r["format"] == fmt and r["threads"] == threads and r["cold"] == cold]
def med(rs, key):
    return statistics.median(r[key] for r in rs)
def paired_ratio(threads, cold):
    """median over runs of raw / memcpy measured in the same invocation"""
    rs = []
    for raw in group("raw", threads, cold):
        mem = [m for m in group("memcpy", threads, cold) if m["run"] == raw["run"]]
        if mem and mem[0]["images_per_s"] > 0:
            rs.append(raw["images_per_s"] / mem[0]["images_per_s"])
    return statistics.median(rs) if rs else None
cpu = "?"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
n = rows[0]["first_epoch"]["images"] if rows else 0
print(f"# shardbench read: raw shards vs JPEG decode vs mmap+memcpy\n")
print(f"{n} photo-like JPEGs ({int(jpeg_bytes)/1e6:.1f} MB) compiled to 224x224 raw shards "
      f"({int(raw_bytes)/1e6:.1f} MB); {cores} core(s), {cpu}; order {order}, batch "
      f"{rows[0]['batch'] if rows else '?'}.")
print(f"Warm: steady state, epochs 2..E with E = {raw_e} for raw and memcpy, {folder_e} for the "
      f"JPEG folder (it decodes for seconds per epoch). Cold: every file evicted from the page "
      f"cache before every epoch (posix_fadvise DONTNEED), epochs 2..{cold_e}; the reader and the "
      f"memcpy mapping are reopened per epoch. Raw and memcpy: medians of {reps} runs (raw / memcpy "
      f"is the median of the ratios within each run); the folder: one run.\n")
print("| threads | page cache | path | images/s | MB/s | CPU-s/image | raw / folder | raw / memcpy |")
print("|---:|---|---|---:|---:|---:|---:|---:|")
warned = False
for t in sorted({r["threads"] for r in rows}):
    for cold in (False, True):
        g = {f: group(f, t, cold) for f in ("raw", "memcpy", "folder")}
        for fmt, name in (("raw", "raw (libshardread)"), ("memcpy", "mmap + memcpy"),
                          ("folder", "JPEG folder decode")):
            rs = g[fmt]
            if not rs:
                continue
            ips = med(rs, "images_per_s")
            rf = rm = ""
            if fmt == "raw" and g["folder"]:
                rf = f"{ips / med(g['folder'], 'images_per_s'):.1f}x"
            if fmt == "raw":
                pr = paired_ratio(t, cold)
                rm = f"{pr:.2f}x" if pr else ""
            warn = ""
            if cold and max(r.get("resident_after_evict", 0) for r in rs) > 0.1:
                warn, warned = " (!)", True
            print(f"| {t} | {'cold' if cold else 'warm'}{warn} | {name} | {ips:,.0f} | "
                  f"{med(rs, 'mb_per_s'):,.0f} | {med(rs, 'cpu_s_per_image'):.3g} | {rf} | {rm} |")
if warned:
    print("\n(!) more than 10% of the files stayed cached after eviction: those cold rows are partly warm.")
PY
echo "bench-read: table written to $W/read.md" >&2
