#!/usr/bin/env python3
"""bench-augment.py - read-time augmentations in libshardread against torchvision, per thread.

    BUILD=build BENCH_DIR=.bench /usr/bin/python3 scripts/bench-augment.py
    BUILD=build python3 scripts/bench-augment.py --build-harness PATH   (compile the harness only)

One run, the same pixels: photo-like JPEGs (shardc-mksample --photo, shared with the other
benchmarks in $BENCH_DIR/photos) compiled with `shardc build --short-side 256 --max-side 512`.
A small C harness (written and compiled here, linked with $BUILD/libshardread.a) reads 256
samples through RandomResizedCrop(224) + flip and writes them out; then, one thread each:

  ops        each op alone on those 224x224 images: the ColorJitter ops and ColorJitter(0.4,
             0.4, 0.4, 0.1) with its draws; RandomRotation/RandomAffine's warps (nearest and
             bilinear); every TrivialAugmentWide op at a mid magnitude, and TrivialAugmentWide /
             RandAugment(2, 9) with their draws: libshardread's kernels against torchvision's
             functional ops (Pillow) on the same images as PIL images
  reader     whole epochs through shr_next with one worker thread: RRC(224) + flip (uint8
             NHWC); the same + ColorJitter(0.4, 0.4, 0.4, 0.1); the same + RandomAffine(15,
             (0.1, 0.1), (0.9, 1.1), 10); torchvision's recipe RRC(176) + flip +
             TrivialAugmentWide + ToTensor + Normalize + RandomErasing(0.1) (float32 NCHW);
             RRC(224) + flip + RandAugment(2, 9) + ToTensor + Normalize; RRC(224) + flip +
             ColorJitter(0.2, 0.2, 0.2, 0.1) + ToTensor + Normalize; torchvision: the same
             transforms on the stored images decoded in memory as PIL images

libshardread runs twice: with its vector kernels (AVX2, where the CPU has it) and with
SHARDREAD_SIMD=0, its plain C paths (the same bytes). Images/s, medians of REPS runs. Writes a
markdown table to stdout and to $BENCH_DIR/augment.md. Not a test: numbers depend on the machine.

Knobs (environment): BUILD (default build), BENCH_DIR (default .bench), REPS (default 5; the
torchvision reader pipelines run max(1, REPS // 2) times, after one warm-up pass each), BIN (the
folder of shardc and shardc-mksample, default $BUILD/bin), HARNESS (a harness built earlier with
--build-harness, e.g. on a machine without the libraries' headers: used as is, nothing is
compiled), PLAIN=0 (skip the SHARDREAD_SIMD=0 rerun: the table has no plain C column), PER
(photos per class, 4 classes, default 225, at least 64: the ops need 256 samples; a PER other
than 225 has its own photos and dataset, $BENCH_DIR/photos-PER and aug256-PER).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib

BUILD = os.environ.get("BUILD", "build")
W = os.environ.get("BENCH_DIR", ".bench")
BIN = os.environ.get("BIN") or os.path.join(BUILD, "bin")
REPS = int(os.environ.get("REPS", "5"))
PER = int(os.environ.get("PER", "225"))
PLAIN = os.environ.get("PLAIN", "1") != "0"
N = 256

HARNESS_C = r"""
#include "affine.h"
#include "autoaugment.h"
#include "color.h"
#include "enhance.h"
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

/* 0 RRC(224) + flip; 1 + ColorJitter; 2 + RandomAffine; 3 the TrivialAugment recipe at 176;
 * 4 RandAugment(2, 9) + normalise; 5 ColorJitter(0.2, 0.2, 0.2, 0.1) + normalise */
