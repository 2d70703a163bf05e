"""The Loader's read-time augmentations in torchvision's argument forms: ColorJitter,
RandomGrayscale and RandomErasing, each against torchvision's functional op on the PIL image of
the stored sample (the C suite tests/test_augment_read.c checks the random draws and the mixed
pipelines; here the keywords reach those ops exactly)."""
import numpy as np
import pytest

import shardread

try:
    import torchvision.transforms.functional as F
    from PIL import Image
except ImportError:  # pragma: no cover - scripts/deps.sh installs python3-torchvision
    F = None

needs_torchvision = pytest.mark.skipif(F is None, reason="torchvision is not installed")


def delivered(path, **kw):
    """{dataset index: delivered image} over one sequential epoch."""
    out = {}
    for images, labels, indices in shardread.Loader(path, batch_size=5, return_indices=True,
                                                    **kw):
        for k, i in enumerate(indices):
            out[int(i)] = np.asarray(images[k]).copy()
    return out


@needs_torchvision
@pytest.mark.parametrize("op,jitter,ref", [
    ("brightness", dict(brightness=(0.5, 0.5)), lambda im: F.adjust_brightness(im, 0.5)),
    ("contrast", dict(contrast=(1.7, 1.7)), lambda im: F.adjust_contrast(im, 1.7)),
    ("saturation", dict(saturation=(0.3, 0.3)), lambda im: F.adjust_saturation(im, 0.3)),
    ("hue", dict(hue=(0.1, 0.1)), lambda im: F.adjust_hue(im, 0.1)),
    ("hue_negative", dict(hue=(-0.27, -0.27)), lambda im: F.adjust_hue(im, -0.27)),
])
def test_each_color_jitter_op_equals_torchvision(fx, op, jitter, ref):
    ds = shardread.Dataset(fx.fixed)
    got = delivered(fx.fixed, color_jitter=jitter)
    assert len(got) == len(ds)
    for i, image in got.items():
        want = np.asarray(ref(Image.fromarray(ds[i][0])))
        assert np.array_equal(image, want), (op, i)


@needs_torchvision
def test_grayscale_equals_torchvision(fx):
    ds = shardread.Dataset(fx.fixed)
    for i, image in delivered(fx.fixed, grayscale=1.0).items():
        want = np.asarray(F.rgb_to_grayscale(Image.fromarray(ds[i][0]), num_output_channels=3))
        assert np.array_equal(image, want), i
    plain = delivered(fx.fixed)
    assert all(np.array_equal(a, plain[i]) for i, a in delivered(fx.fixed, grayscale=0).items())


