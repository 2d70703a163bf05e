"""Instance masks and keypoints through the Loader (reader/shardread.h, "Masks and keypoints"):
each target carries 'masks' (N, H, W) uint8 and 'keypoints' (N, K, 3) float32 moved with the
pixels by the crop or pad, RandomResizedCrop, the detection geometry (multiscale, natural
sizes, scale_jitter, letterbox) and the flip with flip_indices. Every geometry against a NumPy
reference fed the Loader's reported params: masks byte-exact (torch's nearest index, 0 in the
padding), keypoints to 1e-4 pixel, the instance whose mask is left empty dropped with its box;
the same batches at 1 and 3 threads and after a resume; the masks views of the batch that hold
it (kept ones never change); DDP ranks disjoint; a keypoint flip
without flip_indices refused (the warps: test_segm_warps.py)."""
import os
import sys

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, ROOT, SHARDC, build_detection, crop_boxes, run

sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
import detect_ref  # noqa: E402
import segm_ref  # noqa: E402

FLIP = [1, 0, 2]        # segm_ref.KP_NAMES: left, right, top


def build_seg(root, seed):
    src, ann, full, out = (str(root / x) for x in ("img", "inst.json", "seg.json", "ds"))
    run(MKSAMPLE, src, "--coco", ann, "--per-class", "6", "--min-side", "30", "--max-side",
        "70", "--seed", str(seed), "--quiet")
    segm_ref.make(ann, full)
    run(SHARDC, "build", src, "--coco", full, "-o", out, "--max-side", "64", "--no-progress",
        "-j", "2")
    return out


@pytest.fixture(scope="module")
def seg(tmp_path_factory):
    return build_seg(tmp_path_factory.mktemp("segmread"), 9)


def nearest(n_out, n_in):
    return segm_ref.nearest_index(n_out, n_in)


def nonempty(m):
    return m.reshape(len(m), -1).any(1) if len(m) else np.zeros(0, bool)


def place(masks, row, out_w, out_h, opts):
    """The stored masks (n, h, w) of a sample moved by its params row as the pixels are: the
    pre-flip output, then the flip; returns (n, oh, ow)."""
    n, sh_, sw_ = masks.shape
    x, y, w, h, flip = (int(v) for v in row[:5])
    scale = len(row) > 5
    if not scale:
        out = np.zeros((n, out_h, out_w), np.uint8)
        win = masks[:, y:y + h, x:x + w]
        if opts.get("rrc"):
            out = win[:, nearest(out_h, h)][:, :, nearest(out_w, w)]
        else:
            ox, oy = (out_w - w) // 2, (out_h - h) // 2
            out[:, oy:oy + h, ox:ox + w] = win
        return out[:, :, ::-1] if flip else out
    sw, sh, cx, cy, px, py, iw, ih = (int(v) for v in row[5:])
    r = masks[:, nearest(sh, sh_)][:, :, nearest(sw, sw_)]
    r = r[:, cy:cy + ih, cx:cx + iw]
    listed = opts.get("list")
    if listed or "multiscale" in opts:     # the image flips alone, at the top left
        if flip:
            r = r[:, :, ::-1]
        if listed:
            return r
        out = np.zeros((n, out_h, out_w), np.uint8)
        out[:, :ih, :iw] = r
        return out
    out = np.zeros((n, out_h, out_w), np.uint8)
    out[:, py:py + ih, px:px + iw] = r
    return out[:, :, ::-1] if flip else out


