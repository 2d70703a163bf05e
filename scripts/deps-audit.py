#!/usr/bin/python3
"""Audit scripts/deps.sh against what the build, the tests and the scripts use (tests/e2e_deps.sh).

Run it with Debian's interpreter, /usr/bin/python3: Python modules are looked up as that
interpreter imports them.

    /usr/bin/python3 scripts/deps-audit.py [--root DIR] [--deps-sh FILE]

The deps.sh audited is --deps-sh, else $DEPS_SH, else ROOT/scripts/deps.sh. It is read, never
run: its arrays build_pkgs, bench_pkgs and fuzz_pkgs are parsed from the text.

Output, one line each: "ok TEXT", "bad TEXT" (a problem: the file, the header/module/name and the
package that owns it, or "no package owns it") and "note TEXT". Exit status 0 without problems,
1 with problems, 2 when the audit itself cannot run.

Rules (see tests/e2e_deps.sh for the why):
  pkg-config   each name in the Makefile's PKGS and TEST_PKGS resolves (pkg-config --path) and its
               .pc file is owned by a package that build_pkgs lists by name.
  headers      each system header that `cc -M` finds for compiler/, formats/, reader/, tests/ and
               scripts/*.c is owned by a package deps.sh installs: one it lists, or one those
               depend on (Depends/Pre-Depends, recursively, as apt installs them without
               recommends). build_pkgs counts for every file, fuzz_pkgs too for tests/fuzz/.
               libc6-dev, linux-libc-dev and gcc's libgcc-12-dev are reached this way through
               build-essential. CUDA (.cu files, /usr/local/cuda, cuda*/cublas* headers) is
               excluded: NVIDIA's toolkit is not a Debian package deps.sh could install.
  python       every import (stdlib too: Debian splits it into packages) in *.py files and in
               the python snippets of *.sh files under tests/ and scripts/ (and reader/python/)
               resolves, as /usr/bin/python3 finds it, to a file owned by a package deps.sh
               installs: build_pkgs (and its dependencies) for tests/ and reader/, build_pkgs and
               bench_pkgs for scripts/. The project's own modules (shardread, and any module whose
               .py file is in the repository) are exempt.
  tools        the commands the tests and the build run are owned by a package deps.sh installs.
"""
import argparse
import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

PROBLEMS = []


def ok(text):
    print("ok " + text)


def bad(text):
    PROBLEMS.append(text)
    print("bad " + text)


def note(text):
    print("note " + text)


def die(text):
    print("bad deps-audit: " + text)
    sys.exit(2)


# ---- scripts/deps.sh: its package arrays ----

def parse_deps_sh(path):
    """name -> list of packages, from `name=( ... )` and `name+=( ... )` in the text."""
    try:
        text = open(path).read()
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    arrays = {}
    for m in re.finditer(r"^[ \t]*([A-Za-z_]\w*)(\+?)=\(", text, re.M):
        name, append = m.group(1), m.group(2)
        i, words, word, in_comment = m.end(), [], "", False
        while i < len(text):
            c = text[i]
            if in_comment:
                if c == "\n":
                    in_comment = False
            elif c == "#" and word == "":
                in_comment = True
            elif c == ")":
                break
            elif c.isspace():
                if word:
                    words.append(word)
                word = ""
            else:
                word += c
            i += 1
        if word:
            words.append(word)
        out = []
        for w in words:
            ref = re.fullmatch(r'"?\$\{(\w+)\[@\]\}"?', w)
            if ref:
                out += arrays.get(ref.group(1), [])
            elif re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", w):
                out.append(w)
            else:
                die(f"{path}: array {name}: cannot read the word {w!r}")
        arrays[name] = (arrays.get(name, []) if append else []) + out
    return arrays


# ---- the dpkg database ----

