#!/usr/bin/env python3
"""Detection input pipelines per core: torchvision's CocoDetection logic (PIL decode, the COCO
annotations turned into target dicts, a horizontal flip of image and boxes, ToTensor) through a
DataLoader with num_workers=0, against shardread.Loader(targets=True, flip=True) with one
thread, on the same images; interleaved repetitions, medians.

    BUILD=build scripts/bench-detect.py [--images 400] [--reps 5] [--work DIR]

The images are shardc-mksample --coco shapes at COCO-like sizes (short side about 480); the
dataset is built with --short-side 480 --max-side 640 and read at 512x512 (padded): the Loader
pads, torchvision's pipeline does no resize (it would only cost it more).
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
import torchvision.transforms.functional as F
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def coco_targets(anns, w):
    """CocoDetection's raw annotations as a detection target, flipped."""
    boxes = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
    boxes[:, 2:] += boxes[:, :2]
    boxes[:, [0, 2]] = w - boxes[:, [2, 0]]
    return {"boxes": boxes,
            "labels": torch.tensor([a["category_id"] for a in anns], dtype=torch.int64),
            "area": torch.tensor([a["area"] for a in anns], dtype=torch.float32),
            "iscrowd": torch.tensor([a["iscrowd"] for a in anns], dtype=torch.int64)}


class Coco(torch.utils.data.Dataset):
    """torchvision's CocoDetection (its __getitem__: Image.open(path).convert("RGB") and the
    image's annotations), without pycocotools' index, then what a detection recipe adds: a
    horizontal flip of the image and boxes, the target dict, to_tensor."""

    def __init__(self, root, ann):
        with open(ann) as f:
            doc = json.load(f)
        self.root = root
        self.images = doc["images"]
        self.anns = {}
        for a in doc["annotations"]:
            self.anns.setdefault(a["image_id"], []).append(a)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        info = self.images[i]
        img = Image.open(os.path.join(self.root, info["file_name"])).convert("RGB")
        anns = self.anns.get(info["id"], [])
        img = F.hflip(img)
        t = coco_targets(anns, img.width)
        return F.to_tensor(img), t


def run_torchvision(src, ann):
    ds = Coco(src, ann)
    dl = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=0,
                                     collate_fn=lambda b: tuple(zip(*b)))
    t0, n = time.perf_counter(), 0
    for images, targets in dl:
        n += len(images)
    return n / (time.perf_counter() - t0)


def run_shardread(out):
    import shardread
    loader = shardread.Loader(out, batch_size=8, threads=1, targets=True, flip=True, size=512,
                              pad=True, dtype="float32", layout="NCHW", mean=0.0, std=255.0,
                              framework="torch")
    for _ in loader:      # warm-up epoch
        pass
    t0, n = time.perf_counter(), 0
    for images, targets in loader:
        n += images.shape[0]
    return n / (time.perf_counter() - t0)


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
                    "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(build, "bin", "shardc"), "build", src, "--coco", ann, "-o", out,
                    "--short-side", "480", "--max-side", "640", "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(ann) as f:
        doc = json.load(f)
    nb = len(doc["annotations"])
    ni = len(doc["images"])
    torch.set_num_threads(1)
    tv, sr = [], []
    for r in range(a.reps):
        if r % 2:
            sr.append(run_shardread(out))
            tv.append(run_torchvision(src, ann))
        else:
            tv.append(run_torchvision(src, ann))
            sr.append(run_shardread(out))
    mt, ms = statistics.median(tv), statistics.median(sr)
    print(f"{ni} images, {nb} boxes ({nb / ni:.1f} per image), short side 480, one core, "
          f"medians of {a.reps}, img/s")
    print("| pipeline | img/s |")
    print("|---|---:|")
    print(f"| torchvision CocoDetection + hflip + to_tensor, DataLoader num_workers=0 | {mt:,.0f} |")
    print(f"| shardread.Loader(targets=True, flip=True), threads=1, float32 NCHW | {ms:,.0f} |")
    print(f"| ratio | {ms / mt:.1f}x |")
    per_box = 29
    print(f"annotation bytes per sample: 32 + {per_box} x boxes, rounded up to 8 "
          f"(~{32 + per_box * nb / ni:.0f} here)")


if __name__ == "__main__":
    sys.exit(main())
