"""Mixtures of datasets in one Loader (Loader([(path, weight), ...]), shardread.Stream):
proportions over an epoch and within every window of batches (the documented +-1 for two
streams), exact resume at several cut points (also after a world change), ranks disjoint and
equal, two streams of different sizes and classes with labels kept or offset, threads never
change a batch, per-stream on_error, and refusals that name the stream; two detection streams
through every read-time scale op (multi-scale, natural sizes, scale_jitter, letterbox) with
the single-dataset Loader's boxes and pixels for the same sample and draw; order='quasi'."""
import os
import shutil
import sys

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, SHARDC, build_detection, run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ref"))
import detect_ref  # noqa: E402


@pytest.fixture(scope="module")
def two(fx):
    """fx.fixed (23 samples, 3 classes) and a second dataset of 10 samples, 2 classes, same
    size; and one of another size."""
    root = os.path.join(fx.root, "mixture")
    if not os.path.isdir(root):
        os.makedirs(root)
        run(MKSAMPLE, os.path.join(root, "src"), "--classes", "2", "--per-class", "5",
            "--no-broken", "--quiet", "--seed", "11")
        run(SHARDC, "build", os.path.join(root, "src"), "-o", os.path.join(root, "b"),
            "--size", "24x20", "--shard-samples", "3", "--no-progress", "-j", "2")
        run(SHARDC, "build", os.path.join(root, "src"), "-o", os.path.join(root, "big"),
            "--size", "32x32", "--no-progress", "-j", "2")
    return fx.fixed, os.path.join(root, "b"), os.path.join(root, "big")


def epoch(loader):
    return [tuple(np.asarray(x).copy() for x in b) for b in loader]


def mix(two, **kw):
    a, b, _ = two
    base = dict(batch_size=10, shuffle=True, seed=4, return_streams=True, return_indices=True,
                samples_per_epoch=100, flip=True, pin_memory=False)
    base.update(kw)
    return shardread.Loader([(a, 0.7), (b, 0.3)], **base)


def test_proportions_epoch_and_windows(two):
    loader = mix(two)
    assert len(loader) == 10 and loader.info["samples"] == 100
    batches = epoch(loader)
    streams = np.concatenate([b[3] for b in batches])
    assert (streams == 0).sum() == 70 and (streams == 1).sum() == 30
    # every batch (a window of 10 positions): 3 of stream 1, within +-1 of 10 * 0.3
    for b in batches:
        assert abs((b[3] == 1).sum() - 3) <= 1
    # every window of w consecutive samples over the epoch, up to 10 batches
    for w in (10, 20, 50, 100):
        for start in range(0, 100 - w + 1):
            c = (streams[start:start + w] == 1).sum()
            assert abs(c - 0.3 * w) <= 1, (w, start, c)
    # indices are positions in each stream's dataset
    idx = np.concatenate([b[2] for b in batches])
    assert idx[streams == 0].max() < 23 and idx[streams == 1].max() < 10


def test_labels_kept_and_offset(two):
    a, b, _ = two
    kept = epoch(mix(two))
    off = epoch(mix(two, labels="offset"))
    da, db = shardread.Dataset(a), shardread.Dataset(b)
    for (_, lk, ik, sk), (_, lo, io, so) in zip(kept, off):
        assert (ik == io).all() and (sk == so).all()
        for lab_k, lab_o, i, s in zip(lk, lo, ik, sk):
            stored = (da if s == 0 else db)[int(i)][1]
            assert lab_k == stored
            assert lab_o == stored + (3 if s == 1 else 0)
    loader = mix(two, labels="offset")
    assert loader.classes == da.classes + db.classes
    assert loader.info["num_classes"] == 5
    assert mix(two).info["num_classes"] == 3


def test_pixels_are_the_streams(two):
    a, b, _ = two
    ds = [shardread.Dataset(a), shardread.Dataset(b)]
    for img, _, idx, st in epoch(mix(two, flip=False)):
        for k in range(len(idx)):
            assert (img[k] == ds[st[k]][int(idx[k])][0]).all()


