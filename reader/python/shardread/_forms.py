"""The keyword forms a Loader takes, into the extension's terms: torchvision's ways of saying
each option (size=, interpolation=, mean/std, ColorJitter, RandomErasing, rotation, RandomAffine,
TrivialAugment / RandAugment / AutoAugment), the torchvision objects given for a keyword
(rrc=T.RandomResizedCrop(64), ...), the short aliases, mixup= / cutmix=, and sizes in bytes."""
import enum as _enum
import math as _math
import numbers as _numbers
import operator as _operator

import numpy as _np

from . import _pipeline


def _size(size):
    """size= as torchvision's crops take it: an int (square), or (height, width) as any
    sequence of two ints (or one, square)."""
    if size is None:
        return None
    if isinstance(size, bool):
        raise TypeError(f"size must be an int or (height, width), not {size!r}")
    if isinstance(size, _numbers.Integral):
        return int(size)
    try:
        seq = [int(_operator.index(v)) for v in size]
    except TypeError:
        raise TypeError(f"size must be an int or (height, width) ints, not {size!r}") from None
    if len(seq) == 1:
        return seq[0]
    if len(seq) != 2:
        raise ValueError(f"size must be an int or (height, width), not {len(seq)} numbers: "
                         f"{size!r}")
    return tuple(seq)


def _name(v):
    """A choice given as a str, an enum member (torchvision's InterpolationMode.BICUBIC: its
    value), a numpy/torch dtype: what the extension matches by name."""
    if isinstance(v, _enum.Enum):
        return v.value if isinstance(v.value, str) else v.name
    return v


def _channel_list(v, what):
    if isinstance(v, str):
        raise TypeError(f"{what} must be a number or one number per channel, not {v!r}")
    if isinstance(v, _numbers.Real):
        return [float(v)]
    try:
        out = [float(x) for x in v]
    except TypeError:
        raise TypeError(f"{what} must be a number or one number per channel, not {v!r}") from None
    if not out:
        raise ValueError(f"{what} is empty")
    return out


def _check_normalize(mean, std, dtype, unit=None):
    """mean/std as given, on the 0..255 scale (the 0..1 scale with scale=1): refuse
    torchvision's 0..1 values on the 0..255 scale (they would give values in the thousands), and
    values whose results cannot be represented."""
    if mean is None or std is None or isinstance(mean, str):
        return None
    m, s = _channel_list(mean, "mean"), _channel_list(std, "std")
    if unit is None and max(m) <= 1.0 and max(s) <= 1.0:
        raise ValueError(
            f"mean={mean!r}, std={std!r} look like torchvision's Normalize values on the 0..1 "
            "scale (after ToTensor); here the pixels are 0..255: multiply both by 255, e.g. "
            "mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]; or scale=1 for "
            "ToTensor's 0..1 values, on which these mean and std apply")
    for x in s:
        if not (x > 0 and _math.isfinite(x)):
            raise ValueError(f"std must be positive and finite, not {std!r}")
    limit = 65504.0 if _name(dtype) in ("float16", _np.float16) or str(dtype) in (
        "float16", "torch.float16") else float(_np.finfo(_np.float32).max)
    for k in range(max(len(m), len(s))):
        mk, sk = m[min(k, len(m) - 1)], s[min(k, len(s) - 1)]
        for px in (0.0, 255.0):
            with _np.errstate(all="ignore"):
                x = _np.float32(px) / _np.float32(unit) if unit else _np.float32(px)
                v = (x - _np.float32(mk)) / _np.float32(sk)
            if not _np.isfinite(v) or abs(float(v)) > limit:
                raise ValueError(
                    f"mean={mean!r}, std={std!r}: pixel {int(px)} would become {float(v)!r}, "
                    f"which the output dtype cannot hold (std too small)")
    return len(m), len(s)