class Dpkg:
    def __init__(self):
        fmt = "${Package}\t${db:Status-Status}\t${Provides}\t${Pre-Depends}\t${Depends}\n"
        r = subprocess.run(["dpkg-query", "-W", "-f", fmt], capture_output=True, text=True)
        if r.returncode != 0 and not r.stdout:
            die("dpkg-query -W failed: " + r.stderr.strip())
        self.installed = set()
        self.provides = {}
        self.depends = {}
        for line in r.stdout.splitlines():
            f = line.split("\t")
            if len(f) != 5 or f[1] != "installed":
                continue
            pkg = f[0]
            self.installed.add(pkg)
            for p in self.relations(f[2]):
                self.provides.setdefault(p[0], set()).add(pkg)
            self.depends.setdefault(pkg, []).extend(self.relations(f[3]) + self.relations(f[4]))

    @staticmethod
    def relations(field):
        """'a (>= 1) | b:any, c' -> [['a', 'b'], ['c']]"""
        out = []
        for group in field.split(","):
            alts = []
            for alt in group.split("|"):
                name = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip().split(":")[0]
                if name:
                    alts.append(name)
            if alts:
                out.append(alts)
        return out

    def closure(self, roots):
        """the listed packages and what they depend on, as installed here: for an a|b
        dependency the first installed alternative (or installed provider of it)"""
        seen = set(roots)
        # a listed name that an installed package provides (deps.sh counts it present): that one
        for r in roots:
            if r not in self.installed:
                seen.update(self.provides.get(r, ()))
        todo = [p for p in seen if p in self.installed]
        while todo:
            for alts in self.depends.get(todo.pop(), []):
                pick = None
                for a in alts:
                    if a in self.installed:
                        pick = [a]
                    elif a in self.provides:
                        pick = sorted(self.provides[a])
                    if pick:
                        break
                for p in pick or []:
                    if p not in seen:
                        seen.add(p)
                        todo.append(p)
        return seen


def path_variants(p):
    out = [p, os.path.normpath(p)]
    real = os.path.realpath(p)
    out.append(real)
    for q in list(out):
        for a, b in (("/usr/lib/", "/lib/"), ("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/")):
            if q.startswith(a):
                out.append(b + q[len(a):])
            elif q.startswith(b):
                out.append(a + q[len(b):])
    seen = []
    for q in out:
        if q not in seen:
            seen.append(q)
    return seen


def owners(paths):
    """path -> set of packages that own it (the path itself, its real path or its /usr-merged
    twin), empty when no package owns it. One dpkg -S for them all."""
    variants = {p: path_variants(p) for p in paths}
    allv = sorted({v for vs in variants.values() for v in vs})
    found = {}
    for i in range(0, len(allv), 500):
        r = subprocess.run(["dpkg-query", "-S"] + allv[i:i + 500], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.startswith("diversion by"):
                continue
            k = line.find(": /")
            if k < 0:
                continue
            pkgs = {x.strip().split(":")[0] for x in line[:k].split(",")}
            found.setdefault(line[k + 2:], set()).update(pkgs)
    return {p: set().union(*(found.get(v, set()) for v in variants[p])) for p in paths}


# ---- sources ----

SKIP_DIRS = {".git", "__pycache__", "node_modules"}


def walk(root, sub, exts):
    base = os.path.join(root, sub)
    out = []
    for d, dirs, files in os.walk(base):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith(("build", ".")))
        out += [os.path.relpath(os.path.join(d, f), root)
                for f in sorted(files) if f.endswith(exts)]
    return out


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def more(items):
    items = sorted(set(items))
    return items[0] + (f" (+{len(items) - 1} more)" if len(items) > 1 else "")


def make_value(root, var):
    """a variable's value as make sees it (a build directory of its own, nothing else written)"""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["make", "-s", "--no-print-directory", "-C", root, "BUILD=" + tmp,
                            "--eval", "print-deps-audit-%: ; @echo $($*)", "print-deps-audit-" + var],
                           capture_output=True, text=True, env=env)
    return r.stdout.split() if r.returncode == 0 else None


