"""The read-time detection geometry (reader/shardread.h "Scale"): multi-scale resize
(RandomShortestSize), large-scale jitter (ScaleJitter + FixedSizeCrop) and letterbox, through
Loader(multiscale=, scale_jitter=, letterbox=, pad_to=). Boxes against the NumPy reference of
the documented arithmetic (tests/ref/detect_ref.py) to 1e-4 pixel; pixels equal to torchvision's
F.resize / F.crop / F.pad / F.hflip on the PIL image of Dataset[i] fed the reported params; the
same batches at 1 and 4 threads; DDP ranks disjoint with the right targets."""
import os
import sys

import numpy as np
import pytest

import shardread
from conftest import build_detection

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ref"))
import detect_ref  # noqa: E402

try:
    import torch
    import torchvision.transforms.functional as F
    from PIL import Image
except ImportError:  # pragma: no cover - scripts/deps.sh installs them
    torch = None


@pytest.fixture(scope="module")
def det(tmp_path_factory):
    return build_detection(tmp_path_factory.mktemp("detscale"), 5)


def reference_image(stored, row, out_w, out_h, multi):
    """torchvision's PIL path for one sample's reported params: F.resize to (scale_h, scale_w),
    F.crop of the window, then the canvas (multi: top-left, flipped alone) or F.pad and the
    flip of the whole output."""
    _, _, W, H, flip, sw, sh, cx, cy, px, py, iw, ih = (int(v) for v in row)
    img = Image.fromarray(stored if stored.shape[2] > 1 else stored[:, :, 0])
    r = F.resize(img, [sh, sw], interpolation=F.InterpolationMode.BILINEAR)
    r = F.crop(r, cy, cx, ih, iw)
    if multi:
        if flip:
            r = F.hflip(r)
        canvas = np.zeros((out_h, out_w, stored.shape[2]), np.uint8)
        canvas[:ih, :iw] = np.asarray(r).reshape(ih, iw, -1)
        return canvas
    r = F.pad(r, [px, py, out_w - px - iw, out_h - py - ih], fill=0)
    if flip:
        r = F.hflip(r)
    return np.asarray(r).reshape(out_h, out_w, -1)


CASES = [
    ("multi-list", dict(multiscale=((32, 48, 64), 80))),
    ("multi-pad", dict(multiscale=([40, 56], 72), pad_to=True)),
    ("multi-canvas", dict(multiscale=(48, 64), pad_to=(64, 72))),
    ("jitter", dict(scale_jitter=(48, (0.3, 1.8)))),
    ("jitter-rect", dict(scale_jitter=((40, 56), (1.5, 3.0)), min_box_area_fraction=0.6)),
    ("letterbox", dict(letterbox=(40, 56))),
    ("letterbox-square", dict(letterbox=48, min_box_area_fraction=0.5)),
]


