"""shardread.doctor: will this Loader keep the training step fed, and what should change?

    report = shardread.doctor(loader, step=None, seconds=20)      # prints, returns a dict
    python -m shardread.doctor DS batch_size=256 rrc=True size=224 --step-ms 40
    python -m shardread.doctor DS batch_size=256 rrc=True size=224 --step-busy-ms 40
    python -m shardread.doctor DS batch_size=256 rrc=True size=224 --model resnet50 --device cuda

It runs the Loader on this machine in three phases (the seconds split 45/10/45):
  capacity   batches taken as fast as they come, with the workers' stage timing on: what each
             stage costs per sample, what each thread and all of them deliver;
  step       the step alone on one batch held back (CUDA events where it runs on a GPU, wall
             time otherwise; step=X in ms emulates a step with a sleep, which uses no CPU, as a
             GPU step mostly does not; step_busy=X with a loop that spins until its thread used
             X ms of CPU, as a step on the CPU, which competes with the workers): step_alone_ms;
  training   the Loader and the step together: the step's own time per batch as it runs there
             (step_ms: the demand in images/s is the batch over it), and the measured input
             stall, the time the loop spent waiting for batches (libshardread's own count:
             shr_next blocked in the ring).
The predicted stall is max(0, 1 - C / T), the share of each period T the consumer would wait with
a deep enough ring, with C the consumer's time per batch (the step plus the loop's own) and T
the longest of C, the pipeline's period per batch P (capacity) and the CPU one batch takes on
the cores there are: (W + L + S) / cores, W the workers' CPU per batch, L the loop's own, S the
step's (its thread's CPU time in training), cores those the process got while the workers kept
them all busy (capacity), else the machine's. A step that takes no CPU leaves T = max(C, P); one
that spins takes cores from the workers. The report's numbers: docs/PYTHON.md, "doctor".
"""
import json as _json
import math as _math
import os as _os
import sys as _sys
import time as _time
import types as _types

__all__ = ["doctor", "main", "timeline_png"]

_ns = _time.monotonic_ns


def _diff(a, b):
    """Counters of pipeline_stats() b minus a, per thread (a may be None or from another
    reader, whose counts are then not subtracted)."""
    out = []
    for i, tb in enumerate(b["threads"]):
        ta = a["threads"][i] if a and i < len(a["threads"]) else None
        if ta and ta["batches"] > tb["batches"]:
            ta = None       # a new reader: its counts started from zero
        d = {k: tb[k] - (ta[k] if ta else 0) for k in
             ("batches", "samples", "fill_ns", "cpu_ns", "timed_samples", "timed_fill_ns")}
        d["active"] = tb["active"]
        d["stages"] = {s: (v[0] - (ta["stages"][s][0] if ta else 0),
                           v[1] - (ta["stages"][s][1] if ta else 0))
                       for s, v in tb["stages"].items()}
        out.append(d)
    wait = b["consumer"]["wait_ns"] - (a["consumer"]["wait_ns"] if a else 0)
    return out, max(0, wait)


def _run(loader, step, seconds, record=False):
    """Take batches for `seconds` (step(batch) after each, when given): wall time, batches,
    samples, the time spent in next(), the workers' counts over the run, the consumer's wait,
    and (record) each batch's (next start, next end, step end) times."""
    it = iter(loader)

    def take():
        nonlocal it
        for _ in range(2):
            try:
                return next(it)
            except StopIteration:
                it = iter(loader)
        raise RuntimeError("the Loader yields no batches")

    b = take()                  # the reader is now the one the run reads (a new one: warm-up)
    del b
    s0 = loader.pipeline_stats()
    k0 = s0["consumer"]["batches"]
    t_start = _ns()
    c_start = _time.thread_time_ns()
    n = samples = in_next = step_cpu = 0
    events = []
    deadline = t_start + int(seconds * 1e9)
    while True:
        t0 = _ns()
        b = take()
        t1 = _ns()
        in_next += t1 - t0
        n += 1
        samples += len(b[0])
        if step is not None:
            c = _time.thread_time_ns()
            step(b)
            step_cpu += _time.thread_time_ns() - c
        t2 = _ns()
        if record:
            events.append((t0, t1, t2))
        del b
        if t2 >= deadline and n >= 3:
            break
    wall = _ns() - t_start
    cpu = _time.thread_time_ns() - c_start
    s1 = loader.pipeline_stats()
    threads, wait = _diff(s0, s1)
    del it
    return dict(wall_ns=wall, batches=n, samples=samples, in_next_ns=in_next, wait_ns=wait,
                consumer_cpu_ns=cpu - step_cpu, step_cpu_ns=step_cpu,
                threads=threads, events=events, k0=k0, t_start=t_start, t_end=t_start + wall,
                fills=loader.fill_events() if record else None)


