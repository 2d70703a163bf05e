#!/usr/bin/env bash
# End to end: --shrink-on-load stays close to the exact path. On photo-like JPEGs of many sizes,
# builds with and without it must be at least 40 dB PSNR apart on every image (the distribution
# is printed), the option must really change the decode (else this test proves nothing), and
# the manifest must say it was used.
. "$(dirname "$0")/lib.sh"

need_python PYNP numpy "no python3 with numpy (python3-numpy)"

"$MKSAMPLE" "$T/src" --photo --classes 2 --per-class 12 --seed 4 --quiet || { echo "mksample failed"; exit 1; }
for g in "size:--size 112x112" "crop:--short-side 120 --crop 112x112"; do
  name=${g%%:*}; opts=${g#*:}
  expect_exit 0 "exact build $opts" "$SHARDC" build "$T/src" -o "$T/ex-$name" --no-progress -j2 $opts
  expect_exit 0 "shrink-on-load build $opts" "$SHARDC" build "$T/src" -o "$T/sh-$name" --no-progress -j2 --shrink-on-load $opts
  check "manifest records shrink-on-load ($name)" grep -q '"shrink_on_load": true' "$T/sh-$name/manifest.json"
  check "manifest chain names it ($name)" grep -q 'shrink-on-load' "$T/sh-$name/manifest.json"
  "$PYNP" - "$SHARDC" "$T/ex-$name" "$T/sh-$name" <<'PY'
import json, subprocess, sys
import numpy as np
shardc, ex, sh = sys.argv[1:4]
def cat(d, i):
    out = subprocess.run([shardc, "cat", d, str(i)], capture_output=True, check=True).stdout
    magic, dims, maxv, px = out.split(b"\n", 3)
    w, h = map(int, dims.split())
    return np.frombuffer(px, np.uint8).reshape(h, w, -1).astype(np.float64)
n = json.load(open(ex + "/manifest.json"))["samples"]
ps, same = [], 0
for i in range(n):
    a, b = cat(ex, i), cat(sh, i)
    mse = ((a - b) ** 2).mean()
    if mse == 0:
        same += 1
    else:
        ps.append(10 * np.log10(255.0 ** 2 / mse))
ps = np.array(ps)
print(f"  ..   {n} images: {same} identical, PSNR of the others min {ps.min():.1f}"
      f" median {np.median(ps):.1f} max {ps.max():.1f} dB" if len(ps) else f"  ..   all {n} identical")
ok = len(ps) >= n // 3 and (len(ps) == 0 or ps.min() >= 40.0)
sys.exit(0 if ok else 1)
PY
  check "shrink-on-load reduces a third of the decodes or more, each >= 40 dB from exact ($name)" [ $? -eq 0 ]
done
finish
