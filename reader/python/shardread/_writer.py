"""The dataset writer: `shardc build` fed from Python (shardread.build, shardread.Writer).

    import shardread
    r = shardread.build(((path, label) for path, label in my_list), "ds",
                        size=224, format="raw", threads=8)
    print(r.samples, r.rejects)

    with shardread.Writer("ds", short_side=256, classes=["cat", "dog"]) as w:
        for img, label in my_dataset:          # paths, bytes, PIL images or numpy arrays
            w.add(img, label)

The items go through shardc's own C pipeline (compiler/build.c, in the _shardwrite extension):
the same decoders, the same Pillow-exact geometry, hashes, shards written under temporary names
and renamed, rejects.tsv, warnings.tsv, inputs.tsv and the manifest last, in worker threads with
the GIL released. The iterable is read in order, in the calling thread, while the workers run:
at most `window` items (default 4 * threads + 8) are held at once, so it may be a generator over
a dataset larger than memory.

What an image may be
--------------------
- a path (str or os.PathLike; bytes are an encoded image, below): the file is read and decoded
  as shardc reads its inputs;
- encoded bytes (bytes, bytearray, memoryview): the bytes of an image file (JPEG, PNG, BMP),
  decoded by the same decoders as files (so they equal the file they came from, shrink-on-load
  included);
- a PIL image: converted with Pillow's own Image.convert to "RGB" (channels=3) or "L"
  (channels=1) when it is not already in that mode (palette, RGBA, LA, CMYK, I;16 ...: Pillow's
  rules for that mode), then taken as pixels;
- a numpy array of uint8 (or anything np.asarray takes, e.g. a CPU torch tensor in HWC layout),
  HxW (gray) or HxWxC with C = 1 (gray), 3 (RGB) or 4 (RGBA): pixels. With layout="CHW" (a
  Writer/build option) a 3-D array is CxHxW instead, as torchvision's uint8 tensors
  (PILToTensor, decode_image) are. Without it, a 3-D array that can only be CxHxW (1, 3 or 4
  first, more than 4 last) is refused with a ValueError naming the option, not rejected.
  To the build's channels as the decoders treat files of that layout: gray replicated to RGB,
  alpha dropped, RGB to gray by Pillow's L = (299 R + 587 G + 114 B) / 1000 (rounded as Pillow).
Pixels skip the decode (and so shrink-on-load: they are the full-size image), then go through
the same limits, geometry and augmentation as a decoded file. Anything else, or an array of
another dtype or shape, is a reject of its position (listed in rejects.tsv with the reason; with
strict=True the build stops there and raises BuildError), as an undecodable file or a missing
path is. A build in which every item was rejected writes its 0-sample dataset (as shardc build
does, exit 1) and raises BuildError with the rejects (`rejects`, the first ones named).

Labels and classes
------------------
A label is an int 0..1000000. classes=[names] names them (labels must then be below
len(classes)); without it the manifest names class L "L" for every L up to the largest label,
as shardc does for a --list build.

What equals `shardc build`
--------------------------
The dataset written from paths equals, sample for sample, the one `shardc build SRC --list LIST`
writes from the same files and labels in the same order with the same options (or a class-folder
build, given classes=[its folder names] and its order): the same samples in the same shards,
byte-equal pixel payloads, the same labels, per-sample hashes, sources (input positions), channel
statistics and class names; rejects.tsv and warnings.tsv list the same reasons. What differs:
- inputs.tsv and rejects.tsv record each input by the name it was given: a path as given (str,
  or os.fsdecode of bytes / PathLike), and an in-memory item (bytes, PIL image, array, or anything
  rejected for its type) as "<memory>#N", N its input position (the `source` of its sample);
- the manifest's build record says "source": "stream", and the build fingerprint (every shard
  header and the manifest) covers the options alone, not the input names: a streamed build
  cannot know them when its first shard is written (shardc verify knows this rule). So a
  written dataset cannot be --resume'd; shardc verify, the reader and shardread.Loader take it as
  any other.
Pixels (arrays, PIL images) equal a file's samples when the decoder gives Pillow's pixels for
that file, as it does for PNG, BMP and (RGB builds) JPEG files, without shrink_on_load (which only
a file or its bytes can have). A colour JPEG in a channels=1 build is decoded by libjpeg straight
to gray (its Y), which may differ by one from Pillow's convert("L") of the RGB decode.

Errors
------
Keyword arguments that shardc has no option for are a TypeError; bad values a ValueError naming
the argument. An exception raised by the iterable (or inside a `with Writer(...)` block) stops
the build and leaves no dataset: the shards written so far are removed and no manifest is ever
written (an output directory the build created is removed too). A build that cannot write its
output (the directory holds something else, I/O errors) raises BuildError (OSError for an I/O
error, with its errno), naming the reason.
"""
import numbers as _numbers
import operator as _operator
import os as _os
import sys as _sys



