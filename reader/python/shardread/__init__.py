"""Read datasets written by shardc (libshardread) from Python, numpy and PyTorch.

    import shardread
    ds = shardread.Dataset('ds')              # map-style: ds[i] -> (image, label)
    loader = shardread.Loader('ds', batch_size=256, shuffle=True, threads=4)
    for images, labels in loader:             # (B, H, W, C) uint8, (B,) int64
        ...
    shardread.build(((path, label) for ...), 'ds', size=224)   # write one (see Writer)

Errors are shardread.Error subclasses: CorruptError (a damaged file, named in the message),
ArgumentError (a ValueError), ShapeError, NotFoundError (a FileNotFoundError), ReadError (an
OSError), StateError, UnsupportedError.

The work is done by the C extension shardread._shardread, built on CPython's stable ABI: it hands
out memory through the buffer protocol, and this layer makes the numpy arrays (np.asarray: no
copy) and torch tensors (torch.from_numpy: no copy, pinned where the reader's buffers are). So one
binary serves every CPython >= 3.11 with numpy 1 or 2.
"""
import hashlib as _hashlib
import inspect as _inspect
import numbers as _numbers
import os as _os
import sys as _sys

import numpy as _np

from . import _detect, _pipeline, _shardread
from ._shardread import (  # noqa: F401  (the public names)
    ArgumentError,
    CorruptError,
    Error,
    NotFoundError,
    ReadError,
    ShapeError,
    StateError,
    UnsupportedError,
    LIBRARY_VERSION_MAJOR,
    LIBRARY_VERSION_MINOR,
)

__version__ = _shardread.__version__
__all__ = [
    "Dataset", "Loader", "Stream", "Error", "ArgumentError", "CorruptError", "NotFoundError", "ReadError",
    "ShapeError", "StateError", "UnsupportedError", "__version__",
]

# the writer: shardc build's pipeline fed from Python (shardread/_writer.py, _shardwrite)
from ._writer import BuildError, BuildResult, Writer, build  # noqa: E402
__all__ += ["build", "Writer", "BuildResult", "BuildError"]

# a sample's read-time ops re-applied with torchvision (Loader(return_params="ops"))
from ._replay import replay  # noqa: E402
__all__ += ["replay"]

# the pipeline doctor (shardread/doctor.py), imported when first used: shardread.doctor(loader)
# calls it, python -m shardread.doctor runs its command line
__all__ += ["doctor"]


def __getattr__(name):
    if name == "doctor":
        import importlib
        return importlib.import_module(__name__ + ".doctor")
    raise AttributeError(f"module 'shardread' has no attribute {name!r}")


_View = _shardread._View
_asarray = _np.asarray
_from_numpy = None


def _wrap(parts, torch):
    """The tuple a Loader delivers (or a Dataset item): each _View becomes an ndarray over the
    same memory, a torch tensor too when torch is true; other items pass unchanged."""
    global _from_numpy
    out = [_asarray(p) if type(p) is _View else p for p in parts]
    if torch and _from_numpy is None:
        import torch as _torch
        _from_numpy = _torch.from_numpy
    conv = _from_numpy if torch else None
    for k, p in enumerate(out):
        if type(p) is dict:             # a Dataset item's detection target
            out[k] = _wrap_target(p, conv)
        elif type(p) is list and p and type(p[0]) is dict:     # a batch's targets
            out[k] = [_wrap_target(t, conv) for t in p]
        elif type(p) is list and p and type(p[0]) is _View:    # a list of label maps
            out[k] = [conv(_asarray(v)) if conv is not None else _asarray(v) for v in p]
        elif conv is not None and type(p) is _np.ndarray:
            out[k] = conv(p)
    return tuple(out)


def _wrap_target(t, conv):
    for key, v in t.items():
        if type(v) is _View:
            a = _asarray(v)
            t[key] = conv(a) if conv is not None else a
    return t


def _fence():
    """An event recorded on torch's current CUDA stream, or None while torch has not initialised
    CUDA (no device copy can then be queued). A pinned batch whose arrays are collected goes back
    to the reader only once this event has completed, so a queued images.cuda(non_blocking=True)
    never reads a buffer the workers are refilling."""
    torch = _sys.modules.get("torch")
    if torch is None:
        return None
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return None
    return cuda.current_stream().record_event()


_shardread._set_wrap(_wrap)
_shardread._set_fence(_fence)


# the Dataset, the Loader's keyword forms and its mixtures, in the package's private modules
# (shardread/_dataset.py, _forms.py, _mixture.py); the public classes keep shardread as their
# module, so pickles, reprs and help(shardread) name them as before
from ._dataset import (  # noqa: E402, F401
    Dataset, _cache_dir, _categories, _field_names, _fields_batch, _is_url, _local)
