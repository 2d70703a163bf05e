"""shardread, the Python module: Dataset against `shardc cat`, the Loader's batches against the
Dataset, orders, epochs, exact resumption, ranks, zero-copy batches and their lifetime, torch
interop, errors."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import shardread
from conftest import N_SAMPLES, SHARDC

try:
    import torch
    import torch.utils.data
except ImportError:  # the torch tests skip, visibly
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def read_ppm(data):
    """(H, W, C) uint8 of a binary PPM/PGM as `shardc cat` writes it."""
    parts, pos = [], 0
    while len(parts) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        parts.append(data[pos:end])
        pos = end
    pos += 1
    magic, w, h = parts[0], int(parts[1]), int(parts[2])
    c = 3 if magic == b"P6" else 1
    assert magic in (b"P5", b"P6") and int(parts[3]) == 255
    return np.frombuffer(data[pos:pos + w * h * c], np.uint8).reshape(h, w, c)


def epoch(loader):
    """One iteration's batches, copied: [(images, labels, indices)]."""
    out = []
    for b in loader:
        out.append(tuple(np.array(x, copy=True) for x in b))
    return out


def indices_of(batches):
    return [int(i) for b in batches for i in b[2]]


def same(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)) for x, y in zip(a, b))


# ---- Dataset ----

@pytest.mark.parametrize("which", ["fixed", "gray", "var"])
def test_dataset_equals_shardc_cat(fx, which):
    path = getattr(fx, which)
    ds = shardread.Dataset(path)
    assert len(ds) == N_SAMPLES
    info = json.loads(subprocess.run([SHARDC, "info", path, "--json"], check=True,
                                     capture_output=True).stdout)
    assert ds.info["classes"] == info["classes"]
    assert ds.info["samples"] == info["samples"] == N_SAMPLES
    assert ds.info["format"] == "raw"
    assert ds.info["channels"] == (1 if which == "gray" else 3)
    assert ds.info["size"] == (None if which == "var" else (20, 24))
    assert ds.info["geometry"]["mode"] == ("keep" if which == "var" else "size")
    assert ds.info["mean"] == pytest.approx(info["mean"], abs=1e-3)
    assert ds.info["std"] == pytest.approx(info["std"], abs=1e-3)
    sizes = set()
    for i in range(N_SAMPLES):
        image, label = ds[i]
        ref = read_ppm(subprocess.run([SHARDC, "cat", path, str(i)], check=True,
                                      capture_output=True).stdout)
        assert image.dtype == np.uint8 and image.shape == ref.shape
        assert np.array_equal(image, ref), f"sample {i} differs from shardc cat"
        # the label the list file gave the sample's source image
        meta = ds.sample(i)
        assert label == meta["label"] == fx.list_labels[meta["source"]]
        assert meta["shape"] == image.shape
        sizes.add(image.shape)
    if which == "var":
        assert len(sizes) > 5  # samples of many sizes
    image, label = ds[-1]
    assert np.array_equal(image, ds[N_SAMPLES - 1][0])
    assert ds[np.int64(2)][1] == ds[2][1]
    with pytest.raises(IndexError):
        ds[N_SAMPLES]
    with pytest.raises(IndexError):
        ds[-N_SAMPLES - 1]
    with pytest.raises(TypeError):
        ds["0"]


def test_dataset_access_modes_agree(fx):
    ref = shardread.Dataset(fx.var)
    for access in ("pread", "direct"):
        ds = shardread.Dataset(fx.var, access=access)
        for i in range(N_SAMPLES):
            assert np.array_equal(ds[i][0], ref[i][0])
    with pytest.raises(ValueError):
        shardread.Dataset(fx.var, access="mmmap")


# ---- Loader: batches, orders, epochs ----

def test_batches_equal_dataset(fx):
    ds = shardread.Dataset(fx.fixed)
    for shuffle in (False, True):
        loader = shardread.Loader(fx.fixed, batch_size=5, shuffle=shuffle, seed=3, threads=2,
                                  return_indices=True)
        assert len(loader) == 5  # 23 samples: 4 of 5 and one of 3
        batches = epoch(loader)
        assert [len(b[1]) for b in batches] == [5, 5, 5, 5, 3]
        for images, labels, indices in batches:
            assert images.dtype == np.uint8 and images.shape[1:] == (20, 24, 3)
            assert labels.dtype == np.int64 and indices.dtype == np.int64
            for k, i in enumerate(indices):
                image, label = ds[int(i)]
                assert np.array_equal(images[k], image)
                assert labels[k] == label
        idx = indices_of(batches)
        assert sorted(idx) == list(range(N_SAMPLES))  # every sample once
        if shuffle:
            assert idx != list(range(N_SAMPLES))
        else:
            assert idx == list(range(N_SAMPLES))


