#!/usr/bin/env bash
# End to end: stored pixels equal the reference decoders'. A build without geometry options keeps
# every image as decoded: each sample must equal Pillow's decode (convert to RGB or L) byte for
# byte, and each JPEG sample must also equal djpeg's.
. "$(dirname "$0")/lib.sh"

if [ -z "$PYPIL" ]; then echo "SKIPPED: no python3 with Pillow (python3-pil)"; exit 77; fi
"$MKSAMPLE" "$T/src" --classes 4 --per-class 10 --seed 5 --quiet --no-broken || { echo "mksample failed"; exit 1; }
expect_exit 0 "keep-size RGB build" "$SHARDC" build "$T/src" -o "$T/rgb" --no-progress
expect_exit 0 "keep-size gray build" "$SHARDC" build "$T/src" -o "$T/gray" --gray --no-progress

"$PYPIL" - "$SHARDC" "$T" <<'PY'
import json, os, subprocess, sys, tempfile
from PIL import Image
shardc, t = sys.argv[1], sys.argv[2]
src = os.path.join(t, "src")
paths = []
for c in sorted(os.listdir(src)):
    for f in sorted(os.listdir(os.path.join(src, c))):
        paths.append(os.path.join(src, c, f))
fails = 0
def cat(d, i):
    out = subprocess.run([shardc, "cat", d, str(i)], capture_output=True, check=True).stdout
    magic, dims, maxv, px = out.split(b"\n", 3)
    w, h = map(int, dims.split())
    return magic, w, h, px
n = json.load(open(os.path.join(t, "rgb", "manifest.json")))["samples"]
assert n == len(paths), (n, len(paths))
kinds = {}
for i, p in enumerate(paths):
    im = Image.open(p)
    kinds[im.format + "/" + im.mode] = kinds.get(im.format + "/" + im.mode, 0) + 1
    for mode, d in (("RGB", "rgb"), ("L", "gray")):
        magic, w, h, px = cat(os.path.join(t, d), i)
        if (w, h) != im.size:
            print(f"  FAIL {p}: size {w}x{h} != {im.size}"); fails += 1; continue
        if mode == "L" and im.mode == "CMYK":
            # CMYK has no luma of its own: gray is the luma of the RGB conversion
            ref = im.convert("RGB").convert("L").tobytes()
        elif mode == "L" and im.format == "JPEG":
            # a gray JPEG decode takes the decoder's own luma; compare with djpeg -grayscale
            ref = subprocess.run(["djpeg", "-grayscale", "-pnm", p], capture_output=True, check=True).stdout.split(b"\n", 3)[3]
        else:
            ref = im.convert(mode).tobytes()
        if px != ref:
            diff = sum(1 for a, b in zip(px, ref) if a != b)
            print(f"  FAIL {p} ({mode}): {diff} bytes differ from the reference"); fails += 1
    if im.format == "JPEG" and im.mode in ("RGB", "L"):
        ref = subprocess.run(["djpeg", "-pnm", p], capture_output=True, check=True).stdout.split(b"\n", 3)[3]
        magic, w, h, px = cat(os.path.join(t, "rgb" if im.mode == "RGB" else "gray"), i)
        if px != ref:
            print(f"  FAIL {p}: differs from djpeg"); fails += 1
print(f"  compared {len(paths)} samples x 2 builds; source kinds: {kinds}")
sys.exit(1 if fails else 0)
PY
check "every sample equals Pillow's (and djpeg's) decode" [ $? -eq 0 ]
finish