def _ext():
    """The writer's extension, imported on first use: `import shardread` works without it."""
    from . import _shardwrite
    return _shardwrite

__all__ = ["build", "Writer", "BuildResult", "BuildError"]

_MAX_LABEL = 1000000
_GEOMETRY_OPTS = ("size", "short_side", "max_side", "crop", "fit", "filter", "shrink_on_load")


class BuildError(RuntimeError):
    """A build that did not finish: `messages` holds what shardc would have printed, `code` the
    shardc error name, `exit` the exit status shardc would have given (1 rejects with strict,
    or every item rejected; 2 refused before any work, 3 I/O), `rejects` the (name, reason)
    pairs when items were rejected."""

    def __init__(self, text, messages=(), code=None, exit=None, rejects=()):
        super().__init__(text)
        self.messages = list(messages)
        self.code = code
        self.exit = exit
        self.rejects = list(rejects)


class BuildResult:
    """A finished build: the counts of shardc's summary, and the rejects and warnings as
    (name, reason) pairs (the rows of rejects.tsv and warnings.tsv written by this build)."""

    __slots__ = ("out", "samples", "classes", "shards", "bytes", "inputs", "seconds",
                 "images_per_s", "threads", "rejects", "warnings", "messages")

    def __init__(self, out, summary, rejects, warnings, messages):
        self.out = out
        for k in ("samples", "classes", "shards", "bytes", "inputs", "seconds", "images_per_s",
                  "threads"):
            setattr(self, k, summary[k])
        self.rejects = list(rejects)
        self.warnings = list(warnings)
        self.messages = list(messages)

    def __repr__(self):
        return (f"BuildResult(out={self.out!r}, samples={self.samples}, classes={self.classes}, "
                f"shards={self.shards}, rejects={len(self.rejects)}, "
                f"images_per_s={self.images_per_s:.1f})")


def _uint(name, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral):
        raise ValueError(f"{name} must be an int {lo}..{hi}, not {v!r}")
    v = int(v)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be {lo}..{hi}, not {v}")
    return v


def _bytes_opt(name, v, lo):
    """A byte count: an int or a size string as shardc takes it ('512MiB')."""
    if isinstance(v, str):
        try:
            v = _ext().parse_size(v)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    return _uint(name, v, lo, 2 ** 64 - 1)


def _hw(name, v):
    """size= / crop=: an int N (N x N) or (height, width), as torchvision and shardread.Loader
    take it (the CLI's WxH is width first)."""
    if isinstance(v, bool):
        raise ValueError(f"{name} must be an int or (height, width), not {v!r}")
    if isinstance(v, _numbers.Integral):
        n = _uint(name, v, 1, 65535)
        return n, n
    try:
        seq = list(v)
    except TypeError:
        raise ValueError(f"{name} must be an int or (height, width), not {v!r}") from None
    if len(seq) != 2:
        raise ValueError(f"{name} must be an int or (height, width), not {v!r}")
    return _uint(name, seq[0], 1, 65535), _uint(name, seq[1], 1, 65535)