def test_gray_and_cropped_batches(fx):
    ds = shardread.Dataset(fx.gray)
    images, labels, indices = next(iter(shardread.Loader(fx.gray, batch_size=4,
                                                         return_indices=True)))
    assert images.shape == (4, 20, 24, 1)
    for k, i in enumerate(indices):
        assert np.array_equal(images[k], ds[int(i)][0])

    # samples of their own sizes, center-cropped or zero-padded to 16 x 30 (height x width)
    ds = shardread.Dataset(fx.var)
    with pytest.raises(shardread.ShapeError):
        shardread.Loader(fx.var, batch_size=4)
    with pytest.raises(ValueError):
        shardread.Loader(fx.var, batch_size=4)
    seen = 0
    with pytest.raises(ValueError, match=r"size=\(16, 30\) is larger.*pad=True"):
        shardread.Loader(fx.var, batch_size=4, size=(16, 30))
    for images, labels, indices in shardread.Loader(fx.var, batch_size=4, size=(16, 30), pad=True,
                                                    return_indices=True):
        assert images.shape[1:] == (16, 30, 3)
        for k, i in enumerate(indices):
            src = ds[int(i)][0]
            want = np.zeros((16, 30, 3), np.uint8)
            h, w = src.shape[:2]
            ch, cw = min(h, 16), min(w, 30)
            sy, sx = (h - ch) // 2, (w - cw) // 2
            dy, dx = (16 - ch) // 2, (30 - cw) // 2
            want[dy:dy + ch, dx:dx + cw] = src[sy:sy + ch, sx:sx + cw]
            assert np.array_equal(images[k], want), f"sample {int(i)}"
            seen += 1
    assert seen == N_SAMPLES


def test_pad_and_flip_in_one_pass(fx):
    """The crop/pad copy that places a sample mirrors it in the same pass and zeroes only the
    padding: every sample equals the stored one cropped/padded as the params say, then mirrored,
    RGB and gray, padded in one dimension and cropped in the other, over epochs that reuse the
    ring's buffers (nothing from an earlier batch may show through)."""
    for path, c in ((fx.var, 3), (fx.var_gray, 1)):
        ds = shardread.Dataset(path)
        for H, W in ((16, 30), (30, 16), (37, 41)):
            loader = shardread.Loader(path, batch_size=4, size=(H, W), pad=True, flip=True,
                                      shuffle=True, seed=7, return_params=True)
            flips = 0
            for epoch in range(3):
                for images, labels, indices, params in loader:
                    for k, i in enumerate(indices):
                        src = ds[int(i)][0]
                        x, y, w, h, flip = (int(v) for v in params[k])
                        want = np.zeros((H, W, c), np.uint8)
                        dy, dx = (H - h) // 2, (W - w) // 2
                        want[dy:dy + h, dx:dx + w] = src[y:y + h, x:x + w]
                        if flip:
                            want = want[:, ::-1]
                            flips += 1
                        assert np.array_equal(images[k], want), (path, (H, W), int(i), flip)
            assert 0 < flips < 3 * N_SAMPLES


def test_flip_mirrors(fx):
    ds = shardread.Dataset(fx.fixed)
    flipped = 0
    for images, _, indices in shardread.Loader(fx.fixed, batch_size=8, flip=True, seed=1,
                                               return_indices=True):
        for k, i in enumerate(indices):
            src = ds[int(i)][0]
            if np.array_equal(images[k], src[:, ::-1]) and not np.array_equal(src, src[:, ::-1]):
                flipped += 1
            else:
                assert np.array_equal(images[k], src)
    assert 0 < flipped < N_SAMPLES


def test_iterating_again_is_the_next_epoch_and_set_epoch_picks_one(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=9, return_indices=True)
    e0, e1, e2 = epoch(loader), epoch(loader), epoch(loader)
    assert indices_of(e0) != indices_of(e1) != indices_of(e2)
    for e in (e0, e1, e2):
        assert sorted(indices_of(e)) == list(range(N_SAMPLES))
    assert loader.epoch == 3
    # set_epoch chooses; the same epoch is the same batches on any Loader with the same seed
    loader.set_epoch(1)
    assert same(epoch(loader), e1)
    other = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=9, threads=1,
                             return_indices=True)
    other.set_epoch(0)
    assert same(epoch(other), e0)
    other.set_epoch(2)
    assert same(epoch(other), e2)
    # another seed, another order
    seed2 = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=10, return_indices=True)
    assert indices_of(epoch(seed2)) != indices_of(e0)
    # an iteration abandoned part way: the next iteration continues that epoch where
    # state_dict says the Loader stands, then the epochs follow
    loader.set_epoch(0)
    it = iter(loader)
    next(it)
    next(it)
    assert (loader.state_dict()["epoch"], loader.state_dict()["cursor"]) == (0, 2)
    rest = epoch(loader)
    assert same(rest, e0[2:])
    with pytest.raises(RuntimeError):
        next(it)  # superseded
    assert same(epoch(loader), e1)
    # one left after its epoch's last batch, StopIteration never seen (zip(range(len(loader)),
    # loader) leaves it so): the next iteration is the next epoch, whole
    loader.set_epoch(0)
    for _ in zip(range(len(loader)), loader):
        pass
    assert (loader.state_dict()["epoch"], loader.state_dict()["cursor"]) == (0, len(e0))
    assert same(epoch(loader), e1)


