#!/usr/bin/env bash
# End to end: a damaged compressed archive never gives a dataset with an altered sample. Each
# compressed tar (gzip, zstd, xz, bzip2, lz4) with one bit flipped in the checksum at the end of
# its stream (every member still decodes, tar's header checks pass) is refused: exit 2, no
# manifest, the message names the archive and says its data is damaged. A zip whose member
# no longer matches its CRC-32 gives a reject for that member only. Then a seeded loop of
# damaged variants (a bit flipped anywhere in the compressed bytes): a build either publishes
# a dataset equal, sample for sample, to the intact archive's, or publishes nothing and names
# the archive; and every variant the format's own tool finds damaged is refused.
. "$(dirname "$0")/lib.sh"

PY=${SHARDC_PYTHON:-python3}
for tool in zstd lz4; do
  command -v "$tool" >/dev/null || { bad "no $tool (scripts/deps.sh installs it)"; finish; exit; }
done
"$MKSAMPLE" "$T/src" --classes 2 --per-class 4 --seed 7 --no-broken --quiet ||
  { echo "mksample failed"; exit 1; }
OPTS=(--size 24x16 --no-progress -j2)
run() { timeout 60 "$SHARDC" "$@"; }

# same_samples A B: the two datasets hold the same samples (pixels) and labels
same_samples() {
  local a=$1 b=$2 n m i
  n=$(json_get "$a/manifest.json" samples 2>/dev/null)
  m=$(json_get "$b/manifest.json" samples 2>/dev/null)
  [ -n "$n" ] && [ "$n" = "$m" ] || return 1
  for ((i = 0; i < n; i++)); do
    cmp -s <("$SHARDC" cat "$a" "$i") <("$SHARDC" cat "$b" "$i") || return 1
  done
  cmp -s <(cut -f1 "$a/inputs.tsv") <(cut -f1 "$b/inputs.tsv")
}

run build "$T/src" -o "$T/ref" "${OPTS[@]}" >/dev/null 2>&1
check "reference build from the folder (exit $?)" [ -e "$T/ref/manifest.json" ]

# the tar (sorted, padded to tar's 10 KiB records as GNU tar and tarfile write it) and its
# compressed forms
(cd "$T/src" && tar cf "$T/a.tar" --sort=name --format=gnu circle square) ||
  { echo "tar failed"; exit 1; }
gzip -9 -c "$T/a.tar" >"$T/a.tar.gz"
zstd -q -c "$T/a.tar" >"$T/a.tar.zst"
xz -c "$T/a.tar" >"$T/a.tar.xz"
bzip2 -c "$T/a.tar" >"$T/a.tar.bz2"
lz4 -q -c "$T/a.tar" >"$T/a.tar.lz4"
EXTS=(gz zst xz bz2 lz4)

# verify EXT FILE: the format's own tool says the stream is intact (status 0) or not
verify() {
  case $1 in
    gz) gzip -t "$2" ;;
    zst) zstd -q -t "$2" ;;
    xz) xz -t "$2" ;;
    bz2) bzip2 -t "$2" ;;
    lz4) lz4 -q -t "$2" ;;
  esac >/dev/null 2>&1
}

for e in "${EXTS[@]}"; do
  run build "$T/a.tar.$e" -o "$T/o-$e" "${OPTS[@]}" >/dev/null 2>"$T/err"
  check "tar.$e intact: exit 0 (exit $?)" [ -e "$T/o-$e/manifest.json" ]
  same_samples "$T/ref" "$T/o-$e"
  check "tar.$e intact: the folder's samples and labels" [ $? -eq 0 ]
done

# flip BYTE_FROM_END MASK SRC DST: DST is SRC with one byte changed, counted from its end
flip() {
  "$PY" -c 'import sys
b = bytearray(open(sys.argv[3], "rb").read()); b[len(b) - int(sys.argv[1])] ^= int(sys.argv[2])
open(sys.argv[4], "wb").write(b)' "$@"
}
# where each stream keeps its check at the end: gzip's CRC-32 (8 bytes from the end), zstd's
# and lz4's content checksum (the last 4 bytes), xz's stream footer CRC (12 from the end),
# bzip2's combined CRC (the 32 bits before the last byte's padding)
declare -A AT=([gz]=8 [zst]=1 [xz]=12 [bz2]=2 [lz4]=1)
for e in "${EXTS[@]}"; do
  d="$T/crc/a.tar.$e"
  mkdir -p "$T/crc"
  flip "${AT[$e]}" 16 "$T/a.tar.$e" "$d"
  verify "$e" "$d"
  check "tar.$e check flipped: the $e tool finds it damaged" [ $? -ne 0 ]
  run build "$d" -o "$T/oc-$e" "${OPTS[@]}" >/dev/null 2>"$T/err"
  rc=$?
  check "tar.$e check flipped: refused, exit 2 (exit $rc)" [ $rc -eq 2 ]
  check "tar.$e check flipped: no manifest" [ ! -e "$T/oc-$e/manifest.json" ]
  check "tar.$e check flipped: the message names the archive and the damage" \
    grep -q "cannot read $d: .*damaged.*no member of it can be trusted" "$T/err"
