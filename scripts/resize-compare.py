#!/usr/bin/env python3
"""Driver of scripts/resize-compare.sh: synthesises photo-like test images, runs every resize
method of the resize-compare program on ImageNet-like downscales, and prints a markdown table of
the median time per resize and the PSNR against Pillow's antialiased LANCZOS resize of the same
source box.

    resize-compare.py BIN WORKDIR [RUNS]
"""
import math
import os
import random
import subprocess
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def photo_like(w, h, seed, gray=False):
    """Smooth illumination, mid-frequency texture, blurred-but-sharp object edges, a fine
    grating (fabric/foliage stand-in: what exposes aliasing) and sensor noise."""
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    # low frequency: a 6x5 random grid upsampled bicubically
    base = Image.fromarray(rng.integers(40, 215, (5, 6, 3), dtype=np.uint8), "RGB")
    img = base.resize((w, h), Image.BICUBIC)
    arr = np.asarray(img).astype(np.float32)
    # mid frequency texture
    tex = Image.fromarray(rng.integers(0, 255, (h // 8 + 1, w // 8 + 1), dtype=np.uint8), "L")
    tex = np.asarray(tex.resize((w, h), Image.BICUBIC)).astype(np.float32)
    arr += (tex[:, :, None] - 128) * 0.25
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(14):
        x0, y0 = rnd.randrange(w), rnd.randrange(h)
        x1, y1 = x0 + rnd.randrange(10, w // 2), y0 + rnd.randrange(10, h // 2)
        col = tuple(rnd.randrange(256) for _ in range(3))
        kind = rnd.randrange(3)
        if kind == 0:
            draw.ellipse((x0, y0, x1, y1), fill=col)
        elif kind == 1:
            draw.polygon([(x0, y0), (x1, y0 + rnd.randrange(h // 3)),
                          (x0 + rnd.randrange(w // 3), y1)], fill=col)
        else:
            draw.line((x0, y0, x1, y1), fill=col, width=rnd.randrange(1, 6))
    img = img.filter(ImageFilter.GaussianBlur(0.8))   # lens softness
    arr = np.asarray(img).astype(np.float32)
    # a fine grating in one quadrant, period 2.5..4 px
    yy, xx = np.mgrid[0:h, 0:w]
    period = rnd.uniform(2.5, 4.0)
    grating = 40 * np.sin(2 * math.pi * (xx * 0.8 + yy * 0.6) / period)
    mask = (xx > w // 2) & (yy > h // 2)
    arr += (grating * mask)[:, :, None]
    arr += rng.normal(0, 4, arr.shape)                 # sensor noise
    out = Image.fromarray(np.clip(arr + 0.5, 0, 255).astype(np.uint8), "RGB")
    return out.convert("L") if gray else out


PILLOW = "pillow-lanczos (the reference)"


def crop_box(sw, sh, w, h):
    """Largest centered box of aspect w/h, offsets rounded down (geometry.h FMT_FIT_CROP)."""
    if sw * h >= sh * w:
        cw = max(1, min(sw, (2 * sh * w + h) // (2 * h)))
        return ((sw - cw) // 2, 0, cw, sh)
    ch = max(1, min(sh, (2 * sw * h + w) // (2 * w)))
    return (0, (sh - ch) // 2, sw, ch)


def main():
    binary, work = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    methods = subprocess.run([binary, "list"], check=True, capture_output=True,
                             text=True).stdout.split()
    # (label, source size, gray, box, output size)
    cases = [
        ("500x375 -> 224x224 crop", (500, 375), False, crop_box(500, 375, 224, 224), (224, 224)),
        ("375x500 -> 224x224 crop", (375, 500), False, crop_box(375, 500, 224, 224), (224, 224)),
        ("1024x768 -> short 256", (1024, 768), False, (0, 0, 1024, 768), (341, 256)),
        ("2000x1500 -> 224x224 crop", (2000, 1500), False, crop_box(2000, 1500, 224, 224),
         (224, 224)),
        ("500x375 gray -> 224x224 crop", (500, 375), True, crop_box(500, 375, 224, 224),
         (224, 224)),
    ]
    seeds = [1, 2, 3]
    results = {}   # (case, method) -> (ms list, init list, squared error sum, count)
    for label, (sw, sh), gray, box, (ow, oh) in cases:
        for seed in seeds:
            img = photo_like(sw, sh, seed, gray)
            src = os.path.join(work, "src.pnm")
            img.save(src)
            x, y, bw, bh = box
            pbox = (x, y, x + bw, y + bh)
            ref = np.asarray(img.resize((ow, oh), Image.LANCZOS, box=pbox), dtype=np.float64)
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                img.resize((ow, oh), Image.LANCZOS, box=pbox)
                times.append((time.perf_counter() - t0) * 1e3)
            r = results.setdefault((label, PILLOW), [[], [], 0.0, 1])
            r[0].append(sorted(times)[runs // 2])
            r[1].append(0.0)
            for m in methods:
                out = os.path.join(work, "out.pnm")
                line = subprocess.run([binary, m, src, str(x), str(y), str(bw), str(bh), str(ow),
                                       str(oh), out, str(runs)], check=True,
                                      capture_output=True, text=True).stdout.split()
                got = np.asarray(Image.open(out), dtype=np.float64)
                r = results.setdefault((label, m), [[], [], 0.0, 0])
                r[0].append(float(line[1]))
                r[1].append(float(line[3]))
                r[2] += float(np.sum((got - ref) ** 2))
                r[3] += got.size
    print("| case | method | ms median | + context ms | PSNR dB vs Pillow LANCZOS |")
    print("|---|---|---:|---:|---:|")
    for label, *_ in cases:
        for m in [PILLOW] + methods:
            ms, init, se, n = results[(label, m)]
            med = sorted(ms)[len(ms) // 2]
            if m == PILLOW:
                print(f"| {label} | {m} | {med:.3f} | - | - |")
                continue
            mse = se / n
            p = float("inf") if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)
            print(f"| {label} | {m} | {med:.3f} | {sorted(init)[len(init) // 2]:.3f} | {p:.2f} |")


if __name__ == "__main__":
    main()