def test_state_dict_resumes_exactly(fx):
    opts = dict(batch_size=4, shuffle=True, seed=21, return_indices=True)
    ref = shardread.Loader(fx.fixed, **opts)
    ref.set_epoch(4)
    e4, e5 = epoch(ref), epoch(ref)
    nb = len(ref)
    assert nb == 6
    for cursor in (0, 1, 3, nb - 1, nb):
        loader = shardread.Loader(fx.fixed, **opts)
        loader.set_epoch(4)
        it = iter(loader)
        for _ in range(cursor):
            next(it)
        state = loader.state_dict()
        assert state["epoch"] == 4 and state["cursor"] == cursor and state["seed"] == 21
        state = json.loads(json.dumps(state))  # JSON-serialisable
        resumed = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=0, threads=1,
                                   return_indices=True)
        with pytest.raises(ValueError, match="seed=21.*seed=0.*strict=False"):
            resumed.load_state_dict(state)     # another seed is refused unless asked for
        resumed.load_state_dict(state, strict=False)
        assert same(epoch(resumed), e4[cursor:]), f"cursor {cursor}"
        assert same(epoch(resumed), e5)
        # the usual loop: load_state_dict, then set_epoch(state's epoch) keeps the cursor
        again = shardread.Loader(fx.fixed, **opts)
        again.load_state_dict(state)
        again.set_epoch(4)
        assert same(epoch(again), e4[cursor:])
    # a finished epoch's state continues with the next epoch
    done = shardread.Loader(fx.fixed, **opts)
    done.set_epoch(4)
    epoch(done)
    state = done.state_dict()
    assert (state["epoch"], state["cursor"]) == (5, 0)
    fresh = shardread.Loader(fx.fixed, **opts)
    fresh.load_state_dict(state)
    assert same(epoch(fresh), e5)
    # a state of other options would not resume the same batches
    for key, value in (("batch_size", 5), ("samples", 99), ("order", "sequential")):
        bad = dict(state, **{key: value})
        with pytest.raises(ValueError, match=key):
            fresh.load_state_dict(bad)
    # a state without 'consumed' (saved before elastic resumption) needs the same share
    old = {k: v for k, v in state.items() if k != "consumed"}
    fresh.load_state_dict(old)
    assert same(epoch(fresh), e5)
    for key, value in (("world", 2), ("rank", 1)):
        with pytest.raises(ValueError, match=key):
            fresh.load_state_dict(dict(old, **{key: value}))
    with pytest.raises(ValueError, match="consumed"):
        fresh.load_state_dict(dict(state, consumed=N_SAMPLES + 1))
    with pytest.raises(ValueError):
        fresh.load_state_dict(dict(state, cursor=nb + 1))
    with pytest.raises(ValueError):
        fresh.load_state_dict({"epoch": 1})


def take(loader, batches):
    """The indices of the next `batches` batches of a new iteration of loader (all: None)."""
    it = iter(loader)
    if batches is None:
        return [int(i) for batch in it for i in batch[2]]
    return [int(i) for _ in range(batches) for i in next(it)[2]]


