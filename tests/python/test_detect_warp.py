"""Detection boxes through the warps (reader/shardread.h "Targets"): RandomRotation,
RandomAffine (each of degrees, translate, scale, shear) and auto_augment ('ta_wide',
'rand_augment', 'imagenet'), after the crop / pad, RandomResizedCrop or a scale op and the flip.
Every delivered box, area, label and drop count against the NumPy reference of the documented
arithmetic (tests/ref/detect_ref.py move_boxes) fed each sample's Loader(return_params="ops")
list, to 1e-4 pixel; the reference's maps against torchvision's own matrix; and the pixels: on
black images with one filled rectangle per box (a grey level per box), every pixel of a box's
level lands inside the delivered box (within 1 px), and the box is tight around them."""
import json
import os
import sys

import numpy as np
import pytest

import shardread
from conftest import SHARDC, build_detection, run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ref"))
import detect_ref  # noqa: E402

try:
    from PIL import Image
except ImportError:  # pragma: no cover - scripts/deps.sh installs python3-pil
    Image = None

EPOCHS = 6
GEOMETRIC_AA = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")


@pytest.fixture(scope="module")
def det(tmp_path_factory):
    return build_detection(tmp_path_factory.mktemp("detwarp"), 9)


def warped(ops):
    """The ops of a sample that move its boxes (rotate, affine, geometric auto_augment ops)."""
    return [op for op in ops if op[0] in ("rotate", "affine") or
            (op[0] == "auto_augment_op" and op[1]["op_name"] in GEOMETRIC_AA)]


CASES = [
    ("rotation", dict(size=48, pad=True, rotation=40)),
    ("rotation-rrc", dict(size=(40, 56), rrc=(0.3, 1.0), rotation=(-180, 180))),
    ("quarter-turn", dict(size=(36, 44), pad=True, rotation=(90, 90))),
    ("affine-degrees", dict(size=40, pad=True, affine=dict(degrees=35))),
    ("affine-translate", dict(size=40, random_crop=True, pad=True,
                              affine=dict(degrees=0, translate=(0.3, 0.2)))),
    ("affine-scale", dict(size=44, pad=True, affine=dict(degrees=0, scale=(0.5, 1.6)))),
    ("affine-shear", dict(size=40, pad=True, affine=dict(degrees=0, shear=(-25, 25, -10, 15)))),
    ("affine-all", dict(size=48, pad=True, rotation=15, min_box_area_fraction=0.4,
                        affine=dict(degrees=20, translate=(0.1, 0.1), scale=(0.8, 1.2),
                                    shear=10))),
    ("ta_wide", dict(size=40, rrc=True, auto_augment="ta_wide")),
    ("rand_augment", dict(size=48, pad=True, auto_augment=dict(policy="rand_augment",
                                                                 num_ops=3, magnitude=12))),
    ("imagenet", dict(size=40, pad=True, auto_augment="imagenet",
                      augment_interpolation="bilinear", dtype="float32")),
    ("letterbox-rotation", dict(letterbox=(40, 56), rotation=30, auto_augment="ta_wide")),
    ("multiscale-affine", dict(multiscale=((32, 48), 64), pad_to=True,
                               affine=dict(degrees=25, translate=(0.2, 0.2), scale=(0.7, 1.3)))),
]


