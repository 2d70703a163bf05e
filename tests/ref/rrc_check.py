#!/usr/bin/env python3
"""rrc_check.py - torchvision as the reference for libshardread's RandomResizedCrop.

Run by tests/test_transform.c (needs numpy, torch, torchvision and Pillow):

  rrc_check.py words DIR    DIR/draws.tsv holds draws made by shr_draw_params, with the words of
                            shr_mix behind each. torchvision's own RandomResizedCrop.get_params
                            and RandomHorizontalFlip run with torch's generator replaced by those
                            words (torch's float32 uniform_ reproduced exactly, and checked against
                            torch's generator first); every box and flip must be equal.
  rrc_check.py dist DIR     the same draws' boxes against torchvision's with torch's own
                            generator on the same image sizes: area fraction, log aspect ratio and
                            relative offsets must have the same distributions (two-sample
                            Kolmogorov-Smirnov distance), and the fallback rate must agree.
  rrc_check.py pixels DIR   DIR/samples.tsv lists samples delivered by the reader (stored image,
                            reported box and flip, delivered pixels as raw files); each must equal
                            F.resized_crop(stored, y, x, h, w, size, filter), mirrored by F.hflip
                            when flipped, byte for byte.

Exit status 0 when everything matches; 1 with a message naming the first difference.
"""
import math
import sys

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode

from torchref import torch_uniform

FILTERS = [InterpolationMode.NEAREST, InterpolationMode.BOX, InterpolationMode.BILINEAR,
           InterpolationMode.HAMMING, InterpolationMode.BICUBIC, InterpolationMode.LANCZOS]


def check_uniform_emulation():
    """torch_uniform against torch's own generator (MT19937: numpy's gives the same words)."""
    for seed, (lo, hi) in ((3, (0.08, 1.0)), (4, (-0.2876821, 0.2876821)), (5, (0.0, 1.0))):
        mt = np.random.MT19937()
        mt._legacy_seeding(seed)
        words = mt.random_raw(3000)
        torch.manual_seed(seed)
        got = [torch.empty(1).uniform_(lo, hi).item() for _ in range(3000)]
        for w, g in zip(words, got):
            want = float(torch_uniform(w, lo, hi))
            if want != g:
                fail(f"torch's uniform_({lo}, {hi}) gave {g!r} for word {int(w):#x}, the "
                     f"emulation {want!r}: the model of torch's arithmetic is wrong")


def fail(msg):
    print(f"rrc_check: {msg}", file=sys.stderr)
    sys.exit(1)


class Words:
    """Stands in for torch's generator inside get_params: attempt a uses words 4a..4a+3."""

    def __init__(self, words):
        self.words = words
        self.uniforms = 0
        self.ints = 0

    def empty(self, *size, **kw):
        outer = self

        class Draw:
            def uniform_(self, lo, hi):
                attempt, k = divmod(outer.uniforms, 2)
                outer.uniforms += 1
                outer.ints = 0
                v = torch_uniform(outer.words[4 * attempt + k], float(lo), float(hi))
                return torch.tensor([v], dtype=torch.float32)
        return Draw()

    def randint(self, low, high, size=None, **kw):
        attempt = (self.uniforms - 1) // 2
        w = self.words[4 * attempt + 2 + self.ints]
        self.ints += 1
        return torch.tensor([int(w) % (high - low) + low])


def read_draws(path):
    """Header 'seed scale0 scale1 ratio0 ratio1 flip_p' lines start a block ('#' first)."""
    blocks = []
    for line in open(path):
        f = line.split()
        if f[0] == "#":
            blocks.append({"opts": [float(v) for v in f[1:]], "draws": []})
            continue
        W, H, epoch, index, x, y, w, h, flip = (int(v) for v in f[:9])
        words = []
        for hexword in f[9:29]:
            v = int(hexword, 16)
            words += [v & 0xFFFFFFFF, v >> 32]
        blocks[-1]["draws"].append((W, H, x, y, w, h, flip, words, int(f[29], 16) & 0xFFFFFFFF))
    return blocks


def check_math(path):
    """The reader's float32 exp and log against torch.exp and torch.log, bit for bit."""
    rows = {"exp": ([], []), "log": ([], [])}
    for line in open(path):
        fn, x, y = line.split()
        rows[fn][0].append(float.fromhex(x))
        rows[fn][1].append(float.fromhex(y))
    for fn, op in (("exp", torch.exp), ("log", torch.log)):
        x = torch.tensor(rows[fn][0], dtype=torch.float32)
        want = op(x).numpy()
        got = np.array(rows[fn][1], dtype=np.float32)
        bad = np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))
        if len(bad):
            i = bad[0]
            fail(f"torch.{fn}({float(x[i])!r}) is {float(want[i])!r}, the reader's "
                 f"{float(got[i])!r} ({len(bad)} of {len(got)} differ)")
    print(f"rrc_check: float32 exp and log equal torch's on {len(rows['exp'][0])} values each")


