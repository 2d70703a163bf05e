#!/usr/bin/env bash
# JPEG shrink-on-load at any k/8 DCT scale vs 1/2, 1/4, 1/8 only vs full-size decoding: time
# (single thread, median) and PSNR against Pillow's LANCZOS on the full-size decode, for
# center-crop outputs. Prints a markdown table (see shrink-compare.md).
#   scripts/shrink-compare.sh [RUNS [SIZES [DIR]]]
#     RUNS   repetitions per file and method (default 9)
#     SIZES  crop outputs, comma-separated (default 224x224,160x160,128x128)
#     DIR    JPEGs to use (default: generated with shardc-mksample --photo, 200 files)
# Needs cc, pkg-config (libjpeg spng stb libswscale libavutil libxxhash), python3 with Pillow
# and numpy, and build/bin/shardc-mksample when DIR is not given. Not part of the Makefile
# build; builds into a temporary directory and leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
sizes=${2:-224x224,160x160,128x128}
dir=${3:-}
py=${PYTHON:-}
if [ -z "$py" ]; then
  # the Debian python3 carries python3-pil; a pyenv shim first on PATH may not
  for c in python3 /usr/bin/python3; do
    if "$c" -c 'import PIL, numpy' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "shrink-compare: no python3 with Pillow and numpy" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$dir" ]; then
  dir=$tmp/photos
  build/bin/shardc-mksample "$dir" --photo --classes 4 --per-class 50 --quiet
fi
pkgs="libjpeg spng stb libswscale libavutil libxxhash"
cc -O2 -std=c11 -D_GNU_SOURCE -Iformats $(pkg-config --cflags $pkgs) scripts/shrink-compare.c \
  formats/fmt.c formats/image.c formats/jpeg.c formats/png.c formats/bmp.c formats/geometry.c \
  -o "$tmp/shrink-compare" $(pkg-config --libs $pkgs) -lm
mapfile -t files < <(find "$dir" -type f -name '*.jpg' | sort)
[ ${#files[@]} -gt 0 ] || { echo "shrink-compare: no .jpg files in $dir" >&2; exit 1; }
"$py" scripts/shrink-compare.py "$tmp/shrink-compare" "$tmp" "$runs" "$sizes" "${files[@]}"
