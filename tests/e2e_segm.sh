#!/usr/bin/env bash
# End to end: instance masks and keypoints (COCO segmentation as polygons, uncompressed and
# compressed RLE, iscrowd RLE, none; keypoints with names and skeleton). Masks after every build
# geometry equal a NumPy rasterisation and RLE decoder written from the definitions
# (tests/ref/segm_ref.py), byte for byte; keypoints to 1e-4 pixel; bad segmentation and
# keypoints are errors naming the file and entry; hdf5, lmdb and --part/merge store the same
# records; verify catches a changed byte of a mask.
. "$(dirname "$0")/lib.sh"
need_python PY numpy "no python3 with numpy (python3-numpy)"
REF="$ROOT/tests/ref/segm_ref.py"

"$MKSAMPLE" "$T/img" --coco "$T/inst.json" --per-class 12 --min-side 30 --max-side 70 --seed 3 \
  --quiet || { echo "mksample failed"; exit 1; }
"$PY" "$REF" make "$T/inst.json" "$T/seg.json" || { echo "segm_ref make failed"; exit 1; }

for g in "" "--size 48x40 --fit pad" "--short-side 50 --crop 40x30" "--size 40 --fit crop" \
         "--max-side 33" "--size 64x48 --fit stretch" "--crop 200x150"; do
  rm -rf "$T/g"
  # shellcheck disable=SC2086
  "$SHARDC" build "$T/img" --coco "$T/seg.json" -o "$T/g" $g -j2 --no-progress >/dev/null 2>&1
  "$SHARDC" info "$T/g" --targets >"$T/g.jsonl"
  check "masks and keypoints after [${g:-no geometry}] equal the reference" \
    "$PY" "$REF" check "$T/seg.json" "$T/g/manifest.json" "$T/g.jsonl"
done

# --- every backend, and a merged build, store the same records
expect_exit 0 "raw build" "$SHARDC" build "$T/img" --coco "$T/seg.json" -o "$T/raw" --size 48 \
  --fit pad -j2 --no-progress
"$SHARDC" info "$T/raw" --targets >"$T/raw.jsonl"
check "the manifest says record version 2 with masks and 3 keypoints" "$PY" -c '
import json, sys
t = json.load(open(sys.argv[1]))["targets"]
assert t["record_version"] == 2 and t["masks"] is True, t
assert t["keypoints"] == {"count": 3, "names": ["left", "right", "top"],
                          "skeleton": [[1, 2], [2, 3]]}, t["keypoints"]
' "$T/raw/manifest.json"
for f in hdf5 lmdb; do
  expect_exit 0 "$f build" "$SHARDC" build "$T/img" --coco "$T/seg.json" -o "$T/$f" --size 48 \
    --fit pad --format "$f" -j2 --no-progress
  "$SHARDC" info "$T/$f" --targets >"$T/$f.jsonl"
  check "$f holds the raw build's targets" cmp "$T/raw.jsonl" "$T/$f.jsonl"
  check "$f verifies" "$SHARDC" verify "$T/$f"
done
for i in 0 1; do
  expect_exit 0 "part $i/2" "$SHARDC" build "$T/img" --coco "$T/seg.json" -o "$T/m" --size 48 \
    --fit pad --part "$i/2" -j2 --no-progress
done
expect_exit 0 "merge" "$SHARDC" merge "$T/m"
"$SHARDC" info "$T/m" --targets >"$T/m.jsonl"
check "the merged parts hold the same targets" cmp "$T/raw.jsonl" "$T/m.jsonl"
expect_exit 0 "dry run" "$SHARDC" build "$T/img" --coco "$T/seg.json" -o "$T/dry" --size 48 \
  --dry-run --no-progress

# --- a changed byte of a mask's runs: verify and every open refuse it
check "verify passes" "$SHARDC" verify "$T/raw"
"$PY" - "$T/raw" <<'PY' || { echo "FAIL: could not damage the shard"; exit 1; }
import glob, sys
p = sorted(glob.glob(sys.argv[1] + "/*.raw"))[0]
b = bytearray(open(p, "rb").read())
i = b.find(b"BOX2")
assert i >= 0
b[i + 200] ^= 0x01
open(p, "wb").write(bytes(b))
PY
expect_exit 1 "verify after a flipped mask byte" "$SHARDC" verify "$T/raw"

# --- bad input: named, the build stopped
bad_input() {  # NAME PYTHON-EDIT EXPECTED-TEXT
  "$PY" - "$T/seg.json" "$T/bad.json" "$2" <<'PY'
import json, sys
coco = json.load(open(sys.argv[1]))
a = coco["annotations"][0]
exec(sys.argv[3])
json.dump(coco, open(sys.argv[2], "w"))
PY
  rm -rf "$T/b"
  expect_exit 2 "$1" "$SHARDC" build "$T/img" --coco "$T/bad.json" -o "$T/b" --no-progress
  check "$1: the message names the file, entry and reason" grep -q "bad.json: annotations\[0\] (id [0-9]*): $3" "$T/err"
}
bad_input "a polygon of 2 points" 'a["segmentation"] = [[1, 1, 5, 5]]' "polygon 0 has fewer than 3 points"
bad_input "an odd polygon" 'a["segmentation"] = [[1, 1, 5, 5, 3]]' "polygon 0 has an odd number"
bad_input "a polygon point outside" 'a["segmentation"] = [[1, 1, 5, 5, 1, 900]]' "polygon 0 point 2 (1, 900) is not inside"
bad_input "RLE counts not adding up" 'a["segmentation"] = {"size": [coco["images"][0]["height"], coco["images"][0]["width"]], "counts": [3, 4]}; a["image_id"] = coco["images"][0]["id"]' "RLE counts add up to 7 pixels"
bad_input "RLE of another size" 'a["segmentation"] = {"size": [1, 2], "counts": [2]}' "RLE of size 1x2"
bad_input "a bad RLE string" 'a["segmentation"] = {"size": [coco["images"][0]["height"], coco["images"][0]["width"]], "counts": "\u007f"}; a["image_id"] = coco["images"][0]["id"]' "RLE 'counts' string is malformed"
bad_input "a keypoint count unlike the category's" 'a["category_id"] = 1; a["keypoints"] = [1, 1, 2]' "3 keypoint values, category 1 has 3 keypoints"
bad_input "keypoints for a category without" 'a["category_id"] = 2; a["keypoints"] = [1, 1, 2] * 3' "9 keypoint values, category 2 has 0 keypoints"
bad_input "a keypoint outside" 'a["category_id"] = 1; a["keypoints"] = [1, 1, 2, -50, 1, 1, 0, 0, 0]; a["num_keypoints"] = 2' "keypoint 1 (-50, 1, v 1) is not inside"
bad_input "num_keypoints wrong" 'a["category_id"] = 1; a["keypoints"] = [1, 1, 2, 0, 0, 0, 0, 0, 0]; a["num_keypoints"] = 3' "num_keypoints is not the 1 keypoints labelled"
finish
