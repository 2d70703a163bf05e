# Shared helpers for the end-to-end tests (sourced). Each test runs in its own temp dir.
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARDC="$ROOT/$BUILD/bin/shardc"
MKSAMPLE="$ROOT/$BUILD/bin/shardc-mksample"
T=$(mktemp -d /tmp/shardc-e2e.XXXXXX)
trap 'rm -rf "$T"' EXIT
NPASS=0
NFAIL=0
NAME=$(basename "$0" .sh)
# python3 stays the first one on PATH, resolved once to its interpreter: a version manager's shim
# (pyenv's) costs a third of a second a call, and the tests call python3 thousands of times
if py3=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null) &&
    [ -x "$py3" ]; then
  mkdir -p "$T/.python3" && ln -s "$py3" "$T/.python3/python3" && PATH="$T/.python3:$PATH"
fi
# A python3 with Pillow (Debian's python3-pil lives in /usr/bin/python3, which may not be the
# first python3 on PATH); empty if there is none.
PYPIL=
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import PIL' 2>/dev/null; then PYPIL=$py; break; fi
done

# py_module: the command that runs /usr/bin/python3 on the shardread module of $BUILD (use it
# unquoted: $PY script.py). Under ASan with the runtime preloaded and leak checks off (the
# interpreter keeps its objects), as tests/python/run.sh does; under TSan, which cannot run in
# an uninstrumented interpreter, on the plain build's module (build/, which CI's plain make test
# builds first): the C programs of the test stay the sanitizer build's.
py_module() {
  case "$BUILD" in
    *address*) echo "env LD_PRELOAD=$(${CC:-cc} -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 PYTHONPATH=$ROOT/$BUILD/python /usr/bin/python3" ;;
    *thread*) echo "env PYTHONPATH=$ROOT/build/python /usr/bin/python3" ;;
    *) echo "env PYTHONPATH=$ROOT/$BUILD/python /usr/bin/python3" ;;
  esac
}

# need_python VAR IMPORTS WHY: set VAR to the first python3 (SHARDC_PYTHON, /usr/bin/python3,
# python3) that can `import IMPORTS` (e.g. 'torchvision, PIL'), or say SKIPPED: WHY and exit 77.
need_python() {
  local var=$1 imports=$2 why=$3 py
  for py in ${SHARDC_PYTHON:-} /usr/bin/python3 python3; do
    if "$py" -c "import $imports" 2>/dev/null; then printf -v "$var" '%s' "$py"; return 0; fi
  done
  echo "SKIPPED: $why"; exit 77
}

ok() { NPASS=$((NPASS+1)); echo "  ok   $*"; }
bad() { NFAIL=$((NFAIL+1)); echo "  FAIL $*"; }

# check DESCRIPTION COMMAND...: pass if the command succeeds
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }

# expect_exit CODE DESCRIPTION COMMAND...: run the command (output to $T/out, $T/err)
expect_exit() {
  local want=$1 d=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  if [ "$got" -eq "$want" ]; then ok "$d (exit $got)"; else
    bad "$d: exit $got, expected $want"; sed 's/^/       /' "$T/err" | head -20; fi
}

# json_get FILE KEY: a top-level value of a JSON object
json_get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# crash N COMMAND...: run a build with SHARDC_CRASH_AFTER=N, expecting it to kill itself; the
# status is the command's (137 after SIGKILL), without the shell's "Killed" notice
crash() {
  local n=$1; shift
  { SHARDC_CRASH_AFTER=$n "$@" >/dev/null 2>&1 & wait $!; } 2>/dev/null
}

finish() {
  echo "$NAME: $NPASS passed, $NFAIL failed"
  [ "$NFAIL" -eq 0 ]
}