static shr_options opts(int mode)
{
    shr_options o;
    shr_options_init(&o);
    o.batch_size = 256; o.order = SHR_ORDER_RANDOM; o.seed = 1; o.threads = 1;
    o.rrc = 1; o.flip = 1; o.width = 224; o.height = 224;
    if (mode == 1) {
        o.jitter_brightness[0] = o.jitter_contrast[0] = o.jitter_saturation[0] = 0.6;
        o.jitter_brightness[1] = o.jitter_contrast[1] = o.jitter_saturation[1] = 1.4;
        o.jitter_hue[0] = -0.1; o.jitter_hue[1] = 0.1;
    }
    if (mode == 2) {
        o.affine = 1;
        o.affine_degrees[0] = -15; o.affine_degrees[1] = 15;
        o.affine_translate[0] = o.affine_translate[1] = 0.1;
        o.affine_scale[0] = 0.9; o.affine_scale[1] = 1.1;
        o.affine_shear[0] = -10; o.affine_shear[1] = 10;
    }
    if (mode == 5) {
        o.jitter_brightness[0] = o.jitter_contrast[0] = o.jitter_saturation[0] = 0.8;
        o.jitter_brightness[1] = o.jitter_contrast[1] = o.jitter_saturation[1] = 1.2;
        o.jitter_hue[0] = -0.1; o.jitter_hue[1] = 0.1;
    }
    if (mode >= 3) {
        if (mode < 5)
            o.auto_augment = mode == 3 ? SHR_AUTO_AUGMENT_TRIVIAL_WIDE : SHR_AUTO_AUGMENT_RAND;
        if (mode == 3) {
            o.width = o.height = 176;
            o.erase_p = 0.1;
        }
        o.dtype = SHR_DTYPE_F32; o.layout = SHR_LAYOUT_NCHW; o.normalize = SHR_NORM_GIVEN;
        const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f, 57.375f};
        memcpy(o.mean, mean, sizeof mean);
        memcpy(o.std, sd, sizeof sd);
    }
    return o;
}

static const char *names[] = {
    "brightness", "contrast", "saturation", "hue", "jitter",
    "rotate_nearest", "rotate_bilinear", "affine_nearest", "affine_bilinear",
    "aa_ShearX", "aa_TranslateX", "aa_Rotate", "aa_Brightness", "aa_Color", "aa_Contrast",
    "aa_Sharpness", "aa_Posterize", "aa_Solarize", "aa_AutoContrast", "aa_Equalize",
    "ta_wide", "rand_augment",
};
#define NOPS (int)(sizeof names / sizeof names[0])
static const int aa_ops[] = {SHR_AA_SHEAR_X, SHR_AA_TRANSLATE_X, SHR_AA_ROTATE, SHR_AA_BRIGHTNESS,
                             SHR_AA_COLOR, SHR_AA_CONTRAST, SHR_AA_SHARPNESS, SHR_AA_POSTERIZE,
                             SHR_AA_SOLARIZE, SHR_AA_AUTOCONTRAST, SHR_AA_EQUALIZE};
static const double aa_mags[] = {0.5, 16, 60, 0.5, 0.5, 0.5, 0.5, 4, 128, 0, 0};

