"""Fixtures of the shardread tests: real datasets built at test time by the shardc binaries of
the build under test ($BUILD, default build/), from synthetic images of many sizes."""
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
SHARDC = os.path.join(BUILD, "bin", "shardc")
MKSAMPLE = os.path.join(BUILD, "bin", "shardc-mksample")

N_SAMPLES = 23
NO_SKIP = os.environ.get("SHARDC_NO_SKIP") == "1"


def _fail_skip(rep):
    """Under SHARDC_NO_SKIP=1 (.ci/run) a test skipped for want of its reference (torch,
    torchvision, Pillow, pip) fails instead; a skip whose reason says "not applicable" (no CUDA
    device, a sanitizer build) stays one."""
    if not (NO_SKIP and rep.skipped) or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if "not applicable" not in reason:
        rep.outcome = "failed"
        rep.longrepr = f"skipped, and SHARDC_NO_SKIP=1 makes a skip a failure: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip(outcome.get_result())


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def mksample_list(root, classes, per_class, seed, name="list.txt"):
    """Images from shardc-mksample in root/src (classes x per_class, no broken files) and its
    list of them, root/name: (the image folder, the list's path, its rows [path, label])."""
    d = os.path.join(root, "src")
    lst = os.path.join(root, name)
    run(MKSAMPLE, d, "--classes", str(classes), "--per-class", str(per_class), "--no-broken",
        "--quiet", "--list", lst, "--seed", str(seed))
    with open(lst) as f:
        rows = [ln.split() for ln in f if ln.strip()]
    return d, lst, rows


def crop_boxes(boxes, p, out_w, out_h, rrc):
    """Stored boxes (n, 4) moved as the reader moves them by a crop or pad (x - p.x +
    (out_w - p.w) // 2, likewise y) or by RandomResizedCrop's scale ((x - p.x) * out_w / p.w)
    into the out_w x out_h output, then clipped to it: float64, before any flip; p a
    return_params row, (x, y, w, h) its first four values."""
    x, y, w, h = (int(v) for v in p[:4])
    b = np.asarray(boxes, np.float64).reshape(-1, 4).copy()
    if rrc:
        b[:, [0, 2]] = (b[:, [0, 2]] - x) * (out_w / w)
        b[:, [1, 3]] = (b[:, [1, 3]] - y) * (out_h / h)
    else:
        b[:, [0, 2]] += -x + (out_w - w) // 2
        b[:, [1, 3]] += -y + (out_h - h) // 2
    b[:, [0, 2]] = b[:, [0, 2]].clip(0, out_w)
    b[:, [1, 3]] = b[:, [1, 3]].clip(0, out_h)
    return b


def build_detection(root, seed):
    """A detection dataset under root: shardc-mksample --coco shapes (6 images a class, the
    seed's), built with --max-side 64; returns its path."""
    src, ann, out = (os.path.join(str(root), x) for x in ("shapes", "shapes.json", "ds"))
    run(MKSAMPLE, src, "--coco", ann, "--per-class", "6", "--seed", str(seed))
    run(SHARDC, "build", src, "--coco", ann, "-o", out, "--max-side", "64", "--no-progress",
        "-j", "2")
    return out


class Fixtures:
    """Paths of the fixture datasets, and the list they were built from."""

    def __init__(self, root):
        self.root = str(root)
        src, _, lines = mksample_list(self.root, 3, 8, 5, "list-all.txt")
        # a shuffled list: labels do not follow the sample order
        random.Random(3).shuffle(lines)
        lines = lines[:N_SAMPLES]
        self.list_labels = [int(lab) for _, lab in lines]
        lst = os.path.join(self.root, "list.txt")
        with open(lst, "w") as f:
            f.writelines(f"{p} {lab}\n" for p, lab in lines)
        self.fixed = self.build("fixed", src, lst, "--size", "24x20")
        self.gray = self.build("gray", src, lst, "--size", "24x20", "--gray")
        self.var = self.build("var", src, lst, "--max-side", "40")
        self.var_gray = self.build("var_gray", src, lst, "--max-side", "40", "--gray")

    def build(self, name, src, lst, *opts):
        out = os.path.join(self.root, name)
        run(SHARDC, "build", src, "--list", lst, "-o", out, "--shard-samples", "7", "-j", "2",
            "--no-progress", *opts)
        return out

    def copy(self, which, name):
        """A copy of a fixture dataset, to damage."""
        dst = os.path.join(self.root, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(getattr(self, which), dst)
        return dst


@pytest.fixture(scope="session")
def fx(tmp_path_factory):
    if not os.access(SHARDC, os.X_OK):
        pytest.fail(f"{SHARDC} not found: build first (make all)")
    return Fixtures(tmp_path_factory.mktemp("shardread"))
