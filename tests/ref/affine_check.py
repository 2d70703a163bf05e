"""torchvision 0.14 and Pillow as the reference for the reader's geometric and automatic
augmentations.

  check.py ops DIR      DIR/ops.tsv: w h c in out op args...; applies torchvision's functional op
                        (F.affine, F.rotate, or autoaugment._apply_op) to the raw uint8 image
  check.py draws DIR    DIR/draws.tsv: the reader's draws with the words behind them; each must
                        equal torchvision's get_params (or forward's draws) fed the same words
  check.py reader DIR   DIR/samples.tsv: stored sample and reported parameters; writes what
                        torchvision's pipeline makes of it
"""
import sys

import torch
import torchvision.transforms as T
import torchvision.transforms.autoaugment as A
import torchvision.transforms.functional as F
from PIL import Image

from torchref import Words, draw_rows, load, save, words_of

MODES = [T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR]
OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
       "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"]
FILTERS = [T.InterpolationMode.NEAREST, T.InterpolationMode.BOX, T.InterpolationMode.BILINEAR,
           T.InterpolationMode.HAMMING, T.InterpolationMode.BICUBIC, T.InterpolationMode.LANCZOS]


def fail(msg):
    print(f"affine_check: {msg}", file=sys.stderr)
    sys.exit(1)


def fill_of(c, fill):
    return fill[0] if c == 1 else list(fill[:3])


def cmd_ops(d):
    for line in open(f"{d}/ops.tsv"):
        f = line.split()
        w, h, c = int(f[0]), int(f[1]), int(f[2])
        src, dst, op = f[3], f[4], f[5]
        img = load(src, w, h, c)
        if op == "affine":
            angle, tx, ty, scale, shx, shy = (float.fromhex(v) for v in f[6:12])
            mode = MODES[int(f[12])]
            fill = fill_of(c, [int(v) for v in f[13:16]])
            center = None if f[16] == "none" else [float.fromhex(f[16]), float.fromhex(f[17])]
            img = F.affine(img, angle, [int(tx), int(ty)], scale, [shx, shy], mode, fill, center)
        elif op == "rotate":
            angle = float.fromhex(f[6])
            mode = MODES[int(f[7])]
            fill = fill_of(c, [int(v) for v in f[8:11]])
            img = F.rotate(img, angle, mode, fill=fill)
        elif op == "aa":
            name, mag = OPS[int(f[6])], float.fromhex(f[7])
            mode = MODES[int(f[8])]
            fill = fill_of(c, [int(v) for v in f[9:12]])
            img = A._apply_op(img, name, mag, interpolation=mode, fill=fill)
        else:
            fail(f"unknown op {op}")
        save(img, dst)


def none_if(v, ident):
    return None if v == ident else v


def cmd_draws(d):
    real = torch.empty, torch.randint, A._apply_op
    n = 0
    try:
        for kind, f in draw_rows(d):
            if kind == "rotate":
                d0, d1 = float(f[1]), float(f[2])
                got = float.fromhex(f[3])
                g = Words(words_of(f[4:]))
                torch.empty = g.empty
                want = T.RandomRotation((d0, d1)).get_params([d0, d1])
                torch.empty = real[0]
                if want != got:
                    fail(f"RandomRotation({d0}, {d1}): torchvision {want}, the reader {got}")
            elif kind == "affine":
                v = [float(x) for x in f[1:11]]
                W, H = int(f[11]), int(f[12])
                got = (float.fromhex(f[13]), (int(f[14]), int(f[15])), float.fromhex(f[16]),
                       (float.fromhex(f[17]), float.fromhex(f[18])))
                translate = none_if((v[2], v[3]), (0.0, 0.0))
                scale = none_if((v[4], v[5]), (1.0, 1.0))
                shear = None
                if v[6:10] != [0.0] * 4:
                    shear = v[6:8] if v[8:10] == [0.0, 0.0] else v[6:10]
                ra = T.RandomAffine((v[0], v[1]), translate, scale, shear)
                g = Words(words_of(f[19:]))
                torch.empty = g.empty
                want = ra.get_params(ra.degrees, ra.translate, ra.scale, ra.shear, [W, H])
                torch.empty = real[0]
                if want != got:
                    fail(f"RandomAffine {v} on {W}x{H}: torchvision {want}, the reader {got}")
            elif kind in ("ta", "ra"):
                bins, num_ops, mag = int(f[1]), int(f[2]), int(f[3])
                W, H = int(f[4]), int(f[5])
                k = int(f[6])
                got = [(OPS[int(f[7 + 2 * i])], float.fromhex(f[8 + 2 * i])) for i in range(k)]
                g = Words(words_of(f[7 + 2 * k:]))
                seen = []

                def record(img, op, m, interpolation, fill):
                    seen.append((op, m))
                    return img
                torch.randint, A._apply_op = g.randint, record
                img = Image.new("RGB", (W, H))
                if kind == "ta":
                    T.TrivialAugmentWide(num_magnitude_bins=bins)(img)
                else:
                    T.RandAugment(num_ops=num_ops, magnitude=mag, num_magnitude_bins=bins)(img)
                torch.randint, A._apply_op = real[1], real[2]
                if seen != got:
                    fail(f"{kind} bins {bins} on {W}x{H}: torchvision {seen}, the reader {got}")
            else:
                fail(f"unknown draw {kind}")
            n += 1
    finally:
        torch.empty, torch.randint, A._apply_op = real
    print(f"affine_check: {n} draws equal torchvision's", file=sys.stderr)


def cmd_reader(d):
    """Each line: stored W H C filter outW outH x y w h flip interp f0 f1 f2 rotate angle affine
    angle tx ty scale shx shy naa (op mag) x naa jitter o0 o1 o2 o3 b c s hue gray in out."""
    for line in open(f"{d}/samples.tsv"):
        f = line.split()
        W, H, C, filt, ow, oh, x, y, w, h, flip, interp = (int(v) for v in f[:12])
        fill = fill_of(C, [int(v) for v in f[12:15]])
        mode = MODES[interp]
        i = 15
        img = load(f[-2], W, H, C)
        img = F.resized_crop(img, y, x, h, w, [oh, ow], FILTERS[filt])
        if flip:
            img = F.hflip(img)
        if int(f[i]):
            img = F.rotate(img, float.fromhex(f[i + 1]), mode, fill=fill)
        i += 2
        if int(f[i]):
            angle, tx, ty, sc, shx, shy = (float.fromhex(f[i + 1]), int(f[i + 2]), int(f[i + 3]),
                                           float.fromhex(f[i + 4]), float.fromhex(f[i + 5]),
                                           float.fromhex(f[i + 6]))
            img = F.affine(img, angle, [tx, ty], sc, [shx, shy], mode, fill)
        i += 7
        k = int(f[i])
        for j in range(k):
            img = A._apply_op(img, OPS[int(f[i + 1 + 2 * j])], float.fromhex(f[i + 2 + 2 * j]),
                              interpolation=mode, fill=fill)
        i += 1 + 2 * k
        jit = int(f[i])
        order = [int(v) for v in f[i + 1:i + 5]]
        fac = [float.fromhex(v) for v in f[i + 5:i + 9]]
        fns = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue]
        for o in order:
            if jit & (1 << o):
                img = fns[o](img, fac[o])
        if int(f[i + 9]):
            img = F.rgb_to_grayscale(img, len(img.getbands()))
        save(img, f[-1])


if __name__ == "__main__":
    {"ops": cmd_ops, "draws": cmd_draws, "reader": cmd_reader}[sys.argv[1]](sys.argv[2])
