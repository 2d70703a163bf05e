#!/usr/bin/env bash
# Install what shardc needs from Debian's packages. Idempotent: packages already present are
# skipped, and nothing runs apt when all are there.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh --bench    also the benchmark extras (numpy, h5py)
#   scripts/deps.sh --fuzz     also what make fuzz needs (clang and its libFuzzer runtime)
#   scripts/deps.sh --ci       also what CI's fresh-machine stage needs (debootstrap)
#   scripts/deps.sh --check    exit 1 (listing them) if any build/test dependency is missing
set -euo pipefail

build_pkgs=(
  build-essential pkg-config
  libjpeg62-turbo-dev libjpeg-turbo-progs  # JPEG codec (libjpeg API) and djpeg, the test reference
  libspng-dev libpng-dev                   # PNG: libspng decodes, libpng is the second decoder in tests
  zlib1g-dev                               # zlib: the text and ICC chunks Pillow inflates (png.c)
  libxxhash-dev                            # XXH3 sample hashes
  liblz4-dev libzstd-dev                   # shardc build --compress lz4|zstd
  libjansson-dev                           # manifest.json
  check                                    # unit tests
  python3 python3-pil                      # Pillow: the reference decoder of the pixel tests
  libhdf5-dev hdf5-tools liblmdb-dev lmdb-utils  # HDF5 / LMDB backends
  python3-h5py                             # test_hdf5's second reader of our HDF5 files
  liburing-dev                             # io_uring batches of the reader's O_DIRECT path
  libarchive-dev                           # shardc build X.tar|X.tar.gz|X.zip: archives read in place
  zip unzip zstd xz-utils lz4 bzip2        # archive tests: Info-ZIP zips and compressed tars
                                           # written, extracted (unzip, tar -xf) and checked
                                           # by their own tools (e2e_archive_check)
  gnuplot-nox                              # the plot make demo draws (shardbench compare --plot)
  python3-dev python3-numpy                # the Python module (reader/python/) builds against both
  python3-pytest python3-torch             # its tests: pytest, and torch interop (tensors, DataLoader)
  python3-torchvision                      # the exactness tests' reference (e2e_torchvision, tests/python)
  python3-venv python3-pip patchelf        # make wheel (bundled libraries) and its install test
  python3-setuptools                       # pip install --no-build-isolation reader/python
  libopenmpi-dev openmpi-bin               # shardc-mpi (mpicc) and its tests (mpirun)
  libcurl4-openssl-dev                     # datasets at s3:// and http(s):// URLs (remote/)
  nginx openssl                            # the remote tests' web server (http, https: a test cert)
  nodejs npm                               # the remote tests' S3 server (s3rver, from npm into build/)
  python3-botocore                         # the remote tests: SigV4 reference signer, uploads
)
bench_pkgs=(python3-numpy python3-h5py python3-torchvision  # torchvision: scripts/bench-torch.py
  python3-boto3)                           # scripts/bench-remote.py: the boto3 way to compare
# clang 14 is Debian 12's clang; its sanitizer and libFuzzer runtimes (-fsanitize=fuzzer) are in
# libclang-rt-14-dev, which clang only recommends (and apt-get here skips recommends)
fuzz_pkgs=(clang libclang-rt-14-dev)
# CI's fresh-machine stage (scripts/fresh-debian.sh) builds a Debian 12 root with debootstrap
ci_pkgs=(debootstrap)

want=("${build_pkgs[@]}")
mode=install
for a in "$@"; do
  case "$a" in
    --bench) want+=("${bench_pkgs[@]}") ;;
    --fuzz) want+=("${fuzz_pkgs[@]}") ;;
    --ci) want+=("${ci_pkgs[@]}") ;;
    --check) mode=check ;;
    *) echo "usage: scripts/deps.sh [--bench] [--fuzz] [--ci] [--check]" >&2; exit 2 ;;
  esac
done

# a package counts as present when an installed one provides it (e.g. npm inside a nodejs
# packaged elsewhere, which conflicts with Debian's npm)
provided=" $(dpkg-query -W -f='${db:Status-Status} ${Provides}\n' 2>/dev/null |
             sed -n 's/^installed //p' | sed -E 's/ \([^)]*\)//g' | tr ',\n' '  ') "
missing=()
for p in "${want[@]}"; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = installed ] || [[ "$provided" == *" $p "* ]] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$mode" = check ]; then
  echo "missing packages: ${missing[*]}" >&2
  exit 1
fi

echo "scripts/deps.sh: installing ${missing[*]}" >&2
sudo=
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "scripts/deps.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
