#!/usr/bin/env python3
"""The Python writer (shardread.build) against `shardc build` on the same files, same run.

    BUILD=build PYTHONPATH=build/python python3 scripts/bench-writer.py [--photos N]
        [--rounds R] [--threads J] [--size S]

On generated photo-like JPEGs (shardc-mksample --photo: every image its own size, long side
360..640, quality 90) it runs, in each of R rounds (default 5) and in alternating order:
    shardc      shardc build PHOTOS --list LIST -o OUT --size S -j J  (a process: the whole CLI)
    writer      shardread.build([(path, label), ...], OUT, size=S, threads=J)
and prints each one's median images/s over the rounds and the median of the per-round ratios
writer / shardc (1.0: as fast; the goal is >= 0.90). Both write raw shards into the same folder
tree (re-created each round) and their datasets are checked equal once, with shardc verify and
byte-equal samples.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
import shardread  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--photos", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", os.path.join(ROOT, ".bench")))
    a = ap.parse_args()
    shardc = os.path.join(BUILD, "bin", "shardc")
    mksample = os.path.join(BUILD, "bin", "shardc-mksample")
    per = (a.photos + 3) // 4
    photos = os.path.join(a.dir, f"writer-photos-{per}")
    lst = photos + ".txt"
    if not os.path.isfile(lst):
        shutil.rmtree(photos, ignore_errors=True)
        os.makedirs(a.dir, exist_ok=True)
        subprocess.run([mksample, photos, "--photo", "--classes", "4", "--per-class", str(per),
                        "--seed", "1", "--quiet", "--list", lst + ".tmp"], check=True)
        os.replace(lst + ".tmp", lst)
    with open(lst) as f:
        rows = [ln.split() for ln in f if ln.strip()]
    items = [(os.path.join(photos, p), int(lab)) for p, lab in rows]
    n = len(items)

    tmp = tempfile.mkdtemp(prefix="bench-writer-", dir=a.dir)
    out_c, out_py = os.path.join(tmp, "c"), os.path.join(tmp, "py")

    def run_shardc():
        shutil.rmtree(out_c, ignore_errors=True)
        t = time.perf_counter()
        subprocess.run([shardc, "build", photos, "--list", lst, "-o", out_c, "--size",
                        str(a.size), "-j", str(a.threads), "--no-progress"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return n / (time.perf_counter() - t)

    def run_writer():
        shutil.rmtree(out_py, ignore_errors=True)
        t = time.perf_counter()
        shardread.build(items, out_py, size=a.size, threads=a.threads)
        return n / (time.perf_counter() - t)

    rc, rw, ratios = [], [], []
    for r in range(a.rounds):
        if r % 2:
            w, c = run_writer(), run_shardc()
        else:
            c, w = run_shardc(), run_writer()
        rc.append(c)
        rw.append(w)
        ratios.append(w / c)
        print(f"round {r + 1}: shardc {c:8.1f} img/s   writer {w:8.1f} img/s   ratio {w / c:.3f}",
              flush=True)

    # the two datasets are the same samples
    subprocess.run([shardc, "verify", out_py], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    dc, dp = shardread.Dataset(out_c), shardread.Dataset(out_py)
    same = len(dc) == len(dp) == n and all(
        dc[i][1] == dp[i][1] and (dc[i][0] == dp[i][0]).all() for i in range(n))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{n} photos -> {a.size}x{a.size}, -j{a.threads}, {a.rounds} rounds "
          f"(medians): shardc {statistics.median(rc):.1f} img/s, writer "
          f"{statistics.median(rw):.1f} img/s, writer/shardc {statistics.median(ratios):.3f} "
          f"(goal >= 0.90); datasets equal: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
