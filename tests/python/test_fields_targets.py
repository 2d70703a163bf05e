"""Detection datasets whose samples also carry fields (formats/raw.md "Pair record"): built by
`shardc build --coco ... --fields FILE.jsonl` and by shardread.build from (path, target dict,
fields dict) items, the two equal byte for byte; read by the target reader and the field reader at
once (Loader(targets=True, fields=...)), the boxes moved by the read-time geometry while the
fields stay; in every backend, checked by verify, kept by merge and resume, shown by info."""
import json
import os
import subprocess

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, SHARDC, run

BACKENDS = ["raw", "hdf5", "lmdb"]


def fields_of(k, name):
    """Image k's fields (k: its position in the COCO file's image list)."""
    return {"name": name, "weight": 0.5 + k * 0.25, "flags": [k % 2, 1, k % 3 == 0], "n": -k}


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fieldsdet"))
    src, ann, jl = (os.path.join(root, x) for x in ("img", "ann.json", "fields.jsonl"))
    run(MKSAMPLE, src, "--coco", ann, "--per-class", "8", "--seed", "4", "--quiet")
    with open(ann) as f:
        doc = json.load(f)
    images = {im["id"]: (k, im) for k, im in enumerate(doc["images"])}
    boxes = {i: [] for i in images}
    anns = {i: [] for i in images}
    for a in doc["annotations"]:
        x, y, w, h = (float(v) for v in a["bbox"])
        boxes[a["image_id"]].append(((x, y, x + w, y + h), a["category_id"]))
        anns[a["image_id"]].append(a)
    with open(jl, "w") as f:
        for k, im in sorted(images.values(), key=lambda t: t[0]):
            v = fields_of(k, im["file_name"])
            v["flags"] = [int(b) for b in v["flags"]]
            f.write(json.dumps({"path": im["file_name"], "fields": v}) + "\n")
    return {"root": root, "src": src, "ann": ann, "jsonl": jl, "images": images,
            "boxes": boxes, "anns": anns, "cats": doc["categories"]}


