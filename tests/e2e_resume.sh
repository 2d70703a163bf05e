#!/usr/bin/env bash
# End to end: a build killed at exact points (SIGKILL) and resumed gives the same bytes as an
# uninterrupted build; a killed build never leaves a manifest naming a missing or partial shard.
. "$(dirname "$0")/lib.sh"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 12 --seed 11 --quiet || { echo "mksample failed"; exit 1; }
opts=(--size 40x30 --shard-samples 7 --no-progress -j2)
"$SHARDC" build "$T/src" -o "$T/ref" "${opts[@]}" >/dev/null 2>&1
check "reference build finished with rejects (exit 1)" [ $? -eq 1 ]
n=$(json_get "$T/ref/manifest.json" samples)

same_as_ref() {
  local d=$1 f
  for f in "$T/ref"/*; do cmp -s "$f" "$d/$(basename "$f")" || { echo "    differs: $(basename "$f")"; return 1; }; done
  [ "$(ls "$d" | wc -l)" -eq "$(ls "$T/ref" | wc -l)" ]
}

for k in 1 6 7 8 13 20 $((n - 1)) $n; do
  d="$T/crash$k"
  crash "$k" "$SHARDC" build "$T/src" -o "$d" "${opts[@]}"
  rc=$?
  check "killed after sample $k (exit $rc)" [ $rc -eq 137 ]
  check "no manifest after the kill at $k" [ ! -e "$d/manifest.json" ]
  # every shard with a final name is complete
  python3 - "$d" <<'PY' || bad "a finished shard is incomplete after kill at $k"
import os, struct, sys
d = sys.argv[1]
for f in os.listdir(d):
    if f.endswith(".raw"):
        b = open(os.path.join(d, f), "rb").read()
        assert b[:8] == b"SHARDRAW" and struct.unpack_from("<Q", b, 56)[0] == len(b), f
PY
  "$SHARDC" build "$T/src" -o "$d" "${opts[@]}" --resume >/dev/null 2>"$T/err"
  check "resume after the kill at $k finishes (exit $?)" [ -e "$d/manifest.json" ]
  check "resume after the kill at $k gives the uninterrupted bytes" same_as_ref "$d"
done
check "a resume reused finished shards" grep -q "kept" "$T/err"

# a damaged finished shard is rebuilt, not kept
d="$T/crash20"
rm "$d/manifest.json"
printf 'Z' | dd of="$d/shard-00001.raw" bs=1 seek=5000 conv=notrunc status=none
"$SHARDC" build "$T/src" -o "$d" "${opts[@]}" --resume >/dev/null 2>"$T/err"
check "resume names the damaged shard" grep -q "shard-00001.raw: not reusable" "$T/err"
check "resume over a damaged shard gives the uninterrupted bytes" same_as_ref "$d"

# resuming a finished build does nothing and keeps its exit status
expect_exit 1 "resume of a complete build" "$SHARDC" build "$T/src" -o "$T/ref" "${opts[@]}" --resume
check "it says there is nothing to do" grep -q "nothing to do" "$T/err"

# resume with other options does not reuse shards of a different build
crash 10 "$SHARDC" build "$T/src" -o "$T/other" "${opts[@]}"
"$SHARDC" build "$T/src" -o "$T/other" --size 40x30 --shard-samples 5 --no-progress --resume >/dev/null 2>"$T/err"
check "shards of other options are not reused" grep -q "not reusable" "$T/err"
"$SHARDC" build "$T/src" -o "$T/fresh5" --size 40x30 --shard-samples 5 --no-progress >/dev/null 2>&1
same=1; for f in "$T/fresh5"/*; do cmp -s "$f" "$T/other/$(basename "$f")" || same=0; done
check "and the result equals a fresh build with the new options" [ $same -eq 1 ]
finish
