#!/usr/bin/env python3
"""Detection input pipelines per core: torchvision's CocoDetection logic (PIL decode, the COCO
annotations turned into target dicts, a horizontal flip of image and boxes, ToTensor) through a
DataLoader with num_workers=0, against shardread.Loader(targets=True, flip=True) with one
thread (float32 NCHW as to_tensor gives, and uint8 NHWC as a GPU pipeline takes), on the same
images; interleaved repetitions, medians.

    BUILD=build scripts/bench-detect.py [--images 400] [--reps 5] [--work DIR]

The images are shardc-mksample --coco shapes at COCO-like sizes (short side about 480) and
COCO-like box counts (--shapes 16: about 6.8 per image, COCO's average is 7.3); the
dataset is built with --short-side 480 --max-side 640 and read at 512x512 (padded): the Loader
pads, torchvision's pipeline does no resize (it would only cost it more).

ColorJitter case: ColorJitter(JITTER) after the flip, on both sides: torchvision's transform on
the PIL image, against Loader(color_jitter=JITTER) (the same ops, byte for byte).

Multi-scale case: the detection references' RandomShortestSize(MULTI_SIZES, MULTI_MAX) before
the flip, on both sides: torchvision's F.resize of the PIL image and its box scaling, against
Loader(multiscale=(MULTI_SIZES, MULTI_MAX)) delivering a list of per-image float32 views.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI_SIZES = (480, 512, 544, 576, 608)
MULTI_MAX = 1000
JITTER = (0.2, 0.2, 0.2, 0.1)


def coco_targets(anns, w, scale=None):
    """CocoDetection's raw annotations as a detection target, resized by scale (x, y), flipped."""
    boxes = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
    boxes[:, 2:] += boxes[:, :2]
    if scale is not None:
        boxes[:, 0::2] *= scale[0]
        boxes[:, 1::2] *= scale[1]
    boxes[:, [0, 2]] = w - boxes[:, [2, 0]]
    return {"boxes": boxes,
            "labels": torch.tensor([a["category_id"] for a in anns], dtype=torch.int64),
            "area": torch.tensor([a["area"] for a in anns], dtype=torch.float32),
            "iscrowd": torch.tensor([a["iscrowd"] for a in anns], dtype=torch.int64)}


class Coco(benchlib.CocoImages, torch.utils.data.Dataset):
    """torchvision's CocoDetection (its __getitem__: Image.open(path).convert("RGB") and the
    image's annotations), without pycocotools' index, then what a detection recipe adds: a
    horizontal flip of the image and boxes, the target dict, to_tensor."""

    def __init__(self, root, ann, multiscale=False, jitter=False):
        self.multiscale = multiscale
        self.jitter = T.ColorJitter(*JITTER) if jitter else None
        benchlib.CocoImages.__init__(self, root, ann)

    def __getitem__(self, i):
        img, anns = self.coco_item(i)
        scale = None
        if self.multiscale:
            # references/detection/transforms.py RandomShortestSize
            w0, h0 = img.size
            s = MULTI_SIZES[torch.randint(len(MULTI_SIZES), (1,)).item()]
            r = min(s / min(w0, h0), MULTI_MAX / max(w0, h0))
            nw, nh = int(w0 * r), int(h0 * r)
            img = F.resize(img, [nh, nw])
            scale = (nw / w0, nh / h0)
        img = F.hflip(img)
        if self.jitter:
            img = self.jitter(img)
        t = coco_targets(anns, img.width, scale)
        return F.to_tensor(img), t


def run_torchvision(src, ann, multiscale=False, jitter=False):
    ds = Coco(src, ann, multiscale, jitter)
    dl = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=0,
                                     collate_fn=lambda b: tuple(zip(*b)))
    t0, n = time.perf_counter(), 0
    for images, targets in dl:
        n += len(images)
    return n / (time.perf_counter() - t0)