def makefile_pkgs(root):
    path = os.path.join(root, "Makefile")
    try:
        lines = open(path).read().replace("\\\n", " ").splitlines()
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    vals = {}
    for line in lines:
        m = re.match(r"^(PKGS|TEST_PKGS)\s*(:{0,2}=|\+=|\?=)\s*(.*)$", line)
        if m:
            words = m.group(3).split("#")[0].split()
            if any("$" in w for w in words):
                words = make_value(root, m.group(1))
                if words is None:
                    bad(f"Makefile: cannot read {m.group(1)} (make cannot print it): {m.group(3)}")
                    continue
                vals[m.group(1)] = words
                continue
            vals[m.group(1)] = (vals.get(m.group(1), []) if m.group(2) == "+=" else []) + words
    for v in ("PKGS", "TEST_PKGS"):
        if not vals.get(v):
            bad(f"Makefile: no {v} := line with pkg-config names (the audit reads them from it)")
    return vals


CUDA_HEADER = re.compile(r"^(cuda|cublas|cufft|curand|cusparse|cusolver|cudnn|nvrtc|nvtx|"
                         r"nvToolsExt|npp|"
                         r"thrust/|cub/|crt/|device_|driver_|vector_types|host_defines)")


def is_cuda(path):
    """an NVIDIA toolkit header: under /usr/local/cuda*, or (when not found) named like one"""
    if os.path.isabs(path):
        return any(p.startswith("/usr/local/cuda") for p in (path, os.path.realpath(path)))
    return CUDA_HEADER.match(path) is not None


def check_pkgconfig(root, vals, build_list):
    names = vals.get("PKGS", []) + vals.get("TEST_PKGS", [])
    pcs = {}
    for n in names:
        r = subprocess.run(["pkg-config", "--path", n], capture_output=True, text=True)
        p = r.stdout.strip()
        if r.returncode != 0 or not p:
            var = "PKGS" if n in vals.get("PKGS", []) else "TEST_PKGS"
            bad(f"Makefile {var}: pkg-config name {n}: no {n}.pc found (pkg-config --path {n} fails): "
                f"no package owns it")
        else:
            pcs[n] = p
    own = owners(list(pcs.values()))
    good = 0
    for n, p in pcs.items():
        var = "PKGS" if n in vals.get("PKGS", []) else "TEST_PKGS"
        o = own[p]
        if not o:
            bad(f"Makefile {var}: pkg-config name {n}: {p}: no package owns it")
        elif not o & set(build_list):
            bad(f"Makefile {var}: pkg-config name {n}: {p} belongs to {', '.join(sorted(o))}, "
                f"which scripts/deps.sh build_pkgs does not list")
        else:
            good += 1
    if names and good == len(names):
        ok(f"pkg-config: {plural(good, 'name')} of PKGS and TEST_PKGS, each .pc owned by a "
           f"package build_pkgs lists")
    return [n for n in names if n in pcs]


def python_includes(py):
    r = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                       capture_output=True, text=True)
    flags = ["-I" + r.stdout.strip()] if r.returncode == 0 and r.stdout.strip() else []
    r = subprocess.run([py, "-c", "import numpy; print(numpy.get_include())"], capture_output=True,
                       text=True)
    if r.returncode == 0 and r.stdout.strip():
        flags.append("-I" + r.stdout.strip())
    return flags


