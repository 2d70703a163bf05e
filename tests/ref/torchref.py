"""What the torchvision reference scripts of tests/ref/ share: raw uint8 images in and out of
PIL, torch's float32 uniform_ reproduced exactly from one word of its generator, and a stand-in
for that generator fed the reader's 32-bit words in the order torch draws them, and the rows of
the draws file a test writes.

Imported by rrc_check.py, augment_check.py and affine_check.py (Python puts a script's folder
first on sys.path, so they find it beside them).
"""
from fractions import Fraction

import numpy as np
import torch
from PIL import Image


def load(path, w, h, c):
    """A raw h x w x c uint8 file as the PIL image torchvision's PIL path takes."""
    a = np.fromfile(path, dtype=np.uint8).reshape(h, w, c)
    return Image.fromarray(a[:, :, 0], "L") if c == 1 else Image.fromarray(a, "RGB")


def save(img, path):
    np.asarray(img, dtype=np.uint8).tofile(path)


def f32_round(fr):
    """The float32 nearest to the rational fr (ties to even): torch's fused multiply-add."""
    c = np.float32(float(fr))
    best = None
    for v in (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))):
        key = (abs(Fraction(float(v)) - fr), int(np.array(v).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, v)
    return best[1]


def torch_uniform(word, lo, hi):
    """torch's float32 Tensor.uniform_(lo, hi) for one 32-bit word of its generator: the 24-bit
    fraction x, then fma(x, hi - lo, lo) in float32 (one rounding)."""
    lo, hi = np.float32(lo), np.float32(hi)
    x = Fraction(int(word) & 0xFFFFFF, 1 << 24)
    return f32_round(x * Fraction(float(hi - lo)) + Fraction(float(lo)))


def draw_rows(d):
    """The rows of d/draws.tsv, the reader's draws a test wrote: (kind, the row's fields)."""
    for line in open(f"{d}/draws.tsv"):
        f = line.split()
        yield f[0], f


def words_of(hexes):
    """64-bit hex words as the 32-bit words torch's generator would give, low half first."""
    out = []
    for h in hexes:
        v = int(h, 16)
        out += [v & 0xFFFFFFFF, v >> 32]
    return out


class Words:
    """torch's generator, replaced by the reader's words in the order torch draws them: install
    its methods in place of torch.empty / torch.randint while a get_params runs."""

    def __init__(self, words):
        self.words, self.k = words, 0

    def next(self):
        w = self.words[self.k]
        self.k += 1
        return w

    def empty(self, *size, **kw):
        outer = self

        class Draw:
            def uniform_(self, lo, hi):
                v = torch_uniform(outer.next(), float(lo), float(hi))
                return torch.tensor([v], dtype=torch.float32)
        return Draw()

    def randint(self, *args, **kw):
        """torch.randint(low, high, size) and torch.randint(high, size)."""
        if len(args) >= 2 and isinstance(args[1], (tuple, list)):
            low, high = 0, args[0]
        else:
            low, high = args[0], args[1]
        return torch.tensor([self.next() % (high - low) + low])
