#!/usr/bin/env bash
# End to end: the stored pixels are torchvision's. On generated JPEG, PNG and BMP files of many
# sizes (smaller and larger than the targets), each sample must equal, byte for byte:
#   --short-side 256 --crop 224x224    CenterCrop(224)(Resize(256)(Image.open(p).convert('RGB')))
#   --size 224x224                     CenterCrop(224)(Resize(224)(...))
#   --short-side 100 --filter bicubic  Resize(100, BICUBIC)(...)
#   --short-side 96 --max-side 120 --crop 100x90 --filter lanczos
#                                      CenterCrop((90, 100))(Resize(96, LANCZOS, max_size=120))
# and -j1 and -j4 builds must give identical shards.
. "$(dirname "$0")/lib.sh"

need_python PYTV 'torchvision, PIL' "no python3 with torchvision (python3-torchvision)"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 12 --seed 11 --min-side 17 --max-side 420 --quiet \
  --no-broken || { echo "mksample failed"; exit 1; }

build() { local out=$1; shift; expect_exit 0 "build $*" "$SHARDC" build "$T/src" -o "$T/$out" --no-progress "$@"; }
build sc -j2 --short-side 256 --crop 224x224
build sz -j2 --size 224x224
build bc -j2 --short-side 100 --filter bicubic
build lz -j2 --short-side 96 --max-side 120 --crop 100x90 --filter lanczos
build j1 -j1 --short-side 256 --crop 224x224
build j4 -j4 --short-side 256 --crop 224x224

same=1
for f in "$T"/j1/*; do
  cmp -s "$f" "$T/j4/$(basename "$f")" || { [ "$(basename "$f")" = manifest.json ] || same=0; }
done
check "-j1 and -j4 write identical shards" [ "$same" -eq 1 ]
check "-j4 build equals the -j2 build" cmp -s "$T/j4/manifest.json" "$T/sc/manifest.json"

"$PYTV" - "$SHARDC" "$T" <<'PY'
import os, subprocess, sys
from PIL import Image
import torchvision.transforms as T
from torchvision.transforms import InterpolationMode as IM
shardc, t = sys.argv[1], sys.argv[2]
src = os.path.join(t, "src")
paths = [os.path.join(src, c, f) for c in sorted(os.listdir(src)) for f in sorted(os.listdir(os.path.join(src, c)))]
chains = {
    "sc": T.Compose([T.Resize(256), T.CenterCrop(224)]),
    "sz": T.Compose([T.Resize(224), T.CenterCrop(224)]),
    "bc": T.Resize(100, interpolation=IM.BICUBIC),
    "lz": T.Compose([T.Resize(96, interpolation=IM.LANCZOS, max_size=120), T.CenterCrop((90, 100))]),
}
fails = 0
formats = set()
sizes = set()
for d, tf in chains.items():
    for i, p in enumerate(paths):
        im = Image.open(p)
        formats.add(im.format)
        sizes.add(im.size)
        ref = tf(im.convert("RGB"))
        out = subprocess.run([shardc, "cat", os.path.join(t, d), str(i)], capture_output=True, check=True).stdout
        magic, dims, maxv, px = out.split(b"\n", 3)
        w, h = map(int, dims.split())
        if (w, h) != ref.size or px != ref.tobytes():
            diff = sum(a != b for a, b in zip(px, ref.tobytes())) if (w, h) == ref.size else -1
            print(f"  FAIL {d} {p} {im.size}: got {w}x{h}, torchvision {ref.size}, {diff} bytes differ")
            fails += 1
print(f"  ok   checked {len(paths)} images x {len(chains)} chains ({', '.join(sorted(formats))}; {len(sizes)} distinct sizes)" if not fails else f"  {fails} mismatches")
assert len(formats) == 3, formats
sys.exit(1 if fails else 0)
PY
check "samples equal torchvision's Resize/CenterCrop" [ $? -eq 0 ]
finish