def move_points(kp, boxes, row, out_w, out_h, opts):
    """Keypoints (n, K, 3) as the boxes' edges move (test_detect.py expected, detect_ref
    scale_boxes): invisible or outside the image rectangle -> 0, flipped about the flip width
    with the left/right swap."""
    x, y, w, h, flip = (int(v) for v in row[:5])
    k = np.asarray(kp, np.float64).copy()
    if len(row) > 5:
        sw, sh, cx, cy, px, py, iw, ih = (int(v) for v in row[5:])
        mx, my = k[..., 0] * (sw / w) + (px - cx), k[..., 1] * (sh / h) + (py - cy)
        x0, y0, x1, y1 = px, py, px + iw, py + ih
        fw = iw if ("multiscale" in opts or opts.get("list")) else out_w
    else:
        if opts.get("rrc"):
            mx, my = (k[..., 0] - x) * (out_w / w), (k[..., 1] - y) * (out_h / h)
        else:
            mx, my = k[..., 0] - x + (out_w - w) // 2, k[..., 1] - y + (out_h - h) // 2
        x0, y0, x1, y1, fw = 0, 0, out_w, out_h, out_w
    vis = (k[..., 2] != 0) & (mx >= x0) & (mx <= x1) & (my >= y0) & (my <= y1)
    if flip:
        mx = fw - mx
    out = np.stack([mx, my, k[..., 2]], -1) * vis[..., None]
    if flip:
        out = out[:, FLIP]
    return out.astype(np.float32)


def box_keep(stored, row, out_w, out_h, opts):
    if len(row) > 5:
        multi = "multiscale" in opts or opts.get("list")
        return detect_ref.scale_boxes(stored["boxes"], stored["area"], row, out_w, multi)[2]
    f = crop_boxes(stored["boxes"], row, out_w, out_h, opts.get("rrc")).astype(np.float32)
    return (f[:, 0] < f[:, 2]) & (f[:, 1] < f[:, 3])


CASES = [
    ("pad", dict(size=72, pad=True)),
    ("crop", dict(size=28, random_crop=True)),
    ("rrc", dict(size=(36, 44), rrc=(0.2, 1.0))),
    ("multi-list", dict(multiscale=((32, 45, 64), 80), list=True)),
    ("multi-pad", dict(multiscale=([40, 56], 72), pad_to=True)),
    ("natural", dict(list=True)),
    ("jitter", dict(scale_jitter=(48, (0.3, 1.8)))),
    ("letterbox", dict(letterbox=(40, 56))),
]


def check_geometry(paths, name, opts):
    """Every sample's masks and keypoints against the reference fed its params row, over two
    epochs of one dataset or (two paths) of their 1:1 mixture; returns the samples seen."""
    dss = [shardread.Dataset(p) for p in paths]
    kw = {k: v for k, v in opts.items() if k != "list"}
    mixed = len(paths) > 1
    source = [(p, 1) for p in paths] if mixed else paths[0]
    loader = shardread.Loader(source, batch_size=5, targets=True, return_params=True,
                              shuffle=True, seed=3, flip=0.5, flip_indices=FLIP, threads=2,
                              return_streams=mixed, **kw)
    shape = loader.info["shape"]
    seen = flips = kps = 0
    for epoch in range(2):
        loader.set_epoch(epoch)
        for batch in loader:
            images, targets, indices = batch[:3]
            streams, params = (batch[3], batch[4]) if mixed else ([0] * len(indices), batch[3])
            for k, i in enumerate(indices):
                _, stored = dss[int(streams[k])][int(i)]
                row, got = params[k], targets[k]
                if opts.get("list"):
                    out_h, out_w = got["size"]
                else:
                    out_h, out_w = shape[:2]
                masks = place(np.asarray(stored["masks"]), row, out_w, out_h, opts)
                keep = box_keep(stored, row, out_w, out_h, opts)
                keep &= nonempty(masks)
                m, kp = np.asarray(got["masks"]), np.asarray(got["keypoints"])
                assert m.dtype == np.uint8 and kp.dtype == np.float32
                assert m.shape == (int(keep.sum()), out_h, out_w), (name, int(i))
                assert np.array_equal(m, masks[keep]), (name, int(i))
                assert np.array_equal(np.asarray(got["labels"]),
                                      np.asarray(stored["labels"])[keep])
                assert got["dropped"] == len(keep) - int(keep.sum())
                want = move_points(stored["keypoints"], stored["boxes"], row,
                                   *(out_w, out_h), opts)[keep]
                assert kp.shape == want.shape
                assert np.abs(kp - want).max(initial=0) <= 1e-4, (name, int(i))
                kps += int((kp[..., 2] > 0).sum())
                seen += 1
                flips += int(row[4])
    assert 0 < flips < seen and kps > 0
    return seen


