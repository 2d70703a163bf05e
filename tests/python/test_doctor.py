"""shardread.doctor and threads='auto': the bytes of threads='auto' equal a fixed thread count's,
the count settles within bounds for a slow consumer, the pipeline statistics are consistent
(stage calls per sample, stages within the fill time), and the doctor's report (dict, text, CLI,
timeline PNG) has its documented structure with arithmetic that holds. Nothing here asserts a
rate or a time: the rate comparisons are scripts/bench-doctor.py's (docs/BENCHMARKS.md)."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import shardread

RECIPE = dict(size=16, rrc=True, flip=True, color_jitter=(0.2, 0.2, 0.2, 0.1),
              mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], shuffle=True,
              seed=7)


def batches(loader, epochs, sleep=0.0):
    out = []
    for _ in range(epochs):
        for b in loader:
            out.append((np.array(b[0], copy=True), np.array(b[1], copy=True)))
            if sleep:
                time.sleep(sleep)
    return out


def test_auto_threads_bytes_identical(fx):
    fixed = batches(shardread.Loader(fx.var, batch_size=3, threads=1, **RECIPE), 3)
    auto = shardread.Loader(fx.var, batch_size=3, threads="auto", max_threads=4, **RECIPE)
    assert auto.threads == 4
    # a consumer slow at first (workers parked) then fast (workers added): the same batches
    got = []
    for e in range(3):
        got += batches(auto, 1, sleep=0.02 if e == 0 else 0.0)
    assert len(got) == len(fixed) == 3 * 8
    for (ia, la), (ib, lb) in zip(got, fixed):
        assert ia.dtype == np.float32 and ia.shape == ib.shape
        assert ia.tobytes() == ib.tobytes()
        assert la.tolist() == lb.tolist()


def test_auto_threads_settle_for_slow_consumer(fx):
    # each batch takes microseconds to fill and the consumer 50 ms: one worker is needed, and
    # the control loop parks down from its start of two (at most one more than needed)
    loader = shardread.Loader(fx.fixed, batch_size=2, threads="auto", max_threads=6)
    assert loader.threads == 6
    seen = []
    for _ in range(2):
        for _b in loader:
            seen.append(loader.active_threads)
            time.sleep(0.05)
    assert seen[0] == 2                 # where it starts
    assert 1 <= seen[-1] <= 2
    assert max(seen) <= 3
    st = loader.pipeline_stats()
    assert st["consumer"]["threads"] == 6
    assert st["consumer"]["active"] == seen[-1]
    assert sum(t["active"] for t in st["threads"]) == seen[-1]
    assert st["threads"][0]["active"] is True
    assert all(t["active"] is False for t in st["threads"][3:])


def test_threads_arguments(fx):
    assert shardread.Loader(fx.fixed, batch_size=4, threads=3).active_threads == 3
    with pytest.raises(TypeError, match="max_threads= is for threads='auto'"):
        shardread.Loader(fx.fixed, batch_size=4, threads=2, max_threads=4)
    with pytest.raises(ValueError, match="threads must be a number or 'auto', not 'many'"):
        shardread.Loader(fx.fixed, batch_size=4, threads="many")
    with pytest.raises(ValueError, match="max_threads"):
        shardread.Loader(fx.fixed, batch_size=4, threads="auto", max_threads=0)
    auto = shardread.Loader(fx.fixed, batch_size=4, threads="auto")
    assert 1 <= auto.threads <= 8
    assert 1 <= auto.active_threads <= min(2, auto.threads)


def test_pipeline_stats_consistent(fx):
    loader = shardread.Loader(fx.var, batch_size=4, threads=2, **RECIPE)
    assert loader.stage_timing() is False
    assert loader.stage_timing(True) is False
    assert loader.stage_timing() is True
    n = sum(len(b[0]) for _ in range(2) for b in loader)
    assert n == 2 * 23
    st = loader.pipeline_stats()
    assert st["stage_timing"] is True and st["batch_size"] == 4
    assert st["consumer"]["batches"] == 2 * 6
    assert st["consumer"]["threads"] == 2 and st["consumer"]["auto_changes"] == 0
    names = ["read", "resize", "flip", "rotate", "affine", "auto_augment", "jitter",
             "grayscale", "convert", "erase", "mix", "targets"]
    filled = 0
    for t in st["threads"]:
        assert list(t["stages"]) == names
        # the reader's first fills may start before timing is switched on (a worker may even
        # have filled all its batches by then)
        assert 0 <= t["timed_samples"] <= t["samples"]
        filled += t["samples"]
        staged = sum(ns for ns, _ in t["stages"].values())
        assert staged <= t["timed_fill_ns"]
        # every sample is read, resized (RandomResizedCrop) and converted once; ColorJitter
        # runs where a factor was drawn; no other op is on
        for s in ("read", "resize", "convert"):
            assert t["stages"][s][1] == t["timed_samples"]
        assert t["stages"]["jitter"][1] <= t["timed_samples"]
        for s in ("rotate", "affine", "auto_augment", "grayscale", "erase", "mix", "targets",
                  "flip"):
            assert t["stages"][s] == (0, 0)
    assert sum(t["timed_samples"] for t in st["threads"]) > 0
    # the workers fill ahead: delivered, plus at most the ring's buffers
    assert n <= filled <= n + loader.prefetch * 4
    ev = loader.fill_events()
    assert len(ev) == 2
    ks = sorted(k for e in ev for k, _, _ in e)
    # the workers go on filling ahead after st was read: its last batch, or later ones
    assert len(set(ks)) == len(ks) and ks[-1] >= sum(t["batches"] for t in st["threads"]) - 1
    for e in ev:
        assert all(a < b for _, a, b in e)
        assert all(e[i][0] < e[i + 1][0] for i in range(len(e) - 1))
    loader.stage_timing(False)
    assert loader.pipeline_stats()["stage_timing"] is False


def test_doctor_report(fx, tmp_path):
    loader = shardread.Loader(fx.var, batch_size=4, threads=2, **RECIPE)
    png = tmp_path / "timeline.png"
    r = shardread.doctor(loader, step=3, seconds=0.6, timeline=str(png), quiet=True)
    for key in ("demand_img_s", "delivered_img_s", "predicted_stall_pct", "measured_stall_pct",
                "cores_needed", "most_expensive", "recommendations", "stages",
                "delivered_per_thread", "rate_from_costs_img_s", "us_per_sample", "step_ms"):
        assert key in r, key
    assert r["step_alone_ms"] == 3.0
    assert r["step_ms"] >= 3.0              # a sleep lasts at least what it asks
    assert r["demand_img_s"] == pytest.approx(4 / r["step_ms"] * 1e3)
    assert 0 <= r["predicted_stall_pct"] <= 100 and 0 <= r["measured_stall_pct"] <= 100
    assert set(r["stages"]) >= {"read", "resize", "convert"}
    assert set(r["most_expensive"]) <= set(r["stages"]) and len(r["most_expensive"]) <= 3
    # the arithmetic the report states: the stages' costs sum to the per-sample cost, and the
    # rate they predict is the busy workers over that cost
    assert r["us_per_sample"] == pytest.approx(sum(s["us_per_sample"] for s in
                                                   r["stages"].values()))
    assert r["rate_from_costs_img_s"] == pytest.approx(r["workers_busy"] * 1e6 /
                                                       r["us_per_sample"])
    assert 0 < r["accounted"] <= 1.0
    assert len(r["delivered_per_thread"]) == 2
    assert sum(t["img_s"] for t in r["delivered_per_thread"]) > 0
    assert r["recommendations"] and all(isinstance(x, str) for x in r["recommendations"])
    assert loader.stage_timing() is False       # set back
    text = shardread.doctor.report_text(r)
    assert "input stall   predicted" in text and "recommendations:" in text
    from PIL import Image
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] == 1200
    # the pipeline alone: no step, no stall
    r = shardread.doctor(loader, seconds=0.3, quiet=True)
    assert r["demand_img_s"] is None and r["predicted_stall_pct"] is None
    with pytest.raises(ValueError, match="milliseconds"):
        shardread.doctor(loader, step=-1, quiet=True)
    with pytest.raises(TypeError, match="step must be"):
        shardread.doctor(loader, step="fast", quiet=True)


def test_doctor_busy_step(fx):
    # a step on the CPU: it spins until its thread used step_busy ms of CPU, and the doctor
    # counts that CPU in the prediction (the cores it takes from the workers)
    loader = shardread.Loader(fx.var, batch_size=4, threads=2, **RECIPE)
    r = shardread.doctor(loader, step_busy=2, seconds=0.6, quiet=True)
    assert r["step_alone_ms"] == 2.0
    assert r["step_cpu_ms"] >= 2.0          # the spin ends once its CPU reached 2 ms
    assert r["step_ms"] >= r["step_cpu_ms"] * 0.99      # its wall time covers its CPU time
    assert 0 < r["step_cores"] <= 1.0
    assert 0 < r["cores_available"] <= r["cores"]
    # the prediction as documented: 1 - C / max(C, P, CPU period), C the step plus the loop
    c = r["step_ms"] + r["consumer_own_ms"]
    t = max(c, r["period_ms"], r["cpu_period_ms"])
    assert r["predicted_stall_pct"] == pytest.approx(max(0.0, 1 - c / t) * 100)
    assert r["cpu_period_ms"] > 0
    assert "its CPU" in shardread.doctor.report_text(r)
    # a sleep takes (almost) no CPU
    r = shardread.doctor(loader, step=2, seconds=0.4, quiet=True)
    assert r["step_cpu_ms"] < r["step_ms"]
    with pytest.raises(TypeError, match="give step= or step_busy=, not both"):
        shardread.doctor(loader, step=1, step_busy=1, quiet=True)
    with pytest.raises(ValueError, match="step_busy is milliseconds >= 0, not -1"):
        shardread.doctor(loader, step_busy=-1, quiet=True)


def test_doctor_cli(fx):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(shardread.__file__)))
    p = subprocess.run([sys.executable, "-m", "shardread.doctor", fx.fixed, "batch_size=4",
                        "threads='auto'", "flip=True", "--step-ms", "2", "--seconds", "0.5",
                        "--json"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    r = json.loads(p.stdout)
    assert r["batch_size"] == 4 and r["step_alone_ms"] == 2.0 and r["threads"] >= 1
    p = subprocess.run([sys.executable, "-m", "shardread.doctor", fx.fixed, "batch_size=4",
                        "--step-busy-ms", "1", "--seconds", "0.3", "--json"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["step_alone_ms"] == 1.0 and r["step_cpu_ms"] >= 1.0
    p = subprocess.run([sys.executable, "-m", "shardread.doctor", fx.fixed, "--step-ms", "1",
                        "--step-busy-ms", "1"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "not allowed with argument" in p.stderr
    p = subprocess.run([sys.executable, "-m", "shardread.doctor", fx.fixed, "batch-size=4"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "Loader keywords are KEY=VALUE, not 'batch-size=4'" in p.stderr
    p = subprocess.run([sys.executable, "-m", "shardread.doctor", fx.fixed + "-missing",
                        "--seconds", "0.2"], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and p.stderr.startswith("shardread.doctor: ")