@pytest.mark.parametrize("order", ["sequential", "random", "quasi"])
@pytest.mark.parametrize("uneven", ["pad", "drop"])
def test_state_resumes_on_another_world_size(fx, order, uneven):
    """Four ranks read c batches each and save their states; the epoch is finished by three or
    two ranks loading one of them (any rank's: they agree), then by two ranks after three read
    one more batch: every sample of the epoch is read exactly once, but the declared padding
    (uneven='pad': positions past the end wrap to the start) or the dropped tail ('drop')."""
    opts = dict(batch_size=2, order=order, seed=8, uneven=uneven, return_indices=True,
                threads=2, quasi_window=2)

    def loaders(world, state=None):
        out = [shardread.Loader(fx.fixed, rank=r, world=world, **opts) for r in range(world)]
        for r, loader in enumerate(out):
            loader.set_epoch(2)
            if state is not None:
                loader.load_state_dict(json.loads(json.dumps(state[r % len(state)])))
        return out

    for c in (1, 2):
        four = loaders(4)
        first = [take(loader, c) for loader in four]
        states = [loader.state_dict() for loader in four]
        assert len({s["consumed"] for s in states}) == 1
        consumed = states[0]["consumed"]
        assert consumed == min(N_SAMPLES, c * 2 * 4)
        assert sorted(i for p in first for i in p) == sorted(set(i for p in first for i in p))
        for world in (3, 2):
            rest = N_SAMPLES - consumed
            new = loaders(world, states)
            parts = [take(loader, None) for loader in new]
            assert all((lambda s: (s["epoch"], s["cursor"], s["consumed"]))(loader.state_dict())
                       == (3, 0, 0) for loader in new)
            everything = [i for p in first + parts for i in p]
            if uneven == "pad":
                pad = -(-rest // world) * world - rest
                # the 4-rank part (consumed < n here) has no padding
                assert set(everything) == set(range(N_SAMPLES)), (c, world)
                assert len(everything) == N_SAMPLES + pad, (c, world)
            else:
                dropped = rest % world
                assert len(set(everything)) == len(everything), (c, world)
                assert len(everything) == N_SAMPLES - dropped, (c, world)
            # the epoch after is whole on the new world size
            nxt = [take(loader, None) for loader in new]
            per = -(-N_SAMPLES // world) if uneven == "pad" else N_SAMPLES // world
            assert all(len(p) == per for p in nxt)
            assert len({i for p in nxt for i in p}) == min(N_SAMPLES, per * world)
        # 4 -> 3 ranks for one batch, then 3 -> 2: a state saved in a resumed epoch resumes too
        three = loaders(3, states)
        its = [iter(loader) for loader in three]
        middle = [[int(i) for i in next(it)[2]] for it in its]
        states3 = [loader.state_dict() for loader in three]
        def share(rest, world):
            return -(-rest // world) if uneven == "pad" else rest // world
        per3 = share(N_SAMPLES - consumed, 3)
        # one batch of 2 per rank; when that is the resumed epoch's last, all of it is consumed
        after = N_SAMPLES if per3 <= 2 else consumed + 2 * 3
        assert {s["consumed"] for s in states3} == {after}
        two = loaders(2, states3)
        last = [take(loader, None) for loader in two]
        everything = [i for p in first + middle + last for i in p]
        read = consumed + min(2, per3) * 3 + share(N_SAMPLES - after, 2) * 2
        assert len(everything) == read
        if uneven == "pad":
            assert set(everything) == set(range(N_SAMPLES))
        else:
            assert len(set(everything)) == len(everything)
        # on the same world size, such a state resumes what the saving loaders had left
        left = [[int(i) for b in it for i in b[2]] for it in its]
        assert [take(loader, None) for loader in loaders(3, states3)] == left


@pytest.mark.parametrize("uneven", ["pad", "drop"])
def test_ranks_equal_disjoint_shares(fx, uneven):
    world = 3
    shares = []
    for rank in range(world):
        loader = shardread.Loader(fx.fixed, batch_size=3, shuffle=True, seed=4, rank=rank,
                                  world=world, uneven=uneven, return_indices=True)
        assert (loader.rank, loader.world) == (rank, world)
        shares.append(indices_of(epoch(loader)))
    per = -(-N_SAMPLES // world) if uneven == "pad" else N_SAMPLES // world
    assert all(len(s) == per for s in shares)
    everything = [i for s in shares for i in s]
    if uneven == "drop":
        assert len(set(everything)) == len(everything)  # disjoint
    else:
        assert set(everything) == set(range(N_SAMPLES))  # all covered; padding repeats 1
        assert len(everything) - len(set(everything)) == per * world - N_SAMPLES


def test_rank_world_defaults(fx, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    loader = shardread.Loader(fx.fixed, batch_size=2)
    assert (loader.rank, loader.world) == (0, 1)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "5")
    loader = shardread.Loader(fx.fixed, batch_size=2)
    assert (loader.rank, loader.world) == (2, 5)
    assert len(loader) == 3  # 5 samples of 23 for rank 2 of 5
    assert shardread.Loader(fx.fixed, batch_size=2, rank=1).rank == 1
    monkeypatch.setenv("WORLD_SIZE", "many")
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        shardread.Loader(fx.fixed, batch_size=2)
    monkeypatch.setenv("WORLD_SIZE", "5")
    monkeypatch.setenv("RANK", "5")
    with pytest.raises(shardread.ArgumentError, match="rank"):
        shardread.Loader(fx.fixed, batch_size=2)


@needs_torch
def test_rank_world_from_torch_distributed(fx, monkeypatch, tmp_path):
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this torch build")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        loader = shardread.Loader(fx.fixed, batch_size=2)
        assert (loader.rank, loader.world) == (0, 1)  # torch.distributed's, not the environment's
    finally:
        dist.destroy_process_group()
    assert shardread.Loader(fx.fixed, batch_size=2).rank == 3


# ---- batch memory ----

def ring_batch(a):
    """The _Batch whose ring buffer array a views (through the memoryview numpy keeps of the
    extension's _View), or None for an array with memory of its own (a copy)."""
    base = a.base
    return base.obj.batch if isinstance(base, memoryview) else None


def test_batches_are_views_of_the_ring_until_collected(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, threads=1, prefetch=5)
    it = iter(loader)
    images, labels = next(it)
    assert not images.flags.owndata and type(ring_batch(images)).__name__ == "_Batch"
    assert ring_batch(labels) is ring_batch(images)
    assert images.ctypes.data % 4096 == 0  # the ring buffer itself
    assert loader.held == 1
    view = images[1:3]
    del images, labels
    assert loader.held == 1  # a view of the batch still holds its buffer
    del view
    assert loader.held == 0
    assert loader.copies == 0


class FakeEvent:
    """Stands for a CUDA event recorded behind a queued device copy: done only when told (or
    waited for)."""

    made = []

    def __init__(self):
        self.done = False
        self.waited = False
        FakeEvent.made.append(self)

    def query(self):
        return self.done

    def synchronize(self):
        self.waited = True
        self.done = True


@pytest.fixture
def fake_fence():
    """Every collected batch is fenced by a FakeEvent, as a pinned batch is by torch's."""
    FakeEvent.made.clear()
    shardread._shardread._set_fence(FakeEvent, pinned_only=False)
    yield FakeEvent.made
    shardread._shardread._set_fence(shardread._fence)


def test_a_collected_batch_is_not_reused_before_its_copy_completes(fx, fake_fence):
    import ctypes
    loader = shardread.Loader(fx.fixed, batch_size=2, threads=1, prefetch=6,
                              return_indices=True)
    it = iter(loader)
    images, labels, indices = next(it)
    addr, nbytes = images.ctypes.data, images.nbytes
    want = images.copy()
    del images, labels, indices        # as after images.cuda(non_blocking=True): copy queued
    assert loader.held == 0 and loader.fenced == 1 and len(fake_fence) == 1
    # the workers keep filling the other buffers; the fenced one is left alone
    for _ in range(3):
        b = next(it)
        assert loader.copies == 0
        del b
        time.sleep(0.05)  # time for a worker to refill a buffer given back (none may be)
        raw = ctypes.string_at(addr, nbytes)
        assert raw == want.tobytes(), "a fenced buffer was overwritten"
    # the oldest fence is waited for only when the workers would otherwise run short
    assert loader.fenced >= 1 and not fake_fence[0].waited
    fake_fence[0].done = True
    for e in fake_fence:
        e.done = True
    b = next(it)
    assert loader.fenced == 0, "completed copies give their buffers back"
    del b
    # with no event ever done, next() waits (synchronize) rather than starving the workers
    got = sum(1 for _ in it)
    assert got == len(loader) - 5
    assert any(e.waited for e in fake_fence[4:])
    assert loader.copies == 0


def test_fenced_batches_are_waited_for_when_the_reader_closes(fx, fake_fence):
    loader = shardread.Loader(fx.fixed, batch_size=2, threads=1, prefetch=6)
    b = next(iter(loader))
    del b
    assert loader.fenced == 1
    ev = fake_fence[0]
    loader.set_epoch(3)
    next(iter(loader))                  # a new reader: the old one closes
    assert ev.waited, "the old ring's buffers were freed with a copy still queued"


def test_holding_many_batches_neither_blocks_nor_corrupts(fx):
    ds = shardread.Dataset(fx.fixed)
    loader = shardread.Loader(fx.fixed, batch_size=2, shuffle=True, seed=2, threads=2,
                              prefetch=4, return_indices=True)
    kept = []
    failure = []

    def consume():
        try:
            for _ in range(4):  # 4 epochs of 12 batches, all kept: far more than the ring's 4
                for b in loader:
                    kept.append(b)
                    assert loader.held <= 2  # prefetch - 2 zero-copy batches at most
        except BaseException as e:  # reported by the main thread
            failure.append(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(120)  # a liveness guard, not a timing: a deadlock would never finish
    assert not t.is_alive(), "the Loader blocked with old batches held"
    assert not failure, failure
    assert len(kept) == 4 * 12
    assert loader.copies == 4 * 12 - 2
    # every kept batch still holds exactly its samples, the zero-copy ones included
    for images, labels, indices in kept:
        for k, i in enumerate(indices):
            image, label = ds[int(i)]
            assert np.array_equal(images[k], image) and labels[k] == label
    zero_copy = [b for b in kept if ring_batch(b[0]) is not None]
    assert len(zero_copy) == 2
    kept.clear()
    del zero_copy, images, labels, indices
    assert loader.held == 0
    # and the ring runs on, all buffers free again
    assert sorted(indices_of(epoch(loader))) == list(range(N_SAMPLES))
    assert loader.copies == 4 * 12 - 2


def test_batches_outlive_the_loader(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, return_indices=True)
    images, labels, indices = next(iter(loader))
    expect = [shardread.Dataset(fx.fixed)[int(i)][0] for i in indices]
    state = {k: v for k, v in loader.state_dict().items() if k not in ("consumed", "start")}
    loader.load_state_dict(dict(state, cursor=3))  # a new reader
    del loader
    for k in range(4):
        assert np.array_equal(images[k], expect[k])


def test_gil_released_while_waiting(fx):
    # With a switch interval of 100 s the main thread never hands the GIL over on its own; the
    # other thread can only run when the module releases it (or time.sleep in that thread).
    # Each sample is a 512x512 RandomResizedCrop of a small image (a millisecond or more of one
    # worker's time), so the consumer really waits for batches: a wait the other thread can use
    # even on a busy machine, where a release without one may not let it in.
    loader = shardread.Loader(fx.var, batch_size=1, size=(512, 512), rrc=True, threads=1,
                              prefetch=2)
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)

    old = sys.getswitchinterval()
    t = threading.Thread(target=spin, daemon=True)
    sys.setswitchinterval(100)
    try:
        t.start()
        before = count[0]
        for _ in range(3):
            for _ in loader:
                pass
        ran = count[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(old)
        t.join()
    assert ran > 0


def test_one_consumer_thread(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, return_indices=True)
    whole = [tuple(b[2].tolist()) for b in epoch(loader)]   # one epoch's batches, by index
    assert len(whole) == 6
    got = {0: [], 1: []}
    ended = {}
    barrier = threading.Barrier(2)

    def run(k):
        barrier.wait()
        try:
            for b in loader:
                got[k].append(tuple(np.asarray(b[2]).tolist()))
            ended[k] = "done"
        except RuntimeError:
            ended[k] = "refused"

    ts = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # Never interleaved. Either both iterations ran one after the other (two whole epochs), or
    # one thread was refused (busy, or its iterator replaced by the other's): a fresh iterator
    # continues an unfinished epoch where it stands (the peek rule), so between them the two
    # threads received that epoch's batches once each, each thread a run of them in order, and
    # the thread that was not refused ran to the epoch's end.
    runs = [got[0], got[1]]
    assert "done" in ended.values()
    if len(runs[0]) + len(runs[1]) == 2 * len(whole):
        # one after the other; the first may be refused only after its last batch (its
        # StopIteration not yet seen when the other's iterator replaced it)
        assert runs == [whole, whole]
    else:
        assert sorted(ended.values()) == ["done", "refused"]
        assert sorted(runs[0] + runs[1]) == sorted(whole)
        for r in runs:
            if r:
                at = whole.index(r[0])
                assert r == whole[at:at + len(r)]
    for k in (0, 1):
        if ended[k] == "done":
            assert got[k] and got[k][-1] == whole[-1]


# ---- torch ----

@needs_torch
def test_torch_tensors_share_the_batch_memory(fx):
    ds = shardread.Dataset(fx.fixed)
    loader = shardread.Loader(fx.fixed, batch_size=4, framework="torch", return_indices=True,
                              threads=1, prefetch=5)
    images, labels, indices = next(iter(loader))
    assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
    assert images.shape == (4, 20, 24, 3) and images.is_contiguous()
    assert labels.dtype == torch.int64 and indices.dtype == torch.int64
    assert images.data_ptr() % 4096 == 0
    for k in range(4):
        image, label = ds[int(indices[k])]
        assert np.array_equal(images[k].numpy(), image) and int(labels[k]) == label
    # the tensors hold the ring buffer: no copy was made, and it is given back when they go
    assert loader.held == 1 and loader.copies == 0
    arr = images.numpy()
    assert arr.ctypes.data == images.data_ptr()
    del images, labels, indices
    assert loader.held == 1  # arr still uses it
    del arr
    assert loader.held == 0


@needs_torch
def test_loader_in_a_torch_dataloader(fx):
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=5, return_indices=True)
    assert isinstance(loader, torch.utils.data.IterableDataset)
    assert isinstance(loader, shardread.Loader)
    ref = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=5, return_indices=True)
    want = epoch(ref)
    dl = torch.utils.data.DataLoader(loader, batch_size=None)
    assert len(dl) == len(loader) == 6
    got = [tuple(x.numpy().copy() for x in b) for b in dl]
    assert same(got, want)
    assert isinstance(next(iter(torch.utils.data.DataLoader(loader, batch_size=None)))[0],
                      torch.Tensor)


@needs_torch
def test_dataloader_worker_processes_are_refused(fx):
    """A worker's copy of the Loader would never see the parent's set_epoch or state: refused
    at the first batch, persistent or not, with what to do instead."""
    loader = shardread.Loader(fx.fixed, batch_size=3, shuffle=True, seed=5, threads=1)
    for persistent in (False, True):
        dl = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=2,
                                         persistent_workers=persistent)
        with pytest.raises(RuntimeError, match="num_workers=0"):
            next(iter(dl))
    # the same Loader in the main process still works
    dl = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=0)
    assert sum(1 for _ in dl) == len(loader)


@needs_torch
def test_pinned_batches_copy_asynchronously(fx):
    if not torch.cuda.is_available():
        pytest.skip("not applicable: no CUDA device, pinned ring buffers not exercised")
    loader = shardread.Loader(fx.fixed, batch_size=4, framework="torch")
    images, labels = next(iter(loader))
    assert images.is_pinned()  # torch sees the ring buffer as pinned: a real async copy
    assert labels.is_pinned()  # labels too: their non_blocking copy does not wait either
    dev = images.cuda(non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(dev.cpu(), images)
    off = shardread.Loader(fx.fixed, batch_size=4, framework="torch", pin_memory=False)
    assert not next(iter(off))[0].is_pinned()


# ---- errors ----

def test_missing_dataset(fx, tmp_path):
    for make in (shardread.Dataset, shardread.Loader):
        with pytest.raises(FileNotFoundError) as e:
            make(str(tmp_path / "nothing-here"))
        assert isinstance(e.value, shardread.Error)
        assert "nothing-here" in str(e.value)


def test_damaged_shard_named(fx):
    shard = "shard-00001.raw"
    path = fx.copy("fixed", "truncated")
    os.truncate(os.path.join(path, shard), 5000)
    for make in (shardread.Dataset, shardread.Loader):
        with pytest.raises(shardread.CorruptError, match=shard) as e:
            make(path)
        assert path in str(e.value)
    path = fx.copy("fixed", "garbage")
    with open(os.path.join(path, "shard-00002.raw"), "r+b") as f:
        f.write(b"this is no shard header")
    with pytest.raises(shardread.CorruptError, match="shard-00002.raw"):
        shardread.Loader(path, access="pread")
    # truncated under an open reader (pread: a clean error, no SIGBUS): the batch that needs it
    # fails naming the file, the batches before it arrive, and the iterator ends. With two ring
    # buffers, batches 0 and 1 may be read before the truncation, batch 2 (shard 2) only after.
    path = fx.copy("fixed", "truncated-later")
    loader = shardread.Loader(path, batch_size=7, access="pread", threads=1, prefetch=2)
    ds = shardread.Dataset(path, access="pread")
    os.truncate(os.path.join(path, "shard-00002.raw"), 5000)
    it = iter(loader)
    for _ in range(2):
        images, labels = next(it)  # copies (prefetch 2): no buffer stays held
    assert loader.copies == 2
    with pytest.raises(shardread.CorruptError, match="shard-00002.raw"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(shardread.CorruptError, match="shard-00002.raw"):
        ds[16]


def test_on_error_skip_and_substitute(fx):
    """One sample's pixels damaged (found by verify_samples): 'fail' raises naming the shard,
    'skip' delivers every other sample once, 'substitute' keeps every batch full, and both
    report it through recovery(); every sample not damaged arrives byte-identical."""
    clean = shardread.Dataset(fx.fixed)
    path = fx.copy("fixed", "damaged-sample")
    bad = 9
    image, _ = clean[bad]
    shard = os.path.join(path, "shard-00001.raw")
    with open(shard, "r+b") as f:
        data = f.read()
        off = data.find(np.ascontiguousarray(image).tobytes())
        assert off > 0
        f.seek(off + 7)
        f.write(bytes([data[off + 7] ^ 0x20]))
    with pytest.raises(shardread.CorruptError, match="shard-00001.raw"):
        for _ in shardread.Loader(path, batch_size=4, verify_samples=True):
            pass
    for mode in ("skip", "substitute"):
        loader = shardread.Loader(path, batch_size=4, shuffle=True, seed=3, on_error=mode,
                                  verify_samples=True, return_indices=True)
        seen = []
        for images, labels, indices in loader:
            assert len(images) == len(indices) == len(labels)
            for img, i in zip(images, indices):
                assert int(i) != bad
                assert np.array_equal(img, clean[int(i)][0])
            seen.extend(int(i) for i in indices)
        rec = loader.recovery()
        if mode == "skip":
            assert sorted(seen) == [i for i in range(N_SAMPLES) if i != bad]
            assert rec["skipped"] == 1 and rec["replaced"] == 0
        else:
            assert len(seen) == N_SAMPLES
            assert rec["replaced"] == 1 and rec["skipped"] == 0
        assert "shard-00001.raw" in rec["last"]
    with pytest.raises(ValueError, match="on_error"):
        shardread.Loader(path, on_error="ignore")


def damage_samples(fx, name, bad):
    """A copy of the fixed dataset with one pixel byte of each sample in `bad` flipped, found in
    its shard by the clean sample's bytes (every such sample is one contiguous run there)."""
    clean = shardread.Dataset(fx.fixed)
    path = fx.copy("fixed", name)
    shards = sorted(f for f in os.listdir(path) if f.startswith("shard-"))
    for i in bad:
        image = np.ascontiguousarray(clean[i][0]).tobytes()
        hits = []
        for shard in shards:
            with open(os.path.join(path, shard), "rb") as f:
                off = f.read().find(image)
            if off >= 0:
                hits.append((shard, off))
        assert len(hits) == 1, (i, hits)
        shard, off = hits[0]
        with open(os.path.join(path, shard), "r+b") as f:
            f.seek(off + 5)
            byte = f.read(1)[0]
            f.seek(off + 5)
            f.write(bytes([byte ^ 0x41]))
    return path


@pytest.mark.parametrize("mode", ["skip", "substitute"])
@pytest.mark.parametrize("access", ["mmap", "pread", "direct"])
def test_batches_name_the_samples_recovered(fx, mode, access):
    """return_recovery: each batch lists the samples not delivered as planned; over two epochs
    in random order the lists name exactly the damaged samples, once per epoch each, with the
    hash mismatch as the reason and (substitute) the position of the sample that took its place;
    every sample delivered is byte-identical to the clean dataset's."""
    clean = shardread.Dataset(fx.fixed)
    bad = {2, 9, 17}
    path = damage_samples(fx, f"damaged-{mode}-{access}", sorted(bad))
    loader = shardread.Loader(path, batch_size=4, shuffle=True, seed=11, on_error=mode,
                              verify_samples=True, return_indices=True, return_recovery=True,
                              access=access, threads=2)
    for _ in range(2):
        named, delivered = [], []
        for images, labels, indices, recovered in loader:
            assert isinstance(recovered, list)
            positions = set()
            for index, position, code, reason in recovered:
                named.append(index)
                assert "hash" in reason and code != 0
                if mode == "skip":
                    assert position == -1
                else:
                    assert 0 <= position < len(indices)
                    assert int(indices[position]) not in bad
                    positions.add(position)
            for img, lab, i in zip(images, labels, indices):
                assert int(i) not in bad
                ref_img, ref_lab = clean[int(i)]
                assert np.array_equal(img, ref_img) and int(lab) == ref_lab
            delivered.extend(int(i) for i in indices)
        assert sorted(named) == sorted(bad)
        if mode == "skip":
            assert sorted(delivered) == sorted(set(range(N_SAMPLES)) - bad)
        else:
            assert len(delivered) == N_SAMPLES
            assert set(range(N_SAMPLES)) - bad <= set(delivered)
    rec = loader.recovery()
    assert rec["skipped" if mode == "skip" else "replaced"] == 2 * len(bad)
    # a clean dataset: every list empty; without the option, batches keep their shape
    for batch in shardread.Loader(fx.fixed, batch_size=4, return_recovery=True):
        assert len(batch) == 3 and batch[2] == []
    for batch in shardread.Loader(path, batch_size=4, on_error=mode, verify_samples=True):
        assert len(batch) == 2


def test_bad_arguments(fx):
    for kw in (dict(batch_size=0), dict(threads=0), dict(prefetch=1), dict(batch_size=-1),
               dict(size=(0, 4)), dict(size=(1, 2, 3)), dict(access="nfs"),
               dict(framework="jax"),
               dict(order="best"), dict(uneven="some"), dict(rank=2, world=2),
               dict(world=0), dict(batch_size=24, drop_last=True)):
        with pytest.raises(ValueError):
            shardread.Loader(fx.fixed, **kw)
    with pytest.raises(TypeError):
        shardread.Loader(fx.fixed, batch_size=2.5)
    with pytest.raises(TypeError):
        shardread.Loader(fx.fixed, size="big")
    with pytest.raises(TypeError):
        shardread.Loader()
    loader = shardread.Loader(fx.fixed, batch_size=4)
    with pytest.raises(TypeError):
        loader.load_state_dict([1, 2])
    with pytest.raises(ValueError):
        loader.set_epoch(-1)


def test_docstrings():
    names = [shardread, shardread.Dataset, shardread.Loader, shardread.Error,
             shardread.CorruptError, shardread.ArgumentError, shardread.ShapeError,
             shardread.NotFoundError, shardread.ReadError, shardread.StateError,
             shardread.UnsupportedError]
    for cls in (shardread.Dataset, shardread.Loader):
        names += [getattr(cls, n) for n in dir(cls) if not n.startswith("_")]
    for obj in names:
        assert obj.__doc__ and len(obj.__doc__) > 10, obj


# ---- installation ----

@pytest.mark.skipif(bool(os.environ.get("SAN")), reason="not applicable: pip builds a plain module, not under SAN")
def test_pip_install_offline(fx, tmp_path):
    """pip install --no-build-isolation reader/python, offline, into a virtual environment that
    sees the system's numpy; the installed module reads the fixture by itself."""
    import venv
    root = os.environ.get("SHARDREAD_ROOT") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env_dir = tmp_path / "venv"
    try:
        venv.create(env_dir, system_site_packages=True, with_pip=True)
    except Exception as e:  # e.g. no ensurepip in this interpreter
        pytest.skip(f"cannot create a virtual environment with pip: {e}")
    py = str(env_dir / "bin" / "python")
    env = dict(os.environ, SHARDREAD_BUILD=os.path.join(root, os.environ.get("BUILD", "build")))
    env.pop("PYTHONPATH", None)
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
                    os.path.join(root, "reader", "python")], check=True, env=env,
                   capture_output=True)
    out = subprocess.run([py, "-c", "import shardread, sys; ds = shardread.Dataset(sys.argv[1]); "
                          "print(shardread.__file__); print(len(ds), ds[3][1])", fx.fixed],
                         check=True, env=env, capture_output=True, text=True, cwd=tmp_path).stdout
    path, counts = out.splitlines()
    assert path.startswith(str(env_dir))
    assert counts == f"{N_SAMPLES} {shardread.Dataset(fx.fixed)[3][1]}"
