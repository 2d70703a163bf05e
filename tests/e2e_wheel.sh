#!/usr/bin/env bash
# End to end: the wheel (make wheel) stands alone. It is tagged cp311-abi3; its extension uses no
# numpy C API (no PyArray_ / _ARRAY_API symbol) and only the stable ABI's symbols of libpython;
# every library it needs but the C library resolves inside the wheel (shardread.libs/, through
# RUNPATH, with no LD_LIBRARY_PATH); and installed with pip into a fresh virtual environment
# (--system-site-packages for numpy, torch and Pillow), the whole Python suite (tests/python)
# passes against the installed package, run from outside the repository. The programs come with
# it: `shardc` and `shardc-mksample` are the venv's console scripts running the bundled binaries
# (their libraries inside the wheel too), and with no build tree on PATH they make, build and
# describe a small COCO detection set that a Loader then reads. make wheel prints the figures
# the docs refer to (glibc, bundled libraries, size).
. "$(dirname "$0")/lib.sh"

PY=${SHARDC_PYTHON:-/usr/bin/python3}
case "$BUILD" in
  *address*|*thread*)
    # a sanitizer build's extension needs its runtime preloaded; the plain build covers the wheel
    echo "  (the wheel is tested in the plain build only)"; exit 77 ;;
esac

make --no-print-directory -C "$ROOT" BUILD="$BUILD" wheel >"$T/wheel.log" 2>&1
check "make wheel" test -f "$ROOT/$BUILD/dist/shardread-0.1.0-cp311-abi3-linux_x86_64.whl"
grep '^wheel: ' "$T/wheel.log" | sed 's/^/       /'
check "make wheel prints the glibc it needs, the bundled libraries and the size" bash -c "
  grep -Eq '^wheel: needs glibc >= 2\.[0-9]+\$' '$T/wheel.log' &&
  grep -Eq '^wheel: [0-9]+ bundled libraries\$' '$T/wheel.log' &&
  grep -Eq '^wheel: [0-9.]+ MiB \([0-9]+ bytes\)\$' '$T/wheel.log'"
WHL=$(ls "$ROOT/$BUILD"/dist/shardread-*-cp311-abi3-linux_x86_64.whl | head -1)
check "the printed size is the wheel's" grep -q "^wheel: .* MiB ($(stat -c %s "$WHL") bytes)\$" \
  "$T/wheel.log"

mkdir "$T/unz"
(cd "$T/unz" && python3 -m zipfile -e "$WHL" .)
EXT="$T/unz/shardread/_shardread.abi3.so"
check "the wheel's WHEEL file says cp311-abi3" grep -qx 'Tag: cp311-abi3-linux_x86_64' \
  "$T/unz/shardread-0.1.0.dist-info/WHEEL"
check "the wheel holds the type stubs and py.typed" test -f "$T/unz/shardread/__init__.pyi" \
  -a -f "$T/unz/shardread/py.typed"

# no numpy C API: its functions are reached through _ARRAY_API / PyArray_* names
if nm -D "$EXT" | grep -E 'PyArray_|_ARRAY_API' >"$T/np"; then
  bad "the extension uses the numpy C API: $(head -3 "$T/np" | tr '\n' ' ')"
else
  ok "no numpy C API symbol in the extension"
fi
# every Python symbol it takes is in the stable ABI's list for 3.11 (CPython's Misc/stable_abi:
# the names python3.so exports)
abi3_so=$("$PY" -c 'import sysconfig, os; d = sysconfig.get_config_var("LIBDIR"); print(os.path.join(d, "libpython3.so")) if os.path.exists(os.path.join(d, "libpython3.so")) else print("")')
nm -D --undefined-only "$EXT" | awk '{print $2}' | grep -E '^_?Py' | sed 's/@.*//' | sort -u >"$T/uses"
check "the extension calls into libpython ($(wc -l <"$T/uses") symbols)" test -s "$T/uses"
if [ -n "$abi3_so" ]; then
  nm -D --defined-only "$abi3_so" | awk '{print $3}' | sort -u >"$T/abi3"
  if comm -23 "$T/uses" "$T/abi3" >"$T/extra" && [ -s "$T/extra" ]; then
    bad "symbols outside the stable ABI: $(tr '\n' ' ' <"$T/extra")"
  else
    ok "every libpython symbol the extension uses is in the stable ABI (libpython3.so)"
  fi
