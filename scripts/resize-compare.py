"""The resampler against Pillow's Image.resize, per image: runs the C half, times Pillow on the
same decoded images (Resize(SIZE) as torchvision computes it, bilinear), checks the bytes, and
prints a markdown table. Called by scripts/resize-compare.sh.

    resize-compare.py TOOL OUTDIR REPS SIZE FILE...
"""
import statistics
import subprocess
import sys
import time

from PIL import Image

tool, outdir, reps, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
files = sys.argv[5:]
res = subprocess.run([tool, outdir, str(reps), str(size)] + files, capture_output=True,
                     text=True, check=True).stdout.split("\n")
path = [l for l in res if l.startswith("path ")][0].split()[1]
rows = [l.split() for l in res if l and not l.startswith("path ")]
pil, first, simd, plain, same = [], [], [], [], 0
for r in rows:
    i, w, h, nw, nh = map(int, r[:5])
    im = Image.open(files[i]).convert("RGB")
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = im.resize((nw, nh), Image.Resampling.BILINEAR)
        ts.append((time.perf_counter() - t0) * 1e3)
    pil.append(statistics.median(ts))
    first.append(float(r[5]))
    simd.append(float(r[6]))
    plain.append(float(r[7]))
    with open(f"{outdir}/{i}.rgb", "rb") as f:
        same += f.read() == out.tobytes()
med = statistics.median
n = len(rows)
print(f"{n} images, {len(set((int(r[1]), int(r[2])) for r in rows))} distinct sizes, "
      f"Resize({size}) bilinear, medians over images of per-image medians of {reps} runs")
print()
print("| resize | ms per image | vs Pillow |")
print("|---|---:|---:|")
print(f"| Pillow 9.4 Image.resize | {med(pil):.3f} | 1.00x |")
print(f"| fmt_resample, {path} | {med(simd):.3f} | {med(pil) / med(simd):.2f}x |")
print(f"| fmt_resample, plain C | {med(plain):.3f} | {med(pil) / med(plain):.2f}x |")
print(f"| fmt_resample, first call (tables built, {path}) | {med(first):.3f} | "
      f"{med(pil) / med(first):.2f}x |")
print()
print(f"byte-identical to Pillow: {same} of {n}")
sys.exit(0 if same == n else 1)
