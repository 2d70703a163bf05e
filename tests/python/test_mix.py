"""MixUp and CutMix from the Loader (mixup=alpha, cutmix=alpha): every delivered value and soft
label recomputed with NumPy (and with torchvision's reference-recipe code in torch) from the same
batch read without mixing and the batch record the reader reports (reader/shardread.h "MixUp and
CutMix"); the same batches at 1 and 4 threads and after load_state_dict; Beta draws with the
right mean; refused arguments. Also RandomErasing's value='random' and the short keyword
forms (erase=, erase_value=, fill=, auto_augment='ta_wide' / 'rand_augment')."""
import subprocess

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, SHARDC

try:
    import torch
except ImportError:  # pragma: no cover - scripts/deps.sh installs python3-torch
    torch = None

BASE = dict(batch_size=5, shuffle=True, seed=9, size=(20, 24), flip=True,
            mean=[120.0, 110.0, 100.0], std=[60.0, 61.0, 62.0])


def batches(path, **kw):
    return [tuple(np.asarray(x).copy() if not isinstance(x, dict) else x for x in b)
            for b in shardread.Loader(path, **kw)]


def reference(x, labels, mix, classes):
    """The documented arithmetic in NumPy, at the images' dtype: sample i mixes with i - 1."""
    dt = x.dtype.type
    lam = mix["lam"]
    rolled = np.roll(x, 1, axis=0)
    if mix["op"] == "mixup":
        # float16: each product in float32 with the number as a float32, rounded to half
        # (torch >= 2), then the sum of the two halves rounded to half
        f = np.float32
        out = ((x.astype(f) * f(mix["lam_drawn"])).astype(dt) +
               (rolled.astype(f) * f(1.0 - mix["lam_drawn"])).astype(dt))
    else:
        out = x.copy()
        x1, y1, x2, y2 = mix["box"]
        if x.shape[-1] == 3:            # NHWC
            out[:, y1:y2, x1:x2, :] = rolled[:, y1:y2, x1:x2, :]
        else:
            out[:, :, y1:y2, x1:x2] = rolled[:, :, y1:y2, x1:x2]
    onehot = np.eye(classes, dtype=np.float32)[labels]
    soft = onehot * np.float32(lam) + np.roll(onehot, 1, axis=0) * np.float32(1.0 - lam)
    return out.astype(dt), soft


@pytest.mark.parametrize("dtype,layout", [("float32", "NHWC"), ("float32", "NCHW"),
                                          ("float16", "NCHW")])
