#!/usr/bin/env python3
"""What the Python layer costs per batch: shardread.Loader epochs from two builds of the module
(e.g. the package over the stable-ABI extension against an older all-C module) and the C reader
itself (shardbench read), interleaved in one run, medians reported.

    scripts/bench-pylayer.py DATASET --module NAME=PYTHONPATH [--module ...] [--shardbench BIN]
                             [--batch 256] [--threads 1,2] [--reps 5] [--framework numpy|torch]

Each measurement runs in a fresh interpreter (python3 -c ...) that imports shardread from the
given PYTHONPATH, reads one warm-up epoch, then times `--epochs` epochs of random order; the
order of the configurations is rotated every repetition so load on a shared machine falls on
all of them alike. Prints a table of medians (img/s) and each module's ratio to the C reader.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import sys, time, json
import shardread
path, batch, threads, epochs, fw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
loader = shardread.Loader(path, batch_size=batch, shuffle=True, threads=threads, framework=fw)
n = 0
for images, labels in loader:      # warm-up epoch: page cache, ring
    pass
t0 = time.perf_counter()
for _ in range(epochs):
    for images, labels in loader:
        n += len(labels)
dt = time.perf_counter() - t0
print(json.dumps({"images_per_s": n / dt, "module": shardread.__file__}))
"""


def run_module(pythonpath, a, threads):
    env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", CHILD, a.dataset, str(a.batch), str(threads),
                          str(a.epochs), a.framework], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_s"]


def run_c(a, threads):
    cmd = [a.shardbench, "read", a.dataset, "--batch", str(a.batch), "--threads", str(threads),
           "--epochs", str(a.epochs + 1), "--order", "random", "--json"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    row = json.loads(out.strip().splitlines()[0])    # one object per row: the dataset's
    return float(row["images_per_s"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--module", action="append", default=[], help="NAME=PYTHONPATH")
    ap.add_argument("--shardbench", default="build/bin/shardbench")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--framework", default="numpy")
    a = ap.parse_args()
    mods = [m.split("=", 1) for m in a.module]
    threads = [int(t) for t in a.threads.split(",")]
    configs = [("C reader", None)] + [(n, p) for n, p in mods]
    res = {(c, t): [] for c, _ in configs for t in threads}
    for rep in range(a.reps):
        order = configs[rep % len(configs):] + configs[:rep % len(configs)]
        for t in threads:
            for name, path in order:
                v = run_c(a, t) if path is None else run_module(path, a, t)
                res[(name, t)].append(v)
    print(f"{a.dataset}: batch {a.batch}, random order, {a.epochs} timed epochs after one "
          f"warm-up, medians of {a.reps}, img/s")
    print("| threads | " + " | ".join(n for n, _ in configs) + " | " +
          " | ".join(f"{n} / C" for n, _ in mods) + " |")
    print("|---:|" + "---:|" * (len(configs) + len(mods)))
    for t in threads:
        med = {n: statistics.median(res[(n, t)]) for n, _ in configs}
        print(f"| {t} | " + " | ".join(f"{med[n]:,.0f}" for n, _ in configs) + " | " +
              " | ".join(f"{med[n] / med['C reader']:.2f}x" for n, _ in mods) + " |")


if __name__ == "__main__":
    main()
