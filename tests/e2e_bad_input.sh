#!/usr/bin/env bash
# End to end: every kind of bad input gets one line naming the file, an entry in rejects.tsv and
# the right exit code; nothing crashes, hangs or leaves a manifest behind a failure.
. "$(dirname "$0")/lib.sh"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 6 --seed 3 --quiet || { echo "mksample failed"; exit 1; }
# more bad entries than the generator makes: a FIFO, a dangling symlink, a symlink loop, a
# directory cycle
c=$(ls "$T/src" | head -1)
mkfifo "$T/src/$c/fifo.jpg"
ln -s nowhere.jpg "$T/src/$c/dangling.jpg"
ln -s self.jpg "$T/src/$c/self.jpg"
ln -s . "$T/src/$c/cycle"

# the generator names its broken files broken-*; every other image is valid
nvalid=$(find "$T/src" -type f -name '[0-9]*' | wc -l)
nall=$(find "$T/src" -mindepth 2 \( -name '*.jpg' -o -name '*.png' -o -name '*.bmp' \) | wc -l)

expect_exit 1 "build with bad files finishes with rejects" timeout 60 "$SHARDC" build "$T/src" -o "$T/o" --size 32x32 --json --no-progress
cp "$T/err" "$T/build.err"
samples=$(json_get "$T/out" samples)
check "every valid image is stored ($nvalid)" [ "$samples" -eq "$nvalid" ]
nrej=$(($(wc -l < "$T/o/rejects.tsv") - 1))
check "rejects.tsv lists every other entry ($nrej + $samples = $nall + cycle)" [ $((nrej + samples)) -eq $((nall + 1)) ]
check "the manifest counts the rejects" [ "$(json_get "$T/o/manifest.json" rejects)" -eq "$nrej" ]
for f in $(cut -f1 "$T/o/rejects.tsv" | tail -n +2); do
  grep -qF "$f" "$T/build.err" || bad "no message names $f"
done
check "one stderr line per reject" [ "$(grep -c '^shardc: cannot' "$T/build.err")" -eq "$nrej" ]
check "reason for the FIFO" grep -q "fifo.jpg.*not a regular file" "$T/o/rejects.tsv"
check "reason for the dangling symlink" grep -q "dangling.jpg.*No such file" "$T/o/rejects.tsv"
check "reason for the symlink loop" grep -q "self.jpg.*symbolic link loop" "$T/o/rejects.tsv"
check "reason for the directory cycle" grep -q "cycle.*symbolic link loop" "$T/o/rejects.tsv"
check "reason for a zero-byte file" grep -qi "empty" "$T/o/rejects.tsv"
check "reason for a text file named .jpg" grep -qi "not a JPEG, PNG or BMP" "$T/o/rejects.tsv"
check "reason for a 60000x60000 header" grep -q "60000x60000" "$T/o/rejects.tsv"
expect_exit 0 "verify after a build with rejects" "$SHARDC" verify "$T/o"

# --strict: the first bad file is fatal, and no manifest is written
expect_exit 1 "--strict stops at the first bad file" timeout 60 "$SHARDC" build "$T/src" -o "$T/s" --size 32x32 --strict --no-progress
check "--strict says it aborted" grep -q "aborting: --strict" "$T/err"
check "--strict leaves no manifest" [ ! -e "$T/s/manifest.json" ]
check "--strict leaves no temp shard" [ -z "$(ls "$T/s" | grep tmp)" ]