def test_threads_never_change_a_batch(two):
    one = epoch(mix(two, threads=1))
    four = epoch(mix(two, threads=4))
    assert len(one) == len(four)
    for x, y in zip(one, four):
        for p, q in zip(x, y):
            assert (p == q).all()


def test_resume_at_cut_points(two):
    full = epoch(mix(two))
    for cut in (1, 4, 9):
        loader = mix(two)
        it = iter(loader)
        for _ in range(cut):
            next(it)
        state = loader.state_dict()
        fresh = mix(two, threads=3)
        fresh.load_state_dict(state)
        rest = epoch(fresh)
        assert len(rest) == 10 - cut
        for x, y in zip(rest, full[cut:]):
            for p, q in zip(x, y):
                assert (p == q).all()


def test_ranks_disjoint_and_elastic(two):
    def seen(loaders):
        out = []
        for ld in loaders:
            for b in ld:
                out += list(zip(np.asarray(b[3]).tolist(), np.asarray(b[2]).tolist()))
        return out
    kw = dict(uneven="drop", samples_per_epoch=None)
    # weights 23:10 without samples_per_epoch: every sample once an epoch
    a, b, _ = two
    ranks = [shardread.Loader([(a, 23), (b, 10)], batch_size=4, shuffle=True, seed=2, rank=r,
                              world=3, return_streams=True, return_indices=True, **kw)
             for r in range(3)]
    assert len({len(ld) for ld in ranks}) == 1
    got = seen(ranks)
    assert len(got) == len(set(got)) == 33
    # world 2 reads 3 batches, world 3 the rest: every sample once, none lost
    two_ranks = [shardread.Loader([(a, 23), (b, 10)], batch_size=4, shuffle=True, seed=2,
                                  rank=r, world=2, return_streams=True, return_indices=True,
                                  **kw) for r in range(2)]
    first = []
    states = []
    for ld in two_ranks:
        it = iter(ld)
        for _ in range(3):
            bt = next(it)
            first += list(zip(np.asarray(bt[3]).tolist(), np.asarray(bt[2]).tolist()))
        states.append(ld.state_dict())
    assert states[0]["consumed"] == 24
    rest = []
    for r in range(3):
        ld = shardread.Loader([(a, 23), (b, 10)], batch_size=4, shuffle=True, seed=2, rank=r,
                              world=3, return_streams=True, return_indices=True, **kw)
        ld.load_state_dict(states[0])
        rest += seen([ld])
    assert sorted(first + rest) == sorted(set(first + rest))
    assert len(first + rest) == 33


def test_stream_forms_repeat_choose(two):
    a, b, _ = two
    loader = shardread.Loader([shardread.Stream(a), shardread.Stream(b, repeat=2)],
                              batch_size=8, return_streams=True, return_indices=True)
    assert loader.info["samples"] == 23 + 20
    st = np.concatenate([x[3] for x in epoch(loader)])
    assert (st == 1).sum() == 20
    chosen = shardread.Loader([shardread.Stream(a, choose=5), shardread.Stream(b, choose=4)],
                              batch_size=3, shuffle=True, return_streams=True,
                              return_indices=True)
    e0 = epoch(chosen)
    e1 = epoch(chosen)
    idx0 = [(int(s), int(i)) for x in e0 for s, i in zip(x[3], x[2])]
    idx1 = [(int(s), int(i)) for x in e1 for s, i in zip(x[3], x[2])]
    assert len(idx0) == len(set(idx0)) == 9
    assert sum(s == 1 for s, _ in idx0) == 4
    assert idx0 != idx1            # drawn anew each epoch
    assert chosen.streams[1] == shardread.Stream(b, choose=4)


