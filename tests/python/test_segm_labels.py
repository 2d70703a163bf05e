"""Semantic segmentation batches (docs/DETECTION.md, "Label maps through the Loader"): a
dataset built with --masks DIR read with targets=True gives (images, masks), masks (B, H, W)
uint8 (a list of (h, w) where each image has its own size), moved exactly with the pixels by
the crop or pad, RandomResizedCrop, the scale ops and the flip, with torch's nearest index and
the dataset's ignore index in the padding. Every geometry against a NumPy reference of the
label-map PNGs fed the Loader's reported params, value for value; the same batches at 1 and 3
threads and after a resume; colour ops leave the maps alone; 16-bit labels above 255 refused
by a uint8 Loader, naming the reason, and delivered by label_dtype='int64' through every
geometry; label_dtype='int64' equals the uint8 maps widened; a Dataset's items are (image, map),
each map its PNG (the warps: test_segm_warps.py)."""
import os

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, SHARDC, run
import test_segm_read as sr

IGNORE = 250


def _maps(src, dst, wide=False):
    """A label map per image of src: blocks of labels 0..20, a top row and right column of
    IGNORE; palette and grey PNGs alternating (wide: 16-bit grey with values above 255)."""
    from PIL import Image
    rng = np.random.default_rng(4)
    names = sorted(os.path.relpath(os.path.join(d, f), src)
                   for d, _, fs in os.walk(src) for f in fs)
    for n, rel in enumerate(names):
        w, h = Image.open(os.path.join(src, rel)).size
        m = rng.integers(0, 21, size=(h // 5 + 1, w // 7 + 1))
        m = np.kron(m, np.ones((5, 7), np.int64))[:h, :w]
        m[0, :] = IGNORE
        m[:, -1] = IGNORE
        path = os.path.join(dst, os.path.splitext(rel)[0] + ".png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if wide:
            Image.fromarray((m + 300).astype(np.uint16)).save(path)
        elif n % 2:
            p = Image.fromarray(m.astype(np.uint8), "P")
            p.putpalette([v for i in range(256) for v in (i, 255 - i, i * 7 % 256)])
            p.save(path)
        else:
            Image.fromarray(m.astype(np.uint8), "L").save(path)
    return names


def _build(root, wide=False, ignore=IGNORE):
    src, maps, out = (str(root / x) for x in ("img", "maps", "ds"))
    run(MKSAMPLE, src, "--coco", str(root / "inst.json"), "--per-class", "12", "--min-side", "30",
        "--max-side", "70", "--seed", "9", "--quiet")
    names = _maps(src, maps, wide)
    run(SHARDC, "build", src, "--masks", maps, "--ignore-index", str(ignore), "-o", out,
        "--no-progress", "-j", "2")
    return out, maps, names


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The dataset (no build geometry: each stored map is its PNG) and the PNGs in sample
    order (the build's byte order of the image names)."""
    from PIL import Image
    out, maps, names = _build(tmp_path_factory.mktemp("labels"))
    pngs = [np.array(Image.open(os.path.join(maps, os.path.splitext(r)[0] + ".png")))
            for r in sorted(names, key=str.encode)]
    return out, pngs


def nearest(n_out, n_in):
    """torch's interpolate(mode="nearest") source index of each of n_out outputs."""
    if n_out == n_in:
        return np.arange(n_out)
    if n_out == 2 * n_in:
        return np.arange(n_out) >> 1
    s = np.float32(n_in) / np.float32(n_out)
    i = np.floor(np.arange(n_out, dtype=np.float32) * s).astype(np.int64)
    return np.minimum(i, n_in - 1)


def place(m, row, out_w, out_h, opts, dtype=np.uint8, ignore=IGNORE):
    """The stored map m (h, w) moved by its params row as the pixels are, the ignore index in
    the padding: the pre-flip output, then the flip."""
    sh_, sw_ = m.shape
    x, y, w, h, flip = (int(v) for v in row[:5])
    out = np.full((out_h, out_w), ignore, dtype)
    if len(row) == 5:
        win = m[y:y + h, x:x + w]
        if opts.get("rrc"):
            out = win[nearest(out_h, h)][:, nearest(out_w, w)]
        else:
            ox, oy = (out_w - w) // 2, (out_h - h) // 2
            out[oy:oy + h, ox:ox + w] = win
        return out[:, ::-1] if flip else out
    sw, sh, cx, cy, px, py, iw, ih = (int(v) for v in row[5:])
    r = m[nearest(sh, sh_)][:, nearest(sw, sw_)][cy:cy + ih, cx:cx + iw]
    listed = opts.get("list")
    if listed or "multiscale" in opts:      # the image flips alone, at the top left
        if flip:
            r = r[:, ::-1]
        if listed:
            return r
        out[:ih, :iw] = r
        return out
    out[py:py + ih, px:px + iw] = r
    return out[:, ::-1] if flip else out


# the geometries of test_segm_read's masks and keypoints
CASES = sr.CASES


@pytest.mark.parametrize("name,opts", CASES, ids=[c[0] for c in CASES])
def test_label_maps_follow_the_geometry(lab, name, opts):
    ds, pngs = lab
    kw = {k: v for k, v in opts.items() if k != "list"}
    loader = shardread.Loader(ds, batch_size=3, targets=True, return_params=True, shuffle=True,
                              seed=3, flip=0.5, threads=2, **kw)
    shape = loader.info["shape"]
    seen = flips = padded = 0
    for epoch in range(2):
        for images, masks, indices, params in loader:
            if opts.get("list"):
                assert type(images) is list and type(masks) is list
                assert len(masks) == len(images) == len(indices)
            else:
                masks = np.asarray(masks)
                assert masks.dtype == np.uint8 and masks.shape == (len(indices),) + shape[:2]
            for k, i in enumerate(indices):
                got = np.asarray(masks[k])
                out_h, out_w = got.shape if opts.get("list") else shape[:2]
                if opts.get("list"):
                    assert np.asarray(images[k]).shape[:2] == got.shape
                want = place(pngs[int(i)], params[k], out_w, out_h, opts)
                assert got.dtype == np.uint8
                assert np.array_equal(got, want), (name, int(i), params[k])
                seen += 1
                flips += int(params[k][4])
                padded += int((got == IGNORE).sum())
    assert seen == 2 * len(pngs) and 0 < flips < seen and padded > 0


def test_padding_is_the_ignore_index(lab):
    """An upscaling pad leaves a border of IGNORE (not 0) around each map."""
    ds, pngs = lab
    loader = shardread.Loader(ds, batch_size=4, targets=True, return_indices=True, size=80,
                              pad=True)
    for _, masks, indices in loader:
        for k, i in enumerate(indices):
            h, w = pngs[int(i)].shape
            m = np.asarray(masks[k])
            oy, ox = (80 - h) // 2, (80 - w) // 2
            assert (m[:oy] == IGNORE).all() and (m[oy + h:] == IGNORE).all()
            assert (m[:, :ox] == IGNORE).all() and (m[:, ox + w:] == IGNORE).all()
            assert np.array_equal(m[oy:oy + h, ox:ox + w], pngs[int(i)])


def test_colour_ops_leave_the_maps_alone(lab):
    ds, _ = lab
    kw = dict(batch_size=4, targets=True, shuffle=True, seed=2, size=40, rrc=True, flip=0.5)
    plain = [np.asarray(m).tobytes() for _, m in shardread.Loader(ds, **kw)]
    jit = shardread.Loader(ds, color_jitter=(0.4, 0.4, 0.4, 0.1), grayscale=0.3, **kw)
    coloured = [(np.asarray(im).tobytes(), np.asarray(m).tobytes()) for im, m in jit]
    assert [m for _, m in coloured] == plain


def flat(loader):
    return [(np.asarray(im).tobytes(), np.asarray(m).tobytes()) for im, m in loader]


def batches(ds, threads, state=None):
    loader = shardread.Loader(ds, batch_size=1, targets=True, shuffle=True, seed=5, flip=0.5,
                              threads=threads, rrc=True, size=32)
    if state is not None:
        loader.load_state_dict(state)
    return loader


def test_same_batches_at_1_and_3_threads_and_after_resume(lab):
    ds, pngs = lab
    one = flat(batches(ds, 1))
    assert one == flat(batches(ds, 3)) and len(one) == len(pngs) > 3
    loader = batches(ds, 2)
    it = iter(loader)
    head = [(np.asarray(im).tobytes(), np.asarray(m).tobytes())
            for im, m in (next(it) for _ in range(2))]
    rest = flat(batches(ds, 3, loader.state_dict()))
    assert head + rest == one


def test_labels_above_255_refused(tmp_path):
    out, _, names = _build(tmp_path, wide=True)
    first = sorted(names, key=str.encode)[0]
    with pytest.raises(shardread.Error, match=r"sample 0: its label map has value 550, above "
                                              r"255: uint8 label maps hold 0 \.\. 255 "
                                              r"\(label_map_bytes 2 delivers uint16 ones; in "
                                              r"Python label_dtype='int64'\)"):
        next(iter(shardread.Loader(out, batch_size=1, targets=True, size=40, pad=True)))
    assert first


def test_int64_maps_equal_the_uint8_ones(lab):
    """label_dtype='int64' (or numpy's or torch's int64): the same maps, int64, fixed-size
    batches and lists of views alike."""
    ds, _ = lab
    for kw in (dict(size=40, pad=True, rrc=True), dict(multiscale=((32, 48), 64))):
        a = [np.array(b[1]) if not isinstance(b[1], list) else [np.array(m) for m in b[1]]
             for b in shardread.Loader(ds, batch_size=5, targets=True, seed=2, flip=0.5, **kw)]
        for dt in ("int64", np.int64):
            got = list(shardread.Loader(ds, batch_size=5, targets=True, seed=2, flip=0.5,
                                        label_dtype=dt, **kw))
            assert len(got) == len(a)
            for want, (_, m) in zip(a, got):
                if isinstance(want, list):
                    assert [np.asarray(x).dtype for x in m] == [np.int64] * len(want)
                    assert all(np.array_equal(np.asarray(x), w) for x, w in zip(m, want))
                else:
                    assert np.asarray(m).dtype == np.int64
                    assert np.array_equal(np.asarray(m), want)


def test_int64_maps_as_torch_tensors(lab):
    torch = pytest.importorskip("torch")
    ds, _ = lab
    x, m = next(iter(shardread.Loader(ds, batch_size=4, targets=True, size=40, pad=True,
                                      framework="torch", label_dtype=torch.int64)))
    assert m.dtype == torch.int64 and m.shape == (4, 40, 40)


def test_label_dtype_refused_where_there_are_no_maps(lab, tmp_path):
    ds, _ = lab
    with pytest.raises(ValueError, match=r"unknown label_dtype \(uint8 or int64\) 'int32'"):
        shardread.Loader(ds, batch_size=4, targets=True, size=40, pad=True, label_dtype="int32")
    with pytest.raises(shardread.ArgumentError, match="label_dtype= is for the label maps"):
        next(iter(shardread.Loader(ds, batch_size=4, size=40, pad=True, label_dtype="int64")))
    det = sr.build_seg(tmp_path, 3)
    with pytest.raises(shardread.ArgumentError, match="label_dtype= is for a semantic "
                                                      "segmentation dataset"):
        shardread.Dataset(det, label_dtype="int64")


def test_dataset_items_are_image_and_map(lab):
    """Dataset(ds)[i] of a label-map dataset: (image, map), the map its PNG value for value,
    uint8, or int64 with label_dtype='int64'; the image at the map's size."""
    ds, pngs = lab
    d, d64 = shardread.Dataset(ds), shardread.Dataset(ds, label_dtype="int64")
    assert len(d) == len(pngs)
    for i, png in enumerate(pngs):
        img, m = d[i]
        assert m.dtype == np.uint8 and np.array_equal(m, png)
        assert img.shape[:2] == m.shape
        img64, m64 = d64[i]
        assert m64.dtype == np.int64 and np.array_equal(m64, png)
        assert np.array_equal(img64, img)


def test_dataset_maps_above_255(tmp_path):
    """16-bit label maps: a Dataset reads them with label_dtype='int64'; uint8 refuses,
    naming the sample and the value."""
    from PIL import Image
    out, maps, names = _build(tmp_path, wide=True)
    first = sorted(names, key=str.encode)[0]
    png = np.array(Image.open(os.path.join(maps, os.path.splitext(first)[0] + ".png")))
    _, m = shardread.Dataset(out, label_dtype="int64")[0]
    assert m.dtype == np.int64 and m.max() > 255 and np.array_equal(m, png)
    with pytest.raises(ValueError, match=r"sample 0's label map has value \d+, above 255: "
                                         r"open the Dataset with label_dtype='int64'"):
        shardread.Dataset(out)[0]


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A 16-bit label set (labels 300..320, 550 at the top row and right column, ignore index
    250 in the padding) and its PNGs in sample order."""
    from PIL import Image
    out, maps, names = _build(tmp_path_factory.mktemp("wide"), wide=True)
    pngs = [np.array(Image.open(os.path.join(maps, os.path.splitext(r)[0] + ".png")))
            for r in sorted(names, key=str.encode)]
    return out, pngs


@pytest.mark.parametrize("name,opts", CASES, ids=[c[0] for c in CASES])
def test_labels_above_255_as_int64_follow_the_geometry(wide, name, opts):
    """label_dtype='int64' moves every label a build stores (as uint16, widened): each
    geometry against the placement of the 16-bit PNGs, value for value."""
    ds, pngs = wide
    kw = {k: v for k, v in opts.items() if k != "list"}
    loader = shardread.Loader(ds, batch_size=5, targets=True, return_params=True, shuffle=True,
                              seed=3, flip=0.5, threads=2, label_dtype="int64", **kw)
    shape = loader.info["shape"]
    seen = above = 0
    for images, maps, indices, params in loader:
        for k, i in enumerate(indices):
            got = np.asarray(maps[k])
            out_h, out_w = got.shape if opts.get("list") else shape[:2]
            want = place(pngs[int(i)], params[k], out_w, out_h, opts, np.int64)
            assert got.dtype == np.int64
            assert np.array_equal(got, want), (name, int(i))
            above += int((got > 255).sum())
            seen += 1
    assert seen == len(pngs) and above > 0


@pytest.fixture(scope="module")
def wide700(tmp_path_factory):
    """The 16-bit label set built with ignore index 700 (the padding's high byte not 0)."""
    from PIL import Image
    out, maps, names = _build(tmp_path_factory.mktemp("wide700"), wide=True, ignore=700)
    pngs = [np.array(Image.open(os.path.join(maps, os.path.splitext(r)[0] + ".png")))
            for r in sorted(names, key=str.encode)]
    return out, pngs


def test_an_ignore_index_above_255(wide700):
    """uint8 maps refuse the dataset at open, saying how to read it; int64 maps pad with 700."""
    ds, pngs = wide700
    with pytest.raises(shardread.Error, match=r"the label maps' ignore index is 700: uint8 "
                                              r"label maps hold 0 \.\. 255 .*label_dtype='int64'"):
        next(iter(shardread.Loader(ds, batch_size=2, targets=True, size=72, pad=True)))
    opts = dict(size=72, pad=True)
    loader = shardread.Loader(ds, batch_size=4, targets=True, return_params=True,
                              label_dtype="int64", **opts)
    padded = 0
    for _, maps, indices, params in loader:
        for k, i in enumerate(indices):
            got = np.asarray(maps[k])
            want = place(pngs[int(i)], params[k], 72, 72, opts, np.int64, ignore=700)
            assert np.array_equal(got, want), int(i)
            padded += int((got == 700).sum())
    assert padded > 0


def test_a_mixture_of_label_sets(lab, wide, wide700):
    """An 8-bit and a 16-bit label set mixed, int64: each sample's map is its own stream's,
    placed as for one dataset; a stream padding with another ignore index is refused."""
    opts = dict(size=(36, 44), rrc=(0.3, 1.0))
    loader = shardread.Loader([(lab[0], 1), (wide[0], 1)], batch_size=5, targets=True,
                              return_params=True, return_streams=True, shuffle=True, seed=2,
                              flip=0.5, label_dtype="int64", **opts)
    seen = [0, 0]
    for _, maps, indices, streams, params in loader:
        for k, (i, s) in enumerate(zip(indices, streams)):
            png = (lab, wide)[int(s)][1][int(i)]
            want = place(png, params[k], 44, 36, opts, np.int64)
            assert np.array_equal(np.asarray(maps[k]), want), (int(s), int(i))
            seen[int(s)] += 1
    assert seen == [len(lab[1]), len(wide[1])]
    with pytest.raises(ValueError, match=r"stream 1 \(.*\) pads its label maps with 700, "
                                         r"stream 0 \(.*\) with 250: give them one ignore index"):
        shardread.Loader([(lab[0], 1), (wide700[0], 1)], batch_size=2, targets=True, size=40,
                         pad=True, label_dtype="int64")
