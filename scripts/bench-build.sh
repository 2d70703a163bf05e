#!/usr/bin/env bash
# Build throughput, measured against baselines in the same run (make bench).
#
#   scripts/bench-build.sh [N_PHOTOS]     (default 900)
#
# On generated photo-like JPEGs (~500x375..500x400, quality 90, ~60 KB) and on the generated sample
# set it reports, each the median of 3 runs:
#   decode      decode-only loop, same codecs, one thread, files in memory (the plain-decode floor)
#   shardc -jN  shardc build --size 224x224 into raw shards, N worker threads
#   --augment 4 the same with 4 pre-augmented variants per image (default spec), -j1
#   pillow      Pillow open+convert+resize(short side, bilinear)+center crop written into an
#               HDF5 dataset with h5py (numpy memmap where h5py is missing), one thread
# and prints images/s, per-core images/s and ratios against the baselines.
set -euo pipefail
BUILD=${BUILD:-build}
N=${1:-900}
W=${BENCH_DIR:-.bench}
bin=$BUILD/bin
mkdir -p "$W"
PY=python3
for p in python3 /usr/bin/python3; do "$p" -c 'import PIL, numpy' 2>/dev/null && { PY=$p; break; }; done

per=$(( (N + 3) / 4 ))
if [ ! -f "$W/photos.stamp" ] || [ "$(cat "$W/photos.stamp")" != "$per" ]; then
  rm -rf "$W/photos"
  "$bin/shardc-mksample" "$W/photos" --photo --classes 4 --per-class "$per" --seed 1 --quiet
  echo "$per" > "$W/photos.stamp"
fi
rm -rf "$W/sample"
"$bin/shardc-mksample" "$W/sample" --classes 8 --per-class 100 --seed 1 --quiet --no-broken

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

bench_set() {
  local name=$1 dir=$2
  local files n
  mapfile -t files < <(find "$dir" -type f | sort)
  n=${#files[@]}
  local bytes; bytes=$(du -sb "$dir" | cut -f1)
  cat "${files[@]}" > /dev/null   # warm the page cache: every run reads from memory
  local dec dec_shrink
  dec=$("$bin/decode-bench" --reps 3 "${files[@]}" | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')
  dec_shrink=$("$bin/decode-bench" --reps 3 --min 224x224 "${files[@]}" | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')
  local j1 jn cores
  cores=$(nproc)
  j1=$(for r in 1 2 3; do rm -rf "$W/out"; "$bin/shardc" build "$dir" -o "$W/out" --size 224x224 -j1 --no-progress --json 2>/dev/null | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/'; done | median)
  jn=$(for r in 1 2 3; do rm -rf "$W/out"; "$bin/shardc" build "$dir" -o "$W/out" --size 224x224 -j"$cores" --no-progress --json 2>/dev/null | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/'; done | median)
  local aug
  aug=$(for r in 1 2 3; do rm -rf "$W/out"; "$bin/shardc" build "$dir" -o "$W/out" --size 224x224 --augment 4 -j1 --no-progress --json 2>/dev/null | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/'; done | median)
  local pil
  pil=$(for r in 1 2 3; do "$PY" scripts/pillow-convert.py "$dir" "$W/pillow.h5" 224; done | median)
  rm -rf "$W/out" "$W/pillow.h5"
  printf '\n%s: %d files, %s MB\n' "$name" "$n" "$(awk "BEGIN{printf \"%.1f\", $bytes/1e6}")"
  printf '  %-34s %10s %14s\n' "method" "images/s" "per core"
  printf '  %-34s %10.0f %14.0f\n' "decode only (full size, 1 thread)" "$dec" "$dec"
  printf '  %-34s %10.0f %14.0f\n' "decode only (shrink-on-load hint)" "$dec_shrink" "$dec_shrink"
  printf '  %-34s %10.0f %14.0f\n' "pillow+h5py convert (1 thread)" "$pil" "$pil"
  printf '  %-34s %10.0f %14.0f\n' "shardc build -j1" "$j1" "$j1"
  printf '  %-34s %10.0f %14.0f\n' "shardc build -j$cores" "$jn" "$(awk "BEGIN{print $jn/$cores}")"
  printf '  %-34s %10.0f %14.0f   (%.0f variants/s)\n' "shardc build -j1 --augment 4" "$aug" "$aug" "$(awk "BEGIN{print 4*$aug}")"
  awk -v j1="$j1" -v dec="$dec" -v pil="$pil" -v jn="$jn" -v c="$cores" -v aug="$aug" 'BEGIN {
    printf "  ratios: shardc -j1 / pillow = %.2fx, shardc -j1 / full decode = %.2fx, -j%d scaling = %.2fx\n",
      j1/pil, j1/dec, c, jn/j1
    printf "          augmented variants/s / plain samples/s (both -j1) = %.2fx\n", 4*aug/j1 }'
}

echo "shardc build benchmark ($(nproc) cores; medians of 3 runs; page cache warm)"
bench_set "photo-like JPEGs (mksample --photo)" "$W/photos"
bench_set "sample set (mksample: JPEG/PNG/BMP, 48..160 px)" "$W/sample"
