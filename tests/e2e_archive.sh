#!/usr/bin/env bash
# End to end: archives as inputs (docs/CLI.md "Archives as inputs"). A tar, tar.gz, zip, tar of class
# tars, WebDataset shards and a list file naming members each give, sample for sample and label
# for label, the dataset of the extracted tree (or of the same list over the files), whatever
# order the members were written in and however small the read-ahead buffer; --part and merge,
# --resume after a crash and --dry-run agree too. Damaged input: a truncated tar and tar.gz, a
# member that is not an image, hostile names in a zip (../, absolute), a link; each a listed
# rejection naming ARCHIVE!MEMBER or a clear error, never a crash or a hang. List lines are
# bounded, and a --list that is no regular file (/dev/zero) is refused before it is read.
. "$(dirname "$0")/lib.sh"

PY=${SHARDC_PYTHON:-python3}
"$MKSAMPLE" "$T/src" --classes 3 --per-class 8 --seed 5 --list "$T/src.list" --quiet ||
  { echo "mksample failed"; exit 1; }
OPTS=(--size 40x30 --no-progress -j3)
# limit a runaway (a hang is a failure, not a stuck test)
run() { timeout 120 "$SHARDC" "$@"; }

# same DIR_A DIR_B WHAT [DROP]: the two datasets hold the same samples (pixels, via shardc cat),
# the same labels and rejects per input position (B's rejects less the lines matching DROP)
same() {
  local a=$1 b=$2 what=$3 drop=${4:-^\$} n m i
  n=$(json_get "$a/manifest.json" samples 2>/dev/null)
  m=$(json_get "$b/manifest.json" samples 2>/dev/null)
  if [ -z "$n" ] || [ "$n" != "$m" ] || [ "$n" -eq 0 ]; then
    bad "$what: samples ${n:-none} vs ${m:-none}"; return
  fi
  for ((i = 0; i < n; i++)); do
    if ! cmp -s <("$SHARDC" cat "$a" "$i") <("$SHARDC" cat "$b" "$i"); then
      bad "$what: sample $i differs"; return
    fi
  done
  if ! cmp -s <(cut -f1,2 "$a/inputs.tsv") <(cut -f1,2 "$b/inputs.tsv"); then
    bad "$what: labels differ (inputs.tsv)"; return
  fi
  if ! cmp -s <(cut -f2 "$a/rejects.tsv") <(grep -Ev "$drop" "$b/rejects.tsv" | cut -f2); then
    bad "$what: rejects differ"; return
  fi
  ok "$what: $n samples, labels and rejects equal"
}

run build "$T/src" -o "$T/ref" "${OPTS[@]}" >/dev/null 2>&1
check "reference build from the folder (exit 1: mksample's broken files)" [ $? -eq 1 ]

# archives written by Python, members in REVERSE path order (so the build must reorder them)
"$PY" - "$T" <<'PY' || { echo "making archives failed"; exit 1; }
import io, os, sys, tarfile, zipfile
T = sys.argv[1]
src = os.path.join(T, "src")
files = []
for root, dirs, names in os.walk(src):
    for n in names:
        full = os.path.join(root, n)
        files.append(os.path.relpath(full, src))
files.sort(reverse=True)
def tar(path, mode, names, base=src, arc=lambda n: n):
    with tarfile.open(path, mode) as t:
        for n in names:
            t.add(os.path.join(base, n), arcname=arc(n), recursive=False)
tar(os.path.join(T, "a.tar"), "w", files, arc=lambda n: "./" + n)
tar(os.path.join(T, "a.tar.gz"), "w:gz", files)
with zipfile.ZipFile(os.path.join(T, "a.zip"), "w", zipfile.ZIP_DEFLATED) as z:
    for n in files:
        z.write(os.path.join(src, n), n)
    z.writestr("../evil.jpg", open(os.path.join(src, files[0]), "rb").read())
    z.writestr("/abs/evil.jpg", open(os.path.join(src, files[0]), "rb").read())
    z.writestr("circle/../../up.jpg", b"x")
# tar of class tars (ImageNet's layout)
inner = {}
for n in files:
    cls, rest = n.split("/", 1)
    inner.setdefault(cls, []).append(rest)