def _options(kw):
    """The keyword arguments (shardc build's options) to _shardwrite.start's."""
    known = {"size", "short_side", "max_side", "crop", "fit", "filter", "shrink_on_load",
             "channels", "format", "quality", "compress", "jpeg_fraction", "threads",
             "shard_bytes", "shard_samples", "align", "max_pixels", "max_image_side",
             "max_file_bytes", "augment", "aug", "seed", "strict", "force", "classes", "window",
             "window_bytes"}
    for k in kw:
        if k not in known:
            raise TypeError(f"unexpected keyword argument {k!r} (shardc build's options: "
                            f"{', '.join(sorted(known))})")
    g = lambda k: kw.get(k)  # noqa: E731
    o = {}
    size, short, max_side, crop = g("size"), g("short_side"), g("max_side"), g("crop")
    if size is not None and short is not None:
        raise ValueError("size and short_side exclude each other")
    if size is not None and max_side is not None:
        raise ValueError("size and max_side exclude each other")
    if size is not None and crop is not None:
        raise ValueError("size and crop exclude each other (size crops already)")
    if g("fit") is not None and size is None:
        raise ValueError("fit needs size")
    if size is not None:
        o["geometry"] = "size"
        o["height"], o["width"] = _hw("size", size)
    elif short is not None:
        o["geometry"] = "short_side"
        o["short_side"] = _uint("short_side", short, 1, 65535)
    else:
        o["geometry"] = "keep"
    if max_side is not None:
        o["max_side"] = _uint("max_side", max_side, 1, 65535)
    if crop is not None:
        o["crop_h"], o["crop_w"] = _hw("crop", crop)
    for k in ("fit", "filter", "compress", "aug"):
        v = g(k)
        if v is not None:
            if not isinstance(v, str):
                raise ValueError(f"{k} must be a str, not {v!r}")
            o[k] = v
    if g("fit") is not None and g("fit") not in ("crop", "pad", "stretch"):
        raise ValueError(f"fit: '{g('fit')}' (crop, pad or stretch)")
    o["shrink_on_load"] = bool(g("shrink_on_load"))
    channels = 3 if g("channels") is None else g("channels")
    if channels not in (1, 3) or isinstance(channels, bool):
        raise ValueError(f"channels must be 1 (gray) or 3 (RGB), not {channels!r}")
    o["channels"] = int(channels)
    fmt = "raw" if g("format") is None else g("format")
    if not isinstance(fmt, str):
        raise ValueError(f"format must be a str, not {fmt!r}")
    o["format"] = fmt
    if g("quality") is not None:
        o["quality"] = _uint("quality", g("quality"), 1, 100)
    jf = g("jpeg_fraction")
    if jf is not None:
        if isinstance(jf, bool) or not isinstance(jf, _numbers.Real) or not 0 <= jf <= 1:
            raise ValueError(f"jpeg_fraction must be 0..1, not {jf!r}")
        if jf > 0 and fmt != "raw":
            raise ValueError(f"jpeg_fraction is for format='raw' ({fmt}: use format='jpeg')")
        o["jpeg_fraction"] = float(jf)
    if g("compress") is not None and fmt != "raw":
        raise ValueError(f"compress is for format='raw' ({fmt} stores its own way)")
    threads = g("threads")
    o["threads"] = (_os.cpu_count() or 1) if threads is None else _uint("threads", threads, 1,
                                                                         1024)
    if g("shard_bytes") is not None:
        o["shard_bytes"] = _bytes_opt("shard_bytes", g("shard_bytes"), 4096)
    if g("shard_samples") is not None:
        o["shard_samples"] = _uint("shard_samples", g("shard_samples"), 1, 2 ** 64 - 1)
    if g("align") is not None:
        a = _bytes_opt("align", g("align"), 256)
        if a > 1 << 20 or a & (a - 1):
            raise ValueError(f"align must be a power of two 256..1MiB, not {a}")
        o["align"] = a
    if g("max_pixels") is not None:
        o["max_pixels"] = _uint("max_pixels", g("max_pixels"), 1, 2 ** 64 - 1)
    if g("max_image_side") is not None:
        o["max_image_side"] = _uint("max_image_side", g("max_image_side"), 1, 65535)
    if g("max_file_bytes") is not None:
        o["max_file_bytes"] = _bytes_opt("max_file_bytes", g("max_file_bytes"), 1)
    if g("augment") is not None:
        o["augment"] = _uint("augment", g("augment"), 1, 1024)
        if size is None:
            raise ValueError("augment needs size (the variants' size)")
    elif g("aug") is not None:
        raise ValueError("aug needs augment=K")
    if g("seed") is not None:
        o["seed"] = _uint("seed", g("seed"), 0, 2 ** 64 - 1)
    o["strict"] = bool(g("strict"))
    o["force"] = bool(g("force"))
    classes = g("classes")
    if classes is not None:
        if isinstance(classes, (str, bytes)):
            raise ValueError("classes must be a sequence of names, not one string")
        classes = [str(c) for c in classes]
        if not classes:
            raise ValueError("classes must name at least one class")
        o["classes"] = classes
    if g("window") is not None:
        o["window"] = _uint("window", g("window"), 1, 1 << 20)
    if g("window_bytes") is not None:
        o["budget"] = _bytes_opt("window_bytes", g("window_bytes"), 1)
    return o


