"""Argument forms of the Loader's detection geometry (multiscale=, scale_jitter=, letterbox=,
pad_to=) and the per-image views of a multi-scale batch. The arithmetic is the library's:
include/shardread/options.h, "Scale"."""
import numbers as _numbers
import operator as _operator

from ._shardread import _MAX_PIXELS, _MAX_SIDE

_MAX_SIZES = 16


def _within_limit(h, w, what):
    """The library's output size limit (shardread.h, SHR_MAX_SIDE and SHR_MAX_PIXELS), in the
    keyword's terms: refused here, before anything is allocated."""
    if h > _MAX_SIDE or w > _MAX_SIDE or h * w > _MAX_PIXELS:
        raise ValueError(f"{what} {h}x{w} (height x width) is past the output size limit: each "
                         f"side at most {_MAX_SIDE} and height x width at most {_MAX_PIXELS} "
                         "pixels")
    return (h, w)


def _int(v, what, lo=1):
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral):
        raise TypeError(f"{what} must be an int, not {v!r}")
    v = int(_operator.index(v))
    if v < lo:
        raise ValueError(f"{what} must be at least {lo}, not {v}")
    return v


def _hw(v, what):
    """An int (square) or (height, width) into (height, width)."""
    if isinstance(v, _numbers.Integral) and not isinstance(v, bool):
        v = _int(v, what)
        return _within_limit(v, v, what)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise TypeError(f"{what} must be an int or (height, width), not {v!r}")
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or (height, width), not {len(v)} numbers: "
                         f"{v!r}")
    return _within_limit(_int(v[0], f"{what} height"), _int(v[1], f"{what} width"), what)


def _pair(v, what):
    """a (min, max) pair of numbers, as floats; its range is the library's (reader/options.def,
    scale_range), refused by the open"""
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != 2:
        raise TypeError(f"{what} must be a (min, max) pair of numbers, not {v!r}")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, _numbers.Real):
            raise TypeError(f"{what} must be a (min, max) pair of numbers, not {v!r}")
        out.append(float(x))
    return tuple(out)


def resize_arg(resize, size, rrc, random_crop, pad):
    """(size, scale) for resize=S or (S, max_size): torchvision's Resize then CenterCrop(size)."""
    if isinstance(resize, _numbers.Integral) and not isinstance(resize, bool):
        s, m = resize, None
    elif not isinstance(resize, (str, bytes)) and hasattr(resize, "__len__") and \
            len(resize) == 2:
        s, m = resize
    else:
        raise TypeError(f"resize must be an int (Resize(S)) or (S, max_size), not {resize!r}")
    s = _int(s, "resize")
    if m is not None:
        m = _int(m, "resize max_size")
        if m <= s:
            raise ValueError(f"resize max_size must be above the size {s}, not {m} (as "
                             "torchvision's Resize)")
    if size is None:
        raise ValueError("resize= needs size= (the CenterCrop after the Resize)")
    if rrc:
        raise ValueError("resize= and rrc= exclude each other: both choose the resize")
    if random_crop:
        raise ValueError("resize= and random_crop= exclude each other: resize= crops at the "
                         "center")
    if pad:
        raise ValueError("resize= crops at the center and pads with zeros where the resize is "
                         "smaller, as CenterCrop does: give no pad= with it")
    return _hw(size, "size"), ("resize", (s,), m, None, False)


