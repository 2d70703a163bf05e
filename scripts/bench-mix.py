#!/usr/bin/env python3
"""bench-mix.py - a two-stream mixture Loader against a single-dataset Loader of the same total
data, in the same run: the rate of each (samples/s over whole epochs), medians of several
alternating runs, their spread, and the ratio (of the medians and of each alternating pair;
docs/BENCHMARKS.md, "Mixtures").

    BUILD=build /usr/bin/python3 scripts/bench-mix.py [--samples 6000] [--runs 7] [--size 64]

The data: one source folder of synthetic images built three times at --size: "all" (every
image), "a" (the first 70%) and "b" (the rest), so Loader([(a, 0.7), (b, 0.3)]) and Loader(all)
read the same pixels, the same number of samples an epoch, in random order, with the same
threads and batch size. Not a test: it prints figures; nothing is asserted.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
sys.path.insert(0, os.path.join(BUILD, "python"))
import shardread  # noqa: E402


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def rate(loader, epochs):
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for images, _ in loader:
            n += len(images)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=6000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", help="build the datasets here and keep them")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="bench-mix.")
    bins = os.path.join(BUILD, "bin")
    try:
        src, lst = os.path.join(root, "src"), os.path.join(root, "list.txt")
        if not os.path.isdir(os.path.join(root, "all")):
            per = -(-args.samples // 4)
            run(os.path.join(bins, "shardc-mksample"), src, "--classes", "4", "--per-class",
                str(per), "--no-broken", "--quiet", "--list", lst, "--min-side",
                str(args.size), "--max-side", str(2 * args.size))
            with open(lst) as f:
                lines = f.readlines()[:args.samples]
            cut = int(len(lines) * 0.7)
            for name, part in (("all", lines), ("a", lines[:cut]), ("b", lines[cut:])):
                pl = os.path.join(root, f"{name}.txt")
                with open(pl, "w") as f:
                    f.writelines(part)
                run(os.path.join(bins, "shardc"), "build", src, "--list", pl, "-o",
                    os.path.join(root, name), "--size", f"{args.size}x{args.size}",
                    "--no-progress", "-j", "2")
        a, b, whole = (os.path.join(root, x) for x in ("a", "b", "all"))
        kw = dict(batch_size=args.batch, shuffle=True, threads=args.threads, pin_memory=False)
        single = shardread.Loader(whole, **kw)
        mixed = shardread.Loader([(a, 0.7), (b, 0.3)], **kw)
        assert single.info["samples"] == mixed.info["samples"] == args.samples
        rate(single, 1)     # warm the page cache and both rings
        rate(mixed, 1)
        one, two = [], []
        for _ in range(args.runs):
            one.append(rate(single, args.epochs))
            two.append(rate(mixed, args.epochs))
        m1, m2 = statistics.median(one), statistics.median(two)
        ratios = [y / x for x, y in zip(one, two)]      # each alternating pair's own ratio

        def spread(v):
            q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
            return f"min {min(v):.0f}, quartiles {q[0]:.0f} .. {q[2]:.0f}, max {max(v):.0f}"
        print(f"samples {args.samples} of {args.size}x{args.size} RGB, batch {args.batch}, "
              f"threads {args.threads}, random order, {args.epochs} epochs a run, "
              f"{args.runs} alternating runs")
        print(f"single dataset   median {m1:10.0f} samples/s  ({spread(one)})")
        print(f"two-stream mix   median {m2:10.0f} samples/s  ({spread(two)})")
        print(f"mixture / single {m2 / m1:.3f} (medians); per pair: median "
              f"{statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
