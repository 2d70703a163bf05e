#!/usr/bin/env python3
"""Make the shardread wheel: one file that `pip install` puts on any x86-64 Linux with glibc at
least as new as the build machine's, for every CPython >= 3.11, numpy 1 or 2.

    scripts/wheel.py --package build/python/shardread --version 0.1.0 --out build/dist/X.whl \
        --program build/bin/shardc --program build/bin/shardc-mksample     (make wheel runs it)

The package's C extensions (_shardread, the reader; _shardwrite, the writer) use the stable ABI
(tag cp311-abi3). Every shared library they need
beyond the C library is copied into shardread.libs/ under a name made unique by a hash of its
contents (libjpeg.so.62 -> libjpeg-1a2b3c4d.so.62), the references to it rewritten, and the
extension given RUNPATH $ORIGIN/../shardread.libs, with patchelf: what auditwheel does, so a
library of the same soname that another package loaded (Pillow's libjpeg, torch's libzstd) is
never mistaken for ours. Each --program (shardc, shardc-mksample) goes to shardread/bin/ the same
way (RUNPATH $ORIGIN/../../shardread.libs, its libraries joining the same closure) and becomes a
console script of the same name (entry_points.txt: shardread._cli runs the bundled binary), so
`pip install` puts `shardc` on the venv's PATH. The wheel's RECORD holds each file's sha256.
The wheel's figures are printed last, one line each, and kept in OUT.figures: its path, the
newest glibc symbol version its binaries need (the platform tag stays linux_x86_64: the wheel is
not checked against a manylinux policy), the number of bundled libraries and its size.
"""
import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

# the C library and the loader: always the target system's own
SYSTEM_LIBS = re.compile(r"^(linux-vdso|linux-gate|ld-linux[-.\w]*|libc|libm|libpthread|libdl|"
                         r"librt|libutil|libresolv|libpython[\d.]*)\.so")
TAG = "cp311-abi3-linux_x86_64"
EPOCH = (1980, 1, 1, 0, 0, 0)   # fixed member times: the same inputs give the same wheel


