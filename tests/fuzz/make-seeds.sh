#!/usr/bin/env bash
# Seed corpora for the fuzz targets, made at test time (nothing here is committed):
#   tests/fuzz/make-seeds.sh OUT     (BUILD=dir: the build whose shardc is used; default build)
# writes OUT/<target>/ for every target: shards, indexes, manifests and list files of a tiny
# dataset built with shardc-mksample and shardc in every format, the generated images (broken ones
# included) plus a few image variants Pillow writes (gray, palette, alpha, 16-bit, progressive,
# CMYK), hdf5 recipes (fuzz_hdf5.c), and augmentation specs and aux records. Small on purpose: the
# fuzzer's input length follows the largest seed.
set -euo pipefail
out=${1:?usage: make-seeds.sh OUT}
BUILD=${BUILD:-build}
shardc=$BUILD/bin/shardc
mks=$BUILD/bin/shardc-mksample
for b in "$shardc" "$mks"; do
  [ -x "$b" ] || { echo "make-seeds.sh: $b not built (make all first)" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardc-seeds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
targets=(raw manifest list jpeg png bmp hdf5 lmdb imageset aug codec)
rm -rf "$out"
for t in "${targets[@]}"; do mkdir -p "$out/$t"; done

"$mks" "$tmp/src" --classes 2 --per-class 3 --min-side 8 --max-side 24 --seed 7 \
  --list "$tmp/list.txt" --quiet

# build NAME ARGS...: a dataset in $tmp/NAME; exit 1 (finished with rejects: the broken inputs)
# is what these builds are expected to return
build() {
  local name=$1 rc=0
  shift
  "$shardc" build "$tmp/src" -o "$tmp/$name" --no-progress -j 1 "$@" >/dev/null 2>&1 || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "make-seeds.sh: shardc build $* failed ($rc)" >&2
    exit 1
  fi
  cp "$tmp/$name/manifest.json" "$out/manifest/$name.json"
}
for f in raw hdf5 lmdb; do
  small=()
  [ "$f" = raw ] && small=(--align 256)    # 4 KiB payload padding would make every seed 4 KiB more
  build "$f-fixed" --format "$f" --size 6x5 --shard-samples 3 "${small[@]}"
  build "$f-flat" --format "$f" --max-side 9 --gray --shard-samples 4 "${small[@]}"
  build "$f-aug" --format "$f" --size 5x4 --augment 2 --aug "rrc=0.3:1,flip,rotate=20,jitter=0.2,hue=0.1,gray=0.5" \
    --shard-samples 5 "${small[@]}"
done
# raw version 2: the packed layout, and compressed payloads (one shard each: 4 KiB of header
# page per seed)
build raw-packed --format raw --size 6x5 --shard-samples 4
build raw-lz4 --format raw --size 12x10 --shard-samples 4 --compress lz4
build raw-zstd --format raw --max-side 16 --shard-samples 4 --compress zstd
build raw-jpegmix --format raw --size 16x16 --shard-samples 4 --jpeg-fraction 0.5 --quality 50
for f in png0 bmp jpeg; do
  build "$f-rgb" --format "$f" --size 6x5 --shard-samples 3
  build "$f-gray" --format "$f" --max-side 9 --gray --shard-samples 4
done
build "png0-aug" --format png0 --size 5x4 --augment 2 --shard-samples 4
build raw-aug3 --format raw --size 5x4 --augment 2 --aug "affine=20:0.2:0.8:1.2:15:bilinear,flip" \
  --shard-samples 5 --align 256

for d in "$tmp"/*/; do
  name=$(basename "$d")
  [ "$name" = src ] && continue
  for s in "$d"shard-*; do
    base=$(basename "$s")
    case "$base" in
      *.raw) cp "$s" "$out/raw/$name-$base" ;;
      *.h5) cp "$s" "$out/hdf5/$name-$base" ;;
      *.lmdb) cp "$s/data.mdb" "$out/lmdb/$name-$base.mdb" ;;
      *.idx) cp "$s" "$out/imageset/$name-$base" ;;
    esac
  done
done

# hdf5 recipes (inputs that do not start with the HDF5 signature: see tests/fuzz/fuzz_hdf5.c)
hdf5_recipe() {   # NAME HEXBYTES
  printf "$(echo "$2" | sed 's/\([0-9a-f][0-9a-f]\)/\\x\1/g; s/ //g')" > "$out/hdf5/recipe-$1"
}
flat="01 02 03 03 00 00 00 00 00 01 01 01 00 00 01 00 02 03 02 03 00 00 02 00"
hdf5_recipe fixed "00 03 02 03 01 05 07 09 00 00 00 00 00 00"
hdf5_recipe fixed-deflate "06 03 02 03 01 05 07 09"
hdf5_recipe flat "01 03 00 00 00 00 00 00 $flat 00"
hdf5_recipe flat-chunked-aux "0b 03 00 00 00 00 00 00 01 02 03 03 00 00 00 40 00 01 01 01 00 00 01 05 02 03 02 03 00 00 02 00 00"
hdf5_recipe bad-hash "10 02 01 01 01 00 00 00 ff"
hdf5_recipe omit-pixels "40 0e 02 01 01 01"
hdf5_recipe mistyped-shapes "40 1b 02 01 01 01"
hdf5_recipe extra-label-row "40 2b 02 01 01 01"

# list files: the generator's, and a few shapes a parser must handle (comments, blank lines,
# spaces in names, trailing blanks, CRLF, the files the fuzz target provides: a.jpg and d)
cp "$tmp/list.txt" "$out/list/mksample.txt"
printf '# comment\n\n  a.jpg   3  \nd 0\n' > "$out/list/blank-comment.txt"
printf 'a.jpg 0\r\na.jpg 12\r\n' > "$out/list/crlf.txt"
printf 'dir with space/a.jpg 1\na.jpg 2\n' > "$out/list/space.txt"
printf 'a.jpg -1\n' > "$out/list/bad-label.txt"

# images: byte 0 picks the decode options (see fz_image in tests/fuzz/common.c); a few option
# bytes are cycled through the files so every option bit appears in the corpus
# a python3 with Pillow (Debian's python3-pil lives in /usr/bin/python3, which may not be the
# first python3 on PATH); without one these extra images are left out
pil=
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import PIL' 2>/dev/null; then pil=$py; break; fi
done
mkdir -p "$tmp/pil"
[ -n "$pil" ] || echo "make-seeds.sh: no python3 with Pillow, fewer image seeds" >&2
[ -z "$pil" ] || "$pil" - "$tmp/pil" <<'PY'
import io, os, sys
from PIL import Image
out = sys.argv[1]
rgb = Image.new("RGB", (13, 9))
rgb.putdata([((x * 19) % 256, (y * 28) % 256, (x * y * 7) % 256)
             for y in range(9) for x in range(13)])
rgb.convert("L").save(f"{out}/gray.png")
rgb.convert("LA").save(f"{out}/gray-alpha.png")
rgb.convert("RGBA").save(f"{out}/rgba.png")
rgb.convert("P").save(f"{out}/palette.png")
rgb.convert("I").convert("I;16").save(f"{out}/gray16.png")
rgb.save(f"{out}/interlaced.png", interlace=1)
rgb.save(f"{out}/progressive.jpg", progressive=True, quality=80)
rgb.convert("L").save(f"{out}/gray.jpg")
rgb.convert("CMYK").save(f"{out}/cmyk.jpg")
rgb.save(f"{out}/444.jpg", subsampling=0)
rgb.save(f"{out}/rgb.bmp")
rgb.convert("L").save(f"{out}/gray.bmp")
rgb.convert("P").save(f"{out}/palette.bmp")
rgb.convert("1").save(f"{out}/mono.bmp")
rgb.convert("RGBA").save(f"{out}/rgba.bmp")
PY
# BMP variants Pillow reads and our decoder follows (formats/bmp.c): RLE8 and RLE4 with every
# escape code, OS/2 1.x and 2.x headers, a gap before the pixels, a DIB without file header,
# 32-bit bitfields, a palette too short for its indices
[ -z "$pil" ] || "$pil" - "$tmp/pil" <<'PY'
import struct, sys
out = sys.argv[1]
def info(w, h, bits, comp=0, colors=0, hsz=40):
    b = struct.pack("<IiiHHIIiiII", hsz, w, h, 1, bits, comp, 0, 2835, 2835, colors, 0)
    return b + b"\0" * (hsz - len(b))
def bmp(name, dib, pal=b"", pix=b"", gap=b""):
    off = 14 + len(dib) + len(pal) + len(gap)
    body = dib + pal + gap + pix
    open(f"{out}/{name}", "wb").write(b"BM" + struct.pack("<IHHI", 14 + len(body), 0, 0, off) + body)
pal = b"".join(bytes((i * 53 % 256, i * 91 % 256, i * 37 % 256, 0)) for i in range(16))
rle8 = b"\x05\x03\x00\x03\x01\x02\x03\x00\x04\x07\x00\x00\x00\x02\x01\x01\x02\x00\x03\x09\x00\x00\x20\x05\x00\x01"
bmp("rle8.bmp", info(13, 5, 8, 1, 16), pal, rle8)
bmp("rle8-topdown.bmp", info(13, -5, 8, 1, 16), pal, rle8)
bmp("rle4.bmp", info(13, 5, 4, 2, 16), pal, b"\x07\x1e\x00\x05\x12\x34\x50\x00\x00\x00\x00\x02\x00\x00\x03\x01\x0c\x9a\x00\x01")
bmp("os2-p4.bmp", struct.pack("<IHHHH", 12, 13, 5, 1, 4), pal[:48], bytes(range(40)))
bmp("os2v2-p8.bmp", info(13, 5, 8, 0, 16, hsz=64), pal, bytes(range(80)))
bmp("gap-p8.bmp", info(13, 5, 8, 0, 4), pal[:16], bytes(range(80)), gap=b"\xee" * 40)
bmp("bf32.bmp", info(3, 2, 32, 3), struct.pack("<III", 0xFF000000, 0xFF0000, 0xFF00), bytes(range(24)))
open(f"{out}/dib-p8.bmp", "wb").write(info(13, 5, 8, 0, 16) + pal + bytes(range(80)))
PY
# PNG chunks and JPEG segments Pillow checks at open (formats/png.c, formats/jpeg.c): an APNG
# (acTL, fcTL, fdAT), compressed text and ICC chunks, a Photoshop APP13 and an MPF APP2
[ -z "$pil" ] || "$pil" - "$tmp/pil" <<'PY'
import io, struct, sys, zlib
from PIL import Image
out = sys.argv[1]
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
raw = b"".join(b"\0" + bytes((x * 19 + y) % 256 for x in range(15)) for y in range(4))
def png(before, after=b""):
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 5, 4, 8, 2, 0, 0, 0)) + before
            + chunk(b"IDAT", zlib.compress(raw)) + after + chunk(b"IEND", b""))
fctl = lambda seq: chunk(b"fcTL", struct.pack(">IIIIIHHBB", seq, 5, 4, 0, 0, 1, 10, 0, 0))
fdat = lambda seq: chunk(b"fdAT", struct.pack(">I", seq) + zlib.compress(raw))
open(f"{out}/apng.png", "wb").write(png(chunk(b"acTL", struct.pack(">II", 1, 0)) + fctl(0), fdat(1)))
text = (chunk(b"zTXt", b"k\0\0" + zlib.compress(b"z" * 5000)) + chunk(b"iTXt", b"k\0\1\0en\0t\0" + zlib.compress("\u00e9".encode() * 9))
        + chunk(b"iCCP", b"p\0\0" + zlib.compress(b"icc" * 50)) + chunk(b"tEXt", b"k\0v"))
open(f"{out}/text.png", "wb").write(png(text))
b = io.BytesIO(); Image.new("RGB", (8, 8), (9, 99, 199)).save(b, "JPEG"); j = b.getvalue()
seg = lambda m, p: b"\xff" + bytes((m,)) + struct.pack(">H", len(p) + 2) + p
ps = b"Photoshop 3.0\0" + b"8BIM\x03\xed\0\0" + struct.pack(">I", 16) + b"\0" * 16 + b"8BIM\x04\x04\0\0" + struct.pack(">I", 2) + b"xy"
ifd = struct.pack(">H", 2) + struct.pack(">HHLL", 0xB001, 4, 1, 2) + struct.pack(">HHLL", 0xB002, 7, 32, 38) + b"\0" * 4
mpf = b"MPF\0MM\0\x2a" + struct.pack(">L", 8) + ifd + b"\0" * 32
open(f"{out}/segments.jpg", "wb").write(j[:2] + seg(0xED, ps) + seg(0xE2, mpf) + j[2:])
PY
opts=(00 01 02 05 0a 0f 10 21 30 0c)
k=0
add_image() {   # FILE: copy into the corpus of its type with an option byte in front
  local f=$1 t
  case "${f,,}" in
    *.jpg|*.jpeg) t=jpeg ;;
    *.png) t=png ;;
    *.bmp) t=bmp ;;
    *) return 0 ;;
  esac
  local name=${f#"$tmp"/}
  { printf "\\x${opts[k % ${#opts[@]}]}"; cat "$f"; } > "$out/$t/${name//\//_}"
  k=$((k + 1))
}
while IFS= read -r f; do
  add_image "$f"
done < <(find "$tmp/src" "$tmp/pil" "$tmp/png0-rgb" "$tmp/bmp-gray" "$tmp/jpeg-rgb" \
              "$tmp/jpeg-gray" -type f | sort)

# augmentation specs, and the 64- and 96-byte aux records of the augmented raw shards
printf 'rrc=0.08:1:0.75:1.3333,flip=0.5,jitter=0.4' > "$out/aug/default.txt"
printf 'none' > "$out/aug/none.txt"
printf 'rrc=0.5:1' > "$out/aug/rrc2.txt"
printf 'flip' > "$out/aug/flip.txt"
printf 'brightness=0.1,contrast=0.2,saturation=0.3' > "$out/aug/colour.txt"
printf 'rrc=1e-3:0.5:0.25:4,flip=1,jitter=1' > "$out/aug/extremes.txt"
printf 'flip,hue=0.5,gray=0.2' > "$out/aug/hue-gray.txt"
printf 'rotate=30:bilinear,rrc=0.5:1' > "$out/aug/rotate.txt"
printf 'affine=15:0.1:0.9:1.1:10,flip' > "$out/aug/affine.txt"
python3 - "$out/aug" "$tmp"/raw-aug/shard-*.raw "$tmp"/raw-aug3/shard-*.raw <<'PY'
import struct, sys
out, shards = sys.argv[1], sys.argv[2:]
n = 0
for s in shards:
    b = open(s, "rb").read()
    aux_off, aux_size = struct.unpack_from("<QQ", b, 40)
    size = 96 if b[aux_off:aux_off + 4] == b"AUG3" else 64
    for i in range(0, aux_size, size):
        open(f"{out}/record-{n:02d}.bin", "wb").write(b[aux_off + i:aux_off + i + size])
        n += 1
if n == 0:
    sys.exit("make-seeds.sh: no aux records in the augmented shards")
PY

# codec: the compressed payloads of the compressed shards, as fuzz_codec.c takes them (codec
# byte, 24-bit decoded length, the block)
python3 - "$out/codec" "$tmp"/raw-lz4/shard-*.raw "$tmp"/raw-zstd/shard-*.raw <<'PY'
import struct, sys
out, shards = sys.argv[1], sys.argv[2:]
n = 0
for s in shards:
    b = open(s, "rb").read()
    count, first, ix = struct.unpack_from("<QQQ", b, 16)
    for i in range(count):
        off, length = struct.unpack_from("<QQ", b, ix + 64 * i)
        codec = (struct.unpack_from("<H", b, ix + 64 * i + 38)[0] >> 8) & 15
        if codec and length < 1 << 24:
            stored = struct.unpack_from("<I", b, ix + 64 * i + 60)[0]
            with open(f"{out}/block-{n:02d}.bin", "wb") as f:
                f.write(bytes([codec - 1]) + length.to_bytes(3, "little") + b[off:off + stored])
            n += 1
if n == 0:
    sys.exit("make-seeds.sh: no compressed payloads in the compressed shards")
PY

for t in "${targets[@]}"; do
  printf '  %-9s %3d seeds\n' "$t" "$(find "$out/$t" -type f | wc -l)"
done
touch "$out/.done"
