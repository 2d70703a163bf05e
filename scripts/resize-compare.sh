#!/usr/bin/env bash
# Resize library comparison behind formats/geometry.c: time (single thread, median) and PSNR
# against Pillow's antialiased LANCZOS for libswscale and stb_image_resize variants on
# synthetic photo-like ImageNet-size downscales. Prints a markdown table (see resize-compare.md).
#   scripts/resize-compare.sh [RUNS]        RUNS resizes per method and image (default 30)
# Needs cc, pkg-config (libswscale libavutil stb libxxhash), python3 with Pillow and numpy.
# Not part of the Makefile build; builds into a temporary directory and leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
py=${PYTHON:-}
if [ -z "$py" ]; then
  # the Debian python3 carries python3-pil; a pyenv shim first on PATH may not
  for c in python3 /usr/bin/python3; do
    if "$c" -c 'import PIL, numpy' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "resize-compare: no python3 with Pillow and numpy" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# fmt_resize itself joins the comparison when geometry.c is there
extra=()
if [ -f formats/geometry.c ]; then
  extra=(-DWITH_SHARDC formats/geometry.c formats/fmt.c)
fi
cc -O2 -std=c11 -D_GNU_SOURCE -Iformats $(pkg-config --cflags libswscale libavutil stb libxxhash) \
  scripts/resize-compare.c "${extra[@]}" -o "$tmp/resize-compare" \
  $(pkg-config --libs libswscale libavutil stb libxxhash) -lm
"$py" scripts/resize-compare.py "$tmp/resize-compare" "$tmp" "$runs"