def run(*cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def ldd(path):
    """soname -> resolved path of every library path loads, directly or not."""
    out = {}
    for line in run("ldd", path).splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+)\s+\(", line)
        if m:
            out[m.group(1)] = m.group(2)
        elif "not found" in line:
            sys.exit(f"wheel: {path} needs {line.split()[0]}, which is not found")
    return out


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", path))


def glibc_needed(paths):
    best = (0,)
    for p in paths:
        for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", run("objdump", "-T", p)):
            best = max(best, tuple(int(x) for x in v.split(".")))
    return ".".join(map(str, best))


def unique_name(soname, path):
    with open(path, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, dot, rest = soname.partition(".so")
    return f"{stem}-{h}.so{rest}"


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", required=True, help="the built package directory (shardread/)")
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True, help="the .whl to write")
    ap.add_argument("--program", action="append", default=[],
                    help="an executable to bundle in shardread/bin/ as a console script")
    a = ap.parse_args()
    if shutil.which("patchelf") is None:
        sys.exit("wheel: patchelf is missing (scripts/deps.sh installs it)")
    ext_names = ("_shardread.abi3.so", "_shardwrite.abi3.so")
    exts = [os.path.join(a.package, n) for n in ext_names]
    for ext in exts:
        if not os.path.isfile(ext):
            sys.exit(f"wheel: {ext} missing (make python)")
    for prog in a.program:
        if not os.access(prog, os.X_OK):
            sys.exit(f"wheel: {prog} missing or not executable (make all)")

    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "shardread")
        libs = os.path.join(tmp, "shardread.libs")
        shutil.copytree(a.package, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.makedirs(libs)
        ext_copies = [os.path.join(pkg, n) for n in ext_names]
        prog_copies = []
        for prog in a.program:
            os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
            dst = os.path.join(pkg, "bin", os.path.basename(prog))
            shutil.copyfile(prog, dst)
            os.chmod(dst, 0o755)
            prog_copies.append(dst)

        # the closure of the extensions' and programs' libraries, less the system's
        resolved = {}
        for ext in exts + a.program:
            resolved.update({s: p for s, p in ldd(ext).items() if not SYSTEM_LIBS.match(s)})
        renamed = {s: unique_name(s, p) for s, p in resolved.items()}
        for soname, path in resolved.items():
            dst = os.path.join(libs, renamed[soname])
            shutil.copyfile(path, dst)
            os.chmod(dst, 0o755)
        elves = ext_copies + prog_copies + [os.path.join(libs, n) for n in renamed.values()]
        for f in elves:
            args = []
            for n in needed(f):
                if n in renamed:
                    args += ["--replace-needed", n, renamed[n]]
            if args:
                run("patchelf", *args, f)
        for soname, new in renamed.items():
            f = os.path.join(libs, new)
            run("patchelf", "--set-soname", new, f)
            run("patchelf", "--set-rpath", "$ORIGIN", f)
        for ext_copy in ext_copies:
            run("patchelf", "--set-rpath", "$ORIGIN/../shardread.libs", ext_copy)
        for prog_copy in prog_copies:
            run("patchelf", "--set-rpath", "$ORIGIN/../../shardread.libs", prog_copy)
        glibc = glibc_needed(elves)

        dist = f"shardread-{a.version}.dist-info"
        meta = {
            f"{dist}/METADATA": (
                "Metadata-Version: 2.1\n"
                "Name: shardread\n"
                f"Version: {a.version}\n"
                "Summary: Read datasets written by shardc (libshardread) from Python, numpy and "
                "PyTorch\n"
                "License: MIT\n"
                "Requires-Python: >=3.11\n"
                "Requires-Dist: numpy\n"),
            f"{dist}/WHEEL": (
                "Wheel-Version: 1.0\n"
                "Generator: shardc scripts/wheel.py\n"
                "Root-Is-Purelib: false\n"
                f"Tag: {TAG}\n"),
            f"{dist}/top_level.txt": "shardread\n",
        }
        if prog_copies:
            meta[f"{dist}/entry_points.txt"] = "[console_scripts]\n" + "".join(
                f"{n} = shardread._cli:{n.replace('-', '_')}\n"
                for n in sorted(os.path.basename(p) for p in prog_copies))
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        part = a.out + ".part"
        records = []
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            def add(name, data, mode=0o644):
                info = zipfile.ZipInfo(name, EPOCH)
                info.external_attr = (0o100000 | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
                records.append(f"{name},{record_hash(data)},{len(data)}")
            progs = {os.path.relpath(p, tmp) for p in prog_copies}
            for top in ("shardread", "shardread.libs"):
                for dirpath, dirnames, files in sorted(os.walk(os.path.join(tmp, top))):
                    dirnames.sort()
                    for name in sorted(files):
                        rel = os.path.relpath(os.path.join(dirpath, name), tmp)
                        with open(os.path.join(tmp, rel), "rb") as f:
                            data = f.read()
                        add(rel, data, 0o755 if name.endswith(".so") or ".so." in name
                            or rel in progs else 0o644)
            for name, text in meta.items():
                add(name, text.encode())
            rec = f"{dist}/RECORD"
            text = "\n".join(records + [f"{rec},,"]) + "\n"
            info = zipfile.ZipInfo(rec, EPOCH)
            info.external_attr = (0o100644) << 16
            z.writestr(info, text)
        os.replace(part, a.out)
    size = os.path.getsize(a.out)
    figures = (f"wheel: {a.out}\n"
          f"wheel: needs glibc >= {glibc}\n"
          f"wheel: {len(renamed)} bundled libraries\n"
          f"wheel: {size / 2**20:.1f} MiB ({size} bytes)\n"
          "wheel: console scripts: "
          f"{', '.join(sorted(os.path.basename(p) for p in a.program)) or 'none'}\n")
    with open(a.out + ".figures", "w") as f:     # make wheel prints them again when up to date
        f.write(figures)
    sys.stdout.write(figures)


if __name__ == "__main__":
    main()
