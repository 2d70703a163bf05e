"""shardread.replay: a sample's read-time ops, re-applied with torchvision to the stored image.

Loader(return_params="ops") reports, per sample, the ops the reader applied in torchvision's
terms: a list of (name, kwargs) pairs in the order they ran. name is a function of
torchvision.transforms.functional (resized_crop, crop, resize, pad, hflip, rotate, affine,
adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue, rgb_to_grayscale, erase) or
"auto_augment_op", torchvision.transforms.autoaugment._apply_op(img, op_name, magnitude,
interpolation, fill), the op TrivialAugmentWide, RandAugment and AutoAugment apply; kwargs are
that function's arguments (interpolation as InterpolationMode's value, e.g. "bilinear").
replay applies them to the PIL image of Dataset[i]'s image and gives the bytes the Loader
delivered with dtype="uint8".
"""
import numpy as _np


def replay(image, ops):
    """The uint8 HxWxC array that ops (one sample's list from Loader(return_params="ops"))
    make of image (Dataset[i]'s image, HxWxC uint8), computed by torchvision on the PIL image:
    what the Loader delivers with dtype="uint8". "erase" fills its box (rows i .. i+h-1,
    columns j .. j+w-1) with v in the uint8 result, as RandomErasing does on the tensor; with
    a float dtype the Loader erases after the conversion and normalisation instead (F.erase on
    the normalised tensor, same i, j, h, w, v). An erase with v="random" (noise from the
    reader's own draws) cannot be replayed: ValueError. Needs torchvision and Pillow."""
    import torchvision.transforms.functional as F
    from PIL import Image
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.autoaugment import _apply_op

    a = _np.asarray(image)
    if a.dtype != _np.uint8 or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (1, 3)):
        raise ValueError(f"replay needs an HxWxC uint8 image with 1 or 3 channels, not "
                         f"{a.dtype} of shape {a.shape}")
    gray = a.ndim == 2 or a.shape[2] == 1
    img = Image.fromarray(a.reshape(a.shape[:2]) if gray else a)
    erases = []
    for name, kw in ops:
        kw = dict(kw)
        if "interpolation" in kw:
            kw["interpolation"] = InterpolationMode(kw["interpolation"])
        if name == "erase":
            erases.append(kw)
        elif name == "auto_augment_op":
            img = _apply_op(img, kw["op_name"], kw["magnitude"], kw["interpolation"],
                            kw["fill"])
        elif name in _FUNCTIONAL:
            img = getattr(F, name)(img, **kw)
        else:
            raise ValueError(f"replay: unknown op {name!r}")
    out = _np.asarray(img)
    out = out.reshape(out.shape[0], out.shape[1], -1).copy()
    for e in erases:
        if isinstance(e["v"], str):
            raise ValueError("replay: an erase with v='random' (the reader's own noise) cannot "
                             "be replayed")
        i, j, h, w = e["i"], e["j"], e["h"], e["w"]
        out[i:i + h, j:j + w] = _np.asarray(e["v"], dtype=_np.float64).astype(_np.uint8)
    return out


_FUNCTIONAL = {"resized_crop", "crop", "resize", "pad", "hflip", "rotate", "affine",
               "adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue",
               "rgb_to_grayscale"}
