"""Differential test of archives as inputs: an archive builds the dataset of the tree it extracts
into, label for label, name for name and pixel for pixel.

Random trees (seeded) with hostile but legal names: UTF-8 class and file names, spaces, quotes,
leading '-', hidden files and folders, a class folder holding only hidden files, deep nesting,
non-image files. Each is written as tar, tar.gz, tar.xz, tar.zst (Python's tarfile, zstd) and
zip (Python's zipfile) with members in shuffled order, spelled as archivers store them ("./a",
"a/./b", "a//b"), with folder entries for some folders only, and with earlier decoys of some
files (another image under another spelling of the same path: extraction keeps the later
member); and as a zip written by Info-ZIP from the tree on disk. Each archive is extracted the
way a user would (GNU tar, Python's zipfile, unzip), and `shardc build ARCHIVE` must equal
`shardc build EXTRACTED` (both in the C locale) in exit status, classes, sample names and labels,
pixels and rejects; the classes and names must also be the tree's own.
"""
import io
import os
import random
import shutil
import subprocess
import tarfile
import warnings
import zipfile

import numpy as np
import pytest

import shardread
from conftest import MKSAMPLE, SHARDC

TOOLS = ("tar", "zip", "unzip", "zstd", "xz")

CLASS_NAMES = ["caf\u00e9", "na\u00efve dir", "\u65e5\u672c\u8a9e", "a b", "-dash", "Z",
               "\U0001f600 emoji", "dot.name", "q'uote #1", "tr\u00e9s  two spaces",
               "\u00fcn\u00ef c\u00f6d\u00e9", "x-y_z"]
FILE_STEMS = ["1", "\u00e9t\u00e9", "a b", "-x", "\u00df", "z'q", "00", "\u0434\u0430"]
SUBS = ["", "", "sub/", "\u00e0 l\u00e0/", "s p/a c e/"]


def env(locale):
    e = dict(os.environ)
    e["LC_ALL"] = locale
    return e


def need_tools():
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: scripts/deps.sh installs them")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """Tiny images by extension: {".jpg": [bytes, ...], ".png": [...], ".bmp": [...]}."""
    need_tools()
    d = str(tmp_path_factory.mktemp("pool") / "src")
    subprocess.run([MKSAMPLE, d, "--classes", "3", "--per-class", "6", "--no-broken", "--quiet",
                    "--min-side", "8", "--max-side", "20", "--seed", "9"], check=True)
    out = {}
    for root, _, names in os.walk(d):
        for n in sorted(names):
            with open(os.path.join(root, n), "rb") as f:
                out.setdefault(os.path.splitext(n)[1], []).append(f.read())
    assert all(len(v) >= 2 for v in out.values()) and len(out) == 3
    return out


def make_tree(rng, pool):
    """files {path: bytes} (normalised paths), empty folders, and the expected classes."""
    classes = rng.sample(CLASS_NAMES, 5)
    files, empty = {}, []
    exts = sorted(pool)
    for c in classes[:3]:
        for _ in range(rng.randint(1, 4)):
            ext = rng.choice(exts)
            p = c + "/" + rng.choice(SUBS) + rng.choice(FILE_STEMS) + ext
            files[p] = rng.choice(pool[ext])
        files[c + "/notes.txt"] = b"not an image"
        files[c + "/.hidden.jpg"] = pool[".jpg"][0]
    # deep nesting, hidden folders, a hidden class, a file at the top
    deep = classes[0] + "/" + "/".join("d%d" % i for i in range(rng.randint(8, 20))) + "/deep.png"
    files[deep] = pool[".png"][1]
    files[classes[1] + "/.cache/x.jpg"] = pool[".jpg"][1]
    files[".hidden class/1.jpg"] = pool[".jpg"][0]
    files["top.jpg"] = pool[".jpg"][1]
    # a class folder holding only hidden files, and an empty one
    files[classes[3] + "/.DS_Store"] = b"\0\0\0\1Bud1"
    files[classes[3] + "/._x.jpg"] = b"AppleDouble"
    empty.append(classes[4])
    return files, empty, sorted(classes, key=lambda s: s.encode())


def spell(rng, path):
    """path as an archiver may store it."""
    parts = path.split("/")
    k = rng.randrange(4)
    if k == 1:
        return "./" + path
    if k == 2 and len(parts) > 1:
        i = rng.randrange(1, len(parts))
        return "/".join(parts[:i]) + "/./" + "/".join(parts[i:])
    if k == 3 and len(parts) > 1:
        i = rng.randrange(1, len(parts))
        return "/".join(parts[:i]) + "//" + "/".join(parts[i:])
    return path


def members(rng, files, empty, pool):
    """[(name, data or None for a folder)] in the order written: shuffled, spelled, with decoys
    (another image under another spelling, earlier) and folder entries for some folders."""
    order = sorted(files)
    rng.shuffle(order)
    out = [(spell(rng, p), files[p]) for p in order]
    images = [p for p in order if not os.path.basename(p).startswith(".")
              and os.path.splitext(p)[1] in pool]
    for p in rng.sample(images, min(3, len(images))):
        decoy = next(b for b in pool[os.path.splitext(p)[1]] if b != files[p])
        at = next(i for i, (n, _) in enumerate(out) if os.path.normpath(n) == p)
        out.insert(rng.randint(0, at), (spell(rng, p), decoy))
    for d in empty:
        out.insert(rng.randint(0, len(out)), (spell(rng, d) + "/", None))
    # some folders of files get an entry, never the hidden-only one (its files make it a folder)
    for p in rng.sample(order, 2):
        if "/" in p and not os.path.basename(p).startswith("."):
            out.insert(rng.randint(0, len(out)), (spell(rng, p.rsplit("/", 1)[0]) + "/", None))
    return out


def write_tar(path, mode, mem, fmt):
    with tarfile.open(path, mode, format=fmt) as t:
        for name, data in mem:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if data is None:
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


def write_zip(path, mem):
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        warnings.simplefilter("ignore")     # "Duplicate name"
        for name, data in mem:
            zi = zipfile.ZipInfo(name, (2023, 11, 14, 22, 13, 20))
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, b"" if data is None else data)


def build(src, out):
    r = subprocess.run([SHARDC, "build", src, "-o", out, "--no-progress", "-j", "2"],
                       env=env("C"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return r.returncode, r.stderr.decode(errors="replace")


def rows(path, prefix):
    """(label, name) of inputs.tsv and (name, reason) of rejects.tsv, less the source prefix."""
    def strip(p):
        assert p.startswith(prefix), (p, prefix)
        return p[len(prefix):]
    with open(os.path.join(path, "inputs.tsv"), encoding="utf-8") as f:
        inputs = [ln.rstrip("\n").split("\t") for ln in f][1:]
    with open(os.path.join(path, "rejects.tsv"), encoding="utf-8") as f:
        rejects = [ln.rstrip("\n").split("\t") for ln in f][1:]
    return [(int(r[1]), strip(r[2])) for r in inputs], [(strip(r[0]), r[1]) for r in rejects]


def walk_key(p):
    """The folder walk's order: component by component, bytewise."""
    return [c.encode() for c in p.split("/")]