def _sleep_step(ms):
    def step(batch):
        _time.sleep(ms / 1e3)
    step.emulated_ms = ms
    return step


def _busy_step(ms):
    def step(batch):
        end = _time.thread_time_ns() + int(ms * 1e6)
        while _time.thread_time_ns() < end:
            pass
    step.emulated_ms = ms
    return step


def _time_step(step, batch, seconds, device):
    """The step's own time per batch (seconds): CUDA events where it runs on a GPU, wall time
    otherwise; the median of repeated calls on one batch."""
    times = []
    cuda = None
    if device and str(device).startswith("cuda"):
        import torch
        cuda = torch.cuda
    deadline = _time.monotonic() + seconds
    step(batch)                 # warm-up (cudnn's autotuning, lazy allocations)
    if cuda:
        cuda.synchronize()
    while len(times) < 3 or (_time.monotonic() < deadline and len(times) < 200):
        if cuda:
            e0, e1 = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            e0.record()
            step(batch)
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) / 1e3)
        else:
            t = _time.perf_counter()
            step(batch)
            times.append(_time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def _held(loader):
    """One batch as copies (so the ring keeps all its buffers)."""
    import numpy as np
    for b in loader:
        return tuple(np.array(x, copy=True) if hasattr(x, "shape") and not hasattr(x, "cuda")
                     else (x.clone() if hasattr(x, "clone") else x) for x in b)
    raise RuntimeError("the Loader yields no batches")


def _stage_table(threads):
    """Per stage: microseconds per delivered sample (wall, amortised over every sample), the
    share of samples that ran it, and its CPU estimate; with the totals."""
    timed = sum(t["timed_samples"] for t in threads)
    fill = sum(t["timed_fill_ns"] for t in threads)
    fill_all = sum(t["fill_ns"] for t in threads)
    cpu_all = sum(t["cpu_ns"] for t in threads)
    cpu_share = cpu_all / fill_all if fill_all else 1.0
    stages = {}
    for name in threads[0]["stages"] if threads else ():
        ns = sum(t["stages"][name][0] for t in threads)
        calls = sum(t["stages"][name][1] for t in threads)
        if calls:
            stages[name] = dict(us_per_sample=ns / timed / 1e3 if timed else 0.0,
                                cpu_us_per_sample=ns * cpu_share / timed / 1e3 if timed else 0.0,
                                calls=calls, share=ns / fill if fill else 0.0)
    staged = sum(s["us_per_sample"] for s in stages.values())
    return stages, staged, (sum(t["stages"][n][0] for t in threads for n in t["stages"]) / fill
                            if fill else 0.0), cpu_share


def _manifest(loader):
    try:
        with open(_os.path.join(_os.fsdecode(_os.fspath(loader.path)), "manifest.json")) as f:
            return _json.load(f)
    except (OSError, ValueError):
        return {}


def _decode_cost(loader, reps=15):
    """What a DataLoader over the original files pays per image before any transform: a stored
    sample encoded as a JPEG at quality 90 (the originals' usual form) and decoded by Pillow, in
    microseconds; None without Pillow."""
    try:
        import io
        from PIL import Image
        from . import Dataset
        img, _ = Dataset(loader.path)[0]
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=90)
        data = buf.getvalue()
        t = _time.perf_counter()
        for _ in range(reps):
            Image.open(io.BytesIO(data)).convert("RGB").load()
        return (_time.perf_counter() - t) / reps * 1e6, img.shape
    except Exception:       # noqa: BLE001 (an estimate only: no Pillow, a detection set, ...)
        return None, None


