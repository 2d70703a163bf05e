"""Fields beyond the label (formats/raw.md "Fields record"): written by shardread.Writer from dicts
and by `shardc build --fields FILE.jsonl`, delivered exactly by Dataset and Loader in every
backend, checked by verify, kept by merge and resume; bad input named by file, line and field."""
import json
import os
import subprocess

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, SHARDC, mksample_list, run

BACKENDS = ["raw", "hdf5", "lmdb", "png0"]


def fields_of(i):
    return {"multi": [i % 2, 1, 0, i % 3 == 0], "score": i * 0.25 - 1.5, "caption": f"a cat {i} é",
            "blob": bytes([i, 0, 255]), "n": -i}


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fields"))
    d, lst, rows = mksample_list(root, 2, 4, 5)
    return {"root": root, "dir": d, "list": lst, "rows": rows}


def shardc(*args):
    return subprocess.run([SHARDC, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


@pytest.mark.parametrize("fmt", BACKENDS)
def test_writer_fields_delivered_exactly(tmp_path, fmt):
    rng = np.random.default_rng(1)
    items = [(rng.integers(0, 255, (6, 5, 3), dtype=np.uint8), i % 2, fields_of(i))
             for i in range(7)]
    out = str(tmp_path / fmt)
    shardread.build(items, out, format=fmt, threads=2, shard_samples=3)
    ds = shardread.Dataset(out, fields=True)
    assert ds.field_schema == [("multi", "int", 4), ("score", "float", 0),
                               ("caption", "str", 0), ("blob", "bytes", 0), ("n", "int", 0)]
    for i in range(7):
        img, label, f = ds[i]
        want = fields_of(i)
        assert label == i % 2
        assert f["multi"].tolist() == [int(v) for v in want["multi"]]
        assert f["score"] == want["score"] and f["n"] == -i
        assert f["caption"] == want["caption"] and f["blob"] == want["blob"]
    seen = []
    for images, labels, f in shardread.Loader(out, batch_size=3, fields=["score", "caption"]):
        assert set(f) == {"score", "caption"} and f["score"].dtype == np.float64
        seen += list(zip(f["score"].tolist(), f["caption"]))
    assert seen == [(fields_of(i)["score"], fields_of(i)["caption"]) for i in range(7)]
    # the indices the user asked for stay after the fields
    b = next(iter(shardread.Loader(out, batch_size=4, fields=True, return_indices=True)))
    assert len(b) == 4 and b[3].tolist() == [0, 1, 2, 3]
    assert b[2]["multi"].shape == (4, 4) and b[2]["n"].tolist() == [0, -1, -2, -3]
    assert shardc("verify", out).returncode == 0


def test_writer_refuses_by_name(tmp_path):
    img = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="item 1: field 'score' is str, the schema .* says float"):
        with shardread.Writer(str(tmp_path / "a")) as w:
            w.add(img, 0, fields={"score": 0.5})
            w.add(img, 0, fields={"score": "high"})
    with pytest.raises(ValueError, match="item 1: field 'multi' missing"):
        with shardread.Writer(str(tmp_path / "b")) as w:
            w.add(img, 0, fields={"multi": [0, 1], "x": 1})
            w.add(img, 0, fields={"x": 2})
    with pytest.raises(ValueError, match=r"field 'multi' is int\[3\], the schema .* int\[2\]"):
        with shardread.Writer(str(tmp_path / "c")) as w:
            w.add(img, 0, fields={"multi": [0, 1]})
            w.add(img, 0, fields={"multi": [0, 1, 1]})
    assert not os.path.exists(tmp_path / "c" / "manifest.json")
    # an int where the schema says float is that float
    with shardread.Writer(str(tmp_path / "d")) as w:
        w.add(img, 0, fields={"s": 0.5})
        w.add(img, 0, fields={"s": 2})
    assert shardread.Dataset(str(tmp_path / "d"), fields=True)[1][2]["s"] == 2.0


def write_jsonl(path, rows, make=fields_of):
    with open(path, "w") as f:
        for i, (p, _) in enumerate(rows):
            v = make(i)
            v = dict(v, multi=[int(x) for x in v["multi"]])
            v.pop("blob")               # JSON has no bytes
            f.write(json.dumps({"path": p, "fields": v}) + "\n")


def build_with_fields(src, tmp_path, name, size="8x8"):
    """shardc build of src's list and its fields (write_jsonl into tmp_path/f.jsonl) at
    tmp_path/name, size: (the fields file, the dataset), the build checked."""
    jl = str(tmp_path / "f.jsonl")
    write_jsonl(jl, src["rows"])
    out = str(tmp_path / name)
    p = shardc("build", src["dir"], "--list", src["list"], "--fields", jl, "--size", size,
               "-o", out, "--no-progress")
    assert p.returncode == 0, p.stderr
    return jl, out


def test_shardc_fields_equal_writer(src, tmp_path):
    jl, cli = build_with_fields(src, tmp_path, "cli", "16x16")
    items = []
    for i, (path, lab) in enumerate(src["rows"]):
        f = fields_of(i)
        f.pop("blob")
        items.append((os.path.join(src["dir"], path), int(lab), f))
    py = str(tmp_path / "py")
    shardread.build(items, py, size=16, threads=2)
    a, b = shardread.Dataset(cli, fields=True), shardread.Dataset(py, fields=True)
    assert a.field_schema == b.field_schema and len(a) == len(b) == len(items)
    for i in range(len(a)):
        (ia, la, fa), (ib, lb, fb) = a[i], b[i]
        assert np.array_equal(ia, ib) and la == lb
        assert fa["multi"].tolist() == fb["multi"].tolist()
        assert {k: v for k, v in fa.items() if k != "multi"} == \
            {k: v for k, v in fb.items() if k != "multi"}
    assert shardc("verify", cli).returncode == 0


def test_verify_catches_a_flipped_fields_byte(src, tmp_path):
    _, out = build_with_fields(src, tmp_path, "raw")
    shard = os.path.join(out, "shard-00000.raw")
    data = bytearray(open(shard, "rb").read())
    pos = data.rfind("a cat 3".encode())
    assert pos > 0
    data[pos + 6] ^= 0x01                       # "a cat 3" -> "a cat 2"
    open(shard, "wb").write(bytes(data))
    p = shardc("verify", out)
    assert p.returncode != 0 and "shard-00000.raw" in p.stdout + p.stderr
    with pytest.raises(shardread.CorruptError, match="shard-00000.raw"):
        shardread.Dataset(out, fields=True)


def test_shardc_fields_bad_input_named(src, tmp_path):
    jl = str(tmp_path / "bad.jsonl")
    rows = src["rows"]

    def build(text):
        with open(jl, "w") as f:
            f.write(text)
        return shardc("build", src["dir"], "--list", src["list"], "--fields", jl, "-o",
                      str(tmp_path / "o"), "--no-progress")

    good = [json.dumps({"path": p, "fields": {"s": 1.5, "c": "x"}}) for p, _ in rows]
    p = build("\n".join(good[:2] + [json.dumps({"path": rows[2][0],
                                                "fields": {"s": "no", "c": "x"}})] + good[3:]))
    assert p.returncode == 2 and f"{jl}, line 3, field 's': str where the schema" in p.stderr
    p = build("\n".join(good[:-1]))
    assert p.returncode == 2 and f"{jl}: no line for input" in p.stderr
    p = build("\n".join(good + [json.dumps({"path": "nope.png", "fields": {"s": 1, "c": ""}})]))
    assert p.returncode == 2 and "line %d: path 'nope.png' is not among the inputs" % (
        len(good) + 1) in p.stderr
    p = build("\n".join(good[:1] + ["{not json"] + good[1:]))
    assert p.returncode == 2 and f"{jl}, line 2:" in p.stderr
    p = shardc("build", src["dir"], "--list", src["list"], "--fields", str(tmp_path / "none"),
               "-o", str(tmp_path / "o"))
    assert p.returncode == 2 and "none" in p.stderr


def test_parts_merge_and_resume_keep_fields(src, tmp_path):
    jl, whole = build_with_fields(src, tmp_path, "whole")
    merged = str(tmp_path / "merged")
    for k in (0, 1):
        p = shardc("build", src["dir"], "--list", src["list"], "--fields", jl, "--size", "8x8",
                   "-o", merged, "--part", f"{k}/2", "--no-progress")
        assert p.returncode == 0, p.stderr
    p = shardc("merge", merged)
    assert p.returncode == 0, p.stderr
    # resume: a build killed after 3 samples, resumed
    res = str(tmp_path / "resumed")
    env = dict(os.environ, SHARDC_CRASH_AFTER="3")
    subprocess.run([SHARDC, "build", src["dir"], "--list", src["list"], "--fields", jl,
                    "--size", "8x8", "--shard-samples", "2", "-o", res, "--no-progress"],
                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert not os.path.exists(os.path.join(res, "manifest.json"))
    p = shardc("build", src["dir"], "--list", src["list"], "--fields", jl, "--size", "8x8",
               "--shard-samples", "2", "-o", res, "--no-progress", "--resume")
    assert p.returncode == 0, p.stderr
    want = shardread.Dataset(whole, fields=True)
    for out in (merged, res):
        ds = shardread.Dataset(out, fields=True)
        assert len(ds) == len(want)
        for i in range(len(ds)):
            a, b = ds[i][2], want[i][2]
            assert a["multi"].tolist() == b["multi"].tolist() and a["caption"] == b["caption"]
        assert shardc("verify", out).returncode == 0
    # another fields file is another build (the fingerprint covers the fields): resuming keeps
    # none of the old shards, and every sample gets its new fields
    write_jsonl(jl, src["rows"], make=lambda i: dict(fields_of(i), n=i + 100))
    p = shardc("build", src["dir"], "--list", src["list"], "--fields", jl, "--size", "8x8",
               "--shard-samples", "2", "-o", res, "--no-progress", "--resume")
    assert p.returncode == 0, p.stderr
    ds = shardread.Dataset(res, fields=True)
    assert [ds[i][2]["n"] for i in range(len(ds))] == [i + 100 for i in range(len(ds))]


def test_categories_and_classes(src, tmp_path):
    ds = shardread.Dataset(_detect_set(tmp_path))
    cats = ds.categories
    assert cats and all(set(c) == {"id", "name"} for c in cats)
    assert [c["name"] for c in cats] == ["rectangle", "ellipse", "frame", "cross"]
    assert shardread.Dataset(_plain(src, tmp_path)).categories == []


def _detect_set(tmp_path):
    d, ann, out = str(tmp_path / "img"), str(tmp_path / "ann.json"), str(tmp_path / "det")
    run(MKSAMPLE, d, "--coco", ann, "--per-class", "5", "--quiet")
    run(SHARDC, "build", d, "--coco", ann, "-o", out, "--no-progress")
    return out


def _plain(src, tmp_path):
    out = str(tmp_path / "plain")
    run(SHARDC, "build", src["dir"], "--list", src["list"], "-o", out, "--no-progress")
    return out
