"""shardc build --augment with rotate=, affine=, hue= and gray=: every stored variant equals
torchvision's functional ops on the PIL image (resized_crop, hflip, rotate or affine, adjust_hue,
rgb_to_grayscale) applied with the parameters `shardc info --sample I --json` reports, for RGB
and one-channel builds of images of many sizes, nearest and bilinear warps; a hue factor
whose shift rounds to 0 still makes Pillow's HSV round trip."""
import json
import os
import subprocess

import numpy as np
import pytest
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode

from conftest import MKSAMPLE, SHARDC, run


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    root = tmp_path_factory.mktemp("build_augment")
    path = os.path.join(str(root), "src")
    run(MKSAMPLE, path, "--classes", "2", "--per-class", "6", "--no-broken", "--quiet",
        "--seed", "11")
    return str(root), path


def build(root, path, name, spec, *opts):
    out = os.path.join(root, name)
    run(SHARDC, "build", path, "-o", out, "--size", "40x32", "--augment", "5", "--aug", spec,
        "--seed", "4", "--no-progress", "-j", "2", *opts)
    return out


def stored(ds, i):
    """Sample i's pixels (shardc cat writes a PPM or PGM) as an h x w x c array."""
    data = subprocess.run([SHARDC, "cat", ds, str(i)], capture_output=True, check=True).stdout
    magic, dims, _, px = data.split(b"\n", 3)
    w, h = map(int, dims.split())
    return np.frombuffer(px, np.uint8).reshape(h, w, 3 if magic == b"P6" else 1)


def reference(info, mode):
    p = info["params"]
    img = Image.open(info["path"]).convert(mode)
    x, y, w, h = p["crop"]
    img = F.resized_crop(img, y, x, h, w, [32, 40], InterpolationMode.BILINEAR)
    if p["flip"]:
        img = F.hflip(img)
    how = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}
    if p["rotate"] is not None:
        img = F.rotate(img, p["rotate"]["degrees"], how[p["rotate"]["filter"]], fill=0)
    a = p["affine"]
    if a is not None:
        img = F.affine(img, a["degrees"], a["translate"], a["scale"], a["shear"],
                       how[a["filter"]], fill=0)
    if p["hue"] is not None:
        img = F.adjust_hue(img, p["hue"])
    if p["grayscale"]:
        img = F.rgb_to_grayscale(img, num_output_channels=len(img.getbands()))
    a = np.asarray(img, dtype=np.uint8)
    return a[:, :, None] if a.ndim == 2 else a


def check_all(ds, mode):
    n = json.load(open(os.path.join(ds, "manifest.json")))["samples"]
    seen = {"hue": 0, "gray": 0, "flip": 0, "shift0": 0, "rotate": 0, "affine": 0, "moved": 0}
    for i in range(n):
        info = json.loads(subprocess.run([SHARDC, "info", ds, "--sample", str(i), "--json"],
                                         capture_output=True, check=True, text=True).stdout)
        p = info["params"]
        got, want = stored(ds, i), reference(info, mode)
        assert got.shape == want.shape and np.array_equal(got, want), (i, p)
        seen["hue"] += p["hue"] is not None
        seen["gray"] += p["grayscale"]
        seen["flip"] += p["flip"]
        seen["rotate"] += p["rotate"] is not None
        seen["affine"] += p["affine"] is not None
        seen["moved"] += p["affine"] is not None and p["affine"]["translate"] != [0, 0]
        seen["shift0"] += p["hue"] is not None and int(p["hue"] * 255) == 0
    return n, seen


def test_hue_and_gray_variants_equal_torchvision(src):
    root, path = src
    ds = build(root, path, "rgb", "rrc=0.2:1,flip,rotate=40,hue=0.5,gray=0.3")
    n, seen = check_all(ds, "RGB")
    assert n == 60 and seen["hue"] == n and seen["rotate"] == n
    assert 0 < seen["gray"] < n and 0 < seen["flip"] < n


def test_bilinear_rotations_equal_torchvision(src):
    root, path = src
    ds = build(root, path, "bilinear", "rotate=180:bilinear,flip")
    n, seen = check_all(ds, "RGB")
    assert seen["rotate"] == n and 0 < seen["flip"] < n


@pytest.mark.parametrize("how", ["", ":bilinear"])
def test_affine_variants_equal_torchvision(src, how):
    root, path = src
    # RandomAffine(30, (0.2, 0.2), (0.7, 1.3), 20): rotation, translation, scale and shear
    ds = build(root, path, "affine" + how[1:], "rrc=0.3:1,flip,affine=30:0.2:0.7:1.3:20" + how +
               ",hue=0.1")
    n, seen = check_all(ds, "RGB")
    assert n == 60 and seen["affine"] == n and seen["rotate"] == 0 and seen["moved"] > n // 2
    assert 0 < seen["flip"] < n
    info = json.loads(subprocess.run([SHARDC, "info", ds, "--sample", "0", "--json"],
                                     capture_output=True, check=True, text=True).stdout)
    assert info["params"]["affine"]["filter"] == ("bilinear" if how else "nearest")
    # every record is version 3, 96 bytes; the replay re-applies them
    for i in (0, 7, 59):
        subprocess.run([SHARDC, "cat", ds, str(i), "--replay"], capture_output=True, check=True)


def test_affine_on_gray_builds(src):
    root, path = src
    ds = build(root, path, "affine-gray", "affine=45:0.3:0.5:2:40:bilinear", "--gray")
    n, seen = check_all(ds, "L")
    assert n == 60 and seen["affine"] == n


def test_a_hue_shift_of_zero_still_round_trips(src):
    root, path = src
    # |f| < 1/255: np.uint8(f * 255) is 0, yet adjust_hue still converts to HSV and back
    ds = build(root, path, "tiny", "hue=0.003")
    n, seen = check_all(ds, "RGB")
    assert seen["shift0"] == n
    plain = build(root, path, "plain", "none")
    assert any(not np.array_equal(stored(ds, i), stored(plain, i)) for i in range(n))


def test_gray_builds_are_left_as_they_are(src):
    root, path = src
    ds = build(root, path, "gray", "flip,rotate=25:bilinear,hue=0.5,gray=0.5", "--gray")
    n, seen = check_all(ds, "L")
    assert n == 60 and 0 < seen["gray"] < n and seen["rotate"] == n


def test_spec_errors_name_the_operation(src):
    root, path = src
    for spec, words in (("hue=0.7", "hue expects a strength in 0..0.5"),
                        ("rotate=200", "rotate expects degrees in 0..180"),
                        ("rotate=10:bicubic", "rotate expects degrees in 0..180"),
                        ("gray=2", "gray expects a probability in 0..1"),
                        ("affine=15:0.1:0.9:1.1", "affine expects D:T:SMIN:SMAX:SH"),
                        ("rotate=10,affine=10:0:1:1:0", "rotate and affine are alternatives")):
        r = subprocess.run([SHARDC, "build", path, "-o", os.path.join(root, "bad"), "--size",
                            "40x32", "--augment", "2", "--aug", spec, "--no-progress"],
                           capture_output=True, text=True)
        assert r.returncode == 2 and words in r.stderr, (spec, r.returncode, r.stderr)
        assert not os.path.exists(os.path.join(root, "bad"))