def _recommend(r, loader, manifest, cores):
    """Concrete changes, most useful first."""
    rec = []
    info = loader.info
    stages = r["stages"]
    demand = r["demand_img_s"]
    cap = r["delivered_img_s"]
    stall = r["predicted_stall_pct"]
    threads = loader.threads
    cpu_us = r["cpu_us_per_sample"]
    target = demand if demand else cap
    need_cores = r["cores_needed"]
    # threads from what one thread delivers here (wall: it includes the CPU this machine's
    # other work leaves), cores from the CPU time itself
    active = [t for t in r["delivered_per_thread"] if t["img_s"] > 0]
    per_thread = sum(t["img_s"] / t["busy"] for t in active if t["busy"]) / len(active) \
        if active else 0
    need = max(1, _math.ceil(1.1 * demand / per_thread)) if demand and per_thread else None
    # a step on the CPU takes its cores from the workers
    free = cores - (r.get("step_cores") or 0)
    if need and stall is not None and stall > 5:
        if need <= max(1, round(free)):
            rec.append(f"threads={need} (or threads='auto'): one thread delivers "
                       f"{per_thread:.0f} img/s here, the step takes {demand:.0f}; now "
                       f"{threads} thread(s) deliver {cap:.0f} img/s")
        else:
            rec.append(f"the CPU cannot keep up: {need} threads ({need_cores:.1f} cores of "
                       f"CPU time) needed for {demand:.0f} img/s, this machine has {cores}"
                       + (f" and the step takes {r['step_cores']:.1f}" if r.get("step_cores")
                          and r["step_cores"] >= 0.1 else "") + "; "
                       "cut the per-sample work (below) or feed a larger model per image")
    elif need and threads > need + 1:
        rec.append(f"threads={need} is enough ({per_thread:.0f} img/s per thread, the step "
                   f"takes {demand:.0f}; {threads} fill the ring ahead of need), or "
                   "threads='auto'")
    if r["measured_stall_pct"] is not None and stall is not None and \
            r["measured_stall_pct"] > stall + 5:
        rec.append(f"prefetch={loader.prefetch + threads}: the measured stall "
                   f"({r['measured_stall_pct']:.0f}%) is above the predicted ({stall:.0f}%): "
                   "the step's time varies more than the ring absorbs")
    conv = stages.get("convert")
    if conv and info["dtype"] != "uint8" and conv["us_per_sample"] > 0.15 * r["us_per_sample"]:
        rec.append(f"dtype='uint8', layout='NHWC' and normalise on the GPU (reader/cuda_feed.h, "
                   f"or in the model): the float conversion costs {conv['us_per_sample']:.0f} "
                   f"us of {r['us_per_sample']:.0f} per sample and moves "
                   f"{4 if info['dtype'] == 'float32' else 2}x the bytes over PCIe")
    elif conv and info["layout"] == "NCHW" and conv["us_per_sample"] > 0.15 * r["us_per_sample"]:
        rec.append("layout='NHWC' with channels_last on the GPU: the NCHW transpose costs "
                   f"{conv['us_per_sample']:.0f} us per sample")
    movable = [(n, s) for n, s in stages.items()
               if n in ("resize", "flip", "jitter", "rotate", "affine", "grayscale")
               and s["us_per_sample"] > 0.1 * r["us_per_sample"]]
    if movable and (stall is None or stall > 5 or not demand):
        names = ", ".join(f"{n} ({s['us_per_sample']:.0f} us)" for n, s in
                          sorted(movable, key=lambda x: -x[1]["us_per_sample"]))
        rec.append(f"move {names} to build time: shardc build --augment K --aug "
                   "rrc=...,flip,jitter=...,rotate=...,gray=... writes K pre-augmented variants "
                   "per image, read back as plain copies (a read costs "
                   f"{stages.get('read', {}).get('us_per_sample', 0):.1f} us per sample)")
    read = stages.get("read")
    build = manifest.get("build", {})
    if read and read["share"] > 0.5:
        if build.get("compress", "none") == "none":
            rec.append(f"reading is {read['share'] * 100:.0f}% of the work: if the storage "
                       "is slow (network, disk), shardc build --compress lz4 (or zstd:3) halves "
                       "the bytes read for photos; access='pread' for files that change")
        else:
            rec.append(f"reading (with {build['compress']} decompression) is "
                       f"{read['share'] * 100:.0f}% of the work: on fast local storage an "
                       "uncompressed build (--compress none) reads faster")
    dec = r.get("dataloader")
    if dec and dec.get("decode_us"):
        rec.append(f"a DataLoader over JPEG originals would need about {dec['workers']} worker "
                   f"processes to match {target:.0f} img/s (JPEG decode "
                   f"{dec['decode_us']:.0f} us + the same ops {dec['ops_us']:.0f} us per "
                   f"image, at least; this Loader needs {cpu_us:.0f} us of CPU per sample)")
    if not rec:
        rec.append("nothing to change: the Loader keeps the step fed")
    return rec


