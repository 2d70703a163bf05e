"""shardread.build / shardread.Writer: the dataset written from Python equals `shardc build` of
the same files with the same options (pixels, labels, hashes, sources, class names, shard
layout, channel statistics), for every kind of input; and the error paths."""
import json
import os
import subprocess

import numpy as np
import pytest

import shardread
from conftest import SHARDC, mksample_list

PIL = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """Images of every kind mksample writes (JPEG, PNG, BMP, gray and colour, many sizes), three
    class folders, and a shuffled list of (path, label) over them."""
    root = str(tmp_path_factory.mktemp("writer"))
    d, lst, rows = mksample_list(root, 3, 7, 11)
    rows = rows[5:] + rows[:5]          # labels not in sample order
    with open(lst, "w") as f:
        f.writelines(f"{p} {lab}\n" for p, lab in rows)
    items = [(os.path.join(d, p), int(lab)) for p, lab in rows]
    return {"root": root, "dir": d, "list": lst, "items": items}


def shardc_build(src, out, *opts, folders=False):
    args = [SHARDC, "build", src["dir"], "-o", out, "--no-progress", *opts]
    if not folders:
        args[3:3] = ["--list", src["list"]]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode in (0, 1), p.stderr
    return out


def info(ds, i):
    p = subprocess.run([SHARDC, "info", ds, "--sample", str(i), "--json"], check=True,
                       stdout=subprocess.PIPE, text=True)
    d = json.loads(p.stdout)
    d.pop("path")
    return d