with tarfile.open(os.path.join(T, "tars.tar"), "w") as outer:
    for cls in sorted(inner, reverse=True):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for rest in inner[cls]:
                t.add(os.path.join(src, cls, rest), arcname=rest, recursive=False)
        ti = tarfile.TarInfo(cls + ".tar")
        ti.size = buf.tell()
        buf.seek(0)
        outer.addfile(ti, buf)
import shutil, gzip
with open(os.path.join(T, "tars.tar"), "rb") as f, gzip.open(os.path.join(T, "tars.tar.gz"), "wb") as g:
    shutil.copyfileobj(f, g)
# a symlink member and a duplicate path (the later one counts, as extraction keeps it)
with tarfile.open(os.path.join(T, "links.tar"), "w") as t:
    for n in sorted(files):
        t.add(os.path.join(src, n), arcname=n, recursive=False)
    li = tarfile.TarInfo("circle/zz-link.jpg")
    li.type = tarfile.SYMTYPE
    li.linkname = "/etc/passwd"
    t.addfile(li)
# WebDataset: key.EXT + key.cls + key.json, in list order, in two shards
lines = [l.split() for l in open(os.path.join(T, "src.list"))]
half = len(lines) // 2
for k, part in enumerate((lines[:half], lines[half:])):
    with tarfile.open(os.path.join(T, "wds-%d.tar" % k), "w") as t:
        for i, (path, label) in enumerate(part):
            key = "d%d/s%05d" % (k, i)
            ext = path.rsplit(".", 1)[1]
            t.add(os.path.join(src, path), arcname=key + "." + ext, recursive=False)
            for name, data in ((key + ".cls", label + "\n"),
                               (key + ".json", '{"label": %s, "w": 1}' % label)):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data.encode()))
# a list naming members of a.tar, in the order of src.list
with open(os.path.join(T, "members.list"), "w") as f:
    for path, label in lines:
        f.write("a.tar!%s %s\n" % (path, label))
PY

for a in a.tar a.tar.gz a.zip tars.tar tars.tar.gz; do
  run build "$T/$a" -o "$T/o-$a" "${OPTS[@]}" >"$T/out" 2>"$T/err"
  rc=$?
  check "$a: build exits 1 (the broken files rejected), no crash (exit $rc)" [ $rc -eq 1 ]
  same "$T/ref" "$T/o-$a" "$a == extracted tree" "unsafe member name"
done
check "tar: sources recorded as ARCHIVE!MEMBER" grep -q "	$T/a.tar!circle/00000" "$T/o-a.tar/inputs.tsv"
check "tar of tars: sources name the inner tar" grep -q "tars.tar!circle.tar!00000" "$T/o-tars.tar/inputs.tsv"
check "tar: the non-image member is a reject naming it" \
  grep -q "a.tar!square/broken-text-not-image.jpg	not a JPEG" "$T/o-a.tar/rejects.tsv"

# -j1 and a read-ahead buffer too small for one member: several walks, the same dataset
run build "$T/a.tar.gz" -o "$T/o-small" --size 40x30 --no-progress -j1 --archive-buffer 1KiB \
  >/dev/null 2>&1
same "$T/ref" "$T/o-small" "tar.gz, -j1, --archive-buffer 1KiB"

# zip: hostile names are listed rejections, no class of their own, nothing written outside OUT
check "zip: ../evil.jpg refused as unsafe" grep -q "a.zip!../evil.jpg	unsafe member name" "$T/o-a.zip/rejects.tsv"
check "zip: /abs/evil.jpg refused as unsafe" grep -q "a.zip!/abs/evil.jpg	unsafe member name" "$T/o-a.zip/rejects.tsv"
check "zip: circle/../../up.jpg refused as unsafe" grep -q "up.jpg	unsafe member name" "$T/o-a.zip/rejects.tsv"
check "zip: no file written outside OUT" bash -c "[ ! -e '$T/evil.jpg' ] && [ ! -e /abs/evil.jpg ] && [ ! -e '$T/up.jpg' ]"
classes() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["classes"])' "$1/manifest.json"; }
check "zip: the classes are the tree's ($(classes "$T/ref"))" [ "$(classes "$T/o-a.zip")" = "$(classes "$T/ref")" ]

