#!/usr/bin/env python3
"""The decode floor as Python sees it: Image.open(p).load() (full-size decode, nothing else) over
every file under SRC, one thread, files already in the page cache. Prints images/s.

    pillow-decode.py SRC
"""
import os
import sys
import time

from PIL import Image

paths = []
for root, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    paths += [os.path.join(root, f) for f in sorted(files)]
t0 = time.perf_counter()
n = 0
for p in paths:
    try:
        with Image.open(p) as im:
            im.load()
        n += 1
    except Exception:
        pass
print(f"{n / (time.perf_counter() - t0):.1f}")