def doctor(loader, step=None, seconds=20, *, step_busy=None, device=None, timeline=None,
           file=_sys.stdout, quiet=False):
    """Measure loader (a shardread.Loader) on this machine and say what limits it.

    step: None (the pipeline alone: its capacity), a number (an emulated step of that many
    milliseconds, a sleep), or a callable step(batch) run after each batch (device='cuda...'
    times it with CUDA events). step_busy: instead of step, a number of milliseconds of CPU a
    step spins for on the consumer's thread (a step on the CPU, which takes a core from the
    workers). seconds: the whole measurement, split 45/10/45 among capacity,
    step and training. timeline: a PNG path for the timeline (per-thread fills, ring fill,
    step busy). Prints the report to file (unless quiet) and returns it as a dict (keys:
    docs/PYTHON.md, "doctor"). The Loader is read from where it stands; stage timing is on
    while the doctor runs and set back after.
    """
    if step_busy is not None:
        if step is not None:
            raise TypeError("give step= or step_busy=, not both")
        if isinstance(step_busy, bool) or not isinstance(step_busy, (int, float)) or \
                not step_busy >= 0:
            raise ValueError(f"step_busy is milliseconds >= 0, not {step_busy!r}")
        step = _busy_step(float(step_busy))
    elif isinstance(step, (int, float)) and not isinstance(step, bool):
        if not step >= 0:
            raise ValueError(f"step as a number is milliseconds >= 0, not {step!r}")
        step = _sleep_step(float(step))
    elif step is not None and not callable(step):
        raise TypeError(f"step must be None, milliseconds or a callable, not {step!r}")
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, not {seconds!r}")
    B = loader.batch_size
    cores = len(_os.sched_getaffinity(0)) if hasattr(_os, "sched_getaffinity") else \
        (_os.cpu_count() or 1)
    was = loader.stage_timing(True)
    try:
        cap = _run(loader, None, seconds * (0.45 if step else 1.0), record=step is None)
        t_step = t_alone = None
        if step is not None:
            emulated = getattr(step, "emulated_ms", None)
            t_alone = emulated / 1e3 if emulated is not None else \
                _time_step(step, _held(loader), seconds * 0.10, device)
            run = _run(loader, step, seconds * 0.45, record=True)
            # the step's own time as it ran beside the workers: a sleep overshoots when the
            # cores are busy, a CPU step slows down; alone it may be faster (step_alone_ms)
            ev = run["events"]
            t_step = sum(c - b for _a, b, c in ev) / len(ev) / 1e9
        else:
            run = cap
    finally:
        loader.stage_timing(was)
    threads = cap["threads"]
    wall = cap["wall_ns"]
    delivered = cap["samples"] * 1e9 / wall
    filled = sum(t["samples"] for t in threads)
    stages, staged_us, accounted, cpu_share = _stage_table(threads)
    busy = sum(t["fill_ns"] for t in threads) / wall
    from_costs = busy * 1e6 / staged_us if staged_us else None
    cpu_us = (sum(t["cpu_ns"] for t in threads) / filled / 1e3) if filled else None
    per_thread = [dict(img_s=t["samples"] * 1e9 / wall, busy=t["fill_ns"] / wall,
                       cpu=t["cpu_ns"] / wall, active=t["active"],
                       us_per_sample=t["fill_ns"] / t["samples"] / 1e3 if t["samples"] else None)
                  for t in threads]
    # the loop's own time per batch outside the step: next()'s work beyond waiting, and the
    # loop around it
    own_ns = (wall - cap["wait_ns"]) / cap["batches"]
    period_ns = wall / cap["batches"]
    demand = B / t_step if t_step else None
    predicted = measured = step_cpu = cpu_period = None
    # the CPU one batch takes, and the cores the process got while the workers kept all of them
    # busy (with fewer workers than cores, the machine's)
    work_cpu = sum(t["cpu_ns"] for t in threads) / max(1, sum(t["batches"] for t in threads))
    loop_cpu = cap["consumer_cpu_ns"] / cap["batches"]
    got = (work_cpu + loop_cpu) / period_ns
    active_n = sum(1 for t in per_thread if t["active"] and t["img_s"] > 0)
    cores_avail = min(cores, max(got, 1e-9)) if active_n >= cores else cores
    if t_step is not None:
        c_ns = t_step * 1e9 + own_ns
        step_cpu = run["step_cpu_ns"] / run["batches"]
        cpu_period = (work_cpu + loop_cpu + step_cpu) / cores_avail
        predicted = max(0.0, 1.0 - c_ns / max(c_ns, period_ns, cpu_period)) * 100
        measured = run["wait_ns"] / run["wall_ns"] * 100
    r = dict(
        batch_size=B, threads=loader.threads, active_threads=loader.active_threads,
        prefetch=loader.prefetch, cores=cores,
        step_ms=t_step * 1e3 if t_step is not None else None,
        step_alone_ms=t_alone * 1e3 if t_alone is not None else None,
        step_cpu_ms=step_cpu / 1e6 if step_cpu is not None else None,
        step_cores=step_cpu * run["batches"] / run["wall_ns"] if step_cpu is not None else None,
        cpu_period_ms=cpu_period / 1e6 if cpu_period is not None else None,
        period_ms=period_ns / 1e6, cores_available=cores_avail,
        demand_img_s=demand, delivered_img_s=delivered,
        delivered_per_thread=per_thread,
        predicted_stall_pct=predicted, measured_stall_pct=measured,
        trained_img_s=run["samples"] * 1e9 / run["wall_ns"] if step is not None else None,
        us_per_sample=staged_us, cpu_us_per_sample=cpu_us, cpu_share=cpu_share,
        stages=stages, accounted=accounted, rate_from_costs_img_s=from_costs,
        workers_busy=busy, consumer_own_ms=own_ns / 1e6,
        cores_needed=(demand if demand else delivered) * cpu_us / 1e6 if cpu_us else None,
        most_expensive=[n for n, _ in sorted(stages.items(),
                                             key=lambda x: -x[1]["us_per_sample"])][:3],
    )
    dec_us, _shape = _decode_cost(loader)
    if dec_us is not None:
        ops_us = sum(s["cpu_us_per_sample"] for n, s in stages.items() if n != "read")
        target = demand if demand else delivered
        r["dataloader"] = dict(decode_us=dec_us, ops_us=ops_us,
                               workers=max(1, _math.ceil(target * (dec_us + ops_us) / 1e6)))
    r["recommendations"] = _recommend(r, loader, _manifest(loader), cores)
    if timeline:
        timeline_png(run, timeline, step is not None)
        r["timeline"] = _os.fspath(timeline)
    if not quiet:
        print(report_text(r), file=file)
    return r


