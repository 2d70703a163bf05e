#!/usr/bin/env python3
"""bench-augment.py - read-time ColorJitter in libshardread against torchvision, per thread.

    BUILD=build BENCH_DIR=.bench /usr/bin/python3 scripts/bench-augment.py

One run, the same pixels: photo-like JPEGs (shardc-mksample --photo, shared with the other
benchmarks in $BENCH_DIR/photos) compiled with `shardc build --short-side 256 --max-side 512`.
A small C harness (written and compiled here, linked with $BUILD/libshardread.a) reads 256
samples through RandomResizedCrop(224) + flip and writes them out; then, one thread each:

  ops        each ColorJitter op alone on those 224x224 images, and ColorJitter(0.4, 0.4, 0.4,
             0.1) with its draws: libshardread's kernels against torchvision's functional ops
             (Pillow) on the same images as PIL images
  reader     whole epochs through shr_next with one worker thread, uint8 NHWC: RRC(224) + flip,
             and the same + ColorJitter(0.4, 0.4, 0.4, 0.1); torchvision: RRC(224) + flip
             (+ ColorJitter) on the stored images decoded in memory as PIL images

Images/s, medians of REPS runs. Writes a markdown table to stdout and to
$BENCH_DIR/augment.md. Not a test: numbers depend on the machine.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
W = os.environ.get("BENCH_DIR", ".bench")
BIN = os.path.join(BUILD, "bin")
REPS = int(os.environ.get("REPS", "5"))
PER = 225
N = 256

HARNESS = r"""
#include "color.h"
#include "shardread.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static shr_options opts(int jitter)
{
    shr_options o;
    shr_options_init(&o);
    o.batch_size = 256; o.order = SHR_ORDER_RANDOM; o.seed = 1; o.threads = 1;
    o.rrc = 1; o.flip = 1; o.width = 224; o.height = 224;
    if (jitter) {
        o.jitter_brightness[0] = o.jitter_contrast[0] = o.jitter_saturation[0] = 0.6;
        o.jitter_brightness[1] = o.jitter_contrast[1] = o.jitter_saturation[1] = 1.4;
        o.jitter_hue[0] = -0.1; o.jitter_hue[1] = 0.1;
    }
    return o;
}