@pytest.mark.parametrize("name,opts", CASES, ids=[c[0] for c in CASES])
def test_boxes_follow_the_warps(det, name, opts):
    ds = shardread.Dataset(det)
    loader = shardread.Loader(det, batch_size=5, targets=True, return_params="ops",
                              shuffle=True, seed=4, flip=0.5, threads=2, **opts)
    seen = moved = flips = dropped = 0
    for epoch in range(EPOCHS):
        for images, targets, indices, ops in loader:
            for k, i in enumerate(indices):
                image, stored = ds[int(i)]
                want_b, want_a, keep = detect_ref.move_boxes(
                    stored["boxes"], stored["area"], (image.shape[1], image.shape[0]), ops[k],
                    opts.get("min_box_area_fraction", 0.0))
                got = targets[k]
                assert got["boxes"].shape == want_b.shape, (name, int(i), ops[k])
                assert np.allclose(got["boxes"], want_b, atol=1e-4), (name, int(i), ops[k],
                                                                       got["boxes"], want_b)
                assert np.allclose(got["area"], want_a, rtol=1e-5), (name, int(i))
                assert np.array_equal(got["labels"], np.asarray(stored["labels"])[keep])
                assert got["dropped"] == len(keep) - int(keep.sum())
                h, w = images[k].shape[:2]
                b = got["boxes"]
                assert ((b[:, 0] >= 0) & (b[:, 2] <= w) & (b[:, 1] >= 0) & (b[:, 3] <= h)).all()
                seen += 1
                moved += bool(warped(ops[k]))
                flips += any(op[0] == "hflip" for op in ops[k])
                dropped += got["dropped"]
    assert seen == EPOCHS * len(ds) and 0 < flips < seen
    if "auto_augment" in opts and not ("rotation" in opts or "affine" in opts):
        assert 0 < moved < seen     # some samples drew a geometric op, some did not
    else:
        assert moved == seen
    if name in ("affine-translate", "affine-all"):
        assert dropped > 0          # boxes pushed out, or keeping too little


def test_rotation_and_affine_always_move(det):
    """rotation and affine run on every sample; the params agree with the ops."""
    base = dict(batch_size=6, targets=True, shuffle=True, seed=2, size=40, pad=True, rotation=20,
                affine=dict(degrees=10, translate=(0.1, 0.1)))
    numeric = shardread.Loader(det, return_params=True, **base)
    named = shardread.Loader(det, return_params="ops", **base)
    for (_, ta, ia, _), (_, tb, ib, ob) in zip(numeric, named):
        assert np.array_equal(ia, ib)
        for k in range(len(ia)):
            assert [op[0] for op in warped(ob[k])] == ["rotate", "affine"]
            assert np.array_equal(ta[k]["boxes"], tb[k]["boxes"])


@pytest.mark.parametrize("angle,translate,scale,shear,center", [
    (30.0, (3, -2), 1.2, (10.0, -5.0), (20.0, 16.0)),
    (-75.5, (0, 0), 0.7, (0.0, 0.0), (0.0, 0.0)),
    (0.0, (5, 1), 1.0, (-20.0, 12.0), (24.5, 8.0)),
])
def test_affine_map_is_the_inverse_of_torchvisions_matrix(angle, translate, scale, shear,
                                                           center):
    """The reference's forward map inverts the matrix torchvision hands Pillow (the pixels'
    sampling), and torchvision's own forward matrix is the same."""
    F = pytest.importorskip("torchvision.transforms.functional")
    inv = np.array(F._get_inverse_affine_matrix(list(center), angle, list(translate), scale,
                                                list(shear))).reshape(2, 3)
    fwd = detect_ref.affine_map(angle, translate, scale, shear, center)
    both = np.vstack([fwd, [0, 0, 1]]) @ np.vstack([inv, [0, 0, 1]])
    assert np.allclose(both, np.eye(3), atol=1e-12)
    tv = np.array(F._get_inverse_affine_matrix(list(center), angle, list(translate), scale,
                                               list(shear), inverted=False)).reshape(2, 3)
    assert np.allclose(fwd, tv, atol=1e-12)


# ---- the pixels: boxes around what moved ----