def verify(ds):
    p = subprocess.run([SHARDC, "verify", ds], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def manifest(ds):
    with open(os.path.join(ds, "manifest.json")) as f:
        m = json.load(f)
    # what a streamed build records differently (see shardread/_writer.py)
    m.pop("fingerprint")
    m["build"].pop("source")
    for s in m["shards"]:
        for k in ("hash", "file_hash", "pin"):
            s.pop(k, None)
    return m


def assert_same(a, b, raw=False):
    """a (written from Python) equals b (shardc build): every sample's pixels, label, hash,
    source and shape; the manifest but for the fingerprint and the build's source; raw shards
    byte for byte but for the header's fingerprint and header hash."""
    verify(a)
    ma, mb = manifest(a), manifest(b)
    assert ma == mb
    da, db = shardread.Dataset(a), shardread.Dataset(b)
    assert len(da) == len(db) == ma["samples"]
    for i in range(len(da)):
        (xa, la), (xb, lb) = da[i], db[i]
        assert la == lb
        np.testing.assert_array_equal(xa, xb)
        assert info(a, i) == info(b, i)
    if raw:
        for s in mb["shards"]:
            with open(os.path.join(a, s["file"]), "rb") as f:
                ba = bytearray(f.read())
            with open(os.path.join(b, s["file"]), "rb") as f:
                bb = bytearray(f.read())
            for lo, hi in ((96, 104), (248, 256)):   # fingerprint, header_hash (raw.md)
                ba[lo:hi] = bb[lo:hi] = b"\0" * (hi - lo)
            assert ba == bb, s["file"]


def tsv(ds, name):
    with open(os.path.join(ds, name)) as f:
        return [ln.rstrip("\n").split("\t") for ln in f][1:]


@pytest.mark.parametrize("fmt,threads", [("raw", 1), ("raw", 3), ("hdf5", 1), ("hdf5", 4)])
def test_paths_equal_shardc(src, tmp_path, fmt, threads):
    opts = ["--size", "24x20", "--format", fmt, "-j", str(threads), "--shard-samples", "5"]
    ref = shardc_build(src, str(tmp_path / "ref"), *opts)
    r = shardread.build(src["items"], tmp_path / "py", size=(20, 24), format=fmt,
                        threads=threads, shard_samples=5)
    assert (r.samples, r.classes, r.rejects) == (len(src["items"]), 3, [])
    assert r.shards == len(manifest(ref)["shards"]) > 1
    assert_same(str(tmp_path / "py"), ref, raw=fmt == "raw")
    # inputs.tsv names the paths as given
    assert [row[2] for row in tsv(str(tmp_path / "py"), "inputs.tsv")] == \
        [p for p, _ in src["items"]]


def test_geometries_and_gray(src, tmp_path):
    cases = [(["--short-side", "17", "--crop", "15x13"], dict(short_side=17, crop=(13, 15))),
             (["--max-side", "30", "--gray"], dict(max_side=30, channels=1)),
             (["--size", "16", "--fit", "pad", "--filter", "bicubic"],
              dict(size=16, fit="pad", filter="bicubic")),
             (["--size", "16", "--shrink-on-load", "--compress", "zstd"],
              dict(size=16, shrink_on_load=True, compress="zstd"))]
    for k, (cli, kw) in enumerate(cases):
        ref = shardc_build(src, str(tmp_path / f"ref{k}"), "-j", "2", *cli)
        shardread.build(src["items"], tmp_path / f"py{k}", threads=2, **kw)
        assert_same(str(tmp_path / f"py{k}"), ref, raw=True)


def test_augment_equal(src, tmp_path):
    ref = shardc_build(src, str(tmp_path / "ref"), "--size", "16", "--augment", "2", "--seed",
                       "7", "-j", "2")
    shardread.build(src["items"], tmp_path / "py", size=16, augment=2, seed=7, threads=2)
    assert_same(str(tmp_path / "py"), ref, raw=True)


def test_class_folders_with_classes(src, tmp_path):
    """classes= names the classes: the same dataset as a class-folder build, fed in its order."""
    ref = shardc_build(src, str(tmp_path / "ref"), "--size", "24", folders=True)
    rows = tsv(ref, "inputs.tsv")
    names = sorted(os.listdir(src["dir"]))
    items = [(p, int(lab)) for _, lab, p in rows]
    r = shardread.build(items, tmp_path / "py", size=24, classes=names)
    assert r.classes == 3
    assert_same(str(tmp_path / "py"), ref, raw=True)
    assert shardread.Dataset(str(tmp_path / "py")).classes == names


def test_bytes_equal_files(src, tmp_path):
    """Encoded bytes go through the same decoders as the files (shrink-on-load included)."""
    ref = shardc_build(src, str(tmp_path / "ref"), "--size", "20", "--shrink-on-load")
    items = []
    for p, lab in src["items"]:
        with open(p, "rb") as f:
            data = f.read()
        items.append((data if len(items) % 3 else bytearray(data), lab))
    items[1] = (memoryview(items[1][0]), items[1][1])
    shardread.build(items, tmp_path / "py", size=20, shrink_on_load=True)
    assert_same(str(tmp_path / "py"), ref, raw=True)
    names = [row[2] for row in tsv(str(tmp_path / "py"), "inputs.tsv")]
    assert names == [f"<memory>#{i}" for i in range(len(items))]


@pytest.mark.parametrize("channels", [3, 1])
def test_pil_and_arrays_equal_files(src, tmp_path, channels):
    """PIL images (converted by Pillow to the build's mode) and arrays of their pixels equal the
    files they were read from: the decoders give Pillow's pixels (JPEG, PNG, BMP; no
    shrink-on-load, which only a file or its bytes can have)."""
    items = src["items"]
    assert {os.path.splitext(p)[1] for p, _ in items} == {".jpg", ".png", ".bmp"}
    sub = src
    if channels == 1:
        # a colour JPEG decoded to gray by libjpeg (its Y) may differ by one from Pillow's
        # convert("L") of the RGB decode: that case is for the files themselves
        items = [(p, lab) for p, lab in items if not p.endswith(".jpg")]
        lst = os.path.join(str(tmp_path), "lossless.txt")
        with open(lst, "w") as f:
            f.writelines(f"{os.path.relpath(p, src['dir'])} {lab}\n" for p, lab in items)
        sub = dict(src, list=lst)
    assert len(items) >= 5
    gray = ["--gray"] if channels == 1 else []
    ref = shardc_build(sub, str(tmp_path / "ref"), "--short-side", "18", *gray)
    mode = "RGB" if channels == 3 else "L"
    pil = [(PIL.open(p), lab) for p, lab in items]
    shardread.build(pil, tmp_path / "pil", short_side=18, channels=channels)
    assert_same(str(tmp_path / "pil"), ref, raw=True)
    arrays = []
    for k, (p, lab) in enumerate(items):
        a = np.asarray(PIL.open(p).convert(mode))
        if k % 2 and a.ndim == 2:
            a = a[:, :, None]           # HxWx1 is gray too
        arrays.append((a, lab))
    shardread.build(arrays, tmp_path / "arr", short_side=18, channels=channels, threads=3)
    assert_same(str(tmp_path / "arr"), ref, raw=True)


def test_array_channel_rules(tmp_path):
    """Arrays to the build's channels as the decoders treat files: gray replicated, alpha
    dropped, colour to gray by Pillow's L conversion; non-contiguous arrays taken as they read."""
    rng = np.random.default_rng(3)
    rgba = rng.integers(0, 256, (9, 7, 4), dtype=np.uint8)
    gray = rng.integers(0, 256, (9, 7), dtype=np.uint8)
    rgb_view = rgba[:, :, :3]                       # not C-contiguous
    items = [(rgba, 0), (gray, 1), (rgb_view, 2), (np.asfortranarray(gray), 1)]
    shardread.build(items, tmp_path / "c3", threads=2)
    d = shardread.Dataset(str(tmp_path / "c3"))
    np.testing.assert_array_equal(d[0][0], rgba[:, :, :3])
    np.testing.assert_array_equal(d[1][0], np.repeat(gray[:, :, None], 3, axis=2))
    np.testing.assert_array_equal(d[2][0], rgb_view)
    np.testing.assert_array_equal(d[3][0], np.repeat(gray[:, :, None], 3, axis=2))
    shardread.build(items, tmp_path / "c1", channels=1)
    d = shardread.Dataset(str(tmp_path / "c1"))
    want = np.asarray(PIL.fromarray(np.ascontiguousarray(rgb_view)).convert("L"))
    np.testing.assert_array_equal(d[0][0][:, :, 0], want)
    np.testing.assert_array_equal(d[1][0][:, :, 0], gray)
    np.testing.assert_array_equal(d[2][0][:, :, 0], want)
    assert [d[i][1] for i in range(4)] == [0, 1, 2, 1]
    assert shardread.Dataset(str(tmp_path / "c1")).classes == ["0", "1", "2"]


def test_rejects_listed(src, tmp_path):
    """Bad items are listed rejects at their positions, as bad files are; the rest is written."""
    p0, l0 = src["items"][0]
    bad = [(p0, l0),
           (os.path.join(src["dir"], "missing.jpg"), 1),
           (b"not an image at all", 2),
           (np.zeros((4, 4, 3), np.float32), 0),
           (np.zeros((4, 4, 2), np.uint8), 0),
           (np.zeros((0, 4, 3), np.uint8), 0),
           (12345, 1),
           (src["items"][1][0], src["items"][1][1])]
    r = shardread.build(bad, tmp_path / "py", size=16)
    assert r.samples == 2
    names = [n for n, _ in r.rejects]
    assert names == [bad[1][0]] + [f"<memory>#{i}" for i in (2, 3, 4, 5, 6)]
    reasons = dict(r.rejects)
    assert "No such file" in reasons[bad[1][0]]
    assert "float32" in reasons["<memory>#3"] and "uint8" in reasons["<memory>#3"]
    assert "(4, 4, 2)" in reasons["<memory>#4"]
    assert "int" in reasons["<memory>#6"]
    out = str(tmp_path / "py")
    assert [row[0] for row in tsv(out, "rejects.tsv")] == names
    assert len(tsv(out, "inputs.tsv")) == len(bad)
    verify(out)
    assert [info(out, i)["source"] for i in range(2)] == [0, 7]


def test_strict_raises_and_leaves_nothing(src, tmp_path):
    items = src["items"][:4] + [(b"junk", 0)] + src["items"][4:]
    out = tmp_path / "py"
    with pytest.raises(shardread.BuildError, match=r"<memory>#4"):
        shardread.build(items, out, size=16, strict=True, shard_samples=2)
    assert not out.exists()


def gen_then_fail(items, n):
    for k, it in enumerate(items):
        if k == n:
            raise KeyError("the iterable failed")
        yield it


def test_iterable_exception_leaves_no_dataset(src, tmp_path):
    out = tmp_path / "py"
    with pytest.raises(KeyError, match="the iterable failed"):
        shardread.build(gen_then_fail(src["items"], 12), out, size=16, shard_samples=3,
                        threads=2)
    assert not out.exists()
    # an existing, empty directory stays (empty)
    out.mkdir()
    with pytest.raises(KeyError):
        shardread.build(gen_then_fail(src["items"], 9), out, size=16, shard_samples=2)
    assert [f for f in os.listdir(out) if f != ".shardc.lock"] == []


def test_writer_context_manager(src, tmp_path):
    with shardread.Writer(tmp_path / "ok", size=16, classes=["a", "b", "c"]) as w:
        for p, lab in src["items"][:6]:
            w.add(p, lab)
    assert w.result.samples == 6
    assert shardread.Dataset(str(tmp_path / "ok")).classes == ["a", "b", "c"]
    verify(str(tmp_path / "ok"))
    with pytest.raises(RuntimeError, match="inside"):
        with shardread.Writer(tmp_path / "bad", size=16, shard_samples=1) as w:
            for p, lab in src["items"][:6]:
                w.add(p, lab)
            raise RuntimeError("inside the block")
    assert not (tmp_path / "bad").exists()


def test_streaming_window(src, tmp_path):
    """The iterable is consumed as the build goes: never more than `window` items ahead."""
    items = src["items"] * 4
    with shardread.Writer(tmp_path / "py", size=16, window=3, threads=2) as w:
        for p, lab in items:
            w.add(p, lab)
            assert w._b.added - w._b.done <= 3 + 1
    assert w.result.samples == len(items)


def test_output_rules(src, tmp_path):
    """As shardc: a dataset already there needs force; an empty iterable writes nothing."""
    out = tmp_path / "py"
    shardread.build(src["items"][:3], out, size=16)
    with pytest.raises(shardread.BuildError, match="already holds a dataset"):
        shardread.build(src["items"][:3], out, size=16)
    r = shardread.build(src["items"][:4], out, size=16, force=True)
    assert r.samples == 4
    with pytest.raises(shardread.BuildError, match="no samples"):
        shardread.build([], tmp_path / "empty", size=16)
    assert not (tmp_path / "empty").exists()
    with pytest.raises(TypeError, match="pairs"):
        shardread.build([src["items"][0][0]], tmp_path / "x")


def test_bad_arguments(tmp_path):
    out = tmp_path / "x"
    with pytest.raises(TypeError, match="sizee"):
        shardread.build([], out, sizee=3)
    for kw, word in [(dict(size=0), "size"), (dict(size=(1, 2, 3)), "size"),
                     (dict(format="nope"), "format"), (dict(channels=2), "channels"),
                     (dict(fit="x", size=4), "fit"), (dict(filter="x"), "filter"),
                     (dict(threads=0), "threads"), (dict(quality=101), "quality"),
                     (dict(shard_bytes="lots"), "shard_bytes"), (dict(compress="zip"), "compress"),
                     (dict(size=4, short_side=3), "short_side"), (dict(augment=2), "augment"),
                     (dict(jpeg_fraction=2), "jpeg_fraction"), (dict(align=300), "align"),
                     (dict(classes="abc"), "classes")]:
        with pytest.raises(ValueError, match=word):
            shardread.build([], out, **kw)
    assert not out.exists()
    with shardread.Writer(out, classes=["a", "b"]) as w:
        with pytest.raises(ValueError, match="label 2"):
            w.add(np.zeros((2, 2), np.uint8), 2)
        with pytest.raises(ValueError, match="label"):
            w.add(np.zeros((2, 2), np.uint8), -1)
        with pytest.raises(ValueError, match="label"):
            w.add(np.zeros((2, 2), np.uint8), "a")
        w.add(np.zeros((2, 2), np.uint8), 1)
    assert w.result.samples == 1


def test_keywords_set_as_shardc_flags(tmp_path):
    """The keywords the package passes on are set as shardc build's flags (shc_build_set): a
    value only the library checks is refused in shardc's words, after the keyword's name."""
    out = tmp_path / "x"
    for kw, words in [
            (dict(filter="cubic"), "filter: bad --filter 'cubic' (nearest, box, bilinear, "
                                   "hamming, bicubic or lanczos)"),
            (dict(format="tiff"), "format: unknown --format 'tiff' (raw, "),
            (dict(compress="gzip"), "compress: bad --compress: "),
            (dict(size=8, augment=2, aug="rrc=2"), "bad --aug: ")]:
        with pytest.raises(ValueError) as e:
            shardread.build([], out, **kw)
        assert str(e.value).startswith(words), (kw, str(e.value))
    assert not out.exists()


def test_torch_tensor_pixels(tmp_path):
    """Anything np.asarray takes is pixels: a CPU uint8 tensor in HWC layout."""
    torch = pytest.importorskip("torch")
    t = torch.arange(6 * 5 * 3, dtype=torch.uint8).reshape(6, 5, 3)
    r = shardread.build([(t, 0), (t.float(), 0)], tmp_path / "py")
    assert r.samples == 1 and "float32" in r.rejects[0][1]
    np.testing.assert_array_equal(shardread.Dataset(str(tmp_path / "py"))[0][0], t.numpy())


def test_chw_tensor_refused_or_taken_with_layout(tmp_path):
    """A CxHxW tensor (torchvision's uint8 layout) is refused at add() with a message naming
    layout=, not rejected item after item; with layout="CHW" it is the same image as its HWC
    permutation."""
    torch = pytest.importorskip("torch")
    t = torch.arange(3 * 6 * 5, dtype=torch.uint8).reshape(3, 6, 5)
    with pytest.raises(ValueError, match=r"item 0: array of shape \(3, 6, 5\) is CxHxW .*"
                       r"layout='CHW'"):
        shardread.build([(t, 0)], tmp_path / "hwc")
    assert not os.path.exists(tmp_path / "hwc")
    r = shardread.build([(t, 0), (t[:1], 1)], tmp_path / "chw", layout="CHW")
    assert (r.samples, r.rejects) == (2, [])
    ds = shardread.Dataset(str(tmp_path / "chw"))
    np.testing.assert_array_equal(ds[0][0], t.permute(1, 2, 0).numpy())
    np.testing.assert_array_equal(ds[1][0], np.repeat(t[0].numpy()[:, :, None], 3, 2))
    with pytest.raises(ValueError, match="layout must be 'HWC' or 'CHW'"):
        shardread.Writer(tmp_path / "x", layout="NCHW")


def test_every_item_rejected_raises(tmp_path):
    """A build whose every item is rejected raises BuildError with the reasons (exit 1, as
    shardc build's), leaving the 0-sample dataset and its rejects.tsv; one good item is
    enough for a result."""
    bad = [(np.zeros((4, 4, 3), np.float32), 0), (b"not an image", 1),
           (np.zeros((4, 4, 2), np.uint8), 0), (7, 0)]
    with pytest.raises(shardread.BuildError, match=r"every item was rejected \(4; .*"
                       r"<memory>#0: array of dtype float32 .*; and 1 more") as e:
        shardread.build(bad, tmp_path / "all")
    assert (e.value.exit, e.value.code) == (1, "rejects")
    assert [n for n, _ in e.value.rejects] == [f"<memory>#{i}" for i in range(4)]
    assert [row[0] for row in tsv(str(tmp_path / "all"), "rejects.tsv")] == \
        [f"<memory>#{i}" for i in range(4)]
    r = shardread.build(bad + [(np.zeros((4, 4, 3), np.uint8), 0)], tmp_path / "one")
    assert (r.samples, len(r.rejects)) == (1, 4)
