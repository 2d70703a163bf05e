#!/usr/bin/env bash
# End to end: YOLO segmentation and pose label files, and semantic label maps (--masks DIR).
# YOLO polygons and keypoints after every build geometry equal tests/ref/segm_ref.py's NumPy
# reference of the same instances written as COCO in pixels (masks byte for byte, keypoints to
# 1e-4 pixel); label maps (palette, grey 8 and 16 bits) equal Pillow's reading moved with
# torch's nearest arithmetic, padding the ignore index, value for value; hdf5 and lmdb store the
# raw build's records; bad label lines and maps are named (file:line; both files).
. "$(dirname "$0")/lib.sh"
PY=${SHARDC_PYTHON:-/usr/bin/python3}
REF="$ROOT/tests/ref/segm_ref.py"
if ! "$PY" -c 'import numpy, PIL' 2>/dev/null; then
  echo "$NAME: skipped (no numpy or PIL in $PY)"; exit 77
fi

"$MKSAMPLE" "$T/img" --coco "$T/inst.json" --per-class 12 --min-side 30 --max-side 70 --seed 3 \
  --quiet || { echo "mksample failed"; exit 1; }
"$PY" "$REF" make "$T/inst.json" "$T/seg.json" || { echo "segm_ref make failed"; exit 1; }
"$PY" "$REF" yolo "$T/seg.json" "$T/y" || { echo "segm_ref yolo failed"; exit 1; }
"$PY" "$REF" maps "$T/inst.json" "$T/maps" || { echo "segm_ref maps failed"; exit 1; }
Y=(--names "$T/y/names.txt")

for g in "" "--size 48x40 --fit pad" "--short-side 50 --crop 40x30" "--size 40 --fit crop" \
         "--max-side 33" "--size 64x48 --fit stretch" "--crop 200x150"; do
  # shellcheck disable=SC2086
  for k in seg pose maps; do
    rm -rf "$T/g"
    case $k in
      seg) set -- --yolo "$T/y/seg" "${Y[@]}" ;;
      pose) set -- --yolo "$T/y/pose" "${Y[@]}" --kpt-shape 3,3 ;;
      maps) set -- --masks "$T/maps" ;;
    esac
    # shellcheck disable=SC2086
    "$SHARDC" build "$T/img" "$@" -o "$T/g" $g -j2 --no-progress >/dev/null 2>&1
    "$SHARDC" info "$T/g" --targets >"$T/g.jsonl"
    if [ $k = maps ]; then
      check "label maps after [${g:-no geometry}] equal the reference" \
        "$PY" "$REF" mapcheck "$T/inst.json" "$T/maps" "$T/g/manifest.json" "$T/g.jsonl"
    else
      check "YOLO $k after [${g:-no geometry}] equals the reference" \
        "$PY" "$REF" check "$T/y/$k.json" "$T/g/manifest.json" "$T/g.jsonl"
    fi
  done
done

rm -rf "$T/g"
"$SHARDC" build "$T/img" --yolo "$T/y/pose" "${Y[@]}" --kpt-shape 3,3 -o "$T/g" --no-progress \
  >/dev/null 2>&1
check "the pose manifest names keypoints 0..2 without a skeleton, no masks" "$PY" -c '
import json, sys
t = json.load(open(sys.argv[1]))["targets"]
assert t["keypoints"] == {"count": 3, "names": ["0", "1", "2"], "skeleton": []}, t
assert t["masks"] is False and t["source"] == "yolo", t
' "$T/g/manifest.json"

# --- every backend stores the same records; dry run; ignore index
for k in seg maps; do
  if [ $k = seg ]; then set -- --yolo "$T/y/seg" "${Y[@]}"; else set -- --masks "$T/maps"; fi
  expect_exit 0 "$k: raw build" "$SHARDC" build "$T/img" "$@" -o "$T/$k-raw" --size 48 --fit pad \
    -j2 --no-progress
  "$SHARDC" info "$T/$k-raw" --targets >"$T/$k-raw.jsonl"
  for f in hdf5 lmdb; do
    expect_exit 0 "$k: $f build" "$SHARDC" build "$T/img" "$@" -o "$T/$k-$f" --size 48 \
      --fit pad --format "$f" -j2 --no-progress
    "$SHARDC" info "$T/$k-$f" --targets >"$T/$k-$f.jsonl"
    check "$k: $f holds the raw build's targets" cmp "$T/$k-raw.jsonl" "$T/$k-$f.jsonl"
    check "$k: $f verifies" "$SHARDC" verify "$T/$k-$f"
  done
  expect_exit 0 "$k: dry run" "$SHARDC" build "$T/img" "$@" -o "$T/$k-dry" --size 48 --dry-run \
    --no-progress
done
expect_exit 0 "maps with --ignore-index 7" "$SHARDC" build "$T/img" --masks "$T/maps" \
  --ignore-index 7 -o "$T/i7" --size 48x40 --fit pad -j2 --no-progress
