#!/usr/bin/env python3
"""bench-rrc.py - read-time RandomResizedCrop in libshardread against torchvision, per thread.

    BUILD=build BENCH_DIR=.bench /usr/bin/python3 scripts/bench-rrc.py     (make bench runs it)

One run, the same stored pixels: photo-like JPEGs (shardc-mksample --photo, shared with the other
benchmarks in $BENCH_DIR/photos) compiled with `shardc build --short-side 256 --max-side 512` to
raw shards (samples of several sizes). Per thread, images/s in steady state:

  libshardread, through `shardbench read --threads 1` (random order, batch 256, epochs 2..E):
    plain         the stored pixels center-cropped to 224x224 (no transform: the read floor)
    rrc u8        RandomResizedCrop(224) + flip, uint8 NHWC
    rrc f32       the same, normalised with the dataset's statistics, float32 NCHW
    rrc f16       the same, float16 NCHW
  torchvision 0.14 on the same stored images, decoded in memory as PIL images, one thread:
    RandomResizedCrop(224) + RandomHorizontalFlip
    ... + ToTensor + Normalize

Targets: rrc u8 at least 5x torchvision's RRC+flip per core and at least 3x FFCV's published
per-vCPU rate (172,801 images/s on 96 vCPUs: 1,800 per vCPU); float output at most 1.5x the cost
(time per image) of uint8. Medians of REPS runs. Writes a markdown table to stdout and to
$BENCH_DIR/rrc.md.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import benchlib

BUILD = os.environ.get("BUILD", "build")
W = os.environ.get("BENCH_DIR", ".bench")
BIN = os.path.join(BUILD, "bin")
REPS = int(os.environ.get("REPS", "5"))
EPOCHS = int(os.environ.get("RRC_EPOCHS", "4"))
PER = 225                        # photos per class, as bench-read.sh and bench-build.sh
FFCV_PER_VCPU = 172801 / 96


def log(msg):
    print(f"bench-rrc: {msg}", file=sys.stderr, flush=True)


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def build(src):
    out = os.path.join(W, "rrc256")
    sh("rm", "-rf", out)
    sh(f"{BIN}/shardc", "build", src, "-o", out, "--short-side", "256", "--max-side", "512",
       "-j", str(os.cpu_count()), "--no-progress", stdout=subprocess.DEVNULL)
    return out


def shardbench(ds, threads, extra):
    args = [f"{BIN}/shardbench", "read", ds, "--threads", str(threads), "--order", "random",
            "--epochs", str(EPOCHS), "--size", "224x224", "--json"] + extra
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return rows[0]


def torchvision_rate(imgs, tf, reps):
    """(images/s, CPU-s per image) of tf over every image, medians of reps passes after a warm-up
    pass; the CPU time is the process's (one thread: torch.set_num_threads(1))."""
    rates, cpus = [], []
    for r in range(reps + 1):
        t, c = time.perf_counter(), time.process_time()
        for im in imgs:
            tf(im)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        if r:
            rates.append(len(imgs) / dt)
            cpus.append(dc / len(imgs))
    return statistics.median(rates), statistics.median(cpus)


