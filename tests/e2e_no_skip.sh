#!/usr/bin/env bash
# End to end: a skip is no pass. A test program that exits 77 (its reference tool is missing,
# tests/tuskip.h) counts as skipped, and as a failure under SHARDC_NO_SKIP=1, which .ci/run sets;
# the Python suite's conftest turns a skip into a failure the same way, except one whose reason
# says "not applicable" (no CUDA device, a sanitizer build).
. "$(dirname "$0")/lib.sh"
PY=${SHARDC_PYTHON:-/usr/bin/python3}

printf 'exit 77\n' >"$T/skips.sh"
printf 'exit 0\n' >"$T/passes.sh"
expect_exit 0 "a skip alone passes run-tests.sh" env -u SHARDC_NO_SKIP \
  "$ROOT/scripts/run-tests.sh" e2e "$T/skips.sh" "$T/passes.sh"
check "and is counted as skipped" grep -qx "e2e: 1 passed, 0 failed, 1 skipped" "$T/out"
expect_exit 1 "a skip fails run-tests.sh under SHARDC_NO_SKIP=1" env SHARDC_NO_SKIP=1 \
  "$ROOT/scripts/run-tests.sh" e2e "$T/skips.sh" "$T/passes.sh"
check "and is counted as failed, saying why" grep -q "skips.sh (skipped, and SHARDC_NO_SKIP=1" "$T/out"
check "the closing line" grep -qx "e2e: 1 passed, 1 failed, 0 skipped" "$T/out"

# the Python suite's hook, on a copy of its conftest
mkdir "$T/py"
cp "$ROOT/tests/python/conftest.py" "$T/py/"
cat >"$T/py/test_skips.py" <<'PYT'
import pytest
missing = pytest.mark.skipif(True, reason="torchvision is not installed")


@missing
def test_reference_missing():
    pass


def test_not_applicable():
    pytest.skip("not applicable: no CUDA device")


def test_runs():
    assert True
PYT
(cd "$T/py" && env -u SHARDC_NO_SKIP "$PY" -m pytest -q -p no:cacheprovider test_skips.py) >"$T/out" 2>&1
check "pytest: two skips pass without the flag" grep -q "1 passed, 2 skipped" "$T/out"
(cd "$T/py" && SHARDC_NO_SKIP=1 "$PY" -m pytest -q -p no:cacheprovider test_skips.py) >"$T/out" 2>&1
rc=$?
check "pytest under SHARDC_NO_SKIP=1 exits 1" [ "$rc" -eq 1 ]
# (a skipif mark skips at setup, so pytest reports the failure as an error)
check "the missing reference fails, the not-applicable skip stays one" \
  grep -Eq "^(1 failed, 1 passed, 1 skipped|1 passed, 1 skipped, 1 error)" "$T/out"
(cd "$T/py" && printf 'import pytest\npytest.importorskip("no_such_module_here")\ndef test_x():\n    pass\n' \
  >test_mod.py && SHARDC_NO_SKIP=1 "$PY" -m pytest -q -p no:cacheprovider test_mod.py) >"$T/out" 2>&1
rc=$?
check "a module skipped at collection fails under the flag too" [ "$rc" -ne 0 ]

finish
