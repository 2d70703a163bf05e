#!/usr/bin/env bash
# End to end: a class folder whose name is not valid UTF-8 builds a dataset that every tool
# opens, with the name byte for byte; shardc merge takes OUT's lock as build does, so a second
# merge (or a merge during a build) is refused clearly and never half-writes OUT.
. "$(dirname "$0")/lib.sh"
command -v flock >/dev/null || { echo "flock(1) not found"; exit 77; }

# ---- class names are bytes ----
"$MKSAMPLE" "$T/s" --classes 3 --per-class 2 --no-broken --quiet || { echo "mksample failed"; exit 1; }
mv "$T/s/square" "$T/s/b$(printf '\xff')"
expect_exit 0 "build with a class folder that is not UTF-8" "$SHARDC" build "$T/s" -o "$T/o" --size 32x32 --no-progress
check "the summary says 3 classes" grep -q "(3 classes)" "$T/err"
expect_exit 0 "shardc info opens it" "$SHARDC" info "$T/o"
expect_exit 0 "shardc verify opens it" "$SHARDC" verify "$T/o"
python3 - "$T/o" "$SHARDC" <<'PY' && ok "the manifest holds the name's bytes (surrogateescape), as info --json does" || bad "class name bytes"
import json, os, subprocess, sys
d = sys.argv[1]
names = [os.fsencode(c) for c in json.load(open(os.path.join(d, "manifest.json")))["classes"]]
assert names == [b"b\xff", b"circle", b"stripes"], names
info = json.loads(subprocess.run([sys.argv[2], "info", "--json", d], capture_output=True,
                                 check=True).stdout)
assert [os.fsencode(c) for c in info["classes"]] == names, info["classes"]
PY

# ---- merge is locked like build ----
"$MKSAMPLE" "$T/src" --classes 3 --per-class 6 --no-broken --seed 3 --quiet
out=$T/parts
for i in 0 1 2; do
  "$SHARDC" build "$T/src" -o "$out" --part $i/3 --size 24x24 --shard-samples 4 --no-progress >/dev/null 2>&1
done
# a writer holds OUT's lock (as a running build or merge does)
flock "$out/.shardc.lock" sleep 3 &
holder=$!
sleep 0.5
"$SHARDC" merge "$out" >"$T/out" 2>"$T/err"
rc=$?
check "merge while another writer holds OUT is refused (exit $rc)" [ $rc -ne 0 ]
check "it says another merge or build holds OUT" grep -q "is being written by another shardc merge or build" "$T/err"
check "no misleading write error" bash -c "! grep -q 'cannot write' '$T/err'"
check "nothing written" test ! -e "$out/manifest.json"
wait $holder
expect_exit 0 "merge once the lock is free" "$SHARDC" merge "$out"
# concurrent merges: each one either merges or is refused as busy, never a write error
fails=0
for trial in 1 2 3 4 5 6 7 8 9 10; do
  "$SHARDC" merge "$out" >/dev/null 2>"$T/e1" & a=$!
  "$SHARDC" merge "$out" >/dev/null 2>"$T/e2" & b=$!
  wait $a; ra=$?; wait $b; rb=$?
  for k in 1 2; do
    r=$ra; [ $k = 2 ] && r=$rb
    if [ $r -ne 0 ] && ! grep -q "being written by another shardc merge or build" "$T/e$k"; then
      fails=$((fails+1)); sed 's/^/       /' "$T/e$k"
    fi
  done
done
check "10 pairs of concurrent merges: every loser says why ($fails unexplained)" [ $fails -eq 0 ]
expect_exit 0 "the merged dataset verifies" "$SHARDC" verify "$out"
finish