@pytest.mark.skipif(torch is None, reason="torch/torchvision are not installed")
@pytest.mark.parametrize("name,opts", CASES, ids=[c[0] for c in CASES])
def test_scale_pixels_boxes_and_params(det, name, opts):
    ds = shardread.Dataset(det)
    multi = "multiscale" in opts
    loader = shardread.Loader(det, batch_size=5, targets=True, return_params=True, shuffle=True,
                              seed=11, flip=0.5, threads=2, **opts)
    out_h, out_w = loader.info["shape"][:2]
    if multi:
        sizes, max_size = opts["multiscale"]
        sizes = [sizes] if isinstance(sizes, int) else list(sizes)
        canvas = opts.get("pad_to")
        if canvas in (None, True):
            assert (out_h, out_w) == (max_size, max_size)
        else:
            assert (out_h, out_w) == tuple(canvas)
    seen = flips = dropped = 0
    for epoch in range(2):
        for images, targets, indices, params in loader:
            assert params.shape == (len(indices), 13)
            if name == "multi-list":
                assert isinstance(images, list) and len(images) == len(indices)
            for k, i in enumerate(indices):
                image, stored = ds[int(i)]
                row, got = params[k], targets[k]
                x, y, W, H, flip, sw, sh, cx, cy, px, py, iw, ih = (int(v) for v in row)
                assert (x, y, W, H) == (0, 0, image.shape[1], image.shape[0])
                assert got["size"] == (ih, iw)
                # the documented size arithmetic
                if multi:
                    assert (sw, sh) in {detect_ref.multiscale_size(W, H, s, max_size)
                                        for s in sizes}
                    assert (cx, cy, px, py, iw, ih) == (0, 0, 0, 0, sw, sh)
                elif "letterbox" in opts:
                    assert (sw, sh, cx, cy, px, py, iw, ih) == \
                        detect_ref.letterbox_params(W, H, out_w, out_h)
                else:
                    assert (iw, ih) == (min(sw, out_w), min(sh, out_h)) and px == py == 0
                    assert 0 <= cx <= sw - iw and 0 <= cy <= sh - ih
                # boxes against the NumPy reference
                want_b, want_a, keep = detect_ref.scale_boxes(
                    stored["boxes"], stored["area"], row, out_w, multi,
                    opts.get("min_box_area_fraction", 0.0))
                assert got["image_id"] == stored["image_id"]
                assert got["boxes"].shape == want_b.shape
                assert np.allclose(got["boxes"], want_b, atol=1e-4), (name, int(i))
                assert np.allclose(got["area"], want_a, rtol=1e-6)
                assert np.array_equal(got["labels"], np.asarray(stored["labels"])[keep])
                assert got["dropped"] == len(keep) - int(keep.sum())
                # pixels against torchvision on the PIL image
                want = reference_image(image, row, out_w, out_h, multi)
                if name == "multi-list":
                    assert images[k].shape == (ih, iw, image.shape[2])
                    assert np.array_equal(images[k], want[:ih, :iw]), (name, int(i))
                else:
                    assert np.array_equal(images[k], want), (name, int(i))
                seen += 1
                flips += flip
                dropped += got["dropped"]
    assert seen == 2 * len(ds) and 0 < flips < seen
    if "scale_jitter" in opts and "min_box_area_fraction" in opts:
        assert dropped > 0          # the crop cuts boxes (a letterbox never does)


@pytest.mark.parametrize("opts", [dict(multiscale=((32, 48), 64), pad_to=True),
                                  dict(scale_jitter=40), dict(letterbox=(36, 44))])
