#!/usr/bin/env python3
"""Write docs/OPTIONS.md, the reference of the reader's numeric options and choices, from
the one table the library checks them by (reader/options.def, read through the built module's
shardread._shardread.option_table()).

    make python && PYTHONPATH=build/python python3 scripts/gen-options.py [--check]

--check writes nothing and exits 1 when docs/OPTIONS.md differs from what the table gives
(tests/python/test_options_table.py makes the same comparison)."""
import math as _math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "OPTIONS.md")

HEAD = """# Read-time options

<!-- Written by scripts/gen-options.py from reader/options.def: edit the table, not this file. -->

The reader's numeric options, scalars and (min, max) pairs, and its choices, as the library
checks them: one row each of `reader/options.def`, the table from which `shr_options_init`'s
defaults, `shr_open`'s checks (and their messages) and `shardread._shardread.option_table()`
are all made. A value outside its range is refused when the reader opens (`SHR_EINVAL` in C,
`shardread.ArgumentError` in Python) with a message naming the public name, the field and the
range, e.g. `grayscale (grayscale_p) must be in 0..1, not 1.5`; a name that is not one of a
choice's is refused by the Loader in the same words, e.g. `order must be one of sequential,
random, quasi, not 'shuffle'`.

- **Python**: the `shardread.Loader` keyword, then the key within its value where there is one
  (`auto_augment num_ops`: `auto_augment=dict(policy="randaugment", num_ops=...)`, or
  torchvision's `RandAugment(num_ops=...)`).
- **C field**: the `shr_options` field (include/shardread/options.h).
- **Default**: what `shr_options_init` sets; the Loader's own default follows in parentheses
  where its signature writes another (`None`: computed, see the note).
- **Accepted**: the range `shr_open` accepts (a pair: both values in it, and `min <= max`
  where it says so), or a choice's names (the C enum's values in that order); **checked when**:
  blank where it is always checked.
- The Python forms convert first, as torchvision does: `color_jitter=0.4` is brightness
  `(0.6, 1.4)`, `rotation=10` is `(-10, 10)`, `rrc=True` is the default scale; `interpolation`
  and `augment_interpolation` also take torchvision's `InterpolationMode`, `dtype` a numpy or
  torch dtype, and these, `layout` and `auto_augment` any case. `order`, `uneven`, `on_error`
  and `access` take the names exactly.
- **shardbench**: its flags for these (`--threads`, `--flip`, `--grayscale`, `--erase`,
  `--order`, `--on-error`, `--interpolation`, `--dtype`, `--layout`, `--access`) take the same
  ranges and names from this table (and a few short forms: `seq`, `u8`, `f32`, `f16`), refused
  in the same words: `--threads (threads) must be in 1..1024, not 0`.

The other options (flags, the rank, per-channel values such as `mean`, the detection
geometry's sizes) are described in [PYTHON.md](PYTHON.md) and
[READER.md](READER.md).

| Python | C field | Type | Default | Accepted | Checked when | What it does |
|---|---|---|---|---|---|---|
"""


def _num(v):
    if isinstance(v, tuple):
        return "(" + ", ".join(_num(x) for x in v) + ")"
    if isinstance(v, float) and _math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, float):
        return repr(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    return str(v)


def _accepted(row):
    if row["form"] == "choice":
        return ", ".join(f"`{c}`" for c in row["choices"] if c)
    lo, hi = _num(row["lo"]), _num(row["hi"]) if row["hi"] is not None else None
    form = row["form"]
    if row["count"] >= 2:
        lop = "<" if form in ("above", "open") else "<="
        hip = "<" if form in ("below", "open") else "<="
        each = "each pair: " if row["count"] > 2 else ""
        if row["ordered"]:
            return f"{each}{lo} {lop} min <= max {hip} {hi}"
        return f"each: {lo} {lop} v {hip} {hi}"
    return {"range": f"{lo} .. {hi}", "at_least": f">= {lo}", "below": f"{lo} <= v < {hi}",
            "zero_or_range": f"0, or {lo} .. {hi}", "above": f"{lo} < v <= {hi}",
            "open": f"{lo} < v < {hi}"}[form]


def _cell(text):
    return text.replace("|", "\\|")


def render(rows):
    out = [HEAD]
    for r in rows:
        default = _num(r["default"])
        pyd = r["python_default"]
        if r["form"] == "choice":
            name = r["choices"][r["default"]]
            default = f"`{name}`"
            if pyd is not None and pyd != repr(name):
                default += f" (Loader: `{pyd}`)"
        elif pyd is not None and pyd != default and not (
                r["type"] == "float" and pyd.replace(".0", "") == default):
            default += f" (Loader: `{pyd}`)"
        out.append("| " + " | ".join(_cell(c) for c in (
            f"`{r['name']}`", f"`{r['field']}`",
            r["type"] + {1: "", 2: " pair", 4: " 2 pairs"}[r["count"]],
            default, _accepted(r),
            r["when"], r["doc"])) + " |\n")
    return "".join(out)


def main(argv):
    from shardread import _shardread    # the module PYTHONPATH names (the usage above)
    text = render(_shardread.option_table())
    if "--check" in argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{OUT} is out of date: run scripts/gen-options.py", file=sys.stderr)
                return 1
        return 0
    tmp = OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
