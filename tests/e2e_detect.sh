#!/usr/bin/env bash
# End to end: detection builds (--coco, --yolo). Boxes after every build geometry equal a NumPy
# reference of the documented arithmetic (tests/ref/detect_ref.py, 1e-4 pixel); the pixels equal a
# classification build's; a COCO file round-trips (ids, categories, iscrowd, area); YOLO labels
# of the same boxes give the same targets; every annotation problem is an error naming the file
# and entry or a listed reject; damage to a target record is caught; --resume, --part/merge,
# hdf5 and lmdb give the same targets; cat --boxes draws them.
. "$(dirname "$0")/lib.sh"
need_python PY numpy "no python3 with numpy (python3-numpy)"
REF="$ROOT/tests/ref/detect_ref.py"

"$MKSAMPLE" "$T/img" --coco "$T/inst.json" --per-class 30 --min-side 40 --max-side 120 --seed 5 \
  --quiet || { echo "mksample failed"; exit 1; }
targets() { "$SHARDC" info "$1" --targets >"$2"; }

# --- the generator's shape count: 1..4 per image by default, 1..N with --shapes N, every fifth
# image none
expect_exit 0 "mksample --coco --shapes 16" "$MKSAMPLE" "$T/many" --coco "$T/many.json" \
  --per-class 40 --min-side 64 --max-side 96 --shapes 16 --quiet
check "up to 16 shapes an image, more than 4 on many, none on every fifth" "$PY" -c '
import collections, json, sys
for path, top in ((sys.argv[1], 16), (sys.argv[2], 4)):
    d = json.load(open(path))
    n = collections.Counter(a["image_id"] for a in d["annotations"])
    for im in d["images"]:
        k = n[im["id"]]
        assert (k == 0) if im["id"] % 5 == 0 else (1 <= k <= top), (path, im["id"], k)
    assert max(n.values()) == top or top == 16 and max(n.values()) > 10, (path, max(n.values()))
' "$T/many.json" "$T/inst.json"
expect_exit 2 "mksample --shapes 0" "$MKSAMPLE" "$T/x" --coco "$T/x.json" --shapes 0

# --- every build geometry against the reference
for g in "" "--max-side 50" "--short-side 48" "--short-side 48 --max-side 60" \
         "--short-side 50 --crop 40x30" "--crop 30x30" "--crop 200x150" "--size 64" \
         "--size 48x64 --fit crop" "--size 64x48 --fit pad" "--size 64x48 --fit stretch" \
         "--size 64 --filter lanczos" "--short-side 33 --shrink-on-load"; do
  rm -rf "$T/g"
  # shellcheck disable=SC2086
  "$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/g" $g -j2 --no-progress >/dev/null 2>&1
  targets "$T/g" "$T/g.jsonl"
  check "boxes after [${g:-no geometry}] equal the reference" \
    "$PY" "$REF" check "$T/inst.json" "$T/g/manifest.json" "$T/g.jsonl"
done

# --- the summary counts boxes and drops
expect_exit 0 "a cropping build" "$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/c" \
  --crop 30x30 -j2 --json --no-progress
targets "$T/c" "$T/c.jsonl"
check "--json counts stored and dropped boxes as the records do" "$PY" -c '
import json, sys
s = json.loads(open(sys.argv[1]).read())
t = [json.loads(l) for l in open(sys.argv[2])]
assert s["boxes"] == sum(len(x["labels"]) for x in t), s
assert s["boxes_dropped"] == sum(x["dropped"] for x in t) > 0, s
' "$T/out" "$T/c.jsonl"
check "the summary line names the drops" grep -q "dropped by the geometry" "$T/err"
check "verify passes" "$SHARDC" verify "$T/c"

