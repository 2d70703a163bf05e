#!/usr/bin/env bash
# Building in parts against a one-machine build of the same inputs, all in one run.
#
#   scripts/bench-parts.sh [PER_CLASS] [PARTS]      (defaults 1500 and 64)
#
# Inputs: the generated sample set, 8 classes x PER_CLASS small images of many sizes (48..160 px
# sides, JPEG/PNG/BMP) plus 9 broken files, compiled to 64x64 raw shards; page cache warm.
# Reports, each the median of 3 runs:
#   whole -jC       one shardc build with all C cores
#   PARTS parts     PARTS separate `shardc build --part I/PARTS -j1` processes, C at a time (xargs
#                   -P C): a PARTS-node job simulated on this machine; wall time, and per part
#                   the seconds it reported (imbalance: slowest / mean)
#   merge           shardc merge of those parts
#   empty part      a part with no inputs (--part 0/99999): the fixed cost every part pays (list
#                   the whole tree, read nothing, write an empty part)
#   mpirun -n R     shardc-mpi build with R ranks of -j1 (oversubscribed when R > C), when built:
#                   the seconds shardc-mpi reports (MPI_Init to merged manifest) and mpirun's wall
#                   time (which adds Open MPI's start and tear-down, ~1.5 s here)
#   8 parts         imbalance of larger parts (8 parts, one at a time, -j1)
# Then the per-core rate of photo-sized JPEGs (500x375 -> 224x224, shardc build -j1 on 120
# generated photos), which the projection to an ImageNet-sized job (1,281,167 images) uses.
set -euo pipefail
BUILD=${BUILD:-build}
PER=${1:-1500}
PARTS=${2:-64}
bin=$BUILD/bin
C=$(nproc)
W=$(mktemp -d /tmp/bench-parts.XXXXXX)
trap 'rm -rf "$W"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
jget() { python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())[sys.argv[1]])' "$1"; }

"$bin/shardc-mksample" "$W/src" --classes 8 --per-class "$PER" --seed 5 --quiet
n=$(find "$W/src" -type f | wc -l)
cat $(find "$W/src" -type f) >/dev/null
opts=(--size 64x64 --no-progress)

