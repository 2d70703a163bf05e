"""The wheel's console scripts: `shardc` and `shardc-mksample` run the programs bundled in
shardread/bin/ (scripts/wheel.py puts them there, their libraries in shardread.libs/), with the
arguments given, in place of this process."""
import os as _os
import sys as _sys


def _run(name):
    exe = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "bin", name)
    if not _os.access(exe, _os.X_OK):
        _sys.exit(f"{name}: {exe} is missing: this shardread was not installed from its wheel "
                  "(make all builds the program)")
    try:
        _os.execv(exe, [name] + _sys.argv[1:])
    except OSError as e:
        _sys.exit(f"{name}: cannot run {exe}: {e.strerror}")


def shardc():
    """`shardc ...`: the bundled shardc."""
    _run("shardc")


def shardc_mksample():
    """`shardc-mksample ...`: the bundled sample generator."""
    _run("shardc-mksample")