from ._forms import (  # noqa: E402, F401
    _KEYWORD_CLASSES, _UNITS, _aliases, _bytes, _channel_list, _check_normalize, _degrees,
    _erasing, _geometry, _jitter, _jitter_range, _keyword_objects, _mixing, _name, _size)
from ._mixture import _ON_ERROR, Stream, _mixture_arg, _streams  # noqa: E402, F401
Dataset.__module__ = Stream.__module__ = __name__


# ---- Loader ------------------------------------------------------------------------------------

_torch_loader_class = None


def _loader_class(cls):
    """The class a Loader is made as: once torch.utils.data is imported, a subclass of both
    Loader and torch's IterableDataset, so that DataLoader(loader, batch_size=None) takes it."""
    global _torch_loader_class
    if cls is not Loader or "torch.utils.data" not in _sys.modules:
        return cls
    if _torch_loader_class is None:
        itds = _sys.modules["torch.utils.data"].IterableDataset
        _torch_loader_class = type("Loader", (Loader, itds), {
            "__module__": __name__, "__qualname__": "Loader", "__doc__": Loader.__doc__})
    return _torch_loader_class


def _augment_fingerprint(kw, aug, unit, plan):
    """A short hash of what makes a sample's pixels: the crop, the augmentations (in the
    reader's terms, so color_jitter=(.4, .4, .4) and T.ColorJitter(.4, .4, .4) agree), the
    output dtype and normalisation, and transform='s Python ops."""
    keys = ("batch_size", "size", "random_crop", "flip", "rrc", "ratio", "interpolation",
            "dtype", "layout", "mean", "std", "pad", "drop_last", "uneven")
    def norm(k, v):
        if k == "size" and isinstance(v, int):
            return (float(v), float(v))
        if k == "rrc" and v is True:
            return (0.08, 1.0)
        if k == "ratio" and v is None:
            return (3 / 4, 4 / 3)
        if k == "flip" and isinstance(v, bool):
            return 0.5 if v else 0.0
        if isinstance(v, (list, tuple)):
            return tuple(float(x) if isinstance(x, _numbers.Real) else x for x in v)
        if isinstance(v, _numbers.Real) and not isinstance(v, bool):
            return float(v)
        return v

    defaults = {"aug_interpolation": "nearest", "aug_fill": 0.0, "erase_value": 0.0,
                "erase_scale": (0.02, 0.33), "erase_ratio": (0.3, 3.3)}
    parts = [repr((k, norm(k, kw.get(k)))) for k in keys]
    parts += [repr((k, norm(k, aug[k]))) for k in sorted(aug)
              if defaults.get(k, ()) != norm(k, aug[k])]
    parts.append(repr(("unit", unit)))
    if plan is not None:
        parts += [repr(type(op).__qualname__) + repr(getattr(op, "__dict__", ""))
                  for op in plan.python_ops]
    return _hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _restore_loader(kwargs, state):
    """Unpickling: a Loader opened from its keywords, moved to where the original stood."""
    loader = Loader(**kwargs)
    loader.load_state_dict(state)
    return loader


_FETCH = _os.path.join("torch", "utils", "data", "_utils", "fetch.py")