def test_same_batches_at_1_and_4_threads_and_after_resume(det, opts):
    def run(threads, state=None):
        loader = shardread.Loader(det, batch_size=4, targets=True, return_params=True,
                                  shuffle=True, seed=3, flip=True, threads=threads, **opts)
        if state is not None:
            loader.load_state_dict(state)
        out = []
        for images, targets, indices, params in loader:
            out.append((np.array(images), [t["boxes"].copy() for t in targets],
                        indices.copy(), params.copy()))
        return out
    one, four = run(1), run(4)
    assert len(one) == len(four)
    for a, b in zip(one, four):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[2], b[2])
        assert np.array_equal(a[3], b[3])
        assert all(np.array_equal(p, q) for p, q in zip(a[1], b[1]))
    # resume after two batches: the rest is the same
    loader = shardread.Loader(det, batch_size=4, targets=True, shuffle=True, seed=3, flip=True,
                              threads=2, **opts)
    it = iter(loader)
    next(it)
    next(it)
    rest = run(3, loader.state_dict())
    assert len(rest) == len(one) - 2
    for a, b in zip(one[2:], rest):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[3], b[3])


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_ranks_disjoint_with_their_targets(det, world):
    ds = shardread.Dataset(det)
    n = len(ds)
    per_rank = []
    for rank in range(world):
        loader = shardread.Loader(det, batch_size=3, targets=True, return_params=True,
                                  shuffle=True, seed=8, rank=rank, world=world,
                                  multiscale=((32, 48), 64))
        got = []
        for images, targets, indices, params in loader:
            for k, i in enumerate(indices):
                stored = ds[int(i)][1]
                assert targets[k]["image_id"] == stored["image_id"]
                want_b, _, _ = detect_ref.scale_boxes(stored["boxes"], stored["area"],
                                                      params[k], 64, True)
                assert np.allclose(targets[k]["boxes"], want_b, atol=1e-4)
                got.append(int(i))
        per_rank.append(got)
    assert len({len(g) for g in per_rank}) == 1           # every rank the same count
    allidx = [i for g in per_rank for i in g]
    assert set(allidx) == set(range(n))                   # the union is the dataset
    pad = world * -(-n // world) - n                      # uneven='pad' repeats this many
    assert len(allidx) == n + pad
    if pad == 0:
        for a in range(world):
            for b in range(a + 1, world):
                assert not set(per_rank[a]) & set(per_rank[b])


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_torch_list_and_normalised_canvas(det):
    loader = shardread.Loader(det, batch_size=4, targets=True, framework="torch",
                              multiscale=((32, 48), 64), layout="NCHW", mean=100, std=50)
    images, targets = next(iter(loader))
    assert isinstance(images, list) and isinstance(images[0], torch.Tensor)
    for im, t in zip(images, targets):
        assert tuple(im.shape) == (3,) + t["size"] and im.dtype == torch.float32
    padded = shardread.Loader(det, batch_size=4, targets=True, multiscale=((32, 48), 64),
                              layout="NCHW", mean=100, std=50, pad_to=True)
    images, targets = next(iter(padded))
    assert images.shape == (4, 3, 64, 64)
    for k, t in enumerate(targets):
        h, w = t["size"]
        # the batch padding is zero after normalisation (GeneralizedRCNNTransform's batch_images)
        assert (images[k, :, h:, :] == 0).all() and (images[k, :, :, w:] == 0).all()
        assert (images[k, :, :h, :w] != 0).any()


def test_scale_arguments(det):
    bad = [
        (TypeError, dict(multiscale=48)),
        (TypeError, dict(multiscale=(("a",), 64))),
        (ValueError, dict(multiscale=((0,), 64))),
        (ValueError, dict(multiscale=(tuple(range(32, 32 + 17)), 64))),
        (TypeError, dict(multiscale=((32,), 64.5))),
        (ValueError, dict(multiscale=((32,), 64), size=32)),
        (ValueError, dict(multiscale=((32,), 64), rrc=True)),
        (ValueError, dict(multiscale=((32,), 64), letterbox=32)),
        (ValueError, dict(scale_jitter=(48, (0.0, 1.0)))),
        (ValueError, dict(scale_jitter=(48, (2.0, 1.0)))),
        (TypeError, dict(scale_jitter="48")),
        (ValueError, dict(scale_jitter=48, pad_to=True)),
        (ValueError, dict(letterbox=(0, 32))),
        (TypeError, dict(letterbox=1.5)),
        (ValueError, dict(letterbox=32, random_crop=True)),
        (ValueError, dict(pad_to=True)),
        (TypeError, dict(multiscale=((32,), 64), pad_to="big")),
    ]
    for exc, kw in bad:
        with pytest.raises(exc):
            shardread.Loader(det, batch_size=2, targets=True, **kw)
    with pytest.raises(ValueError, match="needs targets=True"):
        shardread.Loader(det, batch_size=2, multiscale=((32,), 64))
    # a canvas some sample's largest size does not fit: refused at open, naming it
    with pytest.raises(shardread.ArgumentError, match="canvas"):
        shardread.Loader(det, batch_size=2, targets=True, multiscale=((64,), 128), pad_to=40)


def test_copy_reopens_the_same_geometry(det):
    import copy
    loader = shardread.Loader(det, batch_size=4, targets=True, return_params=True, seed=2,
                              flip=True, multiscale=((32, 48), 64))
    twin = copy.deepcopy(loader)
    a, b = next(iter(loader)), next(iter(twin))
    assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0]))
    assert np.array_equal(a[3], b[3])
