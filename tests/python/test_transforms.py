"""The Loader's read-time transforms: RandomResizedCrop against torchvision, dtype, layout and
normalisation against the uint8 output, the reported parameters, and bad combinations."""
import numpy as np
import pytest

import shardread

torch = pytest.importorskip("torch")
F = pytest.importorskip("torchvision.transforms.functional")
Image = pytest.importorskip("PIL.Image")
from torchvision.transforms import InterpolationMode  # noqa: E402


def batches(loader):
    return [tuple(np.array(a) for a in b) for b in loader]


@pytest.mark.parametrize("which,size,interp", [("var", (20, 24), "bilinear"),
                                                ("var", (33, 17), "bicubic"),
                                                ("gray", (16, 16), "lanczos")])
def test_rrc_equals_torchvision_resized_crop(fx, which, size, interp):
    ds = shardread.Dataset(getattr(fx, which))
    loader = shardread.Loader(getattr(fx, which), batch_size=5, shuffle=True, seed=4, size=size,
                              rrc=(0.08, 1.0), ratio=(3 / 4, 4 / 3), flip=True,
                              interpolation=interp, return_params=True)
    flips = n = 0
    for _ in range(2):
        for images, labels, indices, params in loader:
            assert images.dtype == np.uint8 and images.shape[1:3] == size
            for k, i in enumerate(indices):
                stored, label = ds[int(i)]
                assert labels[k] == label
                x, y, w, h, flip = (int(v) for v in params[k])
                img = Image.fromarray(stored.squeeze(-1) if stored.shape[2] == 1 else stored)
                want = F.resized_crop(img, y, x, h, w, list(size), InterpolationMode(interp))
                if flip:
                    want = F.hflip(want)
                want = np.asarray(want).reshape(images[k].shape)
                assert np.array_equal(images[k], want), f"sample {int(i)} box {params[k]}"
                flips += flip
                n += 1
    assert 0 < flips < n


def test_float_outputs_are_the_normalised_uint8_output(fx):
    common = dict(batch_size=6, shuffle=True, seed=2, size=(20, 24), rrc=True, flip=0.3,
                  return_params=True)
    u8 = batches(shardread.Loader(fx.var, **common))
    mean, std = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
    ds_info = shardread.Dataset(fx.var).info
    for dtype, layout, m in (("float32", "NCHW", "given"), ("float16", "NCHW", "dataset"),
                             ("float32", "NHWC", "dataset"), (np.float16, "nhwc", "given"),
                             (torch.float32, "NCHW", None)):
        kw = dict(dtype=dtype, layout=layout)
        if m == "given":
            kw.update(mean=mean, std=std)
        elif m == "dataset":
            kw.update(mean="dataset")
        got = batches(shardread.Loader(fx.var, **common, **kw))
        mu = np.float32(mean if m == "given" else ds_info["mean"] if m else [0, 0, 0])
        sd = np.float32(std if m == "given" else ds_info["std"] if m else [1, 1, 1])
        assert len(got) == len(u8)
        for (a, la, ia, pa), (b, lb, ib, pb) in zip(u8, got):
            assert np.array_equal(la, lb) and np.array_equal(ia, ib) and np.array_equal(pa, pb)
            want = (a.astype(np.float32) - mu) / sd
            if dtype in ("float16", np.float16):
                want = want.astype(np.float16)
            if layout.upper() == "NCHW":
                want = want.transpose(0, 3, 1, 2)
            assert b.dtype == want.dtype and b.shape == want.shape
            assert np.array_equal(b.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def test_torch_tensors_of_the_dtype(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, framework="torch", dtype="float16",
                              layout="NCHW", mean="dataset", return_params=True)
    images, labels, indices, params = next(iter(loader))
    assert images.dtype == torch.float16 and tuple(images.shape) == (4, 3, 20, 24)
    assert params.dtype == torch.int64 and tuple(params.shape) == (4, 5)
    assert loader.info["dtype"] == "float16" and loader.info["layout"] == "NCHW"
    assert loader.info["batch_bytes"] == 4 * 3 * 20 * 24 * 2


def test_rrc_resumes_exactly(fx):
    kw = dict(batch_size=4, shuffle=True, seed=8, size=16, rrc=(0.2, 0.9), flip=True,
              dtype="float32", layout="NCHW", mean="dataset", return_params=True)
    loader = shardread.Loader(fx.var, **kw)
    whole = batches(loader)
    loader = shardread.Loader(fx.var, **kw)
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    resumed = shardread.Loader(fx.var, **kw)
    resumed.load_state_dict(state)
    rest = batches(resumed)
    assert len(rest) == len(whole) - 2
    for a, b in zip(whole[2:], rest):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
    # another epoch draws other boxes
    other = batches(resumed)
    assert not all(np.array_equal(a[3], b[3]) for a, b in zip(whole, other))


def test_bad_transform_arguments(fx):
    for kw in (dict(size=16, ratio=(0.5, 2)), dict(size=16, rrc=(0.5,)), dict(size=16, rrc="big"),
               dict(size=16, rrc=(0.9, 0.1)), dict(size=16, rrc=True, ratio=(2, 1)),
               dict(dtype="int7"), dict(layout="HWC"), dict(mean=[1, 2, 3]),
               dict(std=[1, 2, 3]), dict(mean="dataset", std=[1, 2, 3]),
               dict(mean=[1, 2, 3], std=[1, 0, 1]), dict(mean=[1, 2, 3], std=[1, 1, 1],
                                                        dtype="uint8"),
               dict(flip=1.5), dict(rrc=True), dict(size=16, rrc=True, random_crop=True),
               dict(size=16, rrc=True, interpolation="cubic"), dict(mean=[1, 2, 3, 4, 5], std=1)):
        with pytest.raises(ValueError):
            shardread.Loader(fx.fixed, **kw)