done

# a zip whose member's bytes no longer match its CRC-32 (stored, so the member still decodes)
"$PY" - "$T" <<'PY' || { echo "making the zip failed"; exit 1; }
import os, sys, zipfile
T = sys.argv[1]
src = os.path.join(T, "src")
names = sorted(os.path.relpath(os.path.join(r, n), src) for r, _, ns in os.walk(src) for n in ns)
with zipfile.ZipFile(os.path.join(T, "a.zip"), "w", zipfile.ZIP_STORED) as z:
    for n in names:
        z.write(os.path.join(src, n), n)
b = bytearray(open(os.path.join(T, "a.zip"), "rb").read())
with zipfile.ZipFile(os.path.join(T, "a.zip")) as z:
    i = z.getinfo("circle/00000.jpg")
    at = i.header_offset + 30 + len(i.filename.encode()) + len(i.extra) + i.file_size - 20
b[at] ^= 0x04    # a byte of the JPEG's last scan line: it still decodes, to other pixels
open(os.path.join(T, "crc.zip"), "wb").write(b)
PY
run build "$T/crc.zip" -o "$T/o-zip" "${OPTS[@]}" >/dev/null 2>"$T/err"
rc=$?
check "zip with a bad member CRC: exit 1, the member rejected (exit $rc)" [ $rc -eq 1 ]
check "zip: the reject names the member and its CRC" \
  grep -q "crc.zip!circle/00000.jpg	.*CRC" "$T/o-zip/rejects.tsv"
check "zip: the other samples are stored" [ "$(json_get "$T/o-zip/manifest.json" samples)" -eq 7 ]

# seeded damage: 8 variants per filter, one bit flipped anywhere in the compressed bytes
"$PY" - "$T" <<'PY' || { echo "making variants failed"; exit 1; }
import os, random, sys
T = sys.argv[1]
rng = random.Random(38)
for e in ("gz", "zst", "xz", "bz2", "lz4"):
    b = open(os.path.join(T, "a.tar." + e), "rb").read()
    for k in range(8):
        d = bytearray(b)
        i = rng.randrange(len(d))
        d[i] ^= 1 << rng.randrange(8)
        os.makedirs(os.path.join(T, "v%s%d" % (e, k)))
        open(os.path.join(T, "v%s%d" % (e, k), "a.tar." + e), "wb").write(d)
PY
stored=0 refused=0 altered=0 unnamed=0 missed=0
for e in "${EXTS[@]}"; do
  for k in 0 1 2 3 4 5 6 7; do
    d="$T/v$e$k/a.tar.$e"
    verify "$e" "$d"
    damaged=$?
    run build "$d" -o "$T/v$e$k/o" "${OPTS[@]}" >/dev/null 2>"$T/err"
    rc=$?
    if [ -e "$T/v$e$k/o/manifest.json" ]; then
      stored=$((stored + 1))
      same_samples "$T/ref" "$T/v$e$k/o" || { altered=$((altered + 1)); echo "  altered: $d (exit $rc)"; }
      [ $damaged -eq 0 ] || { missed=$((missed + 1)); echo "  published though damaged: $d"; }
    else
      refused=$((refused + 1))
      grep -q "$d" "$T/err" || { unnamed=$((unnamed + 1)); echo "  not named: $d (exit $rc)"; }
    fi
  done
done
check "seeded damage: $stored published, $refused refused; none with an altered sample" [ $altered -eq 0 ]
check "seeded damage: every damaged stream refused" [ $missed -eq 0 ]
check "seeded damage: every refusal names the archive" [ $unnamed -eq 0 ]
check "seeded damage: most variants are damaged (refused: $refused of 40)" [ $refused -ge 20 ]

finish
