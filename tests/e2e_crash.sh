#!/usr/bin/env bash
# End to end: crash safety (PRODUCT.md 3.4). A build is killed with SIGKILL at crash points (see
# the top of compiler/build.c: each sample written, before and after each shard's finish, before
# rejects.tsv, inputs.tsv and manifest.json, after the manifest's rename), drawn with a fixed seed
# but always including every shard boundary and the manifest's write. After each kill: no
# manifest unless every shard it names exists and verifies, and no partial file under a final
# shard name; then --resume gives the bytes of an uninterrupted build, every file of OUT. Raw,
# hdf5, lmdb and png0. A full disk while writing hdf5, lmdb or png0 ends with exit 3, a message
# naming the shard and the reason, no manifest, and a dataset that --resume completes.
. "$(dirname "$0")/lib.sh"

# The points drawn depend on this seed only: every run kills at the same points. CRASH_SEED=n
# explores other draws.
SEED=${CRASH_SEED:-20240611}

"$MKSAMPLE" "$T/src" --classes 3 --per-class 12 --seed 11 --quiet || { echo "mksample failed"; exit 1; }

# kill_at K COMMAND...: run a build with SHARDC_CRASH_AT=K; the status is the command's (137 after
# SIGKILL), without the shell's "Killed" notice
kill_at() {
  local k=$1; shift
  { SHARDC_CRASH_AT=$k "$@" >/dev/null 2>&1 & wait $!; } 2>/dev/null
}

# after_kill DIR SUFFIX: prints the number of shards under their final names; fails (with a
# line saying why) if a raw one is incomplete (magic, file_size field == real size) or if a
# manifest names a shard that is not there
after_kill() {
  python3 - "$1" "$2" <<'PY'
import json, os, re, struct, sys
d, suffix = sys.argv[1], sys.argv[2]
final = [f for f in os.listdir(d) if re.fullmatch(r"shard-\d{5}" + re.escape(suffix), f)]
for f in final:
    if suffix == ".raw":
        b = open(os.path.join(d, f), "rb").read()
        if len(b) < 256 or b[:8] != b"SHARDRAW" or struct.unpack_from("<Q", b, 56)[0] != len(b):
            sys.exit("partial file under a final name: " + f)
if os.path.exists(os.path.join(d, "manifest.json")):
    m = json.load(open(os.path.join(d, "manifest.json")))
    gone = [s["file"] for s in m["shards"] if not os.path.exists(os.path.join(d, s["file"]))]
    if gone:
        sys.exit("the manifest names missing shards: " + " ".join(gone))
print(len(final))
PY
}

# trials FORMAT SUFFIX NFIXED NSAMPLES: a reference build that lists its crash points, then kills
# at NFIXED of the points that are not samples (all of them if NFIXED is 0; the two around the
# manifest always) and at NSAMPLES sample points, drawn with SEED, each followed by --resume
trials() {
  local f=$1 suffix=$2 nfixed=$3 nsamples=$4
  local opts=(--format "$f" --size 40x30 --shard-samples 7 --no-progress)
  local ref="$T/ref-$f" pts="$T/points-$f"
  SHARDC_CRASH_POINTS=2 "$SHARDC" build "$T/src" -o "$ref" "${opts[@]}" -j2 >/dev/null 2>"$pts"
  local rc=$?
  check "$f: reference build finishes with rejects (exit $rc)" [ $rc -eq 1 ]
  local total nshards
  total=$(sed -n 's/^shardc: crash points: //p' "$pts")
  nshards=$(grep -c "after finishing" "$pts")
  check "$f: $total crash points = samples + 2 x $nshards shards + 4" \
    [ "$total" -eq $(($(json_get "$ref/manifest.json" samples) + 2 * nshards + 4)) ]
  local points
  points=$(python3 - "$pts" "$SEED" "$nfixed" "$nsamples" <<'PY'
import random, re, sys
path, seed, nfixed, nsamples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
pts = [re.match(r"shardc: crash point (\d+): (.*)", l) for l in open(path)]
pts = [(int(m.group(1)), m.group(2)) for m in pts if m]
fixed = [k for k, what in pts if not what.startswith("sample")]
samples = [k for k, what in pts if what.startswith("sample")]
rng = random.Random(seed)
chosen = set(fixed[-2:])
chosen |= set(fixed if nfixed == 0 else rng.sample(fixed[:-2], min(nfixed, len(fixed) - 2)))
chosen |= set(rng.sample(samples, min(nsamples, len(samples))))
print(" ".join(str(k) for k in sorted(chosen)))
PY
)
  local n=0 k what d nfinal why
  for k in $points; do
    n=$((n+1))
    what=$(sed -n "s/^shardc: crash point $k: //p" "$pts")
    d="$T/$f-$k"
    why=
    kill_at "$k" "$SHARDC" build "$T/src" -o "$d" "${opts[@]}" -j2
    rc=$?
    [ $rc -eq 137 ] || why="the build was not killed (exit $rc)"
    if [ -z "$why" ]; then
      nfinal=$(after_kill "$d" "$suffix" 2>&1) || why=$nfinal
    fi
    if [ -z "$why" ]; then
      if [ "$k" -eq "$total" ]; then
        [ -e "$d/manifest.json" ] || why="no manifest after its rename"
        [ -n "$why" ] || "$SHARDC" verify "$d" >/dev/null 2>&1 || why="the manifest's dataset does not verify"
      elif [ -e "$d/manifest.json" ]; then
        why="a manifest exists before the build wrote it"
      fi
    fi
    if [ -z "$why" ]; then
      # resume with another thread count: the bytes must not depend on it
      "$SHARDC" build "$T/src" -o "$d" "${opts[@]}" -j1 --resume >/dev/null 2>"$T/err"
      rc=$?
      if [ $rc -ne 1 ]; then why="--resume exited $rc, expected 1 (rejects)"
      elif [ "$k" -eq "$total" ] && ! grep -q "already complete.*nothing to do" "$T/err"; then
        why="--resume did not recognise the complete dataset"
      elif grep -q "not reusable" "$T/err"; then
        why="--resume rejected a shard under a final name: $(grep "not reusable" "$T/err")"
      elif [ "$k" -ne "$total" ] && [ "$nfinal" -gt 0 ] && ! grep -q "kept $nfinal finished shard" "$T/err"; then
        why="--resume did not keep the $nfinal finished shard(s)"
      elif ! diff -r -q "$ref" "$d" >"$T/diff" 2>&1; then
        why="output differs from the uninterrupted build: $(head -3 "$T/diff" | tr '\n' ' ')"
      fi
    fi
    if [ -z "$why" ]; then ok "$f: killed at point $k/$total ($what), resumed: same bytes"
    else bad "$f: killed at point $k/$total ($what): $why"; fi
    rm -rf "$d"
  done
  echo "  $f: $n crash trials"
}

