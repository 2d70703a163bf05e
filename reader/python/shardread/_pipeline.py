"""Loader(transform=...): a torchvision pipeline split into the ops the reader's threads run and
the ops left to Python.

compile_pipeline(transform, channels) walks the pipeline (T.Compose, a list or tuple,
nn.Sequential, their v2 counterparts, nested) and takes the longest prefix of ops the reader runs
exactly, in the reader's own order of stages:

    crop (RandomResizedCrop, CenterCrop, RandomCrop, Resize(int) + CenterCrop)
    flip (RandomHorizontalFlip)
    rotation (RandomRotation)  affine (RandomAffine)  auto_augment (TrivialAugmentWide,
    RandAugment, AutoAugment)  color_jitter (ColorJitter)  grayscale (RandomGrayscale,
    Grayscale keeping the channels)  to tensor (ToTensor, PILToTensor [+ ConvertImageDtype],
    v2 ToImage + ToDtype(float32, scale=True))  normalize (Normalize)  erasing (RandomErasing)

Each stage at most once and in this order; the first op that is unknown, out of that order, or
has an argument the reader lacks (RandomCrop's padding, RandomRotation's expand or center, a
second interpolation or fill for the geometric ops, ...) ends the prefix, and it and every op
after it run in Python, per sample, on the reader's output: a PIL image while the prefix has no
to-tensor op (what the op would have got from the ops before it), else a CHW torch tensor.

Randomness of the Python ops. Each sample's Python ops run with torch's, Python's and numpy's
global generators seeded from (seed, epoch, dataset index) (sample_seed), so a batch depends on
neither the worker count nor a resume. Torch has one global CPU generator per process, so with
workers="thread" the seeding and the ops of one sample run under one lock (the ops of several
samples never overlap; a pipeline whose Python ops are all known to draw nothing, such as
Normalize or Resize, runs without it), and the calling thread's generator states are saved
before a batch and restored after it. workers="process" runs them in forked worker processes,
each with generators of its own, in parallel.
"""
import numbers as _numbers
import os as _os
import random as _random
import threading as _threading
import warnings as _warnings
import time as _time

import numpy as _np

from ._dataset import _choice_names

# the filters of the resize (interpolation=) and of the geometric ops (augment_interpolation=):
# the options table's names
_FILTERS = tuple(c for c in _choice_names("filter") if c)
_AUG_FILTERS = tuple(c for c in _choice_names("aug_interpolation") if c)

# the stages of the reader's fixed order
CROP, FLIP, ROTATION, AFFINE, AUTO, JITTER, GRAY, TENSOR, NORMALIZE, ERASE = range(10)
_STAGE_NAMES = ("crop", "flip", "rotation", "affine", "auto_augment", "color_jitter",
                "grayscale", "to_tensor", "normalize", "erasing")

# torchvision classes that draw no random numbers: their Python runs need no seeding lock
_DETERMINISTIC = {"Normalize", "ToTensor", "PILToTensor", "ConvertImageDtype", "Resize",
                  "CenterCrop", "Pad", "Grayscale", "ToPILImage", "ToImage", "ToDtype",
                  "ToPureTensor", "GaussianBlur_fixed", "Identity"}

_CONTAINERS = ("Compose", "Sequential")


def flatten(transform):
    """The ops of a pipeline in order: Compose (v1 or v2) and nn.Sequential are opened, nested
    ones too; a list or tuple is a pipeline; anything else is one op."""
    if isinstance(transform, (list, tuple)):
        out = []
        for t in transform:
            out += flatten(t)
        return out
    kind = type(transform).__name__
    if kind == "Compose" and hasattr(transform, "transforms"):
        return flatten(list(transform.transforms))
    if kind == "Sequential" and hasattr(transform, "children"):
        return flatten(list(transform.children()))
    if not callable(transform):
        raise TypeError(f"transform must be a torchvision pipeline (T.Compose, a list, "
                        f"nn.Sequential) of callables; {transform!r} is not callable")
    return [transform]


