"""What a PyTorch user brings along: DataLoader wrapping, spawn and pickling, ImageFolder's
attributes, torchvision's argument forms, and every mistake caught with a message naming the
keyword."""
import copy
import inspect
import multiprocessing
import os
import pickle
import subprocess

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, SHARDC

try:
    import torch
    import torch.utils.data
except ImportError:  # pragma: no cover - scripts/deps.sh installs python3-torch
    torch = None
try:
    import torchvision
    from torchvision.transforms import InterpolationMode
except ImportError:  # pragma: no cover - scripts/deps.sh installs python3-torchvision
    torchvision = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_torchvision = pytest.mark.skipif(torchvision is None, reason="torchvision is not installed")


def indices_of(loader):
    return [list(map(int, b[2])) for b in loader]


def batches(loader):
    return [tuple(np.asarray(x).copy() for x in b) for b in loader]


def same(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Class folders and the dataset shardc builds from them (the ImageFolder layout)."""
    root = tmp_path_factory.mktemp("folder")
    src, out = str(root / "src"), str(root / "ds")
    subprocess.run([MKSAMPLE, src, "--classes", "3", "--per-class", "5", "--no-broken",
                    "--quiet", "--seed", "9"], check=True)
    subprocess.run([SHARDC, "build", src, "-o", out, "--size", "20", "--no-progress", "-j", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    return src, out


# ---- torchvision's forms ----

def test_shardc_size_takes_one_number_as_a_square(folder):
    ds = shardread.Dataset(folder[1])
    assert ds.info["size"] == (20, 20)
    assert all(ds[i][0].shape == (20, 20, 3) for i in range(len(ds)))


def test_size_as_int_list_or_tuple(fx):
    want = batches(shardread.Loader(fx.fixed, batch_size=5, size=(16, 16), return_indices=True))
    for size in (16, [16, 16], [16], np.int64(16), (np.int32(16), 16)):
        got = batches(shardread.Loader(fx.fixed, batch_size=5, size=size, return_indices=True))
        assert same(got, want), size
    for bad, exc in (("16", TypeError), ((16, 16, 3), ValueError), (True, TypeError),
                     ((16.5, 16), TypeError)):
        with pytest.raises(exc, match="size"):
            shardread.Loader(fx.fixed, size=bad)


@needs_torchvision
def test_interpolation_mode_values(fx):
    common = dict(batch_size=4, size=12, rrc=True, seed=3, return_indices=True)
    want = batches(shardread.Loader(fx.fixed, interpolation="bicubic", **common))
    got = batches(shardread.Loader(fx.fixed, interpolation=InterpolationMode.BICUBIC, **common))
    assert same(got, want)
    other = batches(shardread.Loader(fx.fixed, interpolation=InterpolationMode.NEAREST, **common))
    assert not same(other, want)


def test_size_past_the_stored_image_needs_pad(fx):
    with pytest.raises(ValueError, match=r"size=\(30, 30\).*pad=True"):
        shardread.Loader(fx.fixed, size=(30, 30))
    images = next(iter(shardread.Loader(fx.fixed, batch_size=2, size=(30, 30), pad=True)))[0]
    assert images.shape[1:] == (30, 30, 3)
    # rrc resizes: any size is fine
    shardread.Loader(fx.fixed, size=(30, 30), rrc=True)


def test_shape_error_names_size(fx):
    with pytest.raises(shardread.ShapeError, match="size="):
        shardread.Loader(fx.var, batch_size=2)


# ---- normalisation mistakes ----

def test_mean_std_on_the_wrong_scale_or_of_the_wrong_length(fx):
    with pytest.raises(ValueError, match="multiply both by 255"):
        shardread.Loader(fx.fixed, mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    for mean, std in (([120.0, 110.0], [60.0, 60.0, 60.0]),
                      ([120.0, 110.0, 100.0, 90.0], [60.0] * 4)):
        with pytest.raises(ValueError, match="mean has .* values; the samples have 3"):
            shardread.Loader(fx.fixed, mean=mean, std=std)
    with pytest.raises(ValueError, match="gray|1 channel|give 1 or 1"):
        shardread.Loader(fx.gray, mean=[120.0, 110.0, 100.0], std=[60.0] * 3)
    # one number, or one per channel, is fine
    shardread.Loader(fx.fixed, mean=120.0, std=60.0)
    shardread.Loader(fx.gray, mean=[120.0], std=[60.0])


def test_std_that_cannot_be_represented(fx):
    with pytest.raises(ValueError, match="std too small"):
        shardread.Loader(fx.fixed, mean=[100.0] * 3, std=[1e-45] * 3)
    with pytest.raises(ValueError, match="std too small"):
        shardread.Loader(fx.fixed, mean=[100.0] * 3, std=[2e-3] * 3, dtype="float16")
    shardread.Loader(fx.fixed, mean=[100.0] * 3, std=[2e-3] * 3, dtype="float32")
    with pytest.raises(ValueError, match="std must be positive"):
        shardread.Loader(fx.fixed, mean=[100.0] * 3, std=[float("inf"), 2.0, 2.0])


def test_yes_no_keywords_are_strict(fx):
    for kw in ("flip", "shuffle", "drop_last", "return_indices", "pin_memory", "pad"):
        with pytest.raises(TypeError, match=kw):
            shardread.Loader(fx.fixed, **{kw: "x"})
    shardread.Loader(fx.fixed, flip=np.bool_(True), shuffle=1)


# ---- ImageFolder's attributes ----

@needs_torchvision
def test_imagefolder_attributes(folder):
    src, out = folder
    ref = torchvision.datasets.ImageFolder(src)
    ds = shardread.Dataset(out)
    assert ds.classes == ref.classes
    assert ds.class_to_idx == ref.class_to_idx
    assert ds.targets == ref.targets
    loader = shardread.Loader(out, batch_size=4)
    assert loader.classes == ref.classes and loader.class_to_idx == ref.class_to_idx


# ---- len, resumption ----

def test_len_is_what_the_iteration_yields(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=2)
    full = len(loader)
    assert full == 6
    it = iter(loader)
    next(it)
    next(it)
    assert len(loader) == full  # during an iteration: that iteration's total
    state = loader.state_dict()
    resumed = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=2)
    resumed.load_state_dict(state)
    assert len(resumed) == full - 2
    assert sum(1 for _ in resumed) == full - 2
    assert len(resumed) == full  # the next epoch is whole


def test_state_from_another_dataset_is_refused(fx, folder):
    other = shardread.Loader(folder[1], batch_size=4)
    mine = shardread.Loader(fx.fixed, batch_size=4)
    state = other.state_dict()
    state["samples"] = mine.state_dict()["samples"]  # same count: only the fingerprint differs
    with pytest.raises(ValueError, match="another dataset"):
        mine.load_state_dict(state)
    mine.load_state_dict(state, strict=False)


def test_hand_edited_states_are_refused(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4)
    state = loader.state_dict()
    for bad, match in ((dict(cursor=1, consumed=20), "inconsistent"),
                       (dict(world=0), "world"),
                       (dict(rank=1), "rank 1 is not below"),
                       (dict(epoch=2**64 - 1), "last epoch")):
        with pytest.raises(ValueError, match=match):
            loader.load_state_dict(dict(state, **bad))
    with pytest.raises(ValueError, match="2\\*\\*63"):
        loader.set_epoch(2**63)


# ---- DataLoader ----

@needs_torch
def test_dataloader_batching_the_batches_is_refused(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4)
    with pytest.raises(TypeError, match="batch_size=None"):
        next(iter(torch.utils.data.DataLoader(loader)))
    got = next(iter(torch.utils.data.DataLoader(loader, batch_size=None)))
    assert tuple(got[0].shape) == (4, 20, 24, 3)


# ---- pickling and spawn ----

def test_pickle_and_deepcopy_resume_where_the_original_stands(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=7,
                              return_indices=True, size=16)
    it = iter(loader)
    next(it)
    clones = [pickle.loads(pickle.dumps(loader)), copy.deepcopy(loader)]
    rest = [list(map(int, b[2])) for b in it]
    assert len(rest) == len(loader) - 1
    for clone in clones:
        assert type(clone) is type(loader)
        assert indices_of(clone) == rest
    again = pickle.loads(pickle.dumps(shardread.Loader(fx.fixed, batch_size=4, shuffle=True,
                                                       seed=7, return_indices=True, size=16)))
    ref = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=7, return_indices=True,
                           size=16)
    assert indices_of(again) == indices_of(ref)
    ds = pickle.loads(pickle.dumps(shardread.Dataset(fx.fixed)))
    assert np.array_equal(ds[3][0], shardread.Dataset(fx.fixed)[3][0])


def _first_indices(loader, queue):
    queue.put([int(i) for i in next(iter(loader))[2]])


def test_a_loader_crosses_a_spawned_process(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=11, return_indices=True)
    want = [int(i) for i in next(iter(shardread.Loader(
        fx.fixed, batch_size=4, shuffle=True, seed=11, return_indices=True)))[2]]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    env = os.environ.get("PYTHONPATH")
    p = ctx.Process(target=_first_indices, args=(loader, queue))
    p.start()
    got = queue.get(timeout=120)
    p.join(120)
    assert p.exitcode == 0 and got == want, env


# ---- what IDEs show ----

def test_signatures():
    params = inspect.signature(shardread.Loader).parameters
    for name in ("path", "batch_size", "shuffle", "size", "rrc", "mean", "std", "pad"):
        assert name in params, name
    assert params["batch_size"].default == 256
    assert list(inspect.signature(shardread.Dataset).parameters) == [
        "path", "access", "verify_samples", "cache", "fields", "label_dtype", "cache_limit"]
    assert params["label_dtype"].default is None
    assert params["cache"].default is None     # datasets at URLs: where they are downloaded
    assert params["cache_limit"].default is None and params["prefetch_shards"].default is None


def test_help_is_wrapped():
    for obj in (shardread.Loader, shardread.Dataset, shardread.Loader.set_epoch,
                shardread.Loader.load_state_dict, shardread.Loader.info):
        assert max(len(line) for line in obj.__doc__.splitlines()) <= 100, obj


# ---- threads ----

def test_two_threads_calling_iter_on_one_loader(fx):
    """iter() replaces the reader with the GIL released: a second thread's iter() or next()
    meanwhile is a RuntimeError, never a use of a freed reader."""
    import threading
    loader = shardread.Loader(fx.fixed, batch_size=2, shuffle=True, threads=2)
    errors, done = [], []

    def hammer():
        for k in range(40):
            try:
                loader.set_epoch(k % 3)
                it = iter(loader)
                next(it)
                next(it)
                done.append(k)
            except RuntimeError as e:
                assert "another thread" in str(e) or "finished" in str(e), e
            except BaseException as e:  # reported by the main thread
                errors.append(e)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert done  # some iterations went through
    # the Loader is still whole afterwards: the abandoned epoch's rest (where state_dict
    # stands), then a whole epoch
    st = loader.state_dict()
    it = iter(loader)
    rest = len(loader)
    assert rest == 12 - st["cursor"] and sum(1 for _ in it) == rest
    assert sum(1 for _ in loader) == len(loader) == 12


def test_dataset_verify_samples(fx):
    """ds[i] of a damaged sample: silent without verify_samples, a CorruptError naming the shard
    and the sample with it."""
    path = fx.copy("fixed", "verify-ds")
    clean = shardread.Dataset(path)
    want = [clean[i][0].copy() for i in range(len(clean))]
    shard = os.path.join(path, "shard-00000.raw")
    with open(shard, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 0x5A]))
    plain = shardread.Dataset(path, access="pread")
    changed = [i for i in range(len(plain)) if not np.array_equal(plain[i][0], want[i])]
    assert len(changed) == 1  # the flip landed in one sample's pixels, read back silently
    checked = shardread.Dataset(path, access="pread", verify_samples=True)
    for i in range(len(checked)):
        if i in changed:
            with pytest.raises(shardread.CorruptError, match=f"shard-00000.raw: sample {i}"):
                checked[i]
        else:
            assert np.array_equal(checked[i][0], want[i])
    assert pickle.loads(pickle.dumps(checked))._args[2] is True
    with pytest.raises(TypeError, match="verify_samples"):
        shardread.Dataset(path, verify_samples="yes")