int main(int argc, char **argv)
{
    const char *ds = argv[2];
    int reps = atoi(argv[3]);
    if (!strcmp(argv[1], "dump")) {          /* 256 RRC samples to stdout */
        shr_options o = opts(0);
        shr_reader *r;
        if (shr_open(&r, ds, &o)) { fprintf(stderr, "%s\n", shr_last_error(NULL)); return 1; }
        const shr_batch *b;
        if (shr_next(r, &b)) return 1;
        fwrite(b->data, 1, (size_t)b->n * 224 * 224 * 3, stdout);
        shr_release(r, b);
        shr_close(r);
        return 0;
    }
    if (!strcmp(argv[1], "ops")) {           /* argv[2]: the dumped images */
        size_t one = 224 * 224 * 3;
        uint8_t *all = malloc(one * 256), *buf = malloc(one);
        FILE *f = fopen(ds, "rb");
        if (!f || fread(all, 1, one * 256, f) != one * 256) return 1;
        fclose(f);
        shr_options o = opts(1);
        shr_color_jitter j;
        shr_color_jitter_init(&j, &o);
        const char *names[] = {"brightness", "contrast", "saturation", "hue", "jitter"};
        for (int op = 0; op < 5; op++) {
            double best[64];
            for (int rep = 0; rep < reps && rep < 64; rep++) {
                double t = now();
                for (int i = 0; i < 256; i++) {
                    memcpy(buf, all + one * i, one);
                    switch (op) {
                    case 0: shr_color_brightness(buf, 224, 224, 3, 672, 1.3f); break;
                    case 1: shr_color_contrast(buf, 224, 224, 3, 672, 0.7f); break;
                    case 2: shr_color_saturation(buf, 224, 224, 3, 672, 1.3f); break;
                    case 3: shr_color_hue(buf, 224, 224, 3, 672, 0.07); break;
                    default: {
                        shr_params p;
                        shr_color_jitter_draw(&j, 1, 0, (uint64_t)i, &p);
                        shr_color_jitter_apply(&p, buf, 224, 224, 3, 672);
                    }
                    }
                }
                best[rep] = 256 / (now() - t);
            }
            for (int rep = 0; rep < reps; rep++)
                printf("%s %f\n", names[op], best[rep]);
        }
        return 0;
    }
    /* reader: img/s of epochs 2..3 with one worker */
    for (int jit = 0; jit < 2; jit++)
        for (int rep = 0; rep < reps; rep++) {
            shr_options o = opts(jit);
            shr_reader *r;
            if (shr_open(&r, ds, &o)) { fprintf(stderr, "%s\n", shr_last_error(NULL)); return 1; }
            const shr_batch *b;
            double t = 0;
            uint64_t n = 0;
            for (int e = 0; e < 3; e++) {
                if (e == 1)
                    t = now();
                while (shr_next(r, &b) == 0) {
                    if (e >= 1)
                        n += b->n;
                    shr_release(r, b);
                }
            }
            printf("%s %f\n", jit ? "reader_jitter" : "reader_rrc", n / (now() - t));
            shr_close(r);
        }
    return 0;
}
"""


def log(msg):
    print(f"bench-augment: {msg}", file=sys.stderr, flush=True)


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def photos():
    d, stamp = os.path.join(W, "photos"), os.path.join(W, "photos.stamp")
    if not (os.path.isdir(d) and os.path.isfile(stamp) and open(stamp).read().strip() == str(PER)):
        sh("rm", "-rf", d)
        sh(f"{BIN}/shardc-mksample", d, "--photo", "--classes", "4", "--per-class", str(PER),
           "--seed", "1", "--quiet")
        with open(stamp, "w") as f:
            f.write(f"{PER}\n")
    return d


def dataset(src):
    out = os.path.join(W, "aug256")
    if not os.path.isfile(os.path.join(out, "manifest.json")):
        sh(f"{BIN}/shardc", "build", src, "-o", out, "--short-side", "256", "--max-side", "512",
           "-j", str(os.cpu_count()), "--no-progress", stdout=subprocess.DEVNULL)
    return out


def harness(tmp):
    c = os.path.join(tmp, "harness.c")
    with open(c, "w") as f:
        f.write(HARNESS)
    libs = subprocess.run(["make", "-s", f"BUILD={BUILD}", "print-read-libs"], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.split()
    exe = os.path.join(tmp, "harness")
    sh("cc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-Ireader", "-Iformats", c, "-o", exe,
       os.path.join(BUILD, "libshardread.a"), *libs)
    return exe


def rates(lines):
    out = {}
    for line in lines.splitlines():
        k, v = line.split()
        out.setdefault(k, []).append(float(v))
    return {k: statistics.median(v) for k, v in out.items()}


def tv_rate(imgs, fn, reps):
    got = []
    for r in range(reps + 1):
        t = time.perf_counter()
        for im in imgs:
            fn(im)
        if r:
            got.append(len(imgs) / (time.perf_counter() - t))
    return statistics.median(got)


def stored_images(ds):
    import io
    import json
    from PIL import Image
    n = json.load(open(os.path.join(ds, "manifest.json")))["samples"]
    imgs = []
    for i in range(n):
        ppm = subprocess.run([f"{BIN}/shardc", "cat", ds, str(i)], check=True,
                             stdout=subprocess.PIPE).stdout
        im = Image.open(io.BytesIO(ppm))
        im.load()
        imgs.append(im)
    return imgs


def main():
    import numpy as np
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image
    torch.set_num_threads(1)
    os.makedirs(W, exist_ok=True)
    ds = dataset(photos())
    with tempfile.TemporaryDirectory() as tmp:
        exe = harness(tmp)
        raw = os.path.join(tmp, "rrc.raw")
        with open(raw, "wb") as f:
            sh(exe, "dump", ds, "1", stdout=f)
        log(f"libshardread ops, {REPS} runs")
        ours = rates(sh(exe, "ops", raw, str(REPS), stdout=subprocess.PIPE, text=True).stdout)
        log(f"libshardread reader, {REPS} runs")
        ours.update(rates(sh(exe, "reader", ds, str(REPS), stdout=subprocess.PIPE,
                             text=True).stdout))
        a = np.fromfile(raw, dtype=np.uint8).reshape(N, 224, 224, 3)
    imgs = [Image.fromarray(x, "RGB") for x in a]
    torch.manual_seed(0)
    cj = T.ColorJitter(0.4, 0.4, 0.4, 0.1)
    theirs = {
        "brightness": tv_rate(imgs, lambda im: F.adjust_brightness(im, 1.3), REPS),
        "contrast": tv_rate(imgs, lambda im: F.adjust_contrast(im, 0.7), REPS),
        "saturation": tv_rate(imgs, lambda im: F.adjust_saturation(im, 1.3), REPS),
        "hue": tv_rate(imgs, lambda im: F.adjust_hue(im, 0.07), REPS),
        "jitter": tv_rate(imgs, cj, REPS),
    }
    log("torchvision reader-equivalent pipelines on the stored images")
    stored = stored_images(ds)
    rrc = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])
    rrc_cj = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), cj])
    theirs["reader_rrc"] = tv_rate(stored, rrc, max(1, REPS // 2))
    theirs["reader_jitter"] = tv_rate(stored, rrc_cj, max(1, REPS // 2))
    rows = [("brightness", "F.adjust_brightness(1.3), 224x224"),
            ("contrast", "F.adjust_contrast(0.7), 224x224"),
            ("saturation", "F.adjust_saturation(1.3), 224x224"),
            ("hue", "F.adjust_hue(0.07), 224x224"),
            ("jitter", "ColorJitter(0.4, 0.4, 0.4, 0.1), 224x224"),
            ("reader_rrc", "RRC(224) + flip from stored images (reader, 1 worker)"),
            ("reader_jitter", "RRC(224) + flip + ColorJitter(0.4, 0.4, 0.4, 0.1) (reader)")]
    out = ["| per thread, images/s | libshardread | torchvision 0.14 (PIL) | ratio |",
           "|---|---:|---:|---:|"]
    for k, name in rows:
        out.append(f"| {name} | {ours[k]:,.0f} | {theirs[k]:,.0f} | {ours[k] / theirs[k]:.1f}x |")
    text = "\n".join(out) + "\n"
    print(text)
    with open(os.path.join(W, "augment.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