int main(int argc, char **argv)
{
    if (shr_simd_env_plain(getenv))     /* SHARDREAD_SIMD=0: the plain C paths */
        shr_set_simd(0);
    const char *ds = argv[2];
    int reps = atoi(argv[3]);
    if (!strcmp(argv[1], "dump")) {          /* 256 RRC samples to stdout */
        shr_options o = opts(0);
        shr_reader *r;
        shr_msg why;
        if (shr_open(&r, ds, &o, &why)) { fprintf(stderr, "%s\n", why.text); return 1; }
        const shr_batch *b;
        if (shr_next(r, &b)) return 1;
        fwrite(b->data, 1, (size_t)b->n * 224 * 224 * 3, stdout);
        shr_release(r, b);
        shr_close(r);
        return 0;
    }
    if (!strcmp(argv[1], "ops")) {           /* argv[2]: the dumped images */
        size_t one = 224 * 224 * 3;
        uint8_t *all = malloc(one * 256), *buf = malloc(one), *tmp = malloc(one);
        FILE *f = fopen(ds, "rb");
        if (!f || fread(all, 1, one * 256, f) != one * 256) return 1;
        fclose(f);
        shr_options o = opts(1);
        shr_color_jitter j;
        shr_color_jitter_init(&j, &o);
        shr_options ta = opts(3), ra = opts(4);
        shr_aa tat, rat;
        shr_aa_init(&tat, &ta);
        shr_aa_init(&rat, &ra);
        const uint8_t fill[4] = {0, 0, 0, 0};
        for (int op = 0; op < NOPS; op++) {
            double best[64];
            for (int rep = 0; rep < reps && rep < 64; rep++) {
                double t = now();
                for (int i = 0; i < 256; i++) {
                    const uint8_t *src = all + one * i;
                    if (op < 5 || op >= 9)
                        memcpy(buf, src, one);
                    shr_params p;
                    switch (op) {
                    case 0: fmt_color_brightness(buf, 224, 224, 3, 672, 1.3f); break;
                    case 1: fmt_color_contrast(buf, 224, 224, 3, 672, 0.7f); break;
                    case 2: fmt_color_saturation(buf, 224, 224, 3, 672, 1.3f); break;
                    case 3: fmt_color_hue(buf, 224, 224, 3, 672, 0.07); break;
                    case 4:
                        shr_color_jitter_draw(&j, 1, 0, (uint64_t)i, &p);
                        shr_color_jitter_apply(&p, buf, 224, 224, 3, 672);
                        break;
                    case 5: case 6:
                        shr_affine_rotate(src, 672, buf, 672, 224, 224, 3, 17.3,
                                          op == 5 ? SHR_FILTER_NEAREST : SHR_FILTER_BILINEAR,
                                          fill);
                        break;
                    case 7: case 8:
                        shr_affine_apply(src, 672, buf, 672, 224, 224, 3, 10.5, 5, -3, 1.05, 7,
                                         0, NULL, op == 7 ? SHR_FILTER_NEAREST
                                                          : SHR_FILTER_BILINEAR, fill);
                        break;
                    case 20: case 21: {
                        const shr_aa *t = op == 20 ? &tat : &rat;
                        shr_aa_draw(t, 1, 0, (uint64_t)i, 224, 224, &p);
                        shr_aa_apply(t, &p, buf, 224, 224, 3, 672, tmp);
                        break;
                    }
                    default:
                        shr_aa_apply_op(aa_ops[op - 9], aa_mags[op - 9], SHR_FILTER_NEAREST,
                                        fill, buf, 224, 224, 3, 672, tmp);
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
    static const char *modes[] = {"reader_rrc", "reader_jitter", "reader_affine", "reader_ta",
                                  "reader_ra", "reader_seed"};
    for (int mode = 0; mode < 6; mode++)
        for (int rep = 0; rep < reps; rep++) {
            shr_options o = opts(mode);
            shr_reader *r;
            shr_msg why;
            if (shr_open(&r, ds, &o, &why)) { fprintf(stderr, "%s\n", why.text); return 1; }
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
            printf("%s %f\n", modes[mode], n / (now() - t));
            shr_close(r);
        }
    return 0;
}
"""


def log(msg):
    print(f"bench-augment: {msg}", file=sys.stderr, flush=True)


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def dataset(src):
    out = os.path.join(W, "aug256" if PER == 225 else f"aug256-{PER}")
    if not os.path.isfile(os.path.join(out, "manifest.json")):
        sh(f"{BIN}/shardc", "build", src, "-o", out, "--short-side", "256", "--max-side", "512",
           "-j", str(os.cpu_count()), "--no-progress", stdout=subprocess.DEVNULL)
    return out


def build_harness(exe):
    """Compiles the harness into exe, linked with $BUILD/libshardread.a and the libraries it
    needs (dynamically: a machine that runs it needs those shared libraries, not their headers)."""
    with tempfile.TemporaryDirectory() as tmp:
        c = os.path.join(tmp, "harness.c")
        with open(c, "w") as f:
            f.write(HARNESS_C)
        libs = subprocess.run(["make", "-s", f"BUILD={BUILD}", "print-read-libs"], check=True,
                              stdout=subprocess.PIPE, text=True).stdout.split()
        sh("cc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-Iinclude", "-Ireader", "-Iformats",
           "-Ipixels", c, "-o", exe, os.path.join(BUILD, "libshardread.a"), *libs)
    return exe


def harness(tmp):
    exe = os.environ.get("HARNESS")
    if exe:
        if not os.access(exe, os.X_OK):
            sys.exit(f"bench-augment: HARNESS={exe} is not an executable")
        return exe
    return build_harness(os.path.join(tmp, "harness"))


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


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--build-harness":
        build_harness(sys.argv[2])
        return
    if len(sys.argv) > 1:
        sys.exit(__doc__.split("\n\n")[0] + "\n" + __doc__.split("\n\n")[1])
    if PER < 64:
        sys.exit("bench-augment: PER must be at least 64 (the ops need 256 samples)")
    import numpy as np
    import torch
    import torchvision
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image
    torch.set_num_threads(1)
    os.makedirs(W, exist_ok=True)
    t0 = time.perf_counter()
    # a PER other than the shared photos' has its own folder: the other benchmarks keep theirs
    ds = dataset(benchlib.photos(W, BIN, PER, "photos" if PER == 225 else f"photos-{PER}"))
    log(f"dataset {ds} ready after {time.perf_counter() - t0:.1f}s")
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
        plain = None
        if PLAIN:
            log(f"libshardread plain C paths (SHARDREAD_SIMD=0), {REPS} runs")
            env = dict(os.environ, SHARDREAD_SIMD="0")
            plain = rates(sh(exe, "ops", raw, str(REPS), stdout=subprocess.PIPE, text=True,
                             env=env).stdout)
            plain.update(rates(sh(exe, "reader", ds, str(REPS), stdout=subprocess.PIPE,
                                  text=True, env=env).stdout))
        a = np.fromfile(raw, dtype=np.uint8).reshape(N, 224, 224, 3)
    log(f"libshardread done after {time.perf_counter() - t0:.1f}s; torchvision ops, {REPS} runs")
    imgs = [Image.fromarray(x, "RGB") for x in a]
    import torchvision.transforms.autoaugment as A
    torch.manual_seed(0)
    cj = T.ColorJitter(0.4, 0.4, 0.4, 0.1)
    NEAREST, BILINEAR = T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR
    theirs = {
        "brightness": tv_rate(imgs, lambda im: F.adjust_brightness(im, 1.3), REPS),
        "contrast": tv_rate(imgs, lambda im: F.adjust_contrast(im, 0.7), REPS),
        "saturation": tv_rate(imgs, lambda im: F.adjust_saturation(im, 1.3), REPS),
        "hue": tv_rate(imgs, lambda im: F.adjust_hue(im, 0.07), REPS),
        "jitter": tv_rate(imgs, cj, REPS),
        "rotate_nearest": tv_rate(imgs, lambda im: F.rotate(im, 17.3, NEAREST, fill=0), REPS),
        "rotate_bilinear": tv_rate(imgs, lambda im: F.rotate(im, 17.3, BILINEAR, fill=0), REPS),
        "affine_nearest": tv_rate(imgs, lambda im: F.affine(im, 10.5, [5, -3], 1.05, [7.0, 0.0],
                                                            NEAREST, 0), REPS),
        "affine_bilinear": tv_rate(imgs, lambda im: F.affine(im, 10.5, [5, -3], 1.05,
                                                             [7.0, 0.0], BILINEAR, 0), REPS),
        "ta_wide": tv_rate(imgs, T.TrivialAugmentWide(), REPS),
        "rand_augment": tv_rate(imgs, T.RandAugment(), REPS),
    }
    for name, m in (("ShearX", 0.5), ("TranslateX", 16.0), ("Rotate", 60.0),
                    ("Brightness", 0.5), ("Color", 0.5), ("Contrast", 0.5), ("Sharpness", 0.5),
                    ("Posterize", 4.0), ("Solarize", 128.0), ("AutoContrast", 0.0),
                    ("Equalize", 0.0)):
        theirs["aa_" + name] = tv_rate(
            imgs, lambda im, n=name, v=m: A._apply_op(im, n, v, NEAREST, None), REPS)
    log(f"torchvision reader-equivalent pipelines on the stored images, after "
        f"{time.perf_counter() - t0:.1f}s")
    stored = benchlib.stored_images(ds, BIN)
    norm = [T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
    rrc = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])
    rrc_cj = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), cj])
    rrc_aff = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                         T.RandomAffine(15, (0.1, 0.1), (0.9, 1.1), 10)])
    rrc_ta = T.Compose([T.RandomResizedCrop(176), T.RandomHorizontalFlip(),
                        T.TrivialAugmentWide()] + norm + [T.RandomErasing(0.1)])
    rrc_ra = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                        T.RandAugment()] + norm)
    rrc_seed = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                          T.ColorJitter(0.2, 0.2, 0.2, 0.1)] + norm)
    half = max(1, REPS // 2)
    theirs["reader_rrc"] = tv_rate(stored, rrc, half)
    theirs["reader_jitter"] = tv_rate(stored, rrc_cj, half)
    theirs["reader_affine"] = tv_rate(stored, rrc_aff, half)
    theirs["reader_ta"] = tv_rate(stored, rrc_ta, half)
    theirs["reader_ra"] = tv_rate(stored, rrc_ra, half)
    theirs["reader_seed"] = tv_rate(stored, rrc_seed, half)
    rows = [("brightness", "F.adjust_brightness(1.3), 224x224"),
            ("contrast", "F.adjust_contrast(0.7), 224x224"),
            ("saturation", "F.adjust_saturation(1.3), 224x224"),
            ("hue", "F.adjust_hue(0.07), 224x224"),
            ("jitter", "ColorJitter(0.4, 0.4, 0.4, 0.1), 224x224"),
            ("rotate_nearest", "F.rotate(17.3, nearest), 224x224"),
            ("rotate_bilinear", "F.rotate(17.3, bilinear), 224x224"),
            ("affine_nearest", "F.affine(10.5, (5, -3), 1.05, 7, nearest), 224x224"),
            ("affine_bilinear", "F.affine(10.5, (5, -3), 1.05, 7, bilinear), 224x224")]
    for name, m in (("ShearX", "0.5"), ("TranslateX", "16"), ("Rotate", "60"),
                    ("Brightness", "0.5"), ("Color", "0.5"), ("Contrast", "0.5"),
                    ("Sharpness", "0.5"), ("Posterize", "4"), ("Solarize", "128"),
                    ("AutoContrast", ""), ("Equalize", "")):
        rows.append(("aa_" + name, f"_apply_op {name}({m}), 224x224"))
    rows += [("ta_wide", "TrivialAugmentWide(), 224x224"),
             ("rand_augment", "RandAugment(2, 9), 224x224"),
             ("reader_rrc", "RRC(224) + flip from stored images (reader, 1 worker)"),
             ("reader_jitter", "RRC(224) + flip + ColorJitter(0.4, 0.4, 0.4, 0.1) (reader)"),
             ("reader_affine", "RRC(224) + flip + RandomAffine(15, 0.1, (0.9, 1.1), 10) (reader)"),
             ("reader_ta", "RRC(176) + flip + TrivialAugmentWide + ToTensor + Normalize + "
                           "RandomErasing(0.1) (reader, float32 NCHW)"),
             ("reader_ra", "RRC(224) + flip + RandAugment(2, 9) + ToTensor + Normalize "
                           "(reader, float32 NCHW)"),
             ("reader_seed", "RRC(224) + flip + ColorJitter(0.2, 0.2, 0.2, 0.1) + ToTensor + "
                             "Normalize (reader, float32 NCHW)")]
    tv = f"torchvision {torchvision.__version__.split('+')[0]} (PIL)"
    if plain is not None:
        out = [f"| per thread, images/s | libshardread | plain C paths | {tv} | ratio |",
               "|---|---:|---:|---:|---:|"]
    else:
        out = [f"| per thread, images/s | libshardread | {tv} | ratio |", "|---|---:|---:|---:|"]
    for k, name in rows:
        mid = f" {plain[k]:,.0f} |" if plain is not None else ""
        out.append(f"| {name} | {ours[k]:,.0f} |{mid} {theirs[k]:,.0f} "
                   f"| {ours[k] / theirs[k]:.1f}x |")
    text = "\n".join(out) + "\n"
    log(f"done after {time.perf_counter() - t0:.1f}s")
    print(text)
    with open(os.path.join(W, "augment.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
