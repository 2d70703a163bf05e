#!/usr/bin/env bash
# End to end: a large object fetched as several ranges at once (docs/REMOTE.md, "Several ranges
# of one object"), against nginx on 127.0.0.1 behind the logging and fault-injecting proxies of
# tests/remote_servers.py (started and stopped here). Asserted: with fewer objects than
# connections the shards are fetched as bounded ranges, and what arrives equals the shards byte
# for byte (shardc verify, a cached file against the served one, a Loader epoch against the local
# one); the same through 20% 503s and cut bodies, and a cut range resumed within its bounds;
# a download abandoned while its ranges are under way (another shard fails its check) leaves a
# partial file that is a prefix of the object, which the next open resumes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"
need_tools "$NGINX" || { finish; exit; }

# the dataset: 180 samples of 128x128 RGB (48 KiB each): shard 0 of 150 (7.0 MiB), shard 1 of 30
mkdir -p "$T/www"
"$MKSAMPLE" "$T/src" --classes 2 --per-class 90 --min-side 60 --max-side 140 --no-broken --quiet
"$SHARDC" build "$T/src" -o "$T/www/ds" --size 128x128 --shard-samples 150 --no-progress \
  >/dev/null || { bad "shardc build failed"; finish; exit; }
HP=$($PY "$HELP" port)
start_nginx "$HP" || { finish; exit; }
LP=$($PY "$HELP" port); FP=$($PY "$HELP" port); TP=$($PY "$HELP" port); CP=$($PY "$HELP" port)
$PY "$HELP" faultproxy "$LP" "127.0.0.1:$HP" 1 0 "$T/log.clean" & pids+=($!)
$PY "$HELP" faultproxy "$FP" "127.0.0.1:$HP" 5 0.2 "$T/log.faults" & pids+=($!)
$PY "$HELP" throttle "$TP" "127.0.0.1:$HP" 4000000 "$T/log.slow" & pids+=($!)
$PY "$HELP" cutranges "$CP" "127.0.0.1:$HP" "$T/log.cut" & pids+=($!)
$PY "$HELP" wait "$LP" && $PY "$HELP" wait "$FP" && $PY "$HELP" wait "$TP" && $PY "$HELP" wait "$CP" ||
  { bad "the proxies did not start"; finish; exit; }

# verify_via WHAT PORT CACHE: shardc verify of the dataset through the proxy on PORT into the
# cache folder CACHE passes, and the cached shards equal the served ones byte for byte
verify_via() {
  expect_exit 0 "shardc verify $1" env SHARDREAD_CACHE="$3" "$SHARDC" verify "http://127.0.0.1:$2/ds"
  check "... all 180 samples" grep -q "all 180 samples in 2 shard(s) verified" "$T/err"
  local cached k
  cached=$(ls -d "$3"/*/)
  for k in 0 1; do
    check "... the cached shard $k equals the served one" \
      cmp -s "$cached/shard-0000$k.raw" "$T/www/ds/shard-0000$k.raw"
  done
}

# ---- two shards, eight connections: the shards arrive as ranges ----
verify_via "of the URL" "$LP" "$T/c1"
ranges=$(grep -Ec '^206 /ds/shard-00000.raw bytes=[0-9]+-' "$T/log.clean")
check "shard 0 came as at least 4 transfers, 3 of them ranges (it has $ranges ranges)" test "$ranges" -ge 3
check "one of them bounded at both ends" grep -Eq '^206 /ds/shard-00000.raw bytes=[0-9]+-[0-9]+$' "$T/log.clean" 
expect_exit 0 "a shuffled Loader epoch of the URL equals the local one" \
  $PY "$HELP" epoch "$T/www/ds" "http://127.0.0.1:$LP/ds" "$T/c2" '{"batch_size": 16, "shuffle": true, "seed": 3}'

# ---- the same through 503s and bodies cut off ----
verify_via "through 20% 503s and 20% cut bodies" "$FP" "$T/c3"
expect_exit 0 "a Loader epoch through the faults equals the local one" \
  $PY "$HELP" epoch "$T/www/ds" "http://127.0.0.1:$FP/ds" "$T/c4" '{"batch_size": 16, "shuffle": true, "seed": 8}'
# (which requests the seeded faults hit depends on the order the transfers take; the proxy of
# cutranges cuts the first answer to every bounded range, whatever the order)
verify_via "when the first answer to every bounded range is cut halfway" "$CP" "$T/c6"
check "a bounded range was cut off" grep -Eq '^cut /ds/shard-0000[01].raw bytes=[0-9]+-[0-9]+$' "$T/log.cut"
check "and its rest asked for within the same bound" \
  $PY - "$T/log.cut" <<'EOF'
import re, sys
asked = [tuple(map(int, m.groups())) for m in
         (re.match(r"^\S+ /ds/shard-00000.raw bytes=(\d+)-(\d+)$", l) for l in open(sys.argv[1]))
         if m]
# a range asked again from a later start with the same end: a cut body resumed in its bounds
sys.exit(0 if any(a[1] == b[1] and b[0] > a[0] for a in asked for b in asked) else 1)
EOF

# ---- abandoned while its ranges are under way: a prefix is left ----
# shard 1 (small) arrives first through a 4 MB/s link and fails its check, which ends the fetch
# while shard 0's ranges are still arriving
cp -r "$T/www/ds" "$T/www/bad"
size1=$(stat -c %s "$T/www/bad/shard-00001.raw")
# a pixel of its last sample, made another value
b=$(od -An -tu1 -j $((size1 - 100)) -N1 "$T/www/bad/shard-00001.raw" | tr -d ' ')
printf "\\$(printf %03o $(( (b + 1) % 256 )))" |
  dd of="$T/www/bad/shard-00001.raw" bs=1 seek=$((size1 - 100)) conv=notrunc status=none
cmp -s "$T/www/bad/shard-00001.raw" "$T/www/ds/shard-00001.raw" && bad "the byte was not changed" 
# (the link is shared unevenly: when shard 0's first range has had nothing yet, its prefix is
# empty, which shows nothing; then again, up to 3 times)
for try in 1 2 3; do
  export SHARDREAD_CACHE="$T/c5.$try"
  expect_exit 1 "verify of a dataset whose shard 1 was changed fails" \
    "$SHARDC" verify "http://127.0.0.1:$TP/bad"
  check "naming the object" grep -q "shard-00001.raw: the object fails its check" "$T/err"
  part=$(ls "$T"/c5.$try/*/.shard-00000.raw.part 2>/dev/null)
  psize=$(stat -c %s "$part" 2>/dev/null || echo 0)
  [ "$psize" -gt 0 ] && break
done
check "shard 0's partial file holds some of it ($psize bytes)" test "$psize" -gt 0 -a "$psize" -lt "$(stat -c %s "$T/www/ds/shard-00000.raw")"
check "and is a prefix of the object: no gap where another range had not arrived" \
  cmp -s -n "$psize" "$part" "$T/www/ds/shard-00000.raw"
cp "$T/www/ds/shard-00001.raw" "$T/www/bad/shard-00001.raw"
expect_exit 0 "once the shard is mended, the next verify resumes the partial file and passes" \
  "$SHARDC" verify "http://127.0.0.1:$TP/bad"
check "shard 0 resumed from the partial file's end" \
  grep -q "^206 /bad/shard-00000.raw bytes=$psize-" "$T/log.slow"
finish