# --- pixels as a classification build of the same images
mkdir -p "$T/cls/all"
cp "$T"/img/*.png "$T/cls/all/"
"$SHARDC" build "$T/cls" -o "$T/clsout" --size 64x48 --fit pad -j2 --no-progress >/dev/null 2>&1
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/det" --size 64x48 --fit pad -j2 \
  --no-progress >/dev/null 2>&1
hashes() {
  local n i; n=$(json_get "$1/manifest.json" samples)
  for ((i = 0; i < n; i++)); do
    "$SHARDC" info "$1" --sample "$i" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["hash"])'
  done
}
check "pixels equal those of a classification build" cmp -s <(hashes "$T/clsout") <(hashes "$T/det")
check "a classification manifest has no targets" "$PY" -c '
import json, sys; assert "targets" not in json.load(open(sys.argv[1]))' "$T/clsout/manifest.json"
check "a detection manifest has them" "$PY" -c '
import json, sys; t = json.load(open(sys.argv[1]))["targets"]
assert t["kind"] == "boxes" and t["source"] == "coco" and len(t["categories"]) == 4, t' \
  "$T/det/manifest.json"

# --- COCO round trip: ids, categories, iscrowd, area as given
mkdir -p "$T/rt"
cp "$T/img/000001.png" "$T/rt/a.png"; cp "$T/img/000002.png" "$T/rt/b.png"
"$PY" - "$T/rt" "$T/rt.json" <<'EOF'
import json, struct, sys, zlib
def size(p):
    d = open(p, "rb").read(24); return struct.unpack(">II", d[16:24])
(wa, ha), (wb, hb) = size(sys.argv[1] + "/a.png"), size(sys.argv[1] + "/b.png")
coco = {"images": [{"id": 90000000001, "file_name": "b.png", "width": wb, "height": hb},
                   {"id": -5, "file_name": "a.png", "width": wa, "height": ha}],
        "categories": [{"id": 90, "name": "zebra \u00e9"}, {"id": 7, "name": "cat"},
                       {"id": 4000000000, "name": "big"}],
        "annotations": [
          {"id": 11, "image_id": -5, "category_id": 90, "bbox": [0.5, 1.25, 10.75, 3], "area": 12.5, "iscrowd": 1},
          {"id": 12, "image_id": -5, "category_id": 4000000000, "bbox": [0, 0, wa, ha], "iscrowd": 0, "area": 0},
          {"id": 13, "image_id": 90000000001, "category_id": 7, "bbox": [2, 3, 4, 5]}]}
json.dump(coco, open(sys.argv[2], "w"))
EOF
expect_exit 0 "a build of a hand-made COCO file" "$SHARDC" build "$T/rt" --coco "$T/rt.json" \
  -o "$T/rtout" --no-progress
targets "$T/rtout" "$T/rt.jsonl"
check "every field comes back" "$PY" -c '
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
m = json.load(open(sys.argv[2]))["targets"]
assert [c["id"] for c in m["categories"]] == [7, 90, 4000000000], m
assert [c["name"] for c in m["categories"]] == ["cat", "zebra \u00e9", "big"], m
a, b = t
assert a["image_id"] == -5 and b["image_id"] == 90000000001, t
assert a["labels"] == [90, 4000000000] and a["iscrowd"] == [1, 0] and a["area"] == [12.5, 0], a
assert a["boxes"][0] == [0.5, 1.25, 11.25, 4.25], a
assert a["boxes"][1] == [0, 0] + a["orig_size"][::-1], a  # orig_size is (height, width)
assert b["labels"] == [7] and b["boxes"] == [[2, 3, 6, 8]] and b["area"] == [20] and b["iscrowd"] == [0], b
' "$T/rt.jsonl" "$T/rtout/manifest.json"

# --- YOLO labels of the same boxes give the same targets and pixels
"$PY" "$REF" yolo "$T/inst.json" "$T/labels" "$T/names.txt"
expect_exit 0 "a YOLO build" "$SHARDC" build "$T/img" --yolo "$T/labels" --names "$T/names.txt" \
  -o "$T/yolo" --size 64x48 --fit pad -j2 --no-progress
targets "$T/det" "$T/det.jsonl"; targets "$T/yolo" "$T/yolo.jsonl"
check "YOLO and COCO give the same targets" "$PY" "$REF" same "$T/det.jsonl" "$T/yolo.jsonl"
check "YOLO and COCO give the same pixels" cmp -s <(hashes "$T/det") <(hashes "$T/yolo")
check "the YOLO manifest names its classes by index" "$PY" -c '
import json, sys; c = json.load(open(sys.argv[1]))["targets"]["categories"]
assert c[0] == {"id": 0, "name": "__unused0"} and c[1] == {"id": 1, "name": "rectangle"}, c' \
  "$T/yolo/manifest.json"
# symbolic link loops in the labels folder (two links back to it: walked without a guard, 2^64
# paths) are walked once: the same dataset, promptly
cp -r "$T/labels" "$T/labels-loop"
ln -s . "$T/labels-loop/a"; ln -s ../labels-loop "$T/labels-loop/b"
expect_exit 0 "a YOLO build whose labels folder holds symbolic link loops" timeout 120 "$SHARDC" build \
  "$T/img" --yolo "$T/labels-loop" --names "$T/names.txt" -o "$T/yolo-loop" --size 64x48 --fit pad \
  -j2 --no-progress
targets "$T/yolo-loop" "$T/yolo-loop.jsonl"
check "the same targets as without the loops" cmp -s "$T/yolo.jsonl" "$T/yolo-loop.jsonl"

# --- --skip-empty
expect_exit 0 "--skip-empty" "$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/skip" \
  --skip-empty --no-progress --json
check "images without boxes are left out and counted" "$PY" -c '
import json, sys
c = json.load(open(sys.argv[1])); s = json.loads(open(sys.argv[2]).read())
withbox = len({a["image_id"] for a in c["annotations"]})
assert s["samples"] == withbox and s["skipped_empty"] == len(c["images"]) - withbox > 0, s
' "$T/inst.json" "$T/out"

# --- rejections: errors (exit 2, naming the file and entry) and rejected images (exit 1)
bad_coco() {  # bad_coco NAME PYTHON-EXPR-MODIFYING-c
  "$PY" -c '
import json, sys; c = json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(c, open(sys.argv[2], "w"))
' "$T/inst.json" "$T/$1.json" "$2"
}
# coco_refused NAME PYTHON-EXPR DESCRIPTION [PATTERN]: the build of the modified file exits 2 (and
# names the problem as the pattern says)
coco_refused() {
  bad_coco "$1" "$2"
  expect_exit 2 "$3" "$SHARDC" build "$T/img" --coco "$T/$1.json" -o "$T/x"
  [ $# -lt 4 ] || check "  named" grep -q "$4" "$T/err"
}
coco_refused dupimg 'c["images"][1]["id"] = c["images"][0]["id"]' "duplicate image id" \
  "dupimg.json: images: id 1 appears twice"
coco_refused dupann 'c["annotations"][3]["id"] = c["annotations"][0]["id"]' \
  "duplicate annotation id" "dupann.json: annotations: id 1 appears twice"
coco_refused dupcat 'c["categories"][1]["id"] = 1' "duplicate category id"
coco_refused unkimg 'c["annotations"][2]["image_id"] = 999' "unknown image" \
  "annotations\[2\] (id 3): image_id 999 is not in 'images'"
coco_refused unkcat 'c["annotations"][0]["category_id"] = 77' "unknown category" \
  "annotations\[0\] (id 1): category_id 77 is not in 'categories'"
coco_refused badbox 'c["annotations"][0]["bbox"] = [1, 2, "x", 4]' "a malformed bbox"
coco_refused crowd 'c["annotations"][0]["iscrowd"] = 2' "iscrowd 2"
coco_refused escape 'c["images"][0]["file_name"] = "../x.png"' \
  "a file name outside the image folder"
printf '{"images": [' >"$T/trunc.json"
expect_exit 2 "malformed JSON" "$SHARDC" build "$T/img" --coco "$T/trunc.json" -o "$T/x"
check "  named with its line" grep -q "trunc.json:1:.*malformed JSON" "$T/err"
check "  no dataset left" [ ! -e "$T/x/manifest.json" ]

bad_coco outside 'a = c["annotations"][0]; im = [i for i in c["images"] if i["id"] == a["image_id"]][0]; a["bbox"][0] = im["width"] - a["bbox"][2] + 1'
expect_exit 1 "a box outside its image rejects the image" "$SHARDC" build "$T/img" \
  --coco "$T/outside.json" -o "$T/x" --no-progress
check "  listed in rejects.tsv with the annotation" grep -q "outside.json: image id 1 (000001.png): annotation id 1: box .* outside the" "$T/x/rejects.tsv"
check "  the others stored" [ "$(json_get "$T/x/manifest.json" samples)" -eq 29 ]
bad_coco zero 'c["annotations"][0]["bbox"][3] = 0'
rm -rf "$T/x"
expect_exit 1 "a box of no size rejects the image" "$SHARDC" build "$T/img" --coco "$T/zero.json" \
  -o "$T/x" --no-progress
check "  listed" grep -q "box of non-positive size" "$T/x/rejects.tsv"
bad_coco wrongsize 'c["images"][0]["width"] += 1'
rm -rf "$T/x"
expect_exit 1 "a wrong image size rejects the image" "$SHARDC" build "$T/img" \
  --coco "$T/wrongsize.json" -o "$T/x" --no-progress
check "  listed" grep -q "annotated as .*, the image is" "$T/x/rejects.tsv"
rm -rf "$T/x"
expect_exit 1 "--strict stops at the first rejected image" "$SHARDC" build "$T/img" \
  --coco "$T/wrongsize.json" -o "$T/x" --no-progress --strict
check "  without a manifest" [ ! -e "$T/x/manifest.json" ]

cp -r "$T/labels" "$T/lb1"; echo "1 0.5 0.5 0.2" >>"$T/lb1/000001.txt"
expect_exit 2 "a YOLO line of 4 fields" "$SHARDC" build "$T/img" --yolo "$T/lb1" --names "$T/names.txt" -o "$T/x"
check "  named with its line" grep -q "lb1/000001.txt:[0-9]*: expected 'class cx cy w h'" "$T/err"
cp -r "$T/labels" "$T/lb2"; echo "9 0.5 0.5 0.2 0.2" >>"$T/lb2/000001.txt"
expect_exit 2 "a YOLO class beyond the names" "$SHARDC" build "$T/img" --yolo "$T/lb2" --names "$T/names.txt" -o "$T/x"
cp -r "$T/labels" "$T/lb3"; echo "1 0.5 0.5 0.2 0.2" >"$T/lb3/999999.txt"
expect_exit 2 "a YOLO label file without an image" "$SHARDC" build "$T/img" --yolo "$T/lb3" --names "$T/names.txt" -o "$T/x"
check "  named" grep -q "lb3/999999.txt: no image" "$T/err"
cp -r "$T/labels" "$T/lb4"; echo "1 0.95 0.5 0.2 0.2" >>"$T/lb4/000001.txt"
rm -rf "$T/x"
expect_exit 1 "a YOLO box past the edge rejects the image" "$SHARDC" build "$T/img" --yolo "$T/lb4" --names "$T/names.txt" -o "$T/x" --no-progress
check "  listed with its line" grep -q "lb4/000001.txt: line [0-9]*: box .* outside" "$T/x/rejects.tsv"
expect_exit 2 "--yolo without --names" "$SHARDC" build "$T/img" --yolo "$T/labels" -o "$T/x"
expect_exit 2 "--coco with --yolo" "$SHARDC" build "$T/img" --coco "$T/inst.json" --yolo "$T/labels" --names "$T/names.txt" -o "$T/x"
expect_exit 2 "--coco with --augment" "$SHARDC" build "$T/img" --coco "$T/inst.json" --size 32 --augment 2 -o "$T/x"
expect_exit 2 "--coco with a per-image format" "$SHARDC" build "$T/img" --coco "$T/inst.json" --format png0 -o "$T/x2"
expect_exit 2 "--skip-empty alone" "$SHARDC" build "$T/img" --skip-empty -o "$T/x"

# --- damage to a target record is caught
cp -r "$T/det" "$T/dmg"
"$PY" - "$T/dmg/shard-00000.raw" <<'EOF'
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
aux = struct.unpack_from("<Q", b, 40)[0]
b[aux + 40] ^= 0x40          # a coordinate of the first record's first box
open(p, "wb").write(bytes(b))
EOF
expect_exit 1 "verify catches a changed box" "$SHARDC" verify "$T/dmg"
check "  naming the shard" grep -q "shard-00000.raw" "$T/err" "$T/out"

# --- --resume after a crash, and --part/merge, give the same dataset
opts=(--size 64x48 --fit pad --shard-samples 7 -j2 --no-progress)
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/whole" "${opts[@]}" >/dev/null 2>&1
targets "$T/whole" "$T/whole.jsonl"
crash 12 "$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/res" "${opts[@]}"
check "the build was killed" [ ! -e "$T/res/manifest.json" ]
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/res" "${opts[@]}" --resume >/dev/null 2>&1
check "--resume finishes" [ -e "$T/res/manifest.json" ]
check "  with the same shards" diff -r "$T/whole" "$T/res" -x inputs.tsv -x '.*'
targets "$T/res" "$T/res.jsonl"
check "  and the same targets" cmp -s "$T/whole.jsonl" "$T/res.jsonl"
for p in 0 1 2; do
  "$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/parts" "${opts[@]}" --part $p/3 >/dev/null 2>&1
done
"$SHARDC" merge "$T/parts" >/dev/null 2>&1
targets "$T/parts" "$T/parts.jsonl"
check "--part and merge give the same targets" cmp -s "$T/whole.jsonl" "$T/parts.jsonl"
check "  and categories" "$PY" -c '
import json, sys; a, b = (json.load(open(p))["targets"] for p in sys.argv[1:])
assert a == b, (a, b)' "$T/whole/manifest.json" "$T/parts/manifest.json"
check "the merged dataset verifies" "$SHARDC" verify "$T/parts"

# --- the dry run projects the records; hdf5 and lmdb store them too
expect_exit 0 "--dry-run" "$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/dry" --dry-run --json
for f in hdf5 lmdb; do
  if "$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/$f" "${opts[@]}" --format $f >/dev/null 2>"$T/$f.err"; then
    targets "$T/$f" "$T/$f.jsonl"
    check "--format $f stores the same targets" cmp -s "$T/whole.jsonl" "$T/$f.jsonl"
    check "  and verifies" "$SHARDC" verify "$T/$f"
  elif grep -q "not supported\|unknown --format" "$T/$f.err"; then
    echo "  skip --format $f (not in this build)"
  else
    bad "--format $f build failed"; sed 's/^/       /' "$T/$f.err" | head -5
  fi
done

# --- cat --boxes
expect_exit 0 "cat --boxes" "$SHARDC" cat "$T/whole" 0 --boxes -o "$T/b.ppm"
"$SHARDC" cat "$T/whole" 0 -o "$T/p.ppm" 2>/dev/null
check "  draws onto the sample (same size, other pixels)" "$PY" -c '
import sys; a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert len(a) == len(b) and a[:15] == b[:15] and a != b' "$T/b.ppm" "$T/p.ppm"
expect_exit 2 "cat --boxes of a classification dataset" "$SHARDC" cat "$T/clsout" 0 --boxes -o "$T/c.ppm"
finish