def _jitter_range(value, name, center, clip_first_on_zero):
    """torchvision's ColorJitter._check_input: a number v is [center - v, center + v] (the low
    end clipped at 0 for brightness, contrast and saturation), a pair is (min, max). The range
    the result must lie in is the library's (reader/options.def), refused by the open."""
    if isinstance(value, _numbers.Number) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"color_jitter {name}: if it is a single number, it must be "
                             f"non-negative, not {value!r}")
        lo, hi = center - float(value), center + float(value)
        if clip_first_on_zero:
            lo = max(lo, 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = float(value[0]), float(value[1])
    else:
        raise TypeError(f"color_jitter {name} must be a number or a (min, max) pair, not "
                        f"{value!r}")
    return (lo, hi)


def _jitter(color_jitter):
    """color_jitter= as torchvision's ColorJitter(brightness, contrast, saturation, hue) takes
    it: a 4-sequence or a dict of those names; into the extension's ranges."""
    names = ("brightness", "contrast", "saturation", "hue")
    if color_jitter is None:
        return {}
    if type(color_jitter).__name__ == "ColorJitter":
        color_jitter = {n: (tuple(getattr(color_jitter, n)) if getattr(color_jitter, n)
                            is not None else 0) for n in names}
    if isinstance(color_jitter, dict):
        unknown = set(color_jitter) - set(names)
        if unknown:
            raise TypeError(f"color_jitter takes {', '.join(names)}, not {sorted(unknown)}")
        vals = [color_jitter.get(n, 0) for n in names]
    else:
        try:
            vals = list(color_jitter)
        except TypeError:
            vals = []
        if not 1 <= len(vals) <= 4:
            raise TypeError("color_jitter is (brightness, contrast, saturation, hue), a dict "
                            f"of them, or torchvision's ColorJitter, not {color_jitter!r}")
        vals += [0] * (4 - len(vals))
    out = {}
    for n, v in zip(names, vals):
        if n == "hue":
            out["jitter_hue"] = _jitter_range(v, n, 0.0, False)
        else:
            out["jitter_" + n] = _jitter_range(v, n, 1.0, True)
    return out


def _erasing(erasing):
    """erasing= as torchvision's RandomErasing(p, scale, ratio, value) takes it: a probability,
    or a dict of those names (value: a number or one per channel, in the delivered units)."""
    if erasing is None or erasing is False:
        return {}
    if isinstance(erasing, dict):
        unknown = set(erasing) - {"p", "scale", "ratio", "value"}
        if unknown:
            raise TypeError(f"erasing takes p, scale, ratio and value, not {sorted(unknown)}")
        args = dict(erasing)
    elif isinstance(erasing, _numbers.Real) and not isinstance(erasing, bool):
        args = {"p": float(erasing)}
    else:
        raise TypeError(f"erasing must be a probability, a dict of p, scale, ratio, value, or "
                        f"torchvision's RandomErasing, not {erasing!r}")
    out = {"erase_p": float(args.get("p", 0.5))}
    if isinstance(args.get("value"), str):
        if args["value"] != "random":
            raise ValueError(f"erasing value must be a number, one per channel or 'random', not "
                             f"{args['value']!r}")
        del args["value"]
        out["erase_random"] = True
    if "scale" in args:
        out["erase_scale"] = tuple(args["scale"])
    if "ratio" in args:
        out["erase_ratio"] = tuple(args["ratio"])
    if "value" in args:
        out["erase_value"] = args["value"]
    return out


def _degrees(value, name):
    """torchvision's degrees: a number d is (-d, d), a pair is (min, max)."""
    if isinstance(value, _numbers.Real) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name}: if degrees is a single number, it must be positive, not "
                             f"{value!r}")
        return (-float(value), float(value))
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} degrees must be a number or a (min, max) pair, not "
                        f"{value!r}") from None
    return (lo, hi)


