"""Build and install the shardread module for the interpreter that runs this:

    pip install --no-build-isolation reader/python        (offline, with the system setuptools)

The package's C extension links the static libshardread of the repository's build directory
($SHARDREAD_BUILD, default build/ at the repository root); when that library is missing it is
made first with `make`. So the installed package stands alone: it needs neither libshardread.so
nor the repository at run time, only the shared libraries the reader uses (libjpeg, HDF5, LMDB,
...). The extension uses CPython's stable ABI (3.11) and no numpy C API: `make wheel` makes the
self-contained wheel (those libraries bundled) for every CPython >= 3.11 with numpy 1 or 2.
The writer's extension (shardread._shardwrite, compiler/python/_shardwrite.c) links the
compiler's and the formats' static libraries of the same build directory in the same way.
"""
import glob
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("SHARDREAD_BUILD", os.path.join(ROOT, "build")))


def make(*args):
    """Output of make at the repository root, for this build directory."""
    cmd = ["make", "--no-print-directory", "-s", "-C", ROOT, f"BUILD={BUILD}", *args]
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


# the library (rebuilt by make if a source changed) and the link flags of its dependencies
make(os.path.join(BUILD, "libshardread.a"))
libs = shlex.split(make("print-read-libs").strip().splitlines()[-1])  # after any make notice
# the writer's extension (shardread.build): the compiler's and the formats' libraries
make(os.path.join(BUILD, "libshardcomp.a"), os.path.join(BUILD, "libshardfmt.a"))
comp_libs = shlex.split(make("print-comp-libs").strip().splitlines()[-1])

setup(
    name="shardread",
    version="0.1.0",
    description="Read datasets written by shardc (libshardread) from Python, numpy and PyTorch",
    license="MIT",
    packages=["shardread"],
    package_data={"shardread": ["py.typed", "*.pyi"]},
    python_requires=">=3.11",
    ext_modules=[
        Extension(
            "shardread._shardread",
            # the module's files: _shardread.c and its parts _sr_*.c (private header _sr.h)
            sources=["_shardread.c"] + sorted(os.path.basename(p) for p in
                                              glob.glob(os.path.join(HERE, "_sr_*.c"))),
            depends=["_sr.h"],
            include_dirs=[os.path.join(ROOT, "include")],   # the public headers only
            define_macros=[("_GNU_SOURCE", None), ("Py_LIMITED_API", "0x030B0000")],
            py_limited_api=True,
            extra_compile_args=["-std=c11", "-fvisibility=hidden"],
            extra_objects=[os.path.join(BUILD, "libshardread.a")],
            extra_link_args=["-Wl,--exclude-libs,ALL", "-pthread", *libs],
        ),
        Extension(
            "shardread._shardwrite",
            # absolute: a relative "../../compiler/..." source would put its object file
            # outside the build's temporary folder (inside the source tree)
            sources=[os.path.join(ROOT, "compiler", "python", "_shardwrite.c")],
            include_dirs=[os.path.join(ROOT, "include")],   # the public headers only
            define_macros=[("_GNU_SOURCE", None), ("Py_LIMITED_API", "0x030B0000")],
            py_limited_api=True,
            extra_compile_args=["-std=c11", "-fvisibility=hidden"],
            extra_objects=[os.path.join(BUILD, "libshardcomp.a"),
                           os.path.join(BUILD, "libshardfmt.a")],
            extra_link_args=["-Wl,--exclude-libs,ALL", "-pthread", *comp_libs],
        ),
    ],
    install_requires=["numpy"],
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
