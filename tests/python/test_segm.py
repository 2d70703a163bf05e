"""Instance masks and keypoints from Python: Dataset items carry target["masks"] (N, H, W)
uint8 and target["keypoints"] (N, K, 3) float32 as torchvision's Mask R-CNN and keypoint R-CNN
take them, equal to a NumPy rasterisation of the COCO polygons and a decoder of COCO RLE
written from its definition (tests/ref/segm_ref.py), moved by the build's geometry; a
boxes-only dataset has neither key."""
import json
import os
import sys

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, ROOT, SHARDC, build_detection, run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ref"))
import segm_ref  # noqa: E402
from detect_ref import plan  # noqa: E402


@pytest.fixture(scope="module")
def seg(tmp_path_factory):
    root = tmp_path_factory.mktemp("segm")
    src, ann, full, out = (str(root / x) for x in ("img", "inst.json", "seg.json", "ds"))
    run(MKSAMPLE, src, "--coco", ann, "--per-class", "10", "--min-side", "30", "--max-side",
        "70", "--seed", "4", "--quiet")
    segm_ref.make(ann, full)
    run(SHARDC, "build", src, "--coco", full, "-o", out, "--size", "48x40", "--fit", "pad",
        "--no-progress", "-j", "2")
    return full, out


def test_masks_and_keypoints_equal_the_reference(seg):
    full, out = seg
    coco = json.load(open(full))
    g = json.load(open(os.path.join(out, "manifest.json")))["geometry"]
    imgs = sorted(coco["images"], key=lambda i: i["file_name"].encode())
    by_img = {}
    for a in coco["annotations"]:
        by_img.setdefault(a["image_id"], []).append(a)
    d = shardread.Dataset(out)
    assert len(d) == len(imgs)
    seen = 0
    for i, im in enumerate(imgs):
        img, t = d[i]
        masks, kps = np.asarray(t["masks"]), np.asarray(t["keypoints"])
        n = len(np.asarray(t["labels"]))
        assert masks.dtype == np.uint8 and masks.shape == (n, 40, 48)
        assert kps.dtype == np.float32 and kps.shape == (n, 3, 3)
        w, h = im["width"], im["height"]
        p = plan(g, w, h)
        rw, rh, dx, dy, dw, dh, wx, wy = p
        sx, sy = rw / w, rh / h
        want_m, want_k = [], []
        for a in by_img.get(im["id"], []):
            m = segm_ref.move_mask(segm_ref.source_mask(a, w, h), w, h, p, 48, 40)
            if not m.any():
                continue
            want_m.append(m)
            k3 = np.zeros((3, 3))
            for k, (x, y, v) in enumerate(np.reshape(a.get("keypoints") or [0] * 9, (3, 3))):
                qx, qy = x * sx + dx - wx, y * sy + dy - wy
                if v and dx <= qx <= dx + dw and dy <= qy <= dy + dh:
                    k3[k] = (qx, qy, v)
            want_k.append(k3)
        assert len(want_m) == n
        if n:
            assert np.array_equal(masks, np.stack(want_m)), i
            assert np.abs(kps - np.stack(want_k)).max() <= 1e-4, i
            # the padding (rows below the resized image, columns right of it) is 0
            assert not masks[:, dy + dh:, :].any() and not masks[:, :, dx + dw:].any()
        seen += n
    assert seen > 10


def test_boxes_only_dataset_has_no_masks(tmp_path):
    d = shardread.Dataset(build_detection(tmp_path, 2))
    _, t = d[0]
    assert "masks" not in t and "keypoints" not in t