# UTF-8 member names (the zip UTF-8 flag, as Python's zipfile, Java and 7-Zip write it) in the C
# locale: each keeps its class and its WebDataset sample; a name longer than 4096 bytes is a
# reject naming the member, in both modes
"$PY" - "$T" <<'PY'
import os, sys, zipfile
T = sys.argv[1]
img = open(os.path.join(T, "src", "circle", "00000.jpg"), "rb").read()
long = "l/" + "x" * 5000 + ".jpg"
with zipfile.ZipFile(os.path.join(T, "u.zip"), "w") as z:
    for n in ("caf\u00e9/1.jpg", "b/1.jpg", "\u65e5\u672c/2.jpg", long):
        z.writestr(n, img)
with zipfile.ZipFile(os.path.join(T, "uw.zip"), "w") as z:
    for key, label in (("\u00fc/s0", "0"), ("b/s1", "1"), ("\u00fc/\u00e9 s2", "2")):
        z.writestr(key + ".jpg", img)
        z.writestr(key + ".cls", label + "\n")
    z.writestr(long, img)
PY
LC_ALL=C run build "$T/u.zip" -o "$T/o-u" "${OPTS[@]}" >/dev/null 2>"$T/err"
check "UTF-8 zip names, C locale: exit 1 (the long name rejected) (exit $?)" [ $? -eq 1 ]
check "  ... every class kept: b, café, 日本" \
  [ "$(cut -f2,3 "$T/o-u/inputs.tsv" | sed 1d | sed "s|$T/||")" = "$(printf '0\tu.zip!b/1.jpg\n1\tu.zip!café/1.jpg\n2\tu.zip!日本/2.jpg')" ]
check "  ... the long name is a reject saying so" \
  grep -q "u.zip!(member 3: l/xxxx.*member name longer than 4096 bytes" "$T/o-u/rejects.tsv"
LC_ALL=C run build "$T/uw.zip" --wds -o "$T/o-uw" "${OPTS[@]}" >/dev/null 2>"$T/err"
check "UTF-8 zip names, --wds, C locale: exit 1 (exit $?)" [ $? -eq 1 ]
check "  ... every sample kept" \
  [ "$(cut -f2,3 "$T/o-uw/inputs.tsv" | sed 1d | sed "s|$T/||")" = "$(printf '0\tuw.zip!ü/s0.jpg\n1\tuw.zip!b/s1.jpg\n2\tuw.zip!ü/é s2.jpg')" ]
check "  ... the long name is a reject saying so" \
  grep -q "uw.zip!(member 6: l/xxxx.*member name longer than 4096 bytes" "$T/o-uw/rejects.tsv"

# a symlink member is a listed rejection, never followed
run build "$T/links.tar" -o "$T/o-links" "${OPTS[@]}" >/dev/null 2>&1
check "links: the symlink member is a reject (a link, not followed)" \
  grep -q "links.tar!circle/zz-link.jpg	a link" "$T/o-links/rejects.tsv"

# WebDataset shards vs the same list over the files (label from .cls, then from .json)
run build "$T/src" --list "$T/src.list" -o "$T/ref-list" "${OPTS[@]}" >/dev/null 2>&1
run build "$T/wds-0.tar" "$T/wds-1.tar" --wds -o "$T/o-wds" "${OPTS[@]}" >/dev/null 2>"$T/err"
check "wds: build exits 0 (exit $?)" [ $? -eq 0 ]
same "$T/ref-list" "$T/o-wds" "--wds (.cls) == --list over the files"
run build "$T/wds-0.tar" "$T/wds-1.tar" --wds --wds-label json:label -o "$T/o-wdsj" "${OPTS[@]}" \
  >/dev/null 2>&1
same "$T/ref-list" "$T/o-wdsj" "--wds --wds-label json:label"
expect_exit 2 "--wds over a folder is a usage error" run build "$T/src" --wds -o "$T/o-x" "${OPTS[@]}"
check "  ... naming it" grep -q "not a WebDataset shard" "$T/err"

