#!/usr/bin/env python3
"""The doctor's and threads='auto''s benchmark figures (docs/BENCHMARKS.md, "The pipeline doctor
and threads='auto'"), on a dataset of photo-like images it builds (or DS):

  costs    on three recipes, the doctor's per-stage costs against the measured pipeline rate:
           the rate the costs predict (the workers' busy time over the per-sample sum) over the
           delivered rate (target: within 15%)
  stall    an emulated step at 0.5x and 2x the pipeline's period, a sleep and a busy loop (a
           step on the CPU): the doctor's predicted input stall against the measured one
           (target: within 5 points)
  overhead the rate with stage timing off and on (one thread, the best of two runs each)
  auto     threads='auto' against fixed threads 1..MAX, each repetition running them all in turn:
           the rate for a consumer faster than the pipeline (target: the median of auto >= 0.95x
           the best fixed count's median), and the workers it keeps for a slow
           consumer against the need, ceil(fill time per batch / consumer time per batch)
           (target: at most one more)

    BUILD=build PYTHONPATH=build/python python3 scripts/bench-doctor.py [--ds DS] [--seconds S]
        [--max-threads N] [--reps R]

Prints a markdown table per part and the pass/fail of each target. These are rates on a
shared machine: run it on an idle one, several times (--reps takes the median).
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import shardread

RECIPES = {
    "crop+flip uint8": dict(size=192, flip=True),
    "rrc+flip+jitter+normalize f32": dict(size=224, rrc=True, flip=True,
                                          color_jitter=(0.2, 0.2, 0.2, 0.1),
                                          mean=[123.675, 116.28, 103.53],
                                          std=[58.395, 57.12, 57.375]),
    "rrc+rotation+trivialaugment+erasing": dict(size=160, rrc=True, flip=True, rotation=10,
                                                auto_augment="trivialaugment_wide",
                                                dtype="float32", erasing=0.25),
}


def build(root):
    b = os.environ.get("BUILD", "build")
    src, ds = os.path.join(root, "src"), os.path.join(root, "ds")
    subprocess.run([os.path.join(b, "bin", "shardc-mksample"), src, "--classes", "4",
                    "--per-class", "150", "--photo", "--no-broken", "--quiet", "--seed", "1"],
                   check=True)
    subprocess.run([os.path.join(b, "bin", "shardc"), "build", src, "-o", ds, "--short-side",
                    "256", "--max-side", "320", "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL)
    return ds


def rate(loader, seconds, sleep=0.0):
    """Images per second over `seconds` of batches (after one to warm up), sleeping after
    each; and the loader's active threads at the end."""
    it = iter(loader)
    n = 0
    next(it)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        try:
            b = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        n += len(b[0])
        del b
        if sleep:
            time.sleep(sleep)
    return n / (time.perf_counter() - t0), loader.active_threads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--max-threads", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    tmp = None
    if not a.ds:
        tmp = tempfile.TemporaryDirectory()
        a.ds = build(tmp.name)
    ok = True
    T = a.max_threads
    print(f"dataset {a.ds}, batch {a.batch}, {os.cpu_count()} cores, up to {T} threads, "
          f"{a.seconds} s per measurement, median of {a.reps}\n")

    print("| recipe | delivered img/s | from stage costs | ratio | stages (us/sample) |")
    print("|---|---|---|---|---|")
    for name, kw in RECIPES.items():
        rows = []
        for _ in range(a.reps):
            L = shardread.Loader(a.ds, batch_size=a.batch, threads=T, shuffle=True, **kw)
            r = shardread.doctor(L, seconds=a.seconds, quiet=True)
            rows.append(r)
        r = sorted(rows, key=lambda x: x["rate_from_costs_img_s"] / x["delivered_img_s"])[
            len(rows) // 2]
        ratio = r["rate_from_costs_img_s"] / r["delivered_img_s"]
        ok &= abs(ratio - 1) <= 0.15
        st = ", ".join(f"{n} {s['us_per_sample']:.0f}" for n, s in
                       sorted(r["stages"].items(), key=lambda x: -x[1]["us_per_sample"]))
        print(f"| {name} | {r['delivered_img_s']:.0f} | {r['rate_from_costs_img_s']:.0f} | "
              f"{ratio:.3f} | {st} |")

    print("\n| step (emulated) | predicted stall % | measured stall % | difference (points) |")
    print("|---|---|---|---|")
    kw = RECIPES["rrc+flip+jitter+normalize f32"]
    L = shardread.Loader(a.ds, batch_size=a.batch, threads=T, shuffle=True, **kw)
    base = shardread.doctor(L, seconds=a.seconds, quiet=True)
    period_ms = a.batch / base["delivered_img_s"] * 1e3
    for kind in ("step", "step_busy"):
        for f in (0.5, 2.0):
            diffs = []
            for _ in range(a.reps):
                r = shardread.doctor(L, **{kind: period_ms * f}, seconds=2 * a.seconds,
                                     quiet=True)
                diffs.append((r["predicted_stall_pct"] - r["measured_stall_pct"], r))
            d, r = sorted(diffs, key=lambda x: abs(x[0]))[len(diffs) // 2]
            ok &= abs(d) <= 5
            spread = f" (of {min(x[0] for x in diffs):+.1f} .. {max(x[0] for x in diffs):+.1f})" \
                if len(diffs) > 1 else ""
            print(f"| {'a busy loop' if kind == 'step_busy' else 'a sleep'}, "
                  f"{r['step_alone_ms']:.1f} ms ({f}x the pipeline's period; "
                  f"{r['step_ms']:.1f} ms in training, {r['step_cores']:.2f} cores) | "
                  f"{r['predicted_stall_pct']:.1f} | {r['measured_stall_pct']:.1f} | "
                  f"{d:+.1f}{spread} |")

    print("\n| consumer | threads | img/s | active threads at the end |")
    print("|---|---|---|---|")
    # the settings in turn within each repetition, so the machine's load drifts over all alike
    got = {}
    for _ in range(a.reps):
        for t in list(range(1, T + 1)) + ["auto"]:
            L = shardread.Loader(a.ds, batch_size=a.batch, threads=t, shuffle=True, **kw,
                                 **(dict(max_threads=T) if t == "auto" else {}))
            got.setdefault(t, []).append(rate(L, a.seconds))
    med = {t: statistics.median(x[0] for x in v) for t, v in got.items()}
    best = max(med[t] for t in range(1, T + 1))
    for t, v in got.items():
        rs = sorted(x[0] for x in v)
        spread = f" ({rs[0]:.0f} .. {rs[-1]:.0f})" if len(rs) > 1 else ""
        ratio = f", {med[t] / best:.2f}x the best fixed" if t == "auto" else ""
        print(f"| fast | {t if t != 'auto' else f'auto (max {T})'} | {med[t]:.0f}{spread}"
              f"{ratio} | {', '.join(str(x[1]) for x in v)} |")
    ok &= med["auto"] >= 0.95 * best
    paired = sorted(got["auto"][i][0] / max(got[t][i][0] for t in range(1, T + 1))
                    for i in range(a.reps))
    paired_line = (f"\nauto over the best fixed count of the same repetition: median "
                   f"{statistics.median(paired):.2f} ({paired[0]:.2f} .. {paired[-1]:.2f}); "
                   f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    fill_ms = a.batch / (base["delivered_img_s"] / max(1e-9, base["workers_busy"])) * 1e3
    for sleep_ms in (2 * fill_ms / T, 50.0):
        L = shardread.Loader(a.ds, batch_size=a.batch, threads="auto", max_threads=T,
                             shuffle=True, **kw)
        r, active = rate(L, a.seconds, sleep=sleep_ms / 1e3)
        need = max(1, math.ceil(fill_ms / sleep_ms))
        ok &= active <= need + 1
        print(f"| sleeps {sleep_ms:.1f} ms a batch | auto (max {T}) | {r:.0f} | {active} "
              f"(need {need}: {fill_ms:.1f} ms fill per batch) |")
    print(paired_line)
    print("\n| recipe | stage timing off img/s | on img/s | on / off |")
    print("|---|---|---|---|")
    for name in ("crop+flip uint8", "rrc+flip+jitter+normalize f32"):
        got = {}
        for on in (False, True, False, True):
            L = shardread.Loader(a.ds, batch_size=a.batch, threads=1, shuffle=True,
                                 **RECIPES[name])
            L.stage_timing(on)
            got.setdefault(on, []).append(rate(L, a.seconds)[0])
        off, on = max(got[False]), max(got[True])
        print(f"| {name}, 1 thread | {off:.0f} | {on:.0f} | {on / off:.3f} |")
    print(f"\ntargets {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