_FIELD_TYPES = {"int": 1, "float": 2, "str": 3, "bytes": 4}
_FIELDS_MAX, _FIELDS_MAX_COUNT, _FIELDS_MAX_RECORD = 64, 65536, 1 << 20


def _field_value(name, v):
    """A field's value -> (type, count, payload bytes): int and float scalars (count 0), 1-D
    sequences or arrays of numbers (count N), str, bytes. ValueError naming the field."""
    if isinstance(v, (bool, _numbers.Integral)):
        if not -2**63 <= int(v) < 2**63:
            raise ValueError(f"field {name!r}: {v} does not fit in int64")
        return "int", 0, int(v).to_bytes(8, "little", signed=True)
    if isinstance(v, _numbers.Real):
        import struct
        return "float", 0, struct.pack("<d", float(v))
    if isinstance(v, str):
        b = v.encode("utf-8")
    elif isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
    else:
        import numpy as np
        try:
            a = np.asarray(v)
        except Exception:
            a = None
        if a is None or a.ndim != 1 or a.size == 0 or a.dtype.kind not in "biuf":
            raise ValueError(f"field {name!r}: {type(v).__name__} is not an int, a float, a str, "
                             "bytes or a 1-D sequence of 1..65536 numbers")
        if a.size > _FIELDS_MAX_COUNT:
            raise ValueError(f"field {name!r}: {a.size} numbers (at most {_FIELDS_MAX_COUNT})")
        if a.dtype.kind == "f":
            return "float", a.size, a.astype("<f8").tobytes()
        if a.dtype.kind == "u" and a.size and int(a.max()) >= 2**63:
            raise ValueError(f"field {name!r}: a value does not fit in int64")
        return "int", a.size, a.astype("<i8").tobytes()
    if len(b) > _FIELDS_MAX_COUNT:
        raise ValueError(f"field {name!r}: {len(b)} bytes (at most {_FIELDS_MAX_COUNT})")
    return ("str" if isinstance(v, str) else "bytes"), 0, b


