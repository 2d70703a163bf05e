"""Instance masks, label maps and keypoints through the read-time warps (docs/DETECTION.md,
"Masks and keypoints at read time"): RandomRotation, RandomAffine and the shears,
translations and rotations of auto_augment, after the crop / pad, RandomResizedCrop or a scale
op and the flip. Masks and label maps against Pillow itself: the NumPy placement of
test_segm_read / test_segm_labels fed the Loader's params, then each warp of the sample's
Loader(return_params="ops") list as Image.rotate / Image.transform(AFFINE, NEAREST) with
torchvision's inverse matrix on the frame the pixels turn, byte for byte, 0 (instances) or the
ignore index (label maps) where a position maps outside; keypoints through the warps' forward
maps to 1e-4 pixel, (0, 0, 0) once outside; an instance whose mask the warps empty dropped with
its box; the same batches at 1 and 3 threads."""
import math
import os
import sys

import numpy as np
import pytest

import shardread
from conftest import ROOT
import test_segm_labels as sl
import test_segm_read as sr

sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
import detect_ref  # noqa: E402

from PIL import Image  # noqa: E402  (scripts/deps.sh installs python3-pil)

EPOCHS = 6
FLIP = sr.FLIP
GEOMETRIC_AA = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")


# the instance dataset of test_segm_read (masks and 3 keypoints an instance), its fixture;
# test_segm_labels' 16-bit label set
seg = sr.seg
wide = sl.wide


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The label-map dataset of test_segm_labels and its PNGs in sample order."""
    out, maps, names = sl._build(tmp_path_factory.mktemp("labelwarps"))
    pngs = [np.array(Image.open(os.path.join(maps, os.path.splitext(r)[0] + ".png")))
            for r in sorted(names, key=str.encode)]
    return out, pngs


def tv_inverse(center, angle, translate, scale, shear):
    """torchvision's _get_inverse_affine_matrix: the 6 coefficients Pillow samples with."""
    cx, cy = center
    tx, ty = translate
    a, b, c, d = detect_ref.rotate_shear(angle, shear)
    m = [d, -b, 0.0, -c, a, 0.0]
    m = [v / scale for v in m]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty)
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty)
    m[2] += cx
    m[5] += cy
    return m


def warps(ops):
    """The sample's warps in order: ("rotate", angle) or ("affine", inverse matrix args)."""
    out = []
    for name, kw in ops:
        if name == "rotate":
            out.append(("rotate", kw["angle"], None))
        elif name == "affine":
            out.append(("affine", kw, None))
        elif name == "auto_augment_op" and kw["op_name"] in GEOMETRIC_AA:
            out.append(("aa", kw["op_name"], kw["magnitude"]))
    return out


def pil_warp(plane, ws, fill):
    """plane (h, w) uint8 through the warps with Pillow's NEAREST, fill outside (wider labels
    as a 32-bit "I" image, given back in plane's dtype)."""
    if plane.dtype != np.uint8:
        img = Image.fromarray(np.ascontiguousarray(plane, np.int32), "I")
        return np.asarray(pil_warp_image(img, ws, fill)).astype(plane.dtype)
    return np.asarray(pil_warp_image(Image.fromarray(np.ascontiguousarray(plane), "L"), ws,
                                     fill))


def pil_warp_image(img, ws, fill):
    w, h = img.size
    for kind, a, b in ws:
        if kind == "aa" and a == "Rotate":
            kind, a = "rotate", b
        if kind == "rotate":
            img = img.rotate(a, resample=Image.NEAREST, expand=False, fillcolor=fill)
            continue
        if kind == "affine":
            m = tv_inverse((w * 0.5, h * 0.5), a["angle"], a["translate"], a["scale"],
                           a["shear"])
        elif a in ("ShearX", "ShearY"):
            s = math.degrees(math.atan(b))
            m = tv_inverse((0.0, 0.0), 0.0, (0, 0), 1.0, (s, 0.0) if a == "ShearX" else (0.0, s))
        else:
            t = int(b)
            m = tv_inverse((w * 0.5, h * 0.5), 0.0, (t, 0) if a == "TranslateX" else (0, t), 1.0,
                           (0.0, 0.0))
        img = img.transform((w, h), Image.AFFINE, m, Image.NEAREST, fillcolor=fill)
    return img


def warp_frame(planes, ws, gw, gh, fill):
    """The top-left gw x gh of each plane (n, H, W) warped (the frame the pixels turn)."""
    out = planes.copy()
    for n in range(len(out)):
        out[n, :gh, :gw] = pil_warp(out[n, :gh, :gw], ws, fill)
    return out


