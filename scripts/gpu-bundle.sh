#!/usr/bin/env bash
# Gather this build's binaries and the shared libraries they need into one folder that can be
# copied to a GPU machine which lacks our Debian libraries (libjpeg, spng, hdf5, check, ...):
#
#   scripts/gpu-bundle.sh [--no-cuda-libs] [--add FILE]... [OUT]
#                                          (BUILD=dir, default build; OUT default .gpu)
#
#   OUT/bin/      shardc, shardc-mksample, shardbench (and decode-bench where it was built), and
#                 each --add FILE (another program of this build, e.g. bench-augment.py's harness)
#   OUT/tests/    the check programs (test_cuda among them)
#   OUT/lib/      libshardgpu.so, libshardbench-gpu.so, libshardread.so, and every library ldd
#                 names for them and for every program in OUT/bin and OUT/tests, except
#                 the C library itself (libc, libm, libpthread, libdl, librt, ld-linux), which
#                 must come from the target: it needs glibc >= the version printed at the end
#   OUT/env.sh    `. OUT/env.sh` puts OUT/lib first on LD_LIBRARY_PATH
#   OUT/run-gpu-tests.sh   runs test_cuda (and test_reader) from the bundle
#
# --no-cuda-libs leaves out libcudart, libcublas and libcublasLt (over half a gigabyte): the
# target then needs a CUDA 13 runtime and cuBLAS on its library path. The driver (libcuda.so) is
# never bundled; it belongs to the target's kernel module. Binaries find libshardbench-gpu.so
# at <exe>/../lib, so the layout must be kept.
set -euo pipefail
BUILD=${BUILD:-build}
cuda_libs=1
out=.gpu
add=()
while [ $# -gt 0 ]; do
  case $1 in
    --no-cuda-libs) cuda_libs=0 ;;
    --add)
      [ -n "${2:-}" ] || { echo "gpu-bundle: --add needs FILE" >&2; exit 2; }
      [ -x "$2" ] && [ -f "$2" ] || { echo "gpu-bundle: --add $2: not an executable file" >&2; exit 1; }
      add+=("$2"); shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-bundle: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done

for gpu_so in "$BUILD"/lib/libshardgpu.so "$BUILD"/lib/libshardbench-gpu.so; do
  if [ ! -f "$gpu_so" ]; then
    echo "gpu-bundle: $gpu_so missing: build with nvcc first (make BUILD=$BUILD all)" >&2
    exit 1
  fi
done
for b in shardc shardc-mksample shardbench; do
  [ -x "$BUILD/bin/$b" ] || { echo "gpu-bundle: $BUILD/bin/$b missing (make BUILD=$BUILD all)" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/tests" "$out/lib"
cp "$BUILD"/bin/shardc "$BUILD"/bin/shardc-mksample "$BUILD"/bin/shardbench "$out/bin/"
[ -x "$BUILD/bin/decode-bench" ] && cp "$BUILD/bin/decode-bench" "$out/bin/"
[ ${#add[@]} -eq 0 ] || cp "${add[@]}" "$out/bin/"
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] && [ -f "$t" ] && case $t in *.o|*.d) ;; *) cp "$t" "$out/tests/" ;; esac
done
cp "$BUILD"/lib/libshardgpu.so "$BUILD"/lib/libshardbench-gpu.so "$out/lib/"
soname=
if [ -f "$BUILD/libshardread.so" ]; then
  soname=$(objdump -p "$BUILD/libshardread.so" | awk '$1 == "SONAME" {print $2}')
  cp -L "$BUILD/libshardread.so" "$out/lib/$soname"
  ln -sf "$soname" "$out/lib/libshardread.so"
fi

# the libraries of every ELF file, resolved here; the target supplies the C library and driver
skip_re='^(linux-vdso|linux-gate|ld-linux.*|libc\.so.*|libm\.so.*|libpthread\.so.*|libdl\.so.*|librt\.so.*|libutil\.so.*|libresolv\.so.*|libcuda\.so.*)$'
cuda_re='^(libcudart|libcublas|libcublasLt)\.so.*$'
# (the step library needs the feed library, which is already there)
declare -A seen=([libshardgpu.so]=1)
files=("$out"/bin/* "$out"/tests/* "$out"/lib/libshardgpu.so "$out"/lib/libshardbench-gpu.so)
[ -n "$soname" ] && files+=("$out/lib/$soname")
for f in "${files[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      echo "gpu-bundle: $f: $name not found here" >&2
      exit 1
    fi
    [[ $name =~ $skip_re ]] && continue
    [ $cuda_libs = 0 ] && [[ $name =~ $cuda_re ]] && continue
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    cp -L "$path" "$out/lib/$name"
  done < <(ldd "$f")
done

cat > "$out/env.sh" <<'EOF'
# source this file: . ./env.sh
_gpu_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$_gpu_here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _gpu_here
EOF
cat > "$out/run-gpu-tests.sh" <<'EOF'
#!/usr/bin/env bash
# The GPU tests from the bundle. Prints what the device, driver and library search found first.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
rc=0
"$here/tests/test_cuda" || rc=1
[ -x "$here/tests/test_reader" ] && { "$here/tests/test_reader" || rc=1; }
exit $rc
EOF
chmod +x "$out/run-gpu-tests.sh"

# the newest glibc symbol version any bundled file needs
glibc=$(for f in "$out"/bin/* "$out"/tests/* "$out"/lib/*; do
          [ -L "$f" ] || objdump -T "$f" 2>/dev/null
        done | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1)
size=$(du -sh "$out" | cut -f1)
echo "gpu-bundle: $out ($size): $(ls "$out/lib" | wc -l) libraries; the target needs glibc >= ${glibc:-?}" \
     "and an NVIDIA driver for CUDA 13$([ $cuda_libs = 0 ] && echo ', CUDA 13 runtime and cuBLAS')"
echo "gpu-bundle: on the GPU machine: $out/run-gpu-tests.sh   (or: . $out/env.sh; $out/tests/test_cuda)"