LEVELS = (80, 160, 240)      # category id k + 1 is drawn at LEVELS[k]


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    """A detection dataset of black images (40..64 pixels a side) with up to three filled
    non-overlapping rectangles, category k + 1 at grey level LEVELS[k], the box exactly the
    rectangle's pixels; stored as drawn (no resize)."""
    if Image is None:
        pytest.skip("Pillow is not installed")
    root = tmp_path_factory.mktemp("blocks")
    src = root / "img"
    src.mkdir()
    rng = np.random.default_rng(12)
    images, anns = [], []
    for n in range(18):
        w, h = int(rng.integers(40, 65)), int(rng.integers(40, 65))
        px = np.zeros((h, w, 3), np.uint8)
        bands = np.linspace(0, w, 4).astype(int)          # one vertical band per rectangle
        for k in range(3 if n % 3 else 2):
            x0 = int(rng.integers(bands[k], bands[k + 1] - 6))
            x1 = int(rng.integers(x0 + 5, bands[k + 1]))
            y0 = int(rng.integers(0, h - 8))
            y1 = int(rng.integers(y0 + 6, h))
            px[y0:y1, x0:x1] = LEVELS[k]
            anns.append(dict(id=len(anns) + 1, image_id=n + 1, category_id=k + 1,
                             bbox=[x0, y0, x1 - x0, y1 - y0], area=(x1 - x0) * (y1 - y0),
                             iscrowd=0))
        name = "%03d.png" % n
        Image.fromarray(px).save(str(src / name))
        images.append(dict(id=n + 1, file_name=name, width=w, height=h))
    ann = root / "ann.json"
    ann.write_text(json.dumps(dict(images=images, annotations=anns,
                                   categories=[dict(id=k + 1, name="c%d" % k) for k in
                                               range(3)])))
    out = str(root / "ds")
    run(SHARDC, "build", str(src), "--coco", str(ann), "-o", out, "--no-progress", "-j", "2")
    return out


PIXEL_CASES = [
    ("rotation", dict(size=56, pad=True, rotation=(-180, 180))),
    ("affine", dict(size=48, pad=True, affine=dict(degrees=30, translate=(0.15, 0.15),
                                                   scale=(0.7, 1.3), shear=(-15, 15, -15, 15)))),
    ("rotation-affine", dict(size=52, pad=True, rotation=25,
                             affine=dict(degrees=0, shear=20, scale=(0.8, 1.1)))),
    ("ta_wide", dict(size=48, pad=True, auto_augment=dict(policy="ta_wide",
                                                          num_magnitude_bins=31))),
]


@pytest.mark.parametrize("name,opts", PIXEL_CASES, ids=[c[0] for c in PIXEL_CASES])
def test_boxes_enclose_the_moved_pixels(blocks, name, opts):
    loader = shardread.Loader(blocks, batch_size=6, targets=True, return_params="ops",
                              shuffle=True, seed=7, flip=0.5, **opts)
    checked = tight = single = 0
    for epoch in range(4):
        for images, targets, indices, ops in loader:
            for k in range(len(indices)):
                img = images[k][:, :, 0]
                t = targets[k]
                if opts.get("auto_augment"):
                    names = [op[1]["op_name"] for op in ops[k] if op[0] == "auto_augment_op"]
                    if not set(names) <= set(GEOMETRIC_AA) | {"Identity"}:
                        continue        # a colour op changes the levels
                for box, label in zip(t["boxes"], t["labels"]):
                    ys, xs = np.nonzero(img == LEVELS[int(label) - 1])
                    if len(xs) == 0:
                        continue        # every pixel of it left the image
                    x1, y1, x2, y2 = (float(v) for v in box)
                    # every pixel of the object (the square [x, x + 1]) inside the box, 1 px
                    # allowed
                    assert xs.min() >= x1 - 1 and xs.max() + 1 <= x2 + 1, (name, box, ops[k])
                    assert ys.min() >= y1 - 1 and ys.max() + 1 <= y2 + 1, (name, box, ops[k])
                    checked += 1
                    # and, after a single warp that left the box whole, tight around them (a
                    # further warp encloses the enclosing box again, and a box cut by the edge
                    # is the clipped enclosing box, as torchvision.transforms.v2 has them)
                    inside = x1 > 0 and y1 > 0 and x2 < img.shape[1] and y2 < img.shape[0]
                    if len(warped(ops[k])) == 1 and inside:
                        slack = max(xs.min() - x1, x2 - xs.max() - 1,
                                    ys.min() - y1, y2 - ys.max() - 1)
                        tight += slack <= 1.5
                        single += 1
                # every object still in the image has its box
                for level, label in zip(LEVELS, range(1, 4)):
                    if (img == level).sum() > 2:
                        assert label in set(int(v) for v in t["labels"]), (name, ops[k])
    assert checked > 40
    assert tight == single, (tight, single)
    if name != "rotation-affine":
        assert single > 20