@pytest.mark.parametrize("access", ["pread", "direct"])
def test_per_stream_on_error(two, fx, access):
    a, b, _ = two
    broken = os.path.join(fx.root, "mixture", "b-broken-" + access)
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(b, broken)
    shard = [f for f in os.listdir(broken) if f.endswith(".raw") or f.endswith(".shard")
             or f.startswith("shard")]
    assert shard
    with open(os.path.join(broken, sorted(shard)[0]), "r+b") as f:
        f.truncate(64)
    with pytest.raises(shardread.Error):
        shardread.Loader([(a, 0.5), (broken, 0.5)], batch_size=4, access=access)
    loader = shardread.Loader([shardread.Stream(a, weight=0.5),
                               shardread.Stream(broken, weight=0.5, on_error="skip")],
                              batch_size=4, access=access, return_streams=True)
    got = epoch(loader)
    st = np.concatenate([x[2] for x in got])
    # 17 + 16 positions; stream 1's 16 are samples 0..9, 0..5 (sequential), and its first
    # shard (samples 0..2) is gone: 6 skipped, stream 0 untouched
    assert (st == 0).sum() == 17 and (st == 1).sum() == 10
    assert loader.recovery()["skipped"] == 6


def test_refusals_name_the_stream(two, fx):
    a, _, big = two
    with pytest.raises(shardread.ShapeError, match="stream 1 .*big.*give width and height"):
        shardread.Loader([(a, 1), (big, 1)], batch_size=4)
    ok = shardread.Loader([(a, 1), (big, 1)], batch_size=4, size=(20, 24))
    assert ok.info["shape"] == (20, 24, 3)
    with pytest.raises(shardread.ArgumentError, match="stream 1 .*1 channel"):
        shardread.Loader([(a, 1), (fx.gray, 1)], batch_size=4)
    with pytest.raises(ValueError, match="labels must be"):
        shardread.Loader([(a, 1)], labels="shift")
    with pytest.raises(TypeError, match="for a mixture"):
        shardread.Loader(a, samples_per_epoch=10)
    with pytest.raises(shardread.ArgumentError, match="every stream has a weight"):
        shardread.Loader([shardread.Stream(a, weight=1), shardread.Stream(a)])
    with pytest.raises(ValueError, match="another dataset"):
        other = shardread.Loader([(a, 0.5), (a, 0.5)], batch_size=10)
        other.load_state_dict(mix(two).state_dict())


@pytest.fixture(scope="module")
def dets(tmp_path_factory):
    """Two detection datasets of 6 images each, sizes varying (--max-side 64)."""
    return [build_detection(tmp_path_factory.mktemp(f"mixdet{k}"), seed)
            for k, seed in enumerate((3, 8))]


def key(i, row):
    return (int(i), tuple(int(v) for v in row))


DET_CASES = [
    ("multiscale", dict(multiscale=((32, 48), 64))),
    ("multiscale-pad", dict(multiscale=((32, 48), 64), pad_to=True)),
    ("natural", dict()),        # sizes vary, no size: each image at its stored size, a list
    ("letterbox", dict(letterbox=48)),
    ("jitter", dict(scale_jitter=(48, (0.3, 1.8)))),
]


