#!/usr/bin/env bash
# End to end: a dataset at a URL read as its shards arrive, through a bounded cache
# (docs/REMOTE.md "Prefetch and the bounded cache"), against nginx on 127.0.0.1 (started and
# stopped here). Asserted: with cache_limit smaller than the dataset, a Loader epoch equals the
# local one (pixels, labels, indices, order) for sequential, random and quasi orders and two
# ranks, while the cache folder (sampled by a thread, and the cache's own count) never exceeds
# the limit and shards are evicted; a limit below what the reader needs at once is refused
# naming the minimum; resume mid-epoch against the URL equals the local epoch; what a kill -9
# leaves (a partial download, a reservation, locks) is repaired by the next open; a reader whose
# worker waits for room that never comes is closed without waiting for it; two bounded processes
# sharing one cache both read their epochs exactly; a shard that stays
# unavailable (404) fails the epoch naming the object, or with on_error='skip' is skipped and
# counted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"
CHK="$ROOT/tests/remote_cache_check.py"
need_tools "$NGINX" || { finish; exit; }

# the dataset: 96 samples in 12 shards of 8
serve_ds 32 8 || { finish; exit; }
shard=$(stat -c %s "$T/www/ds/shard-00000.raw")
HP=$($PY "$HELP" port)
start_nginx "$HP" || { finish; exit; }
URL=http://127.0.0.1:$HP/ds
LIMIT=$((6 * shard))     # half the dataset

# ---- each order within the limit, equal to the local epoch ----
n=0
for kw in '{"order": "sequential", "batch_size": 8, "threads": 2}' \
          '{"order": "random", "seed": 5, "batch_size": 4, "threads": 1}' \
          '{"order": "quasi", "seed": 3, "quasi_window": 2, "batch_size": 8, "threads": 1}' \
          '{"order": "random", "seed": 9, "batch_size": 4, "threads": 1, "rank": 1, "world": 2}'; do
  n=$((n + 1))
  expect_exit 0 "$kw: an epoch through a cache of 6 of 12 shards equals the local one" \
    $PY "$CHK" equal "$T/www/ds" "$URL" "$T/c$n" "$LIMIT" "$kw"
  check "... within the limit, shards evicted" grep -Eq "evicted=[1-9]" "$T/out"
done

# ---- a mixture's streams at URLs share the limit ----
"$SHARDC" build "$T/src" -o "$T/www/ds2" --size 16x12 --shard-samples 5 --no-progress >/dev/null ||
  bad "shardc build ds2 failed"
URL2=http://127.0.0.1:$HP/ds2
MLIMIT=$(( $(cat "$T"/www/ds/shard-*.raw "$T"/www/ds2/shard-*.raw | wc -c) / 2 ))
LOCALS="[[\"$T/www/ds\", 0.5], [\"$T/www/ds2\", 0.3], [\"$T/www/ds\", 0.2]]"
URLS="[[\"$URL\", 0.5], [\"$URL2\", 0.3], [\"$T/www/ds\", 0.2]]"
n=20
for kw in '{"order": "random", "seed": 7, "batch_size": 2, "threads": 2}' \
          '{"order": "sequential", "batch_size": 8, "threads": 1}'; do
  n=$((n + 1))
  expect_exit 0 "$kw: a mixture of two datasets at URLs and a local one, through a cache of half the two, equals the local mixture" \
    $PY "$CHK" mixture "$LOCALS" "$URLS" "$T/c$n" "$MLIMIT" "$kw"
  check "... within the limit, shards evicted" grep -Eq "evicted=[1-9]" "$T/out"
done
expect_exit 0 "a limit below what the mixture's streams need at once is refused" \
  $PY - "$URL" "$URL2" "$T/c29" $((2 * shard)) <<'EOF'
import sys, shardread
try:
    shardread.Loader([(sys.argv[1], 1), (sys.argv[2], 1)], cache=sys.argv[3],
                     cache_limit=int(sys.argv[4]), batch_size=8, threads=2)
except ValueError as e:
    print(e)
    sys.exit(0 if "needs at once: for each of its 2 streams at URLs" in str(e) else 1)
sys.exit(1)
EOF

# ---- a limit below what the reader needs at once ----
expect_exit 0 "a limit of 2 shards for 2 threads of batches of 8 is refused" \
  $PY "$CHK" refuse "$URL" "$T/c9" $((2 * shard)) '{"batch_size": 8, "threads": 2}'
check "naming the minimum" grep -q "cache_limit $((2 * shard)) bytes is below the $((6 * shard)) bytes" "$T/out"
expect_exit 0 "cache_limit='1KiB' is parsed and refused the same way" \
  $PY "$CHK" refuse "$URL" "$T/c9" 1KiB '{"batch_size": 8}'
