#!/usr/bin/env python3
"""From Python: shardread.Loader against the PyTorch input pipelines it replaces, in one run on
the same photos (make bench-torch; part of make bench).

    BUILD=build PYTHONPATH=build/python /usr/bin/python3 scripts/bench-torch.py [options]

Data: photo-like JPEGs (shardc-mksample --photo, re-encoded by Pillow at a random size per image,
short side 250..500, so that sizes vary as in a real dataset; quality 90), kept in
$BENCH_DIR/torch-photos (default .bench/) and reused. From them: raw shards at 224x224
(`shardc build --size 224x224`, the geometry of torchvision's Resize(224) + CenterCrop(224)) and
at 72x72 for the training loop, and the same pixels as a numpy memmap and an HDF5 file.

Throughput (images/s in steady state, and CPU-seconds per image of the main process plus its
worker processes), batch 256, random order:
  torchvision ImageFolder + DataLoader: Resize(224)+CenterCrop(224) and RandomResizedCrop(224)+
      RandomHorizontalFlip, PILToTensor (uint8, no float conversion), num_workers 0..cores,
      pin_memory off/on, persistent_workers off/on; epoch 2 of 2 is measured
  numpy memmap and h5py datasets (224x224 uint8) through a DataLoader, num_workers 0..cores;
      epochs 2..3
  shardread.Loader over the raw shards, threads 1..cores, epochs 2..E; and `shardbench read` (the
      C reader alone) at the same thread count, batch and order; medians of --reps runs
Ratios: the Loader against the best torchvision configuration (target >= 100x) and against
shardbench read at the same thread count (target >= 0.8x).

Training: a small CNN (three stride-2 convolutions, global pooling, a linear layer) trained on
the CPU on 64x64 crops, batch 64, SGD, fed by each pipeline: torchvision (RandomResizedCrop(64)
+ flip from the JPEGs, the best worker count measured above), the memmap and h5py datasets and
shardread.Loader (random 64x64 crop + flip of the 72x72 samples; with the default ring and with
prefetch 16). Per epoch: images/s, input
stall % (time spent waiting for the next batch / epoch time) and the mean loss.

The tables go to stdout and $BENCH_DIR/torch.md, the rows as JSON to $BENCH_DIR/torch.jsonl.
"""
import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.utils.data as tud

try:
    import h5py
except ImportError:
    h5py = None

import shardread

CLK = os.sysconf("SC_CLK_TCK")


# ---- CPU time of this process and its children (DataLoader workers) ----

def _children():
    pids = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids += f.read().split()
        except OSError:
            pass
    return pids


def cpu_seconds():
    """CPU time used so far by this process (all threads), its reaped children and its live
    children. A child reaped between two calls counts in full in RUSAGE_CHILDREN at the second
    and with its time so far as a live child at the first, so differences are exact."""
    total = time.process_time()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total += ru.ru_utime + ru.ru_stime
    for pid in _children():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK
        except (OSError, IndexError, ValueError):
            pass
    return total


# ---- data ----

def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def make_photos(bench, build, n, seed):
    """Photo-like JPEGs of many distinct sizes in class folders; reused when already there."""
    from PIL import Image
    out = os.path.join(bench, "torch-photos")
    stamp = os.path.join(bench, "torch-photos.stamp")
    want = f"{n} {seed}"
    if os.path.isdir(out) and os.path.exists(stamp) and open(stamp).read() == want:
        return out
    shutil.rmtree(out, ignore_errors=True)
    per = n // 4
    run(os.path.join(build, "bin", "shardc-mksample"), out, "--photo", "--classes", "4",
        "--per-class", str(per), "--seed", str(seed), "--quiet")
    rng = random.Random(seed)
    for root, _, files in os.walk(out):
        for name in sorted(files):
            path = os.path.join(root, name)
            with Image.open(path) as im:
                im = im.convert("RGB")
                short = rng.randint(250, 500)
                scale = short / min(im.size)
                size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
                im.resize(size, Image.BILINEAR).save(path, quality=90)
    with open(stamp, "w") as f:
        f.write(want)
    return out