trials raw .raw 0 14
trials hdf5 .h5 4 4
trials lmdb .lmdb 4 4
trials png0 .idx 2 3

# SHARDC_CRASH_AFTER (kill after the N-th sample) still counts samples only
d="$T/after"
crash 8 "$SHARDC" build "$T/src" -o "$d" --size 40x30 --shard-samples 7 --no-progress -j2
check "SHARDC_CRASH_AFTER=8 kills the build (exit $?)" [ $? -eq 137 ]
check "after the 8th sample: shard 0 finished, shard 1 not" [ -e "$d/shard-00000.raw" ] && [ ! -e "$d/shard-00001.raw" ] && [ -e "$d/shard-00001.raw.tmp" ]

# a full disk (file size limit) for the other backends: exit 3, the shard and the reason named,
# no manifest, no temporary left; then, with room again, --resume completes the same dataset
for f in hdf5 lmdb png0; do
  case $f in hdf5) sfx=.h5 ;; lmdb) sfx=.lmdb ;; png0) sfx=.idx ;; esac
  opts=(--format "$f" --size 64x64 --shard-samples 10 --no-progress)
  "$SHARDC" build "$T/src" -o "$T/full-ref-$f" "${opts[@]}" >/dev/null 2>&1
  ( trap '' XFSZ; ulimit -f 8; exec "$SHARDC" build "$T/src" -o "$T/full-$f" "${opts[@]}" ) >"$T/out" 2>"$T/err"
  rc=$?
  check "$f: a full disk ends with exit 3 (got $rc)" [ $rc -eq 3 ]
  check "$f: the message names the shard and the reason" grep -q "cannot write .*/full-$f/shard-00000$sfx: File too large" "$T/err"
  grep -q "cannot write .*shard-" "$T/err" || sed 's/^/       /' "$T/err" | grep -v "cannot decode" | head -5
  check "$f: no manifest after a failed write" [ ! -e "$T/full-$f/manifest.json" ]
  check "$f: no temporary left after a failed write" [ -z "$(ls "$T/full-$f" | grep tmp)" ]
  "$SHARDC" build "$T/src" -o "$T/full-$f" "${opts[@]}" --resume >/dev/null 2>&1
  check "$f: --resume with room again gives the full dataset" diff -r -q "$T/full-ref-$f" "$T/full-$f"
done

# a really full filesystem, where we may mount one
if mkdir -p "$T/tmpfs" && mount -t tmpfs -o size=128k tmpfs "$T/tmpfs" 2>/dev/null; then
  for f in hdf5 lmdb png0; do
    expect_exit 3 "$f: ENOSPC on a small tmpfs" "$SHARDC" build "$T/src" -o "$T/tmpfs/$f" --format "$f" --size 64x64 --no-progress
    check "$f: ENOSPC is named with the shard" grep -q "cannot write .*/tmpfs/$f/shard-0000.*: No space left on device" "$T/err"
    check "$f: no manifest on the full filesystem" [ ! -e "$T/tmpfs/$f/manifest.json" ]
    rm -rf "${T:?}/tmpfs/$f"
  done
  umount "$T/tmpfs"
else
  echo "  skip tmpfs ENOSPC checks (cannot mount tmpfs here)"
fi
finish