def main():
    import torch
    import torchvision
    import torchvision.transforms as T
    torch.set_num_threads(1)
    for b in ("shardc", "shardc-mksample", "shardbench"):
        if not os.access(os.path.join(BIN, b), os.X_OK):
            sys.exit(f"bench-rrc: {BIN}/{b} is missing (make BUILD={BUILD} all)")
    os.makedirs(W, exist_ok=True)
    ds = build(benchlib.photos(W, BIN, PER))
    man = json.load(open(os.path.join(ds, "manifest.json")))
    mean, std = man["stats"]["mean"], man["stats"]["std"]
    cores = os.cpu_count()

    variants = [
        ("plain", "stored pixels, center crop 224 (no transform)", []),
        ("rrc u8", "RRC(224) + flip, uint8 NHWC", ["--rrc", "--flip"]),
        ("rrc f32", "RRC(224) + flip + normalise, float32 NCHW",
         ["--rrc", "--flip", "--dtype", "f32", "--layout", "nchw", "--normalize", "dataset"]),
        ("rrc f16", "RRC(224) + flip + normalise, float16 NCHW",
         ["--rrc", "--flip", "--dtype", "f16", "--layout", "nchw", "--normalize", "dataset"]),
    ]
    ours = {}
    for threads in sorted({1, cores}):
        for key, _, extra in variants:
            log(f"libshardread {key}, {threads} thread(s), {REPS} runs")
            rows = [shardbench(ds, threads, extra) for _ in range(REPS)]
            ours[key, threads] = (statistics.median(r["images_per_s"] for r in rows),
                                  statistics.median(r["cpu_s_per_image"] for r in rows))

    log("torchvision: loading the stored images into memory")
    imgs = benchlib.stored_images(ds, BIN)
    rrc = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])
    rrc_norm = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize([m / 255 for m in mean], [s / 255 for s in std])])
    torch.manual_seed(0)
    log("torchvision: RRC + flip")
    tv_rrc, tv_rrc_cpu = torchvision_rate(imgs, rrc, REPS)
    log("torchvision: RRC + flip + ToTensor + Normalize")
    tv_norm, tv_norm_cpu = torchvision_rate(imgs, rrc_norm, REPS)

    sizes = sorted({(im.width, im.height) for im in imgs})
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    out = []
    p = out.append
    p("# Read-time RandomResizedCrop: libshardread vs torchvision\n")
    p(f"{len(imgs)} photo-like JPEGs stored by `shardc build --short-side 256 --max-side 512` "
      f"({len(sizes)} distinct sizes, {min(s[0] * s[1] for s in sizes)}.."
      f"{max(s[0] * s[1] for s in sizes)} pixels); output 224x224; {cores} core(s), {cpu}; "
      f"torch {torch.__version__}, torchvision {torchvision.__version__}. libshardread: "
      f"`shardbench read --order random --batch 256`, epochs 2..{EPOCHS}; torchvision: one "
      f"thread over the same stored images held in memory as PIL images. Medians of {REPS} runs; "
      f"FFCV: its published 172,801 images/s on 96 vCPUs = {FFCV_PER_VCPU:,.0f} per vCPU.\n")
    p("Per core is 1 / (CPU-seconds per image): the work one core does, whatever else runs on the "
      "machine; the ratios compare per-core rates measured in this run.\n")
    p("| path | threads | images/s | CPU-us/image | per core images/s | vs torchvision (same work) | "
      "vs FFCV per vCPU |")
    p("|---|---:|---:|---:|---:|---:|---:|")
    tv_core = {"rrc u8": 1 / tv_rrc_cpu, "rrc f32": 1 / tv_norm_cpu, "rrc f16": 1 / tv_norm_cpu}
    for key, name, _ in variants:
        for threads in sorted({1, cores}):
            ips, cpu_s = ours[key, threads]
            core = 1 / cpu_s
            vs_tv = f"{core / tv_core[key]:.1f}x" if key in tv_core else ""
            vs_ffcv = f"{core / FFCV_PER_VCPU:.1f}x" if key != "plain" else ""
            p(f"| libshardread: {name} | {threads} | {ips:,.0f} | {cpu_s * 1e6:.0f} | {core:,.0f} | "
              f"{vs_tv} | {vs_ffcv} |")
    p(f"| torchvision: RandomResizedCrop + RandomHorizontalFlip | 1 | {tv_rrc:,.0f} | "
      f"{tv_rrc_cpu * 1e6:.0f} | {1 / tv_rrc_cpu:,.0f} | 1.0x | {1 / tv_rrc_cpu / FFCV_PER_VCPU:.1f}x |")
    p(f"| torchvision: ... + ToTensor + Normalize | 1 | {tv_norm:,.0f} | {tv_norm_cpu * 1e6:.0f} | "
      f"{1 / tv_norm_cpu:,.0f} | 1.0x | {1 / tv_norm_cpu / FFCV_PER_VCPU:.1f}x |")
    u8, f32, f16 = (1 / ours[k, 1][1] for k in ("rrc u8", "rrc f32", "rrc f16"))
    p("")
    p(f"Per core: RRC+flip {u8 * tv_rrc_cpu:.1f}x torchvision (target 5x) and "
      f"{u8 / FFCV_PER_VCPU:.1f}x FFCV per vCPU (target 3x); normalised float32 NCHW costs "
      f"{u8 / f32:.2f}x and float16 {u8 / f16:.2f}x the CPU time of uint8 (target at most 1.5x); "
      f"torchvision's ToTensor+Normalize costs {tv_norm_cpu / tv_rrc_cpu:.2f}x its RRC+flip. "
      f"Plain reads (no transform): {1 / ours['plain', 1][1]:,.0f} images/s per core.")
    text = "\n".join(out) + "\n"
    with open(os.path.join(W, "rrc.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    log(f"table written to {W}/rrc.md")


if __name__ == "__main__":
    main()