"$SHARDC" info "$T/i7" --targets >"$T/i7.jsonl"
check "  padded with 7, as the reference" \
  "$PY" "$REF" mapcheck "$T/inst.json" "$T/maps" "$T/i7/manifest.json" "$T/i7.jsonl"
check "  the manifest says ignore_index 7" grep -q '"ignore_index": 7' "$T/i7/manifest.json"

# --- cat draws them: the label map blended half and half, the ignore index left alone
expect_exit 0 "cat a sample as PNG" "$SHARDC" cat "$T/maps-raw" 2 -o "$T/plain.png"
expect_exit 0 "cat --masks of a label map" "$SHARDC" cat "$T/maps-raw" 2 --masks -o "$T/drawn.png"
"$SHARDC" info "$T/maps-raw" --targets >"$T/mr.jsonl"
check "  each labelled pixel is (pixel + its label's colour + 1) / 2, the others as stored" \
  "$PY" -c '
import json, sys
import numpy as np
from PIL import Image
pal = np.array([[255, 40, 40], [40, 255, 40], [60, 120, 255], [255, 220, 0], [255, 0, 255],
                [0, 255, 255], [255, 140, 0], [255, 255, 255]], np.int64)
a = np.array(Image.open(sys.argv[1])).astype(np.int64)
b = np.array(Image.open(sys.argv[2])).astype(np.int64)
t = [json.loads(l) for l in open(sys.argv[3])][2]
v = np.concatenate([np.full(r, x) for x, r in t["label_map"]]).reshape(t["size"])
want = np.where((v != 255)[..., None], (a + pal[v % 8] + 1) // 2, a)
assert (v != 255).any() and (want == b).all(), np.argwhere(want != b)[:5]
' "$T/plain.png" "$T/drawn.png" "$T/mr.jsonl"
expect_exit 2 "cat --keypoints of a dataset without" "$SHARDC" cat "$T/maps-raw" 0 --keypoints \
  -o "$T/k.png"
check "  says so" grep -q "cannot draw the keypoints of sample 0 .*: the dataset has none" "$T/err"
rm -rf "$T/pr"
"$SHARDC" build "$T/img" --yolo "$T/y/pose" "${Y[@]}" --kpt-shape 3,3 -o "$T/pr" --no-progress \
  >/dev/null 2>&1
"$SHARDC" info "$T/pr" --targets >"$T/pr.jsonl"
n=$("$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    t = json.loads(l)
    if any(k[2] > 0 for inst in t["keypoints"] for k in inst):
        print(t["index"]); break' "$T/pr.jsonl")
expect_exit 0 "cat --keypoints of a pose sample" "$SHARDC" cat "$T/pr" "$n" --keypoints -o "$T/k.png"
check "  a white 3x3 dot around each labelled keypoint, its centre the instance's colour" \
  "$PY" -c '
import json, sys
import numpy as np
from PIL import Image
pal = [[255, 40, 40], [40, 255, 40], [60, 120, 255], [255, 220, 0], [255, 0, 255],
       [0, 255, 255], [255, 140, 0], [255, 255, 255]]
im = np.array(Image.open(sys.argv[1]))
t = [json.loads(l) for l in open(sys.argv[2])][int(sys.argv[3])]
last = {}
for lab, inst in zip(t["labels"], t["keypoints"]):
    for x, y, v in inst:
        if v > 0:
            last[(int(x), int(y))] = pal[lab % 8]
assert last
for (x, y), c in last.items():
    if 1 <= x < im.shape[1] - 1 and 1 <= y < im.shape[0] - 1:
        assert im[y, x].tolist() == c, (x, y, im[y, x], c)
' "$T/k.png" "$T/pr.jsonl" "$n"

# --- suffix pairing (Cityscapes: X_leftImg8bit.png with X_gtFine_labelIds.png)
mkdir -p "$T/cs/img/city" "$T/cs/gt/city"
for p in "$T/img"/00000[1-3].*; do
  s=$(basename "${p%.*}")
  cp "$p" "$T/cs/img/city/${s}_leftImg8bit.${p##*.}"
  cp "$T/maps/$s.png" "$T/cs/gt/city/${s}_gtFine_labelIds.png"
  cp "$T/maps/$s.png" "$T/cs/gt/city/${s}_gtFine_color.png"
done
expect_exit 0 "Cityscapes layout with --mask-suffix" "$SHARDC" build "$T/cs/img" --masks \
  "$T/cs/gt" --mask-suffix _leftImg8bit:_gtFine_labelIds -o "$T/cs/o" --no-progress
check "  3 samples" grep -q '"samples": 3,' "$T/cs/o/manifest.json"

# --- bad input: named
bad_line() {  # NAME LINE EXPECTED-TEXT [OPTIONS]
  rm -rf "$T/bl" "$T/b"; cp -r "$T/y/seg" "$T/bl"; echo "$2" >>"$T/bl/000001.txt"
  local n; n=$(wc -l <"$T/bl/000001.txt")
  expect_exit 2 "$1" "$SHARDC" build "$T/img" --yolo "$T/bl" "${Y[@]}" "${@:4}" -o "$T/b" \
    --no-progress
  check "$1: the message names the file, line and reason" \
    grep -q "bl/000001.txt:$n: $3" "$T/err"
}
bad_line "a polygon of 2 points" "0 0.1 0.1 0.5 0.5 0.3" "expected 'class cx cy w h' (5 fields) or 'class x1 y1"
bad_line "an odd polygon" "0 0.1 0.1 0.5 0.5 0.3 0.2 0.7" ".*(an odd number of coordinates)"
bad_line "a polygon point outside" "0 0.1 0.1 0.5 0.5 0.3 1.7" "polygon point 2 (0.3, 1.7) is not inside"
bad_line "a polygon's value not a number" "0 0.1 0.1 0.5 x 0.3 0.2" "'x' is not a number"
rm -rf "$T/bl"; cp -r "$T/y/pose" "$T/bl"
echo "0 0.5 0.5 0.2 0.2 0.1 0.1 2" >>"$T/bl/000001.txt"; n=$(wc -l <"$T/bl/000001.txt")
expect_exit 2 "a pose line of too few fields" "$SHARDC" build "$T/img" --yolo "$T/bl" "${Y[@]}" \
  --kpt-shape 3,3 -o "$T/b" --no-progress
check "  named" grep -q "bl/000001.txt:$n: 8 fields, expected .* 3 keypoints of 3 values (--kpt-shape 3,3): 14 fields" "$T/err"
rm -rf "$T/bl"; cp -r "$T/y/pose" "$T/bl"
echo "0 0.5 0.5 0.2 0.2 0.1 0.1 2 0.2 0.2 5 0 0 0" >>"$T/bl/000001.txt"
expect_exit 2 "a keypoint visibility of 5" "$SHARDC" build "$T/img" --yolo "$T/bl" "${Y[@]}" \
  --kpt-shape 3,3 -o "$T/b" --no-progress
check "  named" grep -q "bl/000001.txt:$n: keypoint 1 visibility 5 is not 0, 1 or 2" "$T/err"
rm -rf "$T/bl"; cp -r "$T/y/pose" "$T/bl"
echo "0 0.5 0.5 0.2 0.2 0.1 0.1 2 1.5 0.2 1 0 0 0" >>"$T/bl/000001.txt"
expect_exit 2 "a keypoint outside" "$SHARDC" build "$T/img" --yolo "$T/bl" "${Y[@]}" \
  --kpt-shape 3,3 -o "$T/b" --no-progress
check "  named" grep -q "bl/000001.txt:$n: keypoint 1 (1.5, 0.2) is not inside" "$T/err"
expect_exit 2 "--kpt-shape 3,4" "$SHARDC" build "$T/img" --yolo "$T/y/pose" "${Y[@]}" \
  --kpt-shape 3,4 -o "$T/b" --no-progress
check "  refused" grep -q "bad --kpt-shape '3,4'" "$T/err"
expect_exit 2 "--kpt-shape without --yolo" "$SHARDC" build "$T/img" --kpt-shape 3,3 -o "$T/b"
expect_exit 2 "--masks with --coco" "$SHARDC" build "$T/img" --masks "$T/maps" --coco \
  "$T/inst.json" -o "$T/b"

# label maps: missing, of another size, colour
rm -rf "$T/mb"; cp -r "$T/maps" "$T/mb"; rm "$T/mb/000002.png"
expect_exit 2 "an image without its label map" "$SHARDC" build "$T/img" --masks "$T/mb" \
  -o "$T/b" --no-progress
check "  named, both files" grep -q "img/000002\.[a-z]*: no label map .*mb/000002.png" "$T/err"
rm -rf "$T/b"
expect_exit 0 "  --skip-empty leaves it out" "$SHARDC" build "$T/img" --masks "$T/mb" \
  --skip-empty -o "$T/b" --no-progress
check "  one sample fewer" "$PY" -c '
import json, sys
a = json.load(open(sys.argv[1]))["samples"]; b = json.load(open(sys.argv[2]))["samples"]
assert a == b - 1, (a, b)' "$T/b/manifest.json" "$T/maps-raw/manifest.json"
cp "$T/maps/000001.png" "$T/mb/000002.png"
"$PY" -c 'from PIL import Image; import sys; Image.new("RGB", (9, 9)).save(sys.argv[1])' \
  "$T/mb/000003.png"
rm -rf "$T/b"
expect_exit 1 "maps of another size and in colour reject their images" "$SHARDC" build \
  "$T/img" --masks "$T/mb" -o "$T/b" --no-progress
check "  another size: both files and sizes named" grep -q \
  "img/000002\.[a-z]*: its label map .*mb/000002.png is 56x35, the image is 33x47" \
  "$T/b/rejects.tsv"
check "  colour: named" grep -q "its label map .*mb/000003.png is a colour PNG" \
  "$T/b/rejects.tsv"
finish