whole=() parts=() merge=() imb=() pmax=() pmean=() empty=() mpi2=() mpi4=() whole1=() mpi2w=() mpi4w=()
imb8=()
for r in 1 2 3; do
  rm -rf "$W/w"
  t0=$(now); "$bin/shardc" build "$W/src" -o "$W/w" "${opts[@]}" -j"$C" >/dev/null 2>&1 || true; t1=$(now)
  whole+=("$(echo "$t1 - $t0" | bc)")
  rm -rf "$W/w1"
  t0=$(now); "$bin/shardc" build "$W/src" -o "$W/w1" "${opts[@]}" -j1 >/dev/null 2>&1 || true; t1=$(now)
  whole1+=("$(echo "$t1 - $t0" | bc)")

  rm -rf "$W/p" "$W/pj"; mkdir -p "$W/pj"
  t0=$(now)
  seq 0 $((PARTS - 1)) | xargs -P "$C" -I{} sh -c \
    "'$bin/shardc' build '$W/src' -o '$W/p' --size 64x64 --no-progress -j1 --part {}/$PARTS --json >'$W/pj/{}.json' 2>/dev/null || true"
  t1=$(now)
  parts+=("$(echo "$t1 - $t0" | bc)")
  read -r mx mean < <(cat "$W"/pj/*.json | python3 -c '
import json, sys
s = [json.loads(l)["seconds"] for l in sys.stdin if l.strip()]
print(max(s), sum(s) / len(s))')
  pmax+=("$mx"); pmean+=("$mean")
  imb+=("$(echo "scale=4; $mx / $mean" | bc)")
  t0=$(now); "$bin/shardc" merge "$W/p" >/dev/null 2>&1 || true; t1=$(now)
  merge+=("$(echo "$t1 - $t0" | bc)")
  # the merged dataset is the one-machine dataset (checked by tests/e2e_parts.sh; here: samples)
  [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$W/p/manifest.json")" = \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$W/w/manifest.json")" ] ||
    { echo "merged sample count differs" >&2; exit 1; }

  # imbalance of larger parts: 8 parts, one at a time
  rm -rf "$W/p8" "$W/pj8"; mkdir -p "$W/pj8"
  for i in 0 1 2 3 4 5 6 7; do
    "$bin/shardc" build "$W/src" -o "$W/p8" "${opts[@]}" -j1 --part "$i/8" --json >"$W/pj8/$i.json" 2>/dev/null || true
  done
  imb8+=("$(cat "$W"/pj8/*.json | python3 -c '
import json, sys
s = [json.loads(l)["seconds"] for l in sys.stdin if l.strip()]
print(max(s) / (sum(s) / len(s)))')")

  rm -rf "$W/e"
  t0=$(now); "$bin/shardc" build "$W/src" -o "$W/e" "${opts[@]}" -j1 --part 0/99999 >/dev/null 2>&1 || true; t1=$(now)
  empty+=("$(echo "$t1 - $t0" | bc)")

  if [ -x "$bin/shardc-mpi" ] && command -v mpirun >/dev/null; then
    for R in 2 4; do
      rm -rf "$W/m$R"
      t0=$(now)
      mpirun --allow-run-as-root --oversubscribe -n "$R" "$bin/shardc-mpi" build "$W/src" -o "$W/m$R" \
        "${opts[@]}" -j1 --json 2>/dev/null >"$W/m$R.json" || true
      t1=$(now)
      [ -e "$W/m$R/manifest.json" ] || { echo "mpirun -n $R left no manifest" >&2; exit 1; }
      own=$(jget seconds <"$W/m$R.json")
      if [ "$R" = 2 ]; then mpi2+=("$own"); mpi2w+=("$(echo "$t1 - $t0" | bc)")
      else mpi4+=("$own"); mpi4w+=("$(echo "$t1 - $t0" | bc)"); fi
    done
  fi
done
m() { printf '%s\n' "$@" | median; }
W_=$(m "${whole[@]}"); W1=$(m "${whole1[@]}"); P=$(m "${parts[@]}"); M=$(m "${merge[@]}")
I=$(m "${imb[@]}"); E=$(m "${empty[@]}"); PX=$(m "${pmax[@]}"); PM=$(m "${pmean[@]}")
printf '\n%d inputs (8 classes, 48..160 px, 9 broken), 64x64 raw, %d cores, medians of 3 runs\n' "$n" "$C"
printf '  %-44s %9s %9s\n' "run" "seconds" "vs whole"
printf '  %-44s %9.2f %9s\n' "whole build -j$C" "$W_" "1.00x"
printf '  %-44s %9.2f %8.2fx\n' "whole build -j1" "$W1" "$(echo "$W1 / $W_" | bc -l)"
printf '  %-44s %9.2f %8.2fx\n' "$PARTS parts, -j1 each, $C at a time (wall)" "$P" "$(echo "$P / $W_" | bc -l)"
printf '  %-44s %9.3f %8.3fx\n' "merge of the $PARTS parts" "$M" "$(echo "$M / $W_" | bc -l)"
printf '  %-44s %9.3f\n' "one empty part (fixed cost per part)" "$E"
printf '  %-44s %9.3f / %.3f (imbalance %.2f)\n' "part seconds: slowest / mean" "$PX" "$PM" "$I"
I8=$(m "${imb8[@]}")
printf '  %-44s %9.2f\n' "imbalance of 8 parts (slowest / mean)" "$I8"
if [ ${#mpi2[@]} -gt 0 ]; then
  A=$(m "${mpi2[@]}"); B=$(m "${mpi4[@]}"); Aw=$(m "${mpi2w[@]}"); Bw=$(m "${mpi4w[@]}")
  printf '  %-44s %9.2f %8.2fx   (mpirun wall %.2f s)\n' "mpirun -n 2 shardc-mpi build -j1" "$A" "$(echo "$A / $W_" | bc -l)" "$Aw"
  printf '  %-44s %9.2f %8.2fx   (mpirun wall %.2f s)\n' "mpirun -n 4 shardc-mpi build -j1 (oversub.)" "$B" "$(echo "$B / $W_" | bc -l)" "$Bw"
fi

# the per-core rate on photo-sized JPEGs, for the projection
"$bin/shardc-mksample" "$W/photos" --photo --classes 4 --per-class 30 --seed 1 --quiet
cat $(find "$W/photos" -type f) >/dev/null
in_kb=$(du -sk "$W/photos" | cut -f1)
nph=$(find "$W/photos" -type f | wc -l)
rate=$(for r in 1 2 3; do rm -rf "$W/ph"; "$bin/shardc" build "$W/photos" -o "$W/ph" --size 224x224 -j1 --no-progress --json 2>/dev/null | jget images_per_s; done | median)
python3 - "$rate" "$E" "$M" "$PARTS" "$n" "$I8" "$in_kb" "$nph" <<'PY'
import sys
rate, empty, merge, parts, n, imb, in_kb, nph = (float(x) for x in sys.argv[1:])
N_IMG, CORES = 1281167, 32
out_kb = 224 * 224 * 3 / 1000
in_img = in_kb * 1.024 / nph
print(f"\nprojection: ImageNet-1k train, {N_IMG:,} photos to 224x224 raw shards ({out_kb:.0f} kB "
      f"each), nodes of {CORES} cores at {rate:.0f} images/s per core (shardc build -j1 on "
      f"generated 500x375 JPEGs of {in_img:.0f} kB, measured above; ImageNet's average ~110 kB)")
list_s = empty * N_IMG / n     # every part lists the whole tree (here: page cache, local disk)
merge_s = merge * N_IMG / n    # per-input work dominates a merge (inputs.tsv lines, shard opens)
print(f"  every part lists all inputs: {list_s:.1f} s at this machine's listing rate (local, "
      f"cached); merge: {merge_s:.1f} s (scaled by inputs from {merge:.3f} s here); "
      f"imbalance {imb:.2f} (8 parts above)")
print(f"  {'nodes':>5} {'build s':>8} {'+list+merge':>12} {'total min':>10} {'speedup':>8} "
      f"{'FS read GB/s':>13} {'FS write GB/s':>14}")
one = N_IMG / (rate * CORES) + list_s
for nodes in (1, 4, 16, 64):
    build = N_IMG / (rate * CORES * nodes) * (imb if nodes > 1 else 1.0)
    extra = list_s + (merge_s if nodes > 1 else 0)
    total = build + extra
    rd = N_IMG * in_img / 1e6 / build
    wr = N_IMG * out_kb / 1e6 / build
    print(f"  {nodes:>5} {build:8.0f} {extra:12.1f} {total / 60:10.1f} {one / total:8.1f}x "
          f"{rd:13.2f} {wr:14.2f}")
print("  (compute-bound figures: the shared filesystem must sustain the read and write rates in "
      "the last columns, or it sets the pace)")
PY