def test_erasing_fills_one_box_per_sample(fx):
    plain = delivered(fx.fixed)
    erased = delivered(fx.fixed, erasing=dict(p=1.0, value=[7, 8, 9]))
    boxes = 0
    for i, image in erased.items():
        diff = np.any(image != plain[i], axis=2)
        ys, xs = np.nonzero(diff)
        if len(ys) == 0:
            continue  # the box happened to hold those values already, or none was drawn
        box = image[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
        assert (box == [7, 8, 9]).all(), i  # one rectangle, filled with the value
        boxes += 1
    assert boxes >= len(erased) // 2
    # erasing is an output stage: the same boxes after the plain copy (mmap, pread) and after
    # the O_DIRECT batch engine, mirrored or not
    for flip in (False, True):
        kw = dict(erasing=dict(p=1.0, value=[7, 8, 9]), flip=flip, seed=5)
        ref = delivered(fx.fixed, **kw)
        for access in ("pread", "direct"):
            got = delivered(fx.fixed, access=access, **kw)
            assert all(np.array_equal(got[i], ref[i]) for i in ref), (access, flip)


def test_jitter_draws_are_reproducible_and_vary(fx):
    kw = dict(color_jitter=(0.4, 0.4, 0.4, 0.1), shuffle=True, seed=3)
    a, b = delivered(fx.fixed, **kw), delivered(fx.fixed, threads=1, **kw)
    assert all(np.array_equal(a[i], b[i]) for i in a)
    plain = delivered(fx.fixed)
    assert sum(not np.array_equal(a[i], plain[i]) for i in a) >= len(a) - 2


def test_augmentation_argument_forms(fx):
    for bad, exc in ((dict(color_jitter=(-0.1, 0, 0, 0)), ValueError),
                     (dict(color_jitter=(0, 0, 0, 0.6)), ValueError),
                     (dict(color_jitter=dict(sharpness=1)), TypeError),
                     (dict(color_jitter=(0, 0, 0, 0, 0)), TypeError),
                     (dict(erasing=dict(p=1.0, value="random")), ValueError),
                     (dict(erasing="yes"), TypeError),
                     (dict(erasing=dict(p=1.0, value=0.5)), shardread.ArgumentError),
                     (dict(grayscale=1.5), shardread.ArgumentError)):
        with pytest.raises(exc):
            shardread.Loader(fx.fixed, **bad)
    # torchvision's ColorJitter() with no argument is no op at all
    plain = delivered(fx.fixed)
    same = delivered(fx.fixed, color_jitter=(0, 0, 0, 0))
    assert all(np.array_equal(same[i], plain[i]) for i in plain)


@needs_torchvision
@pytest.mark.parametrize("interp", ["nearest", "bilinear"])
def test_rotation_and_affine_equal_torchvision(fx, interp):
    from torchvision.transforms import InterpolationMode
    mode = InterpolationMode.NEAREST if interp == "nearest" else InterpolationMode.BILINEAR
    ds = shardread.Dataset(fx.fixed)
    got = delivered(fx.fixed, rotation=(30, 30), augment_interpolation=mode,
                    augment_fill=[10, 20, 30])
    for i, image in got.items():
        want = np.asarray(F.rotate(Image.fromarray(ds[i][0]), 30.0, mode, fill=[10, 20, 30]))
        assert np.array_equal(image, want), ("rotate", interp, i)
    got = delivered(fx.fixed, affine=dict(degrees=(-12, -12), scale=(0.8, 0.8), shear=(7, 7)),
                    augment_interpolation=interp)
    for i, image in got.items():
        want = np.asarray(F.affine(Image.fromarray(ds[i][0]), angle=-12.0, translate=[0, 0],
                                   scale=0.8, shear=[7.0, 0.0], interpolation=mode, fill=0))
        assert np.array_equal(image, want), ("affine", interp, i)


@needs_torchvision
def test_auto_augment_forms(fx):
    import torchvision.transforms as T
    kw = dict(shuffle=True, seed=4)
    a = delivered(fx.fixed, auto_augment="trivialaugment_wide", **kw)
    b = delivered(fx.fixed, auto_augment=T.TrivialAugmentWide(), **kw)
    c = delivered(fx.fixed, auto_augment="trivialaugment_wide", threads=1, **kw)
    assert all(np.array_equal(a[i], b[i]) and np.array_equal(a[i], c[i]) for i in a)
    plain = delivered(fx.fixed, **kw)
    assert sum(not np.array_equal(a[i], plain[i]) for i in a) >= len(a) // 3
    r1 = delivered(fx.fixed, auto_augment=dict(policy="randaugment", num_ops=2, magnitude=9), **kw)
    r2 = delivered(fx.fixed, auto_augment=T.RandAugment(num_ops=2, magnitude=9), **kw)
    assert all(np.array_equal(r1[i], r2[i]) for i in r1)
    for bad, exc in ((dict(auto_augment="autoaugment"), ValueError),
                     (dict(auto_augment=dict(policy="randaugment", num_ops=9)),
                      shardread.ArgumentError),
                     (dict(affine=dict(translate=(0.1, 0.1))), TypeError),
                     (dict(rotation=-5), ValueError),
                     (dict(rotation=5, augment_interpolation="bicubic"), ValueError),
                     (dict(rotation=5, augment_fill=300), ValueError)):
        with pytest.raises(exc):
            shardread.Loader(fx.fixed, **bad)
