"""torchvision 0.14 and Pillow as the reference for the reader's augmentations.

  check.py hsv DIR      Pillow's RGB -> HSV of every colour into DIR/rgb2hsv.bin, and its
                        HSV -> RGB of every HSV triple into DIR/hsv2rgb.bin (4096 x 4096 x 3)
  check.py ops DIR      DIR/ops.tsv: op factor width height channels in out; applies the
                        torchvision functional op to the raw uint8 image `in`, writes `out`
  check.py draws DIR    DIR/draws.tsv: the reader's draws with the words behind them; each must
                        equal torchvision's get_params fed the same words
  check.py reader DIR   DIR/samples.tsv: stored sample, reported parameters; writes what
                        torchvision's pipeline makes of it
"""
import sys

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

import torchref
from torchref import load, save, words_of


def fail(msg):
    print(f"augment_check: {msg}", file=sys.stderr)
    sys.exit(1)


def apply(img, op, f):
    if op == "brightness":
        return F.adjust_brightness(img, f)
    if op == "contrast":
        return F.adjust_contrast(img, f)
    if op == "saturation":
        return F.adjust_saturation(img, f)
    if op == "hue":
        return F.adjust_hue(img, f)
    if op == "gray":
        return F.rgb_to_grayscale(img, len(img.getbands()))
    fail(f"unknown op {op}")


def cmd_hsv(d):
    v = np.arange(1 << 24, dtype=np.uint32)
    a = np.stack([(v >> 16) & 255, (v >> 8) & 255, v & 255], axis=-1).astype(np.uint8)
    a = a.reshape(4096, 4096, 3)
    np.asarray(Image.fromarray(a, "RGB").convert("HSV")).tofile(f"{d}/rgb2hsv.bin")
    np.asarray(Image.frombytes("HSV", (4096, 4096), a.tobytes()).convert("RGB")).tofile(
        f"{d}/hsv2rgb.bin")


def cmd_ops(d):
    for line in open(f"{d}/ops.tsv"):
        op, f, w, h, c, src, dst = line.split()
        img = apply(load(src, int(w), int(h), int(c)), op, float.fromhex(f))
        save(img, dst)


class Words(torchref.Words):
    """The shared stand-in, plus the draws ColorJitter and RandomGrayscale make."""

    def randperm(self, n, **kw):
        r = list(range(n))
        for i in range(n - 1):
            z = self.next() % (n - i)
            r[i], r[i + z] = r[i + z], r[i]
        return torch.tensor(r)

    def rand(self, *size, **kw):
        return torch.tensor([np.float32((self.next() & 0xFFFFFF) / 2**24)])


def f32hex(v):
    return float(np.float32(v)).hex()


def cmd_draws(d):
    real = torch.randperm, torch.empty, torch.rand, torch.randint
    n = 0
    try:
        for kind, f in torchref.draw_rows(d):
            if kind == "jitter":
                b0, b1, c0, c1, s0, s1, h0, h1 = (float(v) for v in f[1:9])
                order = [int(v) for v in f[9:13]]
                mask = int(f[13])
                fac = [float.fromhex(v) for v in f[14:18]]
                g = Words(words_of(f[18:]))
                cj = T.ColorJitter((b0, b1), (c0, c1), (s0, s1), (h0, h1))
                torch.randperm, torch.empty = g.randperm, g.empty
                idx, b, c, s, h = cj.get_params(cj.brightness, cj.contrast, cj.saturation, cj.hue)
                torch.randperm, torch.empty = real[0], real[1]
                want_mask = sum(1 << k for k, v in enumerate((b, c, s, h)) if v is not None)
                want_fac = [b if b is not None else 1.0, c if c is not None else 1.0,
                            s if s is not None else 1.0, h if h is not None else 0.0]
                if idx.tolist() != order or want_mask != mask or want_fac != fac:
                    fail(f"ColorJitter draws: torchvision {idx.tolist()} {want_mask} {want_fac}, "
                         f"the reader {order} {mask} {fac}")
            elif kind == "gray":
                p, got = float(f[1]), int(f[2])
                g = Words(words_of(f[3:]))
                torch.rand = g.rand
                marker = Image.new("RGB", (1, 1), (255, 0, 0))
                want = int(T.RandomGrayscale(p)(marker).getpixel((0, 0))[1] != 0)
                torch.rand = real[2]
                if want != got:
                    fail(f"RandomGrayscale({p}): torchvision {want}, the reader {got}")
            elif kind == "erase":
                p, s0, s1, r0, r1 = (float(v) for v in f[1:6])
                W, H, e, x, y, w, h = (int(v) for v in f[6:13])
                g = Words(words_of(f[13:]))
                torch.rand, torch.empty, torch.randint = g.rand, g.empty, g.randint
                img = torch.full((3, H, W), 1.0)
                out = T.RandomErasing(p, (s0, s1), (r0, r1), value=0)(img)
                torch.rand, torch.empty, torch.randint = real[2], real[1], real[3]
                zero = (out == 0).all(0).nonzero()
                if len(zero):
                    wy, wx = int(zero[:, 0].min()), int(zero[:, 1].min())
                    wh, ww = int(zero[:, 0].max()) - wy + 1, int(zero[:, 1].max()) - wx + 1
                    want = (1, wx, wy, ww, wh)
                else:
                    want = (0, 0, 0, 0, 0)
                if (e, x, y, w, h) != want and not (e == 1 and (w == 0 or h == 0) and want[0] == 0):
                    fail(f"RandomErasing on {W}x{H} ({' '.join(f)}): torchvision {want}, the reader "
                         f"{(e, x, y, w, h)}")
            n += 1
    finally:
        torch.randperm, torch.empty, torch.rand, torch.randint = real
    print(f"augment_check: {n} draws equal torchvision's", file=sys.stderr)


FILTERS = [T.InterpolationMode.NEAREST, T.InterpolationMode.BOX, T.InterpolationMode.BILINEAR,
           T.InterpolationMode.HAMMING, T.InterpolationMode.BICUBIC, T.InterpolationMode.LANCZOS]


def cmd_reader(d):
    """Each line: stored W H C filter outW outH x y w h flip jitter o0 o1 o2 o3 b c s hue gray
    erase ex ey ew eh in out; out receives torchvision's uint8 result (erased with 0)."""
    for line in open(f"{d}/samples.tsv"):
        f = line.split()
        W, H, C, filt, ow, oh, x, y, w, h, flip, jit = (int(v) for v in f[:12])
        order = [int(v) for v in f[12:16]]
        fac = [float.fromhex(v) for v in f[16:20]]
        gray, erase, ex, ey, ew, eh = (int(v) for v in f[20:26])
        src, dst = f[26], f[27]
        img = load(src, W, H, C)
        img = F.resized_crop(img, y, x, h, w, [oh, ow], FILTERS[filt])
        if flip:
            img = F.hflip(img)
        names = ["brightness", "contrast", "saturation", "hue"]
        for k in order:
            if jit & (1 << k):
                img = apply(img, names[k], fac[k])
        if gray:
            img = apply(img, "gray", 0)
        t = F.pil_to_tensor(img)
        if erase:
            t = F.erase(t, ey, ex, eh, ew, torch.tensor([0], dtype=torch.uint8)[:, None, None])
        t.permute(1, 2, 0).contiguous().numpy().tofile(dst)


if __name__ == "__main__":
    {"hsv": cmd_hsv, "ops": cmd_ops, "draws": cmd_draws, "reader": cmd_reader}[sys.argv[1]](sys.argv[2])
