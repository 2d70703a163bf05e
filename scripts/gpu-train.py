#!/usr/bin/env python3
"""The Python half of scripts/gpu-check.sh: correctness checks of the torch interop, host-to-device
transfer rates, and ResNet training fed by each input pipeline, written as rows of a TSV report
(step, config, metric, value, unit, note), and the markdown tables made from that TSV.

    gpu-train.py env       --tsv FILE
    gpu-train.py check     --tsv FILE --shards DIR [--cpu]
    gpu-train.py transfer  --tsv FILE --shards DIR [--shardbench BIN] [--cpu]
    gpu-train.py train     --tsv FILE --shards DIR --jpeg DIR --model resnet50 [--shardbench BIN]
                           [--feeders LIST] [--steps N] [--warmup N] [--max-s S] [--cpu]
    gpu-train.py report    --tsv FILE --md FILE

Training: torchvision ResNet (bf16 autocast, channels_last, SGD with momentum) for a fixed number
of timed steps after a warm-up, fed by
  synthetic      one batch already on the device (the model's ceiling)
  shardread:T    shardread.Loader with RandomResizedCrop + flip + float16 NCHW normalisation done
                 by its T C threads
  dataloader:W   torchvision ImageFolder over the JPEG folder, RandomResizedCrop + flip + ToTensor +
                 Normalize, W worker processes, pin_memory, persistent workers
  cudafeed:T     `shardbench train --device gpu` with an emulated step as long as the synthetic
                 run's step (the C reader and the CUDA feed, no Python)
On a GPU, batches are copied on a side stream while the previous step computes; the host batch is
kept alive until the step that used it has finished, so a ring buffer is never reused under a
pending copy. Per configuration: images/s; input stall % = 100 * (1 - GPU busy time / wall), GPU
busy time being the sum over steps of CUDA-event times from the step's first kernel to its last;
wait % = the share of wall time the Python loop spent waiting for the next batch; cores busy = CPU
seconds of this process and its live children (DataLoader workers) / wall, and host cores busy the
same from /proc/stat for the whole machine. With --cpu the same loop runs on the CPU (no events):
stall % is then the time waiting for the batch over the wall.
"""
import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time

MEAN255 = [123.675, 116.28, 103.53]
STD255 = [58.395, 57.12, 57.375]


# ---- the report ----------------------------------------------------------------------------------

def clean(v):
    return " ".join(str(v).split()) if v is not None else ""


class Report:
    """Appends rows to the TSV at once, so a step killed by its timeout keeps what it measured."""

    def __init__(self, path):
        self.path = path

    def row(self, step, config, metric, value, unit="", note=""):
        if isinstance(value, float):
            value = f"{value:.6g}"
        line = "\t".join(clean(x) for x in (step, config, metric, value, unit, note))
        with open(self.path, "a") as f:
            f.write(line + "\n")
        print(line, flush=True)


def verdict(ok):
    return "pass" if ok else "fail"


# ---- CPU accounting ------------------------------------------------------------------------------

HZ = os.sysconf("SC_CLK_TCK")


def tree_cpu_s():
    """CPU seconds of this process, its children already waited for, and its live children."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return total
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                s = f.read()
        except OSError:
            continue
        fields = s[s.rfind(")") + 2:].split()
        if len(fields) > 12 and fields[1] == me:
            total += (int(fields[11]) + int(fields[12])) / HZ
    return total


def host_busy_s():
    """Busy CPU seconds of the whole machine (all cores) from /proc/stat; None if unreadable."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / HZ


class CpuMeter:
    def __init__(self):
        self.t0, self.p0, self.h0 = time.perf_counter(), tree_cpu_s(), host_busy_s()

    def cores(self):
        wall = time.perf_counter() - self.t0
        p = (tree_cpu_s() - self.p0) / wall if wall > 0 else 0.0
        h1 = host_busy_s()
        h = (h1 - self.h0) / wall if wall > 0 and h1 is not None and self.h0 is not None else None
        return p, h


# ---- data ----------------------------------------------------------------------------------------

def import_torch():
    import torch
    return torch