def shardc(*args, env=None):
    return subprocess.run([SHARDC, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env)


def build(c, out, *extra, env=None):
    return shardc("build", c["src"], "--coco", c["ann"], "--fields", c["jsonl"], "-o", out,
                  "--no-progress", "-j", "2", *extra, env=env)


def write(c, out, **options):
    """shardread.build of the same images, targets and fields as build(): the items in the
    order shardc lists a COCO file's images (by file name)."""
    items = []
    for k, im in sorted(c["images"].values(), key=lambda t: t[1]["file_name"]):
        a = c["anns"][im["id"]]
        target = {"boxes": [b for b, _ in c["boxes"][im["id"]]],
                  "labels": [x["category_id"] for x in a], "area": [x["area"] for x in a],
                  "iscrowd": [x.get("iscrowd", 0) for x in a], "image_id": im["id"]}
        items.append((os.path.join(c["src"], im["file_name"]), target,
                      want_fields(c, im["id"])))
    return shardread.build(items, out, categories=c["cats"], threads=2, **options)


def want_fields(c, image_id):
    k, im = c["images"][image_id]
    f = fields_of(k, im["file_name"])
    return dict(f, flags=[int(b) for b in f["flags"]])


def check_stored(c, out):
    """Every sample's stored target equals its COCO boxes (no build geometry) and its fields
    the side file's line for the same image; returns the dataset."""
    ds = shardread.Dataset(out, fields=True)
    assert len(ds) == len(c["images"])
    assert ds.field_schema == [("name", "str", 0), ("weight", "float", 0), ("flags", "int", 3),
                               ("n", "int", 0)]
    seen = set()
    for i in range(len(ds)):
        image, target, f = ds[i]
        iid = int(target["image_id"])
        seen.add(iid)
        want = c["boxes"][iid]
        assert target["boxes"].tolist() == np.asarray([b for b, _ in want], np.float32).tolist()
        assert target["labels"].tolist() == [lab for _, lab in want]
        w = want_fields(c, iid)
        assert f["name"] == w["name"] and f["weight"] == w["weight"] and f["n"] == w["n"]
        assert f["flags"].tolist() == w["flags"]
    assert seen == set(c["images"])
    return ds


def moved(stored, p, size):
    """The stored boxes under RandomResizedCrop (x, y, w, h) into size x size, then the flip."""
    x, y, w, h, flip = (int(v) for v in p)
    b = np.asarray(stored["boxes"], np.float64).reshape(-1, 4).copy()
    b[:, [0, 2]] = ((b[:, [0, 2]] - x) * (size / w)).clip(0, size)
    b[:, [1, 3]] = ((b[:, [1, 3]] - y) * (size / h)).clip(0, size)
    if flip:
        b[:, [0, 2]] = size - b[:, [2, 0]]
    b = b.astype(np.float32)
    keep = (b[:, 0] < b[:, 2]) & (b[:, 1] < b[:, 3])
    return b[keep], np.asarray(stored["labels"])[keep]


@pytest.mark.parametrize("fmt", BACKENDS)
@pytest.mark.parametrize("by", ["shardc", "writer"])
def test_targets_and_fields_read_together(coco, tmp_path, fmt, by):
    out = str(tmp_path / fmt)
    if by == "shardc":
        p = build(coco, out, "--format", fmt)
        assert p.returncode == 0, p.stderr
    else:
        write(coco, out, format=fmt)
    with open(os.path.join(out, "manifest.json")) as f:
        man = json.load(f)
    assert man["fields"]["record_version"] == 2 and man["targets"]["record_version"] == 1
    assert man["targets"]["source"] == ("coco" if by == "shardc" else "stream")
    assert man["targets"]["categories"] == [{"id": c["id"], "name": c["name"]}
                                            for c in coco["cats"]]
    ds = check_stored(coco, out)
    loader = shardread.Loader(out, batch_size=4, targets=True, fields=["name", "weight", "flags"],
                              size=32, rrc=(0.3, 1.0), flip=0.5, shuffle=True, seed=3,
                              return_params=True)
    n = flipped = 0
    for images, targets, f, indices, params in loader:
        assert set(f) == {"name", "weight", "flags"} and len(targets) == len(indices)
        for k, i in enumerate(indices):
            stored = ds[int(i)][1]
            iid = int(targets[k]["image_id"])
            assert iid == int(stored["image_id"])
            want_b, want_l = moved(stored, params[k], 32)
            assert np.allclose(np.asarray(targets[k]["boxes"]), want_b, atol=1e-4)
            assert np.asarray(targets[k]["labels"]).tolist() == want_l.tolist()
            w = want_fields(coco, iid)
            assert f["name"][k] == w["name"] and float(f["weight"][k]) == w["weight"]
            assert np.asarray(f["flags"][k]).tolist() == w["flags"]
            flipped += int(params[k][4])
            n += 1
    assert n == len(ds) and 0 < flipped < n
    p = shardc("verify", out)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("fmt", BACKENDS)
def test_writer_equals_shardc_under_a_geometry(coco, tmp_path, fmt):
    """The build geometry moves the Writer's boxes as it moves shardc's: every stored target
    (boxes, labels, areas, flags, ids, sizes) and fields equal, and the pixels."""
    a, b = str(tmp_path / "cli"), str(tmp_path / "py")
    p = build(coco, a, "--format", fmt, "--size", "40x32", "--fit", "crop")
    assert p.returncode == 0, p.stderr
    write(coco, b, format=fmt, size=(32, 40), fit="crop")
    da, db = shardread.Dataset(a, fields=True), shardread.Dataset(b, fields=True)
    assert len(da) == len(db) == len(coco["images"])
    for i in range(len(da)):
        (ia, ta, fa), (ib, tb, fb) = da[i], db[i]
        assert np.array_equal(ia, ib)
        assert set(ta) == set(tb)
        for k in ta:
            assert np.array_equal(np.asarray(ta[k]), np.asarray(tb[k])), (i, k, ta[k], tb[k])
        assert fa["flags"].tolist() == fb["flags"].tolist()
        assert {k: v for k, v in fa.items() if k != "flags"} == \
            {k: v for k, v in fb.items() if k != "flags"}
    assert sum(len(da[i][1]["boxes"]) for i in range(len(da))) > 0


def test_writer_target_errors_named(coco, tmp_path):
    img = np.zeros((8, 8, 3), np.uint8)
    t = {"boxes": [[0, 0, 4, 4]], "labels": [1]}
    with pytest.raises(ValueError, match="item 1: an int label, but the items before it had "
                                         "targets"):
        shardread.build([(img, t), (img, 0)], str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"item 0: target 'boxes' must be \(N, 4\)"):
        shardread.build([(img, {"boxes": [1, 2, 3], "labels": [1]})], str(tmp_path / "b"))
    with pytest.raises(ValueError, match="item 0: target label\\(s\\) 5 not among categories="):
        shardread.build([(img, {"boxes": [[0, 0, 4, 4]], "labels": [5]})], str(tmp_path / "c"),
                        categories=["a", "b"])
    with pytest.raises(ValueError, match="item 0: target key\\(s\\) 'box'"):
        shardread.build([(img, {"box": [], "labels": []})], str(tmp_path / "d"))
    # a box outside its image rejects the item, naming the box (rejects.tsv), as shardc does
    r = shardread.build([(img, t), (img, {"boxes": [[0, 0, 9, 4]], "labels": [1]})],
                        str(tmp_path / "e"))
    assert r.samples == 1 and len(r.rejects) == 1
    assert "box 0 (0, 0, 9, 4) is outside the 8x8 image" in r.rejects[0][1]
    ds = shardread.Dataset(str(tmp_path / "e"))
    assert ds.categories == [{"id": 1, "name": "1"}]
    assert ds[0][1]["boxes"].tolist() == [[0, 0, 4, 4]] and ds[0][1]["image_id"] == 0
    # without 'area' a box's own area is stored, scaled with it by the build geometry
    shardread.build([(img, {"boxes": [[0, 0, 4, 4], [2, 2, 6, 8]], "labels": [1, 2],
                            "iscrowd": [0, 1]})], str(tmp_path / "f"), size=(16, 16))
    t = shardread.Dataset(str(tmp_path / "f"))[0][1]
    assert t["boxes"].tolist() == [[0, 0, 8, 8], [4, 4, 12, 16]]
    assert t["area"].tolist() == [64, 96] and t["iscrowd"].tolist() == [0, 1]
    assert tuple(t["orig_size"]) == (8, 8)


def test_verify_catches_a_flipped_byte_in_either_part(coco, tmp_path):
    out = str(tmp_path / "raw")
    assert build(coco, out).returncode == 0
    shard = os.path.join(out, "shard-00000.raw")
    clean = open(shard, "rb").read()
    name = coco["images"][min(coco["images"])][1]["file_name"].encode()
    # the fields part (an image's name) and the pair header's fields length
    pos_name = clean.rfind(name)
    pos_pair = clean.find(b"PAR1")
    assert pos_name > 0 and pos_pair > 0
    for pos, bit in ((pos_name, 0x01), (pos_pair + 8, 0x08)):
        data = bytearray(clean)
        data[pos] ^= bit
        open(shard, "wb").write(bytes(data))
        p = shardc("verify", out)
        assert p.returncode != 0 and "shard-00000.raw" in p.stdout + p.stderr
        with pytest.raises(shardread.CorruptError, match="shard-00000.raw"):
            shardread.Dataset(out, fields=True)
    open(shard, "wb").write(clean)
    assert shardc("verify", out).returncode == 0


def test_merge_resume_and_info_keep_both(coco, tmp_path):
    merged = str(tmp_path / "merged")
    for k in (0, 1):
        p = build(coco, merged, "--part", f"{k}/2")
        assert p.returncode == 0, p.stderr
    p = shardc("merge", merged)
    assert p.returncode == 0, p.stderr
    check_stored(coco, merged)
    assert shardc("verify", merged).returncode == 0
    res = str(tmp_path / "resumed")
    env = dict(os.environ, SHARDC_CRASH_AFTER="3")
    build(coco, res, "--shard-samples", "2", env=env)
    assert not os.path.exists(os.path.join(res, "manifest.json"))
    p = build(coco, res, "--shard-samples", "2", "--resume")
    assert p.returncode == 0, p.stderr
    check_stored(coco, res)
    assert shardc("verify", res).returncode == 0
    # info: the schema, and --targets gives each sample's fields beside its boxes
    p = shardc("info", res)
    assert p.returncode == 0 and "fields:    name str, weight float, flags int[3], n int\n" \
        in p.stdout and "targets:   4 categories (record version 1)\n" in p.stdout, p.stdout
    p = shardc("info", res, "--targets")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert len(lines) == len(coco["images"])
    for ln in lines:
        want = coco["boxes"][ln["image_id"]]
        assert ln["boxes"] == [list(b) for b, _ in want]
        assert ln["fields"] == want_fields(coco, ln["image_id"])
    p = shardc("info", res, "--json")
    assert json.loads(p.stdout)["fields"] == [
        {"name": "name", "type": "str", "count": 0}, {"name": "weight", "type": "float",
                                                      "count": 0},
        {"name": "flags", "type": "int", "count": 3}, {"name": "n", "type": "int", "count": 0}]


def test_old_readers_refuse_what_they_cannot_read(coco, tmp_path):
    """fields.record_version 2 needs targets, 1 refuses them: a manifest edited either way is
    refused by name, not misread."""
    out = str(tmp_path / "raw")
    assert build(coco, out).returncode == 0
    path = os.path.join(out, "manifest.json")
    man = json.load(open(path))
    man["fields"]["record_version"] = 1
    json.dump(man, open(path, "w"))
    with pytest.raises(shardread.CorruptError, match="record version 1 with 'targets'"):
        shardread.Dataset(out)
