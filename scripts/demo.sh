#!/usr/bin/env bash
# make demo: generate a sample dataset, compile it to raw shards, show what was written, verify it.
set -euo pipefail
BUILD=${BUILD:-build}
bin="$BUILD/bin"
work=${DEMO_DIR:-demo}
rm -rf "$work"
mkdir -p "$work"

echo "== 1. a sample dataset: 6 classes of generated images (JPEG, PNG, BMP) plus a few broken files"
"$bin/shardc-mksample" "$work/images" --classes 6 --per-class 40 --seed 1
echo
echo "== 2. shardc build: decode once, resize to 64x64 (center crop), pack into raw shards"
set +e
"$bin/shardc" build "$work/images" -o "$work/raw" --size 64x64 --shard-size 1MiB
rc=$?
set -e
echo "(exit $rc: 1 means finished with rejects; the broken files are listed in $work/raw/rejects.tsv)"
[ $rc -le 1 ] || exit $rc
echo
echo "== 3. shardc info"
"$bin/shardc" info "$work/raw"
echo
echo "== 4. shardc verify"
"$bin/shardc" verify "$work/raw"
echo
echo "== 5. rejects.tsv"
column -t -s $'\t' "$work/raw/rejects.tsv" 2>/dev/null || cat "$work/raw/rejects.tsv"
echo
"$bin/shardc" cat "$work/raw" 0 -o "$work/sample0.ppm"
echo
echo "== 6. shardbench train: a small model learns from the shards (softmax regression on the CPU"
echo "      or, where a CUDA device is usable, on the GPU)"
"$bin/shardbench" train "$work/raw" --model softmax --batch 32 --epochs 5
echo
echo "== 7. shardbench compare: every format built from the same images, each read back, against"
echo "      decoding the images themselves (the work a training-time loader repeats every epoch)"
plot=()
if command -v gnuplot >/dev/null; then
  plot=(--plot "$work/compare.png")
else
  echo "(gnuplot is not installed: no plot; scripts/deps.sh installs gnuplot-nox)"
fi
"$bin/shardbench" compare "$work/images" --work "$work/compare" --size 64x64 --batch 32 \
  --epochs 5 "${plot[@]}"
echo
echo "== 8. detection: generated shapes with their boxes as COCO JSON, letterboxed to 96x64; the"
echo "      boxes move with the pixels"
"$bin/shardc-mksample" "$work/shapes" --coco "$work/shapes.json" --per-class 10 --seed 2
"$bin/shardc" build "$work/shapes" --coco "$work/shapes.json" -o "$work/det" --size 96x64 \
  --fit pad --no-progress
"$bin/shardc" info "$work/det" --targets | head -3
"$bin/shardc" cat "$work/det" 1 --boxes -o "$work/boxes1.ppm"
echo
echo "== 9. instance segmentation: the same kind of shapes with their outlines as COCO polygons;"
echo "      the masks are rasterised at build time and move with the pixels"
"$bin/shardc-mksample" "$work/shapes-seg" --coco "$work/shapes-seg.json" --per-class 10 \
  --seed 3 --polygons --quiet
"$bin/shardc" build "$work/shapes-seg" --coco "$work/shapes-seg.json" -o "$work/seg" \
  --size 96x64 --fit pad --no-progress
"$bin/shardc" info "$work/seg" --targets >"$work/seg-targets.jsonl"
head -2 "$work/seg-targets.jsonl" | cut -c1-160
"$bin/shardc" cat "$work/seg" 1 --boxes --masks -o "$work/masks1.png"
cat <<MSG
Next:
  $work/raw/manifest.json        what was built: classes, shards and their hashes, channel mean/std
  $work/sample0.ppm              sample 0 as an image (shardc cat $work/raw 0 -o FILE)
  $work/boxes1.ppm               a detection sample with its boxes drawn (shardc cat --boxes)
  $work/masks1.png               an instance-segmentation sample, boxes and masks drawn
  $work/compare/                 every format built by compare; compare.tsv, the table's data
  $work/compare.png              the table as a chart (with gnuplot)
  $bin/shardbench compare --help  the columns; --step-ms for another model, --json
  $bin/shardc build --help       geometry, --gray, -j, --shard-size, --resume, --dry-run, --json
  formats/raw.md                 the shard format, for readers in other languages
MSG