@pytest.mark.parametrize("name,opts", CASES, ids=[c[0] for c in CASES])
def test_masks_and_keypoints_follow_the_geometry(seg, name, opts):
    assert check_geometry([seg], name, opts) == 2 * len(shardread.Dataset(seg))


@pytest.fixture(scope="module")
def seg2(tmp_path_factory):
    return build_seg(tmp_path_factory.mktemp("segmread2"), 4)


@pytest.mark.parametrize("name,opts", [c for c in CASES if c[0] in ("rrc", "letterbox")],
                         ids=["rrc", "letterbox"])
def test_a_mixture_moves_each_streams_masks_and_keypoints(seg, seg2, name, opts):
    """A 1:1 mixture of two segmentation datasets: each sample's masks and keypoints are its own
    stream's, moved by its params row as for one dataset."""
    n = len(shardread.Dataset(seg)) + len(shardread.Dataset(seg2))
    assert check_geometry([seg, seg2], name, opts) == 2 * n


def test_a_mixture_refuses_streams_that_carry_other_targets(seg, tmp_path):
    """Masks and keypoints with a boxes-only detection stream: refused, naming both."""
    det = build_detection(tmp_path, 3)
    with pytest.raises(ValueError, match=r"stream 1 \(.*\) carries boxes alone, stream 0 "
                                         r"\(.*\) instance masks and keypoints"):
        shardread.Loader([(seg, 1), (det, 1)], batch_size=2, targets=True, size=24)


def test_an_emptied_mask_drops_its_box(seg):
    """A small RandomResizedCrop that keeps a corner of a box but none of its mask's pixels
    drops the instance, counted in 'dropped' (the draws of these seeds have such crops)."""
    ds = shardread.Dataset(seg)
    found = 0
    for seed in range(3):
        loader = shardread.Loader(seg, batch_size=6, targets=True, return_params=True,
                                  shuffle=True, seed=seed, size=16, rrc=(0.005, 0.02))
        for _, targets, indices, params in loader:
            for k, i in enumerate(indices):
                _, stored = ds[int(i)]
                masks = place(np.asarray(stored["masks"]), params[k], 16, 16, {"rrc": True})
                keep = box_keep(stored, params[k], 16, 16, {"rrc": True})
                gone = keep & ~nonempty(masks)
                found += int(gone.sum())
                assert len(targets[k]["labels"]) == int((keep & ~gone).sum())
                assert targets[k]["dropped"] == len(keep) - int((keep & ~gone).sum())
    assert found > 0


def batches(seg, threads, state=None, **kw):
    loader = shardread.Loader(seg, batch_size=1, targets=True, shuffle=True, seed=5, flip=0.5,
                              flip_indices=FLIP, threads=threads, rrc=True, size=32, **kw)
    if state is not None:
        loader.load_state_dict(state)
    return loader


def flat(batch):
    images, targets = batch[0], batch[1]
    return [np.asarray(images).tobytes()] + [
        (np.asarray(t["boxes"]).tobytes(), np.asarray(t["masks"]).tobytes(),
         np.asarray(t["keypoints"]).tobytes(), t["dropped"]) for t in targets]


def test_same_batches_at_1_and_3_threads_and_after_resume(seg):
    one = [flat(b) for b in batches(seg, 1)]
    three = [flat(b) for b in batches(seg, 3)]
    assert one == three and len(one) > 3
    loader = batches(seg, 2)
    it = iter(loader)
    head = [flat(next(it)) for _ in range(2)]
    state = loader.state_dict()
    rest = [flat(b) for b in batches(seg, 3, state)]
    assert head + rest == one


