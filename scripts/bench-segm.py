#!/usr/bin/env python3
"""Segmentation input pipelines per core: shardread.Loader(targets=True) with one thread against
the torchvision pipeline that does the same through a DataLoader with one worker process, on the
same images of many distinct sizes; the two alternate in every repetition; medians.

    BUILD=build scripts/bench-segm.py [--images 200] [--reps 5] [--work DIR]

Instance segmentation: shardc-mksample --coco --polygons shapes (sides 400..640, 1..16 shapes,
each outline a COCO polygon), built with shardc build --coco at their own sizes (no build
geometry). torchvision's side is torchvision's CocoDetection (Image.open(path).convert("RGB") and
the image's annotations) with the detection references' ConvertCocoPolysToMask: each instance's
polygons rasterised at the image's size (PIL ImageDraw.polygon, as pycocotools' frPyObjects +
decode, which is not installed here), stacked into an (N, H, W) uint8 tensor, boxes from xywh;
then, on image and masks together:
  rrc        RandomResizedCrop(512) (scale (0.08, 1), ratio (3/4, 4/3)): F.resized_crop of the PIL
             image (bilinear) and of the mask tensor (nearest, as transforms.v2 moves a Mask),
             boxes cropped, scaled and clipped, instances whose mask vanished dropped; hflip of
             image, masks and boxes; to_tensor
  multiscale the detection references' RandomShortestSize(MULTI_SIZES, MULTI_MAX): F.resize of the
             PIL image and of the masks (nearest), boxes scaled; hflip; to_tensor
against Loader(targets=True, flip=True, rrc=True, size=512) and Loader(targets=True, flip=True,
multiscale=(MULTI_SIZES, MULTI_MAX)), float32 NCHW in 0..1 (what to_tensor gives), each target
with boxes, labels and masks (N, H, W) uint8.

Semantic segmentation: shardc-mksample --photo JPEGs (long side 360..640, each its own size),
each given a grey PNG label map (PIL: a background class and ellipses, rectangles and polygons
of 20 classes plus 255 borders), built with shardc build SRC --masks DIR at their own sizes.
torchvision: PIL open of image and map, RandomResizedCrop(512) of both (bilinear / nearest, one
draw), hflip of both, ColorJitter(JITTER) on the image, to_tensor, the map as a uint8 tensor;
against Loader(targets=True, rrc=True, size=512, flip=True, color_jitter=JITTER) float32 NCHW
with (B, 512, 512) uint8 maps.

With --dtype uint8 both sides deliver the image as uint8 CHW instead (torchvision's
pil_to_tensor, the Loader's dtype="uint8"): the float conversion and normalisation then belong to
the training step on the GPU (as the detection references' PILToTensor then ToDtype, and the
CUDA feed's shr_feed_normalize, do it), so neither side spends a core on it.

Both sides batch 8. The DataLoader's time runs from its first batch (the worker's start left
out); the Loader's from its second epoch (the first warms it).
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image, ImageDraw

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 512
MULTI_SIZES = (480, 512, 544, 576, 608)
MULTI_MAX = 1000
JITTER = (0.2, 0.2, 0.2, 0.1)
BATCH = 8
DTYPE = "float32"   # --dtype


def to_tensor(img):
    """The image as the pipeline delivers it: float32 in 0..1 (to_tensor) or uint8 (--dtype)."""
    return F.to_tensor(img) if DTYPE == "float32" else F.pil_to_tensor(img)


def poly_masks(anns, w, h):
    """references/detection/coco_utils.py convert_coco_poly_to_mask: each annotation's polygons
    united into one (H, W) uint8 mask, stacked (pycocotools' rasterisation done with PIL)."""
    masks = np.zeros((len(anns), h, w), dtype=np.uint8)
    for k, a in enumerate(anns):
        m = Image.new("L", (w, h), 0)
        d = ImageDraw.Draw(m)
        for p in a["segmentation"]:
            d.polygon(p, fill=1)
        masks[k] = np.asarray(m)
    return torch.from_numpy(masks)


def nearest(masks, size, crop=None):
    """The (N, H, W) masks cropped to crop=(top, left, h, w) and resized to size, nearest
    (torchvision's functional ops on a tensor, as transforms.v2 moves a Mask); N may be 0."""
    if len(masks) == 0:
        return masks.new_zeros((0, *size))
    if crop is not None:
        return F.resized_crop(masks, *crop, size, interpolation=T.InterpolationMode.NEAREST)
    return F.resize(masks, size, interpolation=T.InterpolationMode.NEAREST)


class CocoSegm(benchlib.CocoImages, torch.utils.data.Dataset):
    """CocoDetection's __getitem__ without pycocotools' index, ConvertCocoPolysToMask, then the
    recipe's geometry on image, masks and boxes together, hflip, to_tensor."""

    def __init__(self, root, ann, mode):
        self.mode = mode
        benchlib.CocoImages.__init__(self, root, ann)

    def __getitem__(self, i):
        img, anns = self.coco_item(i)
        anns = [a for a in anns if not a.get("iscrowd", 0)]
        w0, h0 = img.size
        masks = poly_masks(anns, w0, h0)
        boxes = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]
        labels = torch.tensor([a["category_id"] for a in anns], dtype=torch.int64)
        if self.mode == "rrc":
            top, left, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
            img = F.resized_crop(img, top, left, h, w, [SIZE, SIZE])
            masks = nearest(masks, [SIZE, SIZE], (top, left, h, w))
            boxes -= torch.tensor([left, top, left, top], dtype=torch.float32)
            boxes[:, 0::2] = (boxes[:, 0::2] * (SIZE / w)).clamp(0, SIZE)
            boxes[:, 1::2] = (boxes[:, 1::2] * (SIZE / h)).clamp(0, SIZE)
            keep = masks.flatten(1).bool().any(1) & (boxes[:, 2] > boxes[:, 0]) & \
                (boxes[:, 3] > boxes[:, 1])
            masks, boxes, labels = masks[keep], boxes[keep], labels[keep]
        else:
            # references/detection/transforms.py RandomShortestSize
            s = MULTI_SIZES[torch.randint(len(MULTI_SIZES), (1,)).item()]
            r = min(s / min(w0, h0), MULTI_MAX / max(w0, h0))
            nw, nh = int(w0 * r), int(h0 * r)
            img = F.resize(img, [nh, nw])
            masks = nearest(masks, [nh, nw])
            boxes[:, 0::2] *= nw / w0
            boxes[:, 1::2] *= nh / h0
        img = F.hflip(img)
        masks = masks.flip(-1)
        boxes[:, [0, 2]] = img.width - boxes[:, [2, 0]]
        return to_tensor(img), {"boxes": boxes, "labels": labels, "masks": masks}