def _interp(v):
    return getattr(v, "value", v)


def _fill(v):
    """A geometric op's fill as the reader takes it, or False when it cannot."""
    if v is None or isinstance(v, dict):
        return 0 if v is None else False
    if isinstance(v, _numbers.Real) and not isinstance(v, bool):
        return v if float(v) == int(v) else False
    try:
        vals = [float(x) for x in v]
    except TypeError:
        return False
    return vals if all(x == int(x) for x in vals) else False


class Plan:
    """What compile_pipeline made of a pipeline: c_ops (the ops the reader runs, with the stage
    each became), python_ops (the rest, run per sample in Python), kwargs (the Loader keywords
    the C ops became), tensor (whether the reader's output is already a tensor), reasons (why
    the prefix ended)."""

    def __init__(self):
        self.c_ops, self.python_ops, self.kwargs = [], [], {}
        self.tensor = False
        self.reason = None

    def as_dict(self):
        return {"c": [repr(op) for op, _ in self.c_ops],
                "python": [repr(op) for op in self.python_ops],
                "c_stages": [_STAGE_NAMES[s] for _, s in self.c_ops],
                "python_from": self.reason}

    def __repr__(self):
        return (f"Plan(c={[type(o).__name__ for o, _ in self.c_ops]}, "
                f"python={[type(o).__name__ for o in self.python_ops]})")


