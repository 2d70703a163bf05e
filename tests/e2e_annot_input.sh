#!/usr/bin/env bash
# End to end: annotation and list files that are damaged or not files at all. A label file of
# NUL bytes (zero-filled by a crash) is refused, not read as "no boxes"; /dev/zero, FIFOs and
# devices as --names, label files, --list or --coco are refused by type before a byte is read
# (every command runs under `timeout 10`, so a hang fails instead of blocking the suite); a COCO
# area beyond a float's range is refused at load, and a --force build that fails leaves the
# previous dataset as it was; messages say what is wrong (a NUL byte, where a YOLO image id comes
# from, what --wds expected).
. "$(dirname "$0")/lib.sh"

"$MKSAMPLE" "$T/img" --coco "$T/inst.json" --per-class 6 --min-side 40 --max-side 64 --seed 7 \
  --quiet || { echo "mksample failed"; exit 1; }
printf 'rectangle\nellipse\nframe\ncross\n' >"$T/names.txt"
mkdir -p "$T/lb"
printf '0 0.5 0.5 0.2 0.2\n' >"$T/lb/000001.txt"
b() { timeout 10 "$SHARDC" build "$@" --no-progress; }

expect_exit 0 "a YOLO build of good labels" b "$T/img" --yolo "$T/lb" --names "$T/names.txt" -o "$T/good"
ln -s "$T/names.txt" "$T/names-link.txt"
expect_exit 0 "  and with --names a symbolic link to the file" b "$T/img" --yolo "$T/lb" \
  --names "$T/names-link.txt" -o "$T/good-link"

# ---- item: a label file of NUL bytes, a NUL inside a line
cp -r "$T/lb" "$T/lbz"; head -c 4096 /dev/zero >"$T/lbz/000002.txt"
expect_exit 2 "a zero-filled label file is refused" b "$T/img" --yolo "$T/lbz" --names "$T/names.txt" -o "$T/x"
check "  named, with the reason" grep -q "lbz/000002.txt:1: NUL byte in the line (a damaged file" "$T/err"
check "  and no dataset" [ ! -e "$T/x/manifest.json" ]
cp -r "$T/lb" "$T/lbn"; printf '0 0.5 0.5 0.2 0.2\n1 0.5\0 0.5 0.2 0.2\n' >"$T/lbn/000002.txt"
expect_exit 2 "a NUL inside a label line" b "$T/img" --yolo "$T/lbn" --names "$T/names.txt" -o "$T/x"
check "  says NUL byte, on line 2" grep -q "lbn/000002.txt:2: NUL byte in the line" "$T/err"
check "  not 'too long'" eval '! grep -q "too long\|longer than" "$T/err"'
printf 'rectangle\nell\0ipse\n' >"$T/names-nul.txt"
expect_exit 2 "a NUL inside a class name" b "$T/img" --yolo "$T/lb" --names "$T/names-nul.txt" -o "$T/x"
check "  says NUL byte" grep -q "names-nul.txt:2: NUL byte in the line" "$T/err"

# ---- item: special files are refused by type, never read
expect_exit 2 "--names /dev/zero" b "$T/img" --yolo "$T/lb" --names /dev/zero -o "$T/x"
check "  refused as a device" grep -q "cannot read /dev/zero: not a regular file (a character device)" "$T/err"
mkfifo "$T/names.fifo"
expect_exit 2 "--names a FIFO" b "$T/img" --yolo "$T/lb" --names "$T/names.fifo" -o "$T/x"
check "  refused as a FIFO" grep -q "names.fifo: not a regular file (a FIFO)" "$T/err"
cp -r "$T/lb" "$T/lbd"; ln -s /dev/zero "$T/lbd/000003.txt"
expect_exit 2 "a label file linked to /dev/zero" b "$T/img" --yolo "$T/lbd" --names "$T/names.txt" -o "$T/x"
check "  refused as a device" grep -q "lbd/000003.txt: not a regular file (a character device)" "$T/err"
cp -r "$T/lb" "$T/lbf"; mkfifo "$T/lbf/000003.txt"
expect_exit 2 "a label file that is a FIFO" b "$T/img" --yolo "$T/lbf" --names "$T/names.txt" -o "$T/x"
check "  refused as a FIFO" grep -q "lbf/000003.txt: not a regular file (a FIFO)" "$T/err"
mkfifo "$T/inst.fifo"
expect_exit 2 "--coco a FIFO" b "$T/img" --coco "$T/inst.fifo" -o "$T/x"
check "  refused as a FIFO" grep -q "inst.fifo: not a regular file (a FIFO)" "$T/err"
mkfifo "$T/list.fifo"
expect_exit 2 "--list a FIFO" b "$T/img" --list "$T/list.fifo" -o "$T/x"
check "  refused as a FIFO" grep -q "list file .*list.fifo: not a regular file (a FIFO)" "$T/err"
expect_exit 2 "--list /dev/zero" b "$T/img" --list /dev/zero -o "$T/x"
check "  refused as a device" grep -q "list file /dev/zero: not a regular file (a character device)" "$T/err"

