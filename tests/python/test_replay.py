"""Loader(return_params="ops") names every op each sample went through in torchvision's terms,
and shardread.replay (torchvision on the PIL image of Dataset[i]) gives the delivered bytes
back: whole recipes, every automatic augmentation policy, the crop/pad geometry, gray data."""
import numpy as np
import pytest

import shardread

try:
    import torchvision  # noqa: F401
except ImportError:  # pragma: no cover - scripts/deps.sh installs python3-torchvision
    torchvision = None

needs_torchvision = pytest.mark.skipif(torchvision is None, reason="torchvision is not installed")


def replayed(path, epochs=1, **kw):
    """Over epochs of the Loader: (the op names seen, the number of samples checked); asserts
    that every delivered sample equals the replay of its ops on the stored image."""
    ds = shardread.Dataset(path)
    loader = shardread.Loader(path, batch_size=4, return_params="ops", seed=7, **kw)
    names, n = set(), 0
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels, indices, ops in loader:
            assert len(ops) == len(indices)
            for k, i in enumerate(indices):
                want = shardread.replay(ds[int(i)][0], ops[k])
                got = np.asarray(images[k])
                assert got.shape == want.shape, (int(i), ops[k])
                assert np.array_equal(got, want), (int(i), ops[k])
                names.update(name if name != "auto_augment_op" else kw_["op_name"]
                             for name, kw_ in ops[k])
                n += 1
    return names, n


@needs_torchvision
def test_whole_recipe_replays(fx):
    names, n = replayed(fx.var, epochs=3, size=24, rrc=True, flip=True, rotation=25,
                        affine=dict(degrees=10, translate=(0.1, 0.2), scale=(0.8, 1.2),
                                    shear=(-5, 5, -3, 3)),
                        color_jitter=(0.4, 0.4, 0.4, 0.1), grayscale=0.3,
                        erasing=dict(p=0.5, value=[7, 8, 9]), augment_fill=[10, 20, 30])
    assert n == 3 * len(shardread.Dataset(fx.var))
    for op in ("resized_crop", "hflip", "rotate", "affine", "adjust_brightness",
               "adjust_contrast", "adjust_saturation", "adjust_hue", "rgb_to_grayscale",
               "erase"):
        assert op in names, op


@needs_torchvision
@pytest.mark.parametrize("policy", ["ta_wide", "rand_augment", "imagenet"])
def test_auto_augment_policies_replay(fx, policy):
    names, n = replayed(fx.var, epochs=4, size=20, rrc=True, flip=True, auto_augment=policy,
                        augment_interpolation="bilinear")
    assert n > 0
    # the draws reach many of the ops (14 in TrivialAugmentWide's space)
    assert len(names - {"resized_crop", "hflip"}) >= 6, names


@needs_torchvision
@pytest.mark.parametrize("random_crop", [False, True])
def test_crop_and_pad_geometry_replays(fx, random_crop):
    # stored sizes vary around the output: some samples are cropped, some padded, some both
    names, n = replayed(fx.var, size=(30, 22), pad=True, random_crop=random_crop, flip=True,
                        color_jitter=dict(hue=0.2))
    assert "crop" in names and n == len(shardread.Dataset(fx.var))


@needs_torchvision
def test_gray_dataset_replays(fx):
    names, n = replayed(fx.gray, epochs=2, flip=True, color_jitter=(0.5, 0.5, 0.5, 0.2),
                        auto_augment="ta_wide", rotation=15)
    assert n == 2 * len(shardread.Dataset(fx.gray))


def test_ops_without_augmentation_and_argument_errors(fx):
    loader = shardread.Loader(fx.fixed, batch_size=3, return_params="ops")
    _, _, indices, ops = next(iter(loader))
    assert ops == [[] for _ in indices]         # stored at the output size: nothing applied
    with pytest.raises(TypeError, match="return_params"):
        shardread.Loader(fx.fixed, return_params="all")
    with pytest.raises(ValueError, match="HxWxC uint8"):
        shardread.replay(np.zeros((4, 4, 2), np.uint8), [])
    with pytest.raises(ValueError, match="unknown op"):
        shardread.replay(np.zeros((4, 4, 3), np.uint8), [("sharpen", {})])


def test_random_erase_is_reported_and_not_replayed(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, return_params="ops", dtype="float32",
                              erasing=dict(p=1.0, value="random"))
    _, _, _, ops = next(iter(loader))
    erase = [kw for o in ops for name, kw in o if name == "erase"]
    assert erase and all(kw["v"] == "random" for kw in erase)
    with pytest.raises(ValueError, match="random"):
        shardread.replay(shardread.Dataset(fx.fixed)[0][0], [("erase", erase[0])])