def _fields_record(fields, schema, item):
    """The fields record (formats/raw.md "Fields record") of one item's dict, against schema
    [(name, type, count)] (None: the first item's; returned set from this one)."""
    import struct
    if not isinstance(fields, dict):
        raise ValueError(f"item {item}: fields must be a dict of name -> value, not "
                         f"{type(fields).__name__}")
    vals = {}
    for k, v in fields.items():
        if not isinstance(k, str):
            raise ValueError(f"item {item}: field name {k!r} is not a str")
        vals[k] = _field_value(k, v)
    if schema is None:
        if not 1 <= len(vals) <= _FIELDS_MAX:
            raise ValueError(f"item {item}: {len(vals)} fields (1..{_FIELDS_MAX})")
        schema = [(k, t, c) for k, (t, c, _) in vals.items()]
    names = [d[0] for d in schema]
    for k in vals:
        if k not in names:
            raise ValueError(f"item {item}: field {k!r} is not in the schema the first item set "
                             f"({', '.join(names)})")
    head, body = [], []
    for name, typ, count in schema:
        if name not in vals:
            raise ValueError(f"item {item}: field {name!r} missing (every item has the fields of "
                             "the first)")
        t, c, b = vals[name]
        if t == "int" and typ == "float":      # an int where the schema says float
            import numpy as np
            t, b = "float", np.frombuffer(b, "<i8").astype("<f8").tobytes()
        if t != typ or c != count:
            fmt = lambda t, c: f"{t}[{c}]" if c else t  # noqa: E731
            raise ValueError(f"item {item}: field {name!r} is {fmt(t, c)}, the schema (the first "
                             f"item) says {fmt(typ, count)}")
        n = len(b) if t in ("str", "bytes") else len(b) // 8
        head.append(struct.pack("<B3xI", _FIELD_TYPES[t], n))
        body.append(b + b"\0" * (-len(b) % 8))
    total = 16 + 8 * len(schema) + sum(len(x) for x in body)
    if total > _FIELDS_MAX_RECORD:
        raise ValueError(f"item {item}: its fields take {total} bytes (at most "
                         f"{_FIELDS_MAX_RECORD})")
    rec = struct.pack("<IIII", 0x31444C46, len(schema), total, 0) + b"".join(head) + \
        b"".join(body)
    return rec, schema


_TARGET_KEYS = {"boxes", "labels", "iscrowd", "area", "image_id"}


def _target_blob(t, item):
    """A detection target dict -> (the build's in-process form, include/shardc.h
    SHC_SRC_TARGET, and its category ids). ValueError naming the item and the key."""
    import struct
    import numpy as np
    if not isinstance(t, dict):
        raise ValueError(f"item {item}: a target must be a dict, not {type(t).__name__}")
    bad = sorted(set(t) - _TARGET_KEYS)
    if bad:
        raise ValueError(f"item {item}: target key(s) {', '.join(map(repr, bad))} (known: "
                         f"{', '.join(sorted(_TARGET_KEYS))})")
    if "boxes" not in t or "labels" not in t:
        raise ValueError(f"item {item}: a target needs 'boxes' and 'labels'")
    boxes = np.asarray(t["boxes"], dtype=np.float64)
    if boxes.size == 0:
        boxes = boxes.reshape(0, 4)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"item {item}: target 'boxes' must be (N, 4) x1, y1, x2, y2, not of "
                         f"shape {boxes.shape}")
    n = boxes.shape[0]
    if n > 65536 or not np.isfinite(boxes).all():
        raise ValueError(f"item {item}: target 'boxes' must be at most 65536 finite boxes")

    def column(key, dtype, default):
        v = np.asarray(t[key]) if key in t else np.full(n, default)
        if v.shape != (n,) or (v.size and dtype != np.float64 and v.dtype.kind not in "biu"):
            raise ValueError(f"item {item}: target {key!r} must be {n} "
                             f"{'integers' if dtype != np.float64 else 'numbers'} (one a box)")
        return v.astype(dtype)
    labels = column("labels", np.int64, 0)
    crowd = column("iscrowd", np.int64, 0)
    if not np.isin(crowd, (0, 1)).all():
        raise ValueError(f"item {item}: target 'iscrowd' must be 0 or 1")
    area = column("area", np.float64, np.nan)
    image_id = t.get("image_id", item)
    try:
        image_id = _operator.index(image_id)
    except TypeError:
        raise ValueError(f"item {item}: target 'image_id' must be an int") from None
    blob = (struct.pack("=IIq", n, 0, image_id) + np.ascontiguousarray(boxes).tobytes() +
            labels.tobytes() + area.tobytes() + crowd.astype(np.uint8).tobytes())
    return blob, set(labels.tolist())


def _categories_of(categories):
    """categories= -> {id: name}: a list of names (ids 1, 2, ...), a dict id -> name, or COCO's
    [{'id': id, 'name': name}, ...]."""
    if isinstance(categories, dict):
        cats = dict(categories)
    elif all(isinstance(c, dict) for c in categories):
        cats = {c["id"]: c["name"] for c in categories}
    else:
        cats = {i + 1: c for i, c in enumerate(categories)}
    for k, v in cats.items():
        if isinstance(k, bool) or not isinstance(k, int) or not isinstance(v, str):
            raise ValueError(f"categories: id {k!r} -> {v!r}: ids are ints, names str")
    return cats