def fwd_maps(ws, gw, gh):
    maps = []
    for kind, a, b in ws:
        if kind == "rotate":
            maps.append(detect_ref.rotate_map(a, gw, gh))
        elif kind == "affine":
            maps.append(detect_ref.affine_map(a["angle"], a["translate"], a["scale"], a["shear"],
                                              (gw / 2.0, gh / 2.0)))
        else:
            maps.append(detect_ref.aa_map(a, b, gw, gh))
    return maps


def warp_points(kp, ws, gw, gh):
    """Keypoints (n, K, 3) already placed and flipped through the forward maps; (0, 0, 0) once
    outside [0, gw] x [0, gh]."""
    k = np.asarray(kp, np.float64).copy()
    vis = k[..., 2] != 0
    for m in fwd_maps(ws, gw, gh):
        x = m[0, 0] * k[..., 0] + m[0, 1] * k[..., 1] + m[0, 2]
        y = m[1, 0] * k[..., 0] + m[1, 1] * k[..., 1] + m[1, 2]
        k[..., 0], k[..., 1] = x, y
        vis &= (x >= 0) & (x <= gw) & (y >= 0) & (y <= gh)
    return (k * vis[..., None]).astype(np.float32)


def frame(row, out_w, out_h, opts):
    if len(row) > 5 and ("multiscale" in opts or opts.get("list")):
        return int(row[11]), int(row[12])
    return out_w, out_h


def two_loaders(ds, seed, threads=2, **kw):
    """The same batches with numeric params (the placement) and with the ops (the warps)."""
    base = dict(targets=True, shuffle=True, seed=seed, flip=0.5, threads=threads, **kw)
    return (shardread.Loader(ds, return_params=True, **base),
            shardread.Loader(ds, return_params="ops", **base))


CASES = [
    ("rotation-pad", dict(size=72, pad=True, rotation=40)),
    ("quarter-turn", dict(size=(36, 44), pad=True, rotation=(90, 90))),
    ("rrc-affine", dict(size=(36, 44), rrc=(0.3, 1.0),
                        affine=dict(degrees=20, translate=(0.2, 0.1), scale=(0.7, 1.3),
                                    shear=(-15, 15, -5, 10)))),
    ("crop-rotation-affine", dict(size=40, random_crop=True, pad=True, rotation=25,
                                  affine=dict(degrees=0, translate=(0.3, 0.3)))),
    ("ta_wide", dict(size=40, rrc=True, auto_augment="ta_wide")),
    ("rand_augment", dict(size=48, pad=True, auto_augment=dict(policy="rand_augment",
                                                                 num_ops=3, magnitude=12))),
    ("imagenet", dict(size=40, pad=True, auto_augment="imagenet")),
    ("multi-list-affine", dict(multiscale=((32, 45, 64), 80), list=True,
                               affine=dict(degrees=30, scale=(0.8, 1.2)))),
    ("multi-pad-rotation", dict(multiscale=([40, 56], 72), pad_to=True, rotation=35)),
    ("jitter-ta", dict(scale_jitter=(48, (0.3, 1.8)), auto_augment="ta_wide")),
    ("letterbox-rotation", dict(letterbox=(40, 56), rotation=30)),
]


@pytest.mark.parametrize("name,opts", CASES, ids=[c[0] for c in CASES])
def test_masks_and_keypoints_follow_the_warps(seg, name, opts):
    ds = shardread.Dataset(seg)
    kw = {k: v for k, v in opts.items() if k != "list"}
    numeric, named = two_loaders(seg, 3, batch_size=5, flip_indices=FLIP, **kw)
    shape = numeric.info["shape"]
    seen = moved = emptied = kps = 0
    for epoch in range(EPOCHS):
        for (_, targets, indices, params), (_, t2, i2, ops) in zip(numeric, named):
            assert np.array_equal(indices, i2)
            for k, i in enumerate(indices):
                image, stored = ds[int(i)]
                row, got = params[k], targets[k]
                assert np.array_equal(got["masks"], t2[k]["masks"])
                out_h, out_w = got["size"] if opts.get("list") else shape[:2]
                gw, gh = frame(row, out_w, out_h, opts)
                ws = warps(ops[k])
                placed = sr.place(np.asarray(stored["masks"]), row, out_w, out_h, opts)
                masks = warp_frame(placed, ws, gw, gh, 0)
                _, _, keep = detect_ref.move_boxes(stored["boxes"], stored["area"],
                                                   (image.shape[1], image.shape[0]), ops[k])
                emptied += int((keep & ~sr.nonempty(masks)).sum())
                keep &= sr.nonempty(masks)
                m, kp = np.asarray(got["masks"]), np.asarray(got["keypoints"])
                assert m.shape == (int(keep.sum()), out_h, out_w), (name, int(i), ops[k])
                assert np.array_equal(m, masks[keep]), (name, int(i), ops[k])
                assert np.array_equal(np.asarray(got["labels"]),
                                      np.asarray(stored["labels"])[keep])
                assert got["dropped"] == len(keep) - int(keep.sum())
                want = sr.move_points(stored["keypoints"], stored["boxes"], row, out_w, out_h,
                                      opts)
                want = warp_points(want, ws, gw, gh)[keep]
                assert kp.shape == want.shape
                assert np.abs(kp - want).max(initial=0) <= 1e-4, (name, int(i), ops[k])
                kps += int((kp[..., 2] > 0).sum())
                seen += 1
                moved += bool(ws)
    assert seen == EPOCHS * len(ds) and kps > 0
    if "rotation" in opts or "affine" in opts:
        assert moved == seen
    else:
        assert 0 < moved < seen
    if name == "rrc-affine":
        assert emptied > 0          # boxes kept around masks the warps pushed out


