#!/usr/bin/env bash
# Run the shardread module's pytest suite against the module of $BUILD (make check-python).
#   BUILD=build PYTHON=/usr/bin/python3 [SAN=address,undefined] [CC=cc] tests/python/run.sh [pytest args]
#
# Sanitizers. The interpreter itself is not instrumented, so an ASan build of the module needs
# the ASan runtime loaded first: LD_PRELOAD=$(cc -print-file-name=libasan.so), with leak
# detection off (the interpreter keeps its objects until exit, and LeakSanitizer would report
# them). UBSan needs nothing more. ThreadSanitizer cannot run inside an uninstrumented
# interpreter this way (its runtime must own every thread from the start), so under SAN=thread
# the suite is skipped, and says so; the reader's threads are covered by the C suites there.
#
# Exit status: pytest's 0 is success; 5 (no tests collected) and every other status are failures.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
SAN=${SAN:-}
CC=${CC:-cc}
cd "$ROOT"

echo "== tests/python (pytest, $PYTHON, module from $BUILD/python${SAN:+, SAN=$SAN})"
case ",$SAN," in
  *,thread,*)
    echo "   skipped: the Python suite does not run under ThreadSanitizer (see tests/python/run.sh)"
    exit 0 ;;
esac
if ! "$PYTHON" -c 'import pytest, numpy' 2>/dev/null; then
  echo "   FAIL: $PYTHON lacks pytest or numpy (scripts/deps.sh installs python3-pytest python3-numpy)"
  exit 1
fi
preload=
case ",$SAN," in
  *,address,*)
    preload=$("$CC" -print-file-name=libasan.so)
    if [ ! -e "$preload" ]; then
      echo "   FAIL: $CC has no libasan.so to preload"
      exit 1
    fi
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
    ;;
esac
export PYTHONPATH="$ROOT/$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
export BUILD
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
cd tests/python
if [ -n "$preload" ]; then
  LD_PRELOAD="$preload${LD_PRELOAD:+:$LD_PRELOAD}" "$PYTHON" -m pytest -q -rs -p no:cacheprovider "$@"
else
  "$PYTHON" -m pytest -q -rs -p no:cacheprovider "$@"
fi
rc=$?
case $rc in
  0) echo "python: pytest passed" ;;
  5) echo "python: FAILED: pytest collected no tests" ;;
  *) echo "python: FAILED: pytest exited with status $rc" ;;
esac
[ $rc -eq 0 ]