def run_shardread(out, multiscale=False, uint8=False, jitter=False):
    import shardread
    geometry = (dict(multiscale=(MULTI_SIZES, MULTI_MAX)) if multiscale
                else dict(size=512, pad=True))
    if jitter:
        geometry["color_jitter"] = JITTER
    # float32 NCHW in 0..1 is what to_tensor gives; uint8 NHWC is what a GPU pipeline takes
    # (it converts and normalises on the device, as FFCV and DALI users do)
    out_form = (dict(dtype="uint8") if uint8 else
                dict(dtype="float32", layout="NCHW", mean=0.0, std=255.0))
    loader = shardread.Loader(out, batch_size=8, threads=1, targets=True, flip=True,
                              framework="torch", **out_form, **geometry)
    return benchlib.loader_rate(loader, "bench-detect")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--work", default="/tmp/bench-detect")
    a = ap.parse_args()
    build = os.path.join(ROOT, os.environ.get("BUILD", "build"))
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    src, ann, out = (os.path.join(a.work, x) for x in ("shapes", "shapes.json", "ds"))
    per = a.images
    subprocess.run([os.path.join(build, "bin", "shardc-mksample"), src, "--coco", ann,
                    "--per-class", str(per), "--min-side", "400", "--max-side", "640",
                    "--shapes", "16", "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(build, "bin", "shardc"), "build", src, "--coco", ann, "-o", out,
                    "--short-side", "480", "--max-side", "640", "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(ann) as f:
        doc = json.load(f)
    nb = len(doc["annotations"])
    ni = len(doc["images"])
    torch.set_num_threads(1)
    runs = {k: [] for k in ("tv", "sr", "sr_u8", "tv_cj", "sr_cj", "tv_ms", "sr_ms")}
    for r in range(a.reps):
        order = [("tv", lambda: run_torchvision(src, ann)), ("sr", lambda: run_shardread(out)),
                 ("sr_u8", lambda: run_shardread(out, uint8=True)),
                 ("tv_cj", lambda: run_torchvision(src, ann, jitter=True)),
                 ("sr_cj", lambda: run_shardread(out, jitter=True)),
                 ("tv_ms", lambda: run_torchvision(src, ann, True)),
                 ("sr_ms", lambda: run_shardread(out, True))]
        for k, fn in (order if r % 2 == 0 else order[::-1]):
            runs[k].append(fn())
    m = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{ni} images, {nb} boxes ({nb / ni:.1f} per image), short side 480, one core, "
          f"medians of {a.reps}, img/s")
    print("| pipeline | img/s |")
    print("|---|---:|")
    print(f"| torchvision CocoDetection + hflip + to_tensor, DataLoader num_workers=0 | "
          f"{m['tv']:,.0f} |")
    print(f"| shardread.Loader(targets=True, flip=True), threads=1, float32 NCHW | "
          f"{m['sr']:,.0f} |")
    print(f"| ratio | {m['sr'] / m['tv']:.1f}x |")
    print(f"| shardread.Loader(targets=True, flip=True), threads=1, uint8 NHWC | "
          f"{m['sr_u8']:,.0f} |")
    print(f"| ratio, uint8 | {m['sr_u8'] / m['tv']:.1f}x |")
    print(f"| torchvision + hflip + ColorJitter{JITTER} + to_tensor | {m['tv_cj']:,.0f} |")
    print(f"| shardread.Loader(color_jitter={JITTER}, flip=True), threads=1, float32 NCHW | "
          f"{m['sr_cj']:,.0f} |")
    print(f"| ColorJitter ratio | {m['sr_cj'] / m['tv_cj']:.1f}x |")
    print(f"| torchvision + RandomShortestSize({list(MULTI_SIZES)}, {MULTI_MAX}) + hflip | "
          f"{m['tv_ms']:,.0f} |")
    print(f"| shardread.Loader(multiscale=(...), flip=True), threads=1, float32 NCHW list | "
          f"{m['sr_ms']:,.0f} |")
    print(f"| multi-scale ratio | {m['sr_ms'] / m['tv_ms']:.1f}x |")
    per_box = 29
    print(f"annotation bytes per sample: 32 + {per_box} x boxes, rounded up to 8 "
          f"(~{32 + per_box * nb / ni:.0f} here)")


if __name__ == "__main__":
    sys.exit(main())