def report_text(r):
    """The report as the doctor prints it."""
    lines = []
    f = lines.append
    f(f"shardread doctor: batch {r['batch_size']}, {r['threads']} thread(s) "
      f"({r['active_threads']} active), prefetch {r['prefetch']}, {r['cores']} core(s)")
    if r["demand_img_s"]:
        f(f"  step          {r['step_ms']:.1f} ms per batch in training ({r['step_alone_ms']:.1f} "
          f"alone): demand {r['demand_img_s']:.0f} img/s; its CPU {r['step_cpu_ms']:.1f} ms a "
          f"batch ({r['step_cores']:.2f} cores)")
    f(f"  pipeline      delivers {r['delivered_img_s']:.0f} img/s "
      f"(from the stage costs: {r['rate_from_costs_img_s'] or 0:.0f}; workers busy "
      f"{r['workers_busy']:.2f} threads' worth)")
    for i, t in enumerate(r["delivered_per_thread"]):
        f(f"    thread {i:<3}  {t['img_s']:8.0f} img/s  busy {t['busy'] * 100:5.1f}%  "
          f"cpu {t['cpu'] * 100:5.1f}%{'' if t['active'] else '  (parked)'}")
    if r["predicted_stall_pct"] is not None:
        f(f"  input stall   predicted {r['predicted_stall_pct']:.1f}%, measured "
          f"{r['measured_stall_pct']:.1f}% (trained at {r['trained_img_s']:.0f} img/s)")
    if r["cores_needed"] is not None:
        f(f"  cores needed  {r['cores_needed']:.2f} ({r['cpu_us_per_sample']:.0f} us of CPU "
          "per sample)")
    f(f"  per sample    {r['us_per_sample']:.1f} us (wall, {r['accounted'] * 100:.0f}% of the "
      "fill time accounted for by the stages):")
    for n, s in sorted(r["stages"].items(), key=lambda x: -x[1]["us_per_sample"]):
        f(f"    {n:<13} {s['us_per_sample']:9.1f} us  {s['share'] * 100:5.1f}%  "
          f"({s['calls']} calls)")
    f("  recommendations:")
    for x in r["recommendations"]:
        f(f"    - {x}")
    if r.get("timeline"):
        f(f"  timeline      {r['timeline']}")
    return "\n".join(lines)