def make_shards(bench, build, photos, side):
    out = os.path.join(bench, f"torch-raw{side}")
    shutil.rmtree(out, ignore_errors=True)
    run(os.path.join(build, "bin", "shardc"), "build", photos, "-o", out, "--size",
        f"{side}x{side}", "--no-progress")
    return out


def make_arrays(bench, shards, side):
    """The shards' pixels as a .npy memmap and an HDF5 file (contiguous, uncompressed)."""
    ds = shardread.Dataset(shards)
    n = len(ds)
    npy = os.path.join(bench, f"torch-{side}.npy")
    lab = os.path.join(bench, f"torch-{side}-labels.npy")
    mm = np.lib.format.open_memmap(npy, mode="w+", dtype=np.uint8, shape=(n, side, side, 3))
    labels = np.zeros(n, np.int64)
    for i in range(n):
        mm[i], labels[i] = ds[i]
    mm.flush()
    del mm
    np.save(lab, labels)
    h5 = None
    if h5py is not None:
        h5 = os.path.join(bench, f"torch-{side}.h5")
        with h5py.File(h5, "w") as f:
            f.create_dataset("images", data=np.load(npy, mmap_mode="r"))
            f.create_dataset("labels", data=labels)
    return npy, lab, h5


class MemmapDataset(tud.Dataset):
    """(H, W, C) uint8 tensors from a .npy memmap, optionally a random crop + flip."""

    def __init__(self, npy, labels, crop=None):
        self.npy, self.labels, self.crop = npy, np.load(labels), crop
        self.mm = None

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        if self.mm is None:  # opened in each worker
            self.mm = np.load(self.npy, mmap_mode="r")
        return crop_flip(self.mm[i], self.crop), int(self.labels[i])


class H5Dataset(tud.Dataset):
    """(H, W, C) uint8 tensors read with h5py, optionally a random crop + flip."""

    def __init__(self, path, crop=None):
        self.path, self.crop = path, crop
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])
        self.f = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:  # h5py handles must not cross fork: opened in each worker
            self.f = h5py.File(self.path, "r")
        return crop_flip(self.f["images"][i], self.crop), int(self.f["labels"][i])


def crop_flip(a, crop):
    if crop:
        y = random.randint(0, a.shape[0] - crop)
        x = random.randint(0, a.shape[1] - crop)
        a = a[y:y + crop, x:x + crop]
        if random.random() < 0.5:
            a = a[:, ::-1]
    return torch.from_numpy(np.ascontiguousarray(a))


# ---- throughput ----

def measure_dataloader(make_loader, epochs, measured):
    """Iterate epochs epochs; images/s and CPU-s/image over the last `measured` of them."""
    loader = make_loader()
    images = 0
    for e in range(epochs):
        if e == epochs - measured:
            t0, c0, images = time.perf_counter(), cpu_seconds(), 0
        for x, _ in loader:
            images += len(x)
    t1, c1 = time.perf_counter(), cpu_seconds()
    del loader
    return images / (t1 - t0), (c1 - c0) / images


def tv_transforms(kind, side):
    import torchvision.transforms as T
    if kind == "resize+centercrop":
        return T.Compose([T.Resize(side), T.CenterCrop(side), T.PILToTensor()])
    return T.Compose([T.RandomResizedCrop(side), T.RandomHorizontalFlip(), T.PILToTensor()])


def bench_torchvision(photos, cores, batch, rows):
    import torchvision.datasets as D
    cuda = torch.cuda.is_available()
    for kind in ("resize+centercrop", "rrc+flip"):
        ds = D.ImageFolder(photos, transform=tv_transforms(kind, 224))
        for nw in range(cores + 1):
            for pin in (False, True):
                for persistent in ((False, True) if nw else (False,)):
                    def mk():
                        return tud.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=nw,
                                              pin_memory=pin and cuda,
                                              persistent_workers=persistent)
                    ips, cpi = measure_dataloader(mk, 2, 1)
                    row = dict(pipeline="torchvision", transform=kind, num_workers=nw,
                               pin_memory=pin, persistent_workers=persistent, images_per_s=ips,
                               cpu_s_per_image=cpi)
                    log(row)
                    rows.append(row)


