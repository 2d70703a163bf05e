#!/usr/bin/env bash
# The resampler alone against Pillow's Image.resize, per image, on the same decoded photos of many
# sizes: time (one thread, medians) and byte identity. Prints a markdown table.
#   scripts/resize-compare.sh [N [REPS [SIZE]]]   N photos (default 200), REPS runs per image
#                                                 (default 15), Resize(SIZE) (default 224)
# Needs cc, pkg-config (libjpeg spng libxxhash zlib), python3 with Pillow, and
# build/bin/shardc-mksample. Not part of the Makefile build; builds into a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}; reps=${2:-15}; size=${3:-224}
py=${PYTHON:-}
if [ -z "$py" ]; then
  for c in /usr/bin/python3 python3; do
    if "$c" -c 'import PIL' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "resize-compare: no python3 with Pillow" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/bin/shardc-mksample "$tmp/photos" --photo --classes 1 --per-class "$n" --seed 7 --quiet
pkgs="libjpeg spng libxxhash zlib"
cc -O2 -std=c11 -D_GNU_SOURCE -Iformats -Ipixels $(pkg-config --cflags $pkgs) scripts/resize-compare.c \
  pixels/resample.c pixels/resample_simd.c formats/fmt.c formats/image.c formats/jpeg.c formats/png.c formats/bmp.c \
  -o "$tmp/resize-compare" $(pkg-config --libs $pkgs) -lm -pthread
mapfile -t files < <(find "$tmp/photos" -type f -name '*.jpg' | sort)
"$py" scripts/resize-compare.py "$tmp/resize-compare" "$tmp" "$reps" "$size" "${files[@]}"