def test_masks_are_views_that_hold_their_batch(seg):
    # the masks are views of the batch's buffer, as the images are: kept alone they hold it, and
    # batches kept past prefetch - 2 are copied out, so no kept mask ever changes
    want = [flat(b)[1:] for b in batches(seg, 1, prefetch=4)]
    loader = batches(seg, 1, prefetch=4)
    it = iter(loader)
    images, targets = next(it)[:2]
    del images
    assert loader.held == 1 and len(targets[0]["masks"]) > 0
    del targets
    assert loader.held == 0
    kept = [next(it)[1] for _ in range(len(want) - 1)]
    assert loader.copies > 0 and loader.held == 2
    got = [[np.asarray(t["masks"]).tobytes() for t in ts] for ts in kept]
    assert got == [[m[1] for m in w] for w in want[1:]]


def test_ddp_ranks_disjoint_with_their_masks(seg):
    ds = shardread.Dataset(seg)
    seen = []
    for rank in range(2):
        loader = shardread.Loader(seg, batch_size=3, targets=True, return_indices=True,
                                  rank=rank, world=2, size=72, pad=True, shuffle=True, seed=1)
        for _, targets, indices in loader:
            for k, i in enumerate(indices):
                want = place(np.asarray(ds[int(i)][1]["masks"]), (0, 0) + ds[int(i)][0].shape[1::-1]
                             + (0,), 72, 72, {})
                assert np.array_equal(np.asarray(targets[k]["masks"]),
                                      want[nonempty(want)])
                seen.append(int(i))
    assert sorted(seen) == list(range(len(ds)))


@pytest.mark.parametrize("kw,msg", [
    (dict(flip=True), "a flip needs flip_indices"),
    (dict(flip=True, flip_indices=[1, 0]), "flip_indices has 2 entries: the dataset has 3"),
    (dict(flip=True, flip_indices=[1, 0, 3]), r"flip_indices\[2\] is 3"),
])
def test_refused(seg, kw, msg):
    with pytest.raises(shardread.ArgumentError, match=msg):
        next(iter(shardread.Loader(seg, targets=True, size=40, pad=True, **kw)))


def test_torch_nearest_moves_masks_alike(seg):
    """The masks equal torch's interpolate(mode="nearest") of the crop, then the flip: what
    torchvision.transforms.v2's resized_crop and horizontal_flip do to a Mask."""
    torch = pytest.importorskip("torch")
    ds = shardread.Dataset(seg)
    loader = shardread.Loader(seg, batch_size=6, targets=True, return_params=True, shuffle=True,
                              seed=8, rrc=True, size=(30, 50), flip=0.5, flip_indices=FLIP)
    n = 0
    for _, targets, indices, params in loader:
        for k, i in enumerate(indices):
            x, y, w, h, flip = (int(v) for v in params[k])
            m = torch.from_numpy(np.asarray(ds[int(i)][1]["masks"]).copy())[:, y:y + h, x:x + w]
            if not len(m):
                continue
            m = torch.nn.functional.interpolate(m[None].float(), size=[30, 50],
                                                mode="nearest")[0].to(torch.uint8)
            if flip:
                m = m.flip(-1)
            m = m.numpy()
            m = m[nonempty(m)]
            got = np.asarray(targets[k]["masks"])
            if len(got) == len(m):
                assert np.array_equal(got, m), int(i)
                n += 1
    assert n > 0


def test_without_targets_nothing_of_them_is_moved(seg):
    """targets=False on a segmentation set: the reader moves no boxes or masks at all (they
    were two thirds of a batch's time, then dropped); the images are those of targets=True,
    the labels -1 as a detection dataset's."""
    kw = dict(batch_size=5, rrc=True, size=32, flip=0.5, seed=3, shuffle=True, threads=2)
    a = shardread.Loader(seg, targets=True, flip_indices=FLIP, **kw)
    b = shardread.Loader(seg, targets=False, **kw)
    assert a.info["targets"] and not b.info["targets"]
    n = 0
    for (ia, _), (ib, lb) in zip(a, b):
        assert np.array_equal(np.asarray(ia), np.asarray(ib))
        assert (np.asarray(lb) == -1).all()
        n += len(lb)
    assert n == len(shardread.Dataset(seg))