def _geometry(rotation, affine, auto_augment, interpolation, fill):
    """rotation= (RandomRotation's degrees), affine= (RandomAffine's keywords as a dict),
    auto_augment= ('trivialaugment_wide', 'randaugment', a dict with policy and RandAugment's
    keywords, or torchvision's TrivialAugmentWide / RandAugment object), with
    augment_interpolation and augment_fill: into the extension's terms."""
    out = {}
    if rotation is not None:
        out["rotation_degrees"] = _degrees(rotation, "rotation")
    if affine is not None:
        if not isinstance(affine, dict) or "degrees" not in affine:
            raise TypeError("affine takes RandomAffine's keywords as a dict with degrees, e.g. "
                            "dict(degrees=10, translate=(0.1, 0.1)), or torchvision's "
                            f"RandomAffine, not {affine!r}")
        unknown = set(affine) - {"degrees", "translate", "scale", "shear"}
        if unknown:
            raise TypeError(f"affine takes degrees, translate, scale and shear, not "
                            f"{sorted(unknown)}")
        out["affine_degrees"] = _degrees(affine["degrees"], "affine")
        if affine.get("translate") is not None:
            out["affine_translate"] = tuple(float(v) for v in affine["translate"])
        if affine.get("scale") is not None:
            out["affine_scale"] = tuple(float(v) for v in affine["scale"])
        shear = affine.get("shear")
        if shear is not None:
            if isinstance(shear, _numbers.Real) and not isinstance(shear, bool):
                if shear < 0:
                    raise ValueError(f"affine shear: if it is a single number, it must be "
                                     f"positive, not {shear!r}")
                shear = (-float(shear), float(shear), 0.0, 0.0)
            else:
                shear = tuple(float(v) for v in shear)
                if len(shear) == 2:
                    shear += (0.0, 0.0)
            out["affine_shear"] = shear
    if auto_augment is not None:
        kind = type(auto_augment).__name__
        if kind in ("TrivialAugmentWide", "RandAugment", "AutoAugment"):  # torchvision's own
            policy = {"TrivialAugmentWide": "trivialaugment_wide", "RandAugment": "randaugment",
                      "AutoAugment": "imagenet"}[kind]
            if kind == "AutoAugment" and str(getattr(auto_augment.policy, "value",
                                                     auto_augment.policy)) != "imagenet":
                raise ValueError(f"auto_augment: AutoAugment's {auto_augment.policy} policy is "
                                 "not supported: only AutoAugmentPolicy.IMAGENET")
            args = ({"num_magnitude_bins": auto_augment.num_magnitude_bins}
                    if kind != "AutoAugment" else {})
            if policy == "randaugment":
                args.update(num_ops=auto_augment.num_ops, magnitude=auto_augment.magnitude)
            if interpolation is None:
                interpolation = auto_augment.interpolation
            if fill is None and auto_augment.fill is not None:
                fill = auto_augment.fill
        elif isinstance(auto_augment, dict):
            args = dict(auto_augment)
            policy = args.pop("policy", None)
            unknown = set(args) - {"num_ops", "magnitude", "num_magnitude_bins"}
            if policy is None or unknown:
                raise TypeError("auto_augment as a dict takes policy and num_ops, magnitude, "
                                f"num_magnitude_bins, not {auto_augment!r}")
        else:
            policy, args = auto_augment, {}
        names = {"trivialaugment_wide": "trivialaugment_wide",
                 "trivialaugmentwide": "trivialaugment_wide", "trivial": "trivialaugment_wide",
                 "ta_wide": "trivialaugment_wide", "randaugment": "randaugment",
                 "rand": "randaugment", "rand_augment": "randaugment", "imagenet": "imagenet"}
        key = str(policy).lower().replace("-", "_")
        if key not in names:
            raise ValueError(f"auto_augment must be 'trivialaugment_wide' ('ta_wide'), "
                             f"'randaugment' ('rand_augment') or 'imagenet' (AutoAugment's "
                             f"IMAGENET policy), not {policy!r}")
        out["auto_augment"] = names[key]
        for k, ck in (("num_ops", "aa_num_ops"), ("magnitude", "aa_magnitude"),
                      ("num_magnitude_bins", "aa_bins")):
            if k in args:
                out[ck] = args[k]
    if interpolation is not None:
        out["aug_interpolation"] = _name(interpolation)
    if fill is not None:
        out["aug_fill"] = fill
    return out


_KEYWORD_CLASSES = {"rrc": "RandomResizedCrop", "flip": "RandomHorizontalFlip",
                    "rotation": "RandomRotation", "affine": "RandomAffine",
                    "color_jitter": "ColorJitter", "grayscale": "RandomGrayscale",
                    "erasing": "RandomErasing"}