def cmd_words(d):
    check_uniform_emulation()
    check_math(f"{d}/math.tsv")
    real_empty, real_randint, real_rand = torch.empty, torch.randint, torch.rand
    n = 0
    try:
        for block in read_draws(f"{d}/draws.tsv"):
            _, s0, s1, r0, r1, p = block["opts"]
            flipper = T.RandomHorizontalFlip(p)
            for W, H, x, y, w, h, flip, words, flipword in block["draws"]:
                img = Image.new("L", (W, H))
                gen = Words(words)
                torch.empty, torch.randint = gen.empty, gen.randint
                i, j, hh, ww = T.RandomResizedCrop.get_params(img, [s0, s1], [r0, r1])
                torch.empty, torch.randint = real_empty, real_randint
                torch.rand = lambda *a, **k: torch.tensor([np.float32((flipword & 0xFFFFFF) / 2**24)])
                marker = Image.new("L", (2, 1))
                marker.putpixel((0, 0), 255)
                flipped = flipper(marker).getpixel((0, 0)) == 0
                torch.rand = real_rand
                if (j, i, ww, hh, int(flipped)) != (x, y, w, h, flip):
                    fail(f"{W}x{H}, scale {s0}:{s1} ratio {r0}:{r1}: torchvision draws box "
                         f"x {j} y {i} w {ww} h {hh} flip {int(flipped)} from the words, the reader "
                         f"x {x} y {y} w {w} h {h} flip {flip}")
                n += 1
    finally:
        torch.empty, torch.randint, torch.rand = real_empty, real_randint, real_rand
    print(f"rrc_check: {n} draws equal torchvision's get_params and flip on the same words")


def ks(a, b):
    a, b = np.sort(np.asarray(a)), np.sort(np.asarray(b))
    grid = np.concatenate([a, b])
    return np.max(np.abs(np.searchsorted(a, grid, side="right") / len(a) -
                         np.searchsorted(b, grid, side="right") / len(b)))


def features(W, H, x, y, w, h):
    return (w * h / (W * H), math.log(w / h), x / (W - w) if W > w else None,
            y / (H - h) if H > h else None)


def cmd_dist(d):
    torch.manual_seed(0)
    for block in read_draws(f"{d}/draws.tsv"):
        _, s0, s1, r0, r1, _ = block["opts"]
        ours, theirs = [], []
        for W, H, x, y, w, h, _, _, _ in block["draws"]:
            ours.append(features(W, H, x, y, w, h))
            i, j, hh, ww = T.RandomResizedCrop.get_params(Image.new("L", (W, H)), [s0, s1], [r0, r1])
            theirs.append(features(W, H, j, i, ww, hh))
        n = len(ours)
        # two samples of n from one distribution: KS distance above 1.95 sqrt(2/n) has
        # probability 0.001
        limit = 1.95 * math.sqrt(2 / n)
        for k, name in enumerate(("area fraction", "log aspect ratio", "x offset", "y offset")):
            a = [f[k] for f in ours if f[k] is not None]
            b = [f[k] for f in theirs if f[k] is not None]
            dist = ks(a, b)
            if dist > 1.95 * math.sqrt(1 / len(a) + 1 / len(b)):
                fail(f"scale {s0}:{s1} ratio {r0}:{r1}: {name} distribution differs from "
                     f"torchvision's (KS distance {dist:.4f} over {len(a)} and {len(b)} draws)")
        print(f"rrc_check: {n} draws (scale {s0}:{s1}, ratio {r0}:{r1}) distributed as "
              f"torchvision's (KS limit {limit:.4f})")


def cmd_pixels(d):
    n = 0
    for line in open(f"{d}/samples.tsv"):
        stored, W, H, C, x, y, w, h, flip, ow, oh, filt, out = line.split()
        W, H, C, x, y, w, h, flip, ow, oh, filt = (int(v) for v in (W, H, C, x, y, w, h, flip,
                                                                       ow, oh, filt))
        raw = open(stored, "rb").read()
        img = Image.frombytes("RGB" if C == 3 else "L", (W, H), raw)
        want = F.resized_crop(img, y, x, h, w, [oh, ow], FILTERS[filt])
        if flip:
            want = F.hflip(want)
        want = np.asarray(want).reshape(oh, ow, C)
        got = np.frombuffer(open(out, "rb").read(), dtype=np.uint8).reshape(oh, ow, C)
        if not np.array_equal(want, got):
            diff = np.argwhere(want != got)[0]
            fail(f"{out}: stored {W}x{H}, box x {x} y {y} w {w} h {h} flip {flip} -> {ow}x{oh} "
                 f"{FILTERS[filt].value}: differs from torchvision at (row, col, ch) "
                 f"{tuple(diff)}: {got[tuple(diff)]} vs {want[tuple(diff)]} "
                 f"({int((want != got).sum())} values differ)")
        n += 1
    print(f"rrc_check: {n} samples equal torchvision's resized_crop (+hflip) byte for byte")


if __name__ == "__main__":
    {"words": cmd_words, "dist": cmd_dist, "pixels": cmd_pixels}[sys.argv[1]](sys.argv[2])
