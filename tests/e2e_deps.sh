#!/usr/bin/env bash
# The dependency list is complete: everything the build, the tests and the scripts use comes from
# a Debian package that scripts/deps.sh installs, so a package missing from it fails here, on the
# developer's machine, and not first on a fresh one. scripts/deps-audit.py does the work (run by
# /usr/bin/python3, as the tests' Python modules are the ones that interpreter imports):
#   - each pkg-config name of the Makefile's PKGS and TEST_PKGS resolves (pkg-config --path) and
#     its .pc file belongs (dpkg -S) to a package build_pkgs lists by name;
#   - each system header `cc -M` finds for the C files of compiler/, formats/, reader/, tests/ and
#     scripts/ (the Makefile's -D_GNU_SOURCE -I flags, each PKGS/TEST_PKGS name's pkg-config
#     --cflags, Python's and numpy's include dirs, mpicc's) belongs to a package deps.sh installs;
#   - each module imported by the *.py files and the python snippets of the *.sh files of tests/,
#     scripts/ and reader/python/, as /usr/bin/python3 finds it, belongs to such a package (the
#     project's own modules, shardread and the repository's .py files, are exempt);
#   - the tools the tests and the build run (cc, make, pkg-config, djpeg, h5dump, mdb_stat, mpicc,
#     mpirun, gnuplot, patchelf, python3, zip, unzip, zstd, xz, python3 -m venv, and the remote
#     tests' nginx, openssl, node, npm) belong to such a package.
# "A package deps.sh installs" is one its arrays list, or one those depend on (Depends and
# Pre-Depends, recursively: what apt-get install --no-install-recommends brings). That is how
# libc6-dev, linux-libc-dev and gcc's libgcc-12-dev (stddef.h, immintrin.h) count, through
# build-essential, and libpython3.11-dev (Python.h) through python3-dev. It is strict where a name
# is the project's own choice: a .pc file must belong to a package build_pkgs names itself.
# Which list counts: build_pkgs everywhere; with fuzz_pkgs for tests/fuzz/; with bench_pkgs for
# scripts/ (a module of scripts/ that is not importable while bench_pkgs are not installed is
# noted, not failed). Excluded, and said so: CUDA. The .cu files, headers under /usr/local/cuda
# and cuda*/cublas* headers come from NVIDIA's toolkit, which is not a Debian package.
# Each problem is one "FAIL" line naming the file, the header/module/tool and the package that
# owns it (or "no package owns it").
#   DEPS_SH=path/to/deps.sh tests/e2e_deps.sh     audit another copy of deps.sh
# Last, the audit is shown to fail: on a copy of deps.sh without libxxhash-dev, python3-pytest and
# hdf5-tools it must name xxhash (pkg-config and header), pytest and h5dump.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
AUDIT="$ROOT/scripts/deps-audit.py"
DEPS=${DEPS_SH:-$ROOT/scripts/deps.sh}
if [ ! -x "$PY" ]; then
  bad "no $PY: scripts/deps.sh installs python3 (the audit and the tests run it)"
  finish; exit
fi

# audit DEPS_SH OUT: run the audit of one deps.sh; its status
audit() { env -u PYTHONPATH -u PYTHONHOME DEPS_SH="$1" "$PY" "$AUDIT" --root "$ROOT" >"$2" 2>&1; }

audit "$DEPS" "$T/audit"
rc=$?
while IFS= read -r line; do
  case "$line" in
    "ok "*) ok "${line#ok }" ;;
    "bad "*) bad "${line#bad }" ;;
    "note "*) echo "  note ${line#note }" ;;
    *) echo "       $line" ;;
  esac
done <"$T/audit"
case $rc in
  0) ;;
  1) grep -q '^bad ' "$T/audit" || bad "deps-audit.py exited 1 without naming a problem" ;;
  *) grep -q '^bad ' "$T/audit" || bad "deps-audit.py failed (exit $rc)" ;;
esac

# the audit fails when a package is missing: a copy of deps.sh without three of them
drop='libxxhash-dev|python3-pytest|hdf5-tools'
sed -E "s/(^|[[:space:](])($drop)([[:space:])]|$)/\1\3/g" "$DEPS" >"$T/deps-minus.sh"
if [ "$(grep -Ec "(^|[[:space:](])($drop)([[:space:])]|$)" "$T/deps-minus.sh")" -ne 0 ] \
   || cmp -s "$DEPS" "$T/deps-minus.sh"; then
  bad "self-check: could not remove libxxhash-dev, python3-pytest, hdf5-tools from a copy of $DEPS"
else
  audit "$T/deps-minus.sh" "$T/minus"
  mrc=$?
  check "self-check: the audit of deps.sh less libxxhash-dev, python3-pytest, hdf5-tools fails (exit $mrc)" \
    test "$mrc" -eq 1
  check "self-check: it names the pkg-config name libxxhash and libxxhash-dev" \
    grep -q '^bad Makefile PKGS: pkg-config name libxxhash: .* belongs to libxxhash-dev' "$T/minus"
  check "self-check: it names the header xxhash.h and libxxhash-dev" \
    grep -q '^bad .*: header <xxhash.h> .* belongs to libxxhash-dev' "$T/minus"
  check "self-check: it names the module pytest and python3-pytest" \
    grep -q '^bad tests/.*: module pytest .* belongs to python3-pytest' "$T/minus"
  check "self-check: it names the tool h5dump and hdf5-tools" \
    grep -q '^bad tests/.*: tool h5dump .* belongs to hdf5-tools' "$T/minus"
  if [ "$rc" -eq 0 ]; then
    check "self-check: every problem it names is one of the three packages" \
      bash -c "! grep '^bad ' '$T/minus' | grep -Ev 'belongs to ($drop),'"
  fi
  [ "$NFAIL" -eq 0 ] || sed 's/^/       /' "$T/minus"
fi

finish