def test_mixed_values_follow_the_reported_record(fx, dtype, layout):
    kw = dict(BASE, dtype=dtype, layout=layout, return_params=True)
    plain = batches(fx.fixed, **kw)
    ops = set()
    for mixkw in (dict(mixup=0.2), dict(cutmix=1.0), dict(mixup=0.2, cutmix=1.0)):
        mixed = batches(fx.fixed, **kw, **mixkw)
        assert len(mixed) == len(plain)
        for (x, labels, idx, _), (got, soft, idx2, _, mix) in zip(plain, mixed):
            assert np.array_equal(idx, idx2)
            assert np.array_equal(mix["labels"], labels)
            assert soft.dtype == np.float32 and soft.shape == (len(labels), 3)
            ops.add(mix["op"])
            if mix["op"] == "cutmix":
                x1, y1, x2, y2 = mix["box"]
                assert mix["lam"] == 1.0 - (x2 - x1) * (y2 - y1) / (24 * 20)
            else:
                assert mix["lam"] == mix["lam_drawn"] and mix["box"] == (0, 0, 0, 0)
            want, want_soft = reference(x, labels, mix, 3)
            assert got.dtype == want.dtype
            assert np.array_equal(got, want), (mixkw, mix)
            assert np.array_equal(soft, want_soft), (mixkw, mix)
    assert ops == {"mixup", "cutmix"}


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_mixed_values_equal_torchvision_reference_code(fx, dtype):
    """torchvision's references/classification/transforms.py RandomMixup and RandomCutmix
    (p=1), their tensor code fed the reported lambda and box: the same bytes. float16 follows
    torch >= 2, which runs a half tensor times a Python number in float32 and rounds once per
    op; torch 1.x rounded the number to half first, so under it that arithmetic is spelled out
    with float32 tensors (the recipe's own code runs for float32 either way)."""
    torch1_half = dtype == "float16" and int(torch.__version__.split(".")[0]) < 2

    def scale(t, factor):
        """t.mul_(factor), as torch >= 2 computes it"""
        if torch1_half:
            t.copy_((t.float() * factor).half())
            return t
        return t.mul_(factor)
    kw = dict(BASE, dtype=dtype, layout="NCHW", return_params=True, framework="torch")
    plain = shardread.Loader(fx.fixed, **kw)
    mixed = shardread.Loader(fx.fixed, mixup=0.2, cutmix=1.0, **kw)
    for (x, labels, _, _), (got, soft, _, _, mix) in zip(plain, mixed):
        batch = x.clone()
        target = torch.nn.functional.one_hot(labels, num_classes=3).to(dtype=torch.float32)
        batch_rolled = batch.roll(1, 0)
        target_rolled = target.roll(1, 0)
        lam = mix["lam_drawn"]
        if mix["op"] == "mixup":
            scale(batch_rolled, 1.0 - lam)
            scale(batch, lam).add_(batch_rolled)
        else:
            x1, y1, x2, y2 = mix["box"]
            batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2]
            lam = float(1.0 - (x2 - x1) * (y2 - y1) / (24 * 20))
        target_rolled.mul_(1.0 - lam)
        target.mul_(lam).add_(target_rolled)
        assert torch.equal(got, batch), mix
        assert torch.equal(soft, target), mix


def test_mixing_is_deterministic(fx):
    kw = dict(BASE, dtype="float32", mixup=0.2, cutmix=1.0, return_params=True)
    a = batches(fx.fixed, threads=1, **kw)
    b = batches(fx.fixed, threads=4, **kw)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
        assert x[4]["lam"] == y[4]["lam"] and x[4]["box"] == y[4]["box"]
    loader = shardread.Loader(fx.fixed, threads=2, **kw)
    it = iter(loader)
    next(it)
    next(it)
    state = loader.state_dict()
    resumed = shardread.Loader(fx.fixed, threads=3, **kw)
    resumed.load_state_dict(state)
    rest = [tuple(np.asarray(v) if not isinstance(v, dict) else v for v in bt) for bt in resumed]
    assert len(rest) == len(a) - 2
    for x, y in zip(a[2:], rest):
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
        assert x[4]["lam_drawn"] == y[4]["lam_drawn"]


def test_kept_batches_are_copies_with_the_same_values(fx):
    """Batches kept past the ring's spare buffers are delivered as copies: the soft labels
    and the record too."""
    kw = dict(BASE, dtype="float32", mixup=0.2, cutmix=1.0, return_params=True, prefetch=3)
    want = batches(fx.fixed, **kw)
    loader = shardread.Loader(fx.fixed, **kw)
    held = list(loader)
    assert loader.copies > 0
    assert len(held) == len(want)
    for a, b in zip(held, want):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        assert a[4]["lam"] == b[4]["lam"] and np.array_equal(a[4]["labels"], b[4]["labels"])


def test_beta_draws_are_sane(fx):
    loader = shardread.Loader(fx.fixed, batch_size=1, dtype="float32", mixup=1.0,
                              return_params=True, shuffle=True, seed=2)
    lams = []
    for epoch in range(12):
        loader.set_epoch(epoch)
        lams += [mix["lam_drawn"] for _, _, _, _, mix in loader]
    lams = np.array(lams)
    assert len(lams) == 12 * len(shardread.Dataset(fx.fixed))
    assert ((lams > 0) & (lams < 1)).all()
    assert abs(lams.mean() - 0.5) < 0.06          # Beta(1, 1) is U(0, 1): mean 1/2
    assert abs(lams.var() - 1 / 12) < 0.025
    assert len(set(lams.tolist())) == len(lams)