check "naming 1024 bytes" grep -q "cache_limit 1024 bytes is below" "$T/out"

# ---- resume mid-epoch against the URL ----
# the first process leaves the cache full; the second reopens it bounded
expect_exit 0 "5 batches and state_dict in one process, then a new Loader on the URL in another: the local epoch" \
  timeout 120 $PY "$CHK" resume "$T/www/ds" "$URL" "$T/c10" "$LIMIT" \
  '{"order": "random", "seed": 2, "batch_size": 4, "threads": 1}' 5

# ---- a reader waiting for room that never comes is replaced ----
expect_exit 0 "a reader whose worker waits for room other readers keep: load_state_dict replaces it, the epoch equals the local one" \
  timeout 120 $PY "$CHK" starved "$T/www/ds" "$URL" "$T/c14" "$LIMIT"

# ---- what kill -9 leaves ----
export SHARDREAD_CACHE="$T/c11"
$PY - "$URL" $((3 * shard)) <<'EOF' >/dev/null 2>&1 &
import sys, shardread
for _ in shardread.Loader(sys.argv[1], batch_size=1, threads=1, prefetch_shards=1,
                          cache_limit=int(sys.argv[2])):
    pass
EOF
kp=$!
# killed once its cache folder is there (a loaded machine may take longer to get that far)
for _ in $(seq 100); do ls -d "$T"/c11/*/ >/dev/null 2>&1 && break; sleep 0.1; done
sleep 0.3
kill -9 $kp 2>/dev/null; wait $kp 2>/dev/null
d=$(ls -d "$T"/c11/*/ | head -1)
[ -n "$d" ] || { bad "the killed reader made no cache folder"; finish; exit; }
head -c 100 "$T/www/ds/shard-00004.raw" >"$d/.shard-00004.raw.part"   # a download cut by the kill
: >"$d/.shard-00005.raw.part"                                          # a reservation
head -c 100 "$T/www/ds/shard-00006.raw" >"$d/shard-00006.raw"          # (never renamed short)
# a manifest that was arriving (the kill came early), of a process that no longer runs
dead=$($PY -c 'import os
p = 4000000
while True:
    try: os.kill(p, 0)
    except ProcessLookupError: break
    except PermissionError: pass
    p -= 1
print(p)')
head -c 50 "$T/www/ds/manifest.json" >"$d/.manifest.json.$dead.part"
expect_exit 0 "after a kill -9 the next bounded epoch equals the local one" \
  $PY "$CHK" equal "$T/www/ds" "$URL" "$T/c11" "$LIMIT" '{"batch_size": 8, "threads": 1}'
check "no partial download is left (nor the dead process's manifest)" bash -c "! ls -a '$d' | grep -q '\.part$'"

# ---- two processes sharing one cache, reading as the shards arrive ----
# bounded at 6 shards, below the 8 the two need at once (4 shards a batch each): a reader that
# would wait for room the other keeps lets its shards go and waits holding none
kw='{"order": "random", "seed": 4, "batch_size": 4, "threads": 1}'
timeout 120 $PY "$CHK" equal "$T/www/ds" "$URL" "$T/c12" "$LIMIT" "$kw" >"$T/p1" 2>&1 & p1=$!
timeout 120 $PY "$CHK" equal "$T/www/ds" "$URL" "$T/c12" "$LIMIT" "$kw" >"$T/p2" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
check "two bounded processes on one cache both read the local epoch, within the limit" \
  test $r1 -eq 0 -a $r2 -eq 0
[ $r1 -eq 0 -a $r2 -eq 0 ] || cat "$T/p1" "$T/p2" >&2

# ---- a shard that stays unavailable ----
cp -r "$T/www/ds" "$T/www/gone"
rm "$T/www/gone/shard-00002.raw"
$PY - "http://127.0.0.1:$HP/gone" "$T/c13" >"$T/gone.out" 2>&1 <<'EOF'
import sys, shardread
try:
    for _ in shardread.Loader(sys.argv[1], cache=sys.argv[2], batch_size=8):
        pass
    print("no error")
except shardread.Error as e:
    print(type(e).__name__, e)
n, skipped = 0, 0
for x, y, rec in shardread.Loader(sys.argv[1], cache=sys.argv[2], batch_size=8, on_error="skip",
                                  return_recovery=True):
    n += len(y)
    skipped += len(rec)
print("read", n, "skipped", skipped)
EOF
check "by default the epoch raises, naming the object and the 404" \
  grep -q "gone/shard-00002.raw.*HTTP 404" "$T/gone.out"
check "on_error='skip': its 8 samples are skipped and counted, the other 88 read" \
  grep -q "read 88 skipped 8" "$T/gone.out"
[ -n "${VERBOSE:-}" ] && cat "$T/gone.out"
finish
