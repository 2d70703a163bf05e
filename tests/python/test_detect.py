"""Detection datasets from Python: Dataset items (image, target) and Loader(targets=True)
batches (images, targets), the targets as torchvision's detection models take them, the boxes
moved by each sample's crop or pad, RandomResizedCrop and flip (the arithmetic of
reader/shardread.h "Targets", recomputed here from the stored boxes and the reported params)."""

import numpy as np
import pytest

import shardread
from conftest import build_detection, crop_boxes

try:
    import torch
except ImportError:  # pragma: no cover - scripts/deps.sh installs python3-torch
    torch = None


@pytest.fixture(scope="module")
def det(tmp_path_factory):
    return build_detection(tmp_path_factory.mktemp("det"), 3)


def expected(stored, p, size, rrc):
    """The stored target moved as the reader moves it: a crop/pad shift (x - p.x + (W - p.w) // 2)
    or RandomResizedCrop's scale ((x - p.x) * W / p.w) into the size x size output, a clip, then
    the flip (x1' = W - x2); boxes left empty are dropped."""
    W = H = size
    _, _, _, _, flip = (int(v) for v in p)
    b = crop_boxes(stored["boxes"], p, W, H, rrc)
    if flip:
        b[:, [0, 2]] = W - b[:, [2, 0]]
    b = b.astype(np.float32)
    keep = (b[:, 0] < b[:, 2]) & (b[:, 1] < b[:, 3])
    return b[keep], np.asarray(stored["labels"])[keep]


def test_dataset_items_are_image_and_target(det):
    ds = shardread.Dataset(det)
    assert len(ds) > 0
    boxes_seen = 0
    for i in range(len(ds)):
        image, target = ds[i]
        assert image.dtype == np.uint8 and image.ndim == 3
        b = target["boxes"]
        assert b.dtype == np.float32 and b.shape == (len(target["labels"]), 4)
        assert target["labels"].dtype == np.int64 and target["iscrowd"].dtype == np.int64
        assert target["area"].dtype == np.float32
        h, w = image.shape[:2]
        assert ((b[:, 0] >= 0) & (b[:, 2] <= w) & (b[:, 1] >= 0) & (b[:, 3] <= h)).all()
        assert (b[:, 0] < b[:, 2]).all() and (b[:, 1] < b[:, 3]).all()
        boxes_seen += len(b)
    assert boxes_seen > 0


@pytest.mark.parametrize("opts", [dict(size=48, pad=True), dict(size=24, random_crop=True),
                                  dict(size=32, rrc=True), dict(size=24, flip=True, pad=True),
                                  dict(size=40, rrc=(0.3, 1.0), flip=0.5)])
def test_loader_targets_follow_the_geometry(det, opts):
    ds = shardread.Dataset(det)
    loader = shardread.Loader(det, batch_size=5, targets=True, return_params=True, shuffle=True,
                              seed=6, **opts)
    size = opts["size"]
    n = 0
    for images, targets, indices, params in loader:
        assert len(targets) == len(indices) == images.shape[0]
        for k, i in enumerate(indices):
            stored = ds[int(i)][1]
            want_b, want_l = expected(stored, params[k], size, bool(opts.get("rrc")))
            got = targets[k]
            assert got["image_id"] == stored["image_id"]
            assert np.allclose(got["boxes"], want_b, atol=1e-4), (opts, int(i), got["boxes"],
                                                                   want_b)
            assert np.array_equal(got["labels"], want_l)
            assert got["dropped"] == len(stored["labels"]) - len(want_l)
            n += 1
    assert n == len(ds)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_torch_targets(det):
    loader = shardread.Loader(det, batch_size=4, targets=True, size=32, pad=True,
                              framework="torch")
    images, targets = next(iter(loader))
    assert isinstance(images, torch.Tensor) and isinstance(targets[0]["boxes"], torch.Tensor)
    assert targets[0]["boxes"].dtype == torch.float32
    assert targets[0]["labels"].dtype == torch.int64


def test_targets_need_a_detection_dataset(det, fx):
    with pytest.raises(shardread.ArgumentError, match="no targets"):
        shardread.Loader(fx.fixed, targets=True)
    # the warps move the boxes (test_detect_warp.py): a detection dataset opens with them
    images, targets = next(iter(shardread.Loader(det, targets=True, size=32, rrc=True,
                                                 rotation=10, batch_size=4)))
    assert len(targets) == 4