def test_mixing_arguments(fx, tmp_path):
    for bad, exc in ((dict(mixup=-1, dtype="float32"), ValueError),
                     (dict(mixup=0.0, dtype="float32"), ValueError),
                     (dict(cutmix=float("inf"), dtype="float32"), ValueError),
                     (dict(cutmix="1", dtype="float32"), TypeError),
                     (dict(num_classes=3, dtype="float32"), TypeError),
                     (dict(mixup=0.2), shardread.ArgumentError),           # uint8
                     (dict(cutmix=1.0, dtype="uint8"), shardread.ArgumentError)):
        with pytest.raises(exc):
            shardread.Loader(fx.fixed, **bad)
    # labels outside num_classes: the batch holding one fails, naming it
    with pytest.raises(shardread.ArgumentError, match="num_classes 2"):
        for _ in shardread.Loader(fx.fixed, dtype="float32", mixup=1.0, num_classes=2):
            pass
    # more columns than the dataset's classes
    images, soft = next(iter(shardread.Loader(fx.fixed, dtype="float32", cutmix=1.0,
                                              num_classes=7, batch_size=4)))
    assert soft.shape == (4, 7) and np.allclose(soft.sum(axis=1), 1.0)
    # a detection dataset has no classes to mix
    src, ann = str(tmp_path / "shapes"), str(tmp_path / "shapes.json")
    subprocess.run([MKSAMPLE, src, "--coco", ann, "--per-class", "2", "--seed", "3"],
                   check=True, stdout=subprocess.DEVNULL)
    det = str(tmp_path / "det")
    subprocess.run([SHARDC, "build", src, "--coco", ann, "-o", det, "--size", "32x32",
                    "--no-progress"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with pytest.raises(shardread.ArgumentError, match="classification"):
        shardread.Loader(det, dtype="float32", mixup=0.2)


def test_erasing_random_value(fx):
    kw = dict(BASE, dtype="float32", layout="NCHW", return_params=False, return_indices=True)
    plain = {int(i): x for images, _, idx in batches(fx.fixed, **kw) for i, x in zip(idx, images)}
    got = batches(fx.fixed, erasing=dict(p=1.0, value="random"), **kw)
    again = batches(fx.fixed, erasing=dict(p=1.0, value="random"), threads=1, **kw)
    noise = []
    for (images, _, idx), (images2, _, _) in zip(got, again):
        assert np.array_equal(images, images2)
        for i, x in zip(idx, images):
            changed = x != plain[int(i)]
            noise += list(x[changed])
    noise = np.array(noise)
    assert len(noise) > 500
    assert abs(noise.mean()) < 0.1 and abs(noise.std() - 1.0) < 0.1
    # another seed, other noise
    other = batches(fx.fixed, erasing=dict(p=1.0, value="random"), **dict(kw, seed=10))
    assert not np.array_equal(other[0][0], got[0][0])
    with pytest.raises(shardread.ArgumentError, match="erase_random"):
        shardread.Loader(fx.fixed, erasing=dict(p=1.0, value="random"))     # uint8
    with pytest.raises(ValueError):
        shardread.Loader(fx.fixed, dtype="float32", erasing=dict(p=1.0, value="noise"))


def test_short_keyword_forms(fx):
    def same(a, b):
        return len(a) == len(b) and all(np.array_equal(x[0], y[0]) for x, y in zip(a, b))

    kw = dict(batch_size=5, shuffle=True, seed=4)
    assert same(batches(fx.fixed, erase=1.0, erase_value=[7, 8, 9], **kw),
                batches(fx.fixed, erasing=dict(p=1.0, value=[7, 8, 9]), **kw))
    assert same(batches(fx.fixed, rotation=20, fill=[1, 2, 3], **kw),
                batches(fx.fixed, rotation=20, augment_fill=[1, 2, 3], **kw))
    assert same(batches(fx.fixed, auto_augment="ta_wide", **kw),
                batches(fx.fixed, auto_augment="trivialaugment_wide", **kw))
    assert same(batches(fx.fixed, auto_augment="rand_augment", **kw),
                batches(fx.fixed, auto_augment="randaugment", **kw))
    assert same(batches(fx.fixed, erase=1.0, erase_value="random", dtype="float32", **kw),
                batches(fx.fixed, erasing=dict(p=1.0, value="random"), dtype="float32", **kw))
    for bad in (dict(erase=0.5, erasing=0.5), dict(fill=1, augment_fill=1),
                dict(erase_value=3), dict(erase="yes")):
        with pytest.raises(TypeError):
            shardread.Loader(fx.fixed, rotation=5, **bad)
    # the aliases survive a pickle round trip (the copy reopens with the resolved keywords)
    import pickle
    loader = shardread.Loader(fx.fixed, erase=1.0, erase_value=5, dtype="float32", mixup=0.3,
                              **kw)
    copy = pickle.loads(pickle.dumps(loader))
    a, b = next(iter(loader)), next(iter(copy))
    assert np.array_equal(np.asarray(a[0]), np.asarray(b[0]))
    assert np.array_equal(np.asarray(a[1]), np.asarray(b[1]))


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("which,seed", [(w, s) for w in ("fixed", "gray") for s in range(6)])
def test_auto_augment_imagenet_equals_torchvision(fx, which, seed, monkeypatch):
    """AutoAugment(IMAGENET): torchvision 0.14's AutoAugment on the PIL image of the stored
    sample (mirrored first where the flip says so, as RandomHorizontalFlip runs before it), its
    get_params fed the reader's words (reader/shardread.h, SHR_SALT_AUTO_AUGMENT), gives the
    delivered bytes. The 12 runs draw all 25 sub-policies."""
    import torchvision.transforms as T
    from PIL import Image

    def word(index, k):
        # the module's shr_mix: the same words in the installed wheel as in a build folder
        w = shardread._shardread._mix(seed, 0, index, 0x61756700 + k // 2)
        return w >> 32 if k % 2 else w & 0xffffffff

    path = getattr(fx, which)
    ds = shardread.Dataset(path)
    kw = dict(batch_size=5, shuffle=True, seed=seed, flip=True, return_params=True)
    got, flips = {}, {}
    for images, _, idx, params in shardread.Loader(path, auto_augment="imagenet", **kw):
        for i, x, p in zip(idx, images, params):
            got[int(i)] = np.asarray(x).copy()
            flips[int(i)] = bool(p[4])
    aa = T.AutoAugment(T.AutoAugmentPolicy.IMAGENET)
    for i, image in got.items():
        params = (word(i, 0) % 25,
                  torch.tensor([(word(i, 1) & 0xffffff) * 2.0 ** -24,
                                (word(i, 2) & 0xffffff) * 2.0 ** -24], dtype=torch.float32),
                  torch.tensor([word(i, 3) % 2, word(i, 4) % 2]))
        monkeypatch.setattr(T.AutoAugment, "get_params", staticmethod(lambda n, p=params: p))
        stored = ds[i][0]
        if stored.ndim == 3 and stored.shape[2] == 1:
            stored = stored[:, :, 0]
        img = Image.fromarray(stored)
        if flips[i]:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        want = np.asarray(aa(img))
        assert np.array_equal(image.reshape(want.shape), want), (which, i, params, flips[i])
    # torchvision's object is accepted as the policy's name is
    same = shardread.Loader(path, auto_augment=aa, **kw)
    for images, _, idx, _ in same:
        assert all(np.array_equal(np.asarray(x), got[int(i)]) for i, x in zip(idx, images))
    with pytest.raises(ValueError):
        shardread.Loader(path, auto_augment=T.AutoAugment(T.AutoAugmentPolicy.CIFAR10))
