"""Reference resizes for the resampler's differential test (tests/test_resample.c).

usage: pil_resize.py CASES
Each line of CASES: IN W H MODE FILTER DW DH BOX OUT, where IN holds W x H pixels of MODE
("L" or "RGB") packed, FILTER is a Pillow filter name, BOX is "-" (no box) or X0,Y0,X1,Y1; the
result of Image.resize((DW, DH), FILTER, box) is written to OUT.
"""
import sys

from PIL import Image

FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "box": Image.Resampling.BOX,
    "bilinear": Image.Resampling.BILINEAR,
    "hamming": Image.Resampling.HAMMING,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
}

with open(sys.argv[1]) as cases:
    for line in cases:
        src, w, h, mode, filt, dw, dh, box, out = line.split()
        with open(src, "rb") as f:
            im = Image.frombytes(mode, (int(w), int(h)), f.read())
        b = None if box == "-" else tuple(float(v) for v in box.split(","))
        res = im.resize((int(dw), int(dh)), FILTERS[filt], box=b)
        with open(out, "wb") as f:
            f.write(res.tobytes())