class LabelMaps(torch.utils.data.Dataset):
    """A semantic segmentation recipe: image and label map through one RandomResizedCrop, one
    hflip, ColorJitter on the image, to_tensor and the map as a tensor."""

    def __init__(self, pairs):
        self.pairs = pairs
        self.jitter = T.ColorJitter(*JITTER)

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        ip, mp = self.pairs[i]
        img = Image.open(ip).convert("RGB")
        mask = Image.open(mp)
        top, left, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
        img = F.resized_crop(img, top, left, h, w, [SIZE, SIZE])
        mask = F.resized_crop(mask, top, left, h, w, [SIZE, SIZE],
                              interpolation=T.InterpolationMode.NEAREST)
        if torch.rand(1).item() < 0.5:
            img, mask = F.hflip(img), F.hflip(mask)
        img = self.jitter(img)
        return to_tensor(img), torch.from_numpy(np.array(mask, dtype=np.uint8))


def run_torchvision(ds, collate=None):
    dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=1, shuffle=True,
                                     collate_fn=collate)
    it = iter(dl)
    next(it)  # the worker's start left out
    t0, n = time.perf_counter(), 0
    for images, _ in it:
        n += len(images)
    return n / (time.perf_counter() - t0)


def run_shardread(out, **kw):
    import shardread
    if DTYPE == "float32":
        kw.update(mean=0.0, std=255.0)
    loader = shardread.Loader(out, batch_size=BATCH, threads=1, shuffle=True, targets=True,
                              flip=True, framework="torch", dtype=DTYPE, layout="NCHW", **kw)
    return benchlib.loader_rate(loader, "bench-segm", check_targets)


def check_targets(batch):
    """The targets the benchmark means to time: instance masks (N, H, W) uint8 beside the boxes,
    or label maps (B, H, W) uint8."""
    images, targets = batch[0], batch[1]
    if isinstance(targets, list):
        assert targets[0]["masks"].dtype == torch.uint8 and targets[0]["masks"].dim() == 3
    else:
        assert targets.dtype == torch.uint8 and tuple(targets.shape) == (len(images), SIZE, SIZE)