def timeline_png(run, path, stepped=True, width=1200):
    """A PNG of the run: a row per worker (its batch fills), the ring's ready batches, and the
    step busy (the consumer's time outside next()), drawn with Pillow."""
    from PIL import Image, ImageDraw
    fills = run["fills"] or []
    t0, t1 = run["t_start"], run["t_end"]
    span = max(1, t1 - t0)
    rows = len(fills)
    row_h, pad, left = 22, 6, 110
    ring_h = 80
    h = pad + (rows + 1) * (row_h + pad) + ring_h + 3 * pad + 20
    img = Image.new("RGB", (width, h), "white")
    d = ImageDraw.Draw(img)
    plot_w = width - left - pad

    def x(t):
        return left + int((min(max(t, t0), t1) - t0) * plot_w / span)

    y = pad
    for i, ev in enumerate(fills):
        d.text((pad, y + 5), f"thread {i}", fill="black")
        d.rectangle([left, y, left + plot_w, y + row_h], outline="#cccccc")
        for _k, a, b in ev:
            if b >= t0 and a <= t1:
                d.rectangle([x(a), y + 2, max(x(a) + 1, x(b)), y + row_h - 2], fill="#3b7dd8")
        y += row_h + pad
    d.text((pad, y + 5), "step" if stepped else "consumer", fill="black")
    d.rectangle([left, y, left + plot_w, y + row_h], outline="#cccccc")
    for a, b, c in run["events"]:
        if b - a > 0:
            d.rectangle([x(a), y + 2, max(x(a) + 1, x(b)), y + row_h - 2], fill="#d83b3b")
        d.rectangle([x(b), y + 2, max(x(b) + 1, x(c)), y + row_h - 2], fill="#3bb03b")
    y += row_h + pad
    # ready batches: fills of stream batches not yet delivered
    ends = sorted(b for ev in fills for k, _a, b in ev if k >= run["k0"])
    got = sorted(b for _a, b, _c in run["events"])
    pts = []
    ready = sum(1 for e in ends if e <= t0)
    top = 1
    steps = sorted([(e, 1) for e in ends if e > t0] + [(g, -1) for g in got])
    pts.append((t0, ready))
    for t, dv in steps:
        if t > t1:
            break
        ready = max(0, ready + dv)
        pts.append((t, ready))
        top = max(top, ready)
    d.text((pad, y + ring_h // 2), "ring ready", fill="black")
    d.rectangle([left, y, left + plot_w, y + ring_h], outline="#cccccc")
    prev = None
    for t, v in pts:
        p = (x(t), y + ring_h - int(v * (ring_h - 4) / top) - 2)
        if prev:
            d.line([prev, (p[0], prev[1]), p], fill="#7a3bd8")
        prev = p
    d.text((left + plot_w - 60, y + 2), f"max {top}", fill="black")
    y += ring_h + pad
    d.text((left, y), f"0 .. {span / 1e9:.2f} s   blue: a worker filling a batch   red: "
                      "waiting in next()   green: the step", fill="black")
    img.save(path)
    return path


# ---- python -m shardread.doctor ---------------------------------------------------------------

def _value(text):
    import ast
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _model_step(name, device, loader):
    """A torchvision model's training step (SGD, cross-entropy) on device: step(batch)."""
    import torch
    import torchvision
    model = getattr(torchvision.models, name)(num_classes=max(2, loader.info["num_classes"]))
    model = model.to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    mean = torch.tensor([123.675, 116.28, 103.53], device=device).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375], device=device).view(1, 3, 1, 1)

    def step(batch):
        x = torch.as_tensor(batch[0]).to(device, non_blocking=True)
        y = torch.as_tensor(batch[1]).to(device, non_blocking=True)
        if x.dim() == 4 and x.shape[-1] in (1, 3):      # NHWC -> NCHW view (channels_last)
            x = x.permute(0, 3, 1, 2)
        if x.dtype == torch.uint8:
            x = (x.float() - mean) / std
        out = model(x.contiguous(memory_format=torch.channels_last))
        loss = loss_fn(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(
        prog="python -m shardread.doctor",
        description="Measure a shardread.Loader on this machine: per-stage costs, delivered "
                    "rate, the step's demand, the input stall, and what to change.")
    ap.add_argument("dataset")
    ap.add_argument("keywords", nargs="*", metavar="KEY=VALUE",
                    help="Loader keywords, values as Python literals (rrc=True size=224 "
                         "color_jitter='(0.2,0.2,0.2,0.1)' threads=auto)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--step-ms", type=float, help="emulate a step of this many ms (a sleep)")
    g.add_argument("--step-busy-ms", type=float,
                   help="emulate a step on the CPU: a loop spinning for this many ms of CPU")
    g.add_argument("--model", help="a torchvision model to train, e.g. resnet50")
    ap.add_argument("--device", default="cuda", help="the --model's device (default cuda)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--timeline", help="write the timeline PNG here")
    ap.add_argument("--json", action="store_true", help="print the dict as JSON instead")
    a = ap.parse_args(argv)
    kw = {}
    for item in a.keywords:
        k, sep, v = item.partition("=")
        if not sep or not k.isidentifier():
            ap.error(f"Loader keywords are KEY=VALUE, not {item!r}")
        kw[k] = _value(v)
    from . import Loader, Error
    try:
        if a.model:
            kw.setdefault("framework", "torch")
        loader = Loader(a.dataset, **kw)
        step = a.step_ms
        if a.model:
            step = _model_step(a.model, a.device, loader)
        r = doctor(loader, step, a.seconds, step_busy=a.step_busy_ms,
                   device=a.device if a.model else None,
                   timeline=a.timeline, quiet=a.json)
    except (Error, OSError, ValueError, TypeError) as e:
        print(f"shardread.doctor: {e}", file=_sys.stderr)
        return 1
    if a.json:
        print(_json.dumps(r, indent=1, default=str))
    return 0


class _CallableModule(_types.ModuleType):
    """shardread.doctor is this module once imported as one; calling it runs doctor()."""

    def __call__(self, *args, **kwargs):
        return doctor(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    _sys.exit(main())