else
  # Debian ships no libpython3.so: no underscore name but the stable ABI's own (the abi_only
  # entries of CPython's Misc/stable_abi.toml that the limited API's macros call)
  abi_only='^(_Py_Dealloc|_Py_(None|True|False|NotImplemented)Struct|_Py_EllipsisObject|_Py_IncRef|_Py_DecRef|_PyArg_(Parse|ParseTuple|ParseTupleAndKeywords|BuildValue|VaParse|VaParseTupleAndKeywords)_SizeT|_Py_BuildValue_SizeT|_Py_VaBuildValue_SizeT|_PyObject_(CallFunction|CallMethod)_SizeT|_PyObject_New|_PyObject_NewVar|_PyErr_BadInternalCall)$'
  if grep -E '^_Py' "$T/uses" | grep -vE "$abi_only" >"$T/extra" ||
     grep -E '^(PyUnicode_AsUTF8|PyTuple_GET_ITEM|PyList_SET_ITEM|PyArray_.*)$' "$T/uses" >>"$T/extra"; [ -s "$T/extra" ]; then
    bad "symbols outside the stable ABI: $(tr '\n' ' ' <"$T/extra")"
  else
    ok "no private (_Py) or non-stable libpython symbol in the extension"
  fi
fi

# the libraries of an ldd listing (file $1) that resolve outside the wheel, each with its path,
# the C library's left out
libs_outside() {
  awk '$2 == "=>" {print $1, $3}' "$1" | while read -r n p; do echo "$n $(readlink -f "$p")"; done |
    grep -vE '^(libc|libm|libpthread|libdl|librt|libutil|libresolv|ld-linux[^ ]*)\.so' |
    grep -v " $T/unz/shardread.libs/" || true
}

# ldd of the binary $1 into the file $2: every library it needs resolves, inside the wheel or
# the C library's; $3 and $4 name the binary in the messages ("X libraries ...", "... of Y")
libs_inside() {
  env -u LD_LIBRARY_PATH ldd "$1" >"$2" 2>&1
  local outside
  outside=$(libs_outside "$2")
  if grep -q 'not found' "$2" || [ -n "$outside" ]; then
    bad "$3 libraries do not all resolve inside the wheel: $(grep 'not found' "$2" | tr '\n' ' ')$outside"
  else
    ok "every library of $4 but glibc's resolves inside shardread.libs"
  fi
}

# every NEEDED library resolves inside the wheel, or is the C library's
env -u LD_LIBRARY_PATH ldd "$EXT" >"$T/ldd" 2>&1
if grep -q 'not found' "$T/ldd"; then
  bad "unresolved libraries: $(grep 'not found' "$T/ldd" | tr '\n' ' ')"
else
  ok "ldd resolves every library of the extension"
fi
outside=$(libs_outside "$T/ldd")
if [ -n "$outside" ]; then
  bad "libraries resolved outside the wheel: $outside"
else
  ok "every library but glibc's resolves inside shardread.libs ($(ls "$T/unz/shardread.libs" | wc -l) bundled)"
fi
check "the extension's RUNPATH is \$ORIGIN/../shardread.libs" \
  bash -c "readelf -d '$EXT' | grep -q 'RUNPATH.*\\\$ORIGIN/../shardread.libs'"

# the writer's extension (_shardwrite: the compiler's pipeline): the same rules
WEXT="$T/unz/shardread/_shardwrite.abi3.so"
check "the wheel holds the writer's extension" test -f "$WEXT"
if nm -D "$WEXT" | grep -E 'PyArray_|_ARRAY_API' >"$T/np"; then
  bad "the writer's extension uses the numpy C API"
else
  ok "no numpy C API symbol in the writer's extension"
fi
nm -D --undefined-only "$WEXT" | awk '{print $2}' | grep -E '^_?Py' | sed 's/@.*//' | sort -u >"$T/wuses"
if [ -n "$abi3_so" ]; then
  comm -23 "$T/wuses" "$T/abi3" >"$T/wextra"
else
  grep -E '^_Py' "$T/wuses" | grep -vE "$abi_only" >"$T/wextra"
fi
if [ -s "$T/wextra" ]; then
  bad "the writer's extension uses symbols outside the stable ABI: $(tr '\n' ' ' <"$T/wextra")"
else
  ok "the writer's extension uses the stable ABI only"
fi
libs_inside "$WEXT" "$T/wldd" "the writer's" "the writer's extension"

# the programs: in shardread/bin/, executable, every library inside the wheel, and named as
# console scripts
for prog in shardc shardc-mksample; do
  P="$T/unz/shardread/bin/$prog"
  check "the wheel holds $prog" test -f "$P"
  libs_inside "$P" "$T/pldd" "$prog's" "$prog"