def _one(op, stage_done, kw, channels, state):
    """(stage, keywords) for op when the reader runs it exactly after the stages done, else
    (None, reason)."""
    kind = type(op).__name__
    at = max(stage_done) if stage_done else -1

    def after(stage):
        return stage > at

    def geometry(interp, fill):
        i, f = _interp(interp), _fill(fill)
        if i not in _AUG_FILTERS:
            return f"interpolation {i!r} (the reader's rotation, affine and auto_augment " \
                   f"take {' or '.join(_AUG_FILTERS)})"
        if f is False:
            return f"fill {fill!r} (the reader takes whole numbers)"
        if state.get("aug") not in (None, (i, f)):
            return "a second interpolation or fill for the geometric ops"
        state["aug"] = (i, f)
        return None

    if kind == "RandomResizedCrop" and after(CROP):
        if getattr(op, "antialias", None) is False:
            return None, "antialias=False"
        return CROP, dict(size=tuple(op.size), rrc=tuple(op.scale), ratio=tuple(op.ratio),
                          interpolation=_interp(op.interpolation))
    if kind == "CenterCrop" and after(CROP):
        return CROP, dict(size=tuple(op.size), pad=True)
    if kind == "RandomCrop" and after(CROP):
        if op.padding is not None or op.pad_if_needed:
            return None, "RandomCrop's padding / pad_if_needed"
        return CROP, dict(size=tuple(op.size), random_crop=True)
    if kind == "RandomHorizontalFlip" and after(FLIP):
        return FLIP, dict(flip=float(op.p))
    if kind == "RandomRotation" and after(ROTATION):
        if op.expand or op.center is not None:
            return None, "RandomRotation's expand or center"
        why = geometry(op.interpolation, op.fill)
        if why:
            return None, why
        return ROTATION, dict(rotation=tuple(op.degrees))
    if kind == "RandomAffine" and after(AFFINE):
        if getattr(op, "center", None) is not None:
            return None, "RandomAffine's center"
        why = geometry(op.interpolation, op.fill)
        if why:
            return None, why
        shear = op.shear
        aff = dict(degrees=tuple(op.degrees))
        if op.translate is not None:
            aff["translate"] = tuple(op.translate)
        if op.scale is not None:
            aff["scale"] = tuple(op.scale)
        if shear is not None:
            aff["shear"] = tuple(shear)
        return AFFINE, dict(affine=aff)
    if kind in ("TrivialAugmentWide", "RandAugment", "AutoAugment") and after(AUTO):
        if kind == "AutoAugment" and str(_interp(op.policy)).lower() != "imagenet":
            return None, f"AutoAugment's {op.policy} policy"
        why = geometry(op.interpolation, op.fill)
        if why:
            return None, why
        return AUTO, dict(auto_augment=op)
    if kind == "ColorJitter" and after(JITTER):
        return JITTER, dict(color_jitter=op)
    if kind == "RandomGrayscale" and after(GRAY):
        return GRAY, dict(grayscale=float(op.p))
    if kind == "Grayscale" and after(GRAY):
        if op.num_output_channels != channels:
            return None, f"Grayscale({op.num_output_channels}) changes the channels"
        return GRAY, dict(grayscale=1.0)
    if kind == "ToTensor" and after(TENSOR):
        return TENSOR, dict(dtype="float32", layout="NCHW", scale=1)
    if kind in ("PILToTensor", "ToImage") and after(TENSOR):
        return TENSOR, dict(dtype="uint8", layout="NCHW")
    if kind in ("ConvertImageDtype", "ToDtype") and state.get("u8tensor") and at == TENSOR:
        dtype = getattr(op, "dtype", None)
        if isinstance(dtype, dict):
            return None, "ToDtype with a dict of dtypes"
        if str(dtype) != "torch.float32" or (kind == "ToDtype" and not op.scale):
            return None, f"{kind}({dtype}) (the reader converts to float32 as ToTensor does)"
        return TENSOR, dict(dtype="float32", layout="NCHW", scale=1, _convert=True)
    if kind == "Normalize" and after(NORMALIZE) and at >= TENSOR and state.get("float"):
        if len(op.mean) not in (1, channels) or len(op.std) not in (1, channels):
            return None, "Normalize's mean or std length"
        return NORMALIZE, dict(mean=[float(v) for v in op.mean], std=[float(v) for v in op.std])
    if kind == "RandomErasing" and after(ERASE) and (at >= TENSOR or state.get("keyword")):
        value = op.value
        if isinstance(value, str) and value != "random":
            return None, f"RandomErasing value {value!r}"
        if not state.get("float") and not state.get("keyword") and not isinstance(value, str):
            return None, "RandomErasing on a uint8 tensor"
        erasing = dict(p=float(op.p), scale=tuple(op.scale), ratio=tuple(op.ratio))
        erasing["value"] = value if isinstance(value, (str, _numbers.Real)) else list(value)
        return ERASE, dict(erasing=erasing)
    if kind in ("RandomResizedCrop", "CenterCrop", "RandomCrop", "RandomHorizontalFlip",
                "RandomRotation", "RandomAffine", "TrivialAugmentWide", "RandAugment",
                "AutoAugment", "ColorJitter", "RandomGrayscale", "Grayscale", "ToTensor",
                "PILToTensor", "ToImage", "Normalize", "RandomErasing"):
        return None, (f"{kind} after {_STAGE_NAMES[at]}: the reader's order is "
                      + ", ".join(_STAGE_NAMES))
    return None, f"{kind} is not one of the reader's ops"


def _resize_crop(op, nxt, done):
    """Resize(S[, max_size]) followed by CenterCrop: the reader's resize= crop stage (keywords),
    else None (a Resize alone gives every image its own size, which a batch cannot hold)."""
    if type(op).__name__ != "Resize" or type(nxt).__name__ != "CenterCrop":
        return None
    if done and max(done) >= CROP:
        return None
    size = op.size
    if isinstance(size, (list, tuple)):
        if len(size) != 1:
            return None
        size = size[0]
    if not isinstance(size, _numbers.Integral) or getattr(op, "antialias", None) is False:
        return None
    interp = _interp(op.interpolation)
    if interp not in _FILTERS:
        return None
    max_size = getattr(op, "max_size", None)
    return dict(resize=int(size) if max_size is None else (int(size), int(max_size)),
                size=tuple(nxt.size), interpolation=interp)