# a list file naming archive members
run build "$T" --list "$T/members.list" -o "$T/o-members" "${OPTS[@]}" >/dev/null 2>&1
same "$T/ref-list" "$T/o-members" "--list of a.tar!MEMBER lines"
printf 'a.tar!nope/x.jpg 0\n' >"$T/missing.list"
expect_exit 2 "a list naming a missing member is refused" run build "$T" --list "$T/missing.list" -o "$T/o-y" "${OPTS[@]}"
check "  ... naming the line and the member" grep -q "missing.list:1: no member nope/x.jpg" "$T/err"

# --part and merge
for p in 0 1; do
  run build "$T/tars.tar" -o "$T/o-parts" --part $p/2 "${OPTS[@]}" >/dev/null 2>&1
done
run merge "$T/o-parts" >/dev/null 2>&1
same "$T/ref" "$T/o-parts" "tar of tars, --part 0/2 + 1/2, merged"

# --resume after a crash
crash 5 "$SHARDC" build "$T/a.tar.gz" -o "$T/o-crash" "${OPTS[@]}" --shard-samples 4
check "crash: the build was killed (exit $?)" [ ! -e "$T/o-crash/manifest.json" ]
run build "$T/a.tar.gz" -o "$T/o-crash" --resume "${OPTS[@]}" --shard-samples 4 >/dev/null 2>"$T/err"
check "crash: --resume kept finished shards" grep -q "resuming: kept" "$T/err"
same "$T/ref" "$T/o-crash" "tar.gz, crashed after 5 samples, resumed"

# --dry-run counts
run build "$T/src" --dry-run --json "${OPTS[@]}" >"$T/dry-ref" 2>/dev/null
run build "$T/a.zip" --dry-run --json "${OPTS[@]}" >"$T/dry-zip" 2>/dev/null
counts() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["classes"], d["samples"], d["unreadable"], d["input_bytes"], d["shard_bytes"])' "$1"; }
check "dry run: tar counts == folder counts ($(counts "$T/dry-ref"))" \
  [ "$(counts "$T/dry-ref")" = "$(counts "$T/dry-zip")" ]

# damaged archives: truncated in a member's data, a tar.gz cut short, garbage
"$PY" - "$T" <<'PY'
import os, sys
T = sys.argv[1]
b = open(os.path.join(T, "a.tar"), "rb").read()
open(os.path.join(T, "cut.tar"), "wb").write(b[:len(b) // 2 + 100])
g = open(os.path.join(T, "a.tar.gz"), "rb").read()
open(os.path.join(T, "cut.tar.gz"), "wb").write(g[:len(g) // 2])
open(os.path.join(T, "junk.tar"), "wb").write(os.urandom(5000))
PY
for a in cut.tar cut.tar.gz; do
  run build "$T/$a" -o "$T/o-$a" "${OPTS[@]}" >/dev/null 2>"$T/err"
  rc=$?
  check "$a: finishes with rejects, no crash or hang (exit $rc)" [ $rc -eq 1 ]
  check "$a: a reject names the archive and the damage" \
    grep -Eq "$a(!|	).*(runcated|damaged)" "$T/o-$a/rejects.tsv"
done
expect_exit 2 "junk.tar (not an archive) is refused" run build "$T/junk.tar" -o "$T/o-junk" "${OPTS[@]}"
check "  ... naming it" grep -q "junk.tar" "$T/err"

# list lines are bounded: a newline-free stream is an error naming the file and line
expect_exit 2 "--list /dev/zero is refused" run build "$T/src" --list /dev/zero -o "$T/o-z" "${OPTS[@]}"
check "  ... by its type, before reading it" grep -q "list file /dev/zero: not a regular file (a character device)" "$T/err"
head -c 300000 /dev/zero | tr '\0' 'a' >"$T/long.list"
expect_exit 2 "a 300 KB line is refused" run build "$T/src" --list "$T/long.list" -o "$T/o-l" "${OPTS[@]}"
check "  ... as too long" grep -q "long.list:1: line longer than 65536 bytes" "$T/err"

finish