def _is_pil(image):
    pil = _sys.modules.get("PIL.Image")
    return pil is not None and isinstance(image, pil.Image)


class Writer:
    """Write a shardc dataset into directory `out` from items added one at a time.

        with shardread.Writer("ds", size=224, threads=8) as w:
            for image, label in items:
                w.add(image, label)
        print(w.result)

    Options are `shardc build`'s, as keywords (--size WxH is size=(H, W) or size=N, --gray is
    channels=1, --shard-size is shard_bytes, --max-file-size is max_file_bytes, -j is threads):
    size, short_side, max_side, crop, fit, filter, shrink_on_load, channels, format, quality,
    compress, jpeg_fraction, threads (default: all cores), shard_bytes, shard_samples, align,
    max_pixels, max_image_side, max_file_bytes, augment, aug, seed, strict, force; and
    classes (the class names), categories (a detection dataset's: names, ids 1, 2, ...; a dict
    id -> name; or COCO's [{'id', 'name'}]; default: every id the targets use, named by it),
    window (items held at most, default 4 * threads + 8) and
    window_bytes (their bytes at most; default: no bound but window); layout ("HWC", the
    default, or "CHW": the axes of 3-D arrays, e.g. torchvision's uint8 tensors). Sizes take
    ints or shardc's strings ('512MiB').

    add(image, label) hands over one item (label a dict of boxes and labels: a detection
    target) (see the module's documentation for what an image may
    be) and returns at once unless the build is `window` items behind. close() waits for the
    build and returns its BuildResult (also `result`); leaving the with-block does it, or, when
    the block raised, cancel(): the build stops and leaves no dataset.
    """

    def __init__(self, out, **options):
        out = _os.fsdecode(_os.fspath(out))
        layout = options.pop("layout", "HWC")
        cats = options.pop("categories", None)
        self._cats = None if cats is None else _categories_of(cats)
        if not isinstance(layout, str) or layout.upper() not in ("HWC", "CHW"):
            raise ValueError(f"layout must be 'HWC' or 'CHW', not {layout!r}")
        self._chw = layout.upper() == "CHW"
        opts = _options(options)
        self.out = out
        self.result = None
        self._strict = opts["strict"]
        self._nclasses = len(opts["classes"]) if "classes" in opts else None
        self._mode = "RGB" if opts["channels"] == 3 else "L"
        self._created = not _os.path.exists(out)
        self._np = None
        self._augment = "augment" in opts
        self._schema = None         # the fields' schema, set by the first item
        self._targets = None        # whether items carry targets, set by the first item
        self._seen = set()          # the category ids the targets used
        self._b = _ext().start(out, **opts)

    # -- items --

    def _label(self, label):
        if isinstance(label, bool):
            raise ValueError(f"label must be an int, not {label!r}")
        try:
            label = _operator.index(label)
        except TypeError:
            raise ValueError(f"label must be an int, not {label!r}") from None
        top = _MAX_LABEL if self._nclasses is None else self._nclasses - 1
        if not 0 <= label <= top:
            what = (f"below len(classes) = {self._nclasses}" if self._nclasses is not None
                    else f"0..{_MAX_LABEL}")
            raise ValueError(f"label {label} out of range ({what})")
        return label

    def _target(self, label):
        """(label, the target's blob or None): a dict label is a detection target, the first
        item deciding for every later one."""
        item = self._b.added
        is_target = isinstance(label, dict)
        if self._targets is None:
            if is_target and self._augment:
                raise ValueError("targets cannot be stored with augment= (a sample's aux record "
                                 "holds its variant's parameters)")
            if is_target and self._nclasses is not None:
                raise ValueError("targets name their categories (categories=), not classes=")
            if not is_target and self._cats is not None:
                raise ValueError(f"item {item}: categories= is for targets (a dict label)")
            if is_target:
                self._b.set_targets()
            self._targets = is_target
        if is_target != self._targets:
            raise ValueError(f"item {item}: " + ("a target, but the items before it had int "
                                                 "labels" if is_target else "an int label, but "
                                                 "the items before it had targets"))
        if not is_target:
            return self._label(label), None
        blob, ids = _target_blob(label, item)
        if self._cats is not None and not ids <= set(self._cats):
            raise ValueError(f"item {item}: target label(s) "
                             f"{', '.join(map(str, sorted(ids - set(self._cats))))} not among "
                             "categories=")
        self._seen |= ids
        return -1, blob

    def _pixels(self, arr, name, label, rec=None, tg=None):
        np = self._np
        if np is None:
            import numpy as np
            self._np = np
        if arr.ndim == 3 and self._chw:
            arr = arr.transpose(1, 2, 0)
        elif arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[2] > 4:
            raise ValueError(f"item {self._b.added}: array of shape {tuple(arr.shape)} is CxHxW "
                             "(a torch tensor?); HxWxC is expected: pass layout='CHW' to the "
                             "Writer/build, or permute(1, 2, 0) the tensor")
        if arr.dtype != np.uint8:
            return self._b.add_reject(name, f"array of dtype {arr.dtype} (expected uint8)", label)
        if arr.ndim == 3 and arr.shape[2] in (1, 3, 4):
            h, w, c = arr.shape
        elif arr.ndim == 2:
            (h, w), c = arr.shape, 1
        else:
            return self._b.add_reject(name, f"array of shape {tuple(arr.shape)} (expected HxW "
                                      "or HxWxC with C 1, 3 or 4)", label)
        if h == 0 or w == 0:
            return self._b.add_reject(name, f"empty array of shape {tuple(arr.shape)}", label)
        arr = np.ascontiguousarray(arr)
        return self._b.add_pixels(arr, h, w, c, name, label, rec, tg)

    def _fields(self, fields):
        """The item's fields record (None without fields), the schema set by the first item."""
        item = self._b.added
        if fields is None:
            if self._schema is not None:
                raise ValueError(f"item {item}: no fields, the first item had "
                                 f"{', '.join(d[0] for d in self._schema)}")
            return None
        if self._augment:
            raise ValueError("fields cannot be stored with augment= (a sample's aux record holds "
                             "its variant's parameters)")
        if self._schema is None and item:
            raise ValueError(f"item {item}: fields, but the items before it had none")
        rec, schema = _fields_record(fields, self._schema, item)
        if self._schema is None:
            self._b.set_fields([(n, _FIELD_TYPES[t], c) for n, t, c in schema])
            self._schema = schema
        return rec

    def add(self, image, label, fields=None):
        """Add one item: image a path, encoded bytes, a PIL image or a uint8 numpy array, label
        an int, or a detection target: a dict with 'boxes' ((N, 4) x1, y1, x2, y2 in the
        image's pixels, edges), 'labels' (N category ids) and optionally 'iscrowd' (N 0/1),
        'area' (N; default the boxes' areas) and 'image_id' (default the item's position); the
        boxes are moved by the build's geometry as `shardc build --coco` moves them, and the
        first item decides whether every item has a target. fields (optional) a dict of name -> value stored with the sample: an int, a
        float, a str, bytes, or a 1-D sequence of numbers (a multi-hot label). The first item
        sets the fields' names and types (a sequence: its length); every later item must give
        the same, each of the same type (an int where a float is due is taken as that float).
        Raises ValueError for a bad label or field (naming it); BuildError (or OSError) when
        the build has stopped (strict reject, output problem)."""
        if self._b is None:
            raise RuntimeError("this Writer is closed")
        label, tg = self._target(label)
        rec = self._fields(fields)
        if isinstance(image, (str, _os.PathLike)):
            ok = self._b.add_path(_os.fsencode(image), label, rec, tg)
        elif isinstance(image, (bytes, bytearray, memoryview)):
            ok = self._b.add_bytes(image, f"<memory>#{self._b.added}", label, rec, tg)
        else:
            name = f"<memory>#{self._b.added}"
            if _is_pil(image):
                if image.mode != self._mode:
                    image = image.convert(self._mode)
                import numpy as np
                image = np.asarray(image)
            if not hasattr(image, "__array_interface__") and hasattr(image, "__array__"):
                import numpy as np
                image = np.asarray(image)       # e.g. a torch tensor
            if hasattr(image, "__array_interface__") and hasattr(image, "dtype"):
                ok = self._pixels(image, name, label, rec, tg)
            else:
                ok = self._b.add_reject(name, f"unsupported image type {type(image).__name__} "
                                        "(a path, encoded bytes, a PIL image or a uint8 array)",
                                        label)
        if not ok:
            self._raise(self._b.finish())

    # -- the end --

    def _raise(self, r):
        self._b = None
        self._cleanup()
        msgs = r["messages"]
        if r["rc"] == _ext().EREJECTS and r["rejects"]:
            name, reason = r["rejects"][-1]
            raise BuildError(f"{name}: {reason} (strict)", msgs, r["code"], r["exit"])
        text = msgs[-1] if msgs else r["code"]
        if r["rc"] > 0:
            raise OSError(r["rc"], text)
        raise BuildError(text, msgs, r["code"], r["exit"])

    def _cleanup(self):
        """After a build that left no dataset: remove the output directory if this Writer made
        it and only the build's lock file remains there."""
        if not self._created:
            return
        try:
            left = _os.listdir(self.out)
            if set(left) <= {".shardc.lock"}:
                for f in left:
                    _os.unlink(_os.path.join(self.out, f))
                _os.rmdir(self.out)
        except OSError:
            pass

    def close(self):
        """Finish the build: wait for every item to be written, then write rejects.tsv,
        inputs.tsv and the manifest. Returns the BuildResult (rejects listed, not raised, unless
        strict)."""
        if self.result is not None:
            return self.result
        if self._b is None:
            raise RuntimeError("this Writer was cancelled")
        if self._targets:
            cats = self._cats if self._cats is not None else {i: str(i) for i in self._seen}
            self._b.set_categories(sorted(cats.items()))
        r = self._b.finish()
        if r["summary"] is None or r["rc"] not in (0, _ext().EREJECTS) or (
                self._strict and r["rc"] != 0):
            self._raise(r)
        self._b = None
        if r["summary"]["samples"] == 0 and r["rejects"]:
            n = len(r["rejects"])
            named = "; ".join(f"{nm}: {why}" for nm, why in r["rejects"][:3])
            raise BuildError(f"every item was rejected ({n}; the dataset in {self.out} has no "
                             f"sample, rejects.tsv lists them): {named}"
                             + (f"; and {n - 3} more" if n > 3 else ""),
                             r["messages"], "rejects", 1, r["rejects"])
        self.result = BuildResult(self.out, r["summary"], r["rejects"], r["warnings"],
                                  r["messages"])
        return self.result

    def cancel(self):
        """Stop the build: nothing of it is left in `out`."""
        if self._b is not None:
            self._b.cancel()
            self._b = None
            self._cleanup()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.cancel()
            return False
        self.close()
        return False

    def __del__(self):
        b = getattr(self, "_b", None)
        if b is not None:
            b.cancel()


def build(samples, out, **options):
    """Write a shardc dataset into `out` from an iterable of (image, label) pairs, as
    `shardc build` would from the same files: same decoders, geometry, shards, hashes and
    manifest (see the module's documentation for what equals and what may differ). Options are
    Writer's. Returns the BuildResult. An exception from the iterable propagates and leaves no
    dataset (at an s3:// URL, none of the objects it uploaded)."""
    with Writer(out, **options) as w:
        for item in samples:
            try:
                image, label, *rest = item
                if len(rest) > 1:
                    raise ValueError
            except (TypeError, ValueError):
                raise TypeError(f"samples must give (image, label) pairs or (image, label, "
                                f"fields) triples (label an int or a target dict), not "
                                f"{item!r:.80}") from None
            w.add(image, label, *rest)
    return w.result