def label_maps(src, dst, seed=11):
    """A grey PNG label map for every JPEG under SRC, at its size, under DST with the same
    relative path: background 0, 3..12 shapes of classes 1..20, some outlined with 255."""
    rng = random.Random(seed)
    pairs = []
    for d, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if not f.lower().endswith((".jpg", ".jpeg", ".png")):
                continue
            ip = os.path.join(d, f)
            rel = os.path.relpath(ip, src)
            mp = os.path.join(dst, os.path.splitext(rel)[0] + ".png")
            os.makedirs(os.path.dirname(mp), exist_ok=True)
            with Image.open(ip) as im:
                w, h = im.size
            m = Image.new("L", (w, h), 0)
            dr = ImageDraw.Draw(m)
            for _ in range(rng.randint(3, 12)):
                x0, y0 = rng.uniform(0, w * 0.8), rng.uniform(0, h * 0.8)
                x1, y1 = x0 + rng.uniform(16, w * 0.5), y0 + rng.uniform(16, h * 0.5)
                c = rng.randint(1, 20)
                edge = 255 if rng.random() < 0.3 else None
                kind = rng.randrange(3)
                if kind == 0:
                    dr.ellipse([x0, y0, x1, y1], fill=c, outline=edge, width=3)
                elif kind == 1:
                    dr.rectangle([x0, y0, x1, y1], fill=c, outline=edge, width=3)
                else:
                    pts = [(rng.uniform(x0, x1), rng.uniform(y0, y1)) for _ in range(6)]
                    dr.polygon(pts, fill=c, outline=edge)
            m.save(mp)
            pairs.append((ip, mp))
    return pairs


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--work", default="/tmp/bench-segm")
    ap.add_argument("--dtype", choices=("float32", "uint8"), default="float32")
    a = ap.parse_args()
    global DTYPE
    DTYPE = a.dtype
    build = os.path.join(ROOT, os.environ.get("BUILD", "build"))
    shardc = os.path.join(build, "bin", "shardc")
    mksample = os.path.join(build, "bin", "shardc-mksample")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    src, ann, seg = (os.path.join(a.work, x) for x in ("shapes", "shapes.json", "seg"))
    photos, maps, sem = (os.path.join(a.work, x) for x in ("photos", "maps", "sem"))
    quiet = dict(check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([mksample, src, "--coco", ann, "--per-class", str(a.images), "--min-side",
                    "400", "--max-side", "640", "--shapes", "16", "--polygons", "--seed", "7"],
                   **quiet)
    subprocess.run([shardc, "build", src, "--coco", ann, "-o", seg, "--no-progress"], **quiet)
    subprocess.run([mksample, photos, "--photo", "--classes", "4", "--per-class",
                    str((a.images + 3) // 4), "--seed", "1", "--quiet"], **quiet)
    pairs = label_maps(photos, maps)
    subprocess.run([shardc, "build", photos, "--masks", maps, "-o", sem, "--no-progress"],
                   **quiet)
    with open(ann) as f:
        doc = json.load(f)
    ni, nb = len(doc["images"]), len(doc["annotations"])
    sizes = {(im["width"], im["height"]) for im in doc["images"]}
    psizes = set()
    for ip, _ in pairs:
        with Image.open(ip) as im:
            psizes.add(im.size)
    torch.set_num_threads(1)
    cases = [
        ("tv_rrc", lambda: run_torchvision(CocoSegm(src, ann, "rrc"), lambda b: tuple(zip(*b)))),
        ("sr_rrc", lambda: run_shardread(seg, rrc=True, size=SIZE)),
        ("tv_ms", lambda: run_torchvision(CocoSegm(src, ann, "ms"), lambda b: tuple(zip(*b)))),
        ("sr_ms", lambda: run_shardread(seg, multiscale=(MULTI_SIZES, MULTI_MAX))),
        ("tv_sem", lambda: run_torchvision(LabelMaps(pairs))),
        ("sr_sem", lambda: run_shardread(sem, rrc=True, size=SIZE, color_jitter=JITTER)),
    ]
    runs = {k: [] for k, _ in cases}
    loads = [loadavg()]
    for r in range(a.reps):
        for k, fn in (cases if r % 2 == 0 else cases[::-1]):
            runs[k].append(fn())
        loads.append(loadavg())
        print(f"bench-segm: rep {r + 1}/{a.reps}: " +
              ", ".join(f"{k} {v[-1]:.0f}" for k, v in runs.items()) +
              f"; load average {loads[-1]}", file=sys.stderr, flush=True)
    m = {k: statistics.median(v) for k, v in runs.items()}
    print(f"instance: {ni} images of {len(sizes)} distinct sizes (sides 400..640), {nb} polygon "
          f"instances ({nb / ni:.1f} per image); semantic: {len(pairs)} photos of {len(psizes)} "
          f"distinct sizes with grey label maps; output {SIZE}x{SIZE} {DTYPE} NCHW (multi-scale: "
          f"a list); one Loader thread against one DataLoader worker, batch {BATCH}, "
          f"alternating, medians of {a.reps}, img/s; load average (1, 5, 15 min) at the start "
          f"{loads[0]}, after each repetition {'; '.join(loads[1:])}")
    print("| pipeline | torchvision img/s | shardread img/s | ratio |")
    print("|---|---:|---:|---:|")
    rows = [("instance masks: RandomResizedCrop(512) + hflip", "rrc", 30),
            (f"instance masks: RandomShortestSize({list(MULTI_SIZES)}, {MULTI_MAX}) + hflip",
             "ms", 30),
            (f"label maps: RandomResizedCrop(512) + hflip + ColorJitter{JITTER}", "sem", 20)]
    for name, k, goal in rows:
        tv, sr = m["tv_" + k], m["sr_" + k]
        print(f"| {name} | {tv:,.1f} | {sr:,.0f} | {sr / tv:.1f}x (goal {goal}x) |")


if __name__ == "__main__":
    sys.exit(main())
