"""shardread.Dataset: a dataset sample by sample (map-style), its fields and categories; and where
a dataset at a URL is read from (its folder in the local cache)."""
import os as _os

import numpy as _np

from . import _shardread
from ._shardread import ArgumentError


def _choice_names(field):
    """a choice's names in the options table (reader/options.def), by value ("" for a value not
    accepted): the one list of them the package reads"""
    return next(r["choices"] for r in _shardread.option_table() if r["field"] == field)


def _field_names(defs, fields, path):
    """fields= (True, or a list of names) -> the indices into the schema, checked by name."""
    names = [d[0] for d in defs]
    if not defs:
        raise ArgumentError(f"fields=: {path!r} has no fields (built without "
                            "Writer(fields=) or shardc build --fields)")
    if fields is True:
        return list(range(len(defs)))
    if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
        raise TypeError(f"fields must be True or a list of field names, not {fields!r}")
    out = []
    for f in fields:
        if f not in names:
            raise ArgumentError(f"fields=: no field {f!r} in {path!r} (its fields: "
                                f"{', '.join(names)})")
        out.append(names.index(f))
    return out


def _fields_batch(ds, defs, which, indices, torch):
    """The fields of samples `indices` as a dict: numeric fields stacked, (n,) or (n, N)
    int64 / float64 arrays (torch tensors when torch is true), str and bytes fields lists."""
    cols = ds._fields(indices)
    n = len(indices)
    out = {}
    for k in which:
        name, typ, count = defs[k]
        c = cols[k]
        if typ in ("int", "float"):
            a = _np.frombuffer(c, dtype="<i8" if typ == "int" else "<f8")
            a = a.reshape((n, count) if count else (n,)).copy()
            if torch:
                import torch as _torch
                a = _torch.from_numpy(a)
            out[name] = a
        else:
            out[name] = c
    return out


def _is_url(path):
    return isinstance(path, str) and path.startswith(("s3://", "http://", "https://"))


def _cache_dir(cache):
    """The cache root for the library: cache=, else $SHARDREAD_CACHE, else None (the library's
    ~/.cache/shardread). The package reads the environment; the library reads none."""
    if cache is not None:
        return _os.fsdecode(cache)
    return _os.environ.get("SHARDREAD_CACHE") or None


def _local(path, cache):
    """path itself, or for a dataset at a URL (s3://, http://, https://) its directory in the
    local cache (cache=, else $SHARDREAD_CACHE, else ~/.cache/shardread), downloaded and checked
    against its manifest first (docs/REMOTE.md)."""
    if _is_url(path):
        return _shardread._fetch(path, _cache_dir(cache))
    return path


class Dataset(_shardread.Dataset):
    """Dataset(path, access='mmap', verify_samples=False, cache=None, fields=False,
               label_dtype=None)

    A dataset directory written by shardc, sample by sample (a map-style dataset, usable as a
    torch Dataset):

        ds = shardread.Dataset('ds')
        len(ds)                    # samples
        image, label = ds[i]       # (H, W, C) uint8 ndarray (a copy), int label
                                   # (a detection dataset: (image, target dict); a label-map
                                   # one: (image, map), the map (H, W) uint8, or int64 with
                                   # label_dtype='int64', which also takes labels above 255)
        ds.classes                 # class names; ds.class_to_idx, ds.targets as ImageFolder's
        ds.info                    # classes, mean/std, geometry, samples, format

    Samples are returned as stored, each at its own size. access: 'mmap' (default), 'pread' or
    'direct' (see libshardread). Raises FileNotFoundError (shardread.NotFoundError) for a
    directory without a manifest and shardread.CorruptError for a damaged shard, with a message
    naming the file. verify_samples=True hashes every sample read and raises CorruptError, naming
    the shard and the sample, when its pixels do not match the hash recorded at build time.
    Reads release the GIL; a Dataset may be read from several threads at once. A Dataset pickles
    (it reopens from its path in the receiving process). path may be a URL, s3://BUCKET/PREFIX
    or http(s)://BASE: the dataset is downloaded into the cache (cache=, else $SHARDREAD_CACHE,
    else ~/.cache/shardread) and checked first (docs/REMOTE.md). With cache_limit= (bytes, or
    a string such as '20GiB') it is read on demand instead: the open fetches the manifest (and
    the shards' indexes where it needs them), ds[i] downloads the shard holding sample i when
    the cache lacks it, and the dataset's cache folder keeps within the limit, evicting shards
    least recently used (shared safely with Loaders and Datasets of other processes). A limit
    below the largest shard is refused, naming the minimum.
    """

    def __init__(self, path, access="mmap", verify_samples=False, cache=None, fields=False,
                 label_dtype=None, cache_limit=None):
        if cache_limit is not None:
            from ._forms import _bytes
            if not _is_url(path):
                raise ValueError("cache_limit is for a dataset at a URL (s3://, http://, "
                                 "https://)")
            # read on demand: each sample's shard fetched when it is read (docs/REMOTE.md)
            limit = _bytes(cache_limit, "cache_limit")
            if limit < 1:
                raise ValueError(f"cache_limit must be at least 1 byte, not {cache_limit!r}")
            super().__init__(path, access, verify_samples, label_dtype,
                             _cache_dir(cache), limit)
        else:
            super().__init__(_local(path, cache), access, verify_samples, label_dtype)
        self._args = (path, access, verify_samples, cache, fields, label_dtype, cache_limit)
        self._scanned = None
        self._defs = self._field_defs()
        self._which = _field_names(self._defs, fields, path) if fields else None

    def __getitem__(self, i):
        item = super().__getitem__(i)
        if self._which is None:
            return item
        if i < 0:
            i += len(self)
        f = _fields_batch(self, self._defs, self._which, [i], False)
        return item + ({k: (v[0] if isinstance(v, list) else
                            v[0].item() if v.ndim == 1 else v[0]) for k, v in f.items()},)

    @property
    def field_schema(self):
        """The dataset's fields: a list of (name, type, count), type 'int', 'float', 'str' or
        'bytes', count N for a vector of N numbers, 0 for a scalar, a str or bytes."""
        return list(self._defs)

    def fields(self, indices, names=None, framework="numpy"):
        """The fields of the samples at `indices` as a dict: numeric fields stacked ((n,) or
        (n, N) int64 / float64 arrays, torch tensors with framework='torch'), str and bytes
        fields as lists. names: which fields (default: all)."""
        which = _field_names(self._defs, True if names is None else names, self.path)
        return _fields_batch(self, self._defs, which, list(indices), framework == "torch")

    @property
    def categories(self):
        """A detection dataset's categories: [{'id': id, 'name': name}, ...] as the annotations
        give them (labels are ids); [] for a classification dataset."""
        return _categories(self.path)

    def __reduce__(self):
        return (type(self), self._args)

    def _scan_once(self):
        if self._scanned is None:
            self._scanned = self._scan()
        return self._scanned

    @property
    def classes(self):
        """The class names; label L is classes[L] (torchvision ImageFolder's classes)."""
        return list(self.info["classes"])

    @property
    def class_to_idx(self):
        """{class name: label} (torchvision ImageFolder's class_to_idx)."""
        return {c: i for i, c in enumerate(self.info["classes"])}

    @property
    def targets(self):
        """Every sample's label, in sample order (torchvision ImageFolder's targets)."""
        return list(self._scan_once()[0])


def _categories(path):
    import json
    with open(_os.path.join(_os.fsdecode(_os.fspath(path)), "manifest.json"), "rb") as f:
        t = json.load(f).get("targets")
    return [dict(id=c["id"], name=c["name"]) for c in t["categories"]] if t else []
