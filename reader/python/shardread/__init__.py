"""Read datasets written by shardc (libshardread) from Python, numpy and PyTorch.

    import shardread
    ds = shardread.Dataset('ds')              # map-style: ds[i] -> (image, label)
    loader = shardread.Loader('ds', batch_size=256, shuffle=True, threads=4)
    for images, labels in loader:             # (B, H, W, C) uint8, (B,) int64
        ...

Errors are shardread.Error subclasses: CorruptError (a damaged file, named in the message),
ArgumentError (a ValueError), ShapeError, NotFoundError (a FileNotFoundError), ReadError (an
OSError), StateError, UnsupportedError.

The work is done by the C extension shardread._shardread, built on CPython's stable ABI: it hands
out memory through the buffer protocol, and this layer makes the numpy arrays (np.asarray: no
copy) and torch tensors (torch.from_numpy: no copy, pinned where the reader's buffers are). So one
binary serves every CPython >= 3.11 with numpy 1 or 2.
"""
import sys as _sys

import numpy as _np

from . import _shardread
from ._shardread import (  # noqa: F401  (the public names)
    ArgumentError,
    CorruptError,
    Dataset,
    Error,
    Loader,
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
    "Dataset", "Loader", "Error", "ArgumentError", "CorruptError", "NotFoundError", "ReadError",
    "ShapeError", "StateError", "UnsupportedError", "__version__",
]

_View = _shardread._View
_asarray = _np.asarray
_from_numpy = None


def _wrap(parts, torch):
    """The tuple a Loader delivers (or a Dataset item): each _View becomes an ndarray over the
    same memory, a torch tensor too when torch is true; other items pass unchanged."""
    global _from_numpy
    out = [_asarray(p) if type(p) is _View else p for p in parts]
    if torch:
        if _from_numpy is None:
            import torch as _torch
            _from_numpy = _torch.from_numpy
        out = [_from_numpy(a) if type(a) is _np.ndarray else a for a in out]
    return tuple(out)


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
