#!/usr/bin/env python3
"""Driver of scripts/shrink-compare.sh: runs the shrink-compare program on JPEG files for several
FMT_FIT_CROP output sizes and prints two markdown tables.

Speed and quality: per method the DCT scales used, the median (over files) of the per-file median
decode and decode+resize times, and the PSNR of the result against Pillow's LANCZOS resize of the
full-size decode over the same crop box.

Where a reduced decode loses quality (methods that did reduce): the reduced decode itself against
Pillow LANCZOS of the full decode to the same size; the method's result (integer box from
fmt_geom_plan_decoded, fmt_resize); the reduced decode resized by Pillow LANCZOS over the exact
fractional box (crop box times k/8); and the same two boxes applied to an ideal reduced decode
(Pillow LANCZOS of the full decode to the decoded size).

    shrink-compare.py BIN WORKDIR RUNS SIZES FILE...      SIZES e.g. 224x224,160x160,128x128
"""
import collections
import math
import os
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image

METHODS = [("full", "full decode + fmt_resize"),
           ("pow2", "1/2, 1/4, 1/8 only + fmt_resize (shardc today)"),
           ("eighths", "smallest k/8 covering + fmt_resize")]
PARTS = ["decode vs ideal", "result", "decode, exact box", "ideal, plan box", "ideal, exact box"]


def crop_box(sw, sh, w, h):
    """Largest centred box of aspect w/h, offsets rounded down (geometry.h FMT_FIT_CROP)."""
    if sw * h >= sh * w:
        cw = max(1, min(sw, (2 * sh * w + h) // (2 * h)))
        x = (sw - cw) // 2
        return (x, 0, x + cw, sh)
    ch = max(1, min(sh, (2 * sw * h + w) // (2 * w)))
    y = (sh - ch) // 2
    return (0, y, sw, y + ch)


def sq_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.sum((a - b) ** 2)), a.size


def psnr(se, n):
    if se == 0:
        return float("inf")
    return 10 * math.log10(255.0 ** 2 * n / se)


def med(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main():
    binary, work, runs, sizes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    files = sys.argv[5:]
    srcs = [Image.open(f).convert("RGB") for f in files]   # libjpeg's defaults, as shardc
    rows, parts = [], []
    for size in sizes.split(","):
        w, h = (int(v) for v in size.split("x"))
        out = os.path.join(work, size)
        os.makedirs(out, exist_ok=True)
        lines = subprocess.run([binary, str(w), str(h), runs, out] + files, check=True,
                               capture_output=True, text=True).stdout.split("\n")
        res = collections.defaultdict(lambda: {"dec": [], "dr": [], "new": [], "scales": [],
                                               "se": 0.0, "n": 0, "worst": float("inf")})
        part = collections.defaultdict(lambda: [0.0, 0])
        refs = {}
        for line in lines:
            if not line.strip():
                continue
            f = line.split()
            m, idx, dw, dh, bx, by, bw, bh = f[0], *(int(v) for v in f[1:8])
            t_dec, t_dr, t_new = (float(v) for v in f[8:11])
            src = srcs[idx]
            box = crop_box(src.width, src.height, w, h)
            if idx not in refs:
                refs[idx] = src.resize((w, h), Image.LANCZOS, box=box)
            got = Image.open(os.path.join(out, m, f"{idx}.ppm"))
            se, n = sq_err(got, refs[idx])
            k = round(8 * dw / src.width)
            r = res[m]
            r["dec"].append(t_dec)
            r["dr"].append(t_dr)
            r["new"].append(t_new)
            r["scales"].append(k)
            r["se"] += se
            r["n"] += n
            r["worst"] = min(r["worst"], psnr(se, n))
            if dw == src.width:
                continue
            dec = Image.open(os.path.join(out, m, f"{idx}-dec.ppm"))
            ideal = src.resize((dw, dh), Image.LANCZOS)
            plan_box = (bx, by, bx + bw, by + bh)
            # a k/8 output pixel spans 8/k source pixels; the ideal image spans src/dec each
            exact = tuple(v * k / 8 for v in box)
            sx, sy = dw / src.width, dh / src.height
            ideal_exact = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
            for name, a, b in (
                    ("decode vs ideal", dec, ideal),
                    ("result", got, refs[idx]),
                    ("decode, exact box", dec.resize((w, h), Image.LANCZOS, box=exact), refs[idx]),
                    ("ideal, plan box", ideal.resize((w, h), Image.LANCZOS, box=plan_box),
                     refs[idx]),
                    ("ideal, exact box", ideal.resize((w, h), Image.LANCZOS, box=ideal_exact),
                     refs[idx])):
                e = sq_err(a, b)
                part[(m, name)][0] += e[0]
                part[(m, name)][1] += e[1]
        shutil.rmtree(out)
        base = med(res["full"]["dr"])
        base_new = med(res["full"]["new"])
        for m, label in METHODS:
            r = res[m]
            counts = collections.Counter(r["scales"])
            scales = ", ".join(f"{k}/8" for k in sorted(counts))
            rows.append((f"{w}x{h}", label, scales, med(r["dec"]), med(r["dr"]),
                         base / med(r["dr"]), med(r["new"]), base_new / med(r["new"]),
                         psnr(r["se"], r["n"]), r["worst"]))
            if (m, "result") in part:
                parts.append((f"{w}x{h}", m, scales,
                              [psnr(*part[(m, name)]) for name in PARTS]))
    print(f"{len(files)} files, RUNS = {runs}, one thread; ms are medians over the files of "
          "the per-file median\n")
    print("| crop | method | DCT scales | decode ms | decode+resize ms | speed-up | "
          "+ new context ms | speed-up | PSNR dB | worst file dB |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.2f}x | "
              f"{r[6]:.3f} | {r[7]:.2f}x | {r[8]:.2f} | {r[9]:.2f} |")
    print("\nWhere a reduced decode loses quality (PSNR dB; 'ideal' = Pillow LANCZOS of the "
          "full decode to the decoded size):\n")
    print("| crop | method | DCT scales | decode vs ideal | result (plan box, fmt_resize) | "
          "decode, exact box | ideal, plan box | ideal, exact box |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for c, m, scales, v in parts:
        print(f"| {c} | {m} | {scales} | " + " | ".join(f"{x:.2f}" for x in v) + " |")


if __name__ == "__main__":
    main()