def expected(files, classes):
    """(label, name) the tree gives: images under non-hidden folders of each class."""
    out = []
    for p in files:
        parts = p.split("/")
        if len(parts) < 2 or any(c.startswith(".") for c in parts):
            continue
        if os.path.splitext(p)[1].lower() in (".jpg", ".png", ".bmp"):
            out.append((classes.index(parts[0]), p))
    return sorted(out, key=lambda lp: (lp[0], walk_key(lp[1])))


def same_datasets(a, b, what):
    da, db = shardread.Dataset(a), shardread.Dataset(b)
    assert da.classes == db.classes, what
    assert len(da) == len(db), what
    for i in range(len(da)):
        xa, la = da[i]
        xb, lb = db[i]
        assert la == lb, f"{what}: sample {i}: label {la} vs {lb}"
        assert xa.shape == xb.shape and np.array_equal(xa, xb), f"{what}: sample {i}: pixels"
    return da


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_archive_builds_like_its_extracted_tree(tmp_path, pool, seed):
    rng = random.Random(seed)
    files, empty, classes = make_tree(rng, pool)
    want = expected(files, classes)
    mem = members(rng, files, empty, pool)
    fmt = (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT)[seed % 2]
    t = str(tmp_path)
    arcs = {}     # archive name -> how to extract it
    write_tar(os.path.join(t, "t.tar"), "w", mem, fmt)
    write_tar(os.path.join(t, "t.tar.gz"), "w:gz", mem, fmt)
    write_tar(os.path.join(t, "t.tar.xz"), "w:xz", mem, fmt)
    with open(os.path.join(t, "t.tar"), "rb") as f, open(os.path.join(t, "t.tar.zst"), "wb") as g:
        subprocess.run(["zstd", "-q", "-c"], stdin=f, stdout=g, check=True)
    for a in ("t.tar", "t.tar.gz", "t.tar.xz", "t.tar.zst"):
        arcs[a] = "tar"
    write_zip(os.path.join(t, "py.zip"), mem)
    arcs["py.zip"] = "zipfile"
    # Info-ZIP from the tree on disk; -D (no folder entries) on odd seeds: no empty class then
    tree = os.path.join(t, "tree")
    for p, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(tree, p)), exist_ok=True)
        with open(os.path.join(tree, p), "wb") as f:
            f.write(data)
    for d in empty:
        os.makedirs(os.path.join(tree, d))
    izip = os.path.join(t, "info.zip")
    subprocess.run(["zip", "-q", "-r"] + (["-D"] if seed % 2 else []) + [izip, "."], cwd=tree,
                   env=env("C.UTF-8"), check=True)
    arcs["info.zip"] = "unzip"

    for a, how in arcs.items():
        arc, ex = os.path.join(t, a), os.path.join(t, "x-" + a)
        os.mkdir(ex)
        if how == "tar":
            subprocess.run(["tar", "-xf", arc, "-C", ex], env=env("C.UTF-8"), check=True)
        elif how == "zipfile":
            with zipfile.ZipFile(arc) as z:
                z.extractall(ex)
        else:
            subprocess.run(["unzip", "-q", "-o", arc, "-d", ex], env=env("C.UTF-8"), check=True)
        oa, ob = os.path.join(t, "o-" + a), os.path.join(t, "o-x-" + a)
        ra, ea = build(arc, oa)
        rb, eb = build(ex, ob)
        what = f"seed {seed}, {a}"
        assert (ra, rb) == (0, 0), f"{what}: exit {ra} ({ea}) vs {rb} ({eb})"
        ia, ja = rows(oa, arc + "!")
        ib, jb = rows(ob, ex + "/")
        assert ia == ib, f"{what}: samples differ from the extracted tree's"
        assert ja == jb == [], f"{what}: rejects {ja} vs {jb}"
        da = same_datasets(oa, ob, what)
        # and both are the tree's own: its classes (the empty one only where a folder entry
        # keeps it), its names, each image the later member of its path
        keep = [c for c in classes if not (c in empty and a == "info.zip" and seed % 2)]
        assert da.classes == keep, what
        assert ia == [(keep.index(classes[lab]), p) for lab, p in want], what