@pytest.mark.parametrize("name,opts", DET_CASES, ids=[c[0] for c in DET_CASES])
def test_detection_scale_ops_match_one_dataset(dets, name, opts):
    """Every sample of the mixture has the boxes, labels and pixels the single-dataset Loader
    gives the same sample under the same draw (return_params row). Stream 0's samples are
    their own global indices, so epoch by epoch they are drawn as the single Loader draws them;
    stream 1's draws (keyed by global index) are looked up among the single Loader's over 24
    epochs (two sizes and a flip: each draw of a sample is there), but for the continuous
    scale_jitter, whose boxes are checked against the NumPy reference instead."""
    kw = dict(batch_size=4, targets=True, return_params=True, return_indices=True, shuffle=True,
              seed=5, flip=0.5, threads=2, pin_memory=False, **opts)
    ref = []
    for path in dets:
        one = shardread.Loader(path, **kw)
        got = {}
        for e in range(24):
            one.set_epoch(e)
            for images, targets, indices, params in one:
                for k, i in enumerate(indices):
                    got[(e,) + key(i, params[k])] = (np.array(images[k]), targets[k])
        ref.append(got)
    mixed = shardread.Loader([(dets[0], 1), (dets[1], 1)], return_streams=True, **kw)
    shape = mixed.info["shape"]
    multi = "multiscale" in opts or name == "natural"
    seen = [0, 0]
    flips = 0
    for e in range(3):
        mixed.set_epoch(e)
        for images, targets, indices, streams, params in mixed:
            assert isinstance(images, list) == (multi and "pad_to" not in opts)
            for k, (i, s) in enumerate(zip(indices, streams)):
                s = int(s)
                stored = shardread.Dataset(dets[s])[int(i)][1]
                t = targets[k]
                assert t["image_id"] == stored["image_id"]
                want_b, want_a, keep = detect_ref.scale_boxes(
                    stored["boxes"], stored["area"], params[k], shape[1], multi)
                assert np.allclose(t["boxes"], want_b, atol=1e-4), (name, s, int(i))
                assert np.array_equal(t["labels"], np.asarray(stored["labels"])[keep])
                match = ref[s].get((e,) + key(i, params[k])) if s == 0 else next(
                    (v for (ee, *kk), v in ref[s].items() if tuple(kk) == key(i, params[k])),
                    None)
                if name == "jitter" and s == 1:
                    continue
                assert match is not None, (name, s, int(i), params[k])
                img, tt = match
                assert np.array_equal(np.asarray(images[k]), img), (name, s, int(i))
                assert np.array_equal(t["boxes"], tt["boxes"])
                assert np.array_equal(t["labels"], tt["labels"])
                assert np.array_equal(t["area"], tt["area"]) and t["size"] == tt["size"]
                seen[s] += 1
                flips += int(params[k][4])
    assert seen[0] == 18 and (seen[1] == 18 or name == "jitter")
    assert 0 < flips


def test_quasi_order(two):
    """order='quasi': every sample once an epoch (weights as the sizes), each stream read
    shard by shard (quasi_window=1; 3-sample shards in b), the same batches at 1 and 3 threads
    and after a resume, ranks disjoint."""
    a, b, _ = two
    kw = dict(batch_size=4, order="quasi", quasi_window=1, seed=6, return_streams=True,
              return_indices=True, pin_memory=False)
    full = epoch(shardread.Loader([(a, 23), (b, 10)], threads=1, **kw))
    seen = [(int(s), int(i)) for x in full for s, i in zip(x[3], x[2])]
    assert sorted(seen) == sorted({(0, i) for i in range(23)} | {(1, i) for i in range(10)})
    b_order = [i // 3 for s, i in seen if s == 1]
    assert b_order == sorted(b_order, key=b_order.index)    # a shard at a time
    assert [i for s, i in seen if s == 1] != list(range(10))
    for x, y in zip(full, epoch(shardread.Loader([(a, 23), (b, 10)], threads=3, **kw))):
        assert all((p == q).all() for p, q in zip(x, y))
    loader = shardread.Loader([(a, 23), (b, 10)], threads=2, **kw)
    it = iter(loader)
    for _ in range(3):
        next(it)
    fresh = shardread.Loader([(a, 23), (b, 10)], threads=2, **kw)
    fresh.load_state_dict(loader.state_dict())
    rest = epoch(fresh)
    assert len(rest) == len(full) - 3
    for x, y in zip(rest, full[3:]):
        assert all((p == q).all() for p, q in zip(x, y))
    ranks = [shardread.Loader([(a, 23), (b, 10)], rank=r, world=3, uneven="drop", **kw)
             for r in range(3)]
    got = [(int(s), int(i)) for ld in ranks for x in epoch(ld) for s, i in zip(x[3], x[2])]
    assert len(got) == len(set(got)) == 33