def _keyword_objects(values, others):
    """Each keyword given the torchvision object it mirrors (rrc=T.RandomResizedCrop(64),
    flip=T.RandomHorizontalFlip(), rotation=T.RandomRotation(15), affine=T.RandomAffine(...),
    color_jitter=T.ColorJitter(...), grayscale=T.RandomGrayscale(.2),
    erasing=T.RandomErasing()): the keywords it stands for. The object's size, ratio,
    interpolation and fill fill in keywords left out; one given differently is a TypeError."""
    out = {}
    state = {"keyword": True}
    for name, v in values.items():
        kind = type(v).__name__
        if not type(v).__module__.startswith("torchvision"):
            if name == "color_jitter" and isinstance(v, _numbers.Real) and \
                    not isinstance(v, bool) and v:
                raise TypeError(
                    f"color_jitter={v!r} is ambiguous: torchvision's ColorJitter({v!r}) jitters "
                    f"the brightness only, timm's color_jitter={v!r} all three of brightness, "
                    f"contrast and saturation; give ({v!r}, {v!r}, {v!r}) for the latter, "
                    f"dict(brightness={v!r}) for the former, or T.ColorJitter(...) itself "
                    "(accepted: (brightness, contrast, saturation, hue), a dict of those names, "
                    "or a torchvision ColorJitter)")
            continue
        want = _KEYWORD_CLASSES[name]
        if kind != want:
            raise TypeError(f"{name} takes torchvision's {want} (or its keyword forms, see "
                            f"help(shardread.Loader)), not {kind}")
        stage, kw = _pipeline._one(v, [], {}, 3, state)
        if stage is None:
            raise ValueError(f"{name}={v!r}: the reader cannot run it exactly ({kw})")
        for k, x in kw.items():
            if k == "auto_augment":
                continue
            if k in others and others[k] is not None and k not in out:
                mine = _size(x) if k == "size" else x
                theirs = _size(others[k]) if k == "size" else others[k]
                if k == "interpolation":
                    theirs = _name(theirs)
                    if theirs == "bilinear":
                        theirs = mine       # the keyword's default
                if (mine if not isinstance(mine, list) else tuple(mine)) != (
                        theirs if not isinstance(theirs, (list, tuple)) else tuple(theirs)):
                    raise TypeError(f"{name}={v!r} says {k}={x!r}, and {k}={others[k]!r} was "
                                    "given too: give one")
            out[k] = x
    if state.get("aug"):
        out.setdefault("augment_interpolation", state["aug"][0])
        out.setdefault("augment_fill", state["aug"][1])
        if others.get("augment_interpolation") is not None:
            out["augment_interpolation"] = others["augment_interpolation"]
        if others.get("augment_fill") is not None:
            out["augment_fill"] = others["augment_fill"]
    if "color_jitter" in out and not isinstance(out["color_jitter"], dict):
        cj = out["color_jitter"]
        out["color_jitter"] = {n: (tuple(getattr(cj, n)) if getattr(cj, n) is not None else 0)
                               for n in ("brightness", "contrast", "saturation", "hue")}
    return out


def _aliases(erasing, augment_fill, erase, erase_value, fill):
    """The short keyword forms: erase=p (with erase_value=) for erasing=, fill= for
    augment_fill=. An alias and its long name together are a TypeError."""
    if erase is not None or erase_value is not None:
        if erasing is not None:
            raise TypeError("give erasing= or erase= (with erase_value=), not both")
        if erase is None:
            raise TypeError("erase_value= needs erase=p (the probability)")
        if isinstance(erase, bool) or not isinstance(erase, _numbers.Real):
            raise TypeError(f"erase must be a probability, not {erase!r}")
        erasing = {"p": float(erase)}
        if erase_value is not None:
            erasing["value"] = erase_value
    if fill is not None:
        if augment_fill is not None:
            raise TypeError("give augment_fill= or fill=, not both")
        augment_fill = fill
    return erasing, augment_fill


def _mixing(mixup, cutmix, num_classes):
    """mixup=alpha, cutmix=alpha (torchvision's recipe: 0.2 and 1.0) and num_classes= into the
    extension's terms."""
    out = {}
    for name, v in (("mixup", mixup), ("cutmix", cutmix)):
        if v is None or v is False:
            continue
        if isinstance(v, bool) or not isinstance(v, _numbers.Real):
            raise TypeError(f"{name} must be the Beta distribution's alpha (a number > 0), not "
                            f"{v!r}")
        # (its range, 0 refused as None is off: the extension's, from the options table)
        out[name + "_alpha"] = float(v)
    if num_classes is not None:
        if not out:
            raise TypeError("num_classes= is for the soft labels of mixup= or cutmix=")
        out["num_classes"] = _operator.index(num_classes)
    return out


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _bytes(v, what):
    """cache_limit=: an int of bytes, or a string such as '200GiB', '512 MB'."""
    if v is None or (isinstance(v, int) and not isinstance(v, bool)):
        return v
    if isinstance(v, str):
        import re
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", v)
        if m and m.group(2).lower() in _UNITS:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise ValueError(f"{what} must be a number of bytes or a size such as '200GiB', not {v!r}")