def compile_pipeline(transform, channels):
    """The Plan of transform for samples of the given channel count."""
    ops = flatten(transform)
    plan = Plan()
    done, state = [], {}
    skip = False
    for k, op in enumerate(ops):
        if skip:                # the CenterCrop of a Resize + CenterCrop pair
            skip = False
            continue
        rc = _resize_crop(op, ops[k + 1], done) if k + 1 < len(ops) else None
        if rc is not None:
            plan.kwargs.update(rc)
            plan.c_ops += [(op, CROP), (ops[k + 1], CROP)]
            done.append(CROP)
            skip = True
            continue
        stage, kw = _one(op, done, plan.kwargs, channels, state)
        if stage is None:
            plan.python_ops = ops[k:]
            plan.reason = kw
            break
        if stage == TENSOR:
            plan.tensor = True
            state["u8tensor"] = kw["dtype"] == "uint8"
            state["float"] = kw["dtype"] == "float32"
            kw = {k2: v for k2, v in kw.items() if k2 != "_convert"}
        plan.kwargs.update(kw)
        plan.c_ops.append((op, stage))
        done.append(stage)
    if state.get("aug"):
        plan.kwargs["augment_interpolation"], plan.kwargs["augment_fill"] = state["aug"]
    return plan


# ---- the Python stage ------------------------------------------------------------------------

_MASK = (1 << 64) - 1