done
check "entry_points.txt names shardc and shardc-mksample as console scripts" bash -c "
  grep -qx 'shardc = shardread._cli:shardc' '$T/unz/shardread-0.1.0.dist-info/entry_points.txt' &&
  grep -qx 'shardc-mksample = shardread._cli:shardc_mksample' \
    '$T/unz/shardread-0.1.0.dist-info/entry_points.txt'"

# installed into a fresh venv and tested from outside the repository
if ! "$PY" -m venv --system-site-packages "$T/venv" >"$T/venv.log" 2>&1; then
  bad "python3 -m venv: $(tail -1 "$T/venv.log") (scripts/deps.sh installs python3-venv)"
  finish; exit
fi
VPY="$T/venv/bin/python"
env -u PYTHONPATH "$VPY" -m pip install -q --no-index --no-deps "$WHL" >"$T/pip.log" 2>&1
rc=$?
check "pip install --no-index the wheel into a fresh venv" test $rc -eq 0
where=$(cd "$T" && env -u PYTHONPATH "$VPY" -c 'import shardread; print(shardread.__file__)' 2>&1)
case "$where" in
  "$T/venv/"*) ok "the venv imports the installed package ($where)" ;;
  *) bad "the venv imports shardread from elsewhere: $where"; sed 's/^/       /' "$T/pip.log" ;;
esac

# the console scripts, with only the venv and the system on PATH (no build tree): a small COCO
# detection set made, built, described and read
VENV_PATH="$T/venv/bin:/usr/bin:/bin"
vrun() { (cd "$T" && env -u PYTHONPATH -u LD_LIBRARY_PATH PATH="$VENV_PATH" "$@"); }
check "shardc on the venv's PATH is its console script" \
  test "$(vrun sh -c 'command -v shardc')" = "$T/venv/bin/shardc"
expect_exit 0 "shardc --version from the venv" vrun shardc --version
expect_exit 0 "shardc-mksample --coco from the venv" vrun shardc-mksample "$T/coco" --coco \
  "$T/coco.json" --per-class 8 --min-side 40 --max-side 80 --seed 3 --quiet
expect_exit 0 "shardc build --coco from the venv" vrun shardc build "$T/coco" --coco "$T/coco.json" \
  -o "$T/det" --size 48x40 --fit pad -j2 --no-progress
vrun shardc info "$T/det" --targets >"$T/det.jsonl" 2>"$T/det.err"
check "shardc info --targets from the venv: one line per image, orig_size (h, w) as annotated" \
  "$VPY" -c '
import json, sys
coco = json.load(open(sys.argv[1]))
t = [json.loads(l) for l in open(sys.argv[2])]
ims = sorted(coco["images"], key=lambda im: im["file_name"])
assert len(t) == len(ims) == 8, (len(t), len(ims))
assert [x["orig_size"] for x in t] == [[im["height"], im["width"]] for im in ims], t
assert sum(len(x["labels"]) + x["dropped"] for x in t) == len(coco["annotations"]), t
' "$T/coco.json" "$T/det.jsonl"
check "a Loader from the venv reads the detection set the venv's shardc built" vrun "$VPY" -c '
import json, sys, shardread
t = [json.loads(l) for l in open(sys.argv[2])]
n = 0
for images, targets in shardread.Loader(sys.argv[1], batch_size=4, targets=True, shuffle=False):
    assert images.shape == (4, 40, 48, 3), images.shape
    for tg in targets:
        assert [int(v) for v in tg["orig_size"]] == t[n]["orig_size"], (tg, t[n])
        assert [int(v) for v in tg["labels"]] == t[n]["labels"], (tg, t[n])
        n += 1
assert n == 8, n
' "$T/det" "$T/det.jsonl"

# the Python suite against the installed package: tests copied out of the repository, the
# fixtures built by this build's shardc (and the NumPy references they import from tests/)
cp -r "$ROOT/tests/python" "$T/pytests"
cp -r "$ROOT/tests/ref" "$T/ref"
(cd "$T/pytests" && env -u PYTHONPATH BUILD="$ROOT/$BUILD" PYTHONDONTWRITEBYTECODE=1 \
  SHARDREAD_ROOT="$ROOT" "$VPY" -m pytest -q -rfEs -p no:cacheprovider . >"$T/pytest.log" 2>&1)
rc=$?
tail -3 "$T/pytest.log" | sed 's/^/       /'
if [ $rc -eq 0 ]; then ok "tests/python passes against the installed wheel"; else
  bad "tests/python against the installed wheel (pytest exit $rc)"; grep -E '^(FAILED|ERROR)' "$T/pytest.log" | head; fi

finish