def scale_args(multiscale, scale_jitter, letterbox, pad_to, size, rrc, random_crop, targets,
               erasing=None, resize=None, pad=False):
    """(size, scale, image_list): the output size and the extension's scale= tuple for the
    keywords given, and whether batches carry a list of per-image views (multi-scale without
    pad_to). (None, None, False) when none is given."""
    given = [k for k, v in (("multiscale", multiscale), ("scale_jitter", scale_jitter),
                            ("letterbox", letterbox), ("resize", resize)) if v is not None]
    if not given:
        if pad_to is not None:
            raise ValueError("pad_to= is for multiscale=: other batches have one size")
        return None, None, False
    if len(given) > 1:
        raise ValueError(f"give one of multiscale=, scale_jitter=, letterbox= and resize=, not "
                         f"{' and '.join(given)}")
    name = given[0]
    if name == "resize":
        if pad_to is not None:
            raise ValueError("pad_to= is for multiscale=: resize= gives every image one size")
        return (*resize_arg(resize, size, rrc, random_crop, pad), False)
    if size is not None:
        raise ValueError(f"{name}= sets the output size: give no size= with it"
                         + (" (pad_to= is the canvas of multiscale=)"
                            if name == "multiscale" else ""))
    if rrc:
        raise ValueError(f"{name}= and rrc= exclude each other: both choose the resize")
    if random_crop:
        raise ValueError(f"{name}= and random_crop= exclude each other: {name} places the "
                         "image itself")
    if name != "multiscale" and pad_to is not None:
        raise ValueError(f"pad_to= is for multiscale=: {name}= gives every image one size")
    if name == "multiscale":
        if isinstance(multiscale, (str, bytes)) or not hasattr(multiscale, "__len__") or \
                len(multiscale) != 2:
            raise TypeError(f"multiscale must be (sizes, max_size), not {multiscale!r}")
        sizes, max_size = multiscale
        if isinstance(sizes, _numbers.Integral) and not isinstance(sizes, bool):
            sizes = (sizes,)
        if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
            raise TypeError(f"multiscale sizes must be an int or a sequence of ints, not "
                            f"{sizes!r}")
        sizes = tuple(_int(s, "multiscale size") for s in sizes)
        if not 1 <= len(sizes) <= _MAX_SIZES:
            raise ValueError(f"multiscale takes 1 to {_MAX_SIZES} sizes, not {len(sizes)}")
        max_size = _int(max_size, "multiscale max_size")
        if pad_to is None or pad_to is False:
            canvas, image_list = None, True
        elif pad_to is True:
            canvas, image_list = None, False
        else:
            canvas, image_list = _hw(pad_to, "pad_to"), False
        if canvas is None:      # the canvas is max_size x max_size
            _within_limit(max_size, max_size, "multiscale max_size canvas")
        if not targets:
            raise ValueError("multiscale= needs targets=True: each image's size comes with its "
                             "target ('size')")
        if image_list and erasing:
            raise ValueError("erasing= with multiscale= needs pad_to= (the list of images does "
                             "not support it yet)")
        return canvas, ("multiscale", sizes, max_size, None, image_list), image_list
    if name == "scale_jitter":
        target, span = scale_jitter, (0.1, 2.0)
        if not isinstance(scale_jitter, _numbers.Integral) and hasattr(scale_jitter, "__len__") \
                and len(scale_jitter) == 2 and hasattr(scale_jitter[1], "__len__"):
            target, span = scale_jitter
        return _hw(target, "scale_jitter target"), \
            ("jitter", None, None, _pair(span, "scale_jitter range"), False), False
    return _hw(letterbox, "letterbox"), ("letterbox", None, None, None, False), False


# the extension's scale= for a detection dataset read at its natural sizes: each image as
# stored, dense (the list of per-image views), in no resize
NATURAL = ("natural", None, None, None, True)


def natural_fits(targets, scale, size, rrc, random_crop, aug):
    """Whether a Loader refused for samples that vary in size is read at natural sizes instead:
    a detection dataset (targets=True) with no output size or geometry asked for, and no
    RandomErasing (the list of images does not support it yet)."""
    return bool(targets) and scale is None and size is None and not rrc and not random_crop \
        and not aug.get("erase_p")


def image_list(batch, nchw):
    """A multi-scale batch read with each image dense at the start of its sample (the
    library's scale_dense) as a list of per-image views, contiguous, without a copy: image i
    is the first h * w * C elements of sample i as (h, w, C) (NHWC) or (C, h, w) (NCHW), (h, w)
    its target's 'size'."""
    images, targets = batch[0], batch[1]
    n = len(targets)
    if not n:
        return ([],) + tuple(batch[1:])
    c = images.shape[1] if nchw else images.shape[3]
    flat = images.reshape(images.shape[0], -1)
    views = []
    for i, t in enumerate(targets):
        h, w = t["size"] if type(t) is dict else t.shape    # a label map: its own shape
        shape = (c, h, w) if nchw else (h, w, c)
        views.append(flat[i, :h * w * c].reshape(shape))
    return (views,) + tuple(batch[1:])