def shardread_loader(shards, batch, threads, size, seed=0, pin=None, prefetch=None):
    import shardread
    kw = dict(batch_size=batch, shuffle=True, seed=seed, threads=threads, size=size, rrc=True,
              flip=True, dtype="float16", layout="NCHW", mean=MEAN255, std=STD255,
              framework="torch", drop_last=True)
    if pin is not None:
        kw["pin_memory"] = pin
    if prefetch is not None:
        kw["prefetch"] = prefetch
    return shardread.Loader(shards, **kw)


def dataloader(jpeg, batch, workers, size, pin):
    import torch.utils.data
    import torchvision.datasets
    import torchvision.transforms as T
    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([m / 255 for m in MEAN255], [s / 255 for s in STD255])])
    ds = torchvision.datasets.ImageFolder(jpeg, transform=tf)
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                       pin_memory=pin, drop_last=True,
                                       persistent_workers=workers > 0)


def forever(loader):
    while True:
        n = 0
        for b in loader:
            n += 1
            yield b
        if n == 0:
            raise RuntimeError("the loader yields no batch: fewer samples than one batch?")


# ---- env -----------------------------------------------------------------------------------------

def cmd_env(a, rep):
    torch = import_torch()
    import torchvision
    import numpy
    rep.row("env", "python", "version", sys.version.split()[0])
    rep.row("env", "torch", "version", torch.__version__)
    rep.row("env", "torchvision", "version", torchvision.__version__)
    rep.row("env", "numpy", "version", numpy.__version__)
    rep.row("env", "cores", "count", os.cpu_count())
    cuda = torch.cuda.is_available()
    rep.row("env", "cuda", "available", "yes" if cuda else "no")
    if cuda:
        p = torch.cuda.get_device_properties(0)
        rep.row("env", "gpu", "name", p.name)
        rep.row("env", "gpu", "memory", f"{p.total_memory / 2**30:.1f}", "GiB")
        rep.row("env", "gpu", "capability", f"{p.major}.{p.minor}")
        rep.row("env", "cuda", "runtime", torch.version.cuda)
    try:
        import shardread
        rep.row("env", "shardread", "module", os.path.dirname(os.path.abspath(shardread.__file__)))
    except ImportError as e:
        rep.row("env", "shardread", "module", f"import failed: {e}")
        return 1
    return 0


# ---- check: correctness of the torch interop -----------------------------------------------------

def sleep_cycles_per_ms(torch):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)  # load the kernel
    s.record()
    torch.cuda._sleep(10_000_000)
    e.record()
    torch.cuda.synchronize()
    return 10_000_000 / max(s.elapsed_time(e), 1e-3)