def bench_arrays(name, make_ds, cores, batch, rows):
    for nw in range(cores + 1):
        ds = make_ds()

        def mk():
            return tud.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=nw,
                                  persistent_workers=nw > 0)
        ips, cpi = measure_dataloader(mk, 3, 2)
        row = dict(pipeline=name, num_workers=nw, images_per_s=ips, cpu_s_per_image=cpi)
        log(row)
        rows.append(row)


def bench_loader(shards, build, threads, batch, epochs, reps, rows):
    for t in threads:
        py, c = [], []
        for _ in range(reps):
            loader = shardread.Loader(shards, batch_size=batch, shuffle=True, threads=t)
            images = 0
            for e in range(epochs):
                if e == 1:
                    t0, c0, images = time.perf_counter(), cpu_seconds(), 0
                for x, _ in loader:
                    images += len(x)
            t1, c1 = time.perf_counter(), cpu_seconds()
            py.append((images / (t1 - t0), (c1 - c0) / images))
            del loader
            out = subprocess.run([os.path.join(build, "bin", "shardbench"), "read", shards,
                                  "--threads", str(t), "--batch", str(batch), "--order", "random",
                                  "--epochs", str(epochs), "--json"], check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            c.append((r["images_per_s"], r["cpu_s_per_image"]))
        row = dict(pipeline="shardread.Loader", threads=t,
                   ratio_to_c=statistics.median(p[0] / x[0] for p, x in zip(py, c)),
                   cpu_ratio_to_c=statistics.median(p[1] / x[1] for p, x in zip(py, c)),
                   images_per_s=statistics.median(p[0] for p in py),
                   cpu_s_per_image=statistics.median(p[1] for p in py),
                   c_images_per_s=statistics.median(x[0] for x in c),
                   c_cpu_s_per_image=statistics.median(x[1] for x in c),
                   runs=reps)
        log(row)
        rows.append(row)


# ---- training ----

class SmallCNN(torch.nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, classes))

    def forward(self, x):
        return self.body(x)