def test_mksample_polygons_are_the_shapes_masks(tmp_path):
    """shardc-mksample --coco --polygons: the same images and boxes as without, each shape's
    outline as polygons spanning its box (a rectangle's its 4 corners), and a build's masks
    equal to the NumPy rasterisation of those polygons (tests/ref/segm_ref.py)."""
    args = ["--per-class", "10", "--min-side", "30", "--max-side", "70", "--seed", "6", "--quiet"]
    run(MKSAMPLE, str(tmp_path / "plain"), "--coco", str(tmp_path / "plain.json"), *args)
    run(MKSAMPLE, str(tmp_path / "img"), "--coco", str(tmp_path / "seg.json"), "--polygons", *args)
    plain = json.load(open(tmp_path / "plain.json"))
    coco = json.load(open(tmp_path / "seg.json"))
    for im in coco["images"]:
        a = open(tmp_path / "plain" / im["file_name"], "rb").read()
        assert a == open(tmp_path / "img" / im["file_name"], "rb").read()
    assert len(coco["annotations"]) == len(plain["annotations"]) > 10
    cats = set()
    for a, p in zip(coco["annotations"], plain["annotations"]):
        assert {k: v for k, v in a.items() if k != "segmentation"} == p
        x, y, w, h = a["bbox"]
        pts = np.concatenate([np.reshape(s, (-1, 2)) for s in a["segmentation"]])
        assert np.allclose(pts.min(0), [x, y], atol=0.01)
        assert np.allclose(pts.max(0), [x + w, y + h], atol=0.01)
        want = {1: 1, 2: 1, 3: 4, 4: 2}[a["category_id"]]
        assert len(a["segmentation"]) == want
        if a["category_id"] == 1:
            assert a["segmentation"] == [[x, y, x + w, y, x + w, y + h, x, y + h]]
        cats.add(a["category_id"])
    assert cats == {1, 2, 3, 4}
    out = str(tmp_path / "ds")
    run(SHARDC, "build", str(tmp_path / "img"), "--coco", str(tmp_path / "seg.json"), "-o", out,
        "--no-progress")
    ds = shardread.Dataset(out)
    imgs = sorted(coco["images"], key=lambda i: i["file_name"].encode())
    for n, im in enumerate(imgs):
        anns = [a for a in coco["annotations"] if a["image_id"] == im["id"]]
        want = np.stack([segm_ref.source_mask(a, im["width"], im["height"]) for a in anns]) \
            if anns else np.zeros((0, im["height"], im["width"]), np.uint8)
        got = np.asarray(ds[n][1]["masks"])
        assert np.array_equal(got, want), im["file_name"]


def test_masks_of_many_runs_in_every_backend(tmp_path):
    """A mask of 1-pixel runs (a 301 x 301 checkerboard given as COCO RLE) makes an aux record
    far over 64 KiB: HDF5 stores such records end to end (its shard version 2) where the table of
    version 1 stopped the build; every backend gives the same items, the checkerboard exact."""
    from PIL import Image
    h = w = 301
    src = tmp_path / "img"
    src.mkdir()
    rng = np.random.RandomState(5)
    for name in ("a.png", "b.png"):
        Image.fromarray((rng.rand(h, w, 3) * 255).astype(np.uint8)).save(src / name)
    anns = [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, w, h], "iscrowd": 0,
             "area": h * w / 2, "segmentation": {"counts": [1] * (h * w), "size": [h, w]}},
            {"id": 2, "image_id": 2, "category_id": 1, "bbox": [10, 10, 50, 50], "iscrowd": 0,
             "area": 2500, "segmentation": [[10, 10, 60, 10, 60, 60, 10, 60]]}]
    coco = {"images": [{"id": 1, "file_name": "a.png", "width": w, "height": h},
                       {"id": 2, "file_name": "b.png", "width": w, "height": h}],
            "annotations": anns, "categories": [{"id": 1, "name": "thing"}]}
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(coco))
    items = {}
    for fmt in ("raw", "hdf5", "lmdb"):
        out = str(tmp_path / fmt)
        run(SHARDC, "build", str(src), "--coco", str(ann), "-o", out, "--format", fmt,
            "--no-progress")
        d = shardread.Dataset(out)
        items[fmt] = [d[i] for i in range(len(d))]
    # column-major runs of 1 over an odd height: pixel (r, c) is set where c * h + r is odd
    r, c = np.indices((h, w))
    want = ((c * h + r) % 2 == 1).astype(np.uint8)
    assert np.array_equal(np.asarray(items["raw"][0][1]["masks"])[0], want)
    for fmt in ("hdf5", "lmdb"):
        for (img, t), (rimg, rt) in zip(items[fmt], items["raw"]):
            assert np.array_equal(np.asarray(img), np.asarray(rimg))
            for k in ("boxes", "labels", "masks"):
                assert np.array_equal(np.asarray(t[k]), np.asarray(rt[k])), (fmt, k)