def mpi_includes():
    if shutil.which("mpicc"):
        r = subprocess.run(["mpicc", "--showme:compile"], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split()
    for n in ("ompi-c", "mpi"):
        r = subprocess.run(["pkg-config", "--cflags", n], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split()
    return []


def check_headers(root, pc_names, allow_build, allow_fuzz):
    srcs = []
    for sub in ("compiler", "formats", "pixels", "remote", "reader", "programs", "tests"):
        srcs += walk(root, sub, ".c")
    srcs += sorted(os.path.relpath(os.path.join(root, "scripts", f), root)
                   for f in os.listdir(os.path.join(root, "scripts")) if f.endswith(".c"))
    cus = [f for sub in ("compiler", "formats", "reader", "programs", "tests")
           for f in walk(root, sub, ".cu")]
    flags = ["-D_GNU_SOURCE", '-DSHARDC_VERSION="0"', "-Iformats", "-Ipixels", "-Iremote", "-Icompiler",
             "-Ireader", "-Iinclude", "-Iprograms", "-Iprograms/shardbench", "-Itests/tools"]
    for n in pc_names:  # each on its own: one unknown name must not drop the others' flags
        r = subprocess.run(["pkg-config", "--cflags", n], capture_output=True, text=True)
        flags += r.stdout.split()
    flags += python_includes("/usr/bin/python3") + mpi_includes()
    cc = os.environ.get("CC_AUDIT", "cc")

    def deps(src):
        r = subprocess.run([cc, "-M", "-MG", "-std=c11", "-pthread"] + flags + [src], cwd=root,
                           capture_output=True, text=True)
        return src, r

    direct = {}
    for src in srcs:
        try:
            text = open(os.path.join(root, src), errors="replace").read()
        except OSError:
            continue
        direct[src] = set(re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', text, re.M))

    # header path -> {source files}, and what each source names directly
    used = {}
    missing = {}
    with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as ex:
        for src, r in ex.map(deps, srcs):
            if r.returncode != 0:
                err = (r.stderr.strip().splitlines() or ["(no message)"])[0]
                bad(f"{src}: {cc} -M fails: {err}")
                continue
            body = r.stdout.replace("\\\n", " ")
            body = body.split(":", 1)[1] if ":" in body else ""
            for dep in body.split()[1:]:
                if os.path.isabs(dep):
                    if dep.startswith(root + "/"):
                        continue
                    if is_cuda(dep):
                        continue
                    used.setdefault(dep, set()).add(src)
                elif os.path.exists(os.path.join(root, dep)) or os.path.exists(
                        os.path.join(root, os.path.dirname(src), dep)):
                    continue  # the project's own header
                elif not is_cuda(dep):
                    missing.setdefault(dep, set()).add(src)

    for h, files in sorted(missing.items()):
        bad(f"{more(files)}: header <{h}> is not found on this machine: no package owns it")

    own = owners(list(used))
    # group by owning package: one line per package deps.sh lacks
    lacking = {}
    for h, files in sorted(used.items()):
        o = own[h]
        if not o:
            bad(f"{more(files)}: header {h}: no package owns it")
            continue
        nonfuzz = {f for f in files if not f.startswith("tests/fuzz/")}
        fuzz = files - nonfuzz
        if (nonfuzz and not o & allow_build) or (fuzz and not o & allow_fuzz):
            key = ", ".join(sorted(o))
            lacking.setdefault(key, []).append((h, files))
    for pkg, items in sorted(lacking.items()):
        files = set().union(*(f for _, f in items))
        # name a header that a source includes by name, when there is one
        named = [(h, f) for h, f in items
                 if any(h.endswith("/" + d) for s in f for d in direct.get(s, ()))]
        h, f = (named or items)[0]
        shown = next((d for s in sorted(f) for d in direct.get(s, ()) if h.endswith("/" + d)), None)
        what = f"<{shown}> ({h}" if shown else f"{h} ("
        extra = f", +{len(items) - 1} more of its headers)" if len(items) > 1 else ")"
        what = (what + extra).replace(" ()", "")
        bad(f"{more(files)}: header {what} belongs to {pkg}, which scripts/deps.sh does not install "
            f"(not listed, nor a dependency of a listed package)")
    if not missing and not lacking and all(own[h] for h in used):
        ok(f"headers: {plural(len(used), 'system header')} of {plural(len(srcs), 'C file')}, each "
           f"owned by a package deps.sh installs (cc -M; CUDA excluded: {plural(len(cus), '.cu file')})")


# ---- python ----

PY_CMD = re.compile(r"(python[0-9.]*|\$\{?PY\w*\}?|\$\{?py\}?)[\"']?\s", re.I)


def shell_snippets(text):
    """(line, code) of the python in a shell script: heredocs fed to a python and -c '...'"""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.search(r"(?<!<)<<-?(?!<)\s*(['\"]?)(\w+)\1", line)
        if m and (re.search(r"py", m.group(2), re.I) or PY_CMD.search(line[:m.start()] + " ")):
            delim, body, j = m.group(2), [], i + 1
            while j < len(lines) and lines[j].strip() != delim:
                body.append(lines[j])
                j += 1
            out.append((i + 2, "\n".join(body)))
            i = j + 1
            continue
        i += 1
    py_c = re.compile(r"(?:python[0-9.]*|\$\{?PY\w*\}?|\$\{?py\}?)[\"']?\s+-c\s+"
                      r"(?:'([^']*)'|\"((?:[^\"\\]|\\.)*)\")", re.I)
    for m in py_c.finditer(text):
        code = m.group(1) if m.group(1) is not None else re.sub(r"\\(.)", r"\1", m.group(2))
        out.append((text.count("\n", 0, m.start()) + 1, code))
    return out


def imports_of(code, first_line=1):
    """(line, top-level module) of each absolute import"""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        out = []
        for k, line in enumerate(code.split("\n")):
            for stmt in line.split(";"):
                m = re.match(r"\s*import\s+([\w., ]+)", stmt)
                if m:
                    out += [(first_line + k, x.strip().split(" ")[0].split(".")[0])
                            for x in m.group(1).split(",") if x.strip()]
                m = re.match(r"\s*from\s+(\w+)", stmt)
                if m:
                    out.append((first_line + k, m.group(1)))
        return out
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(first_line + node.lineno - 1, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((first_line + node.lineno - 1, node.module.split(".")[0]))
    return out


def module_file(name):
    """the file /usr/bin/python3 imports for a top-level module: a path, 'built-in', or None"""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin in ("built-in", "frozen"):
        return "built-in"
    if spec.origin and os.path.isabs(spec.origin):
        return spec.origin
    locs = list(spec.submodule_search_locations or [])
    return locs[0] if locs else None


def check_python(root, dpkg, allow_build, allow_scripts, bench_installed):
    # the project's own modules
    own_mods = {"shardread", "__future__"}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(("build", "."))]
        own_mods.update(f[:-3] for f in files if f.endswith(".py"))
        if "__init__.py" in files:
            own_mods.add(os.path.basename(d))

    uses = []  # (file, line, module)
    nfiles = 0
    for sub in ("tests", "scripts", os.path.join("reader", "python")):
        for f in walk(root, sub, (".py", ".sh", ".sbatch")):
            try:
                text = open(os.path.join(root, f), errors="replace").read()
            except OSError:
                continue
            if f.endswith(".py"):
                found = imports_of(text)
            else:
                found = [x for ln, code in shell_snippets(text) for x in imports_of(code, ln)]
            if found:
                nfiles += 1
            uses += [(f, ln, m) for ln, m in found if m not in own_mods]

    # resolve as /usr/bin/python3 does, without the directory of this script on sys.path
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") not in (here, os.getcwd())]
    files = {m: module_file(m) for m in sorted({m for _, _, m in uses})}
    own = owners([p for p in files.values() if p and p != "built-in"])

    groups = {}
    for f, ln, m in uses:
        groups.setdefault((m, f.startswith("scripts/")), []).append(f"{f}:{ln}")
    good = 0
    for (m, in_scripts), where in sorted(groups.items()):
        allow = allow_scripts if in_scripts else allow_build
        which = "build_pkgs or bench_pkgs" if in_scripts else "build_pkgs"
        p = files[m]
        if p == "built-in":
            good += 1
        elif p is None:
            if in_scripts and not bench_installed:
                note(f"{more(where)}: module {m} is not importable by /usr/bin/python3 and bench_pkgs "
                     f"are not all installed (scripts/deps.sh --bench): not checked")
            else:
                bad(f"{more(where)}: module {m} is not importable by /usr/bin/python3: "
                    f"no package owns it")
        elif not own[p]:
            bad(f"{more(where)}: module {m} ({p}): no package owns it")
        elif not own[p] & allow:
            bad(f"{more(where)}: module {m} ({p}) belongs to {', '.join(sorted(own[p]))}, which "
                f"scripts/deps.sh ({which}) does not install")
        else:
            good += 1
    if good == len(groups):
        ok(f"python: {plural(len(files), 'module')} imported by {plural(nfiles, 'file')} in tests/, "
           f"scripts/ and reader/python/, each owned by a package deps.sh installs")


# ---- tools ----

TOOLS = ["cc", "make", "pkg-config", "djpeg", "h5dump", "mdb_stat", "mpicc", "mpirun", "gnuplot",
         "patchelf", "python3", "zip", "unzip", "zstd", "xz", "nginx", "openssl", "node",
         "npm"]


def check_tools(root, allow_build):
    texts = {}
    scanned = ["Makefile"] + walk(root, "tests", (".sh", ".py")) + walk(root, "scripts", (".sh", ".py"))
    for f in scanned:
        if f in ("scripts/deps-audit.py", "tests/e2e_deps.sh"):
            continue
        try:
            texts[f] = open(os.path.join(root, f), errors="replace").read()
        except OSError:
            pass

    def user(word):
        pat = re.compile(r"(?<![\w.-])" + re.escape(word) + r"(?![\w-])")
        hits = [f for f, t in texts.items() if pat.search(t)]
        return more(hits) if hits else "tests/e2e_deps.sh (tool list)"

    paths = {}
    for t in TOOLS:
        p = "/usr/bin/python3" if t == "python3" else (
            shutil.which(t) or shutil.which(t, path="/usr/sbin:/sbin"))
        if not p or not os.path.exists(p):
            bad(f"{user(t)}: tool {t}: not on PATH: no package owns it")
        else:
            paths[t] = p
    # python3 -m venv: Debian ships the venv module in libpython3.X-stdlib, and ensurepip, without
    # which `python3 -m venv` fails, in python3.X-venv
    venv = {m: module_file(m) for m in ("venv", "ensurepip")}
    for m, p in venv.items():
        if p is None:
            bad(f"{user('venv')}: python3 -m venv: module {m} is not importable by /usr/bin/python3: "
                f"no package owns it")
        else:
            paths["python3 -m venv (" + m + ")"] = p
    own = owners(list(paths.values()))
    good = 0
    for t, p in paths.items():
        o = own[p]
        u = user("venv" if t.startswith("python3 -m") else t)
        if not o:
            bad(f"{u}: tool {t} ({p}): no package owns it")
        elif not o & allow_build:
            bad(f"{u}: tool {t} ({p}) belongs to {', '.join(sorted(o))}, which scripts/deps.sh "
                f"build_pkgs does not install")
        else:
            good += 1
    if good == len(TOOLS) + 2:
        ok(f"tools: {', '.join(TOOLS)} and python3 -m venv, each owned by a package deps.sh "
           f"installs")


def main():
    ap = argparse.ArgumentParser(description="audit scripts/deps.sh")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--deps-sh", default=os.environ.get("DEPS_SH") or None)
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    deps_sh = a.deps_sh or os.path.join(root, "scripts", "deps.sh")
    os.chdir(root)

    arrays = parse_deps_sh(deps_sh)
    build, bench, fuzz = (arrays.get(n, []) for n in ("build_pkgs", "bench_pkgs", "fuzz_pkgs"))
    if not build:
        die(f"{deps_sh}: no build_pkgs=( ... ) array")
    dpkg = Dpkg()
    absent = [p for p in build if p not in dpkg.installed and p not in dpkg.provides]
    for p in absent:
        bad(f"{deps_sh}: build_pkgs lists {p}, which is not installed here (run scripts/deps.sh)")
    for name, lst in (("bench_pkgs", bench), ("fuzz_pkgs", fuzz)):
        out = [p for p in lst if p not in dpkg.installed]
        if out:
            note(f"{name} not installed here ({' '.join(out)}): their dependencies are not counted")
    allow_build = dpkg.closure(build)
    allow_fuzz = dpkg.closure(build + fuzz)
    allow_scripts = dpkg.closure(build + bench)
    ok(f"{os.path.relpath(deps_sh, root) if deps_sh.startswith(root + '/') else deps_sh}: "
       f"build_pkgs {len(build)}, bench_pkgs {len(bench)}, fuzz_pkgs {len(fuzz)} packages "
       f"({len(allow_build)} with the build packages' dependencies)")

    vals = makefile_pkgs(root)
    pc_names = check_pkgconfig(root, vals, build)
    check_headers(root, pc_names, allow_build, allow_fuzz)
    check_python(root, dpkg, allow_build, allow_scripts, all(p in dpkg.installed for p in bench))
    check_tools(root, allow_build)
    sys.exit(1 if PROBLEMS else 0)


if __name__ == "__main__":
    main()