LABEL_CASES = [
    ("rotation-pad", dict(size=72, pad=True, rotation=40)),
    ("rrc-affine", dict(size=(36, 44), rrc=(0.3, 1.0),
                        affine=dict(degrees=20, translate=(0.2, 0.1), scale=(0.7, 1.3),
                                    shear=10))),
    ("ta_wide", dict(size=40, rrc=True, auto_augment="ta_wide")),
    ("multi-list-rotation", dict(multiscale=((32, 45, 64), 80), list=True, rotation=30)),
    ("letterbox-rand_augment", dict(letterbox=(40, 56), auto_augment=dict(
        policy="rand_augment", num_ops=3, magnitude=12))),
]


def check_label_warps(ds, pngs, name, opts, epochs, dtype, **kw):
    """Every map of `epochs` epochs against the placement of its PNG (in dtype) through Pillow's
    NEAREST warps of the sample's ops; returns the maps seen."""
    kw.update({k: v for k, v in opts.items() if k != "list"})
    numeric, named = two_loaders(ds, 3, batch_size=3, **kw)
    shape = numeric.info["shape"]
    seen = moved = 0
    for epoch in range(epochs):
        for (_, maps, indices, params), (_, _, i2, ops) in zip(numeric, named):
            assert np.array_equal(indices, i2)
            for k, i in enumerate(indices):
                got = np.asarray(maps[k])
                out_h, out_w = got.shape if opts.get("list") else shape[:2]
                gw, gh = frame(params[k], out_w, out_h, opts)
                ws = warps(ops[k])
                placed = sl.place(pngs[int(i)], params[k], out_w, out_h, opts, dtype)
                want = warp_frame(placed[None], ws, gw, gh, sl.IGNORE)[0]
                assert got.dtype == dtype
                assert np.array_equal(got, want), (name, int(i), ops[k])
                seen += 1
                moved += bool(ws)
    assert moved > 0
    return seen


@pytest.mark.parametrize("name,opts", LABEL_CASES, ids=[c[0] for c in LABEL_CASES])
def test_label_maps_follow_the_warps(lab, name, opts):
    ds, pngs = lab
    assert check_label_warps(ds, pngs, name, opts, 2, np.uint8) == 2 * len(pngs)


WIDE_CASES = LABEL_CASES + [c for c in CASES if c[0] == "quarter-turn"]


@pytest.mark.parametrize("name,opts", WIDE_CASES, ids=[c[0] for c in WIDE_CASES])
def test_labels_above_255_follow_the_warps(wide, name, opts):
    """label_dtype='int64': 16-bit labels through the warps (their two bytes as two planes in
    C) equal Pillow's NEAREST on the 32-bit image."""
    ds, pngs = wide
    assert check_label_warps(ds, pngs, name, opts, 1, np.int64,
                             label_dtype="int64") == len(pngs)
    assert max(int(np.asarray(p).max()) for p in pngs) > 255


def flat_targets(loader):
    return [[np.asarray(images).tobytes()] + [
        (np.asarray(t["boxes"]).tobytes(), np.asarray(t["masks"]).tobytes(),
         np.asarray(t["keypoints"]).tobytes(), t["dropped"]) for t in targets]
        for images, targets in loader]


def test_same_batches_at_1_and_3_threads(seg, lab):
    kw = dict(batch_size=2, targets=True, shuffle=True, seed=5, flip=0.5, rrc=True, size=32,
              rotation=20, affine=dict(degrees=10, translate=(0.1, 0.1)),
              auto_augment="ta_wide")
    one = flat_targets(shardread.Loader(seg, threads=1, flip_indices=FLIP, **kw))
    three = flat_targets(shardread.Loader(seg, threads=3, flip_indices=FLIP, **kw))
    assert one == three and len(one) == 3
    a = [(np.asarray(i).tobytes(), np.asarray(m).tobytes())
         for i, m in shardread.Loader(lab[0], threads=1, **kw)]
    b = [(np.asarray(i).tobytes(), np.asarray(m).tobytes())
         for i, m in shardread.Loader(lab[0], threads=3, **kw)]
    assert a == b and len(a) > 3
