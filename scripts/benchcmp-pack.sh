#!/usr/bin/env bash
# Fill DIR with the two builds that scripts/benchcmp-run.sh compares, built here with the same
# compiler and flags, and the shared libraries they need, so the folder can be copied to a machine
# without them (a GPU machine's idle cores, say):
#
#   scripts/benchcmp-pack.sh [DIR]     (DIR default .benchcmp; BASE=commit, default HEAD: the
#                                      working tree against its last commit)
#
#   base/bin/   shardc, shardc-mksample, shardbench of BASE (a detached worktree in $BASE_TREE,
#               default /tmp/base, created when missing; built in its build-base/)
#   head/bin/   the same three from this working tree as it is now (built in build-head/)
#   lib/        every library ldd names for the six programs except the C library (libc, libm,
#               libpthread, libdl, librt, libutil, libresolv, ld-linux), as scripts/gpu-bundle.sh
#               does; files over 8 MiB are stored xz-compressed (NAME.xz) and unpacked by benchcmp-run.sh
#   BUILDINFO.txt  the two commits, the working tree's changes (status and a digest of the diff),
#               the compiler, and the newest glibc symbol version the programs need
#
# The target needs glibc >= that version. Both builds must resolve to the same library set (one
# lib/ serves both); benchcmp-pack.sh stops when they do not.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "${1:-$root/.benchcmp}"
here=$(cd "${1:-$root/.benchcmp}" && pwd)
BASE=${BASE:-HEAD}
BASE_TREE=${BASE_TREE:-/tmp/base}
progs=(shardc shardc-mksample shardbench)

base_sha=$(git -C "$root" rev-parse "$BASE^{commit}")
if [ ! -d "$BASE_TREE" ]; then
  git -C "$root" worktree add --detach "$BASE_TREE" "$base_sha"
elif [ "$(git -C "$BASE_TREE" rev-parse HEAD)" != "$base_sha" ]; then
  git -C "$BASE_TREE" checkout -q --detach "$base_sha"
fi

make -C "$BASE_TREE" BUILD=build-base -j2 "${progs[@]/#/build-base/bin/}" >/dev/null
make -C "$root" BUILD=build-head -j2 "${progs[@]/#/build-head/bin/}" >/dev/null

rm -rf "$here/base" "$here/head" "$here/lib"
mkdir -p "$here/base/bin" "$here/head/bin" "$here/lib"
for p in "${progs[@]}"; do
  cp "$BASE_TREE/build-base/bin/$p" "$here/base/bin/"
  cp "$root/build-head/bin/$p" "$here/head/bin/"
done

skip_re='^(linux-vdso|linux-gate|ld-linux.*|libc\.so.*|libm\.so.*|libpthread\.so.*|libdl\.so.*|librt\.so.*|libutil\.so.*|libresolv\.so.*)$'
libset() {
  for f in "$here/$1"/bin/*; do ldd "$f"; done |
    awk -v re="$skip_re" '$2 == "=>" && $1 !~ re { print $1, $3 }' | sort -u
}
if ! diff <(libset base) <(libset head) >&2; then
  echo "pack: base and head need different libraries (above); one lib/ cannot serve both" >&2
  exit 1
fi
while read -r name path; do
  if [ "$path" = "not" ]; then echo "pack: $name not found here" >&2; exit 1; fi
  if [ "$(stat -L -c %s "$path")" -gt $((8 << 20)) ]; then
    xz -T2 -9 -c "$path" > "$here/lib/$name.xz"
  else
    cp -L "$path" "$here/lib/$name"
  fi
done < <(libset head)

glibc=$(for f in "$here"/base/bin/* "$here"/head/bin/* "$here"/lib/*; do
          case $f in
            *.xz) xz -dc "$f" > "$here/.probe.so"; objdump -T "$here/.probe.so"; rm -f "$here/.probe.so" ;;
            *) objdump -T "$f" ;;
          esac 2>/dev/null
        done | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1)
{
  echo "base: $(git -C "$BASE_TREE" log -1 --format='%H %s')"
  echo "head: $(git -C "$root" log -1 --format='%H %s')"
  echo "head working tree changes (git status --short), diff sha256 $(git -C "$root" diff HEAD | sha256sum | cut -c1-16):"
  git -C "$root" status --short | sed 's/^/  /'
  echo "compiler: $(${CC:-cc} --version | head -1); flags: the Makefile's defaults (-O2 -g)"
  echo "packed: $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "target needs: glibc >= $glibc (x86-64); libraries in lib/: $(ls "$here/lib" | wc -l)"
} > "$here/BUILDINFO.txt"
cat "$here/BUILDINFO.txt"
echo "pack: $(du -sh "$here" | cut -f1) in $here"
