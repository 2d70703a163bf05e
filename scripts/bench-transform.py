#!/usr/bin/env python3
"""Loader(transform=) throughput: the seed recipe all in the reader's threads, the same with
one Python op appended (thread and process pools), and torchvision's DataLoader over the same
images with as many worker processes. Prints images/s per configuration.
  BUILD=build python3 scripts/bench-transform.py [DATASET_DIR [IMAGE_FOLDER]] [--cores N]
                                                 [--reps R]
Without a dataset it builds one (shardc-mksample, 64 per class x 4 classes, --max-side 256).
With --reps R every configuration runs R times, one after another in each repetition: the
medians (and ranges) are printed, and the median of each repetition's own ratio of the thread
pool to the DataLoader (the two ran back to back, so they share most of the load of their
moment)."""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
import shardread  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
import torchvision.transforms as T  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


class Clamp:
    """The one Python op appended: draw-free, tensor in, tensor out."""

    def __call__(self, t):
        return t.clamp(-2.0, 2.0)


def recipe(extra=()):
    return T.Compose([T.RandomResizedCrop(112), T.RandomHorizontalFlip(),
                      T.ColorJitter(0.2, 0.2, 0.2, 0.1), T.ToTensor(), T.Normalize(MEAN, STD),
                      *extra])


def rate(it, epochs=2):
    n, t0 = 0, time.perf_counter()
    for _ in range(epochs):
        for b in it():
            n += len(b[0])
    return n / (time.perf_counter() - t0)


def main():
    argv = sys.argv[1:]
    opts = {}
    for o in ("--cores", "--reps"):
        if o in argv:
            k = argv.index(o)
            opts[o] = int(argv[k + 1])
            argv = argv[:k] + argv[k + 2:]
    args = [a for a in argv if not a.startswith("--")]
    cores = opts.get("--cores", min(4, os.cpu_count() or 1))
    reps = opts.get("--reps", 1)
    tmp = tempfile.mkdtemp(prefix="bench-transform-")
    if args:
        ds, folder = args[0], args[1] if len(args) > 1 else None
    else:
        folder = os.path.join(tmp, "src")
        subprocess.run([os.path.join(BUILD, "bin", "shardc-mksample"), folder, "--classes", "4",
                        "--per-class", "64", "--no-broken", "--quiet", "--seed", "1"], check=True)
        ds = os.path.join(tmp, "ds")
        subprocess.run([os.path.join(BUILD, "bin", "shardc"), "build", folder, "-o", ds,
                        "--max-side", "256", "--no-progress", "-j", str(cores)], check=True,
                       stdout=subprocess.DEVNULL)
    torch.set_num_threads(1)
    common = dict(batch_size=64, shuffle=True, threads=cores, framework="torch")
    out = {}
    for _ in range(reps):
        def add(name, v):
            out.setdefault(name, []).append(v)
        add("all C", rate(lambda: shardread.Loader(ds, transform=recipe(), **common)))
        add("C + 1 Python op, threads", rate(lambda: shardread.Loader(
            ds, transform=recipe([Clamp()]), py_workers=cores, **common)))
        add("C + 1 Python op, processes", rate(lambda: shardread.Loader(
            ds, transform=recipe([Clamp()]), py_workers=cores, py_pool="process", **common)))
        if folder:
            dl = torch.utils.data.DataLoader(
                torchvision.datasets.ImageFolder(folder, transform=recipe([Clamp()])),
                batch_size=64, shuffle=True, num_workers=cores)
            add("torchvision DataLoader", rate(lambda: dl))
    print(f"cores {cores}, {os.uname().machine}, torch {torch.__version__}, "
          f"torchvision {torchvision.__version__}, {reps} repetition(s)")
    import statistics
    for k, v in out.items():
        span = f"  ({min(v):.0f} .. {max(v):.0f})" if reps > 1 else ""
        print(f"  {k:32s} {statistics.median(v):9.0f} images/s{span}")
    if folder and reps > 1:
        r = [a / b for a, b in zip(out["C + 1 Python op, threads"],
                                   out["torchvision DataLoader"])]
        print(f"  thread pool / DataLoader, per repetition: median {statistics.median(r):.2f}x "
              f"({min(r):.2f} .. {max(r):.2f})")
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
