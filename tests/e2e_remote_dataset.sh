#!/usr/bin/env bash
# End to end: shardread.Dataset of a dataset at a URL read on demand through a bounded cache
# (docs/REMOTE.md "Random access: Dataset"), against nginx on 127.0.0.1 (started and stopped
# here). Asserted: with cache_limit half the dataset, the open leaves no shard in the cache and
# every index, in a shuffled order, equals the local Dataset's item (pixels and labels; targets
# of varying sizes; pair records with fields), as do sample(i), targets and fields(), while the
# cache folder (sampled by a thread) never exceeds the limit and shards are evicted; a byte
# changed in one shard of the served copy fails the items of that shard naming the object (and
# no other); a limit below the largest shard is refused naming the minimum; three processes
# reading one cache at once each get the local items, the folder within the limit; a Loader's fields= at
# a URL with cache_limit reads through such a Dataset: its batches equal the local ones, fields
# included, with the folder within the limit.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"
CHK="$ROOT/tests/remote_cache_check.py"
need_tools "$NGINX" || { finish; exit; }

# one size: 48 samples in 12 shards of 4
serve_ds 16 4 || { finish; exit; }
# varying sizes with COCO boxes: 24 samples in 6 shards of 4
"$MKSAMPLE" "$T/img" --coco "$T/inst.json" --per-class 24 --min-side 24 --max-side 64 --seed 5 \
  --quiet || { bad "shardc-mksample failed"; finish; exit; }
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/www/det" --shard-samples 4 --no-progress \
  >/dev/null || { bad "shardc build (detection) failed"; finish; exit; }
# pair records (targets and fields) of varying sizes: 36 samples in 12 shards of 3
write_pairs "$T/www/pair" 36 || bad "the pair-record dataset could not be written"
HP=$($PY "$HELP" port)
start_nginx "$HP" || { finish; exit; }

# ---- every index, shuffled, through a cache of half the dataset ----
n=0
for d in ds det pair; do
  n=$((n + 1))
  expect_exit 0 "$d: every index of Dataset(url, cache_limit=half) equals the local item" \
    $PY "$CHK" dataset "$T/www/$d" "http://127.0.0.1:$HP/$d" "$T/c$n" "$(half "$T/www/$d")" $n
  # (the limit and the evictions are checked by the command; what evicted shards cost:)
  check "... shards evicted were fetched again when an item asked for them" bash -c '
    got=$(grep -Ec "\"GET /'"$d"'/shard-[0-9]+\.raw HTTP/[0-9.]+\" 200 " "$1")
    [ "$got" -gt "$(ls "$2"/shard-*.raw | wc -l)" ]' _ "$T/ngx/access.log" "$T/www/$d"
done

# ---- three processes at once on one cache of half the dataset ----
L=$(half "$T/www/det")
ps=()
for k in 1 2 3; do
  $PY "$CHK" dataset "$T/www/det" "http://127.0.0.1:$HP/det" "$T/cs" "$L" $((k + 10)) shared \
    >"$T/s$k.out" 2>&1 &
  ps+=($!)
done
k=0
for p in "${ps[@]}"; do
  k=$((k + 1))
  wait "$p"
  check "process $k of 3 sharing one cache: every item equals the local one, within the limit" \
    test $? -eq 0
  [ -n "${VERBOSE:-}" ] && cat "$T/s$k.out"
done

# ---- a Loader's fields= reads through such a Dataset, within the Loader's limit ----
for kw in '{"order": "random", "seed": 2, "batch_size": 2, "threads": 1, "targets": true, "size": 32, "pad": true, "fields": true}' \
          '{"order": "sequential", "batch_size": 3, "threads": 1, "targets": true, "size": 32, "pad": true, "fields": ["name"]}'; do
  n=$((n + 1))
  expect_exit 0 "Loader(url, fields=, cache_limit=half): $kw: the local batches, fields too" \
    $PY "$CHK" equal "$T/www/pair" "http://127.0.0.1:$HP/pair" "$T/c$n" "$(half "$T/www/pair")" "$kw"
  check "... within the limit, shards evicted" grep -Eq "evicted=[1-9]" "$T/out"
done

# ---- a changed byte in the served copy is never delivered ----
cp -r "$T/www/ds" "$T/www/bad"
$PY -c '
import sys, shardread
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
px = shardread.Dataset(sys.argv[2])[12][0].tobytes()    # the shard'"'"'s first sample
at = b.find(px)
assert at > 0 and b.find(px, at + 1) < 0
b[at + 5] ^= 1
open(p, "wb").write(b)
' "$T/www/bad/shard-00003.raw" "$T/www/ds"
$PY - "http://127.0.0.1:$HP/bad" "$T/c9" "$(half "$T/www/ds")" >"$T/bad.out" 2>&1 <<'EOF'
import sys, shardread
ds = shardread.Dataset(sys.argv[1], cache=sys.argv[2], cache_limit=int(sys.argv[3]))
for i in (12, 15):                   # shard 3
    try:
        ds[i]
        print("delivered", i)
    except shardread.Error as e:
        print(type(e).__name__, e)
print("other", ds[11][1], ds[16][1])
EOF
check "an item of a shard with a changed byte raises, naming the object" \
  grep -q "^CorruptError .*bad/shard-00003.raw: the object fails its check against the manifest" "$T/bad.out"
check "... every item of it (never delivered), and the other shards read" bash -c "
  [ \$(grep -c 'shard-00003.raw: the object fails' '$T/bad.out') = 2 ] && ! grep -q delivered '$T/bad.out' &&
  grep -q '^other ' '$T/bad.out'"
check "... and nothing of it is in the cache" bash -c "! ls -a '$T'/c9/*/ | grep -q 'shard-00003.raw$'"

# ---- a limit below the largest shard ----
big=$(stat -c %s "$T"/www/det/shard-*.raw | sort -n | tail -1)
py_open_report "$T/small.out" \
  'shardread.Dataset(sys.argv[1], cache=sys.argv[2], cache_limit=int(sys.argv[3]))' \
  "http://127.0.0.1:$HP/det" "$T/c10" $((big - 1))
check "a limit below the largest shard is refused naming the minimum ($big bytes)" \
  grep -q "cache_limit $((big - 1)) bytes is below the $big bytes this Dataset needs at once" "$T/small.out"
[ -n "${VERBOSE:-}" ] && cat "$T/bad.out" "$T/small.out"
finish
