"""The reader's numeric options and choices are one table (reader/options.def), which the
module exposes as shardread._shardread.option_table(): docs/OPTIONS.md is what
scripts/gen-options.py writes from it, the Loader's defaults (its signature and the __init__.pyi
stub) are the table's, every row's refusal through the Loader names its public keyword, and a
choice's names are the ones the Loader takes, its refusal listing them. The C suite
tests/test_options_table.c checks each row's bounds against the library itself."""
import ast
import importlib.util
import inspect
import math
import os

import pytest

import shardread
from shardread import _shardread

# the source tree (e2e_wheel.sh runs a copy of this folder and names the tree in SHARDREAD_ROOT)
ROOT = os.environ.get("SHARDREAD_ROOT") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROWS = _shardread.option_table()
NUMERIC = [r for r in ROWS if r["form"] != "choice"]
CHOICES = [r for r in ROWS if r["form"] == "choice"]


def _gen():
    spec = importlib.util.spec_from_file_location(
        "gen_options", os.path.join(ROOT, "scripts", "gen-options.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stub_defaults():
    """{parameter: default as written} of Loader.__init__ in the package's stub."""
    with open(os.path.join(ROOT, "reader", "python", "shardread", "__init__.pyi")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Loader":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                    args = fn.args.args
                    defaults = fn.args.defaults
                    return {a.arg: ast.unparse(d)
                            for a, d in zip(args[len(args) - len(defaults):], defaults)}
    raise AssertionError("no Loader.__init__ in __init__.pyi")


def _stub_literals():
    """{parameter: the str names of its Literal[...]} of Loader.__init__ in the package's stub,
    through the stub's module-level aliases (_Access)"""
    with open(os.path.join(ROOT, "reader", "python", "shardread", "__init__.pyi")) as f:
        tree = ast.parse(f.read())
    aliases = {n.targets[0].id: n.value for n in tree.body
               if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}

    def names(node):
        if isinstance(node, ast.Name) and node.id in aliases:
            return names(aliases[node.id])
        if isinstance(node, ast.BinOp):         # Literal[...] | None
            return names(node.left) + names(node.right)
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return [e.value for e in elts if isinstance(e, ast.Constant)
                    and isinstance(e.value, str)]
        return []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Loader":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                    return {a.arg: names(a.annotation) for a in fn.args.args if a.annotation}
    raise AssertionError("no Loader.__init__ in __init__.pyi")


def test_stub_literals_are_the_choices_names():
    """where the stub spells a choice's names (Literal[...]), they are the table's"""
    literals = _stub_literals()
    checked = set()
    for row in CHOICES:
        if literals.get(row["keyword"]):
            assert literals[row["keyword"]] == [c for c in row["choices"] if c], row["keyword"]
            checked.add(row["keyword"])
    assert checked == {"order", "uneven", "on_error", "access", "layout"}


def test_docs_are_the_table():
    with open(os.path.join(ROOT, "docs", "OPTIONS.md"), encoding="utf-8") as f:
        text = f.read()
    assert text == _gen().render(ROWS), \
        "docs/OPTIONS.md is out of date: PYTHONPATH=build/python python3 scripts/gen-options.py"


def test_loader_and_stub_defaults_are_the_table():
    runtime = inspect.signature(shardread.Loader.__init__).parameters
    stub = _stub_defaults()
    assert len(NUMERIC) >= 28 and len(CHOICES) >= 9
    for row in ROWS:
        kw = row["keyword"]
        assert kw in runtime and kw in stub, row
        if row["python_default"] is None:
            continue
        assert repr(runtime[kw].default) == row["python_default"], (kw, runtime[kw].default)
        assert stub[kw] == row["python_default"], (kw, stub[kw])
        value = runtime[kw].default
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert value == row["default"], (kw, value, row["default"])


# each row's keyword form: how a Loader gives the field the value v
FORMS = {
    "batch_size": lambda v: dict(batch_size=v),
    "quasi_window": lambda v: dict(order="quasi", quasi_window=v),
    "threads": lambda v: dict(threads=v),
    "prefetch": lambda v: dict(prefetch=v),
    "flip": lambda v: dict(flip=float(v)),
    "grayscale": lambda v: dict(grayscale=v),
    "erasing p": lambda v: dict(erasing=dict(p=v)),
    "min_box_area_fraction": lambda v: dict(min_box_area_fraction=v),
    "mixup": lambda v: dict(mixup=v, dtype="float32"),
    "cutmix": lambda v: dict(cutmix=v, dtype="float32"),
    "auto_augment num_magnitude_bins": lambda v: dict(
        auto_augment=dict(policy="trivialaugment_wide", num_magnitude_bins=v)),
    "auto_augment num_ops": lambda v: dict(
        auto_augment=dict(policy="randaugment", num_ops=v, magnitude=0)),
    "auto_augment magnitude": lambda v: dict(
        auto_augment=dict(policy="randaugment", magnitude=v, num_magnitude_bins=1024)),
    "color_jitter brightness": lambda v: dict(color_jitter=dict(brightness=v)),
    "color_jitter contrast": lambda v: dict(color_jitter=dict(contrast=v)),
    "color_jitter saturation": lambda v: dict(color_jitter=dict(saturation=v)),
    "color_jitter hue": lambda v: dict(color_jitter=dict(hue=v)),
    "rrc": lambda v: dict(rrc=v, size=16),
    "ratio": lambda v: dict(rrc=True, ratio=v, size=16),
    "rotation": lambda v: dict(rotation=v),
    "affine degrees": lambda v: dict(affine=dict(degrees=v)),
    "affine translate": lambda v: dict(affine=dict(degrees=0, translate=v)),
    "affine scale": lambda v: dict(affine=dict(degrees=0, scale=v)),
    # a pair of the two: x and y alike (torchvision's four-value form)
    "affine shear": lambda v: dict(affine=dict(degrees=0, shear=tuple(v) * 2)),
    "erasing scale": lambda v: dict(erasing=dict(p=0.5, scale=v)),
    "erasing ratio": lambda v: dict(erasing=dict(p=0.5, ratio=v)),
    "scale_jitter range": lambda v: dict(scale_jitter=(16, v)),
    # a dataset at a URL's (their rows refuse nothing a Python int can give: no value is tried)
    "cache_limit": lambda v: dict(cache_limit=v),
    "prefetch_shards": lambda v: dict(prefetch_shards=v),
    "seed": lambda v: dict(seed=v),
    "world": lambda v: dict(world=v, rank=0),
    "num_classes": lambda v: dict(mixup=0.2, dtype="float32", num_classes=v),
}


def _outside(row):
    """Values just outside the row's range (a pair: one end outside, the other inside; and
    min > max where the pair is ordered)."""
    lo, hi, form = row["lo"], row["hi"], row["form"]
    f = row["type"] == "float"

    def step(v, to):
        return math.nextafter(v, to) if f else v + (1 if to > v else -1)
    lo_open, hi_open = form in ("above", "open"), form in ("below", "open")
    lo_in, lo_out = (step(lo, math.inf), lo) if lo_open else (lo, step(lo, -math.inf))
    hi_in = None if hi is None else step(hi, -math.inf) if hi_open else hi
    hi_out = None if hi is None else hi if hi_open else step(hi, math.inf)
    out = []
    if lo > 0 or f:
        out.append(lo_out)
    if form != "at_least":
        out.append(hi_out)
    if row["count"] == 1:
        return out
    pairs = [(out[0], hi_in), (lo_in, out[1])]
    if row["ordered"] and lo_in != hi_in:
        pairs.append((hi_in, lo_in))
    return pairs


# every refusal is the library's, or in its words from the table (shr_option_check): the
# Loader's own lower bounds (prefetch, prefetch_shards, num_classes, mixup and cutmix, whose
# None is the row's 0) are the row's range without its 0


def test_every_numeric_row_has_a_keyword_form():
    missing = [r["name"] for r in NUMERIC if r["name"] not in FORMS]
    assert not missing, f"{missing}: give these rows their keyword forms in FORMS"


# the rows with a value outside their range to try (cache_limit, seed, prefetch_shards and
# num_classes run from 0 up without a top: no int the field holds is outside them; the Loader's
# own refusal of num_classes=0 is in test_messages_name_the_public_keyword)
REFUSABLE = [r for r in NUMERIC if _outside(r)]


@pytest.mark.parametrize("row", REFUSABLE, ids=[r["field"] for r in REFUSABLE])
def test_every_row_refused_through_the_loader_naming_its_keyword(fx, row):
    outside = _outside(row)
    assert outside
    for v in outside:
        with pytest.raises(ValueError) as e:
            shardread.Loader(fx.fixed, **FORMS[row["name"]](v))
        msg = str(e.value)
        assert msg.startswith(row["keyword"]), (v, msg)
        assert isinstance(e.value, shardread.ArgumentError), (v, msg)
        # the library's refusal: the public name, the field, the range
        assert msg.startswith(f"{row['name']} ({row['field']}) must ") or \
            msg.startswith(f"{row['name']} must "), (v, msg)
        lo = row["lo"]
        assert (str(int(lo)) if float(lo).is_integer() else repr(lo)) in msg, (v, msg)


def test_messages_name_the_public_keyword(fx):
    for kw, want in ((dict(grayscale=1.5), "grayscale (grayscale_p) must be in 0..1, not 1.5"),
                     (dict(flip=1.5), "flip (flip_p) must be in 0..1, not 1.5"),
                     (dict(threads=0), "threads must be in 1..1024, not 0"),
                     (dict(world=0, rank=0), "world must be at least 1, not 0"),
                     # None is the automatic count: the row's range without its 0
                     (dict(prefetch=0), "prefetch must be in 2..65536, not 0"),
                     (dict(prefetch=1), "prefetch must be in 2..65536, not 1"),
                     (dict(prefetch=65537), "prefetch must be in 2..65536, not 65537"),
                     (dict(mixup=0.2, dtype="float32", num_classes=0),
                      "num_classes must be at least 1, not 0"),
                     (dict(batch_size=0), "batch_size must be at least 1, not 0"),
                     (dict(order="quasi", quasi_window=0),
                      "quasi_window must be at least 1, not 0"),
                     # None is off: the range without its 0
                     (dict(cutmix=float("inf"), dtype="float32"),
                      "cutmix (cutmix_alpha) must be above 0 and below 1000000, not inf"),
                     (dict(mixup=0, dtype="float32"),
                      "mixup (mixup_alpha) must be above 0 and below 1000000, not 0"),
                     (dict(auto_augment=dict(policy="randaugment", num_ops=9)),
                      "auto_augment num_ops (aa_num_ops) must be in 1..4, not 9"),
                     (dict(auto_augment=dict(policy="randaugment", num_magnitude_bins=1)),
                      "auto_augment num_magnitude_bins (aa_bins) must be in 2..1024, not 1"),
                     (dict(color_jitter=(0, 0, 0, 0.6)), "color_jitter hue (jitter_hue) must "
                      "satisfy -0.5 <= min <= max <= 0.5, not [-0.6, 0.6]"),
                     (dict(color_jitter=dict(brightness=(1.5, 1.2))), "color_jitter brightness "
                      "(jitter_brightness) must satisfy 0 <= min <= max < inf, not [1.5, 1.2]"),
                     (dict(scale_jitter=(16, (0.5, 17))), "scale_jitter range (scale_range) "
                      "must satisfy 0 < min <= max <= 16, not [0.5, 17]"),
                     (dict(affine=dict(degrees=0, translate=(0.5, 1.5))), "affine translate "
                      "(affine_translate) must be two values, each in 0..1, not [0.5, 1.5]"),
                     (dict(affine=dict(degrees=0, shear=(0, 10, 5, 1))), "affine shear "
                      "(affine_shear) must be 2 (min, max) pairs, each satisfying -1000000 <= "
                      "min <= max <= 1000000, not [0, 10, 5, 1]")):
        with pytest.raises(shardread.ArgumentError) as e:
            shardread.Loader(fx.fixed, **kw)
        assert str(e.value) == want, kw


def test_max_threads_is_refused_in_its_own_name_with_the_threads_range(fx):
    """max_threads= sets the threads field (threads='auto'): refused as max_threads, with the
    threads row's range, as the library words it (not as `threads`, which was not given)."""
    row = next(r for r in ROWS if r["field"] == "threads")
    for v in (row["lo"] - 1, row["hi"] + 1):
        with pytest.raises(shardread.ArgumentError) as e:
            shardread.Loader(fx.fixed, threads="auto", max_threads=v)
        assert str(e.value) == f"max_threads (threads) must be in 1..1024, not {v}"
    loader = shardread.Loader(fx.fixed, batch_size=2, threads="auto", max_threads=row["lo"])
    assert loader.threads == 1


# each choice's keyword form, and whether the Loader takes its names in any case (and as
# torchvision's and numpy's objects) or exactly
CHOICE_FORMS = {
    "order": (lambda v: dict(order=v), False),
    "uneven": (lambda v: dict(uneven=v), False),
    "on_error": (lambda v: dict(on_error=v), False),
    "access": (lambda v: dict(access=v), False),
    "interpolation": (lambda v: dict(interpolation=v, rrc=True, size=8), True),
    "dtype": (lambda v: dict(dtype=v), True),
    "layout": (lambda v: dict(layout=v), True),
    "augment_interpolation": (lambda v: dict(rotation=10, augment_interpolation=v), True),
    "auto_augment": (lambda v: dict(auto_augment=v), True),
}
# the Loader's None is this choice's first name, which it refuses as a name (the package's
# own spellings of the policies come first, with their own refusal)
NONE_IS_FIRST = {"auto_augment"}


def _who(row):
    return row["name"] if row["name"] == row["field"] else f"{row['name']} ({row['field']})"


@pytest.mark.parametrize("row", CHOICES, ids=[r["field"] for r in CHOICES])
def test_every_choice_takes_the_tables_names_and_refuses_others_listing_them(fx, row):
    assert row["name"] in CHOICE_FORMS, f"{row['name']}: give this choice its form"
    form, loose = CHOICE_FORMS[row["name"]]
    names = [c for c in row["choices"] if c]
    taken = names[1:] if row["name"] in NONE_IS_FIRST else names
    for name in taken:
        shardread.Loader(fx.fixed, batch_size=2, **form(name))
        if loose:
            shardread.Loader(fx.fixed, batch_size=2, **form(name.swapcase()))
        else:
            with pytest.raises(shardread.ArgumentError) as e:
                shardread.Loader(fx.fixed, batch_size=2, **form(name.capitalize()))
            assert str(e.value) == (f"{_who(row)} must be one of {', '.join(names)}, "
                                    f"not {name.capitalize()!r}")
    refused = ["no_such_name"] + [{"nearest": "box", "bilinear": "bicubic"}.get(n, "")
                                  for n in names if row["field"] == "aug_interpolation"]
    for bad in filter(None, refused):
        with pytest.raises(ValueError) as e:
            shardread.Loader(fx.fixed, batch_size=2, **form(bad))
        msg = str(e.value)
        if row["name"] in NONE_IS_FIRST:
            assert msg.startswith(row["name"] + " must be") and msg.endswith(repr(bad)), msg
            assert all(repr(n) in msg for n in taken), msg
        else:
            assert isinstance(e.value, shardread.ArgumentError), msg
            assert msg == f"{_who(row)} must be one of {', '.join(names)}, not {bad!r}"


def test_choice_forms_convert_to_the_tables_names(fx):
    """numpy and torchvision's objects, and a value not a str where a name must be one"""
    import numpy as np
    assert shardread.Loader(fx.fixed, batch_size=2, dtype=np.float16).info["dtype"] == "float16"
    assert shardread.Loader(fx.fixed, batch_size=2,
                            dtype=np.dtype("float32")).info["dtype"] == "float32"
    with pytest.raises(shardread.ArgumentError) as e:
        shardread.Loader(fx.fixed, batch_size=2, dtype=np.int32)
    assert str(e.value) == "dtype must be one of uint8, float32, float16, not 'int32'"
    with pytest.raises(shardread.ArgumentError) as e:
        shardread.Loader(fx.fixed, batch_size=2, order=2)
    assert str(e.value) == "order must be one of sequential, random, quasi, not 2"
    with pytest.raises(shardread.ArgumentError) as e:
        shardread.Loader(fx.fixed, batch_size=2, access=b"mmap")
    assert str(e.value) == "access must be one of mmap, pread, direct, not b'mmap'"

    class NoText:
        def __str__(self):
            raise RuntimeError("no text")

        def __repr__(self):
            return "NoText()"
    with pytest.raises(shardread.ArgumentError) as e:
        shardread.Loader(fx.fixed, batch_size=2, dtype=NoText())
    assert str(e.value) == "dtype must be one of uint8, float32, float16, not NoText()"
    with pytest.raises(shardread.ArgumentError) as e:
        shardread.Loader(fx.fixed, batch_size=2, layout="\udcff")
    assert str(e.value) == "layout must be one of NHWC, NCHW, not '\\udcff'"
    tv = pytest.importorskip("torchvision.transforms")
    with pytest.raises(shardread.ArgumentError) as e:
        shardread.Loader(fx.fixed, batch_size=2, rotation=10,
                         augment_interpolation=tv.InterpolationMode.BICUBIC)
    assert str(e.value) == ("augment_interpolation (aug_interpolation) must be one of nearest, "
                            "bilinear, not 'bicubic'")


def test_a_streams_on_error_takes_the_tables_names(fx):
    """a mixture stream's on_error= is the on_error row's names (or None, the Loader's)"""
    for name in ("fail", "skip", "substitute", None):
        shardread.Loader([shardread.Stream(fx.fixed, 1, on_error=name),
                          shardread.Stream(fx.fixed, 1)], batch_size=2)
    with pytest.raises(ValueError) as e:
        shardread.Loader([shardread.Stream(fx.fixed, 1),
                          shardread.Stream(fx.fixed, 1, on_error="ignore")], batch_size=2)
    assert str(e.value) == ("stream 1: on_error must be one of fail, skip, substitute (or None: "
                            "the Loader's), not 'ignore'")


def test_prefetch_shards_zero_is_refused_with_the_rows_range(fx):
    """prefetch_shards=None is the library's 0 (8 ahead); 0 itself is refused in the table's
    words without its 0 (the extension's keyword: the package passes it for a URL alone)"""
    with pytest.raises(shardread.ArgumentError) as e:
        _shardread.Loader(fx.fixed, prefetch_shards=0)
    assert str(e.value) == "prefetch_shards must be at least 1, not 0"
    _shardread.Loader(fx.fixed, batch_size=2, prefetch_shards=1)


def test_any_int_is_refused_with_the_rows_range(fx):
    """batch_size, threads, world, prefetch and max_threads are checked by the Loader in the
    library's words whatever the int: a negative one, or one past the field's 32 bits, is told
    the row's range (with the field's bound where the row has none), not the C type's; so is
    such a value of quasi_window and the auto_augment keys (their ranges: at the open)"""
    for kw, want in ((dict(batch_size=-1), "batch_size must be at least 1, not -1"),
                     (dict(batch_size=2**40),
                      "batch_size must be in 1..4294967295, not 1099511627776"),
                     (dict(threads=-3), "threads must be in 1..1024, not -3"),
                     (dict(threads=2**64), "threads must be in 1..1024, not "
                      "1.8446744073709552e+19"),
                     (dict(world=-1, rank=0), "world must be at least 1, not -1"),
                     (dict(prefetch=-1), "prefetch must be in 2..65536, not -1"),
                     (dict(threads="auto", max_threads=-1),
                      "max_threads (threads) must be in 1..1024, not -1"),
                     # rows checked at the open under their condition: here, a value the
                     # field cannot hold, whatever the condition
                     (dict(quasi_window=-1), "quasi_window must be at least 1, not -1"),
                     (dict(auto_augment=dict(policy="trivialaugment_wide",
                                             num_magnitude_bins=-2)),
                      "auto_augment num_magnitude_bins (aa_bins) must be in 2..1024, not -2")):
        with pytest.raises(shardread.ArgumentError) as e:
            shardread.Loader(fx.fixed, **kw)
        assert str(e.value) == want, kw
    with pytest.raises(TypeError, match="batch_size must be an integer, not float"):
        shardread.Loader(fx.fixed, batch_size=2.5)


def test_a_conditional_row_is_left_to_the_open(fx):
    """quasi_window=0 is the open's to refuse, with order='quasi' only"""
    shardread.Loader(fx.fixed, batch_size=2, quasi_window=0)
    with pytest.raises(shardread.ArgumentError, match="^quasi_window must be at least 1, not 0$"):
        shardread.Loader(fx.fixed, batch_size=2, quasi_window=0, order="quasi")
