#!/usr/bin/env bash
# Build throughput, measured against baselines in the same run (make bench).
#
#   scripts/bench-build.sh [N_PHOTOS]     (default 900)
#
# On generated photo-like JPEGs (every image its own size, long side 360..640, quality 90) and on
# the generated sample set it reports, each the median over BENCH_ROUNDS (default 5) rounds in
# which every method runs once, one thread unless said:
#   pillow decode   Image.open(p).load() over the files (the decode floor as Python sees it)
#   our decode      decode-bench: shardc's codecs, files in memory, nothing else
#   pillow+h5py     Pillow decode + torchvision Resize/CenterCrop arithmetic (bilinear) into an
#                   HDF5 dataset with h5py (the script shardc replaces)
#   shardc -j1      shardc build --size 224x224 (exact: torchvision's pixels) into raw shards
#   --shrink-on-load, -jN (all cores), --augment 4 (default spec)
#   shardc tar      shardc build -j1 of the same files in one tar (tar --sort=name, class folders
#                   inside), read in place: against shardc -j1 from the folder
# and prints images/s, per-core images/s and the ratios against the baselines.
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
  # the same files in one tar, classes as its top folders, in path order (as published tars are)
  local classes; mapfile -t classes < <(cd "$dir" && ls)
  tar --sort=name -cf "$W/set.tar" -C "$dir" "${classes[@]}"
  cat "$W/set.tar" > /dev/null
  # Rounds: every method once per round, medians over rounds, so that a change in the machine's
  # load (it is shared) hits all methods alike instead of one block of runs.
  local cores; cores=$(nproc)
  local R=${BENCH_ROUNDS:-5}
  one() { rm -rf "$W/out"; "$bin/shardc" build "$dir" -o "$W/out" --size 224x224 --no-progress --json "$@" 2>/dev/null | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/'; }
  : > "$W/rounds"
  for r in $(seq "$R"); do
    echo "pdec $("$PY" scripts/pillow-decode.py "$dir")" >> "$W/rounds"
    echo "dec $("$bin/decode-bench" --reps 1 "${files[@]}" | sed 's/.*"images_per_s": \([0-9.]*\).*/\1/')" >> "$W/rounds"
    echo "pil $("$PY" scripts/pillow-convert.py "$dir" "$W/pillow.h5" 224)" >> "$W/rounds"
    echo "j1 $(one -j1)" >> "$W/rounds"
    echo "sol $(one -j1 --shrink-on-load)" >> "$W/rounds"
    echo "jn $(one -j"$cores")" >> "$W/rounds"
    echo "aug $(one -j1 --augment 4)" >> "$W/rounds"
    echo "tar $(dir=$W/set.tar one -j1)" >> "$W/rounds"
  done
  pick() { awk -v k="$1" '$1 == k {print $2}' "$W/rounds" | median; }
  local pdec dec pil j1 sol jn aug tarr
  pdec=$(pick pdec); dec=$(pick dec); pil=$(pick pil); j1=$(pick j1); sol=$(pick sol)
  jn=$(pick jn); aug=$(pick aug); tarr=$(pick tar)
  rm -rf "$W/out" "$W/pillow.h5" "$W/set.tar"
  printf '\n%s: %d files, %s MB\n' "$name" "$n" "$(awk "BEGIN{printf \"%.1f\", $bytes/1e6}")"
  printf '  %-40s %10s %10s\n' "method" "images/s" "per core"
  printf '  %-40s %10.0f %10.0f\n' "Pillow decode, Image.open().load()" "$pdec" "$pdec"
  printf '  %-40s %10.0f %10.0f\n' "our decode (decode-bench, in memory)" "$dec" "$dec"
  printf '  %-40s %10.0f %10.0f\n' "Pillow+h5py convert" "$pil" "$pil"
  printf '  %-40s %10.0f %10.0f\n' "shardc build -j1 (exact)" "$j1" "$j1"
  printf '  %-40s %10.0f %10.0f\n' "shardc build -j1 --shrink-on-load" "$sol" "$sol"
  printf '  %-40s %10.0f %10.0f\n' "shardc build -j$cores (exact)" "$jn" "$(awk "BEGIN{print $jn/$cores}")"
  printf '  %-40s %10.0f %10.0f   (%.0f variants/s)\n' "shardc build -j1 --augment 4" "$aug" "$aug" "$(awk "BEGIN{print 4*$aug}")"
  printf '  %-40s %10.0f %10.0f\n' "shardc build -j1 from one tar" "$tarr" "$tarr"
  awk -v j1="$j1" -v dec="$dec" -v pdec="$pdec" -v pil="$pil" -v jn="$jn" -v c="$cores" -v sol="$sol" -v tarr="$tarr" 'BEGIN {
    printf "  ratios: shardc -j1 / Pillow decode = %.2fx, / our decode = %.2fx, / Pillow+h5py = %.2fx\n",
      j1/pdec, j1/dec, j1/pil
    printf "          --shrink-on-load / exact = %.2fx, -j%d / -j1 = %.2fx, tar / folder = %.2fx\n",
      sol/j1, c, jn/j1, tarr/j1 }'
}

echo "shardc build benchmark ($(nproc) cores; medians of ${BENCH_ROUNDS:-5} interleaved rounds; page cache warm)"
bench_set "photo-like JPEGs (mksample --photo)" "$W/photos"
bench_set "sample set (mksample: JPEG/PNG/BMP, 48..160 px)" "$W/sample"