def cmd_check(a, rep):
    torch = import_torch()
    cuda = torch.cuda.is_available() and not a.cpu
    fails = 0
    batch, size = a.batch, a.size

    # the batches never depend on the thread count (runs everywhere)
    try:
        one = shardread_loader(a.shards, batch, 1, size, seed=7)
        many = shardread_loader(a.shards, batch, 4, size, seed=7)
        same = all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])
                   for _, x, y in zip(range(3), one, many))
        fails += not same
        rep.row("correctness", "loader_threads_deterministic", "result", verdict(same), "",
                "3 batches of RRC+flip float16 NCHW, threads 1 vs 4")
        del one, many
    except Exception as e:  # a crash is a failed check, reported
        fails += 1
        rep.row("correctness", "loader_threads_deterministic", "result", "fail", "", repr(e))

    names = ["loader_is_pinned", "async_copy_equal", "copy_overlaps_compute",
             "slot_kept_until_copy_done"]
    if not cuda:
        for n in names:
            rep.row("correctness", n, "result", "skip", "", "no CUDA device (CPU paths)")
        return 1 if fails else 0

    dev = torch.device("cuda")
    # pinned ring buffers and an asynchronous copy that lands intact
    try:
        it = iter(shardread_loader(a.shards, batch, 4, size, seed=1))
        images, labels = next(it)
        pinned = images.is_pinned() and labels.is_pinned()
        fails += not pinned
        rep.row("correctness", "loader_is_pinned", "result", verdict(pinned), "",
                f"images.is_pinned()={images.is_pinned()} labels.is_pinned()={labels.is_pinned()}")
        d = images.to(dev, non_blocking=True)
        torch.cuda.synchronize()
        eq = torch.equal(d.cpu(), images)
        fails += not eq
        rep.row("correctness", "async_copy_equal", "result", verdict(eq), "",
                "images.cuda(non_blocking=True) equals the host batch")
    except Exception as e:
        fails += 2
        rep.row("correctness", "loader_is_pinned", "result", "fail", "", repr(e))
        rep.row("correctness", "async_copy_equal", "result", "fail", "", repr(e))
        images = None

    # a copy on a side stream overlaps a kernel on the compute stream
    if images is not None:
        try:
            cpm = sleep_cycles_per_ms(torch)
            side = torch.cuda.Stream()
            out = torch.empty_like(images, device=dev)

            def timed(copy, spin_ms):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                if spin_ms:
                    torch.cuda._sleep(int(spin_ms * cpm))
                if copy:
                    with torch.cuda.stream(side):
                        out.copy_(images, non_blocking=True)
                torch.cuda.synchronize()
                return (time.perf_counter() - t0) * 1e3

            timed(True, 0)
            t_copy = min(timed(True, 0) for _ in range(3))
            spin = max(3 * t_copy, 5.0)
            t_spin = min(timed(False, spin) for _ in range(2))
            t_both = min(timed(True, spin) for _ in range(2))
            hidden = (t_spin + t_copy - t_both) / t_copy if t_copy > 0 else 0.0
            ok = hidden >= 0.5
            fails += not ok
            rep.row("correctness", "copy_overlaps_compute", "result", verdict(ok), "",
                    f"copy {t_copy:.2f} ms, kernel {t_spin:.2f} ms, both {t_both:.2f} ms: "
                    f"{100 * hidden:.0f}% of the copy hidden (pass >= 50%)")
            rep.row("transfer", "side_stream_copy", "overlap", 100 * hidden, "%",
                    f"{images.numel() * images.element_size() / 1e6:.1f} MB batch under a kernel")
        except Exception as e:
            fails += 1
            rep.row("correctness", "copy_overlaps_compute", "result", "fail", "", repr(e))
    it = images = labels = None

    # the batch's tensor dropped while its copy waits behind a long kernel: the ring buffer must
    # not be refilled before the copy has read it
    try:
        cpm = sleep_cycles_per_ms(torch)
        # small batches: the workers refill a freed buffer long before the kernel ends
        sb = min(batch, 32)
        ref_it = iter(shardread_loader(a.shards, sb, 2, size, seed=3, pin=False))
        it = iter(shardread_loader(a.shards, sb, 2, size, seed=3, prefetch=4))
        pairs = []
        for _ in range(6):
            ref = next(ref_it)[0].clone()
            x = next(it)[0]
            torch.cuda._sleep(int(200 * cpm))  # the copy queues behind 200 ms of work
            pairs.append((x.to(dev, non_blocking=True), ref))
            del x  # the last reference to the ring buffer
        torch.cuda.synchronize()
        bad = sum(not torch.equal(d.cpu(), r) for d, r in pairs)
        fails += bad > 0
        rep.row("correctness", "slot_kept_until_copy_done", "result", verdict(bad == 0), "",
                f"{bad} of {len(pairs)} batches changed under a pending copy "
                "(tensor dropped while its copy waited behind a 200 ms kernel)")
    except Exception as e:
        fails += 1
        rep.row("correctness", "slot_kept_until_copy_done", "result", "fail", "", repr(e))
    return 1 if fails else 0


# ---- transfer ------------------------------------------------------------------------------------

def copy_rate(torch, src, dst, reps, cuda):
    """GB/s of dst.copy_(src, non_blocking=True) on a side stream, DMA time by CUDA events."""
    nbytes = src.numel() * src.element_size()
    if not cuda:
        dst.copy_(src)
        t0 = time.perf_counter()
        for _ in range(reps):
            dst.copy_(src)
        return nbytes * reps / (time.perf_counter() - t0) / 1e9
    side = torch.cuda.Stream()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(side):
        dst.copy_(src, non_blocking=True)
        side.synchronize()
        s.record(side)
        for _ in range(reps):
            dst.copy_(src, non_blocking=True)
        e.record(side)
    e.synchronize()
    return nbytes * reps / (s.elapsed_time(e) / 1e3) / 1e9