def _mix(x):
    """splitmix64's finaliser."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def sample_seed(seed, epoch, index):
    """The seed of one sample's Python ops: a function of (seed, epoch, dataset index) alone,
    63 bits (what torch.manual_seed takes)."""
    return _mix(_mix(_mix(seed & _MASK) ^ (epoch & _MASK)) ^ (index & _MASK)) >> 1


_RNG_LOCK = _threading.Lock()


def _seed_all(s):
    import torch
    # the CPU generator the ops draw from: torch.manual_seed would also queue a lazy seeding of
    # the CUDA generators, recording a formatted stack per call (70 us a sample)
    torch.default_generator.manual_seed(s)
    _random.seed(s)
    _np.random.seed(s & 0xFFFFFFFF)


def _as_input(sample, tensor, torch):
    """One sample of the reader's output as the first Python op takes it: a CHW torch tensor
    (a copy) after a to-tensor op, else a PIL image."""
    a = _np.asarray(sample)
    if tensor:
        return torch.from_numpy(a.copy())
    from PIL import Image
    return Image.fromarray(a[:, :, 0] if a.shape[2] == 1 else a)


def _run(ops, x):
    for op in ops:
        x = op(x)
    return x


def _chain(ops, tensor, sample, s):
    """One sample through ops that may draw: seeded from s under the lock (torch has one global
    generator per process, which other Loaders' stages share)."""
    import torch
    x = _as_input(sample, tensor, torch)
    with _RNG_LOCK:
        _seed_all(s)
        return _run(ops, x)


def _chain_run(ops, tensor, samples):
    import torch
    return [_run(ops, _as_input(a, tensor, torch)) for a in samples]


# worker processes: the ops reach them through fork (no pickling of the pipeline)
_proc_ops = None


def _proc_init(ops, tensor):
    global _proc_ops
    _proc_ops = (ops, tensor)
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


def _proc_chain(job):
    sample, s = job
    ops, tensor = _proc_ops
    import torch
    _seed_all(s)
    out = _run(ops, _as_input(sample, tensor, torch))
    if isinstance(out, torch.Tensor):
        return out
    return _np.asarray(out)


def _stack(outs, framework):
    """The per-sample results as one batch: tensors stacked (torch.stack), PIL images and arrays
    as an array (HWC uint8 for PIL images, as the Loader delivers uint8)."""
    import torch
    if all(isinstance(o, torch.Tensor) for o in outs):
        batch = torch.stack(outs)
        return batch if framework == "torch" else batch.numpy()
    arrs = []
    for o in outs:
        a = _np.asarray(o)
        if a.ndim == 2:
            a = a[:, :, None]
        arrs.append(a)
    try:
        batch = _np.stack(arrs)
    except ValueError:
        raise ValueError("transform=: the Python ops made samples of different shapes "
                         f"({sorted({a.shape for a in arrs})}); a batch needs one shape") from None
    return torch.from_numpy(batch) if framework == "torch" else batch


class PythonStage:
    """The Python ops of a Plan, run per sample on each batch the reader delivers."""

    def __init__(self, ops, tensor, workers, pool, framework):
        self.ops, self.tensor, self.framework = list(ops), tensor, framework
        self.workers, self.kind = workers, pool
        self.lock = not all(type(o).__name__ in _DETERMINISTIC for o in self.ops)
        self._pool = None
        self.python_s = self.wait_s = 0.0
        self.warned = False

    def _executor(self):
        if self._pool is None:
            if self.kind == "process":
                import multiprocessing
                ctx = multiprocessing.get_context("fork")
                self._pool = ctx.Pool(self.workers, _proc_init, (self.ops, self.tensor))
            else:
                from concurrent.futures import ThreadPoolExecutor
                self._pool = ThreadPoolExecutor(self.workers, "shardread-transform")
        return self._pool

    def apply(self, images, seeds):
        t0 = _time.perf_counter()
        pool = self._executor()
        samples = [_np.asarray(images[k]) for k in range(len(seeds))]
        if self.kind == "process":
            outs = pool.map(_proc_chain, list(zip(samples, seeds)),
                            chunksize=max(1, len(seeds) // (4 * self.workers)))
        elif self.lock:
            # ops that may draw run one sample at a time under the seeding lock whatever the
            # pool: here, in this thread (a pool only added its hand-offs and GIL switches)
            import torch
            saved = (torch.get_rng_state(), _random.getstate(), _np.random.get_state())
            try:
                outs = [_chain(self.ops, self.tensor, a, s)
                        for a, s in zip(samples, seeds)]
            finally:
                torch.set_rng_state(saved[0])
                _random.setstate(saved[1])
                _np.random.set_state(saved[2])
        else:
            # draw-free ops: one task per worker, each a run of the batch's samples
            n = len(seeds)
            step = -(-n // self.workers) if n else 1
            runs = list(pool.map(_chain_run, [self.ops] * self.workers,
                                 [self.tensor] * self.workers,
                                 [samples[i:i + step] for i in range(0, n, step)]))
            outs = [o for r in runs for o in r]
        batch = _stack(outs, self.framework)
        self.python_s += _time.perf_counter() - t0
        return batch

    def note_wait(self, seconds):
        """The time the caller waited for the reader's batch; warns once when the Python ops
        take most of the time."""
        self.wait_s += seconds
        if (not self.warned and self.python_s > 1.0 and
                self.python_s > 2 * (self.wait_s + 1e-9)):
            self.warned = True
            names = ", ".join(type(o).__name__ for o in self.ops)
            _warnings.warn(
                f"shardread.Loader(transform=): the Python ops ({names}) take most of the time "
                f"({self.python_s:.1f} s against {self.wait_s:.1f} s waiting for the reader): "
                f"see loader.plan; more py_workers, py_pool='process' for ops that hold the GIL, "
                "or ops the reader runs (docs/PYTHON.md, transform=)", RuntimeWarning,
                stacklevel=3)

    def close(self):
        if self._pool is not None:
            if self.kind == "process":
                self._pool.terminate()
            else:
                self._pool.shutdown(wait=False)
            self._pool = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def default_workers(threads):
    return max(1, min(threads or 1, _os.cpu_count() or 1))