# ---- item: YOLO image ids say where they come from
mkdir -p "$T/mixed"; cp "$T/img/000001.png" "$T/mixed/1.png"; cp "$T/img/000002.png" "$T/mixed/cat.png"
mkdir -p "$T/lbm"
expect_exit 2 "1.png and cat.png share image id 1" b "$T/mixed" --yolo "$T/lbm" --names "$T/names.txt" -o "$T/x"
check "  each id's source is named" grep -q "mixed/1.png and .*mixed/cat.png: both have image id 1 (.*1.png by name, cat.png by position)" "$T/err"

# ---- item: --wds without a usable label says what WebDataset input needs
(cd "$T/img" && tar cf "$T/nolabel.tar" 000001.png 000002.png)
expect_exit 2 "--wds with no label member" b "$T/nolabel.tar" --wds -o "$T/x"
check "  says what a WebDataset sample needs" grep -q "no samples found in .*nolabel.tar (expected WebDataset shards whose samples hold a .jpg, .png or .bmp image and a usable .cls label of the same key)" "$T/err"
check "  not class folders" eval '! grep -q "class folders" "$T/err"'

# ---- item: a COCO area or box beyond a float's range
bad_coco() {  # bad_coco NAME PYTHON-STATEMENT-MODIFYING-c
  python3 -c '
import json, sys; c = json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(c, open(sys.argv[2], "w"))
' "$T/inst.json" "$T/$1.json" "$2"
}
expect_exit 0 "a good COCO build" b "$T/img" --coco "$T/inst.json" -o "$T/coco" --size 32
cp "$T/coco/manifest.json" "$T/coco-manifest.json"
bad_coco area 'c["annotations"][0]["area"] = 3.5e38'
expect_exit 2 "an area of 3.5e38 is refused at load" b "$T/img" --coco "$T/area.json" -o "$T/x"
check "  named" grep -q "area.json: annotations\[0\] (id 1): 'area' is not a number from 0 to" "$T/err"
check "  and no dataset" [ ! -e "$T/x/manifest.json" ]
expect_exit 2 "  also with --force over a good dataset" b "$T/img" --coco "$T/area.json" -o "$T/coco" --size 32 --force
check "  which stays as it was" cmp -s "$T/coco/manifest.json" "$T/coco-manifest.json"
expect_exit 0 "  and still verifies" timeout 10 "$SHARDC" verify "$T/coco"
bad_coco bbox 'c["annotations"][0]["bbox"][2] = 1e39'
expect_exit 2 "a bbox width of 1e39 is refused at load" b "$T/img" --coco "$T/bbox.json" -o "$T/x"
check "  named" grep -q "bbox.json: annotations\[0\] (id 1): 'bbox' is not 4 finite numbers within" "$T/err"
# an area a float holds, but not once the image is scaled up 4 times in area
bad_coco big 'c["annotations"][0]["area"] = 3.0e38'
expect_exit 1 "an area that overflows once scaled rejects its image" b "$T/img" --coco "$T/big.json" \
  -o "$T/big" --size 128x128 --fit stretch
check "  listed with the annotation" grep -q "big.json: .*annotation id 1: area 3e+38, .* once scaled to the sample, is beyond a float's range" "$T/big/rejects.tsv"
expect_exit 0 "  the dataset verifies" timeout 10 "$SHARDC" verify "$T/big"
expect_exit 0 "  and its targets read back" timeout 10 "$SHARDC" info "$T/big" --targets

finish
