#!/usr/bin/env python3
"""The conversion shardc replaces, as it is usually written in Python: Pillow decode, then
torchvision's Resize(SIZE) + CenterCrop(SIZE) arithmetic (bilinear; the pixels shardc build
--size SIZExSIZE stores), store the uint8 pixels in an HDF5 dataset with h5py (or a numpy memmap
where h5py is missing). One thread. Prints images/s.

    pillow-convert.py SRC OUT SIZE
"""
import os
import sys
import time

import numpy as np
from PIL import Image

src, out, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
paths = []
for root, dirs, files in os.walk(src):
    dirs.sort()
    paths += [os.path.join(root, f) for f in sorted(files)]
try:
    import h5py
    f = h5py.File(out, "w")
    data = f.create_dataset("images", (len(paths), size, size, 3), dtype="uint8")
except ImportError:
    f = None
    data = np.lib.format.open_memmap(out, mode="w+", dtype="uint8", shape=(len(paths), size, size, 3))
t0 = time.perf_counter()
n = 0
for p in paths:
    try:
        im = Image.open(p).convert("RGB")
    except Exception:
        continue
    w, h = im.size
    if w <= h:
        nw, nh = size, int(size * h / w)
    else:
        nw, nh = int(size * w / h), size
    im = im.resize((nw, nh), Image.BILINEAR)
    x, y = int(round((nw - size) / 2.0)), int(round((nh - size) / 2.0))
    data[n] = np.asarray(im.crop((x, y, x + size, y + size)))
    n += 1
if f is not None:
    f.close()
else:
    data.flush()
dt = time.perf_counter() - t0
os.remove(out)
print(f"{n / dt:.1f}")