def cmd_transfer(a, rep):
    torch = import_torch()
    cuda = torch.cuda.is_available() and not a.cpu
    dev = torch.device("cuda" if cuda else "cpu")
    what = "H2D" if cuda else "host copy (CPU mode, not H2D)"
    it = iter(shardread_loader(a.shards, a.batch, a.threads, a.size, seed=2))
    images, labels = next(it)
    nbytes = images.numel() * images.element_size()
    mb = f"{nbytes / 1e6:.1f} MB batches, {a.reps} copies"
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    flat = images.view(-1).view(torch.uint8)

    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=cuda)
    pinned.fill_(1)
    pageable = torch.empty(nbytes, dtype=torch.uint8)
    pageable.fill_(1)
    r_pin = copy_rate(torch, pinned, dst, a.reps, cuda)
    r_page = copy_rate(torch, pageable, dst, a.reps, cuda)
    # the ring: each batch as the Loader delivers it, its own copy; ring buffers change per batch
    total_b, total_s = 0, 0.0
    for i in range(a.reps):
        if i:
            images, labels = next(it)
            flat = images.view(-1).view(torch.uint8)
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            dst.copy_(flat, non_blocking=True)
            e.record()
            e.synchronize()
            total_s += s.elapsed_time(e) / 1e3
        else:
            t0 = time.perf_counter()
            dst.copy_(flat)
            total_s += time.perf_counter() - t0
        total_b += nbytes
    r_ring = total_b / total_s / 1e9
    pinned_note = f"is_pinned={images.is_pinned()}"
    rep.row("transfer", "pinned_memcpy", "rate", r_pin, "GB/s", f"{what}: torch pinned tensor, {mb}")
    rep.row("transfer", "pageable_memcpy", "rate", r_page, "GB/s", f"{what}: pageable tensor, {mb}")
    rep.row("transfer", "loader_ring", "rate", r_ring, "GB/s",
            f"{what}: shardread.Loader batches (float16 NCHW), {pinned_note}")
    rep.row("transfer", "loader_ring", "vs_pinned", r_ring / r_pin, "x", "goal >= 0.9")
    rep.row("transfer", "loader_ring", "vs_pageable", r_ring / r_page, "x", "")
    del images, labels, flat, it

    if a.shardbench:
        # the C reader and the CUDA feed: uint8 NHWC batches copied by cudaMemcpyAsync
        cmd = [a.shardbench, "train", a.shards, "--device", "gpu" if cuda else "cpu",
               "--step-ms", "0", "--batch", str(a.batch), "--threads", str(a.threads),
               "--rrc", "--flip", "--size", f"{a.size}x{a.size}", "--epochs", "2", "--json"]
        print("+", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True)
        sys.stderr.write(p.stderr)
        if p.returncode:
            rep.row("transfer", "cudafeed", "exit", p.returncode, "rc", "shardbench train failed")
            return 1
        j = json.loads(p.stdout.strip().splitlines()[-1])
        print(json.dumps(j), flush=True)
        if isinstance(j.get("gpu_status"), str):
            rep.row("env", "shardbench", "gpu_status", j["gpu_status"])
        for k, v in j.items():
            if isinstance(v, bool):
                rep.row("transfer", "cudafeed", k, int(v), "bool", "shardbench train --step-ms 0")
            elif isinstance(v, (int, float)) and any(w in k for w in ("gb_per_s", "pinned", "ring", "vs_baseline")):
                rep.row("transfer", "cudafeed", k, float(v),
                        "GB/s" if "gb_per_s" in k else "x" if "vs_" in k else "",
                        "shardbench train --step-ms 0, "
                        "uint8 NHWC batches")
    return 0


# ---- train ---------------------------------------------------------------------------------------