def train(name, loader, nhwc, epochs, mean, std, rows):
    torch.manual_seed(0)
    model = SmallCNN(4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    m = torch.tensor(mean).view(1, 3, 1, 1)
    s = torch.tensor(std).view(1, 3, 1, 1)
    for e in range(epochs):
        wait = 0.0
        images, losses = 0, []
        t0 = time.perf_counter()
        it = iter(loader)
        while True:
            w0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                wait += time.perf_counter() - w0
                break
            wait += time.perf_counter() - w0
            x = torch.as_tensor(x)
            if nhwc:
                x = x.permute(0, 3, 1, 2)
            x = (x.float() - m) / s
            loss = torch.nn.functional.cross_entropy(model(x), torch.as_tensor(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            images += len(y)
            losses.append(loss.item())
        wall = time.perf_counter() - t0
        row = dict(pipeline=f"train:{name}", epoch=e + 1, images_per_s=images / wall,
                   stall_pct=100 * wait / wall, loss=statistics.mean(losses))
        log(row)
        rows.append(row)


# ---- report ----

def log(row):
    print("bench-torch: " + json.dumps(row), file=sys.stderr, flush=True)


def fmt(x):
    return f"{x:,.0f}"


def report(rows):
    out = []
    m = next(r for r in rows if r["pipeline"] == "meta")
    cores = m["cores"]
    tv = [r for r in rows if r["pipeline"] == "torchvision"]
    best = max(tv, key=lambda r: r["images_per_s"])
    frugal = min(tv, key=lambda r: r["cpu_s_per_image"])
    out.append(f"{m['photos']} photos ({m['photo_bytes'] / 1e6:.1f} MB of JPEG, short side "
               f"250..500), raw shards 224x224 ({m['raw_bytes'] / 1e6:.1f} MB); batch "
               f"{m['batch']}, random order, {cores} cores; torch {m['torch']}"
               f"{'' if m['cuda'] else ', no CUDA (pin_memory has no effect)'}; load average "
               f"{m['load_start']:.1f} at the start, {m['load_end']:.1f} at the end.\n")
    out.append("| pipeline | configuration | images/s | CPU-s/image | shardread.Loader "
               f"({cores} threads) / this |")
    out.append("|---|---|---:|---:|---:|")
    loader_best = max((r for r in rows if r["pipeline"] == "shardread.Loader"),
                      key=lambda r: r["threads"])
    for r in rows:
        if r["pipeline"] in ("torchvision", "memmap", "h5py"):
            if r["pipeline"] == "torchvision":
                cfg = (f"{r['transform']}, workers {r['num_workers']}, pin "
                       f"{'on' if r['pin_memory'] else 'off'}"
                       + (f", persistent {'on' if r['persistent_workers'] else 'off'}"
                          if r["num_workers"] else ""))
            else:
                cfg = f"workers {r['num_workers']}"
            mark = " **(best)**" if r is best else ""
            out.append(f"| {r['pipeline']} DataLoader | {cfg}{mark} | {fmt(r['images_per_s'])} | "
                       f"{r['cpu_s_per_image']:.2e} | "
                       f"{loader_best['images_per_s'] / r['images_per_s']:,.0f}x |")
    for r in rows:
        if r["pipeline"] == "shardread.Loader":
            out.append(f"| shardread.Loader | threads {r['threads']} | {fmt(r['images_per_s'])} | "
                       f"{r['cpu_s_per_image']:.2e} | |")
            out.append(f"| shardbench read (C) | threads {r['threads']} | "
                       f"{fmt(r['c_images_per_s'])} | {r['c_cpu_s_per_image']:.2e} | |")
    out.append("")
    out.append(f"Medians of {loader_best['runs']} runs; Loader / C reader is the median of the "
               "ratios of runs made one after the other.\n")
    out.append("| threads | shardread.Loader img/s | shardbench read img/s | Loader / C reader "
               "(target >= 0.8x) | CPU-s/image, Loader / C | Loader / best DataLoader "
               "(target >= 100x) |")
    out.append("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["pipeline"] == "shardread.Loader":
            out.append(f"| {r['threads']} | {fmt(r['images_per_s'])} | {fmt(r['c_images_per_s'])} "
                       f"| {r['ratio_to_c']:.2f}x | {r['cpu_ratio_to_c']:.2f}x | "
                       f"{r['images_per_s'] / best['images_per_s']:,.0f}x |")
    out.append("")
    out.append(f"CPU time per image: shardread.Loader ({cores} threads) "
               f"{loader_best['cpu_s_per_image']:.2e} s, the most frugal torchvision "
               f"configuration ({frugal['transform']}, workers {frugal['num_workers']}) "
               f"{frugal['cpu_s_per_image']:.2e} s: "
               f"{frugal['cpu_s_per_image'] / loader_best['cpu_s_per_image']:,.0f}x less work "
               "per image.\n")
    out.append("Training a small CNN on 64x64 crops (CPU, batch 64): per epoch images/s, input "
               "stall % (waiting for the next batch / epoch time), mean loss.\n")
    out.append("| fed by | epoch | images/s | input stall | loss |")
    out.append("|---|---:|---:|---:|---:|")
    for r in rows:
        if r["pipeline"].startswith("train:"):
            out.append(f"| {r['pipeline'][6:]} | {r['epoch']} | {fmt(r['images_per_s'])} | "
                       f"{r['stall_pct']:.1f}% | {r['loss']:.3f} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--photos", type=int, default=800, help="photos to generate (default 800)")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=60,
                    help="epochs per Loader / shardbench run (default 60; 2..E measured)")
    ap.add_argument("--reps", type=int, default=9, help="Loader / shardbench runs (median)")
    ap.add_argument("--train-epochs", type=int, default=3)
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--report", metavar="JSONL",
                    help="only print the tables of an earlier run's torch.jsonl")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            print(report([json.loads(ln) for ln in f if ln.strip()]))
        return
    build = os.environ.get("BUILD", "build")
    bench = os.environ.get("BENCH_DIR", ".bench")
    os.makedirs(bench, exist_ok=True)
    cores = max(1, args.cores)

    load0 = os.getloadavg()[0]
    print("bench-torch: preparing data", file=sys.stderr)
    photos = make_photos(bench, build, args.photos, args.seed)
    raw224 = make_shards(bench, build, photos, 224)
    raw72 = make_shards(bench, build, photos, 72)
    npy224, lab224, h5_224 = make_arrays(bench, raw224, 224)
    npy72, lab72, h5_72 = make_arrays(bench, raw72, 72)
    n = len(shardread.Dataset(raw224))

    rows = []
    bench_torchvision(photos, cores, args.batch, rows)
    bench_arrays("memmap", lambda: MemmapDataset(npy224, lab224), cores, args.batch, rows)
    if h5py is not None:
        bench_arrays("h5py", lambda: H5Dataset(h5_224), cores, args.batch, rows)
    bench_loader(raw224, build, range(1, cores + 1), args.batch, args.epochs, args.reps, rows)

    # training: every feed gives 64x64 uint8 crops with a flip
    import torchvision.datasets as D
    tv = [r for r in rows if r["pipeline"] == "torchvision"]
    nw = max(tv, key=lambda r: r["images_per_s"])["num_workers"]
    info = shardread.Dataset(raw72).info
    mean, std = info["mean"], info["std"]
    feeds = [
        (f"torchvision RRC(64)+flip, workers {nw}", False,
         lambda: tud.DataLoader(D.ImageFolder(photos, transform=tv_transforms("rrc", 64)),
                                batch_size=64, shuffle=True, num_workers=nw,
                                persistent_workers=nw > 0)),
        (f"memmap, workers {nw}", True,
         lambda: tud.DataLoader(MemmapDataset(npy72, lab72, crop=64), batch_size=64, shuffle=True,
                                num_workers=nw, persistent_workers=nw > 0)),
    ]
    if h5py is not None:
        feeds.append((f"h5py, workers {nw}", True,
                      lambda: tud.DataLoader(H5Dataset(h5_72, crop=64), batch_size=64,
                                             shuffle=True, num_workers=nw,
                                             persistent_workers=nw > 0)))
    feeds.append((f"shardread.Loader, threads {cores}", True,
                  lambda: shardread.Loader(raw72, batch_size=64, shuffle=True, threads=cores,
                                           size=64, random_crop=True, flip=True)))
    # the same with a deeper ring: tells a ring too shallow from reader threads waiting for CPU
    feeds.append((f"shardread.Loader, threads {cores}, prefetch 16", True,
                  lambda: shardread.Loader(raw72, batch_size=64, shuffle=True, threads=cores,
                                           size=64, random_crop=True, flip=True, prefetch=16)))
    for name, nhwc, make in feeds:
        loader = make()
        train(name, loader, nhwc, args.train_epochs, mean, std, rows)
        del loader  # its worker processes end here

    def du(p):
        return sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(p) for x in fs)
    rows.insert(0, dict(pipeline="meta", photos=n, photo_bytes=du(photos), raw_bytes=du(raw224),
                        batch=args.batch, cores=cores, torch=torch.__version__,
                        cuda=torch.cuda.is_available(), load_start=load0,
                        load_end=os.getloadavg()[0]))
    with open(os.path.join(bench, "torch.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    text = report(rows)
    with open(os.path.join(bench, "torch.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