class Loader(_shardread.Loader):
    """Batches of a shardc dataset, read ahead by worker threads into a ring of buffers:

        for images, labels in shardread.Loader('ds', batch_size=256, shuffle=True):
            ...   # images (B, H, W, C) uint8, labels (B,) int64

    Each iteration is one epoch; the next iteration starts the next epoch (a random order is a
    fresh permutation per epoch, from seed and epoch). An iteration abandoned part way (a peek
    with next(iter(loader)), a break) is continued by the next one where state_dict() stands.
    The batches of an epoch depend only on the dataset, the options, seed and epoch, never on
    threads or timing.

    shuffle: random order (order='quasi' reads shard windows, for data larger than RAM).
    threads: worker threads (default: the cores, at most 4); threads='auto' starts two and
    adds or parks workers to keep the ring ahead of the consumer with the fewest, up to
    max_threads (default: the cores, at most 8); active_threads says how many work now.
    shardread.doctor(loader) measures what each stage costs and what to change.
    rank/world: this process's share;
    by default torch.distributed's when it is initialised, else the RANK and WORLD_SIZE
    environment variables, else 0 of 1; every rank gets the same number of batches
    (uneven='pad' repeats samples, 'drop' drops them). drop_last: drop a short last batch.

    size: an int (square, as torchvision's crops take it) or (height, width), any sequence;
    every sample is center-cropped to it (random_crop=True: at a random offset). Needed when
    samples vary in size. A sample smaller than size would be zero-padded: that is refused
    unless pad=True. flip: mirror with probability 1/2 (True) or the given probability.

    Read-time transforms, done by the worker threads: rrc=True (scale (0.08, 1.0)) or
    rrc=(min, max) draws torchvision's RandomResizedCrop box for every sample of every epoch
    (ratio=(min, max), default (3/4, 4/3)) and resizes it to size with interpolation
    ('bilinear' by default, or 'nearest', 'box', 'hamming', 'bicubic', 'lanczos', or
    torchvision's InterpolationMode): the pixels equal torchvision's F.resized_crop of the
    stored image, mirrored when flipped. dtype 'uint8', 'float32' or 'float16' (or the
    numpy/torch dtype), layout 'NHWC' or 'NCHW'. mean and std: per-channel normalisation
    (x - mean) / std on the 0..255 scale, one number or one per channel (torchvision's
    [0.485, 0.456, 0.406] is [123.675, 116.28, 103.53] here; 0..1 values are refused), or
    mean='dataset' for the dataset's own statistics; normalising implies float32 unless dtype
    says float16. float16 halves the bytes for a GPU model; a CPU model wants float32 (torch's
    CPU convolutions take no float16 input with float32 weights). return_params: batches
    become (images, labels, indices, params), params an (n, 5) int64 array of each sample's box
    x, y, w, h in the stored image and flip (0 or 1); return_params="ops" makes params instead
    a list of each sample's ops in torchvision's terms, (name, kwargs) pairs in the order they
    ran (the crop or resize, hflip, rotate, affine, auto_augment_op, the ColorJitter ops in
    their drawn order, rgb_to_grayscale, erase), so that shardread.replay(Dataset[i] image,
    ops) reproduces the delivered uint8 sample (see shardread.replay).

    Augmentations after the crop and flip, exact to torchvision 0.14 on the PIL image (the
    draws come from the reader's own per-sample, per-epoch stream, so threads and resuming never
    change them): color_jitter=(brightness, contrast, saturation, hue) or a dict of those, as
    ColorJitter takes them (a number v is [max(0, 1 - v), 1 + v], hue h is [-h, h], or a
    (min, max) pair), its four ops in a random order per sample; grayscale=p is
    RandomGrayscale(p); erasing=p or dict(p=, scale=, ratio=, value=) is RandomErasing, applied
    to the delivered values after the dtype conversion and normalisation, as torchvision erases
    the normalised tensor (value in those units; with uint8 output a whole number 0..255).
    rotation=degrees is RandomRotation (a number d: (-d, d)); affine=dict(degrees=, translate=,
    scale=, shear=) is RandomAffine; auto_augment='trivialaugment_wide' or 'randaugment' (or
    dict(policy=, num_ops=, magnitude=, num_magnitude_bins=), or torchvision's
    TrivialAugmentWide() / RandAugment() object) runs that policy; the three use
    augment_interpolation ('nearest', torchvision's default for them, or 'bilinear') and
    augment_fill (0, or one whole number per channel). Order: crop, flip, rotation, affine,
    auto_augment, color_jitter, grayscale, dtype and normalisation, erasing.
    auto_augment='imagenet' (or torchvision's AutoAugment() object, IMAGENET policy) is
    AutoAugment. erasing value='random' fills the box with standard normal noise (float dtypes;
    torchvision's distribution, the reader's own draws per seed, epoch and sample).
    Short forms: erase=p (with erase_value=) for erasing=, fill= for augment_fill=,
    auto_augment='ta_wide', 'rand_augment' or 'imagenet'; a short form together with its long
    name is a TypeError. interpolation= is the RandomResizedCrop's filter, so the ops above take
    augment_interpolation=.

    MixUp and CutMix, per finished batch (torchvision's reference recipe RandomMixup /
    RandomCutmix, or transforms.v2 MixUp / CutMix): mixup=alpha, cutmix=alpha (the recipe's 0.2
    and 1.0; with both, one of the two per batch). Sample i mixes with sample i - 1, lambda ~
    Beta(alpha, alpha) from the reader's draws per (seed, epoch, batch), so threads and resuming
    never change a batch. Batches become (images, soft_labels), soft_labels float32
    (B, num_classes) (num_classes: default the dataset's classes); with return_params, a dict
    after params records the batch: op ('mixup' or 'cutmix'), lam, lam_drawn, box (x1, y1, x2,
    y2) and labels (each sample's own). Needs a float dtype and a classification dataset.

    access: 'mmap', 'pread' (files that may change, network filesystems) or 'direct'
    (O_DIRECT). framework='torch': torch tensors sharing the batch memory. return_indices: a
    third element, the dataset indices. prefetch: ring buffers (default threads + 3).
    pin_memory: ring buffers in CUDA pinned memory where a device exists, so
    images.cuda(non_blocking=True) is an asynchronous copy; a pinned batch dropped while its
    copy is still queued goes back to the workers only once the copy is done (see fenced).

    on_error: what a sample that cannot be read (or, with verify_samples=True, whose pixels do
    not match their stored hash) does: 'fail' (default) raises, 'skip' leaves it out of a
    shorter batch, 'substitute' puts a deterministic other sample in its place; recovery()
    reports what was replaced or skipped. return_recovery: a last element, the list of this
    batch's samples not delivered as planned, one (index, position, code, reason) tuple each.

    Batches are zero-copy views of the ring buffers: a buffer is reused once every array and
    tensor of its batch is collected. Up to prefetch - 2 batches may be kept this way; a batch
    delivered while that many are kept is copied instead (see copies).

    len(loader) is the number of batches the next iteration yields (during an iteration: that
    iteration's), so after load_state_dict mid-epoch it is the rest of that epoch.
    state_dict() / load_state_dict() resume exactly, also on another world size; a state from
    another dataset or seed is refused unless strict=False. set_epoch(e) picks the epoch the
    next iteration reads, 0 .. 2**63 - 1; after epoch 2**63 - 1 the Loader stays at its end
    (its state_dict loads) and a further iteration raises OverflowError. classes and
    class_to_idx are ImageFolder's. A Loader pickles (spawn, copy.deepcopy): the copy reopens
    the dataset and stands where the original stood.

    Detection datasets (shardc build --coco / --yolo): targets=True makes batches
    (images, targets, ...), targets a list of one dict per sample as torchvision's detection
    models take them: boxes (N, 4) float32 x1 y1 x2 y2 in the delivered image's pixels, moved
    by the sample's crop or pad, RandomResizedCrop and flip (clipped; boxes left empty, or
    keeping less than min_box_area_fraction of their area, dropped and counted in 'dropped'),
    labels (N,) int64 (the category ids as given), area, iscrowd, image_id, orig_size. The
    colour augmentations leave the boxes alone; rotation, affine and auto_augment's shears,
    translations and rotations move each box as torchvision.transforms.v2 does: its 4 corners
    through the op's forward affine map, the axis-aligned box around them, clipped (after each
    op) and dropped as above; area scales by the map's determinant (include/shardread.h,
    "Targets"). A detection Dataset's items are (image, target).
    A dataset with instance masks or keypoints (--coco with segmentation / keypoints) adds
    'masks' (N, H, W) uint8 and 'keypoints' (N, K, 3) float32 to each target, moved exactly with
    the pixels by the crop or pad, RandomResizedCrop, the detection geometry below and flip
    (masks sampled nearest as torchvision.transforms.v2 resizes a Mask, 0 in the padding; an
    instance whose mask is left empty is dropped with its box; keypoints leaving the image or
    stored invisible are (0, 0, 0)). flip_indices=[...] (K ints) is the flip's left/right swap
    of the keypoints, required to flip a keypoint dataset. rotation, affine and auto_augment's
    shears, translations and rotations move them too: masks through Pillow's NEAREST with the
    pixels' matrix (0 outside), keypoints through the forward map, (0, 0, 0) once outside
    (include/shardread.h, "Masks and keypoints").
    A semantic segmentation dataset (shardc build --masks DIR) read with targets=True gives
    (images, masks, ...) instead: masks (B, H, W) uint8 label maps at the output size (a list
    of (h, w) ones where the images are a list), moved exactly with the pixels by the same
    geometry and flip (nearest, as v2 moves a Mask), the dataset's ignore index in the padding;
    colour ops leave them alone; rotation, affine and auto_augment's geometric ops move them
    with Pillow's NEAREST (the ignore index outside). label_dtype='int64' (or numpy's or
    torch's int64) delivers them int64, as CrossEntropyLoss takes them, every label a build
    stores (16-bit label sets too), widened in C; 'uint8' is the default, and refuses labels
    above 255. A label-map Dataset's items are (image, map):
    the stored map, (H, W) uint8, or int64 with Dataset(..., label_dtype='int64'), which also
    reads maps with labels above 255.

    Detection geometry at read time, in place of size= (one of the three; the boxes follow,
    clipped and dropped as above; the pixels equal torchvision's F.resize, F.crop and F.pad on
    the PIL image; with return_params, params has 8 more columns: scale_w, scale_h, crop_x,
    crop_y, pad_x, pad_y, image_w, image_h; each target gets 'size', (height, width) of its
    image): multiscale=(sizes, max_size) is torchvision's detection RandomShortestSize: a
    shortest side drawn from sizes per sample, the longest side at most max_size, so images
    vary in size: batches then give images as a list of per-image views (no copy; what
    torchvision's detection models take), or with pad_to=True one (B, max_size, max_size, C)
    batch (pad_to=(H, W): that canvas) with every image at the top left and zeros around it,
    as GeneralizedRCNNTransform batches them (target 'size' says each image's part); it needs
    targets=True. scale_jitter=target or (target, (lo, hi)) (default (0.1, 2.0)), target an int
    or (height, width), is ScaleJitter then FixedSizeCrop: a random scale of the fit to target,
    then a crop at a random offset where larger and zero padding bottom and right where
    smaller. letterbox=(height, width) or an int resizes to fit inside, keeping the aspect,
    and pads centered with zeros (the build's --fit pad). resize=S or (S, max_size) with
    size= is torchvision's evaluation geometry Resize(S[, max_size]) then CenterCrop(size)
    (the build's --short-side S --crop), pixel for pixel, for any dataset. flip then mirrors
    each image. The arithmetic: include/shardread/options.h, "Scale". A detection dataset
    whose images vary in size (built without --size), read with targets=True and none of size=,
    rrc=, random_crop= and the three above, gives each image at its stored size, in the same
    list of per-image views (target 'size' is the stored size; flip mirrors each image within
    its width; erasing= then needs one of the sizes above).

    Once torch is imported, a Loader is a torch.utils.data.IterableDataset: use
    DataLoader(loader, batch_size=None) with num_workers=0 (the Loader has its own threads);
    worker processes and a DataLoader that would batch the batches again are refused. The GIL
    is released while waiting for a batch. Errors: shardread.Error subclasses (CorruptError
    names the damaged file), FileNotFoundError for a missing dataset, ValueError for bad
    arguments, naming the keyword.
    """

    def __new__(cls, *args, **kwargs):
        unknown = set(kwargs) - set(_inspect.signature(Loader.__init__).parameters)
        if unknown:
            import difflib
            k = sorted(unknown)[0]
            near = difflib.get_close_matches(k, list(_inspect.signature(
                Loader.__init__).parameters)[2:], n=1)
            raise TypeError(f"Loader() got an unexpected keyword argument {k!r}"
                            + (f": did you mean {near[0]!r}?" if near else ""))
        return _shardread.Loader.__new__(_loader_class(cls))

    # cache=: where a dataset at a URL is downloaded (docs/REMOTE.md); for datasets at URLs
    # (one, or a mixture's streams), cache_limit= (bytes, or '200GiB') bounds their folders
    # together and prefetch_shards= says how many shards of each are downloaded ahead, in the
    # sampler's order, as the epoch is read

    def __init__(self, path, batch_size=256, shuffle=False, seed=0, threads=None, rank=None,
                 world=None, drop_last=False, size=None, random_crop=False, flip=False,
                 access="mmap", framework="numpy", return_indices=False, order=None,
                 prefetch=None, pin_memory=True, uneven="pad", quasi_window=4, rrc=None,
                 ratio=None, interpolation="bilinear", dtype=None, layout="NHWC", mean=None,
                 std=None, return_params=False, on_error="fail", verify_samples=False,
                 return_recovery=False, pad=False, color_jitter=None, grayscale=0.0,
                 erasing=None, rotation=None, affine=None, auto_augment=None,
                 augment_interpolation=None, augment_fill=None, targets=False,
                 min_box_area_fraction=0.0, mixup=None, cutmix=None, num_classes=None,
                 erase=None, erase_value=None, fill=None, multiscale=None,
                 scale_jitter=None, letterbox=None, pad_to=None, samples_per_epoch=None,
                 labels="keep", return_streams=False, cache=None, fields=False,
                 transform=None, scale=None, py_workers=None, py_pool="thread",
                 max_threads=None, cache_limit=None, prefetch_shards=None, resize=None,
                 flip_indices=None, label_dtype=None):
        # first: the keywords exactly as the caller gave them (super() adds __class__)
        given_args = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        self._streams = _streams(path)
        remote = {}
        if (_is_url(path) if self._streams is None else
                any(_is_url(st.path) for st in self._streams)):
            # read as its shards arrive, in the sampler's order (docs/REMOTE.md); a mixture's
            # streams at URLs alike, sharing cache_limit
            remote = dict(cache=_cache_dir(cache),
                          cache_limit=_bytes(cache_limit, "cache_limit"),
                          prefetch_shards=prefetch_shards)
        elif cache_limit is not None or prefetch_shards is not None:
            raise ValueError("cache_limit and prefetch_shards are for datasets at URLs "
                             "(s3://, http://, https://): one, or a mixture's streams")
        if self._streams is not None:
            path = _mixture_arg(self._streams, samples_per_epoch, labels, return_streams)
        elif samples_per_epoch is not None or labels != "keep" or return_streams:
            raise TypeError("samples_per_epoch, labels and return_streams are for a mixture: "
                            "Loader([(path, weight), ...]) or a list of shardread.Stream")
        elif not remote:
            path = _local(path, cache)
        self._labels = labels
        if self._streams is not None and fields is not False and fields is not None:
            raise TypeError("fields= is not available for a mixture: read each stream's fields "
                            "with its own Dataset")
        erasing, augment_fill = _aliases(erasing, augment_fill, erase, erase_value, fill)
        objs = _keyword_objects(dict(rrc=rrc, flip=flip, rotation=rotation, affine=affine,
                                     color_jitter=color_jitter, grayscale=grayscale,
                                     erasing=erasing),
                                dict(size=size, ratio=ratio, interpolation=interpolation,
                                     augment_interpolation=augment_interpolation,
                                     augment_fill=augment_fill))
        rrc, flip, rotation, affine = (objs.get(k, v) for k, v in (
            ("rrc", rrc), ("flip", flip), ("rotation", rotation), ("affine", affine)))
        color_jitter, grayscale, erasing = (objs.get(k, v) for k, v in (
            ("color_jitter", color_jitter), ("grayscale", grayscale), ("erasing", erasing)))
        size, ratio, interpolation = (objs.get(k, v) for k, v in (
            ("size", size), ("ratio", ratio), ("interpolation", interpolation)))
        augment_interpolation = objs.get("augment_interpolation", augment_interpolation)
        augment_fill = objs.get("augment_fill", augment_fill)
        self._stage = self._plan = None
        user_indices = return_indices
        if transform is not None:
            given = dict(size=size, rrc=rrc, ratio=ratio, random_crop=random_crop, pad=pad,
                         flip=flip, rotation=rotation, affine=affine, auto_augment=auto_augment,
                         color_jitter=color_jitter, grayscale=grayscale, dtype=dtype,
                         layout=None if str(layout).upper() == "NHWC" else layout, mean=mean,
                         std=std, erasing=erasing, scale=scale, resize=resize,
                         augment_interpolation=augment_interpolation,
                         augment_fill=augment_fill,
                         interpolation=None if interpolation == "bilinear" else interpolation)
            plan = _pipeline.compile_pipeline(
                transform, Dataset(path, access, cache=cache).info["channels"])
            both = sorted(k for k, v in given.items()
                          if v not in (None, False, 0, 0.0) and k in plan.kwargs)
            if both:
                raise TypeError(f"transform= sets {', '.join(both)} from its ops; give "
                                f"{'it' if len(both) == 1 else 'them'} there, not also as "
                                "keyword(s)")
            pk = plan.kwargs
            size, rrc, ratio = pk.get("size", size), pk.get("rrc", rrc), pk.get("ratio", ratio)
            resize = pk.get("resize", resize)
            random_crop, pad = pk.get("random_crop", random_crop), pk.get("pad", pad)
            interpolation = pk.get("interpolation", interpolation)
            flip, rotation = pk.get("flip", flip), pk.get("rotation", rotation)
            affine, auto_augment = pk.get("affine", affine), pk.get("auto_augment", auto_augment)
            color_jitter = pk.get("color_jitter", color_jitter)
            grayscale, erasing = pk.get("grayscale", grayscale), pk.get("erasing", erasing)
            dtype, layout = pk.get("dtype", dtype), pk.get("layout", layout)
            mean, std, scale = pk.get("mean", mean), pk.get("std", std), pk.get("scale", scale)
            augment_interpolation = pk.get("augment_interpolation", augment_interpolation)
            augment_fill = pk.get("augment_fill", augment_fill)
            self._plan = plan
            if plan.python_ops:
                if mixup or cutmix or targets:
                    raise TypeError("transform= with ops that run in Python (" + ", ".join(
                        type(o).__name__ for o in plan.python_ops) + ") cannot be combined "
                        "with mixup=, cutmix= or targets=")
                if py_pool not in ("thread", "process"):
                    raise ValueError(f"py_pool must be 'thread' or 'process', not {py_pool!r}")
                return_indices = True
        elif py_workers is not None or py_pool != "thread":
            raise TypeError("py_workers= and py_pool= are for the Python ops of transform=")
        if scale not in (None, 1, 255):
            raise ValueError(f"scale must be 1 (values 0..1, as torchvision's ToTensor gives "
                             f"them; mean and std on that scale) or 255 (0..255, the default), "
                             f"not {scale!r}")
        unit = 255.0 if scale == 1 else None
        if unit and dtype is None:
            dtype = "float32"
        size = _size(size)
        interpolation = _name(interpolation)
        dtype = _name(dtype)
        counts = _check_normalize(mean, std, dtype, unit)
        kw = dict(batch_size=batch_size, shuffle=shuffle, seed=seed, threads=threads, rank=rank,
                  world=world, drop_last=drop_last, size=size, random_crop=random_crop,
                  flip=flip, access=access, framework=framework,
                  return_indices=return_indices, order=order, prefetch=prefetch,
                  pin_memory=pin_memory, uneven=uneven, quasi_window=quasi_window, rrc=rrc,
                  ratio=ratio, interpolation=interpolation, dtype=dtype, layout=layout,
                  mean=mean, std=std, return_params=return_params, on_error=on_error,
                  verify_samples=verify_samples, return_recovery=return_recovery)
        if max_threads is not None:
            kw["max_threads"] = max_threads
        if not isinstance(pad, bool):
            raise TypeError(f"pad must be True or False, not {pad!r}")
        aug = dict(_jitter(color_jitter), **_erasing(erasing),
                   **_geometry(rotation, affine, auto_augment, augment_interpolation,
                               augment_fill))
        if grayscale:
            aug["grayscale_p"] = float(grayscale)
        if unit:
            aug["unit"] = unit
        if targets or min_box_area_fraction:
            aug["targets"] = targets
            aug["min_box_area_fraction"] = min_box_area_fraction
        if flip_indices is not None:
            aug["flip_indices"] = flip_indices
        if label_dtype is not None:
            aug["label_dtype"] = label_dtype
        aug.update(_mixing(mixup, cutmix, num_classes))
        # the detection geometry: its own output size (and canvas), in place of size=
        scale_size, scale, self._image_list = _detect.scale_args(
            multiscale, scale_jitter, letterbox, pad_to, size, rrc, random_crop, targets,
            aug.get("erase_p"), resize, pad)
        if scale is not None:
            aug["scale"] = scale
        # the indices stay in the batches delivered (the Python stage and fields= read them)
        self._keep_indices = bool(user_indices or return_params)
        self._fields = None
        if fields is not False and fields is not None:
            # the batch's indices say which samples' fields to read (a dataset at a URL with
            # cache_limit: read on demand in the same cache folder, within the same limit; the
            # Loader's own downloads keep one shard below it, the room the fields' reads may
            # need for a shard the Loader has evicted, so that neither waits for the other)
            limit = remote.get("cache_limit")
            self._fields = Dataset(path, access, cache=cache, fields=fields, cache_limit=limit)
            if limit:
                import json
                with open(_os.path.join(self._fields.path, "manifest.json"), "rb") as f:
                    largest = max([s["bytes"] for s in json.load(f)["shards"]] or [0])
                remote["cache_limit"] = max(limit - largest, 1)
            kw["return_indices"] = True
        aug.update(remote)
        try:
            super().__init__(path, **(dict(kw, size=scale_size) if scale else kw), **aug)
        except ShapeError:
            # a detection dataset at its natural sizes, with no size or geometry asked for: each
            # image as stored, in the list of per-image views multi-scale batches are
            if not _detect.natural_fits(targets, scale, size, rrc, random_crop, aug):
                raise
            aug["scale"] = _detect.NATURAL
            self._image_list = True
            super().__init__(path, **kw, **aug)
        if targets and not self.info["targets"]:
            raise ArgumentError(f"targets=True: {path!r} has no targets (it was not built with "
                                "shardc build --coco or --yolo)")
        channels = self.info["shape"][2]
        if counts is not None:
            for what, n in zip(("mean", "std"), counts):
                if n not in (1, channels):
                    raise ValueError(f"{what} has {n} values; the samples have {channels} "
                                     f"channel(s): give 1 or {channels}")
        if size is not None and not rrc and not pad and not remote and resize is None:
            want = (size, size) if isinstance(size, int) else size
            for p in self._paths():
                smallest = Dataset(p, access)._scan()[1]
                if want[0] > smallest[0] or want[1] > smallest[1]:
                    raise ValueError(
                        f"size={size!r} is larger than the smallest stored sample of {p!r} "
                        f"({smallest[0]}x{smallest[1]}, height x width): it would be "
                        "zero-padded; pass pad=True to pad it, or a smaller size")
        self._augment = _augment_fingerprint(dict(kw, pad=pad), aug, unit, self._plan)
        if self._plan is not None and self._plan.python_ops:
            self._stage = _pipeline.PythonStage(
                self._plan.python_ops, self._plan.tensor,
                py_workers or _pipeline.default_workers(self.threads), py_pool, framework)
        # what a copy needs to reopen the same Loader in another process (transform= is
        # compiled again there): the keywords as given, with the share this one resolved
        self._kwargs = dict(given_args, rank=self.rank, world=self.world)
        self._fingerprint = None

    def __reduce__(self):
        return (_restore_loader, (self._kwargs, self.state_dict()))

    def __iter__(self):
        caller = _sys._getframe(1)
        if (caller.f_code.co_filename.endswith(_FETCH) and
                caller.f_locals.get("auto_collation")):
            raise TypeError(
                "DataLoader(loader) batches the Loader's batches again (its default "
                "batch_size=1 would give (1, B, ...) tensors): use DataLoader(loader, "
                "batch_size=None), or iterate the Loader itself")
        it = super().__iter__()
        if self._image_list:        # multiscale= without pad_to=: a list of per-image views
            nchw = self.info["layout"] == "NCHW"
            it = (_detect.image_list(b, nchw) for b in it)
        elif self._stage is not None:
            it = self._python_iter(it)
        if self._fields is not None:
            it = self._with_fields(it)
        return it

    def _with_fields(self, it):
        """(images, labels, fields, ...): the batch's fields (a dict) after its labels."""
        ds, keep = self._fields, self._keep_indices
        torch = self._kwargs["framework"] == "torch"
        for b in it:
            f = _fields_batch(ds, ds._defs, ds._which, [int(i) for i in b[2]], torch)
            yield b[:2] + (f,) + (b[2:] if keep else b[3:])

    def _paths(self):
        """The dataset of each stream (one for a single dataset)."""
        if self._streams is None:
            if _is_url(self.path):      # its manifest, in the cache folder
                return [self._cache_info()["dir"] or _local(self.path, self._kwargs["cache"])]
            return [self.path]
        return self._cache_info()["dirs"]    # a stream at a URL: its cache folder

    @property
    def streams(self):
        """A mixture's streams (shardread.Stream each, in order), or None for one dataset."""
        return None if self._streams is None else list(self._streams)

    def _python_iter(self, it):
        """The reader's batches with transform='s Python ops applied per sample, seeded per
        (seed, epoch, index) (shardread/_pipeline.py)."""
        stage, seed = self._stage, self.seed
        clock = _pipeline._time.perf_counter
        while True:
            t0 = clock()
            try:
                b = next(it)
            except StopIteration:
                return
            stage.note_wait(clock() - t0)
            epoch, indices = self.epoch, b[2]
            seeds = [_pipeline.sample_seed(seed, epoch, int(i)) for i in indices]
            images = stage.apply(b[0], seeds)
            rest = list(b[1:])
            if not self._keep_indices and self._fields is None:
                del rest[1]         # fields= reads the indices next, and drops them
            yield (images, *rest)

    @property
    def plan(self):
        """What transform= became: {'c': the ops the reader's threads run, 'python': the ops
        run per sample in Python after them, 'c_stages': the reader's stage of each C op,
        'python_from': why the C prefix ended (None when every op runs in C)}; None without
        transform=."""
        return None if self._plan is None else self._plan.as_dict()

    def dataset_fingerprint(self):
        """A short hash of the dataset's manifest (a mixture's: every stream's, with its
        weight, repeat, choose and labels): states record it, and load_state_dict refuses a
        state saved on another dataset."""
        if self._fingerprint is None:
            h = _hashlib.sha256()
            for k, p in enumerate(self._paths()):
                with open(_os.path.join(_os.fsdecode(_os.fspath(p)), "manifest.json"),
                          "rb") as f:
                    data = f.read()
                if self._streams is None:
                    h.update(data)
                else:
                    st = self._streams[k]
                    h.update(repr((_hashlib.sha256(data).hexdigest(), st.weight, st.repeat,
                                   st.choose)).encode())
            if self._streams is not None:
                h.update(repr((self._kwargs.get("samples_per_epoch"), self._labels)).encode())
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def state_dict(self):
        state = super().state_dict()
        state["dataset"] = self.dataset_fingerprint()
        state["augment"] = self._augment
        return state

    def load_state_dict(self, state, strict=True):
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict takes the dict of state_dict(), not "
                            f"{type(state).__name__}")
        theirs = state.get("dataset")
        if strict and theirs is not None and theirs != self.dataset_fingerprint():
            raise ValueError(
                f"state was saved on another dataset (manifest fingerprint {theirs}, this one "
                f"{self.dataset_fingerprint()}): it would not resume the same samples "
                "(load_state_dict(state, strict=False) loads it anyway)")
        aug = state.get("augment")
        if strict and aug is not None and aug != self._augment:
            raise ValueError(
                f"state was saved with other augmentation options (fingerprint {aug}, this "
                f"Loader's {self._augment}): it would not resume the same samples "
                "(load_state_dict(state, strict=False) loads it anyway)")
        state = {k: v for k, v in state.items() if k != "augment"}
        return super().load_state_dict(state, strict=strict)

    @property
    def classes(self):
        """The class names; label L is classes[L] (torchvision ImageFolder's classes). A
        mixture with labels='offset': the streams' classes joined in stream order (stream s's
        label L is L + the classes of the streams before it); with labels='keep': the longest
        of the streams' class lists (labels as stored)."""
        if self._streams is None:
            return Dataset(self.path).classes
        lists = [Dataset(p).classes for p in self._paths()]
        if self._labels == "offset":
            return [c for cl in lists for c in cl]
        return max(lists, key=len)

    @property
    def class_to_idx(self):
        """{class name: label} (torchvision ImageFolder's class_to_idx); a mixture's from
        classes (a name that two streams share maps to its first label)."""
        if self._streams is None:
            return Dataset(self.path).class_to_idx
        out = {}
        for k, c in enumerate(self.classes):
            out.setdefault(c, k)
        return out


# the signatures inspect and IDEs show: the keywords, not (*args, **kwargs)
Loader.__signature__ = _inspect.signature(Loader.__init__).replace(
    parameters=list(_inspect.signature(Loader.__init__).parameters.values())[1:])
Loader.state_dict.__doc__ = _shardread.Loader.state_dict.__doc__
Loader.load_state_dict.__doc__ = _shardread.Loader.load_state_dict.__doc__