def train_one(torch, a, rep, model_name, feeder, model, opt, state):
    """Trains on one feeder; writes its rows. state carries the synthetic step time."""
    cuda = state["cuda"]
    dev = state["dev"]
    batch, size = a.batch, a.size
    kind, _, arg = feeder.partition(":")
    n = int(arg) if arg else 0
    crit = torch.nn.CrossEntropyLoss()
    amp = (torch.autocast(device_type="cuda", dtype=torch.bfloat16) if cuda and a.amp == "bf16"
           else torch.autocast(device_type="cpu", dtype=torch.bfloat16) if a.amp == "bf16"
           else contextlib.nullcontext())
    loader = None
    if kind == "synthetic":
        x = torch.randn(batch, 3, size, size, device=dev).to(torch.float16 if cuda else
                                                            torch.float32)
        y = torch.randint(0, 4, (batch,), device=dev)

        def gen():
            while True:
                yield x, y
        src = gen()
    elif kind == "shardread":
        loader = shardread_loader(a.shards, batch, n, size, seed=11)
        src = forever(loader)
    elif kind == "dataloader":
        loader = dataloader(a.jpeg, batch, n, size, pin=cuda)
        src = forever(loader)
    else:
        raise ValueError(f"unknown feeder {feeder}")

    side = torch.cuda.Stream() if cuda else None

    def stage(host):
        hx, hy = host[0], host[1]
        if not cuda or hx.is_cuda:
            return hx, hy, None, host
        with torch.cuda.stream(side):
            dx = hx.to(dev, non_blocking=True)
            dy = hy.to(dev, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(side)
        return dx, dy, ev, host

    total = a.warmup + a.steps
    staged = stage(next(src))
    inflight = []          # (end event, staged batch): host batches kept until their step ends
    times = []             # (start event, end event) of the timed steps (GPU)
    busy_cpu = 0.0
    wait = 0.0
    done = 0
    t_start = None
    meter = None
    capped = False
    for i in range(total):
        if i == a.warmup:
            if cuda:
                torch.cuda.synchronize()
            t_start = time.perf_counter()
            meter = CpuMeter()
        timed = i >= a.warmup
        dx, dy, ev, _ = staged
        if cuda:
            cur = torch.cuda.current_stream()
            if ev is not None:
                cur.wait_event(ev)
                dx.record_stream(cur)
                dy.record_stream(cur)
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
        t0 = time.perf_counter()
        xin = dx.to(memory_format=torch.channels_last)
        if a.amp == "none" and xin.dtype != torch.float32:
            xin = xin.float()
        with amp:
            out = model(xin)
            loss = crit(out, dy)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if cuda:
            e1.record()
            inflight.append((e1, staged))
            if timed:
                times.append((e0, e1))
        elif timed:
            busy_cpu += time.perf_counter() - t0
        # the next batch, fetched while this step runs on the device
        t1 = time.perf_counter()
        nxt = next(src) if i + 1 < total else None
        if timed:
            wait += time.perf_counter() - t1
        staged = stage(nxt) if nxt is not None else None
        del nxt
        # at most two steps queued ahead of the device; finished steps give their batches back
        while inflight and (len(inflight) > 2 or inflight[0][0].query()):
            inflight.pop(0)[0].synchronize()
        if timed:
            done += 1
            if a.max_s and time.perf_counter() - t_start > a.max_s and done < a.steps:
                capped = True
                break
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t_start
    cores, host_cores = meter.cores()
    inflight.clear()
    staged = None
    if cuda:
        busy = sum(s.elapsed_time(e) for s, e in times) / 1e3
    else:
        busy = busy_cpu
    ips = done * batch / wall
    stall = max(0.0, 100.0 * (1.0 - busy / wall))
    note = f"{done} timed steps after {a.warmup} warm-up, batch {batch}, {size}x{size}"
    if capped:
        note += f" (stopped at the {a.max_s:g} s cap)"
    cfg = f"{model_name}/{feeder}"
    rep.row("train", cfg, "images_per_s", ips, "img/s", note)
    rep.row("train", cfg, "stall", stall, "%", "1 - GPU busy / wall" if cuda else "wait / wall")
    rep.row("train", cfg, "wait", 100.0 * wait / wall, "%", "loop waiting for the next batch")
    rep.row("train", cfg, "cores_busy", cores, "cores", "this process and its workers")
    if host_cores is not None:
        rep.row("train", cfg, "host_cores_busy", host_cores, "cores", "whole machine, /proc/stat")
    rep.row("train", cfg, "step_ms", 1e3 * busy / max(done, 1), "ms", "device time per step"
            if cuda else "compute time per step")
    rep.row("train", cfg, "loss", float(loss.item()), "", "last step")
    if kind == "synthetic":
        state["ceiling"] = ips
        state["step_ms"] = 1e3 * wall / max(done, 1)
    elif state.get("ceiling"):
        rep.row("train", cfg, "vs_ceiling", ips / state["ceiling"], "x", "goal >= 0.98 (shardread:4)")
    # shut down DataLoader workers before the next configuration
    del src, loader
    return 0


def run_cudafeed(a, rep, model_name, threads, state):
    cuda = state["cuda"]
    step_ms = state.get("step_ms")
    if not step_ms:
        rep.row("train", f"{model_name}/cudafeed:{threads}", "exit", 1, "rc",
                "no synthetic step time to emulate")
        return 1
    cmd = [a.shardbench, "train", a.shards, "--device", "gpu" if cuda else "cpu",
           "--step-ms", f"{step_ms:.3f}", "--batch", str(a.batch), "--threads", str(threads),
           "--rrc", "--flip", "--size", f"{a.size}x{a.size}", "--epochs", str(a.feed_epochs),
           "--json"]
    print("+", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    r0 = os.times()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = os.times()
    sys.stderr.write(p.stderr)
    cfg = f"{model_name}/cudafeed:{threads}"
    if p.returncode:
        rep.row("train", cfg, "exit", p.returncode, "rc", "shardbench train failed")
        return 1
    j = json.loads(p.stdout.strip().splitlines()[-1])
    print(json.dumps(j), flush=True)
    note = (f"shardbench train --device {j.get('device')}, emulated {step_ms:.1f} ms step, "
            f"epochs {j.get('measured_epochs')} of {a.feed_epochs}, {j.get('measured_images')} images")
    rep.row("train", cfg, "images_per_s", float(j["images_per_s"]), "img/s", note)
    rep.row("train", cfg, "stall", float(j["stall_pct"]), "%", "shardbench: input stall")
    rep.row("train", cfg, "busy", float(j["busy_pct"]), "%", "shardbench: step busy")
    cpu = (r1.children_user + r1.children_system - r0.children_user - r0.children_system)
    rep.row("train", cfg, "cores_busy", cpu / wall, "cores",
            "shardbench's CPU seconds / its wall time, warm-up epoch included")
    if isinstance(j.get("h2d_gb_per_s"), (int, float)):
        rep.row("train", cfg, "h2d", float(j["h2d_gb_per_s"]), "GB/s", "shardbench h2d_gb_per_s")
    if state.get("ceiling"):
        rep.row("train", cfg, "vs_ceiling", float(j["images_per_s"]) / state["ceiling"], "x",
                "against the synthetic run")
    return 0


def cmd_train(a, rep):
    torch = import_torch()
    import torchvision.models
    cuda = torch.cuda.is_available() and not a.cpu
    dev = torch.device("cuda" if cuda else "cpu")
    if cuda:
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=1000)
    model = model.to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    state = {"cuda": cuda, "dev": dev}
    rc = 0
    for feeder in a.feeders.split(","):
        t0 = time.perf_counter()
        print(f"== {a.model} fed by {feeder}", flush=True)
        try:
            if feeder.startswith("cudafeed"):
                if not a.shardbench:
                    continue
                rc |= run_cudafeed(a, rep, a.model, int(feeder.partition(":")[2] or 4), state)
            else:
                rc |= train_one(torch, a, rep, a.model, feeder, model, opt, state)
        except Exception as e:
            import traceback
            traceback.print_exc()
            rep.row("train", f"{a.model}/{feeder}", "exit", 1, "rc", repr(e))
            rc = 1
        print(f"== {a.model} fed by {feeder}: {time.perf_counter() - t0:.1f} s", flush=True)
    return rc


# ---- report --------------------------------------------------------------------------------------

def cmd_report(a, rep):
    rows = []
    with open(a.tsv) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 6 and p[0] != "step":
                rows.append(p[:6])
    by = {}
    for s, c, m, v, u, n in rows:
        by.setdefault(s, []).append((c, m, v, u, n))
    out = [f"# gpu-check report ({a.title})", ""]
    env = {(c, m): v + (f" {u}" if u else "") for c, m, v, u, n in by.get("env", [])}
    if env:
        out.append("Environment: " + ", ".join(f"{c} {m} {v}" for (c, m), v in env.items()))
        out.append("")
    corr = by.get("correctness", [])
    if corr:
        out += ["## Correctness", "", "| check | result | note |", "|---|---|---|"]
        out += [f"| {c} | **{v}** | {n} |" for c, m, v, u, n in corr]
        out.append("")
    tr = by.get("transfer", [])
    if tr:
        out += ["## Transfer", "", "| source | metric | value | note |", "|---|---|---|---|"]
        out += [f"| {c} | {m} | {fmt(v)} {u} | {n} |" for c, m, v, u, n in tr]
        out.append("")
    trn = by.get("train", [])
    if trn:
        cols = ["images_per_s", "vs_ceiling", "stall", "wait", "cores_busy", "host_cores_busy",
                "step_ms"]
        heads = ["img/s", "vs ceiling", "stall %", "wait %", "cores busy", "host cores busy",
                 "step ms"]
        table, order = {}, []
        for c, m, v, u, n in trn:
            if c not in table:
                table[c] = {}
                order.append(c)
            table[c][m] = v
        out += ["## Training", "", "| model / feeder | " + " | ".join(heads) + " |",
                "|---" * (len(heads) + 1) + "|"]
        for c in order:
            t = table[c]
            if "exit" in t and "images_per_s" not in t:
                out.append(f"| {c} | failed (exit {t['exit']}) |" + " |" * (len(heads) - 1))
                continue
            out.append(f"| {c} | " + " | ".join(fmt(t.get(k, "")) for k in cols) + " |")
        out.append("")
    st = by.get("steps", [])
    if st:
        table = {}
        for c, m, v, u, n in st:
            table.setdefault(c, {})[m] = (v, n)
        out += ["## Steps", "", "| step | exit | seconds | note |", "|---|---|---|---|"]
        for c, t in table.items():
            ex, note = t.get("exit", ("", ""))
            out.append(f"| {c} | {ex} | {fmt(t.get('seconds', ('', ''))[0])} | {note} |")
        out.append("")
    with open(a.md, "w") as f:
        f.write("\n".join(out))
    return 0


def fmt(v):
    try:
        x = float(v)
    except ValueError:
        return v
    if not math.isfinite(x):
        return v
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["env", "check", "transfer", "train", "report"])
    ap.add_argument("--tsv", required=True)
    ap.add_argument("--md")
    ap.add_argument("--title", default="")
    ap.add_argument("--shards")
    ap.add_argument("--jpeg")
    ap.add_argument("--shardbench")
    ap.add_argument("--cpu", action="store_true", help="the CPU paths even where CUDA exists")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--feeders", default="synthetic,shardread:4,shardread:16,cudafeed:4,"
                                         "dataloader:4,dataloader:16")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--max-s", type=float, default=30.0,
                    help="stop a configuration's timed steps after this many seconds")
    ap.add_argument("--feed-epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=16, help="transfer: Loader threads")
    ap.add_argument("--reps", type=int, default=20, help="transfer: copies per source")
    ap.add_argument("--amp", choices=["bf16", "none"], default="bf16")
    a = ap.parse_args()
    rep = Report(a.tsv)
    return {"env": cmd_env, "check": cmd_check, "transfer": cmd_transfer, "train": cmd_train,
            "report": cmd_report}[a.cmd](a, rep)


if __name__ == "__main__":
    sys.exit(main())