# list files: a missing file and a bad label are usage errors found before any work
mkdir -p "$T/l"
f1=$(cd "$T/src" && find . -name '*.png' | head -1)
printf '%s 0\nnot/there.jpg 1\n' "$f1" > "$T/l/missing.txt"
expect_exit 2 "list naming a missing file" "$SHARDC" build "$T/src" --list "$T/l/missing.txt" -o "$T/lo"
check "the message names the line and file" grep -q "missing.txt:2: no such file: not/there.jpg" "$T/err"
check "nothing was written" [ ! -e "$T/lo" ]
printf '%s zero\n' "$f1" > "$T/l/label.txt"
expect_exit 2 "list with a bad label" "$SHARDC" build "$T/src" --list "$T/l/label.txt" -o "$T/lo"
check "the message names the bad label" grep -q "label.txt:1: bad label 'zero'" "$T/err"
printf '%s 5\n' "$f1" > "$T/l/good.txt"
expect_exit 0 "list file build" "$SHARDC" build "$T/src" --list "$T/l/good.txt" -o "$T/lo" --no-progress
check "list labels are stored" [ "$(json_get "$T/lo/manifest.json" classes | tr -d "[]' ")" = "0,1,2,3,4,5" ]

# unwritable output: its parent is a file
touch "$T/afile"
expect_exit 3 "unwritable OUT" "$SHARDC" build "$T/src" -o "$T/afile/out" --no-progress
check "the message names OUT" grep -q "afile/out" "$T/err"

# disk full, simulated with a file size limit (writes fail with EFBIG)
( trap '' XFSZ; ulimit -f 64; exec "$SHARDC" build "$T/src" -o "$T/full" --size 64x64 --no-progress ) >"$T/out" 2>"$T/err"
rc=$?
check "a full disk ends with exit 3 (got $rc)" [ $rc -eq 3 ]
check "the message names the shard and the reason" grep -q "cannot write .*shard-00000.raw: File too large" "$T/err"
check "no manifest after a failed write" [ ! -e "$T/full/manifest.json" ]
check "no temp shard after a failed write" [ -z "$(ls "$T/full" | grep tmp)" ]

# a real full filesystem, where we may mount one
if mkdir -p "$T/tmpfs" && mount -t tmpfs -o size=128k tmpfs "$T/tmpfs" 2>/dev/null; then
  expect_exit 3 "ENOSPC on a small tmpfs" "$SHARDC" build "$T/src" -o "$T/tmpfs/o" --size 64x64 --no-progress
  check "ENOSPC is named" grep -q "No space left on device" "$T/err"
  check "no manifest on the full filesystem" [ ! -e "$T/tmpfs/o/manifest.json" ]
  umount "$T/tmpfs"
else
  echo "  skip tmpfs ENOSPC check (cannot mount tmpfs here)"
fi

# usage errors
expect_exit 2 "unknown option" "$SHARDC" build "$T/src" -o "$T/u" --bogus
expect_exit 2 "bad --size" "$SHARDC" build "$T/src" -o "$T/u" --size 12x
printf "shardc: bad --size '12x' (expected WxH or N, e.g. 224x224 or 224)\nusage: shardc build SRC... -o OUT [options]\n(see --help)\n" >"$T/want"
check "... the refusal (shc_build_set's words), then the usage line" cmp -s "$T/want" "$T/err"
expect_exit 2 "bad --size 0" "$SHARDC" build "$T/src" -o "$T/u" --size 0
expect_exit 2 "--fit without --size" "$SHARDC" build "$T/src" -o "$T/u" --fit pad
expect_exit 2 "missing -o" "$SHARDC" build "$T/src"
expect_exit 2 "missing SRC" "$SHARDC" build "$T/nope" -o "$T/u"
expect_exit 2 "OUT already holds a dataset" "$SHARDC" build "$T/src" -o "$T/o" --no-progress
expect_exit 1 "--force replaces it" "$SHARDC" build "$T/src" -o "$T/o" --force --size 16x16 --no-progress
check "the replaced dataset has the new geometry" grep -q '"width": 16' "$T/o/manifest.json"
mkdir -p "$T/empty/cls"
expect_exit 2 "a source without images" "$SHARDC" build "$T/empty" -o "$T/u"
check "it says no images were found" grep -q "no images found in" "$T/err"
expect_exit 2 "unknown command" "$SHARDC" frobnicate
expect_exit 0 "--help" "$SHARDC" build --help
# the help names every flag of the build's table (compiler/build_options.def; an alias aside)
missing=$(sed -n 's/^SHC_OPT_[A-Z]*("\([^"]*\)".*/\1/p' "$ROOT/compiler/build_options.def" |
  grep -vxF "$(sed -n 's/^SHC_OPT_ALIAS("\([^"]*\)".*/\1/p' "$ROOT/compiler/build_options.def")" |
  while read -r f; do grep -qE -- "--$f([^a-z-]|\$)" "$T/out" || echo "--$f"; done)
check "build --help names every flag of the table${missing:+ (not: $missing)}" [ -z "$missing" ]
check "... the table has its rows" [ "$(grep -c '^SHC_OPT_' "$ROOT/compiler/build_options.def")" -ge 40 ]
expect_exit 2 "info on a directory without a manifest" "$SHARDC" info "$T/src"
echo '{"format": "shardc", "manifest_version": 1' > "$T/l/manifest.json"
expect_exit 1 "info on a garbage manifest" "$SHARDC" info "$T/l"
check "the message says what is wrong" grep -q "not valid JSON" "$T/err"
finish
